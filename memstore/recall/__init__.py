"""Recall: the memories that matter for a turn (turn.py), by the model (selection.py) or
offline: keyword ranking (terms.py, keyword.py, lexicon.py) fused with semantic similarity
(fusion.py, vectors.py); and the block that injects them (block.py). See docs/recall.md."""

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
