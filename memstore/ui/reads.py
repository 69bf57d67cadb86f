"""The reads the page needs beyond MemoryReads, on the same read-only DBAPI connection
(ReadOnlyStore's: sqlite3 or psycopg, no SQLAlchemy, never a write): a page of the listing
with counts per type, the last change of each memory listed, memories' names by id, the runs
an undo undid, why an undo or a restore would be refused (storage/undoable.py's rules), the
store's growth by day, and the history verified as `memctl history --verify` verifies it.

On a PostgreSQL server, row-level security applies to every one of them: a person sees
what they may.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memstore.storage.backend import backend_of
from memstore.storage.chain import ChainReport
from memstore.storage.fields import LIVE_SQL
from memstore.storage.history_reader import EVENT_COLUMNS, EventRecord
from memstore.storage.reads import ReadOnlyStore, checked_type
from memstore.storage.undoable import refusal_of, restore_refusal_of
from memstore.storage.verify import verify_history

# A purge marker's stored JSON text begins so (storage/chain.py's PURGED_VALUE_GLOB).
_PURGED_PREFIX = '{"purged": %'
# SQLite limits the number of bound parameters in one statement.
_IDS_PER_QUERY = 500


@dataclass(frozen=True)
class Listed:
    """A memory as the listing shows it."""

    id: int
    name: str
    type: str
    description: str
    created_at: str
    updated_at: str


@dataclass(frozen=True)
class LastChange:
    """A memory's latest event: who made it, when, in which run."""

    actor: str
    at: str
    run_id: str
    identity: str | None
    host: str | None


