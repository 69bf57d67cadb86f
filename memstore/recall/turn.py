"""Recall for a turn: the few memories that matter for the conversation's latest messages,
chosen by the model when there is a client, else (or when the model fails, the reason
logged) by offline recall.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from memstore.errors import ModelUnavailable
from memstore.llm.client import ModelClient
from memstore.llm.messages import recent_user_text
from memstore.recall.fusion import offline_recall
from memstore.recall.selection import SELECTION_CATALOG_MAX_ENTRIES, memory_catalog, model_selection

if TYPE_CHECKING:
    from memstore.recall.vectors import SemanticIndex
    from memstore.storage.reads import MemoryReads

log = logging.getLogger(__name__)


class RecallPath(StrEnum):
    """How recall chose; the value is how memctl names it."""

    MODEL = "model"
    KEYWORD = "keyword"
    KEYWORD_AND_SEMANTIC = "keyword+semantic"
    NONE = "none"  # there was nothing to recall from, or for

    @property
    def offline(self) -> bool:
        """Whether offline recall chose (no model was asked, or it failed)."""
        return self in (RecallPath.KEYWORD, RecallPath.KEYWORD_AND_SEMANTIC)


@dataclass
class Recall:
    """What recall chose for a turn, and how."""

    names: list[str]
    path: RecallPath
    # Offline path: bm25 score of each name (with semantic recall, the fused score).
    scores: dict[str, float] = field(default_factory=dict)
    # Why the offline path was taken, or why nothing was recalled.
    reason: str = ""
    # Offline path: the words of the text each memory has.
    matched: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # With semantic recall: each memory's cosine similarity to the newest message.
    similarity: dict[str, float] = field(default_factory=dict)


def recall(
    messages: Sequence[Mapping[str, Any]],
    max_items: int = 5,
    *,
    store: MemoryReads,
    client: ModelClient | None = None,
    semantic: SemanticIndex | None = None,
) -> Recall:
    """The memories for this turn: the model's choice (with a `client`), else offline
    recall (semantic too when given the store's `semantic` index)."""
    text = recent_user_text(messages)
    if not text:
        return Recall([], RecallPath.NONE, reason="no recent user text")
    if store.count() == 0:
        return Recall([], RecallPath.NONE, reason="no memories")
    newest = recent_user_text(messages, turns=1)  # what is compared in meaning
    reason = "offline"
    if client is not None:
        catalog = memory_catalog(
            store, text, SELECTION_CATALOG_MAX_ENTRIES, newest=newest, semantic=semantic
        )
        try:
            return Recall(model_selection(client, text, catalog, max_items), RecallPath.MODEL)
        except ModelUnavailable as error:
            reason = str(error)
        except ValueError as error:
            reason = f"unusable model reply: {error}"
        log.warning("recall: model selection failed (%s); using keyword recall", reason)
    hits, semantic_used = offline_recall(store, text, max_items, newest=newest, semantic=semantic)
    return Recall(
        [h.memory.name for h in hits],
        RecallPath.KEYWORD_AND_SEMANTIC if semantic_used else RecallPath.KEYWORD,
        {h.memory.name: h.score for h in hits},
        reason,
        {h.memory.name: h.matched for h in hits},
        {h.memory.name: h.similarity for h in hits if h.similarity is not None},
    )
