"""The one interface the core of storage uses where the two engines differ, and the choice
of one: `backend_at` for a store's location (a Path is a SQLite file, a str a server's URL),
`backend_of` for a DBAPI connection and `backend_of_sql` for a SQLAlchemy one. The two
implementations are sqlite/backend.py's and postgres/backend.py's; this is the only module of
the core that names them, and it imports nothing heavy (`memctl hook` reads through it).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memstore.storage.dbapi import Connection
from memstore.storage.records import MemoryRecord
from memstore.storage.sqlite.backend import SQLITE

if TYPE_CHECKING:
    from sqlalchemy import Connection as SQLConnection
    from sqlalchemy import Engine, Table

    from memstore.storage.query import ReadOnlyQuery


class Backend(Protocol):
    """What differs between SQLite and PostgreSQL, for the core above them."""

    # The DBAPI's parameter mark: sqlite3's qmark, psycopg's format.
    mark: str
    # A server many roles share: it decides which rows a connection sees (row-level
    # security), so history counts the events it cannot see, and records who connected.
    server: bool
    # JSON columns come back as text (SQLite); psycopg hands them out parsed.
    json_as_text: bool

    def open_engine(self, location: Path | str, *, create: bool) -> Engine:
        """A SQLAlchemy engine on an up-to-date database, created or migrated as needed
        (with create=False it must exist)."""
        ...

    def shown(self, location: Path | str) -> str:
        """The location as messages show it (a URL's passwords masked)."""
        ...

    def said(self, location: Path | str, error: BaseException | None) -> str:
        """The driver's message in one line (a URL's passwords masked in it)."""
        ...

    def dbapi_connection(self, engine: Engine) -> AbstractContextManager[Connection]:
        """A pooled DBAPI connection of the engine's, sqlite3's or psycopg's, which execute
        alike: for what SQLAlchemy cannot say (FTS5, PRAGMAs) or says too slowly."""
        ...

    def is_read_only(self, engine: Engine) -> bool:
        """Whether the database was opened read-only (a file it cannot write)."""
        ...

    def query(
        self, location: Path | str, sql: str, *, timeout: float | None, max_rows: int | None
    ) -> ReadOnlyQuery:
        """`memctl sql`: the user's SQL on a connection of its own that cannot write."""
        ...

    def in_project_namespace(self, location: str, setting: str | None, root: Path) -> str:
        """A server's URL naming the project namespace its workspace (at `root`) uses: the
        URL's own, else `setting`, else the workspace's git remote (postgres/namespace.py)."""
        ...

    def connect_reader(self, location: Path | str, *, busy_timeout_ms: int) -> Connection:
        """A DBAPI connection that cannot write, without SQLAlchemy (a SQLite file waits up
        to `busy_timeout_ms` for a writer)."""
        ...

    def has_table(self, connection: Connection, table: str) -> bool: ...

    def stored_columns(self, connection: Connection, table: str) -> set[str]:
        """The columns `table` has in this database."""
        ...

    def rank_ids(self, connection: Connection, terms: list[str], limit: int) -> dict[int, float]:
        """The bm25 (higher is better) of the best `limit` live memories matching any of
        `terms` (quoted: search_terms.query_terms), by id."""
        ...

    def ranked_matches(
        self,
        connection: Connection,
        columns: Sequence[str],
        terms: list[str],
        limit: int,
        type: str | None,
        *,
        any_term: bool,
    ) -> list[tuple[Any, ...]]:
        """Rows of the live memories matching all `terms` (any, with any_term), of `type`
        when given, best first, each followed by its bm25 score (lower is better)."""
        ...

    def index(self, connection: SQLConnection, memories: Iterable[MemoryRecord]) -> None:
        """Index the memories a transaction changed for search (SQLite's triggers do it)."""
        ...

    def erase_freed_space(self, connection: SQLConnection) -> None:
        """From here on in this transaction, space a delete frees is overwritten (a purge)."""
        ...

    def drop_erased_words(self, connection: SQLConnection) -> None:
        """Make the search index let go of the words of text a purge erased."""
        ...

    def fold_log(self, engine: Engine) -> None:
        """After a purge: no copy of the erased text left in a log beside the database."""
        ...

    def save_vectors(
        self,
        engine: Engine,
        location: Path | str,
        model: str,
        rows: Sequence[tuple[int, int, bytes]],
        *,
        wait_ms: int,
    ) -> None:
        """Store (memory id, its version, vector) rows, replacing older ones, in one
        transaction, waiting at most `wait_ms` for another writer."""
        ...

    def prepare_copy(self, connection: SQLConnection, owner: str | None) -> None:
        """Before a copy writes (a dry run too): may this connection copy into it, `owner`
        becoming the copied memories' owner (on a server: a role's)."""
        ...

    def start_copy(self, connection: SQLConnection) -> None:
        """Before the copied rows: they keep who made them, and whose they are."""
        ...

    def copy_rows(
        self, connection: SQLConnection, table: Table, names: list[str], rows: list[tuple[Any, ...]]
    ) -> None:
        """A copy's rows of `table`, as stored (JSON as its text)."""
        ...

    def finish_copy(self, connection: SQLConnection, live: Iterable[MemoryRecord]) -> None:
        """After the copied rows, before the commit: the search index, what numbers rows."""
        ...

    def begin_snapshot(self, connection: Connection) -> None:
        """Start a read-only transaction that sees one snapshot of every table."""
        ...

    def end_snapshot(self, connection: Connection) -> None: ...


def backend_at(location: Path | str) -> Backend:
    """The backend of a store at `location`: a Path is a SQLite file, a str a server's URL."""
    return _postgres() if isinstance(location, str) else SQLITE


def backend_of(connection: Connection) -> Backend:
    """The backend of a DBAPI connection: sqlite3's, or psycopg's."""
    return SQLITE if isinstance(connection, sqlite3.Connection) else _postgres()


def backend_of_sql(connectable: SQLConnection | Engine) -> Backend:
    """The backend of a SQLAlchemy connection or engine, by its dialect."""
    return _postgres() if connectable.dialect.name == "postgresql" else SQLITE


def _postgres() -> Backend:
    # Imported when a server is first met: reading a file (`memctl hook`) needs none of it.
    from memstore.storage.postgres.backend import POSTGRES

    return POSTGRES
