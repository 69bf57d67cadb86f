"""PostgreSQL as storage.backend.Backend: tsvector search indexed by the writer, the
information schema, a repeatable-read transaction for a snapshot. psycopg is imported only
when a connection is made."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memstore.storage.dbapi import Connection
from memstore.storage.postgres import search
from memstore.storage.postgres.server import connect_reader
from memstore.storage.records import MemoryRecord

if TYPE_CHECKING:
    from sqlalchemy import Connection as SQLConnection


class PostgresBackend:
    mark = "%s"
    server = True
    json_as_text = False

    def connect_reader(self, location: Path | str, *, busy_timeout_ms: int) -> Connection:
        return connect_reader(str(location))

    def has_table(self, connection: Connection, table: str) -> bool:
        query = "SELECT 1 WHERE to_regclass(%s) IS NOT NULL"
        return connection.execute(query, (table,)).fetchone() is not None

    def stored_columns(self, connection: Connection, table: str) -> set[str]:
        rows = connection.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = %s",
            (table,),
        )
        return {row[0] for row in rows}

    def rank_ids(self, connection: Connection, terms: list[str], limit: int) -> dict[int, float]:
        return search.ranked_ids(connection, terms, limit)

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
        return search.ranked_matches(connection, columns, terms, limit, type, any_term=any_term)

    def index(self, connection: SQLConnection, memories: Iterable[MemoryRecord]) -> None:
        search.index(connection, memories)

    def begin_snapshot(self, connection: Connection) -> None:
        connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")

    def end_snapshot(self, connection: Connection) -> None:
        connection.rollback()  # type: ignore[attr-defined]


POSTGRES = PostgresBackend()
