"""MemoryStore: memories in SQLite or PostgreSQL, every write with its history event in one
transaction (storage/transaction.py), its history read through `store.history`
(storage/history.py)."""

from __future__ import annotations

import functools
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, NamedTuple, ParamSpec, TypeVar, cast

from sqlalchemy import func, select
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from memstore.errors import ConnectionLost, MemoryNotFound, StoreUnavailable
from memstore.settings import database_location
from memstore.storage.backend import backend_at
from memstore.storage.chain import ChainReport
from memstore.storage.dbapi import Connection
from memstore.storage.engine import writer
from memstore.storage.fields import LIVE_SQL
from memstore.storage.history import History
from memstore.storage.models import (
    MemoryRecord,
    MemorySummary,
    memory_purge_table,
    utc_now,
)
from memstore.storage.query import ReadOnlyQuery
from memstore.storage.reader import live_records, live_summaries, rank_ids, unaltered_records
from memstore.storage.reads import live_count, live_memories, live_memory, search_hits
from memstore.storage.records import SearchHit
from memstore.storage.transaction import WriteTransaction
from memstore.storage.unaltered import unaltered
from memstore.storage.validation import check_type

# A read the server cut (a restart) waits this long for it to take connections again, then
# runs once more; a write never runs again (docs/postgresql.md).
RECONNECT_WAIT_S = 15.0
_P = ParamSpec("_P")
_R = TypeVar("_R")


