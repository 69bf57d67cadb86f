"""Consolidation: the model merges duplicates and drops what is outdated; we apply its plan
in one transaction, recorded and undoable — or not at all.

The model sees the memories (in bounded batches when the store is large) and answers with a
plan, not with a new list of everything: what to merge into what, and what to drop. What the
plan does not mention stays as it is, so a short or lazy answer cannot lose memories. The
whole plan is validated before anything changes; guards refuse plans that would drop every
memory of a type, a user preference, or a large share of the store, unless confirmed.

One consolidation of a store runs at a time (consolidation_lock): a second one, by another
agent or machine, skips instead of asking the model for a plan the first would make stale.

When it runs: memstore.learning.consolidation_due.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from memstore.errors import (
    ConsolidationRefused,
    ConsolidationSkipped,
    InvalidMemory,
    MemoryAltered,
    ModelUnavailable,
)
from memstore.learning.proposal import ProposedMemory, proposed_memory
from memstore.llm.client import ModelClient, ask_text, small_model_name
from memstore.llm.replies import json_from_reply
from memstore.storage.models import MemoryRecord, utc_now
from memstore.storage.run_lock import run_alone
from memstore.storage.store import MemoryStore
from memstore.storage.validation import REASON_MAX_CHARS, check_reason, refuse_secret_reason
from memstore.text import show_hidden

log = logging.getLogger(__name__)

ACTOR = "consolidation"
MAX_MEMORIES = 30
# A plan that removes more than this share of the store needs confirmation.
MAX_REMOVED_SHARE = 0.5
# One request shows at most this many memories and characters; larger stores go by type,
# in batches.
BATCH_MAX_MEMORIES = 60
BATCH_MAX_CHARS = 60_000
# A longer body is shown shortened, and such a memory may be kept or dropped but not merged
# or rewritten: the model would write its merge from a part of it.
MEMORY_SHOWN_MAX_CHARS = 6_000
# A merged memory may be longer than an extracted one, but is still a note.
MERGED_BODY_MAX_BYTES = 8_192
CONSOLIDATION_MAX_TOKENS = 8_192
CONSOLIDATION_TIMEOUT_S = 120.0

CONSOLIDATION_SYSTEM = """\
You tidy the long-term memory of a coding agent. Merge memories that say the same thing or \
belong together, and drop memories that are outdated or contradicted by newer ones. Keep \
user preferences above all: merge them rather than drop them, and when two disagree keep \
the newer one. Never keep secrets (keys, tokens, passwords).

Reply with one JSON object only:
{"merge": [{"sources": ["name-a", "name-b"], "name": "kebab-case-name", \
"type": "user|feedback|project|reference", "description": "one line", \
"body": "the merged memory"}],
 "drop": [{"name": "name-c", "reason": "why it is no longer true or useful"}]}
A merge may have a single source, to rewrite one memory. Memories you do not mention are kept \
as they are. Reply {"merge": [], "drop": []} when nothing needs to change."""


@dataclass(frozen=True)
class Merge:
    sources: tuple[str, ...]
    result: ProposedMemory


@dataclass(frozen=True)
class Drop:
    name: str
    type: str
    reason: str


@dataclass
class ConsolidationPlan:
    merges: list[Merge] = field(default_factory=list)
    drops: list[Drop] = field(default_factory=list)
    before: int = 0
    # Counts of live memories by type, before and after the plan.
    types_before: dict[str, int] = field(default_factory=dict)
    types_after: dict[str, int] = field(default_factory=dict)
    # The id and version of each memory the plan was made from: applying it checks that
    # each name still means that memory, unchanged.
    versions: dict[str, tuple[int, int]] = field(default_factory=dict)
    # When planning began: the run's start, so changes made meanwhile count as later ones.
    planned_at: str = ""

    @property
    def after(self) -> int:
        return sum(self.types_after.values())

    @property
    def empty(self) -> bool:
        return not self.merges and not self.drops

    def warnings(self) -> list[str]:
        """Why this plan needs the user's confirmation ([] when it does not)."""
        found = []
        for kind, count in self.types_before.items():
            if count and not self.types_after.get(kind):
                found.append(f"it removes every {kind} memory ({count})")
        removed = self.before - self.after
        if self.before and removed / self.before > MAX_REMOVED_SHARE:
            found.append(
                f"it removes {removed} of {self.before} memories "
                f"(more than {MAX_REMOVED_SHARE:.0%})"
            )
        preferences = [drop.name for drop in self.drops if drop.type == "user"]
        if preferences:
            found.append(f"it drops user preferences: {', '.join(preferences)}")
        return found


