"""LiveNames: which live memory holds a name, as a writing transaction sees it.

Names are unique among live memories. A transaction asks the database for the names it
needs (no other writer changes them while it holds the write lock) and keeps its own changes
over what it read, so that every create, rename and restore is checked against both.
"""

from __future__ import annotations

from sqlalchemy import Connection, select

from memstore.storage.backend import backend_of_sql
from memstore.storage.models import LIVE, memory_table

# A transaction asking for more names than this reads all live names at once (an import),
# fewer one by one: reading all of them made every single write cost O(store) under the
# writers' lock.
NAMES_ONE_BY_ONE = 32
# The id LiveNames gives a name that a memory this role cannot see holds: on a server,
# another person's own (`user`) memory. The name is taken; nothing more is known of it.
HIDDEN = -1


class LiveNames:
    """The live names' ids as a writing transaction sees them: what it asked the database
    (which no other writer changes while it holds the write lock) under its own changes.

    On a server, row-level security hides other people's own memories, but their names are
    still taken: a name no visible memory has is asked of the unique index itself
    (memstore_live_name, revision 0008); past the one-by-one names, those a transaction
    makes live are asked all at once before it writes (`hidden_taken`)."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._known: dict[str, int | None] = {}  # None: no live memory has that name
        self._all = False
        self._server = backend_of_sql(connection).server
        self._unprobed: set[str] = set()

    def get(self, name: str) -> int | None:
        if name not in self._known:
            if not self._all and len(self._known) < NAMES_ONE_BY_ONE:
                self._known[name] = self._lookup(name)
            else:
                if not self._all:
                    self._load_all()
                if name not in self._known and self._server:
                    self._unprobed.add(name)
        return self._known.get(name)

    def _lookup(self, name: str) -> int | None:
        if self._server:
            found = self._connection.exec_driver_sql(
                "SELECT memstore_live_name(%s)", (name,)
            ).scalar()
            return None if found is None else int(found)
        return self._connection.execute(
            select(memory_table.c.id).where(memory_table.c.name == name, LIVE)
        ).scalar()

    def hidden_taken(self) -> list[str]:
        """Names this transaction makes live that a memory it cannot see holds (asked of the
        server's unique index at once; only names never looked up one by one)."""
        mine = sorted(name for name in self._unprobed if self._known.get(name) is not None)
        if not mine:
            return []
        taken = self._connection.exec_driver_sql(
            "SELECT memstore_names_taken(%s::text[])", (mine,)
        ).scalar()
        return sorted(taken or [])

    def __contains__(self, name: str) -> bool:
        return self.get(name) is not None

    def __setitem__(self, name: str, id_: int) -> None:
        self._known[name] = id_

    def pop(self, name: str) -> None:
        self._known[name] = None

    def _load_all(self) -> None:
        rows = self._connection.execute(select(memory_table.c.name, memory_table.c.id).where(LIVE))
        stored: dict[str, int | None] = {name: id_ for name, id_ in rows}
        self._known = {**stored, **self._known}  # this transaction's changes over the stored
        self._all = True
