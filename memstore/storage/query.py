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
    if writes:  # the engine's words for it ("disk I/O error") would read as a broken disk
        return QueryFailed(
            "sql: the store is read-only here: memctl sql runs one read-only query, such as"
            f" SELECT, and never changes the store (the database answered: {error})"
        )
    return QueryFailed(f"sql: {error}")


def time_limit_reached(timeout: float | None) -> QueryFailed:
    """`memctl sql`'s one line for a query stopped by its time limit."""
    return QueryFailed(
        f"sql: stopped after {timeout or 0:g} s, the time limit"
        " (--timeout SECONDS to allow more, 0 for none)"
    )


def value_too_big(max_bytes: int | None) -> QueryFailed:
    """`memctl sql`'s one line for a row (or a value being built) over the output limit."""
    return QueryFailed(
        f"sql: a row would print more than {max_bytes or 0:,} bytes, the output limit"
        " (--max-bytes N to allow more, 0 for none)"
    )


def printed_size(row: tuple[Any, ...], at_most: int) -> int:
    """About how many bytes `row`'s values print as (a BLOB as hex), measured no further
    than `at_most`: a value that could not fit is not encoded to learn by how much."""
    size = 0
    for value in row:
        if isinstance(value, str):
            # UTF-8 takes at least a byte a character: a string longer than what is left
            # cannot fit, whatever it holds.
            size += len(value) if len(value) > at_most else len(value.encode("utf-8", "replace"))
        elif isinstance(value, bytes | bytearray | memoryview):
            size += 2 * len(value)
        else:
            size += 24  # a number or NULL, with its JSON key and separators
        if size > at_most:
            break
    return size


FETCH_ROWS = 500


class ReadOnlyQuery:
    """One statement of the user's on a connection that cannot write, bounded in time, rows
    and bytes, its rows streamed. `interrupt()` (Ctrl-C) stops it from a signal handler. Each
    engine's own (sqlite.engine.FileQuery, postgres.engine.ServerQuery) runs it.

    The time limit holds for the whole command, printing included: the rows are handed out
    only while it lasts. The bytes (`limit_bytes`) are the rows' values as printed: the rows
    stop before the one that would pass them (`cut_at_bytes`), and a first row that would is
    refused, since nothing of the answer can be shown."""

    def __init__(
        self, sql: str, *, timeout: float | None = None, max_rows: int | None = None
    ) -> None:
        self.timeout = timeout
        self.max_rows = max_rows
        self.truncated = False
        self.interrupted = False
        self.max_bytes: int | None = None
        self.cut_at_bytes = False
        self._deadline = None if timeout is None else time.monotonic() + timeout
        # The engine's own deadline may be the server's; this one is the rows' printing too.
        self._ends_at = self._deadline
        self._sql = sql
        self.columns: list[str] = []
        self._cursor: Any = None

    def start(self) -> list[str]:
        """Run the statement up to its first row; its column names."""
        raise NotImplementedError

    def limit_bytes(self, max_bytes: int | None) -> None:
        """Print at most about `max_bytes` bytes of values (None: no limit)."""
        self.max_bytes = max_bytes

    def rows(self) -> Iterator[tuple[Any, ...]]:
        """The rows, a few hundred at a time, up to max_rows (then `truncated` is set) and
        max_bytes (then `cut_at_bytes`), while the time limit lasts."""
        count = size = 0
        while True:
            batch = self._run(lambda: self._cursor.fetchmany(FETCH_ROWS))
            if not batch:
                return
            for row in batch:
                if self.interrupted:  # Ctrl-C while the rows were being printed
                    raise KeyboardInterrupt
                if self._ends_at is not None and time.monotonic() > self._ends_at:
                    raise time_limit_reached(self.timeout)
                if self.max_rows is not None and count == self.max_rows:
                    self.truncated = True
                    return
                if self.max_bytes is not None:
                    size += printed_size(row, self.max_bytes - size)
                    if size > self.max_bytes:
                        if count == 0:
                            raise value_too_big(self.max_bytes)
                        self.cut_at_bytes = True
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
