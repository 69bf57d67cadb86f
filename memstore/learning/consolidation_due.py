"""When consolidation is due: the store holds at least `threshold` memories, and at least
`min_changes` memories were created or updated (by anyone but consolidation and undo) since
the last consolidation run; or the store has grown past `max_memories` since that run.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, func, select

from memstore.learning.consolidate import ACTOR, MAX_MEMORIES
from memstore.storage import undo
from memstore.storage.models import (
    LIVE,
    Operation,
    memory_event_table,
    memory_table,
    run_table,
)
from memstore.storage.store import MemoryStore

THRESHOLD = 10
MIN_CHANGES = 5


def consolidation_due(
    store: MemoryStore,
    *,
    threshold: int = THRESHOLD,
    max_memories: int = MAX_MEMORIES,
    min_changes: int = MIN_CHANGES,
) -> str | None:
    """Why consolidation should run now, or None when it should not (see the module doc)."""
    count = store.count()
    if count < threshold:
        return None
    last = store.history.last_run(ACTOR)
    since = None if last is None else last.started_at
    with store.engine.connect() as connection:
        changed = _memories_changed_since(connection, since, excluding=[ACTOR, undo.ACTOR])
        if changed >= min_changes:
            if last is None:
                return f"{count} memories, never consolidated"
            return f"{count} memories, {changed} changed since the last consolidation"
        if count <= max_memories or not changed:
            return None
        # The store as the last run left it: counted after its changes, not before them.
        left = None if last is None else _count_at(connection, _finished_at(connection, last.id))
    # Over the cap: run when the store has grown past it since the last run. When the last
    # run could not bring it under the cap, wait for min_changes instead of retrying (and
    # paying) after every single change.
    if left is not None and left > max_memories:
        return None
    return f"{count} memories, more than the cap of {max_memories}"


def _memories_changed_since(
    connection: Connection, at: str | None, *, excluding: Sequence[str]
) -> int:
    """How many distinct memories were created or updated after `at` (ever, when None)
    by actors other than `excluding`."""
    events = memory_event_table.c
    query = select(func.count(func.distinct(events.memory_id))).where(
        events.operation.in_([Operation.CREATE.value, Operation.UPDATE.value]),
        events.actor.not_in(list(excluding)),
    )
    if at is not None:
        query = query.where(events.created_at > at)
    return connection.execute(query).scalar_one()


def _finished_at(connection: Connection, run_id: str) -> str:
    """When the run's changes were made (its last event), or when it started if it
    changed nothing."""
    events = memory_event_table.c
    last_event = connection.execute(
        select(func.max(events.created_at)).where(events.run_id == run_id)
    ).scalar()
    if last_event is not None:
        return str(last_event)
    started = connection.execute(
        select(run_table.c.started_at).where(run_table.c.id == run_id)
    ).scalar()
    return "" if started is None else str(started)


def _count_at(connection: Connection, at: str) -> int:
    """How many memories were live at the instant `at` (history keeps deleted rows)."""
    memories = memory_table.c
    query = select(func.count()).where(memories.created_at <= at, LIVE | (memories.deleted_at > at))
    return connection.execute(query).scalar_one()
