"""Turning any text a user types into safe search terms, and the ranking weights: quoted
FTS5 strings, which both engines' searches take (sqlite/search.py, postgres/search.py).

User text never reaches MATCH as syntax: every word becomes a quoted FTS5 string, so quotes,
`-`, `:`, parentheses, AND/NOT/NEAR and emoji are plain text, never operators. A trailing
`*` on a word keeps its meaning as a prefix search.
"""

from __future__ import annotations

import functools
import re

# name, description, body: a word in the name or description says more than one in the body.
BM25_WEIGHTS = (5.0, 3.0, 1.0)
MAX_TERMS = 32
# A word, and a single `*` after it: a prefix search. Markdown's `**bold**` and `*italic*`
# (a star before the word too) are no prefix.
_WORD = re.compile(r"(\*?)(\w+)(\*(?!\*))?")
# Han characters (CJK unified ideographs, extensions A-B and compatibility ideographs).
HAN_CHARACTERS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002a6df"


# Function words that say nothing about which memory matters (English, and the filler of a
# chat with a coding agent). Common content words are left to bm25's idf: dropping them too
# cost recall (benchmarks/recall-notes.md#the-keyword-path).
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
thank hi hello hey could would might must shall may also still really maybe something
anything
""".split()  # noqa: SIM905  (a word list reads better as text)
)
# Han characters that carry grammar rather than topic; a bigram made only of them is noise.
CHINESE_STOP_CHARACTERS = frozenset(
    "的了是在我你他她它们这那有和就不也都要会吗呢吧啊怎么什个一把被给让到说对从还又很再能可以想请下上来去过后前里时为所如果但而且或者与及之其该此每些多少几哪谁啥呀哦嗯么样"
)


# The patterns over Han characters are compiled when first needed: compiling their ranges
# costs milliseconds, which `memctl hook` would pay before every English prompt too.
@functools.cache
def _han_bigram() -> re.Pattern[str]:
    return re.compile(f'"([{HAN_CHARACTERS}])([{HAN_CHARACTERS}])"')


@functools.cache
def _han_run() -> re.Pattern[str]:
    return re.compile(f"[{HAN_CHARACTERS}]+")


def query_terms(text: str) -> list[str]:
    """Quoted FTS5 terms for each distinct word of `text`, in order (at most MAX_TERMS)."""
    return list(dict.fromkeys(term_occurrences(text)))[:MAX_TERMS]


def search_terms(text: str) -> list[str]:
    """query_terms without stopwords: what `memctl search` matches. A stopword is in nearly
    every memory, so bm25 scores it about 0 and it would list them all as hits. A lone
    letter or digit is kept: a search names it on purpose ("phase b", "option 3")."""
    return [term for term in query_terms(text) if is_content_term(term, lone_ascii=True)][
        :MAX_TERMS
    ]


def is_content_term(term: str, *, lone_ascii: bool = False) -> bool:
    """Whether a quoted term says something about a memory's topic: not a stopword, not a
    lone ASCII letter or digit (unless `lone_ascii`), not a Han bigram or character made
    only of grammar characters."""
    word = term.strip('"*')
    if word in ENGLISH_STOPWORDS or (word.isascii() and len(word) < 2 and not lone_ascii):
        return False
    han = None if word.isascii() else _han_bigram().fullmatch(term)
    if han and all(c in CHINESE_STOP_CHARACTERS for c in han.groups()):
        return False
    # A lone Han character (a one-character run, as in "HTTP 的 ETag") is a stopword when it
    # is a stop character, as a bigram of two of them is.
    return word not in CHINESE_STOP_CHARACTERS


def term_occurrences(text: str) -> list[str]:
    """A quoted FTS5 term for each word of `text`, in order, repeats kept."""
    return [
        fts_phrase(word.lower()) + ("" if before else star)
        for before, word, star in _WORD.findall(segment(text))
    ]


def fts_phrase(text: str) -> str:
    """`text` as one quoted FTS5 string: its words as a phrase, never as syntax."""
    return '"' + text.replace('"', '""') + '"'


# -- segmentation ---------------------------------------------------------------------------


def segment(text: str) -> str:
    """Text as the FTS index sees it: each run of Han characters becomes its overlapping
    bigrams, so that a two-character word (部署, 缩进) matches inside a longer run
    (自动部署流程). A lone character stays as it is. Latin text is left to FTS5 (porter).

    Registered as the SQL function memstore_segment, which the FTS triggers call.
    """
    if text.isascii():  # most text, and much cheaper to tell than to search for Han runs
        return text
    return _han_run().sub(_bigrams, text)


def _bigrams(match: re.Match[str]) -> str:
    run = match.group()
    if len(run) == 1:
        return f" {run} "
    return " " + " ".join(run[i : i + 2] for i in range(len(run) - 1)) + " "
