"""SIGKILL at random moments: `memctl consolidate` and `memctl import` are killed again and
again, each time on a fresh copy of one database. After every kill the database passes
integrity_check and holds exactly the state before the command or after it, never a part of
it; and the export folder holds only whole files, which a following `memctl export` completes
without leaving temporary files behind.

How the processes start: `python -m memctl` spends its first ~3 s importing (the anthropic SDK
alone takes 2 s on a small machine), during which nothing touches the database, so kills
timed over a cold run mostly land in imports, and 50 of them take minutes. So each command
runs in a child forked from a process that has done those imports and nothing else (no
thread, no open database): the child calls the same `memctl.app.main()` as `python -m memctl`
and the `memctl` script, with the same arguments, and is SIGKILLed at a random moment of its
whole run. MEMSTORE_CRASH_COLD=1 starts every command as `python -m memctl` instead (slow).
MEMSTORE_CRASH_SEED=N replays the delays of a run (each test prints its seed);
MEMSTORE_CRASH_KILLS=N changes the number of kills (default 50).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import pytest

from memstore.files.exporter import export_memories
from memstore.files.format import INDEX_FILE_NAME, parse_memory_text
from memstore.storage.store import MemoryStore
from tests.anthropic_server import AnthropicServer, text_reply

KILLS = int(os.environ.get("MEMSTORE_CRASH_KILLS") or 50)
COLD = os.environ.get("MEMSTORE_CRASH_COLD") == "1"
# Kills are spread over this multiple of a full run, so that some land after its end too.
SPREAD = 1.2
DB_NAME = "memstore.db"
TYPES = ("user", "feedback", "project", "reference")

# Imports what the commands would import, then forks one child per request. Protocol, one
# line each: {"argv", "log"} in, the child's pid out; "kill" or "wait" in, [exit code, seconds
# from fork to exit] out. The zygote kills only children it has not reaped yet, so the pid
# cannot belong to another process.
ZYGOTE = r"""
import json, os, signal, sys, threading, time, traceback

for module in sys.argv[1:]:
    __import__(module)
from memctl.app import main

assert threading.active_count() == 1, threading.enumerate()  # forking is safe
print("ready", flush=True)
while line := sys.stdin.readline():
    request = json.loads(line)
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            os.dup2(log, 1)
            os.dup2(log, 2)
            sys.argv = ["memctl", *request["argv"]]
            main()
            code = 0
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else 0 if exit.code is None else 1
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(log)
    print(pid, flush=True)
    if sys.stdin.readline().strip() == "kill":
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    seconds = time.perf_counter() - started
    print(json.dumps([os.waitstatus_to_exitcode(status), seconds]), flush=True)
