"""What recall searches for in a conversation's text: its words as FTS5 terms (English words
stemmed, Han text as bigrams, stopwords dropped), the phrases around its numbers, and the
lexicon's equivalents of its words folded into the terms they stand for.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from memstore.recall.lexicon import Equivalent, Expansion, lexicon
from memstore.recall.tokens import index_tokens, token_sequence
from memstore.storage.search_terms import (
    ENGLISH_STOPWORDS,
    HAN_CHARACTERS,
    MAX_TERMS,
    fts_phrase,
    is_content_term,
    term_occurrences,
)

HAN_CHARACTER = re.compile(f"[{HAN_CHARACTERS}]")
# A long transcript (extraction) can hold hundreds of numbers: the last ones are searched.
MAX_NUMBER_PHRASES = 8
# Equivalents searched at most: each phrase costs time in the second query.
MAX_EQUIVALENT_PHRASES = 12
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")


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


def number_phrases(text: str) -> list[str]:
    """Quoted FTS5 phrases around the numbers of the text, the last MAX_NUMBER_PHRASES: a
    number says most next to its words ("9 November, 2023", "Python 3.12", "port 8080").
    Each run of non-stopwords with a number in it is cut to one word either side of its
    numbers."""
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


@dataclass(frozen=True)
class Term:
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
    parts: tuple[Term, ...] = ()
    own: int = 1

    def credit(self, tokens: frozenset[str]) -> tuple[int, list[str]]:
        """How much of this term a memory (its `tokens`) has, and as which words."""
        if self.prefix is not None:
            found = any(token.startswith(self.prefix) for token in tokens)
            return (self.weight, [self.words[0]]) if found else (0, [])
        for alternative, word in zip(self.alternatives, self.words, strict=False):
            if alternative <= tokens:
                return self.weight, [word]
        credited = [part.credit(tokens) for part in self.parts]
        return sum(weight for weight, _ in credited), [w for _, words in credited for w in words]

    def own_tokens(self) -> set[str]:
        """The tokens of the user's own words in this term, its parts' included."""
        tokens = {token for alternative in self.alternatives[: self.own] for token in alternative}
        return tokens.union(*(part.own_tokens() for part in self.parts))

    def includes(self, tokens: frozenset[str]) -> bool:
        """Whether `tokens` are one of this term's forms, or inside its first."""
        return tokens in self.alternatives or tokens <= self.alternatives[0]

    def is_folded(self) -> bool:
        """Whether the lexicon made this term: a phrase, or a word with equivalents."""
        return bool(self.parts) or len(self.alternatives) > 1


def index_terms(terms: list[str]) -> list[Term]:
    """The distinct terms (deploying and deploy are one), as index tokens."""
    found: list[Term] = []
    for term in terms:
        word = term.strip('"*').replace('""', '"')
        if term.endswith("*"):
            # FTS5 stems a prefix too: "deploying"* finds "Deploying" (deploi*).
            stems = token_sequence(word)
            candidate = Term((), (word + "*",), stems[0] if stems else word.lower())
        else:
            tokens = frozenset(index_tokens(word))
            candidate = Term((tokens,), (word,)) if tokens else Term((), ())
        known = any(
            (candidate.alternatives, candidate.prefix) == (other.alternatives, other.prefix)
            for other in found
        )
        if (candidate.alternatives or candidate.prefix) and not known:
            found.append(candidate)
    return found


