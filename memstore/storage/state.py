"""The hash of a memory row's state, which each event records (memory_event.state, revision
0010): a reader about to show a memory compares its row's hash with its last event's, a
hash compare and not a replay, and leaves out a row changed outside memstore.

Plain Python (no SQLAlchemy): `memctl hook` checks the memories it injects before every
prompt. What the hash covers: every content field as an event's snapshot has it
(storage/fields.py), the version, and the times created, updated and deleted.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memstore.storage.records import MemoryRecord


def values_state_hash(
    values: dict[str, Any],
    version: int,
    created_at: str | None,
    updated_at: str | None,
    deleted_at: str | None,
) -> str:
    """A row's state from its parts: `values`, a snapshot of its content fields."""
    import hashlib  # not at import: `memctl history` and the listings never need it

    text = json.dumps(
        [values, version, created_at, updated_at, deleted_at],
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def state_hash(memory: MemoryRecord) -> str:
    """The hash of the row `memory` was read from, as its last event records it."""
    return values_state_hash(
        memory.snapshot(), memory.version, memory.created_at, memory.updated_at, memory.deleted_at
    )