class UiReads(ReadOnlyStore):
    """ReadOnlyStore with the page's own reads."""

    @property
    def mark(self) -> str:
        return backend_of(self._connection).mark

    def type_counts(self) -> dict[str, int]:
        """How many live memories of each type."""
        rows = self._connection.execute(
            f"SELECT type, count(*) FROM memory WHERE {LIVE_SQL} GROUP BY type ORDER BY type"
        ).fetchall()
        return {str(type): int(count) for type, count in rows}

    def listing(self, type: str | None, offset: int, limit: int) -> list[Listed]:
        """A page of the live memories (of one type), by name."""
        query = (
            "SELECT id, name, type, description, created_at, updated_at FROM memory"
            f" WHERE {LIVE_SQL}"
        )
        parameters: list[Any] = []
        if checked_type(type) is not None:
            query += f" AND type = {self.mark}"
            parameters.append(type)
        query += f" ORDER BY name LIMIT {self.mark} OFFSET {self.mark}"
        parameters += [limit, offset]
        return [Listed(*row) for row in self._connection.execute(query, parameters).fetchall()]

    def last_changes(self, ids: Sequence[int]) -> dict[int, LastChange]:
        """The latest event of each of these memories, with its run's who, by memory id."""
        found: dict[int, LastChange] = {}
        for chunk in _chunks(ids):
            marks = ", ".join([self.mark] * len(chunk))
            rows = self._connection.execute(
                "SELECT e.memory_id, e.actor, e.created_at, e.run_id, r.identity, r.host"
                " FROM memory_event AS e LEFT JOIN run AS r ON r.id = e.run_id"
                " WHERE e.id IN (SELECT max(id) FROM memory_event"
                f" WHERE memory_id IN ({marks}) GROUP BY memory_id)",
                chunk,
            ).fetchall()
            found.update((row[0], LastChange(*row[1:])) for row in rows)
        return found

    def run_events(self, run_id: str, limit: int) -> tuple[list[EventRecord], int]:
        """The first `limit` events of a run, in the order they were written, and how many
        it has (an import writes one per memory: a page shows the first ones)."""
        total = self._connection.execute(
            f"SELECT count(*) FROM memory_event WHERE run_id = {self.mark}", (run_id,)
        ).fetchone()[0]
        rows = self._connection.execute(
            f"SELECT {', '.join(EVENT_COLUMNS)} FROM memory_event WHERE run_id = {self.mark}"
            f" ORDER BY id LIMIT {self.mark}",
            (run_id, limit),
        ).fetchall()
        events = []
        for row in rows:
            values = dict(zip(EVENT_COLUMNS, row, strict=True))
            for key in ("old_value", "new_value"):
                if isinstance(values[key], str):  # JSON as text on SQLite
                    values[key] = json.loads(values[key])
            events.append(EventRecord(**values))
        return events, int(total)

    def names(self, ids: Sequence[int]) -> dict[int, str]:
        """The names of these memories, live or deleted, by id."""
        found: dict[int, str] = {}
        for chunk in _chunks(ids):
            marks = ", ".join([self.mark] * len(chunk))
            rows = self._connection.execute(
                f"SELECT id, name FROM memory WHERE id IN ({marks})", chunk
            ).fetchall()
            found.update((int(id), str(name)) for id, name in rows)
        return found

    def merged_sources(self, ids: Sequence[int]) -> list[tuple[str, str, str]]:
        """The memories a consolidation merged into one of these: (name, run id, when)."""
        found: list[tuple[str, str, str]] = []
        for chunk in _chunks(ids):
            marks = ", ".join([self.mark] * len(chunk))
            rows = self._connection.execute(
                "SELECT memory_name, run_id, created_at FROM memory_event"
                f" WHERE merged_into IN ({marks}) ORDER BY id",
                chunk,
            ).fetchall()
            found += [(str(name), str(run), str(at)) for name, run, at in rows]
        return found

    def undone_by(self, run_ids: Sequence[str]) -> dict[str, str]:
        """The run that undid each of these runs, for those undone."""
        found: dict[str, str] = {}
        for chunk in _chunks(run_ids):
            marks = ", ".join([self.mark] * len(chunk))
            rows = self._connection.execute(
                f"SELECT undoes, id FROM run WHERE undoes IN ({marks}) ORDER BY started_at",
                chunk,
            ).fetchall()
            found.update((str(undoes), str(id)) for undoes, id in rows)
        return found

    def undo_refusals(self, run_ids: Sequence[str]) -> dict[str, str]:
        """Why `memctl undo` would refuse each of these runs, for those it would: the rules
        undo itself applies (storage/undoable.py's undo_refusal, in its order), read for
        every run at once in a few queries, not run by run through all of its events: an
        import's run holds one event per memory imported."""
        runs = list(dict.fromkeys(run_ids))
        undone = self.undone_by(runs)
        counted: dict[str, tuple[int, int]] = {}  # run: its events, those purged since
        later: dict[str, set[str]] = {}
        for chunk in _chunks(runs):
            marks = ", ".join([self.mark] * len(chunk))
            for run_id, events, purged in self._connection.execute(
                "SELECT run_id, count(*), sum(CASE WHEN CAST(old_value AS TEXT) LIKE"
                f" {self.mark} OR CAST(new_value AS TEXT) LIKE {self.mark} THEN 1 ELSE 0 END)"
                f" FROM memory_event WHERE run_id IN ({marks}) GROUP BY run_id",
                [_PURGED_PREFIX, _PURGED_PREFIX, *chunk],
            ).fetchall():
                counted[str(run_id)] = (int(events), int(purged or 0))
            for run_id, name in self._connection.execute(
                "SELECT DISTINCT e.run_id, l.memory_name FROM memory_event AS e"
                " JOIN (SELECT run_id, max(id) AS last FROM memory_event"
                f" WHERE run_id IN ({marks}) GROUP BY run_id) AS r ON r.run_id = e.run_id"
                " JOIN memory_event AS l ON l.memory_id = e.memory_id AND l.id > r.last",
                chunk,
            ).fetchall():
                later.setdefault(str(run_id), set()).add(str(name))
        found: dict[str, str] = {}
        for run_id in runs:
            events, purged = counted.get(run_id, (0, 0))
            refusal = refusal_of(
                run_id,
                undone_by=undone.get(run_id),
                hidden=run_id not in undone and self.history.hidden_events(run_id) > 0,
                events=events,
                purged=purged > 0,
                later=sorted(later.get(run_id, ())),
            )
            if refusal is not None:
                found[run_id] = refusal
        return found

    def restore_refusal(self, name: str) -> str | None:
        """Why `memctl restore NAME` would be refused now, or None: restore's own rules."""
        return restore_refusal_of(self._connection, name)

    def growth(self) -> list[tuple[str, int]]:
        """Each day that changed how many memories are live, and by how much."""
        rows = self._connection.execute(
            "SELECT substr(created_at, 1, 10) AS day, sum(CASE operation"
            " WHEN 'create' THEN 1 WHEN 'restore' THEN 1 WHEN 'delete' THEN -1 ELSE 0 END)"
            " FROM memory_event GROUP BY substr(created_at, 1, 10) ORDER BY day"
        ).fetchall()
        return [(str(day), int(change or 0)) for day, change in rows]

    def health_mark(self) -> tuple[Any, ...]:
        """What any write through memstore moves: the history's last event and its count,
        the runs, the memories' rows, versions and last change. A row changed outside
        memstore may leave it as it was (the health page's "check again" is for that)."""
        row = self._connection.execute(
            "SELECT (SELECT max(id) FROM memory_event), (SELECT count(*) FROM memory_event),"
            " (SELECT count(*) FROM run), (SELECT count(*) FROM memory),"
            " (SELECT coalesce(sum(version), 0) FROM memory),"
            " (SELECT max(updated_at) FROM memory)"
        ).fetchone()
        return tuple(row)

    def verify(self) -> ChainReport:
        """`memctl history --verify`'s check, whole (storage/verify.py: the events' and the
        runs' chains, every memory's row replayed, the append-only triggers):
        HistoryTampered with every difference found."""
        return verify_history(self._connection)


def _chunks(values: Sequence[Any]) -> list[list[Any]]:
    items = list(values)
    return [items[i : i + _IDS_PER_QUERY] for i in range(0, len(items), _IDS_PER_QUERY)]
