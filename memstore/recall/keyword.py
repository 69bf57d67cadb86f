"""Keyword recall: memories ranked by FTS5's bm25 over a text's terms and their equivalents,
re-ordered by how many of the text's distinct terms each one has (a coordination factor),
with a relevance floor that keeps one common word from dragging in unrelated memories.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from memstore.recall.terms import (
    index_terms,
    number_phrases,
    recall_terms,
    with_equivalents,
)
from memstore.recall.tokens import index_tokens
from memstore.storage.records import MemoryRecord, SearchHit

# A phrase around a number is one term of many: it counts this many times.
NUMBER_PHRASE_WEIGHT = 2
# The relevance floor: nothing is recalled unless one of the memories a turn is shown (the
# best FLOOR_CANDIDATES, whatever the limit asked for: fusion asks for more) shares
# MIN_SHARED_TERMS distinct terms with the text, or one with a text of two or fewer: one
# word in common is chance, two seldom are.
MIN_SHARED_TERMS = 2
FLOOR_CANDIDATES = 5
# The best candidates by bm25 re-ordered by bm25 x coordination(), so that one repeated term
# does not beat most of them.
RERANK_CANDIDATES = 15


class RankedStore(Protocol):
    """What keyword recall asks of a store: MemoryStore, and StoreReader (`memctl hook`)."""

    def rank_ids(self, terms: list[str], limit: int) -> dict[int, float]: ...
    def by_ids(self, ids: Sequence[int]) -> dict[int, MemoryRecord]: ...


def keyword_recall(store: RankedStore, text: str, limit: int = 5) -> list[SearchHit]:
    """Memories ranked by bm25 over any of the text's terms and their equivalents, then by
    how many of the terms each one has, best first; none when even the best one shares
    too little with the text."""
    terms = recall_terms(text)
    wanted = index_terms(terms)
    if not wanted or limit <= 0:
        return []
    wanted, equivalents = with_equivalents(text, wanted)
    phrases = number_phrases(text) * NUMBER_PHRASE_WEIGHT
    candidates = max(limit, RERANK_CANDIDATES)
    # Ids and scores first: the memories are loaded once, for the best candidates only.
    own = store.rank_ids(terms + phrases, candidates)
    other = store.rank_ids(equivalents, candidates) if equivalents else {}
    # An equivalent is evidence as the user's own word is (a down-weighting fit only the
    # dev set: benchmarks/recall-notes.md); its own query keeps its idf out of the text's.
    combined = {i: own.get(i, 0.0) + other.get(i, 0.0) for i in own | other}
    best = sorted(combined, key=lambda i: (-combined[i], i))[:candidates]
    records = store.by_ids(best)
    hits = [SearchHit(records[i], combined[i]) for i in best if i in records]
    total = sum(term.weight for term in wanted)
    rescored = []
    for hit in hits:
        tokens = index_tokens(hit.memory.name)
        tokens |= index_tokens(hit.memory.description) | index_tokens(hit.memory.body)
        credited = [term.credit(tokens) for term in wanted]
        shared = sum(weight for weight, _ in credited)
        score = hit.score * coordination(shared, total)
        matched = tuple(word for _, words in credited for word in words)
        rescored.append((score, shared, hit.memory, matched))
    if not rescored:
        return []
    rescored.sort(key=lambda row: row[0], reverse=True)  # stable: bm25 order breaks ties
    required = MIN_SHARED_TERMS if total > MIN_SHARED_TERMS else 1
    if all(shared < required for _, shared, _, _ in rescored[:FLOOR_CANDIDATES]):
        return []
    return [SearchHit(memory, score, words) for score, _, memory, words in rescored[:limit]]


def coordination(shared: int, total: int) -> float:
    """The share of the text's distinct terms (by weight) a memory has: plain, as the
    classic coordination factor (an exponent under 1 fit only the dev set)."""
    return shared / total
