"""The history a write transaction leaves as it commits: its run's row, and one row per
change (PendingEvent), each hashed onto the history's chain (storage/chain.py)."""

from __future__ import annotations

from typing import Any, NamedTuple

from sqlalchemy import ColumnElement, Connection, insert, literal_column, select

from memstore.storage import chain, who
from memstore.storage.backend import backend_of_sql
from memstore.storage.engine import to_json
from memstore.storage.models import Operation, memory_event_table, run_table

_EVENTS = memory_event_table.c
# A column of the last event of a server's history chain.
_LAST_CHAINED = "SELECT {} FROM event_chain ORDER BY id DESC LIMIT 1"
# Who is writing, and the place and hash of the last run on a server's runs' chain.
_LAST_RUN_ON_SERVER = (
    "SELECT current_user, (SELECT seq FROM run_chain ORDER BY seq DESC LIMIT 1),"
    " (SELECT hash FROM run_chain ORDER BY seq DESC LIMIT 1)"
)


class PendingEvent(NamedTuple):
    """An event of a transaction, written when it commits."""

    memory_id: int
    memory_name: str
    operation: Operation
    old: dict[str, Any] | None
    new: dict[str, Any] | None
    merged_into: int | None = None
    # The hash of the row as this event leaves it (storage/state.py).
    state: str | None = None
    # Why the change was made, checked (validation.check_reason): a consolidation's drop.
    reason: str | None = None


def write_run(
    connection: Connection,
    run: dict[str, Any],
    *,
    purged: list[int] | None = None,
    with_last_event: bool = False,
) -> tuple[str | None, str | None, tuple[Any, Any] | None]:
    """Write the run's row (`run`: its columns but identity, host and its place on the
    runs' chain; `purged`: the memories it purges); its identity and host as stored (the
    chain covers them) and, on a server when asked, the id and hash of the chain's last
    event, read by the same statement (event_chain: every event's, even those this role
    cannot see)."""
    on_server = backend_of_sql(connection).server
    row = {**run, "host": who.host()}
    if on_server:
        # PostgreSQL's trigger sets the connecting role; run_chain holds every run's place,
        # even those this role cannot see.
        row["identity"], last_seq, last_hash = connection.exec_driver_sql(_LAST_RUN_ON_SERVER).one()
    else:  # SQLite has no roles: the OS user
        row["identity"] = who.os_user()
        runs = run_table.c
        last = connection.execute(
            select(runs.seq, runs.hash).where(runs.seq.is_not(None)).order_by(runs.seq.desc())
        ).first()
        last_seq, last_hash = last if last is not None else (None, None)
    row["seq"] = (last_seq or 0) + 1
    content = chain.ChainedRun._make(row.get(name) for name in chain.ChainedRun._fields)
    row["hash"] = chain.run_hash(last_hash or chain.GENESIS, content, purged or [])
    returned: list[ColumnElement[Any]] = [run_table.c.identity, run_table.c.host]
    if with_last_event and on_server:
        returned += [
            literal_column(f"({_LAST_CHAINED.format(column)})") for column in ("id", "hash")
        ]
    stored = connection.execute(insert(run_table).returning(*returned), row).one()
    if len(stored) > 2:
        return stored[0], stored[1], (stored[2], stored[3])
    return stored[0], stored[1], None


def chained_events(
    connection: Connection,
    events: list[PendingEvent],
    *,
    run_id: str,
    actor: str,
    command: str,
    now: str,
    identity: str | None,
    host: str | None,
    last: tuple[Any, Any] | None,
) -> list[dict[str, Any]]:
    """The event rows of the run `run_id`, numbered after the last event (id and hash, or
    None: read here) and each hashed onto the chain (the transaction holds the write lock:
    nobody else appends meanwhile)."""
    if last is None:
        last = connection.execute(
            select(_EVENTS.id, _EVENTS.hash).order_by(_EVENTS.id.desc()).limit(1)
        ).first()
    if last is not None and last[0] is None:  # a server's chain has no event yet
        last = None
    next_id, previous = (last[0] + 1, last[1]) if last is not None else (1, chain.GENESIS)
    rows = []
    for number, event in enumerate(events, next_id):
        row: dict[str, Any] = {
            "id": number,
            "memory_id": event.memory_id,
            "memory_name": event.memory_name,
            "operation": event.operation.value,
            "actor": actor,
            "run_id": run_id,
            "created_at": now,
            "merged_into": event.merged_into,
            "old_value": event.old,
            "new_value": event.new,
            "state": event.state,
            "reason": event.reason,
        }
        values = {key: value for key, value in row.items() if key != "state"}
        stored = chain.ChainedEvent(
            **{**values, "old_value": to_json(event.old), "new_value": to_json(event.new)},
            command=command,
            identity=identity,
            host=host,
        )
        row["hash"] = previous = chain.event_hash(previous, stored)
        rows.append(row)
    return rows
