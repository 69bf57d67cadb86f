"""The ids of the memories a transaction creates: on a server from memory.id's sequence,
taken in growing blocks (max(id) does not see other people's own memories there, and one
round trip per memory would cost an import of thousands); on SQLite the highest id + 1."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Connection, func, select

from memstore.storage.backend import backend_of_sql
from memstore.storage.models import memory_table

# The most memory ids a transaction takes from the server's sequence at once.
ID_BLOCK = 1024


@dataclass
class MemoryIds:
    connection: Connection
    _next: int | None = None
    # On a server: ids taken from the sequence, not used yet (smallest last).
    _pool: list[int] = field(default_factory=list)
    _block: int = 1

    def new(self) -> int:
        if backend_of_sql(self.connection).server:
            if not self._pool:
                ids = self.connection.exec_driver_sql(
                    "SELECT nextval(pg_get_serial_sequence('memory', 'id'))"
                    " FROM generate_series(1, %s)",
                    (self._block,),
                ).scalars()
                self._pool = sorted(ids, reverse=True)
                self._block = min(self._block * 2, ID_BLOCK)
            return int(self._pool.pop())
        if self._next is None:
            highest = self.connection.execute(select(func.max(memory_table.c.id))).scalar()
            self._next = (highest or 0) + 1
        self._next += 1
        return self._next - 1
