"""`memctl sql`'s bounded read-only query, as both engines run it (sqlite.engine.FileQuery,
postgres.engine.ServerQuery): the rows streamed up to a limit, Ctrl-C, the one-line error."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from memstore.errors import QueryFailed

# What a read-only query may start with. A failed statement that starts otherwise most likely
# tried to write, which the read-only connection refuses in the engine's own words ("disk I/O
# error", "syntax error at or near \"delete\""): the message says so.
READ_STATEMENTS = frozenset({"select", "with", "values", "explain", "table", "show", "pragma"})


def query_failed(sql: str, error: object) -> QueryFailed:
    """`memctl sql`'s one-line error for a statement the engine refused."""
    words = sql.lstrip(" \t\r\n(").split(None, 1)
    first = words[0].lower() if words else ""
    writes = first not in READ_STATEMENTS or (first == "pragma" and "=" in sql)
    hint = " (memctl sql runs one read-only query, such as SELECT; it never changes the store)"
    return QueryFailed(f"sql: {error}{hint if writes else ''}")


FETCH_ROWS = 500


class ReadOnlyQuery:
    """One statement of the user's on a connection that cannot write, bounded in time and
    rows, its rows streamed. `interrupt()` (Ctrl-C) stops it from a signal handler. Each
    engine's own (sqlite.engine.FileQuery, postgres.engine.ServerQuery) runs it."""

    def __init__(
        self, sql: str, *, timeout: float | None = None, max_rows: int | None = None
    ) -> None:
        self.timeout = timeout
        self.max_rows = max_rows
        self.truncated = False
        self.interrupted = False
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._sql = sql
        self.columns: list[str] = []
        self._cursor: Any = None

    def start(self) -> list[str]:
        """Run the statement up to its first row; its column names."""
        raise NotImplementedError

    def rows(self) -> Iterator[tuple[Any, ...]]:
        """The rows, a few hundred at a time, up to max_rows (then `truncated` is set)."""
        count = 0
        while True:
            batch = self._run(lambda: self._cursor.fetchmany(FETCH_ROWS))
            if not batch:
                return
            for row in batch:
                if self.interrupted:  # Ctrl-C while the rows were being printed
                    raise KeyboardInterrupt
                if self.max_rows is not None and count == self.max_rows:
                    self.truncated = True
                    return
                count += 1
                yield row

    def interrupt(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> ReadOnlyQuery:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _run(self, step: Any) -> Any:
        raise NotImplementedError
