"""Offline recall: keyword recall, fused with semantic similarity when the store's
SemanticIndex is given (semantic recall adds what the words miss: "What pets does Nate
have?" for "Nate adopted a dog named Max"). The relevance floor still holds: when no memory
shares enough words with the text, nothing is recalled.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from memstore.errors import SemanticUnavailable
from memstore.recall.keyword import keyword_recall
from memstore.storage.records import SearchHit

if TYPE_CHECKING:
    from memstore.recall.vectors import SemanticIndex
    from memstore.storage.reads import MemoryReads

log = logging.getLogger(__name__)

# The best SEMANTIC_CANDIDATES by keywords and the SEMANTIC_CANDIDATES nearest in meaning are
# ranked by (1 - SEMANTIC_WEIGHT) x bm25 / best bm25 + SEMANTIC_WEIGHT x similarity with the
# store's centre taken out (centring.py: what a memory says beyond what the whole store says).
# The thresholds below read the plain cosine similarity.
SEMANTIC_WEIGHT = 0.65
SEMANTIC_CANDIDATES = 30
# A memory that shares no word with the text joins only when at least this near in meaning:
# otherwise the nearest of unrelated memories would fill every free slot.
SEMANTIC_MIN_SIMILARITY = 0.3
# When no memory shares enough words with the text, one joins only when at least this near.
SEMANTIC_ALONE_MIN_SIMILARITY = 0.5
# After the best memory, one that shares a word but is this far in meaning is left out: one
# common word ("code") is no reason to fill a free slot.
SEMANTIC_KEEP = 0.1
# The newest user message is compared in meaning, at most this long: the encoder's time
# grows with the text, and the newest message is what the turn is about.
SEMANTIC_TEXT_MAX_CHARS = 1_000


def offline_recall(
    store: MemoryReads,
    text: str,
    limit: int = 5,
    *,
    newest: str | None = None,
    semantic: SemanticIndex | None = None,
) -> tuple[list[SearchHit], bool]:
    """The memories for `text` without a model, best first, and whether semantic recall
    took part: keyword recall, fused with semantic similarity to `newest` (the newest
    message; `text` when not given) when given the store's `semantic` index and its model
    is there. The model reads English and Chinese: a question in one language finds a
    memory written in the other even when they share no word."""
    focus = (newest if newest is not None else text).strip()[:SEMANTIC_TEXT_MAX_CHARS]
    if (
        semantic is None
        or limit <= 0
        or not focus
        or semantic.unavailable_reason() is not None
        or not semantic.ready()  # its model still loading in the background: not waited for
    ):
        return keyword_recall(store, text, limit), False
    hits = keyword_recall(store, text, max(limit, SEMANTIC_CANDIDATES))
    try:
        near = semantic.similarities(focus)
    except SemanticUnavailable as error:  # the model's files do not load: said once
        log.warning("recall: semantic recall is off: %s", error)
        return hits[:limit], False
    by_words = {hit.memory.id: hit for hit in hits}
    best_bm25 = max(hits[0].score, 1e-9) if hits else 1.0
    # Below the relevance floor (no memory shares enough words) only a memory very near in
    # meaning is recalled: a no-answer turn stays empty.
    alone = SEMANTIC_MIN_SIMILARITY if hits else SEMANTIC_ALONE_MIN_SIMILARITY
    nearest = near.nearest(SEMANTIC_CANDIDATES, centred=True)
    similar = {i: near.of(i) for i in [*by_words, *nearest]}
    fused = {
        i: (1 - SEMANTIC_WEIGHT) * (by_words[i].score / best_bm25 if i in by_words else 0.0)
        + SEMANTIC_WEIGHT * (near.centred_of(i) or 0.0)
        for i, similarity in similar.items()
        if i in by_words or (similarity or 0.0) >= alone
    }
    ranked = sorted(fused, key=lambda i: (-fused[i], i))
    # After the best, a memory far in meaning is left out even when it shares a word.
    best = ranked[:1] + [
        i for i in ranked[1:] if (similarity := similar[i]) is None or similarity >= SEMANTIC_KEEP
    ]
    best = best[:limit]
    records = store.by_ids([i for i in best if i not in by_words])
    chosen = []
    for i in best:
        if i in by_words:
            chosen.append(SearchHit(by_words[i].memory, fused[i], by_words[i].matched, similar[i]))
        elif i in records:
            chosen.append(SearchHit(records[i], fused[i], (), similar[i]))
    return chosen, True
