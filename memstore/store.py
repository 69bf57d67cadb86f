"""Deprecated: import `MemoryStore` from `memstore`; this module moved to
`memstore.storage.store`.

Kept for one release so that code written against memstore 0.1 still imports.
"""

from __future__ import annotations

import warnings

from memstore.storage.store import *  # noqa: F403
from memstore.storage.store import MemoryStore as MemoryStore

warnings.warn(
    "memstore.store is deprecated: use 'from memstore import MemoryStore'",
    DeprecationWarning,
    stacklevel=2,
)
