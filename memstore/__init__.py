"""memstore: long-term memory for coding agents, kept in SQLite."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memstore.errors import MemstoreError
    from memstore.store import MemoryStore

__all__ = ["MemoryStore", "MemstoreError", "__version__"]

# The distribution's version too (pyproject.toml reads it from here).
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # Lazy, so that importing one submodule (e.g. memstore.models) does not load them all.
    if name == "MemoryStore":
        from memstore.store import MemoryStore

        return MemoryStore
    if name == "MemstoreError":
        from memstore.errors import MemstoreError

        return MemstoreError
    raise AttributeError(name)
