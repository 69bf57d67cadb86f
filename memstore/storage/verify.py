"""`memctl history --verify`: the history holds together, and the store is what it says.

- Each event matches its hash on the chain (storage/chain.py), checked against the hash
  stored before it, so that each event changed, and the one after each event removed, is
  named on its own.
- The runs' chain holds, run by run, and each purge was made by a run on it
  (storage/verify_runs.py).
- Each memory's row is its events replayed (storage/replay.py), field by field, and each
  event's recorded state is the row it left; a row with no events, and events with no row,
  are named.
- The append-only triggers are in place (SQLite: a user's own tools can drop them).

Every difference is collected, not only the first: HistoryTampered carries them all, one
line each, so that whoever edited the database with another tool learns exactly what
changed. It reads each table once, in one pass, and hashes each event and run once: a person
waits for it (bench_store.py times it at 10,000 memories).
"""

from __future__ import annotations

from itertools import groupby
from typing import TYPE_CHECKING

from memstore.errors import HistoryTampered
from memstore.storage import chain
from memstore.storage.backend import backend_of
from memstore.storage.chain import is_purged
from memstore.storage.reader import record_from_row
from memstore.storage.records import RECORD_COLUMNS, MemoryRecord
from memstore.storage.replay import (
    REPLAYED_EVENTS,
    Replayed,
    difference_line,
    differences,
    replay,
    replayed_event,
)
from memstore.storage.verify_runs import verify_runs

if TYPE_CHECKING:
    from memstore.storage.dbapi import Connection

# SQLite's triggers that keep history append-only (revisions 0001, 0005, 0007, 0010, 0012); a
# tool that drops one can rewrite history unseen until the next verify.
SQLITE_TRIGGERS = (
    "memory_event_no_update",
    "memory_event_no_delete",
    "memory_event_no_replace",
    "run_no_update",
    "run_no_delete",
    "run_no_replace",
    "run_who_no_update",
    "memory_purge_no_update",
    "memory_purge_no_delete",
    "run_chain_no_update",
    "memory_event_state_no_update",
    "memory_event_reason_no_update",
)
# PostgreSQL's (revisions 0005, 0007, 0010, 0012), each table's, enabled.
POSTGRES_TRIGGERS = (
    *(
        f"{table}_{trigger}"
        for table in ("memory_event", "run", "memory_purge")
        for trigger in ("append_only", "no_delete", "no_truncate")
    ),
    "run_who",
    "run_chain_fixed",
    "memory_event_state_fixed",
    "memory_event_reason_fixed",
    "run_chain_append",
)


def verify_history(connection: Connection) -> chain.ChainReport:
    """The chain's report and how many memories replayed; HistoryTampered with every
    difference found (`problems`, one line each) when anything does not hold."""
    problems: list[str] = []
    broken_runs: set[str] | None = None if backend_of(connection).server else set()
    report = _event_chain(connection, problems, broken_runs)
    runs, unseen_runs, run_head = verify_runs(connection, problems, broken_runs)
    memories = _replay_memories(connection, problems)
    problems += missing_triggers(connection)
    if problems:
        raise HistoryTampered(
            f"history does not verify: {problems[0]}"
            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
            problems,
        )
    return report._replace(memories=memories, runs=runs, unseen_runs=unseen_runs, run_head=run_head)


def _event_chain(
    connection: Connection, problems: list[str], broken_runs: set[str] | None
) -> chain.ChainReport:
    """The events' chain, event by event; the runs of the events that break it are added
    to `broken_runs` (SQLite)."""
    if backend_of(connection).server:
        # A person on a server links what they see through the hashes of what they may not.
        try:
            return chain.verify_through_hidden(connection)
        except HistoryTampered as error:
            problems.append(str(error).removeprefix("history does not verify "))
            return chain.ChainReport(0, chain.GENESIS)
    count, previous = 0, chain.GENESIS
    for row in connection.execute(chain.CHAINED_EVENTS):
        event = chain.ChainedEvent(*row[:11], *row[12:15])
        stored = row[11]
        if stored != chain.event_hash(previous, event):
            if broken_runs is not None:
                broken_runs.add(event.run_id)
            problems.append(
                f"event {event.id} (memory {event.memory_name!r}, {event.operation}) does not"
                " match its hash on the chain: it, or the event before it, was changed,"
                " removed or inserted outside memstore"
            )
        count, previous = count + 1, stored or ""
    return chain.ChainReport(count, previous)


def _replay_memories(connection: Connection, problems: list[str]) -> int:
    rows = {
        record.id: record
        for record in (
            record_from_row(values)
            for values in connection.execute(
                f"SELECT {', '.join(RECORD_COLUMNS)} FROM memory ORDER BY id"
            )
        )
    }
    purged = {row[0] for row in connection.execute("SELECT memory_id FROM memory_purge")}
    replayed_ids = set()
    events = (replayed_event(row) for row in connection.execute(REPLAYED_EVENTS))
    for memory_id, group in groupby(events, key=lambda event: event.memory_id):
        history = list(group)
        replayed_ids.add(memory_id)
        replayed = replay(memory_id, history)
        for event_id, operation in replayed.broken:
            problems.append(
                f"event {event_id} (memory {replayed.name!r}, {operation}): its old value is"
                " not the memory as the event before it left it"
            )
        for event_id, operation in replayed.misstated:
            problems.append(
                f"event {event_id} (memory {replayed.name!r}, {operation}): the row state it"
                " records is not the one its history gives (changed outside memstore)"
            )
        row = rows.get(memory_id)
        if row is None:
            problems.append(
                f"memory {replayed.name!r} (#{memory_id}): {len(history)} events in history"
                " but no row (its row was deleted outside memstore)"
            )
            continue
        erased = memory_id in purged or is_purged(replayed.values)
        if is_purged(replayed.values) and memory_id not in purged:
            problems.append(
                f"memory {replayed.name!r} (#{memory_id}): its content is erased from history"
                " but no purge records it (a purge forged outside memstore)"
            )
        problems += _row_differences(row, replayed, purged=erased)
    for memory_id in sorted(rows.keys() - replayed_ids):
        row = rows[memory_id]
        problems.append(
            f"memory {row.name!r} (#{memory_id}): in the memory table at version"
            f" {row.version} but no event in history (added outside memstore)"
        )
    return len(replayed_ids)


def _row_differences(row: MemoryRecord, replayed: Replayed, *, purged: bool) -> list[str]:
    return [
        difference_line(row, name, in_row, in_history)
        for name, in_row, in_history in differences(row, replayed, purged=purged)
    ]


def missing_triggers(connection: Connection) -> list[str]:
    """The append-only triggers that are not in place, one line each."""
    if backend_of(connection).server:
        found = {
            name
            for (name,) in connection.execute(
                "SELECT t.tgname FROM pg_trigger AS t JOIN pg_class AS c ON c.oid = t.tgrelid"
                " WHERE c.relnamespace = current_schema()::regnamespace"
                " AND NOT t.tgisinternal AND t.tgenabled <> 'D'"
            )
        }
        expected = POSTGRES_TRIGGERS
    else:
        found = {
            name
            for name, sql in connection.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"
            )
            if "RAISE(ABORT" in (sql or "").upper().replace(" ", "")
        }
        expected = SQLITE_TRIGGERS
    return [
        f"trigger {name} is missing (dropped or disabled outside memstore): without it,"
        " history can be rewritten and nothing refuses it"
        for name in expected
        if name not in found
    ]
