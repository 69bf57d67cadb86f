"""The reads the page needs beyond MemoryReads, on the same read-only DBAPI connection
(ReadOnlyStore's: sqlite3 or psycopg, no SQLAlchemy, never a write): a page of the listing
with counts per type, the last change of each memory listed, memories' names by id, the runs
an undo undid, the store's growth by day, and the history's chain verified.

On a PostgreSQL server, row-level security applies to every one of them: a person sees
what they may.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memstore.storage.backend import backend_of
from memstore.storage.chain import ChainReport, verify
from memstore.storage.fields import LIVE_SQL
from memstore.storage.reads import ReadOnlyStore, checked_type

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

    def growth(self) -> list[tuple[str, int]]:
        """Each day that changed how many memories are live, and by how much."""
        rows = self._connection.execute(
            "SELECT substr(created_at, 1, 10) AS day, sum(CASE operation"
            " WHEN 'create' THEN 1 WHEN 'restore' THEN 1 WHEN 'delete' THEN -1 ELSE 0 END)"
            " FROM memory_event GROUP BY substr(created_at, 1, 10) ORDER BY day"
        ).fetchall()
        return [(str(day), int(change or 0)) for day, change in rows]

    def verify(self) -> ChainReport:
        """`memctl history --verify`'s check: HistoryTampered names where the chain breaks."""
        return verify(self._connection)


def _chunks(values: Sequence[Any]) -> list[list[Any]]:
    items = list(values)
    return [items[i : i + _IDS_PER_QUERY] for i in range(0, len(items), _IDS_PER_QUERY)]
