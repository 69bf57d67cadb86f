"""Recall: the memories that matter for a turn (turn.py), by the model (selection.py) or
offline: keyword ranking (terms.py, keyword.py, lexicon.py) fused with semantic similarity
(fusion.py, vectors.py); and the block that injects them (block.py). See docs/recall.md."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memstore.recall.block import as_data, memories_block
    from memstore.recall.fusion import offline_recall
    from memstore.recall.keyword import keyword_recall
    from memstore.recall.selection import memory_catalog
    from memstore.recall.turn import Recall, RecallPath, recall
    from memstore.recall.vectors import SemanticIndex, SemanticModel

__all__ = [
    "Recall",
    "RecallPath",
    "SemanticIndex",
    "SemanticModel",
    "as_data",
    "keyword_recall",
    "memories_block",
    "memory_catalog",
    "offline_recall",
    "recall",
]

_HOMES = {
    "Recall": "turn",
    "RecallPath": "turn",
    "SemanticIndex": "vectors",
    "SemanticModel": "vectors",
    "as_data": "block",
    "keyword_recall": "keyword",
    "memories_block": "block",
    "memory_catalog": "selection",
    "offline_recall": "fusion",
    "recall": "turn",
}


def __getattr__(name: str) -> Any:
    # Lazy, so that importing one submodule (keyword recall, for `memctl hook`) does not load
    # them all, the model's client and the store's ORM with them.
    if name in _HOMES:
        return getattr(importlib.import_module(f"memstore.recall.{_HOMES[name]}"), name)
    raise AttributeError(name)
