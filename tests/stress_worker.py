"""One of test_postgres_stress.py's writers, standing in for a machine: OPS mixed operations
on one store through the library, each logged as a JSON line once its outcome is known.

    python stress_worker.py URL PREFIX OPS LOG

Each write is one run whose command is unique ("PREFIX #i KIND"), so the test finds it in
history. Outcomes: "committed"; "refused" (one of memstore's typed errors the op handles:
a name taken, a memory gone, a stale merge); "failed" (StoreUnavailable: the server went
away; the op then asks history whether its run committed, once the server is back, and
logs "committed" or "failed" accordingly); "raw" (any other exception: what the test
counts as a raw driver error surfaced).
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from memstore.errors import MemstoreError, StoreUnavailable
from memstore.learning.consolidate import ConsolidationPlan, Merge, apply_plan
from memstore.learning.proposal import ProposedMemory
from memstore.storage.store import MemoryStore
from memstore.storage.transaction import WriteTransaction
from memstore.storage.undo import undo_run

# Names every writer races for: creating one may find it taken, editing it may find it gone.
SHARED = [f"shared-{k}" for k in range(6)]
KINDS = ("add", "add", "edit", "edit", "rm", "restore", "search", "merge", "undo")
WORDS = ("postgres", "writer", "lock", "history", "restart", "merge", "search")
# How long an op in doubt waits for the server to come back before it is logged as failed.
RESOLVE_WAIT_S = 60


class Writer:
    def __init__(self, store: MemoryStore, prefix: str, out: TextIO) -> None:
        self.store = store
        self.prefix = prefix
        self.out = out
        self.rng = random.Random(prefix)
        self.mine: list[str] = []
        self.committed_runs: list[str] = []

    def log(self, **entry: Any) -> None:
        self.out.write(json.dumps(entry) + "\n")
        self.out.flush()

    def name(self) -> str:
        """One of this writer's names, or a shared one."""
        if self.mine and self.rng.random() < 0.7:
            return self.rng.choice(self.mine)
        return self.rng.choice(SHARED)

    def op(self, i: int) -> None:
        kind = self.rng.choice(KINDS)
        command = f"{self.prefix} #{i} {kind}"
        text = f"{command} wrote this about {self.rng.choice(WORDS)}"
        if kind == "search":
            self.read(i, command, lambda: self.store.search(self.rng.choice(WORDS), limit=5))
        elif kind == "add":
            name = f"{self.prefix}-{i}" if self.rng.random() < 0.7 else self.rng.choice(SHARED)
            if name.startswith(self.prefix):
                self.mine.append(name)
            self.write(i, command, lambda tx: tx.create(name, "project", text[:80], text))
        elif kind == "edit":
            name = self.name()
            self.write(i, command, lambda tx: tx.update(tx.get(name), body=text))
        elif kind == "rm":
            name = self.name()
            self.write(i, command, lambda tx: tx.delete(tx.get(name)))
        elif kind == "restore":
            name = self.name()
            self.write(i, command, lambda tx: tx.restore(name))
        elif kind == "merge":
            self.merge(i, command, text)
        else:
            self.undo(i, command)

    def read(self, i: int, command: str, action: Callable[[], object]) -> None:
        try:
            action()
        except MemstoreError as error:
            self.log(i=i, command=command, outcome="failed", error=type(error).__name__)
        except Exception as error:  # the test counts these
            self.log(i=i, command=command, outcome="raw", error=repr(error)[:300])
        else:
            self.log(i=i, command=command, outcome="read")

    def write(self, i: int, command: str, action: Callable[[WriteTransaction], object]) -> None:
        def run() -> str:
            with self.store.transaction(command=command) as tx:
                action(tx)
            return tx.run_id

        self.attempt(i, command, run)

    def merge(self, i: int, command: str, text: str) -> None:
        """Two memories into one through consolidation's own apply_plan (no model: the plan
        is written here), refused when either changed after it was read."""
        names = sorted({self.name(), self.name()})
        try:
            sources = [self.store.find(n) for n in names]
        except MemstoreError as error:  # as any read that meets the restart: logged, counted
            self.log(i=i, command=command, outcome="failed", error=type(error).__name__)
            return
        if any(s is None for s in sources):
            self.log(i=i, command=command, outcome="refused", error="MemoryNotFound")
            return
        plan = ConsolidationPlan(
            merges=[Merge(tuple(names), ProposedMemory(names[0], "project", text[:80], text))],
            versions={s.name: (s.id, s.version) for s in sources if s is not None},
        )
        self.store.command = command

        def run() -> str:
            outcome = apply_plan(self.store, plan)
            assert outcome.run_id is not None
            return outcome.run_id

        self.attempt(i, command, run)

    def undo(self, i: int, command: str) -> None:
        if not self.committed_runs:
            self.log(i=i, command=command, outcome="refused", error="nothing to undo")
            return
        target = self.committed_runs[-1]
        self.store.command = command

        def run() -> str:
            return undo_run(self.store, target).run_id

        self.attempt(i, command, run, undoes=target)

    def attempt(self, i: int, command: str, run: Callable[[], str], undoes: str = "") -> None:
        try:
            run_id = run()
        except StoreUnavailable as error:
            found = self.resolve(command, undoes)
            if found:
                self.committed_runs.append(found)
            outcome = "committed" if found else "failed"
            self.log(i=i, command=command, outcome=outcome, run=found, error=str(error)[:200])
        except MemstoreError as error:
            self.log(i=i, command=command, outcome="refused", error=type(error).__name__)
        except Exception as error:  # the test counts these
            self.log(i=i, command=command, outcome="raw", error=repr(error)[:300])
        else:
            self.committed_runs.append(run_id)
            self.log(i=i, command=command, outcome="committed", run=run_id)

    def resolve(self, command: str, undoes: str) -> str | None:
        """The id of the run `command` committed, or None, once the server answers again."""
        deadline = time.monotonic() + RESOLVE_WAIT_S
        while True:
            try:
                if undoes:
                    undo = self.store.history.undo_of(undoes)
                    return None if undo is None else undo.id
                runs = self.store.history.runs()
            except MemstoreError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
                continue
            for run in runs:
                if run["command"] == command:
                    return str(run["run_id"])
            return None


def main() -> None:
    url, prefix, count, log = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    with MemoryStore(url, actor=prefix) as store, open(log, "w") as out:
        writer = Writer(store, prefix, out)
        for i in range(count):
            writer.op(i)


if __name__ == "__main__":
    main()
