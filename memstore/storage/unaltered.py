"""Nothing changed outside memstore is shown to an agent as sound (issue 28).

Before a memory goes to an agent (the Claude Code hook, the MCP server, the memory tool,
`memctl chat`'s recall), its row's hash (storage/state.py) is compared with the state its
last event records (memory_event.state, revision 0010): a hash compare, not a replay, one
indexed query for all of them. A row that does not match (edited with another tool, a ghost
row with no event, a memory undeleted by hand) is left out, with one line on stderr naming it
and `memctl history --verify`, which says exactly what differs.

Plain DBAPI (no SQLAlchemy): the hook reads through it before every prompt.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence

from memstore.storage.backend import backend_of
from memstore.storage.dbapi import Connection
from memstore.storage.fields import LIVE_SQL
from memstore.storage.records import RECORD_COLUMNS, MemoryRecord
from memstore.storage.state import state_hash

# SQLite limits the number of bound parameters in one statement.
_IDS_PER_QUERY = 500
# The state each memory's last event records (the index on memory_id finds it).
_LAST_STATES = (
    "SELECT memory_id, state FROM memory_event WHERE id IN"
    " (SELECT max(id) FROM memory_event WHERE memory_id IN ({marks}) GROUP BY memory_id)"
)
# Every live memory, with the state its last event records (`{names}`: a condition on
# m.name, or nothing), by name.
LIVE_WITH_STATES = (
    f"SELECT {', '.join(f'm.{column}' for column in RECORD_COLUMNS)},"
    " (SELECT e.state FROM memory_event AS e WHERE e.memory_id = m.id"
    "  ORDER BY e.id DESC LIMIT 1)"
    f" FROM memory AS m WHERE m.{LIVE_SQL}{{names}} ORDER BY m.name"
)


def left_out_line(memory: MemoryRecord) -> str:
    return (
        f"memstore: left out memory {memory.name!r}: its row does not match its last event"
        " in history (changed outside memstore); run `memctl history --verify`"
    )


def last_states(connection: Connection, ids: Sequence[int]) -> dict[int, str | None]:
    """The state each memory's last event records, by memory id (none: no event)."""
    states: dict[int, str | None] = {}
    mark = backend_of(connection).mark
    for start in range(0, len(ids), _IDS_PER_QUERY):
        chunk = tuple(ids[start : start + _IDS_PER_QUERY])
        query = _LAST_STATES.format(marks=", ".join([mark] * len(chunk)))
        states.update(connection.execute(query, chunk).fetchall())
    return states


def is_unaltered(memory: MemoryRecord, recorded: str | None) -> bool:
    return recorded is not None and recorded == state_hash(memory)


def unaltered(connection: Connection, memories: Iterable[MemoryRecord]) -> list[MemoryRecord]:
    """`memories` without those whose row does not match their last event; a line on stderr
    for each left out."""
    memories = list(memories)
    if not memories:
        return memories
    states = last_states(connection, [memory.id for memory in memories])
    return [memory for memory in memories if kept(memory, states.get(memory.id))]


def kept(memory: MemoryRecord, recorded: str | None) -> bool:
    """Whether to show `memory`, whose last event records `recorded`; if not, its line."""
    if is_unaltered(memory, recorded):
        return True
    sys.stderr.write(left_out_line(memory) + "\n")
    return False
