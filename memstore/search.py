"""Turning any text a user types into a safe FTS5 query, and the ranking weights.

User text never reaches MATCH as syntax: every word becomes a quoted FTS5 string, so quotes,
`-`, `:`, parentheses, AND/NOT/NEAR and emoji are plain text, never operators. A trailing
`*` on a word keeps its meaning as a prefix search.
"""

from __future__ import annotations

import functools
import re
import sqlite3
import threading
from typing import Any

# name, description, body: a word in the name or description says more than one in the body.
BM25_WEIGHTS = (5.0, 3.0, 1.0)
MAX_TERMS = 32
# A word, and a single `*` after it: a prefix search. Markdown's `**bold**` and `*italic*`
# (a star before the word too) are no prefix.
_WORD = re.compile(r"(\*?)(\w+)(\*(?!\*))?")


def query_terms(text: str) -> list[str]:
    """Quoted FTS5 terms for each distinct word of `text`, in order (at most MAX_TERMS)."""
    return list(dict.fromkeys(term_occurrences(text)))[:MAX_TERMS]


def term_occurrences(text: str) -> list[str]:
    """A quoted FTS5 term for each word of `text`, in order, repeats kept."""
    return [
        fts_phrase(word.lower()) + ("" if before else star)
        for before, word, star in _WORD.findall(segment(text))
    ]


def fts_phrase(text: str) -> str:
    """`text` as one quoted FTS5 string: its words as a phrase, never as syntax."""
    return '"' + text.replace('"', '""') + '"'


def match_expression(terms: list[str], *, any_term: bool = False) -> str:
    """All terms (implicit AND), or any of them (OR)."""
    return (" OR " if any_term else " ").join(terms)


def ranked_matches(
    connection: sqlite3.Connection, columns: list[str], expression: str, limit: int
) -> list[tuple[Any, ...]]:
    """Rows of live memories matching `expression`, best first, each followed by its bm25
    score (lower is better). Ranked inside the subquery, so only `limit` rows are joined.

    Runs on the DBAPI connection: a search is one statement, and SQLAlchemy's per-call
    overhead was most of its latency (p50 2.3 ms → about 1 ms at 10,000 memories).
    """
    selected = ", ".join(f"memory.{column}" for column in columns)
    return connection.execute(
        f"SELECT {selected}, ranked.score FROM ({_RANKED}) AS ranked"
        " JOIN memory ON memory.id = ranked.rowid ORDER BY ranked.score",
        (expression, limit),
    ).fetchall()


def ranked_ids(connection: sqlite3.Connection, expression: str, limit: int) -> dict[int, float]:
    """The bm25 score (higher is better) of the best `limit` memories matching `expression`,
    by id: no join, for recall to combine several queries before it loads any memory.
    The index holds live memories only."""
    rows = connection.execute(_RANKED, (expression, limit))
    return {rowid: -score for rowid, score in rows}


# The best `limit` rows of the index for a MATCH expression, with their bm25 (lower is better).
_RANKED = (
    f"SELECT rowid, bm25(memory_fts, {', '.join(str(w) for w in BM25_WEIGHTS)}) AS score"
    " FROM memory_fts WHERE memory_fts MATCH ? ORDER BY score LIMIT ?"
)


# -- recall: segmentation and query terms --------------------------------------------------

# Han characters (CJK unified ideographs, extensions A-B and compatibility ideographs).
HAN_CHARACTERS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002a6df"
_HAN_RUN = re.compile(f"[{HAN_CHARACTERS}]+")


def segment(text: str) -> str:
    """Text as the FTS index sees it: each run of Han characters becomes its overlapping
    bigrams, so that a two-character word (部署, 缩进) matches inside a longer run
    (自动部署流程). A lone character stays as it is. Latin text is left to FTS5 (porter).

    Registered as the SQL function memstore_segment, which the FTS triggers call.
    """
    if text.isascii():  # most text, and much cheaper to tell than to search for Han runs
        return text
    return _HAN_RUN.sub(_bigrams, text)


def _bigrams(match: re.Match[str]) -> str:
    run = match.group()
    if len(run) == 1:
        return f" {run} "
    return " " + " ".join(run[i : i + 2] for i in range(len(run) - 1)) + " "


# -- recall: the index's tokens of a text, computed outside the index ----------------------

# The FTS5 tokenizer of memory_fts (migration 0002). Tokens are computed with the same one.
TOKENIZE = "porter unicode61 remove_diacritics 2"
# What unicode61 keeps as token characters: letters and digits (an underscore separates).
_TOKEN = re.compile(r"[^\W_]+")
STEM_CACHE_MAX = 100_000
_stems: dict[str, tuple[str, ...]] = {}
_scratch = threading.local()


@functools.lru_cache(maxsize=4_096)
def index_tokens(text: str) -> frozenset[str]:
    """The distinct tokens the FTS index holds for `text`: segmented, then each word through
    the index's own tokenizer (porter stems), so that they compare with the index exactly.

    Cached, and so is each word: recall compares a turn with its candidate memories on
    every model call, and they are mostly the same memories, with words seen before.
    """
    stems = _word_tokens({w.lower() for w in _TOKEN.findall(segment(text))})
    return frozenset(token for tokens in stems.values() for token in tokens)


def _word_tokens(words: set[str]) -> dict[str, tuple[str, ...]]:
    """The tokens of each word: from the cache, or from the tokenizer (and then cached).
    Built from the answer, not read back from the cache, which may be cleared meanwhile
    (when full, or by another thread)."""
    found = {}
    unseen = []
    for word in words:
        cached = _stems.get(word)
        if cached is None:
            unseen.append(word)
        else:
            found[word] = cached
    if unseen:
        found.update(_tokenize_words(unseen))
    return found


def _tokenize_words(words: list[str]) -> dict[str, tuple[str, ...]]:
    """The tokens of each word, from a private in-memory FTS5 table of this thread; cached."""
    connection: sqlite3.Connection | None = getattr(_scratch, "connection", None)
    if connection is None:
        connection = sqlite3.connect(":memory:", isolation_level=None)
        connection.execute(f"CREATE VIRTUAL TABLE words USING fts5(word, tokenize = '{TOKENIZE}')")
        connection.execute("CREATE VIRTUAL TABLE tokens USING fts5vocab(words, instance)")
        _scratch.connection = connection
    if len(_stems) + len(words) > STEM_CACHE_MAX:
        _stems.clear()
    connection.execute("BEGIN")
    try:
        connection.executemany(
            "INSERT INTO words (rowid, word) VALUES (?, ?)", enumerate(words, start=1)
        )
        found: dict[int, list[str]] = {}
        for row, token in connection.execute("SELECT doc, term FROM tokens ORDER BY doc, offset"):
            found.setdefault(row, []).append(token)
    finally:
        connection.execute("ROLLBACK")  # the table stays empty
    tokens = {word: tuple(found.get(row, ())) for row, word in enumerate(words, start=1)}
    _stems.update(tokens)
    return tokens


def token_sequence(text: str) -> list[str]:
    """The index's tokens of `text` in order, repeats kept (index_tokens is the set)."""
    return [token for token, _ in token_words(text)]


def token_words(text: str) -> list[tuple[str, str]]:
    """Each index token of `text` in order, with the word it comes from (lowercased)."""
    words = [w.lower() for w in _TOKEN.findall(segment(text))]
    stems = _word_tokens(set(words))
    return [(token, w) for w in words for token in stems[w]]
