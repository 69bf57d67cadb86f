"""memstore: long-term memory for coding agents, kept in SQLite."""

from memstore.errors import MemstoreError
from memstore.store import MemoryStore

__all__ = ["MemoryStore", "MemstoreError"]
