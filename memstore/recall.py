"""Recall: pick the few memories that matter for this turn, and inject them.

The keyword path (no model) ranks memories with FTS5/bm25 over segmented text: English words
are stemmed (porter), Han text is split into overlapping bigrams, stopwords are dropped, and
a relevance floor keeps one common word from dragging in unrelated memories.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memstore.search import query_terms
from memstore.store import MemoryStore, SearchHit

RECENT_USER_TURNS = 3
RECENT_TEXT_MAX_CHARS = 2_000

# Function words that say nothing about which memory matters (English, and the filler of a
# chat with a coding agent).
ENGLISH_STOPWORDS = frozenset(
    """
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its
itself just let me more most my myself no nor not now of off on once only or other our ours
ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours yourself yourselves
i'm it's don't can't what's how's let's should've i've i'd i'll we're they're isn't aren't
wasn't doesn't didn't won't wouldn't couldn't shouldn't also yes yeah ok okay please thanks
thank hi hello hey could would might must shall may get got make made want need like go
going know think see look one two use using used also still really maybe something anything
thing things way
""".split()  # noqa: SIM905  (a word list reads better as text)
)
# Han characters that carry grammar rather than topic; a bigram made only of them is noise.
CHINESE_STOP_CHARACTERS = frozenset(
    "的了是在我你他她它们这那有和就不也都要会吗呢吧啊怎么什个一把被给让到说对从还又很再能可以想请下上来去过后前里时为所如果但而且或者与及之其该此每些多少几哪谁啥呀哦嗯么样"
)
_HAN_BIGRAM = re.compile(r'"([\u3400-\u9fff\uf900-\ufaff])([\u3400-\u9fff\uf900-\ufaff])"')


def message_text(message: Mapping[str, Any]) -> str:
    """The text of a message: its string content, or its text blocks."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = [
            str(block.get("text", ""))
            for block in content
            if isinstance(block, Mapping) and block.get("type") == "text"
        ]
        return "\n".join(p for p in parts if p)
    return ""


def recent_user_text(messages: Iterable[Mapping[str, Any]]) -> str:
    """The last few user messages that carry text (a turn of tool results only does not use
    up a slot), oldest first, cut to the most recent RECENT_TEXT_MAX_CHARS characters."""
    texts: list[str] = []
    for message in reversed(list(messages)):
        if message.get("role") != "user":
            continue
        text = message_text(message).strip()
        if text:
            texts.append(text)
            if len(texts) == RECENT_USER_TURNS:
                break
    joined = "\n".join(reversed(texts))
    return joined[-RECENT_TEXT_MAX_CHARS:]


def recall_terms(text: str) -> list[str]:
    """Quoted FTS5 terms for recall: words and Han bigrams, stopwords dropped."""
    kept = []
    for term in query_terms(text):
        word = term.strip('"*')
        if word in ENGLISH_STOPWORDS or (word.isascii() and len(word) < 2):
            continue
        han = _HAN_BIGRAM.fullmatch(term)
        if han and all(c in CHINESE_STOP_CHARACTERS for c in han.groups()):
            continue
        kept.append(term)
    return kept


@dataclass(frozen=True)
class KeywordMatch:
    name: str
    score: float


def keyword_recall(store: MemoryStore, text: str, limit: int = 5) -> list[SearchHit]:
    """Memories ranked by bm25 over any of the text's terms, best first."""
    terms = recall_terms(text)
    if not terms:
        return []
    return store.rank(terms, limit)
