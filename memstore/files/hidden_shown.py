"""A memory as it is written into a folder that another tool hands to its model as it is
(Claude Code's memory folder): every character no one sees shown, as memstore.text's
show_hidden writes it, in each of the memory's texts (description, body, the keys and values
of its unmodeled frontmatter). The store keeps the characters; only that folder's copy shows
them, so export and import compare the folder's files with the memory in that form too
(docs/integrations.md, "Characters no one sees").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, select

from memstore.storage.models import LIVE, MemoryRecord, memory_table
from memstore.text import HIDDEN, show_hidden


def shown_value(value: Any) -> Any:
    """`value` with show_hidden over every string in it (a mapping's keys too)."""
    if isinstance(value, str):
        return show_hidden(value)
    if isinstance(value, dict):
        return {shown_value(key): shown_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shown_value(item) for item in value]
    return value


def shown_memory(memory: MemoryRecord) -> MemoryRecord:
    """`memory` as such a folder holds it: the same record when no text of it hides anything."""
    snapshot = memory.snapshot()
    shown = shown_value(snapshot)
    return memory if shown == snapshot else memory.changed(**shown)


def with_shown(versions: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A memory's versions (snapshots) and, after them, those that hide a character as such a
    folder holds them: a file that says either holds nothing the database does not know."""
    shown = [value for version in versions if (value := shown_value(version)) != version]
    return [*versions, *shown]


def hiding_memories(connection: Connection) -> set[int]:
    """The live memories a text of which holds a character no one sees. Their files in such a
    folder are compared with what would be written at every export, even when the memory has
    not changed since the last: an older memstore wrote the characters as they are."""
    table = memory_table
    rows = connection.execute(
        select(table.c.id, table.c.description, table.c.body, table.c.extra).where(LIVE)
    )
    return {
        memory_id
        for memory_id, description, body, extra in rows
        if any(_hides(text) for text in (description, body))
        or (extra and _hides(json.dumps(extra, ensure_ascii=False)))
    }


def _hides(text: str | None) -> bool:
    return text is not None and not text.isascii() and HIDDEN.search(text) is not None
