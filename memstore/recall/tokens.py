"""The tokens the FTS index holds for a text, computed outside the index: recall compares a
turn's words with its candidate memories' words exactly as the index would.
"""

from __future__ import annotations

import functools
import re
import sqlite3
import threading

from memstore.storage.search_terms import segment

# The FTS5 tokenizer of memory_fts (migration 0002). Tokens are computed with the same one.
TOKENIZE = "porter unicode61 remove_diacritics 2"
# What unicode61 keeps as token characters: letters and digits (an underscore separates).
_TOKEN = re.compile(r"[^\W_]+")
STEM_CACHE_MAX = 100_000
# Process-wide, and rightly so: a memo of a pure function (a word's tokens never change).
_stems: dict[str, tuple[str, ...]] = {}
# Each thread's in-memory FTS5 table that tokenizes words: it holds nothing between calls.
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
