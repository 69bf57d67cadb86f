"""Recall: pick the few memories that matter for this turn, and inject them.

The model path shows the model a catalog (`i: name — description`) and the recent user text,
and asks for a JSON array of indices. Any failure (no client, no network, an error status,
a reply that is not such an array) falls back to the keyword path, and the reason is logged.

The keyword path (no model) ranks memories with FTS5/bm25 over segmented text: English words
are stemmed (porter), Han text is split into overlapping bigrams, stopwords are dropped, and
numbers are also searched as phrases with their neighbouring words. The best candidates are
then re-ordered by how many of the text's distinct terms each one has (a coordination
factor), and a relevance floor keeps one common word from dragging in unrelated memories.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memstore.errors import SemanticUnavailable
from memstore.llm.client import ModelUnavailable, ask_text, small_model_name
from memstore.llm.messages import recent_user_text
from memstore.llm.replies import json_from_reply
from memstore.recall.lexicon import lexicon
from memstore.recall.tokens import index_tokens, token_sequence
from memstore.storage.models import MemoryRecord, MemorySummary
from memstore.storage.search import (
    ENGLISH_STOPWORDS,
    HAN_CHARACTERS,
    MAX_TERMS,
    fts_phrase,
    is_content_term,
    term_occurrences,
)
from memstore.storage.store import MemoryStore, SearchHit

if TYPE_CHECKING:
    from anthropic import Anthropic

    from memstore.recall.vectors import SemanticIndex

log = logging.getLogger(__name__)

_HAN_CHARACTER = re.compile(f"[{HAN_CHARACTERS}]")


def recall_terms(text: str) -> list[str]:
    """Quoted FTS5 terms for recall: words and Han bigrams, stopwords dropped; the
    MAX_TERMS said last, as the newest words are the ones the turn is about (a word said
    early and again at the end counts as new), in the order of the text."""
    kept = []
    for term in dict.fromkeys(reversed(term_occurrences(text))):
        if not is_content_term(term):
            continue
        kept.append(term)
        if len(kept) == MAX_TERMS:
            break
    return kept[::-1]


# A number says most next to its words: "9 November, 2023", "Python 3.12", "port 8080".
# Each run of non-stopwords with a number in it, cut to one word either side of its numbers,
# is also searched as an exact phrase, counted NUMBER_PHRASE_WEIGHT times (a phrase is one
# term of many). Measured: locomo_dev recall@5 .656 -> .665, hit@5 .745 -> .754 (its
# questions often name the date a memory was noted on; once: .662/.751); recall_dev same.
NUMBER_PHRASE_WEIGHT = 2
# A long transcript (extraction) can hold hundreds of numbers: the last ones are searched.
MAX_NUMBER_PHRASES = 8
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")


def number_phrases(text: str) -> list[str]:
    """Quoted FTS5 phrases around the numbers of the text (see NUMBER_PHRASE_WEIGHT), the
    last MAX_NUMBER_PHRASES."""
    phrases: list[str] = []
    run: list[str] = []
    for word in [*(w.lower() for w in _ASCII_WORD.findall(text)), ""]:
        # "may" next to a number is the month ("7 May 2023"), not the verb.
        if word and (word not in ENGLISH_STOPWORDS or word == "may"):
            run.append(word)
            continue
        numbers = [i for i, w in enumerate(run) if w.isdigit()]
        # Adjacent numbers are one group ("1 4 0", "3 12"), and so is a lone number with
        # the next one a word away ("16 June 2023"); "Python 3.12, Go 1.22" is two groups.
        groups = [[i] for i in numbers[:1]]
        for i in numbers[1:]:
            gap = i - groups[-1][-1]
            if gap == 1 or (gap == 2 and len(groups[-1]) == 1):
                groups[-1].append(i)
            else:
                groups.append([i])
        for group in groups if len(run) > 1 else []:
            phrase = fts_phrase(" ".join(run[max(0, group[0] - 1) : group[-1] + 2]))
            if phrase in phrases:
                phrases.remove(phrase)  # said again: it counts where it was said last
            phrases.append(phrase)
        run = []
    return phrases[-MAX_NUMBER_PHRASES:]


# The relevance floor: when the text has more terms than this, the best memory must share
# at least this many distinct terms with it, or one with its name (a short text needs one).
# One word in common with a longer message, somewhere in a body, is weak evidence. Measured:
# on recall_dev this returns nothing for 55% of the turns that have no relevant memory (0%
# without it) at no cost in recall@5; on locomo_dev it costs 0.001 of recall@5. Requiring
# two shared terms without the name clause: 64%, but it drops e.g. "deploying a new version"
# for a memory named project-deploy.
MIN_SHARED_TERMS = 2
# bm25 adds up what each term contributes, so a memory that repeats one term of the text
# can outrank one that has most of them. The best RERANK_CANDIDATES by bm25 are re-ordered
# by bm25 x (share of the text's distinct terms the memory has) ** COORDINATION (the
# "coordination factor" of classic Lucene scoring). Measured (see benchmarks/bench_recall.py):
# locomo_dev recall@5 .648 -> .656, hit@5 .737 -> .745; recall_dev unchanged at .910, and
# the floor, now on the re-ordered best, empties 64% of the no-answer turns (55% before).
# Exponents .5 to 2 score the same; 15 candidates score the same as 30 or 50.
RERANK_CANDIDATES = 15
COORDINATION = 0.5


@dataclass(frozen=True)
class _Term:
    """A term of the text as the index sees it: its tokens (more than one for a word such
    as snake_case or a Han word), the tokens of each equivalent the lexicon knows, or the
    prefix of a `word*` term. A memory has the term when it has any of them. The first
    `own` alternatives are the user's own words; `words` say each alternative as text, to
    show why a memory was recalled.

    A phrase of the lexicon ("unit test") is one term made of `parts`, the text's words
    (unit, test): it weighs as many words as it has parts, and a memory that has only some
    of them is credited with those."""

    alternatives: tuple[frozenset[str], ...]
    words: tuple[str, ...]
    prefix: str | None = None
    weight: int = 1
    parts: tuple[_Term, ...] = ()
    own: int = 1

    def credit(self, tokens: frozenset[str], own_words: bool = False) -> tuple[int, list[str]]:
        """How much of this term a memory (its `tokens`) has, and as which words. With
        `own_words`, only the words of the text count, not their equivalents."""
        if self.prefix is not None:
            found = any(token.startswith(self.prefix) for token in tokens)
            return (self.weight, [self.words[0]]) if found else (0, [])
        alternatives = self.alternatives[: self.own] if own_words else self.alternatives
        for alternative, word in zip(alternatives, self.words, strict=False):
            if alternative <= tokens:
                return self.weight, [word]
        credited = [part.credit(tokens, own_words) for part in self.parts]
        return sum(weight for weight, _ in credited), [w for _, words in credited for w in words]

    def own_tokens(self) -> set[str]:
        """The tokens of the user's own words in this term, its parts' included."""
        tokens = {token for alternative in self.alternatives[: self.own] for token in alternative}
        return tokens.union(*(part.own_tokens() for part in self.parts))


def _index_terms(terms: list[str]) -> list[_Term]:
    """The distinct terms (deploying and deploy are one), as index tokens."""
    found: list[_Term] = []
    for term in terms:
        word = term.strip('"*').replace('""', '"')
        if term.endswith("*"):
            # FTS5 stems a prefix too: "deploying"* finds "Deploying" (deploi*).
            stems = token_sequence(word)
            candidate = _Term((), (word + "*",), stems[0] if stems else word.lower())
        else:
            tokens = frozenset(index_tokens(word))
            candidate = _Term((tokens,), (word,)) if tokens else _Term((), ())
        known = any(
            (candidate.alternatives, candidate.prefix) == (other.alternatives, other.prefix)
            for other in found
        )
        if (candidate.alternatives or candidate.prefix) and not known:
            found.append(candidate)
    return found


# The lexicon's equivalents of the text's words are searched too, at most this many, in a
# second query whose bm25 counts EQUIVALENT_WEIGHT as much: a memory in the user's own words
# is the likelier one, and an equivalent is often rare in the store (a Han word among
# English memories), which bm25 would otherwise rate above everything. Measured on
# recall_dev (R@5 / MRR): without the lexicon .910 / .872 (zh .857); weight 1: .915 / .807
# (en MRR .936 -> .829); .5: .919 / .835; .25: .931 / .869 (zh .952, en .927 / .918).
# locomo_dev: .663 -> .667 R@5 at .25, .669 at .5. The second query costs time: at 10,000
# memories p50 2.7 -> 4.7 ms with 24 phrases, 3.2 ms with 12 (same scores on both sets).
# A term found through the lexicon weighs as many of the text's words as it stands for, and
# two words of the text that mean the same are one term ("String and &str" counts once).
# Now: recall_dev R@5 .936 (en .934, zh .952), MRR .888, no-answer turns left empty 73%;
# locomo_dev R@5 .669, hit@5 .758.
MAX_EQUIVALENT_PHRASES = 12
EQUIVALENT_WEIGHT = 0.25


def _with_equivalents(text: str, wanted: list[_Term]) -> tuple[list[_Term], list[str]]:
    """The terms with the lexicon's equivalents folded in, and the FTS5 phrases to search
    for the equivalents. A word (or phrase, or Han word) that has equivalents becomes one
    term that any of them satisfies, so a memory in the other words counts as having it.
    Words of the text that mean the same ("console 控制台", "repo or repository") are one
    term, whichever comes first."""
    expansions = lexicon().expansions(text)
    said = {frozenset(expansion.source.tokens) for expansion in expansions}
    kept_tokens = {token for term in wanted for alt in term.alternatives for token in alt}
    phrases: list[str] = []
    # From the end: the newest message's words keep their equivalents when there are many.
    for expansion in reversed(expansions):
        source = frozenset(expansion.source.tokens)
        if not source & kept_tokens:  # only stopwords, or words older than the terms kept
            continue
        folded = [t for t in wanted if t.parts or len(t.alternatives) > 1]
        if any(source in t.alternatives or source <= t.alternatives[0] for t in folded):
            continue  # already a term, or inside one ("unit test ... test")
        # An equivalent that is part of the phrase itself (merge conflict: conflict) would
        # credit the whole phrase for one of its words; stopwords ("down") are no evidence.
        equivalents = [
            e for e in expansion.equivalents
            if not set(e.tokens) <= _stop_tokens() and not frozenset(e.tokens) < source
        ]  # fmt: skip
        others = [frozenset(e.tokens) for e in equivalents]
        han = bool(_HAN_CHARACTER.search(expansion.source.text))
        # The text's words the phrase is made of (unit, test; a Han word's bigrams).
        covered = [t for t in wanted if t.alternatives and t.alternatives[0] <= source]
        if not covered and source <= set().union(*(t.own_tokens() for t in wanted)):
            continue  # its words are all counted in other terms already
        # Equivalents the text says too, as phrases of the lexicon ("console 控制台"), and
        # the terms of the text they are made of (console; 控制, 制台).
        said_too = [other for other in others if other in said]
        repeated = [
            t for t in wanted if t not in covered and t.alternatives
            and any(t.alternatives[0] <= other for other in said_too)
        ]  # fmt: skip
        # A phrase weighs the words it is made of (a Han word, its bigrams, as a memory
        # with the word itself would be credited without the lexicon); said in two forms,
        # the heavier, whichever comes first.
        weight = max(
            [1, sum(t.weight for t in covered)]
            + [sum(t.weight for t in repeated if t.alternatives[0] <= o) for o in said_too]
        )
        # Shown as the user wrote it ("naming", not the list's "name") when it is one word
        # of the text; else as the list writes it (a Han word, whose terms are bigrams).
        one = len(covered) == 1 and covered[0].alternatives[0] == source
        shown = covered[0].words[0] if one else expansion.source.text
        own = [(source, shown)]
        own += [(o, e.text) for o, e in zip(others, equivalents, strict=True) if o in said_too]
        rest = [
            (o, f"{e.text} (for {shown})")
            for o, e in zip(others, equivalents, strict=True) if o not in said_too
        ]  # fmt: skip
        # Part of a phrase is credited (a memory with "test" has half of "unit test"), but
        # not part of a Han word: 合并 and 请求 alone are other words than 合并请求.
        parts = () if han else tuple(covered)
        for term in repeated:  # what the other form brought along is kept
            if term.parts or len(term.alternatives) > 1:
                own += list(zip(term.alternatives[: term.own], term.words, strict=False))
                rest += list(
                    zip(term.alternatives[term.own :], term.words[term.own :], strict=True)
                )
                parts += term.parts
            elif not _HAN_CHARACTER.search(term.words[0]):  # a word, not a bigram
                parts += (term,)
        wanted = [t for t in wanted if t not in covered and t not in repeated]
        alternatives: dict[frozenset[str], str] = {}  # each once, the user's own first
        for alternative, word in own + rest:
            alternatives.setdefault(alternative, word)
        own_count = len({alternative for alternative, _ in own})
        wanted.append(
            _Term(tuple(alternatives), tuple(alternatives.values()), weight=weight,
                  parts=parts, own=own_count)
        )  # fmt: skip
        for equivalent in equivalents:
            phrase = fts_phrase(equivalent.query)
            if phrase not in phrases:
                phrases.append(phrase)
    return wanted, phrases[:MAX_EQUIVALENT_PHRASES]


@functools.cache
def _stop_tokens() -> frozenset[str]:
    """The index tokens of the stopwords: an equivalent made only of them ("down", "at
    once") is no evidence."""
    return index_tokens(" ".join(ENGLISH_STOPWORDS))


def keyword_recall(store: MemoryStore, text: str, limit: int = 5) -> list[SearchHit]:
    """Memories ranked by bm25 over any of the text's terms and their equivalents, then by
    how many of the terms each one has, best first; none when even the best one shares
    too little with the text."""
    terms = recall_terms(text)
    wanted = _index_terms(terms)
    if not wanted or limit <= 0:
        return []
    wanted, equivalents = _with_equivalents(text, wanted)
    phrases = number_phrases(text) * NUMBER_PHRASE_WEIGHT
    candidates = max(limit, RERANK_CANDIDATES)
    # Ids and scores first: the memories are loaded once, for the best candidates only.
    own = store.rank_ids(terms + phrases, candidates)
    other = store.rank_ids(equivalents, candidates) if equivalents else {}
    combined = {i: own.get(i, 0.0) + EQUIVALENT_WEIGHT * other.get(i, 0.0) for i in own | other}
    best = sorted(combined, key=lambda i: (-combined[i], i))[:candidates]
    records = store.by_ids(best)
    hits = [SearchHit(records[i], combined[i]) for i in best if i in records]
    total = sum(term.weight for term in wanted)
    rescored = []
    for hit in hits:
        in_name = index_tokens(hit.memory.name)
        tokens = in_name | index_tokens(hit.memory.description) | index_tokens(hit.memory.body)
        credited = [term.credit(tokens) for term in wanted]
        shared = sum(weight for weight, _ in credited)
        # The name clause of the floor takes the user's own words only.
        named = any(term.credit(in_name, own_words=True)[0] for term in wanted)
        score = hit.score * (shared / total) ** COORDINATION
        matched = tuple(word for _, words in credited for word in words)
        rescored.append((score, shared, named, hit.memory, matched))
    if not rescored:
        return []
    rescored.sort(key=lambda row: row[0], reverse=True)  # stable: bm25 order breaks ties
    _, shared, named, _, _ = rescored[0]
    required = MIN_SHARED_TERMS if total > MIN_SHARED_TERMS else 1
    if shared < required and not named:
        return []
    return [SearchHit(memory, score, words) for score, _, _, memory, words in rescored[:limit]]


# Semantic recall (optional: the `semantic` extra and its model, see memstore/recall/semantic.py)
# adds what the words miss ("What pets does Nate have?" for "Nate adopted a dog named Max").
# The best SEMANTIC_CANDIDATES by keywords and the SEMANTIC_CANDIDATES nearest in meaning are
# ranked by (1 - SEMANTIC_WEIGHT) x bm25 / best bm25 + SEMANTIC_WEIGHT x cosine similarity.
# The relevance floor still holds: when no memory shares enough words, nothing is recalled.
# Measured, R@5 / hit@5 (benchmarks/bench_recall.py): locomo_dev keywords .669 / .758;
# with weight .5 .708 / .810, .6 .713 / .813, .7 .719 / .819: all three reach the targets,
# .6 is in the middle. recall_dev .936 -> .938 at each (en .934 -> .938, hit@5 .979 -> 1).
# One vector of the description and body together; at .6, of the description alone .706 /
# .800, of the body alone .708 / .805, the better of the two .710 / .803. Reciprocal rank
# fusion instead of the weighted sum: .679 / .778.
# The model is English: on text with Han characters recall_dev's Chinese queries fell from
# .952 to .857, so such text is left to the keyword path.
SEMANTIC_WEIGHT = 0.6
SEMANTIC_CANDIDATES = 30
# A memory that shares no word with the text joins only when at least this near in meaning:
# otherwise the nearest of unrelated memories (cosine 0 to 0.15 here) would fill every free
# slot once one keyword hit passes the floor. locomo_dev: .713 -> .712 R@5 at 0.3 (0.2 to
# 0.5: within .002).
SEMANTIC_MIN_SIMILARITY = 0.3
# And after the best memory, one that shares a word but is this far in meaning is left out:
# the keyword path fills free slots with memories that share one common word ("code").
# Measured on recall_dev (its English turns): memories returned 4.40 -> 4.03 per turn, and
# of those relevant .237 -> .280, at no cost in R@5 (.938) from 0 to 0.2; at 0.25 R@5 fell
# to .916. locomo_dev unchanged. 0.15 keeps a margin below that.
SEMANTIC_KEEP = 0.15
# The text compared in meaning is the newest user message, at most this long: the encoder's
# time grows with the text (about 0.4 ms per token here), and the newest message is what
# the turn is about. The keyword path still reads the last RECENT_USER_TURNS messages.
SEMANTIC_TEXT_MAX_CHARS = 1_000


def offline_recall(
    store: MemoryStore,
    text: str,
    limit: int = 5,
    *,
    newest: str | None = None,
    semantic: SemanticIndex | None = None,
) -> tuple[list[SearchHit], bool]:
    """The memories for `text` without a model, best first, and whether semantic recall
    took part: keyword recall, fused with semantic similarity to `newest` (the newest
    message; `text` when not given) when given the store's `semantic` index, its model is
    there and the text is not Chinese."""
    focus = (newest if newest is not None else text).strip()[:SEMANTIC_TEXT_MAX_CHARS]
    if (
        semantic is None
        or limit <= 0
        or not focus
        or _HAN_CHARACTER.search(focus)
        or semantic.unavailable_reason() is not None
    ):
        return keyword_recall(store, text, limit), False
    hits = keyword_recall(store, text, max(limit, SEMANTIC_CANDIDATES))
    if not hits:  # below the relevance floor: nothing, and the encoder need not run
        return [], False
    try:
        near = semantic.similarities(focus)
    except SemanticUnavailable as error:  # the model's files do not load: said once
        log.warning("recall: semantic recall is off: %s", error)
        return hits[:limit], False
    best_bm25 = max(hits[0].score, 1e-9)
    by_words = {hit.memory.id: hit for hit in hits}
    similar = {i: near.of(i) for i in [*by_words, *near.nearest(SEMANTIC_CANDIDATES)]}
    fused = {
        i: (1 - SEMANTIC_WEIGHT) * (by_words[i].score / best_bm25 if i in by_words else 0.0)
        + SEMANTIC_WEIGHT * (similarity or 0.0)
        for i, similarity in similar.items()
        if i in by_words or (similarity or 0.0) >= SEMANTIC_MIN_SIMILARITY
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


MEMORY_MAX_BYTES = 4_096
BLOCK_MAX_BYTES = 16_384
SELECTION_MAX_TOKENS = 64
# Selection runs before every model call of the agent: better a quick fallback than a wait.
SELECTION_TIMEOUT_S = 15.0
SELECTION_SYSTEM = (
    "You choose which saved memories a coding agent should see before answering the user. "
    "Reply with a JSON array of the indices of the memories that are clearly useful for the "
    "user's latest messages, most useful first, for example [3, 0]. Reply [] when none is. "
    "Reply with the array only."
)


@dataclass
class Recall:
    """What recall chose for a turn, and how."""

    names: list[str]
    # "model", "keyword", "keyword+semantic", or "none" when there was nothing to recall from
    path: str
    # Keyword path: bm25 score of each name (with semantic recall, the fused score).
    scores: dict[str, float] = field(default_factory=dict)
    # Why the keyword path was taken, or why nothing was recalled.
    reason: str = ""
    # Keyword path: the words of the text each memory has.
    matched: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # With semantic recall: each memory's cosine similarity to the newest message.
    similarity: dict[str, float] = field(default_factory=dict)


def recall(
    messages: Sequence[Mapping[str, Any]],
    max_items: int = 5,
    *,
    store: MemoryStore,
    client: Anthropic | None = None,
    semantic: SemanticIndex | None = None,
) -> Recall:
    """The memories for this turn: the model's choice (with a `client`), else offline
    recall (semantic too when given the store's `semantic` index)."""
    text = recent_user_text(messages)
    if not text:
        return Recall([], "none", reason="no recent user text")
    if store.count() == 0:
        return Recall([], "none", reason="no memories")
    newest = recent_user_text(messages, turns=1)  # what is compared in meaning
    reason = "offline"
    if client is not None:
        catalog = memory_catalog(
            store, text, SELECTION_CATALOG_MAX_ENTRIES, newest=newest, semantic=semantic
        )
        try:
            reply = ask_text(
                client,
                model=small_model_name(),
                system=SELECTION_SYSTEM,
                prompt=selection_prompt(text, [(m.name, m.description) for m in catalog]),
                max_tokens=SELECTION_MAX_TOKENS,
                timeout=SELECTION_TIMEOUT_S,
            )
            indices = parse_indices(reply, len(catalog), max_items)
            return Recall([catalog[i].name for i in indices], "model")
        except ModelUnavailable as error:
            reason = str(error)
        except ValueError as error:
            reason = f"unusable model reply: {error}"
        log.warning("recall: model selection failed (%s); using keyword recall", reason)
    hits, semantic_used = offline_recall(store, text, max_items, newest=newest, semantic=semantic)
    return Recall(
        [h.memory.name for h in hits],
        "keyword+semantic" if semantic_used else "keyword",
        {h.memory.name: h.score for h in hits},
        reason,
        {h.memory.name: h.matched for h in hits},
        {h.memory.name: h.similarity for h in hits if h.similarity is not None},
    )


# The selection prompt shows at most this many memories (about 70 bytes each): with more, the
# ones the keyword path ranks for the text come first, then the rest by name.
SELECTION_CATALOG_MAX_ENTRIES = 200
CATALOG_RELATED_ENTRIES = 50


def memory_catalog(
    store: MemoryStore,
    text: str,
    limit: int,
    *,
    newest: str | None = None,
    semantic: SemanticIndex | None = None,
) -> list[MemorySummary]:
    """The memories to show the model: all of them, or when there are more than `limit`,
    those the text is about first (`newest`: the newest message, compared in meaning; by
    default the end of the text)."""
    summaries = store.summaries()
    if len(summaries) <= limit:
        return summaries
    if newest is None:
        newest = text[-SEMANTIC_TEXT_MAX_CHARS:]
    hits, _ = offline_recall(store, text, CATALOG_RELATED_ENTRIES, newest=newest, semantic=semantic)
    related = [hit.memory.name for hit in hits]
    by_name = {summary.name: summary for summary in summaries}
    chosen = [by_name[name] for name in related if name in by_name]
    shown = set(related)
    chosen += [summary for summary in summaries if summary.name not in shown]
    return chosen[:limit]


def select_relevant_memories(
    messages: Sequence[Mapping[str, Any]],
    max_items: int = 5,
    *,
    store: MemoryStore,
    client: Anthropic | None = None,
) -> list[str]:
    """Names of the memories that matter for this turn, best first (the seed's API)."""
    return recall(messages, max_items, store=store, client=client).names


def selection_prompt(text: str, catalog: Sequence[tuple[str, str]]) -> str:
    lines = "\n".join(
        f"{i}: {name} — {description}" for i, (name, description) in enumerate(catalog)
    )
    return f"Recent user messages:\n{text}\n\nMemories:\n{lines}"


def parse_indices(reply: str, count: int, max_items: int) -> list[int]:
    """Indices from the model's reply: the first JSON array in it (inside a code fence or
    prose too), keeping in-range integers once each, at most `max_items`."""
    picked: list[int] = []
    for value in json_from_reply(reply, list):
        is_index = isinstance(value, int) and not isinstance(value, bool)
        if is_index and 0 <= value < count and value not in picked:
            picked.append(value)
    return picked[:max_items]


def load_memories(
    messages: Sequence[Mapping[str, Any]],
    *,
    store: MemoryStore,
    client: Anthropic | None = None,
    max_items: int = 5,
) -> str:
    """The <relevant_memories> block for this turn ("" when nothing is relevant)."""
    names = select_relevant_memories(messages, max_items, store=store, client=client)
    memories = [m for m in (store.find(name) for name in names) if m is not None]
    return memories_block(memories)


def memories_block(memories: Sequence[MemoryRecord], now: datetime | None = None) -> str:
    """The memories inside <relevant_memories>, as data: their text is escaped (as_data), so
    a memory can neither close the wrapper nor open a tag of its own."""
    if not memories:
        return ""
    now = now or datetime.now(UTC)
    parts: list[str] = []
    size = 0
    for shown, memory in enumerate(memories):
        part = _with_age(memory, now) + as_data(_cut(_rendered(memory), MEMORY_MAX_BYTES))
        part_size = len(part.encode())
        if size + part_size > BLOCK_MAX_BYTES:
            left = len(memories) - shown
            parts.append(
                f"[{left} more relevant memories left out: "
                f"this block is capped at {BLOCK_MAX_BYTES:,} bytes]\n"
            )
            break
        parts.append(part)
        size += part_size
    return "<relevant_memories>\n" + "\n".join(parts) + "</relevant_memories>"


def _rendered(memory: MemoryRecord) -> str:
    """The memory as its file; a memory that cannot be rendered (frontmatter nested too
    deep, for one) is shown without its extra keys rather than breaking the turn."""
    from memstore.files.format import render_memory_file

    try:
        return render_memory_file(memory)
    except (RecursionError, ValueError, TypeError) as error:
        log.warning("memory %r shown without its extra keys: %s", memory.name, type(error).__name__)
        head = f"name: {memory.name}\ndescription: {memory.description}\ntype: {memory.type}"
        return f"---\n{head}\n---\n{memory.body}\n"


# Everything that reads as an angle bracket, not only < and > (fullwidth, small, CJK and
# mathematical forms, and the negated signs whose compatibility form holds one), is escaped
# like them: recalled text cannot spell a tag, whatever case, spacing, width or zero-width
# characters it uses.
_LOOKS_LIKE_OPEN = "<\uff1c\ufe64\u2039\u3008\u2329\u27e8\u02c2\u276e\u1438\u226e"
_LOOKS_LIKE_CLOSE = ">\uff1e\ufe65\u203a\u3009\u232a\u27e9\u02c3\u276f\u1433\u226f"
_AS_DATA = str.maketrans(
    {"&": "&amp;"}
    | dict.fromkeys(_LOOKS_LIKE_OPEN, "&lt;")
    | dict.fromkeys(_LOOKS_LIKE_CLOSE, "&gt;")
)


def as_data(text: str) -> str:
    """`text` (recalled memories, the memory index) escaped for the prompt: &, < and > (and
    their look-alikes) as &amp;, &lt; and &gt;."""
    return text.translate(_AS_DATA)


def _with_age(memory: MemoryRecord, now: datetime) -> str:
    saved = datetime.strptime(memory.updated_at, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    days = (now - saved).days
    if days < 1:
        return ""
    unit = "day" if days == 1 else "days"
    return f"(saved {days} {unit} ago — verify against the current code before relying on it)\n"


def _cut(text: str, limit: int) -> str:
    data = text.encode()
    if len(data) <= limit:
        return text
    kept = data[:limit].decode("utf-8", "ignore")
    return f"{kept}\n[cut: this memory is {len(data):,} bytes; the first {limit:,} are shown]\n"
