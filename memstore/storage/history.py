"""Reading the audit history: events, runs, and the check of its hash chain.

The store writes history (every change with its event, in WriteTransaction); this reads
it. `store.history` is the History of a store's database.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import Engine, Select, column, literal_column, select, table

from memstore.errors import RunNotFound
from memstore.storage import chain
from memstore.storage.backend import backend_of_sql
from memstore.storage.models import MemoryEvent, Run, memory_event_table, run_table

_EVENTS = memory_event_table.c
_RUNS = run_table.c


class History:
    """The audit history of one database."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def __call__(self, name: str | None = None, limit: int | None = None) -> list[MemoryEvent]:
        """Deprecated, kept one release: `store.history(name)` of memstore 0.1."""
        warnings.warn(
            "store.history(...) is deprecated: use store.history.events(...)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.events(name, limit)

    def events(self, name: str | None = None, limit: int | None = None) -> list[MemoryEvent]:
        """Events, oldest first (the last `limit`); for a name, every event of any memory
        that ever had it."""
        query = select(memory_event_table)
        if name is not None:
            ids = select(_EVENTS.memory_id).where(_EVENTS.memory_name == name)
            query = query.where(_EVENTS.memory_id.in_(ids))
        query = query.order_by(_EVENTS.id.desc())
        if limit is not None:
            query = query.limit(limit)
        return list(reversed(self._events(query)))

    def run_events(self, run_id: str) -> list[MemoryEvent]:
        """The events of one run, in the order they were written."""
        return self._events(
            select(memory_event_table).where(_EVENTS.run_id == run_id).order_by(_EVENTS.id)
        )

    def events_after(self, event_id: int, memory_ids: Sequence[int]) -> list[MemoryEvent]:
        """Events newer than `event_id` of any of the memories `memory_ids`."""
        found: list[MemoryEvent] = []
        # In chunks: SQLite limits the number of bound parameters in one statement.
        for start in range(0, len(memory_ids), 500):
            found.extend(
                self._events(
                    select(memory_event_table).where(
                        _EVENTS.id > event_id,
                        _EVENTS.memory_id.in_(memory_ids[start : start + 500]),
                    )
                )
            )
        return found

    def hidden_events(self, run_id: str) -> int:
        """How many events of the run this connection cannot see: on a server, those of
        other people's own memories (event_chain counts every event); 0 on SQLite."""
        if not backend_of_sql(self.engine).server:
            return 0
        with self.engine.connect() as connection:
            return int(
                connection.exec_driver_sql(
                    "SELECT (SELECT count(*) FROM event_chain WHERE run_id = %(run)s)"
                    " - (SELECT count(*) FROM memory_event WHERE run_id = %(run)s)",
                    {"run": run_id},
                ).scalar_one()
            )

    def run(self, run_id: str) -> Run | None:
        runs = self._runs(select(run_table).where(_RUNS.id == run_id))
        return runs[0] if runs else None

    def find_run(self, prefix: str) -> Run:
        """The run whose id is or starts with `prefix` (history shows the first 8 characters)."""
        runs = self._runs(
            select(run_table).where(_RUNS.id.startswith(prefix, autoescape=True)).limit(2)
        )
        if not prefix or not runs:
            raise RunNotFound(f"no run {prefix!r}")
        if len(runs) > 1:
            raise RunNotFound(f"several runs start with {prefix!r}; give more of the id")
        return runs[0]

    def runs_by_id(self, run_ids: Collection[str]) -> dict[str, Run]:
        """The runs `run_ids` that exist, by id."""
        ids, found = list(run_ids), dict[str, Run]()
        for start in range(0, len(ids), 500):  # SQLite's bound-parameter limit, as above
            chunk = select(run_table).where(_RUNS.id.in_(ids[start : start + 500]))
            found.update((run.id, run) for run in self._runs(chunk))
        return found

    def last_run(self, actor: str) -> Run | None:
        """The latest run of `actor`."""
        runs = self._runs(
            select(run_table)
            .where(_RUNS.actor == actor)
            .order_by(_RUNS.started_at.desc(), _RUNS.id.desc())
            .limit(1)
        )
        return runs[0] if runs else None

    def undo_of(self, run_id: str) -> Run | None:
        """The run that undid `run_id`, if one did."""
        runs = self._runs(select(run_table).where(_RUNS.undoes == run_id).limit(1))
        return runs[0] if runs else None

    def runs(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Rows of the run_summary view, oldest first (the last `limit` runs)."""
        query: Select[Any] = (
            select(literal_column("*"))
            .select_from(table("run_summary"))
            .order_by(column("started_at").desc(), column("run_id").desc())
        )
        if limit:
            query = query.limit(limit)
        with self.engine.connect() as connection:
            rows = connection.execute(query).mappings().all()
        return [dict(row) for row in reversed(rows)]

    def verify(self) -> chain.ChainReport:
        """Recompute the history's hash chain and replay every memory's events against its
        row (storage/verify.py); HistoryTampered names every difference."""
        from memstore.storage.verify import verify_history

        backend = backend_of_sql(self.engine)
        with backend.dbapi_connection(self.engine) as connection:
            return verify_history(connection)

    def _events(self, query: Select[Any]) -> list[MemoryEvent]:
        with self.engine.connect() as connection:
            return [MemoryEvent(**row) for row in connection.execute(query).mappings()]

    def _runs(self, query: Select[Any]) -> list[Run]:
        with self.engine.connect() as connection:
            return [Run(**row) for row in connection.execute(query).mappings()]
