"""Deprecated: import `export_memories` from `memstore`; this module moved to
`memstore.files.exporter`.

Kept for one release so that code written against memstore 0.1 still imports.
"""

from __future__ import annotations

import warnings

from memstore.files.export_folder import *  # noqa: F403
from memstore.files.export_index import *  # noqa: F403
from memstore.files.export_plan import *  # noqa: F403
from memstore.files.exporter import *  # noqa: F403
from memstore.files.exporter import export_memories as export_memories

warnings.warn(
    "memstore.exporter is deprecated: use 'from memstore import export_memories'",
    DeprecationWarning,
    stacklevel=2,
)
