"""The DBAPI connection the hot reads run on, on either engine: sqlite3's or psycopg 3's, which
execute alike; only their parameter marks differ."""

from __future__ import annotations

import sqlite3
from typing import Any, Protocol


class Connection(Protocol):
    """A DBAPI connection that executes directly: sqlite3's, or psycopg 3's."""

    def execute(self, query: Any, params: Any = ..., /) -> Any: ...

    def close(self) -> None: ...


def is_sqlite(connection: Connection) -> bool:
    return isinstance(connection, sqlite3.Connection)


def mark(connection: Connection) -> str:
    """The DBAPI's parameter mark: sqlite3's qmark, psycopg's format."""
    return "?" if is_sqlite(connection) else "%s"