@dataclass
class Consolidation:
    plan: ConsolidationPlan
    applied: bool = False
    run_id: str | None = None
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)


def plan_consolidation(
    *,
    store: MemoryStore,
    client: ModelClient,
    max_memories: int = MAX_MEMORIES,
    model: str | None = None,
) -> ConsolidationPlan:
    """Ask the model for a plan and validate all of it. Raises ConsolidationRefused (nothing
    asked of the store) when the model fails or any part of its answer is invalid."""
    plan = ConsolidationPlan(planned_at=utc_now())
    # A memory changed outside memstore is neither shown to the model nor merged or dropped
    # (a line on stderr names it, storage/unaltered.py).
    memories = store.unaltered_all()
    plan.before = len(memories)
    if not memories:
        return plan
    by_name = {m.name: m for m in memories}
    batches = memory_batches(memories)
    claimed: set[str] = set()  # names used as a source, a drop or a result so far
    for batch in batches:
        # The batch's share of the cap, but never more than halving it in one run: a store
        # far over the cap converges over several runs instead of tripping the guard.
        target = max(
            math.floor(max_memories * len(batch) / len(memories)), math.ceil(len(batch) / 2), 1
        )
        try:
            reply = ask_text(
                client,
                model=model or small_model_name(),
                system=CONSOLIDATION_SYSTEM,
                prompt=consolidation_prompt(batch, target, len(memories), max_memories),
                max_tokens=CONSOLIDATION_MAX_TOKENS,
                timeout=CONSOLIDATION_TIMEOUT_S,
            )
            answer = json_from_reply(reply, dict)
        except (ModelUnavailable, ValueError) as error:
            raise ConsolidationRefused(f"consolidation not applied: {error}") from None
        try:
            _add_answer(plan, answer, {m.name for m in batch}, by_name, claimed)
        except InvalidMemory as error:
            raise ConsolidationRefused(
                f"consolidation not applied: the model's plan is invalid ({error})"
            ) from None
    types_after: dict[str, int] = {}
    for memory in memories:
        plan.types_before[memory.type] = plan.types_before.get(memory.type, 0) + 1
    removed = {name for merge in plan.merges for name in merge.sources} | {
        drop.name for drop in plan.drops
    }
    for memory in memories:
        if memory.name not in removed:
            types_after[memory.type] = types_after.get(memory.type, 0) + 1
    for merge in plan.merges:
        types_after[merge.result.type] = types_after.get(merge.result.type, 0) + 1
    plan.types_after = types_after
    plan.versions = {m.name: (m.id, m.version) for m in memories}
    return plan


