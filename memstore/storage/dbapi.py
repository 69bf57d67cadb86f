"""The DBAPI connection the hot reads run on, on either engine: sqlite3's or psycopg 3's, which
execute alike; only their parameter marks differ (backend.Backend.mark)."""

from __future__ import annotations

from typing import Any, Protocol

# How long a SQLite reader or writer waits for another writer's lock.
BUSY_TIMEOUT_MS = 15_000


class Connection(Protocol):
    """A DBAPI connection that executes directly: sqlite3's, or psycopg 3's."""

    def execute(self, query: Any, params: Any = ..., /) -> Any: ...

    def close(self) -> None: ...


def first_line(error: BaseException | None) -> str:
    """A driver's message in one line (psycopg's have a DETAIL and a CONTEXT below it)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
