"""memstore: long-term memory for coding agents, kept in SQLite.

The public Python API is the names below; docs/python-api.md shows them in use. The package's
layers and what may import what are drawn in ARCHITECTURE.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memstore.errors import MemstoreError
    from memstore.files.exporter import export_memories
    from memstore.files.importer import import_memories
    from memstore.storage.store import MemoryStore

__all__ = ["MemoryStore", "MemstoreError", "__version__", "export_memories", "import_memories"]

# The distribution's version too (pyproject.toml reads it from here).
__version__ = "0.1.0"

_PUBLIC = {
    "MemoryStore": "memstore.storage.store",
    "MemstoreError": "memstore.errors",
    "export_memories": "memstore.files.exporter",
    "import_memories": "memstore.files.importer",
}


def __getattr__(name: str) -> Any:
    # Lazy, so that importing one submodule (e.g. memstore.storage.models) does not load them all.
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(name)
