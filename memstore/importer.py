"""Deprecated: import `import_memories` from `memstore`; this module moved to
`memstore.files.importer`.

Kept for one release so that code written against memstore 0.1 still imports.
"""

from __future__ import annotations

import warnings

from memstore.files.import_file import *  # noqa: F403
from memstore.files.import_folder import *  # noqa: F403
from memstore.files.importer import *  # noqa: F403
from memstore.files.importer import import_memories as import_memories

warnings.warn(
    "memstore.importer is deprecated: use 'from memstore import import_memories'",
    DeprecationWarning,
    stacklevel=2,
)