def with_equivalents(text: str, wanted: list[Term]) -> tuple[list[Term], list[str]]:
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
        if any(t.includes(source) for t in wanted if t.is_folded()):
            continue  # already a term, or inside one ("unit test ... test")
        # The text's words the phrase is made of (unit, test; a Han word's bigrams).
        covered = [t for t in wanted if t.alternatives and t.alternatives[0] <= source]
        if not covered and source <= set().union(*(t.own_tokens() for t in wanted)):
            continue  # its words are all counted in other terms already
        equivalents = _evidence(expansion)
        # Equivalents the text says too, as phrases of the lexicon ("console 控制台"), and
        # the terms of the text they are made of (console; 控制, 制台).
        said_too = [frozenset(e.tokens) for e in equivalents if frozenset(e.tokens) in said]
        repeated = [
            t
            for t in wanted
            if t not in covered and t.alternatives and any(t.alternatives[0] <= o for o in said_too)
        ]
        folded = _folded_term(expansion, equivalents, covered, repeated, said_too)
        wanted = [t for t in wanted if t not in covered and t not in repeated] + [folded]
        for equivalent in equivalents:
            phrase = fts_phrase(equivalent.query)
            if phrase not in phrases:
                phrases.append(phrase)
    return wanted, phrases[:MAX_EQUIVALENT_PHRASES]


def _evidence(expansion: Expansion) -> list[Equivalent]:
    """The equivalents that are evidence of the expansion's word: not one that is part of
    the phrase itself (merge conflict: conflict), which would credit the whole phrase for one
    of its words, nor one made only of stopwords ("down")."""
    source = frozenset(expansion.source.tokens)
    return [
        e
        for e in expansion.equivalents
        if not set(e.tokens) <= _stop_tokens() and not frozenset(e.tokens) < source
    ]


def _folded_term(
    expansion: Expansion,
    equivalents: list[Equivalent],
    covered: list[Term],
    repeated: list[Term],
    said_too: list[frozenset[str]],
) -> Term:
    """One term for the expansion's word and its equivalents, in place of the text's terms
    it is made of (`covered`) and those of its equivalents the text says too (`repeated`)."""
    source = frozenset(expansion.source.tokens)
    # Shown as the user wrote it ("naming", not the list's "name") when it is one word of
    # the text; else as the list writes it (a Han word, whose terms are bigrams).
    one_word = len(covered) == 1 and covered[0].alternatives[0] == source
    shown = covered[0].words[0] if one_word else expansion.source.text
    own = [(source, shown)]
    rest = []
    for equivalent in equivalents:
        tokens = frozenset(equivalent.tokens)
        if tokens in said_too:
            own.append((tokens, equivalent.text))
        else:
            rest.append((tokens, f"{equivalent.text} (for {shown})"))
    # Part of a phrase is credited (a memory with "test" has half of "unit test"), but not
    # part of a Han word: 合并 and 请求 alone are other words than 合并请求.
    parts = () if HAN_CHARACTER.search(expansion.source.text) else tuple(covered)
    for term in repeated:  # what the other form brought along is kept
        if term.is_folded():
            own += zip(term.alternatives[: term.own], term.words, strict=False)
            rest += zip(term.alternatives[term.own :], term.words[term.own :], strict=True)
            parts += term.parts
        elif not HAN_CHARACTER.search(term.words[0]):  # a word, not a bigram
            parts += (term,)
    alternatives: dict[frozenset[str], str] = {}  # each once, the user's own first
    for alternative, word in own + rest:
        alternatives.setdefault(alternative, word)
    return Term(
        tuple(alternatives),
        tuple(alternatives.values()),
        weight=_weight(covered, repeated, said_too),
        parts=parts,
        own=len({alternative for alternative, _ in own}),
    )


def _weight(covered: list[Term], repeated: list[Term], said_too: list[frozenset[str]]) -> int:
    """A phrase weighs the words it is made of (a Han word, its bigrams, as a memory with
    the word itself would be credited without the lexicon); said in two forms, the
    heavier, whichever comes first."""
    in_other_forms = [
        sum(t.weight for t in repeated if t.alternatives[0] <= other) for other in said_too
    ]
    return max([1, sum(t.weight for t in covered), *in_other_forms])


@functools.cache
def _stop_tokens() -> frozenset[str]:
    """The index tokens of the stopwords: an equivalent made only of them ("down", "at
    once") is no evidence."""
    return index_tokens(" ".join(ENGLISH_STOPWORDS))
