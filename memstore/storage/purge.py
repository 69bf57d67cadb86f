"""Erasing a purged memory's content as the transaction that purges it commits.

Each of its events keeps its row, with its values (and its reason, if it has one: a drop's
reason speaks of the memory's content) replaced by a marker holding their SHA-256, as do the
commands of the runs that wrote them and the memory row's text; its vectors go.
The history's hash chain still verifies (storage/chain.py); nothing can restore or undo it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import (
    JSON,
    ColumnElement,
    Connection,
    Text,
    bindparam,
    cast,
    delete,
    insert,
    select,
    update,
)

from memstore.errors import AlreadyPurged, MemoryNotFound
from memstore.storage import chain
from memstore.storage.backend import Backend, backend_of_sql
from memstore.storage.engine import to_json
from memstore.storage.models import (
    MemoryRecord,
    memory_event_table,
    memory_purge_table,
    memory_table,
    memory_vector_table,
    run_table,
)

_EVENTS = memory_event_table.c


def erase_purged(
    connection: Connection,
    purged: list[int],
    by_id: Callable[[int], MemoryRecord],
    purging_run: str,
    now: str,
) -> None:
    """The rewrites of the memories `purged` (`by_id`: the transaction's view of each;
    `purging_run`: its run), after its delete events are written (the triggers let an
    event's values become a marker only for a memory recorded in memory_purge)."""
    execute = connection.execute
    backend = backend_of_sql(connection)
    for memory_id in purged:
        events = execute(
            select(
                _EVENTS.id,
                _stored_text(_EVENTS.old_value),
                _stored_text(_EVENTS.new_value),
                _EVENTS.run_id,
                _EVENTS.reason,
            ).where(_EVENTS.memory_id == memory_id)
        ).all()
        execute(
            insert(memory_purge_table).values(
                run_id=purging_run,
                memory_id=memory_id,
                memory_name=by_id(memory_id).name,
                events=len(events),
                purged_at=now,
            )
        )
        execute(
            update(memory_event_table)
            .where(_EVENTS.id == bindparam("b_id"))
            .values(
                old_value=_marker(backend, "b_old"),
                new_value=_marker(backend, "b_new"),
                reason=bindparam("b_reason"),
            ),
            [
                {
                    "b_id": event_id,
                    "b_old": _purged_or_none(old),
                    "b_new": _purged_or_none(new),
                    "b_reason": None if reason is None else chain.purged_command(reason),
                }
                for event_id, old, new, _, reason in events
            ],
        )
        for run_id in sorted({event[3] for event in events} - {purging_run}):
            runs = run_table.c
            command = execute(select(runs.command).where(runs.id == run_id)).scalar_one()
            execute(
                update(run_table)
                .where(runs.id == run_id)
                .values(command=chain.purged_command(command))
            )
        memory = by_id(memory_id)
        marker = f"[purged sha256:{chain.value_hash(to_json(memory.snapshot()))}]"
        execute(
            update(memory_table)
            .where(memory_table.c.id == memory_id)
            .values(description=marker, body=marker, extra={})
        )
        execute(delete(memory_vector_table).where(memory_vector_table.c.memory_id == memory_id))
    if purged:
        backend.drop_erased_words(connection)


def _marker(backend: Backend, name: str) -> ColumnElement[Any]:
    """A purge marker's JSON text, written as it is (not serialised again); PostgreSQL
    takes text into a JSON column only by a cast."""
    value = bindparam(name, type_=Text)
    return value if backend.json_as_text else cast(value, JSON)


def to_purge(
    connection: Connection, name: str, by_id: Callable[[int], MemoryRecord]
) -> list[MemoryRecord]:
    """Every memory that ever had `name` (what `history NAME` shows), as the transaction sees
    it; MemoryNotFound when none did. A memory purged before (the name used again since)
    holds nothing more to erase: its markers written again would no longer be the hashes of
    what it said; AlreadyPurged when that leaves none."""
    events = memory_event_table.c
    ids = connection.execute(
        select(events.memory_id)
        .where(events.memory_name == name)
        .distinct()
        .order_by(events.memory_id)
    ).scalars()
    found = [by_id(memory_id) for memory_id in ids]
    if not found:
        raise MemoryNotFound(name)
    memories = [memory for memory in found if not is_purged(connection, memory.id)]
    if not memories:
        raise AlreadyPurged(name)
    return memories


def is_purged(connection: Connection, memory_id: int) -> bool:
    """Whether the memory's content was purged from history (nothing can bring it back)."""
    purges = memory_purge_table.c
    query = select(purges.id).where(purges.memory_id == memory_id).limit(1)
    return connection.execute(query).first() is not None


def _stored_text(column: ColumnElement[Any]) -> ColumnElement[str]:
    """A JSON column's stored text, not its value: a purge marker keeps the text's hash.
    (A cast: psycopg parses JSON as it reads it, whatever SQLAlchemy expects.)"""
    return cast(column, Text)


def _purged_or_none(text: str | None) -> str | None:
    return None if text is None else chain.purged_value(text)