def _add_answer(
    plan: ConsolidationPlan,
    answer: dict[str, Any],
    batch_names: set[str],
    by_name: dict[str, MemoryRecord],
    claimed: set[str],
) -> None:
    """Check one batch's answer against the store and what earlier batches claimed."""
    merges, drops = answer.get("merge", []), answer.get("drop", [])
    if not isinstance(merges, list) or not isinstance(drops, list):
        raise InvalidMemory("plan", "'merge' and 'drop' must be arrays")
    unknown = set(answer) - {"merge", "drop"}
    if unknown:
        raise InvalidMemory("plan", f"unknown keys {sorted(unknown)}")

    def claim(name: str, role: str) -> None:
        if name in claimed:
            raise InvalidMemory("plan", f"{name!r} appears twice ({role})")
        claimed.add(name)

    for raw in merges:
        if not isinstance(raw, dict):
            raise InvalidMemory("merge", "each merge must be an object")
        sources = raw.get("sources")
        if not isinstance(sources, list) or not sources:
            raise InvalidMemory("merge", "'sources' must be a non-empty array of names")
        for source in sources:
            if not isinstance(source, str) or source not in batch_names:
                raise InvalidMemory("merge", f"source {source!r} is not one of the memories")
            if len(by_name[source].body) > MEMORY_SHOWN_MAX_CHARS:
                raise InvalidMemory("merge", f"{source!r} was shown shortened; it cannot be merged")
            claim(source, "as a source")
        result = proposed_memory(raw, body_max_bytes=MERGED_BODY_MAX_BYTES)
        # The result may take a source's name (an update in place) or a free one.
        if result.name in by_name and result.name not in sources:
            raise InvalidMemory("merge", f"result name {result.name!r} belongs to another memory")
        if result.name not in sources:
            claim(result.name, "as a result")
        plan.merges.append(Merge(tuple(sources), result))
    for raw in drops:
        name = raw.get("name") if isinstance(raw, dict) else raw
        if not isinstance(name, str) or name not in batch_names:
            raise InvalidMemory("drop", f"{name!r} is not one of the memories")
        claim(name, "as a drop")
        plan.drops.append(Drop(name, by_name[name].type, _drop_reason(raw, name)))


def _drop_reason(raw: Any, name: str) -> str:
    """The model's reason for a drop as history records it: its words on one line, cut to
    the cap, checked as the transaction will (a secret in it refuses the plan, as one in a
    merge does); '' when it gave none."""
    given = raw.get("reason") if isinstance(raw, dict) else None
    reason = check_reason(" ".join(str(given or "").split())[:REASON_MAX_CHARS])
    if reason is None:
        return ""
    refuse_secret_reason(reason, name)
    return reason


def memory_batches(memories: Sequence[MemoryRecord]) -> list[list[MemoryRecord]]:
    """All memories in one batch when they fit; else by type, each type cut into batches."""
    if _fits(memories):
        return [list(memories)]
    batches: list[list[MemoryRecord]] = []
    for kind in sorted({m.type for m in memories}):
        batch: list[MemoryRecord] = []
        for memory in (m for m in memories if m.type == kind):
            if batch and not _fits([*batch, memory]):
                batches.append(batch)
                batch = []
            batch.append(memory)
        batches.append(batch)
    return batches


def _fits(memories: Sequence[MemoryRecord]) -> bool:
    size = sum(len(_shown(m)) for m in memories)
    return len(memories) <= BATCH_MAX_MEMORIES and size <= BATCH_MAX_CHARS


def _shown(memory: MemoryRecord) -> str:
    body = memory.body
    note = ""
    if len(body) > MEMORY_SHOWN_MAX_CHARS:
        body = body[:MEMORY_SHOWN_MAX_CHARS] + " […]"
        note = ", shortened: keep or drop it, do not merge or rewrite it"
    return (
        f"### {memory.name} ({memory.type}, saved {memory.updated_at[:10]}{note})\n"
        f"{memory.description}\n{body}\n"
    )


def consolidation_prompt(
    batch: Sequence[MemoryRecord], target: int, total: int, max_memories: int
) -> str:
    scope = (
        f"These are all {total} memories."
        if len(batch) == total
        else f"These are {len(batch)} of {total} memories (all of type {batch[0].type})."
    )
    # What no one would see in a memory is shown to the model as \u{…}: a hidden line
    # cannot steer the plan, and a merged memory keeps it visible.
    return show_hidden(
        f"{scope} The store should end with at most {max_memories} memories, so aim to keep "
        f"at most {target} of these; merging is better than dropping.\n\n"
        + "\n".join(_shown(m) for m in batch)
    )


