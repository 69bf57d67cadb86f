"""The words of a text that a search matched, marked: found as the index finds them.

The search matched tokens, not strings: porter stems of Latin words ("deploying" finds
"deployed") and overlapping bigrams of Han runs (部署 inside 自动部署流程). So the text is cut
into the same words, each word's tokens computed by the index's own tokenizer
(recall/tokens.py), and a word is marked when it has a token of the query's; in a Han run,
each bigram of the query's is marked.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass

from markupsafe import Markup

from memstore.recall.tokens import index_tokens
from memstore.storage.search_terms import HAN_CHARACTERS, search_terms
from memstore.ui.shown import shown

EXCERPT_CHARS = 240


@functools.cache
def _words() -> re.Pattern[str]:
    # A run of Han characters, or a word of other letters and digits (unicode61's tokens).
    return re.compile(f"([{HAN_CHARACTERS}]+)|([^\\W_{HAN_CHARACTERS}]+)")


@dataclass(frozen=True)
class Query:
    """What a search's words match: index tokens, and prefixes (`deploy*`)."""

    tokens: frozenset[str]
    prefixes: tuple[str, ...] = ()

    @classmethod
    def of(cls, text: str) -> Query:
        tokens: set[str] = set()
        prefixes: list[str] = []
        for term in search_terms(text):
            word = term.strip("*").strip('"').replace('""', '"')
            if term.endswith("*"):
                prefixes.append(word.lower())
            tokens |= index_tokens(word)
        return cls(frozenset(tokens), tuple(prefixes))

    def __bool__(self) -> bool:
        return bool(self.tokens or self.prefixes)

    def matches(self, word: str) -> bool:
        lowered = word.lower()
        if any(lowered.startswith(prefix) for prefix in self.prefixes):
            return True
        return not self.tokens.isdisjoint(index_tokens(word))


def spans(text: str, query: Query) -> list[tuple[int, int]]:
    """Where `text` has a word the query matched: (start, end), in order, not overlapping."""
    return list(_spans(text, query))


def _spans(text: str, query: Query) -> Iterator[tuple[int, int]]:
    """spans(), as they are found: an excerpt stops reading a long body past its window."""
    if not query:
        return
    pending: tuple[int, int] | None = None  # a Han run's bigrams join into one span
    for match in _words().finditer(text):
        han, word = match.group(1), match.group(2)
        start = match.start()
        if word is not None:
            if query.matches(word):
                yield (start, match.end())
            continue
        if len(han) == 1:
            if han in query.tokens:
                yield (start, start + 1)
            continue
        for i in range(len(han) - 1):
            if han[i : i + 2] not in query.tokens:
                continue
            if pending is not None and pending[1] > start + i:  # overlapping bigrams
                pending = (pending[0], start + i + 2)
            else:
                if pending is not None:
                    yield pending
                pending = (start + i, start + i + 2)
        if pending is not None:
            yield pending
            pending = None


def marked(text: str, query: Query) -> Markup:
    """`text` as safe HTML, the words the query matched in <mark>."""
    return _marked(text, spans(text, query), 0, len(text))


def excerpt(text: str, query: Query, chars: int = EXCERPT_CHARS) -> Markup:
    """Up to `chars` of `text` around its first matched word (its start when none), as
    marked() shows them, with "…" where text was left out."""
    found = _spans(text, query)
    first = next(found, None)
    start = 0
    if first is not None and first[0] > chars // 3:
        start = first[0] - chars // 3
    end = min(len(text), start + chars)
    shown_spans = []
    for span in itertools.chain([first] if first else [], found):
        if span[1] > end:
            break
        shown_spans.append(span)
    html = _marked(text, shown_spans, start, end)
    return Markup(("…" if start else "") + html + ("…" if end < len(text) else ""))


def _marked(text: str, found: list[tuple[int, int]], start: int, end: int) -> Markup:
    parts: list[str] = []
    position = start
    for a, b in found:
        parts.append(shown(text[position:a]))
        parts.append(Markup("<mark>") + shown(text[a:b]) + Markup("</mark>"))
        position = b
    parts.append(shown(text[position:end]))
    return Markup("".join(parts))