"""


class Launcher(Protocol):
    def run(self, argv: list[str], log: Path, kill_after: float | None) -> tuple[int, float]:
        """Run `memctl ARGV` (output to `log`), SIGKILLed `kill_after` seconds after it
        started unless None; its exit code (-9 when killed) and how long it ran."""
        ...

    def close(self) -> None: ...


class Zygote:
    def __init__(self, cwd: Path, env: dict[str, str], preload: list[str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE, *preload],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._receive() == "ready", "the zygote did not start"

    def _send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def _receive(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, f"the zygote died (exit {self.process.poll()})"
        return line.strip()

    def run(self, argv: list[str], log: Path, kill_after: float | None) -> tuple[int, float]:
        self._send(json.dumps({"argv": argv, "log": str(log)}))
        int(self._receive())  # the child's pid: it runs from here
        if kill_after is not None:
            time.sleep(kill_after)
        self._send("wait" if kill_after is None else "kill")
        code, seconds = json.loads(self._receive())
        return code, seconds

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class ColdStart:
    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.cwd, self.env = cwd, env

    def run(self, argv: list[str], log: Path, kill_after: float | None) -> tuple[int, float]:
        with open(log, "wb") as output:
            process = subprocess.Popen(
                [sys.executable, "-m", "memctl", *argv],
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        started = time.perf_counter()
        if kill_after is not None:
            time.sleep(kill_after)
            process.kill()  # sends nothing once the process has exited and been reaped
        code = process.wait(timeout=300)
        return code, time.perf_counter() - started

    def close(self) -> None:
        pass


@pytest.fixture
def start_memctl(tmp_path: Path) -> Iterator[Callable[..., Launcher]]:
    """start(env=..., preload=[modules]) -> a Launcher of real memctl processes."""
    launchers: list[Launcher] = []

    def start(env: dict[str, str] | None = None, preload: tuple[str, ...] = ()) -> Launcher:
        environment = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **(env or {})}
        environment.pop("MEMSTORE_DB", None)
        modules = ["memctl.app", "memstore.files.exporter", *preload]
        launcher: Launcher = (
            ColdStart(tmp_path, environment) if COLD else Zygote(tmp_path, environment, modules)
        )
        launchers.append(launcher)
        return launcher

    yield start
    for launcher in launchers:
        launcher.close()


@dataclass(frozen=True)
class DatabaseState:
    # Live memories: name -> (type, description, body, extra).
    memories: dict[str, tuple[Any, ...]]
    # (actor, number of events) of every run.
    runs: list[tuple[str, int]]
    rows: dict[str, int]


def integrity_problems(connection: sqlite3.Connection) -> list[str]:
    problems = [row[0] for row in connection.execute("PRAGMA integrity_check")]
    if problems == ["ok"]:
        problems = []
    problems += [repr(row) for row in connection.execute("PRAGMA foreign_key_check")]
    try:
        connection.execute("INSERT INTO memory_fts (memory_fts) VALUES ('integrity-check')")
    except sqlite3.DatabaseError as error:
        problems.append(f"memory_fts: {error}")
    stray = connection.execute(
        "SELECT rowid FROM memory_fts EXCEPT SELECT id FROM memory WHERE deleted_at IS NULL "
        "UNION ALL "
        "SELECT id FROM memory WHERE deleted_at IS NULL EXCEPT SELECT rowid FROM memory_fts"
    ).fetchall()
    if stray:
        problems.append(f"memory_fts and the live memories differ: {stray[:5]}")
    return problems


def read_state(connection: sqlite3.Connection) -> DatabaseState:
    memories = {
        name: (type_, description, body, json.loads(extra))
        for name, type_, description, body, extra in connection.execute(
            "SELECT name, type, description, body, extra FROM memory WHERE deleted_at IS NULL"
        )
    }
    runs = sorted(
        connection.execute(
            "SELECT run.actor, count(memory_event.id) FROM run "
            "LEFT JOIN memory_event ON memory_event.run_id = run.id GROUP BY run.id"
        ).fetchall()
    )
    rows = {
        table: connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        for table in ("memory", "memory_event", "run", "exported_file", "memory_fts")
    }
    return DatabaseState(memories, runs, rows)


def checked_state(db: Path) -> DatabaseState:
    with closing(sqlite3.connect(db, isolation_level=None)) as connection:
        problems = integrity_problems(connection)
        assert problems == [], problems
        return read_state(connection)


def difference(state: DatabaseState, reference: DatabaseState) -> str:
    names = {
        name
        for name in state.memories.keys() | reference.memories.keys()
        if state.memories.get(name) != reference.memories.get(name)
    }
    return (
        f"{len(names)} memories differ (e.g. {sorted(names)[:5]}), "
        f"rows {state.rows} vs {reference.rows}, runs {state.runs} vs {reference.runs}"
    )


def folder_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()} if folder.exists() else {}


def closed_database(path: Path, memories: list[tuple[str, str, str, str]]) -> Path:
    """A database holding `memories`, closed: its WAL checkpointed, so one file is all of it."""
    with MemoryStore(path, actor="test") as store, store.transaction() as tx:
        for name, kind, description, body in memories:
            tx.create(name, kind, description, body, {"source": "crash-test"})
    assert not [p.name for p in path.parent.glob(f"{path.name}-*")]  # no -wal, no -shm
    return path


@dataclass
class CrashCase:
    name: str
    template: Path
    # The memctl arguments for a copy of the template at folder/DB_NAME.
    argv: Callable[[Path], list[str]]
    # The states a kill may leave, "before" and "after"; each may have several forms.
    states: dict[str, list[DatabaseState]]
    duration: float  # of a full run
    # More checks of an iteration's folder, given the outcome; returns things worth counting.
    check: Callable[[Path, str], list[str]] | None = None


def reference_runs(
    launcher: Launcher,
    workdir: Path,
    template: Path,
    argv: Callable[[Path], list[str]],
    runs: int = 2,
) -> tuple[DatabaseState, list[Path], float]:
    """Run the command to completion `runs` times, on copies: the state after (the same
    every time), the folders, and the longest run time."""
    states, folders, seconds = [], [], []
    for attempt in range(runs):
        folder = workdir / f"reference-{attempt}"
        folder.mkdir()
        shutil.copyfile(template, folder / DB_NAME)
        code, took = launcher.run(argv(folder), folder / "memctl.log", None)
        assert code == 0, (folder / "memctl.log").read_text()
        states.append(checked_state(folder / DB_NAME))
        folders.append(folder)
        seconds.append(took)
    assert all(state == states[0] for state in states), "a full run is not deterministic"
    return states[0], folders, max(seconds)


def kill_repeatedly(launcher: Launcher, case: CrashCase, workdir: Path) -> Counter[str]:
    """Kill the command KILLS times at random moments, each on a fresh copy of the template,
    and check what every kill left. Returns the tally of outcomes."""
    seed = int(os.environ.get("MEMSTORE_CRASH_SEED") or random.SystemRandom().randrange(2**32))
    print(f"{case.name}: MEMSTORE_CRASH_SEED={seed}; a full run takes {case.duration:.3f}s")
    rng = random.Random(seed)
    tally: Counter[str] = Counter()
    for i in range(KILLS):
        folder = workdir / f"{case.name}-{i:02d}"
        folder.mkdir()
        db = folder / DB_NAME
        shutil.copyfile(case.template, db)
        delay = rng.uniform(0, SPREAD * case.duration)
        code, _ = launcher.run(case.argv(folder), folder / "memctl.log", delay)
        where = f"{case.name} kill {i} at {delay:.3f}s (MEMSTORE_CRASH_SEED={seed}, {folder})"
        assert code in (0, -signal.SIGKILL), f"{where}: exit {code}\n" + (
            folder / "memctl.log"
        ).read_text(errors="replace")
        wal = db.with_name(f"{DB_NAME}-wal")
        wal_bytes = wal.stat().st_size if wal.exists() else 0
        with closing(sqlite3.connect(db, isolation_level=None)) as connection:
            assert integrity_problems(connection) == [], where
            state = read_state(connection)
        outcome = next((label for label, forms in case.states.items() if state in forms), None)
        assert outcome is not None, f"{where}: neither before nor after: " + "; ".join(
            f"vs {label}: {difference(state, forms[0])}" for label, forms in case.states.items()
        )
        assert code != 0 or outcome == "after", f"{where}: finished, but changed nothing"
        tally[outcome] += 1
        tally[f"{outcome}, {'finished' if code == 0 else 'killed'}"] += 1
        if outcome == "before" and wal_bytes:
            tally["before, killed writing the transaction (uncommitted WAL frames)"] += 1
        if case.check is not None:
            tally.update(case.check(folder, outcome))
        shutil.rmtree(folder)
    print(f"{case.name}: {dict(sorted(tally.items()))}")
    # The kills spanned the write: some came before its commit, some after.
    assert tally["before"] and tally["after"], f"{tally} (MEMSTORE_CRASH_SEED={seed})"
    return tally


def test_consolidate_survives_sigkill_at_any_moment(
    tmp_path: Path,
    anthropic_server: AnthropicServer,
    start_memctl: Callable[..., Launcher],
) -> None:
    template = closed_database(
        tmp_path / "template.db",
        [
            (f"{kind}-{i:02d}", kind, f"{kind} note {i}", f"What {kind} note {i} says.\n" * 5)
            for i in range(10)
            for kind in TYPES
        ],
    )
    # Per type: two pairs merged into new memories, one rewritten in place, one dropped.
    merges: list[dict[str, Any]] = []
    drops: list[dict[str, str]] = []
    for kind in TYPES:
        for pair, (a, b) in enumerate([(0, 1), (2, 3)]):
            merges.append(
                {
                    "sources": [f"{kind}-{a:02d}", f"{kind}-{b:02d}"],
                    "name": f"{kind}-merged-{pair}",
                    "type": kind,
                    "description": f"{kind} notes {a} and {b}",
                    "body": f"What {kind} notes {a} and {b} said, together.",
                }
            )
        merges.append(
            {
                "sources": [f"{kind}-04"],
                "name": f"{kind}-04",
                "type": kind,
                "description": f"{kind} note 4, rewritten",
                "body": "Shorter now.",
            }
        )
        drops.append({"name": f"{kind}-05", "reason": "outdated"})
    # One reply per run, with room to spare: a kill before the request leaves its reply.
    anthropic_server.script(
        *[text_reply(json.dumps({"merge": merges, "drop": drops}))] * (KILLS + 10)
    )
    launcher = start_memctl(
        env={"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": anthropic_server.url},
        preload=("memstore.learning.consolidate", "memstore.llm.client", "anthropic"),
    )

    def argv(folder: Path) -> list[str]:
        export_dir = str(folder / ".memory")
        return ["--db", str(folder / DB_NAME), "consolidate", "--yes", "--export-dir", export_dir]

    before = checked_state(template)
    after, folders, duration = reference_runs(launcher, tmp_path, template, argv)
    assert len(after.memories) == 40 - 16 + 8 - 4
    assert after.runs == sorted([("test", 40), ("consolidation", 8 + 4 + 16 + 4)])
    # What an export writes in each state: a full run's own export, and a fresh one.
    exported = {"after": folder_files(folders[0] / ".memory")}
    assert exported["after"] == folder_files(folders[1] / ".memory")
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    shutil.copyfile(template, fresh / DB_NAME)
    code, _ = launcher.run(
        ["--db", str(fresh / DB_NAME), "export", str(fresh / ".memory")], fresh / "log", None
    )
    assert code == 0
    exported["before"] = folder_files(fresh / ".memory")
    assert len(exported["before"]) == 41 and len(exported["after"]) == 29

    def check_export(folder: Path, outcome: str) -> list[str]:
        """The export folder holds only whole files, as a full run writes them, and never
        runs ahead of the database; `memctl export` then completes it and tidies up."""
        out = folder / ".memory"
        files = folder_files(out)
        notes = []
        temporaries = [name for name in files if name.endswith(".tmp")]
        if temporaries:
            notes.append("export killed mid-write (temporary file left)")
        written = {name: content for name, content in files.items() if name.endswith(".md")}
        assert set(files) == set(written) | set(temporaries), sorted(files)
        if outcome == "before":
            assert not written, "files were exported before the database changed"
        for name, content in written.items():
            if name != INDEX_FILE_NAME:
                parse_memory_text(content.decode())
            assert content == exported["after"][name], f"{name} is not whole"
        if INDEX_FILE_NAME in written:  # written last: every file it lists is there
            assert written == exported["after"]
        elif written:
            notes.append("export killed before the index")
        code, _ = launcher.run(
            ["--db", str(folder / DB_NAME), "export", str(out)], folder / "export.log", None
        )
        assert code == 0, (folder / "export.log").read_text()
        completed = folder_files(out)
        assert not [name for name in completed if name.endswith(".tmp")]
        assert completed == exported[outcome]
        return notes

    # A kill after the commit but before the export recorded its files leaves no record.
    unrecorded = replace(after, rows={**after.rows, "exported_file": 0})
    case = CrashCase(
        "consolidate",
        template,
        argv,
        {"before": [before], "after": [after, unrecorded]},
        duration,
        check_export,
    )
    kill_repeatedly(launcher, case, tmp_path)


def test_import_survives_sigkill_at_any_moment(
    tmp_path: Path, start_memctl: Callable[..., Launcher]
) -> None:
    # The database has memories the folder does not mention, and some it updates.
    template = closed_database(
        tmp_path / "template.db",
        [(f"kept-{i}", "project", f"kept {i}", f"Kept note {i}.") for i in range(10)]
        + [(f"shared-{i}", "user", f"shared {i}", f"Old text {i}.") for i in range(10)],
    )
    source = tmp_path / "to-import"
    source.mkdir()
    names = [f"shared-{i}" for i in range(10)] + [
        f"{TYPES[i % 4]}-imported-{i:04d}" for i in range(1990)
    ]
    for i, name in enumerate(names):
        kind = "user" if name.startswith("shared") else TYPES[i % 4]
        (source / f"{name}.md").write_text(
            f"---\nname: {name}\ndescription: Imported note {i}\ntype: {kind}\n"
            f"origin: crash-test\n---\n\nNew text {i}.\nA second line of note {i}.\n",
            encoding="utf-8",
        )
    launcher = start_memctl(preload=("memstore.files.importer",))

    def argv(folder: Path) -> list[str]:
        return ["--db", str(folder / DB_NAME), "import", str(source)]

    before = checked_state(template)
    after, _, duration = reference_runs(launcher, tmp_path, template, argv)
    assert len(after.memories) == 10 + len(names)
    assert all(after.memories[f"kept-{i}"] == before.memories[f"kept-{i}"] for i in range(10))
    assert after.memories["shared-3"][2] == "New text 3.\nA second line of note 3."
    assert after.runs == sorted([("test", 20), ("import", len(names))])
    case = CrashCase("import", template, argv, {"before": [before], "after": [after]}, duration)
    kill_repeatedly(launcher, case, tmp_path)


def test_export_removes_temporary_files_of_dead_exports_only(
    store: MemoryStore, tmp_path: Path
) -> None:
    store.create("x", "project", "a note", "its body")
    out = tmp_path / "out"
    out.mkdir()
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()  # reaped: no process has this pid now
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead, live = finished.pid, running.pid
        stale = [f".x.md.{dead}.tmp", f".MEMORY.md.{dead}.tmp"]
        kept = [
            f".x.md.{live}.tmp",  # an export still writing
            f".other.md.{os.getpid()}.tmp",  # this process's own
            f".notes.txt.{dead}.tmp",  # not a file export writes
            f"x.md.{dead}.tmp",
            f".x.md.{dead}.tmp.bak",
        ]
        for name in stale + kept:
            (out / name).write_text("half a fi")
        export_memories(store, out)
    finally:
        running.kill()
        running.wait()
    assert sorted(folder_files(out)) == sorted([*kept, "MEMORY.md", "x.md"])
