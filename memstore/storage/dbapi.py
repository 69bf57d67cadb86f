"""The DBAPI connection the hot reads run on, on either engine: sqlite3's or psycopg 3's, which
execute alike; only their parameter marks differ (backend.Backend.mark)."""

from __future__ import annotations

from typing import Any, Protocol


class Connection(Protocol):
    """A DBAPI connection that executes directly: sqlite3's, or psycopg 3's."""

    def execute(self, query: Any, params: Any = ..., /) -> Any: ...

    def close(self) -> None: ...