def read_again_once(read: Callable[_P, _R]) -> Callable[_P, _R]:
    """A read of the store that the server cut (ConnectionLost: a restart) runs once more,
    once the server takes connections again; it changed nothing, so running it again is
    safe. A second cut, or a server not back within RECONNECT_WAIT_S, raises."""

    @functools.wraps(read)
    def reading(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return read(*args, **kwargs)
        except ConnectionLost:
            store = cast("MemoryStore", args[0])
            if not store.wait_for_server(RECONNECT_WAIT_S):
                raise
        return read(*args, **kwargs)

    return reading


class PurgeReport(NamedTuple):
    run_id: str
    memories: int
    events: int


class MemoryStore:
    """A memstore database: a SQLite file, or a PostgreSQL database when `path` is a
    postgresql:// URL (`path` is then None, `url` the URL). Opening it creates or migrates
    the schema; with create=False a file must exist, and is opened read-only where it
    cannot be written (sqlite.engine.open_database)."""

    def __init__(
        self, path: str | Path, *, actor: str = "api", command: str = "", create: bool = True
    ) -> None:
        location = database_location(path) if isinstance(path, str) else path
        self.backend = backend_at(location)
        self._at = location
        # A server's URL, or a file's path: the store's public face says which.
        self.url: str | None = location if isinstance(location, str) else None
        self.path: Path | None = None if isinstance(location, str) else location
        self.location = self.backend.shown(location)
        self.engine = self.backend.open_engine(location, create=create)
        self.actor = actor
        self.command = command
        self._writer = writer(self.engine)
        self.history = History(self.engine)

    @property
    def is_server(self) -> bool:
        """Whether the store is a server many roles share: a person's own (`user`) memories
        are theirs, their history hidden from others; runs are locked on the server."""
        return self.backend.server

    @functools.cached_property
    def read_only(self) -> bool:
        """Whether the store was opened read-only (create=False on a SQLite file or folder it
        cannot write: sqlite.engine.open_database): it is read as any other, and every write
        fails."""
        return self.backend.is_read_only(self.engine)

    def wait_for_server(self, seconds: float) -> bool:
        """Whether the server takes connections again within `seconds` (a restart)."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                with self._dbapi() as connection:
                    connection.execute("SELECT 1")
                return True
            except StoreUnavailable:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.2)

    def verify_history(self) -> ChainReport:
        """Deprecated, kept one release: memstore 0.1's name of `store.history.verify()`."""
        warnings.warn(
            "store.verify_history() is deprecated: use store.history.verify()",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.history.verify()

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @contextmanager
    def transaction(
        self,
        *,
        actor: str | None = None,
        command: str | None = None,
        session_id: str | None = None,
        undoes: str | None = None,
        started_at: str | None = None,
        allow_secrets: bool = False,
    ) -> Iterator[WriteTransaction]:
        """One atomic unit of writes: everything in it commits together or not at all.

        `started_at`: when the run began, if before this transaction.
        `allow_secrets`: a person confirmed that what looks like a secret is none."""
        try:
            with self._writer.begin() as connection:
                tx = WriteTransaction(
                    connection,
                    actor or self.actor,
                    self.command if command is None else command,
                    utc_now(),
                    session_id=session_id,
                    undoes=undoes,
                    started_at=started_at,
                    allow_secrets=allow_secrets,
                )
                yield tx
                tx.write()
        except OperationalError as error:
            raise StoreUnavailable(
                f"database {self.location} is unavailable: {self._said(error.orig)}"
            ) from error
        except DBAPIError as error:
            # An IntegrityError is a bug if it happens; on PostgreSQL a trigger's or a
            # privilege's refusal too: say so in one line, roll back.
            if not self.backend.server and not isinstance(error, IntegrityError):
                raise
            raise StoreUnavailable(
                f"database {self.location} refused the change: {self._said(error.orig)}"
            ) from error

    # -- writes -----------------------------------------------------------------------------

    def create(
        self,
        name: str,
        type: str,
        description: str,
        body: str,
        extra: dict[str, Any] | None = None,
        *,
        allow_secrets: bool = False,
        **optional: Any,
    ) -> MemoryRecord:
        """A new memory; `optional`: values of the optional fields (storage/fields.py)."""
        with self.transaction(allow_secrets=allow_secrets) as tx:
            return tx.create(name, type, description, body, extra, **optional)

    def update(
        self,
        name: str,
        *,
        new_name: str | None = None,
        allow_secrets: bool = False,
        **changes: Any,
    ) -> MemoryRecord:
        """Change the fields given (type=, description=, body=, extra=, …: storage/fields.py)
        of the memory `name`; None leaves a field as it is, fields.CLEAR empties an optional
        one."""
        with self.transaction(allow_secrets=allow_secrets) as tx:
            return tx.update(tx.get(name), name=new_name, **changes)

    def delete(self, name: str) -> MemoryRecord:
        with self.transaction() as tx:
            return tx.delete(tx.get(name))

    def restore(self, name: str, *, allow_secrets: bool = False) -> MemoryRecord:
        with self.transaction(allow_secrets=allow_secrets) as tx:
            return tx.restore(name)

    def purge(self, name: str) -> PurgeReport:
        """Erase the content of every memory that ever had `name` from history, as its
        own run (see WriteTransaction.purge)."""
        with self.transaction() as tx:
            memories = tx.purge(name)
            run_id = tx.run_id
        self.backend.fold_log(self.engine)
        purges = memory_purge_table.c
        with self.engine.connect() as connection:
            events = connection.execute(
                select(func.sum(purges.events)).where(purges.run_id == run_id)
            ).scalar()
        return PurgeReport(run_id, len(memories), int(events or 0))

    # -- reads ------------------------------------------------------------------------------

    @read_again_once
    def find(self, name: str) -> MemoryRecord | None:
        with self._dbapi() as connection:
            return live_memory(connection, name)

    def get(self, name: str) -> MemoryRecord:
        memory = self.find(name)
        if memory is None:
            raise MemoryNotFound(name)
        return memory

    @read_again_once
    def memories(self, type: str | None = None) -> list[MemoryRecord]:
        """The live memories, by name."""
        with self._dbapi() as connection:
            return live_memories(connection, None if type is None else check_type(type))

    @read_again_once
    def count(self) -> int:
        # On the DBAPI connection: every recall asks first, and SQLAlchemy's per-call overhead
        # was most of the time of a count the live-name index answers.
        with self._dbapi() as connection:
            return live_count(connection)

    @read_again_once
    def search(self, query: str, limit: int = 10, type: str | None = None) -> list[SearchHit]:
        """Live memories matching the words of `query` (of `type`, when given), best first
        (bm25; see reads.search_hits)."""
        with self._dbapi() as connection:
            return search_hits(connection, query, limit, type)

    @read_again_once
    def rank_ids(self, terms: list[str], limit: int) -> dict[int, float]:
        """The bm25 score of the best `limit` live memories matching any of `terms`, by id."""
        with self._dbapi() as connection:
            return rank_ids(connection, terms, limit)

    @read_again_once
    def by_ids(self, ids: Sequence[int]) -> dict[int, MemoryRecord]:
        """The live memories of these ids, by id."""
        with self._dbapi() as connection:
            return live_records(connection, ids)

    def unaltered(self, memories: Iterable[MemoryRecord]) -> list[MemoryRecord]:
        """`memories` without those changed outside memstore (storage/unaltered.py), to be
        shown to an agent; a line on stderr for each left out."""
        with self._dbapi() as connection:
            return unaltered(connection, memories)

    def unaltered_all(self) -> list[MemoryRecord]:
        """The live memories that match their last event, by name."""
        with self._dbapi() as connection:
            return unaltered_records(connection)

    # -- semantic recall's vectors: derived data, like the FTS index, not history ------------

    @read_again_once
    def change_mark(self) -> tuple[Any, ...]:
        """A value that changes whenever a memory is created, changed, deleted or restored:
        every such write appends to the history, whose last id this is. One index lookup,
        cheap enough for every recall, and unlike timestamps it does not depend on the clock."""
        with self._dbapi() as connection:
            return tuple(connection.execute("SELECT max(id) FROM memory_event").fetchone())

    @read_again_once
    def live_vectors(self, model: str) -> list[tuple[int, int, bytes | None]]:
        """(id, version, vector) of each live memory; the vector is None when there is none
        for its current version and this model."""
        with self._dbapi() as connection:
            rows = connection.execute(
                "SELECT m.id, m.version, v.vector FROM memory AS m"
                " LEFT JOIN memory_vector AS v ON v.memory_id = m.id"
                f" AND v.model = {self.backend.mark} AND v.memory_version = m.version"
                f" WHERE m.{LIVE_SQL} ORDER BY m.id",
                (model,),
            ).fetchall()
        # psycopg reads bytea as memoryview
        return [(i, version, None if v is None else bytes(v)) for i, version, v in rows]

    def read_only_query(
        self, sql: str, *, timeout: float | None = None, max_rows: int | None = None
    ) -> ReadOnlyQuery:
        """The user's SQL on a connection of its own that cannot write (see ReadOnlyQuery),
        on this store's database, migrated when it was opened."""
        return self.backend.query(self._at, sql, timeout=timeout, max_rows=max_rows)

    @read_again_once
    def vector_counts(self, model: str) -> tuple[int, int]:
        """How many live memories have a vector of their current version, and how many
        live memories there are (counted in SQL: no vector is read)."""
        with self._dbapi() as connection:
            row = connection.execute(
                "SELECT count(v.memory_id), count(*) FROM memory AS m"
                " LEFT JOIN memory_vector AS v ON v.memory_id = m.id"
                f" AND v.model = {self.backend.mark} AND v.memory_version = m.version"
                f" WHERE m.{LIVE_SQL}",
                (model,),
            ).fetchone()
        return row[0], row[1]

    def save_vectors(
        self, model: str, rows: Sequence[tuple[int, int, bytes]], *, wait_ms: int
    ) -> None:
        """Store (memory id, its version, vector) rows, replacing older ones, in one
        transaction, waiting at most `wait_ms` for another writer (semantic recall waits
        little: vectors are derived data it may as well keep unsaved for a while)."""
        self.backend.save_vectors(self.engine, self._at, model, rows, wait_ms=wait_ms)

    def _said(self, error: BaseException | None) -> str:
        """The driver's message in one line; on a server, the URL's passwords masked in it."""
        return self.backend.said(self._at, error)

    def _dbapi(self) -> AbstractContextManager[Connection]:
        """The DBAPI connection, sqlite3's or psycopg's: for the reads both run alike."""
        return self.backend.dbapi_connection(self.engine)

    @read_again_once
    def summaries(self, type: str | None = None) -> list[MemorySummary]:
        """Name, type and description of the live memories, by name: cheaper than memories()."""
        # On the DBAPI connection: the index goes into every chat turn's system prompt, and
        # SQLAlchemy's per-row processing was most of the time this takes.
        with self._dbapi() as connection:
            return live_summaries(connection, None if type is None else check_type(type))