def apply_plan(
    store: MemoryStore, plan: ConsolidationPlan, *, confirmed: bool = False
) -> Consolidation:
    """Carry out a validated plan in one transaction. Refuses (changing nothing) when the
    plan needs confirmation and `confirmed` is False."""
    outcome = Consolidation(plan)
    warnings = plan.warnings()
    if warnings and not confirmed:
        raise ConsolidationRefused(
            f"consolidation not applied without confirmation: {'; '.join(warnings)}"
        )
    try:
        outcome.applied = _apply_in_one_transaction(store, plan, outcome)
    except MemoryAltered as error:
        # Changed outside memstore since it was planned (a planned memory was sound): the
        # transaction wrote nothing, and the run fails with one line.
        raise ConsolidationRefused(f"consolidation not applied: {error}") from None
    return outcome


def _apply_in_one_transaction(
    store: MemoryStore, plan: ConsolidationPlan, outcome: Consolidation
) -> bool:
    """Whether the plan changed anything (`outcome` says what)."""
    # The run began when planning asked the model: changes made meanwhile count as later.
    with store.transaction(
        actor=ACTOR, command=store.command or "consolidate", started_at=plan.planned_at or None
    ) as tx:
        # An empty plan is recorded too: a run with no events, so that the trigger waits
        # for new changes instead of asking the model again on the next turn.
        tx.record_run()
        touched = [n for merge in plan.merges for n in merge.sources] + [d.name for d in plan.drops]
        for name in touched:
            current = tx.find(name)
            if current is None or (current.id, current.version) != plan.versions.get(name):
                raise ConsolidationRefused(
                    f"consolidation not applied: {name!r} changed while it was being planned"
                )
        for merge in plan.merges:
            sources = [tx.get(name) for name in merge.sources]
            result = merge.result
            kinds = {m.type == "user" for m in sources} | {result.type == "user"}
            if store.is_server and len(kinds) > 1:
                # On a server a `user` memory is one person's: the team's must not absorb
                # it, nor it the team's.
                raise ConsolidationRefused(
                    f"consolidation not applied: it merges {', '.join(merge.sources)} into "
                    f"{result.name!r}, mixing a person's own (user) memories and the team's"
                )
            keeper = next((m for m in sources if m.name == result.name), None)
            if keeper is None:
                target = tx.create(result.name, result.type, result.description, result.body)
                outcome.created.append(target.name)
            else:
                target = tx.update(
                    keeper, type=result.type, description=result.description, body=result.body
                )
                if target is not keeper:
                    outcome.updated.append(target.name)
            for source in sources:
                if source is not keeper:
                    tx.delete(source, merged_into=target)
                    outcome.deleted.append(source.name)
        for drop in plan.drops:
            tx.delete(tx.get(drop.name), reason=drop.reason or None)
            outcome.deleted.append(drop.name)
        outcome.run_id = tx.run_id
    return bool(tx.events)


SKIPPED = "consolidation skipped: another consolidation of this store is running; nothing changed"


@contextlib.contextmanager
def consolidation_lock(store: MemoryStore) -> Iterator[None]:
    """Be the store's only consolidation while the block runs (planning through applying);
    raises ConsolidationSkipped at once, before anything is read or asked, when another one
    of this store is running, on any machine (storage/run_lock.py)."""
    with run_alone(store, ACTOR) as held:
        if not held:
            raise ConsolidationSkipped(SKIPPED)
        yield


def consolidate_memories(
    *,
    store: MemoryStore,
    client: ModelClient,
    max_memories: int = MAX_MEMORIES,
    confirmed: bool = False,
    model: str | None = None,
) -> Consolidation:
    """Plan with the model, validate, apply in one transaction, as the store's only
    consolidation. Raises ConsolidationRefused (with nothing changed) when the model fails,
    its plan is invalid, or needs confirmation; ConsolidationSkipped when another
    consolidation of the store is running."""
    with consolidation_lock(store):
        plan = plan_consolidation(
            store=store, client=client, max_memories=max_memories, model=model
        )
        outcome = apply_plan(store, plan, confirmed=confirmed)
    log.info("consolidation: %d → %d memories (run %s)", plan.before, plan.after, outcome.run_id)
    return outcome
