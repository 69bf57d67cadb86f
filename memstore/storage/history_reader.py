"""Reading the audit history on the DBAPI connection, without SQLAlchemy: the events of the
store or of one memory, the events of a run, a run by its id's start, the runs (the
run_summary view). `memctl history` reads with these (storage/reads.py's ReadOnlyStore);
MemoryStore's `store.history` (history.py) reads the same on its engine, as ORM rows.

The interface both satisfy is HistoryReads; what they hand out, EventView and RunView.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Protocol

from memstore.errors import RunNotFound
from memstore.storage.backend import backend_of
from memstore.storage.dbapi import Connection

# SQLite limits the number of bound parameters in one statement.
_IDS_PER_QUERY = 500
# LIKE's escape character for a run id's start (SQLAlchemy's autoescape uses the same).
_ESCAPE = "/"


class EventView(Protocol):
    """An event as the history hands it out: MemoryEvent (the ORM's) or EventRecord."""

    @property
    def id(self) -> int | None: ...
    @property
    def memory_id(self) -> int: ...
    @property
    def memory_name(self) -> str: ...
    @property
    def operation(self) -> str: ...
    @property
    def actor(self) -> str: ...
    @property
    def run_id(self) -> str: ...
    @property
    def old_value(self) -> dict[str, Any] | None: ...
    @property
    def new_value(self) -> dict[str, Any] | None: ...
    @property
    def created_at(self) -> str: ...
    @property
    def reason(self) -> str | None: ...


class RunView(Protocol):
    """A run as the history hands it out: Run (the ORM's) or RunRecord."""

    @property
    def id(self) -> str: ...
    @property
    def actor(self) -> str: ...
    @property
    def command(self) -> str: ...
    @property
    def started_at(self) -> str: ...
    @property
    def session_id(self) -> str | None: ...
    @property
    def undoes(self) -> str | None: ...
    @property
    def identity(self) -> str | None: ...
    @property
    def host(self) -> str | None: ...


class HistoryReads(Protocol):
    """What the read commands ask of a store's history."""

    def events(self, name: str | None = None, limit: int | None = None) -> Sequence[EventView]:
        """Events, oldest first (the last `limit`); for a name, every event of any memory
        that ever had it."""
        ...

    def run_events(self, run_id: str) -> Sequence[EventView]:
        """The events of one run, in the order they were written."""
        ...

    def find_run(self, prefix: str) -> RunView:
        """The run whose id is or starts with `prefix`; RunNotFound when none or several."""
        ...

    def runs_by_id(self, run_ids: Collection[str]) -> Mapping[str, RunView]:
        """The runs `run_ids` that exist, by id."""
        ...

    def runs(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Rows of the run_summary view, oldest first (the last `limit` runs)."""
        ...


@dataclass(frozen=True, slots=True)
class EventRecord:
    """A row of `memory_event`, read without the ORM."""

    id: int
    memory_id: int
    memory_name: str
    operation: str
    actor: str
    run_id: str
    old_value: dict[str, Any] | None
    new_value: dict[str, Any] | None
    created_at: str
    merged_into: int | None
    hash: str | None
    state: str | None
    reason: str | None


@dataclass(frozen=True, slots=True)
class RunRecord:
    """A row of `run`, read without the ORM."""

    id: str
    actor: str
    command: str
    started_at: str
    session_id: str | None
    undoes: str | None
    identity: str | None
    host: str | None
    seq: int | None
    hash: str | None


EVENT_COLUMNS = tuple(field.name for field in fields(EventRecord))
RUN_COLUMNS = tuple(field.name for field in fields(RunRecord))
# Only parameter marks and clauses of ours are added to these, never values.
_SELECT_EVENTS = f"SELECT {', '.join(EVENT_COLUMNS)} FROM memory_event"
_SELECT_RUNS = f"SELECT {', '.join(RUN_COLUMNS)} FROM run"


class HistoryReader:
    """HistoryReads on a DBAPI connection (sqlite3's or psycopg's), which it does not own."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._mark = backend_of(connection).mark
        self._json_as_text = backend_of(connection).json_as_text

    def events(self, name: str | None = None, limit: int | None = None) -> list[EventRecord]:
        query, parameters = _SELECT_EVENTS, list[Any]()
        if name is not None:
            query += (
                " WHERE memory_id IN (SELECT memory_id FROM memory_event"
                f" WHERE memory_name = {self._mark})"
            )
            parameters.append(name)
        query += " ORDER BY id DESC"
        if limit is not None:
            query += f" LIMIT {self._mark}"
            parameters.append(limit)
        return list(reversed(self._events(query, parameters)))

    def run_events(self, run_id: str) -> list[EventRecord]:
        return self._events(f"{_SELECT_EVENTS} WHERE run_id = {self._mark} ORDER BY id", [run_id])

    def events_after(self, event_id: int, memory_ids: Sequence[int]) -> list[EventRecord]:
        """Events newer than `event_id` of any of the memories `memory_ids`."""
        found: list[EventRecord] = []
        ids = list(memory_ids)
        for start in range(0, len(ids), _IDS_PER_QUERY):
            chunk = ids[start : start + _IDS_PER_QUERY]
            marks = ", ".join([self._mark] * len(chunk))
            found += self._events(
                f"{_SELECT_EVENTS} WHERE id > {self._mark} AND memory_id IN ({marks}) ORDER BY id",
                [event_id, *chunk],
            )
        return found

    def hidden_events(self, run_id: str) -> int:
        """How many events of the run this connection cannot see: on a server, those of
        other people's own memories (event_chain counts every event); 0 on SQLite."""
        if not backend_of(self._connection).server:
            return 0
        row = self._connection.execute(
            f"SELECT (SELECT count(*) FROM event_chain WHERE run_id = {self._mark})"
            f" - (SELECT count(*) FROM memory_event WHERE run_id = {self._mark})",
            [run_id, run_id],
        ).fetchone()
        return int(row[0])

    def undo_of(self, run_id: str) -> RunRecord | None:
        """The run that undid `run_id`, if one did."""
        runs = self._runs(f"{_SELECT_RUNS} WHERE undoes = {self._mark} LIMIT 1", [run_id])
        return runs[0] if runs else None

    def find_run(self, prefix: str) -> RunRecord:
        # As SQLAlchemy's startswith(autoescape=True): LIKE, its wildcards in `prefix` escaped.
        pattern = "".join(_ESCAPE + c if c in ("%", "_", _ESCAPE) else c for c in prefix) + "%"
        runs = self._runs(
            f"{_SELECT_RUNS} WHERE id LIKE {self._mark} ESCAPE '{_ESCAPE}' LIMIT 2", [pattern]
        )
        if not prefix or not runs:
            raise RunNotFound(f"no run {prefix!r}")
        if len(runs) > 1:
            raise RunNotFound(f"several runs start with {prefix!r}; give more of the id")
        return runs[0]

    def runs_by_id(self, run_ids: Collection[str]) -> dict[str, RunRecord]:
        ids, found = list(run_ids), dict[str, RunRecord]()
        for start in range(0, len(ids), _IDS_PER_QUERY):
            chunk = ids[start : start + _IDS_PER_QUERY]
            marks = ", ".join([self._mark] * len(chunk))
            found.update(
                (run.id, run) for run in self._runs(f"{_SELECT_RUNS} WHERE id IN ({marks})", chunk)
            )
        return found

    def runs(self, limit: int | None = None) -> list[dict[str, Any]]:
        query = "SELECT * FROM run_summary ORDER BY started_at DESC, run_id DESC"
        parameters: list[Any] = []
        if limit:
            query += f" LIMIT {self._mark}"
            parameters.append(limit)
        cursor = self._connection.execute(query, parameters)
        names = [column[0] for column in cursor.description]
        rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        return list(reversed(rows))

    def _events(self, query: str, parameters: list[Any]) -> list[EventRecord]:
        rows = self._connection.execute(query, parameters).fetchall()
        return [self._event(row) for row in rows]

    def _event(self, row: Sequence[Any]) -> EventRecord:
        values = dict(zip(EVENT_COLUMNS, row, strict=True))
        if self._json_as_text:
            for key in ("old_value", "new_value"):
                if values[key] is not None:
                    values[key] = json.loads(values[key])
        return EventRecord(**values)

    def _runs(self, query: str, parameters: list[Any]) -> list[RunRecord]:
        rows = self._connection.execute(query, parameters).fetchall()
        return [RunRecord(*row) for row in rows]
