"""Words that mean the same: a Chinese-English glossary of software terms and English
synonym groups, used by keyword recall to find a memory written in other words.

A user who asks in Chinese about a memory written in English (控制台 / console), or who says
"repo" where the memory says "repository", shares no token with it. Recall looks up each
word and phrase of the text here and also searches for its equivalents.

The lists are data files in memstore/recall/data/, written from general knowledge of the domain,
not from any evaluation set:
- glossary_zh_en.tsv: `中文<TAB>english; english ...`, used both ways.
- synonyms_en.txt: `word, word, ...`, each group interchangeable.

Everything is compared as index tokens (porter stems, Han bigrams), so "deploying" finds the
entry for "deploy", and 安全组 is found inside 安全组规则.

Building the lexicon from the lists is too slow for `memctl hook` to do before every
prompt: data/lexicon.json holds it as built (`python -m memstore.recall.lexicon` writes
it again; a test checks that it is what building gives), with a digest of the lists it was
built from. It is read when the lists are still those, and each word's entries are made from
it when a text first has that word.
"""

from __future__ import annotations

import json
import threading
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memstore.recall.tokens import token_sequence, token_words
from memstore.storage.search_terms import segment

# An entry's equivalents are searched as extra terms; a long list would flood the query.
MAX_ALTERNATIVES = 4
MAX_SAME_LANGUAGE = 3


@dataclass(frozen=True)
class Equivalent:
    """A phrase as the word lists write it, as FTS5 should search it (Han text as bigrams),
    and its index tokens."""

    text: str
    query: str
    tokens: tuple[str, ...]


@dataclass(frozen=True)
class Expansion:
    """A word or phrase of the text, and what else means the same. When words of different
    meanings share a stem (developer, development), each has its entry, with `surfaces`
    saying which words of the text it is for."""

    source: Equivalent
    equivalents: tuple[Equivalent, ...]
    surfaces: frozenset[str] = frozenset()

    def said_as(self, words: list[str]) -> bool:
        """Whether the text's `words` (where the tokens matched) are this entry's sense:
        an inflection of one of its words. A word of the lists is taken as written, or
        without a plural -s or final -e/-y ("managed" is no sense of "manage")."""
        if not self.surfaces or not self.source.text.isascii():  # Han words have one sense
            return True
        typed = [w for i, w in enumerate(words) if i == 0 or w != words[i - 1]]  # per word
        return any(_inflected(typed, surface.replace("-", " ").split(), LIST_WORD_ENDINGS)
                   for surface in self.surfaces)  # fmt: skip


@dataclass(frozen=True)
class Lexicon:
    # The phrases and their equivalents, by the phrase's first token, longest first.
    by_first_token: Mapping[str, list[Expansion]]

    def expansions(self, text: str) -> list[Expansion]:
        """The lexicon's phrases found in `text`, longest first at each position, without
        overlapping, each once, in the order they were said last."""
        # By identity: the lexicon's entries are unique, and comparing them is slow.
        found: dict[int, Expansion] = {}
        for entry in self._matches(token_words(text)):
            found.pop(id(entry), None)
            found[id(entry)] = entry
        return list(found.values())

    def _matches(self, token_words: list[tuple[str, str]]) -> Iterator[Expansion]:
        """The lexicon's phrases in the text's tokens: the longest at each position, without
        overlapping."""
        tokens = [token for token, _ in token_words]
        i = 0
        while i < len(tokens):
            for entry in self.by_first_token.get(tokens[i], ()):
                phrase = entry.source.tokens
                end = i + len(phrase)
                if tuple(tokens[i:end]) == phrase and entry.said_as(
                    [word for _, word in token_words[i:end]]
                ):
                    yield entry
                    i += len(phrase)
                    break
            else:
                i += 1


LISTS = ("glossary_zh_en.tsv", "synonyms_en.txt")
STORED = "lexicon.json"
WRITTEN_BY = "python -m memstore.recall.lexicon, from the lists: not to be edited"


def _data_file(name: str) -> Path:
    # The package's own folder, not importlib.resources: its import (tempfile, shutil, bz2,
    # lzma) costs memctl hook more than reading the files does.
    return Path(__file__).with_name("data") / name


def _data_lines(name: str) -> list[str]:
    text = _data_file(name).read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and line[0] != "#"]


def _equivalent(phrase: str) -> Equivalent:
    # Han words are searched as the index holds them: overlapping bigrams.
    return Equivalent(phrase, segment(phrase).strip(), tuple(token_sequence(phrase)))


# Process-wide, and rightly so: data read from the package once and never changed after.
_loaded: Lexicon | None = None
_loading = threading.Lock()


def lexicon() -> Lexicon:
    """The glossary and the synonym groups, read or built once per process."""
    global _loaded
    if _loaded is None:
        with _loading:  # threads that ask together wait for one build
            if _loaded is None:
                _loaded = _stored() or _build()
    return _loaded


def _lists_digest() -> str:
    # A checksum, not a secure hash: it tells a changed list, and hashlib's import costs more.
    checksum = 0
    for name in LISTS:
        checksum = zlib.crc32(_data_file(name).read_bytes(), checksum)
    return f"crc32:{checksum:08x}"


def _stored() -> Lexicon | None:
    """The lexicon as stored in data/lexicon.json, if it was built from the lists as they are.

    Only the file's lines are read here (write_stored writes one phrase, and one token's
    entries, a line); a line is parsed when a text first has its token: parsing the whole
    file would cost `memctl hook`, before every prompt, time that grows with the glossary,
    for the few tokens a text has."""
    try:
        lines = _data_file(STORED).read_text(encoding="utf-8").split("\n")
        entries_at = lines.index('"by_first_token":{')
    except (OSError, ValueError):
        return None
    laid_out = (
        len(lines) > 4
        and lines[0].startswith('{"written_by":')
        and lines[2] == '"phrases":['
        and lines[entries_at - 1] == "],"
        and lines[-2:] == ["}}", ""]
    )
    if not laid_out or lines[1] != f'"lists":{json.dumps(_lists_digest())},':
        return None
    # `"token":[...],` a line: a token has no quote nor backslash (write_stored checks),
    # so it is what lies between the first two quotes.
    entries = {line[1 : line.index('"', 1)]: line for line in lines[entries_at + 1 : -2]}
    return Lexicon(_StoredEntries(lines[3 : entries_at - 1], entries))


class _StoredEntries(Mapping[str, list[Expansion]]):
    """The stored entries of each first token, parsed and made into Expansions when first
    asked for: a text asks for a few of thousands."""

    def __init__(self, phrases: list[str], entries: dict[str, str]) -> None:
        self._phrases = phrases  # a line each: [text, query, tokens],
        self._entries = entries  # a token's line: "token":[[source, equivalents, surfaces], ...],
        self._made: dict[str, list[Expansion]] = {}

    def __getitem__(self, token: str) -> list[Expansion]:
        made = self._made.get(token)
        if made is None:
            line = self._entries[token]
            stored = json.loads(line[len(token) + 3 :].removesuffix(","))  # after `"token":`
            entries = [self._expansion(*entry) for entry in stored]
            # setdefault: threads that make one token together all get the first one's
            # entries (expansions() tells entries apart by identity).
            made = self._made.setdefault(token, entries)
        return made

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def _expansion(self, source: int, equivalents: list[int], surfaces: list[str]) -> Expansion:
        return Expansion(
            self._equivalent(source),
            tuple(self._equivalent(i) for i in equivalents),
            frozenset(surfaces),
        )

    def _equivalent(self, index: int) -> Equivalent:
        text, query, tokens = json.loads(self._phrases[index].removesuffix(","))
        return Equivalent(text, query, tuple(tokens))


def write_stored(path: Path) -> None:
    """Build the lexicon from the lists and store it at `path` (data/lexicon.json)."""
    built = _build()
    phrases: dict[Equivalent, int] = {}

    def number(equivalent: Equivalent) -> int:
        return phrases.setdefault(equivalent, len(phrases))

    by_first_token = {
        token: [
            [number(e.source), [number(q) for q in e.equivalents], sorted(e.surfaces)]
            for e in entries
        ]
        for token, entries in sorted(built.by_first_token.items())
    }

    def dumps(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    # _stored reads a token as the text between its line's first two quotes.
    escaped = [token for token in by_first_token if dumps(token) != f'"{token}"']
    if escaped:
        raise ValueError(f"tokens that JSON escapes cannot be stored: {escaped}")
    # One phrase, one token's entries, per line: a change to the lists is a readable diff.
    lines = [
        "{" + dumps("written_by") + ":" + dumps(WRITTEN_BY) + ",",
        dumps("lists") + ":" + dumps(_lists_digest()) + ",",
        dumps("phrases") + ":[",
        ",\n".join(dumps([e.text, e.query, list(e.tokens)]) for e in phrases),
        "],",
        dumps("by_first_token") + ":{",
        ",\n".join(f"{dumps(token)}:{dumps(entries)}" for token, entries in by_first_token.items()),
        "}}",
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _build() -> Lexicon:
    glossary: list[list[str]] = []
    for line in _data_lines("glossary_zh_en.tsv"):
        chinese, _, english = line.partition("\t")
        glossary.append([chinese.strip(), *(e.strip() for e in english.split(";"))])
    synonyms = [
        [word.strip() for word in line.split(",")] for line in _data_lines("synonyms_en.txt")
    ]
    # Which phrase is an equivalent of which, and in which group (a glossary row, a synonym
    # group). A glossary row links its Chinese word with each of its English words, both
    # ways, but not the English words with each other: they are the word's several senses
    # (打印 is "print" and "log"; print is no synonym of log).
    links: list[tuple[str, str, int]] = []
    for group, (word, *senses) in enumerate(glossary):
        links += [(word, sense, group) for sense in senses]
        links += [(sense, word, group) for sense in senses]
    for group, members in enumerate(synonyms, len(glossary)):
        links += [(a, b, group) for a in members for b in members if a != b]
    synonym_groups = range(len(glossary), len(glossary) + len(synonyms))
    phrases = {phrase for a, b, _ in links for phrase in (a, b)}
    # Stem every word in one pass of the tokenizer: a call per phrase costs far more.
    token_sequence(" ".join(phrases))
    parsed = {phrase: _equivalent(phrase) for phrase in phrases}
    # For each stem key, each word of the lists with it: its groups and its equivalents.
    groups_of: dict[tuple[str, ...], dict[str, set[int]]] = {}
    equivalents: dict[tuple[str, ...], dict[str, dict[tuple[str, ...], Equivalent]]] = {}
    for a, b, group in links:
        source, other = parsed[a], parsed[b]
        if not source.tokens or not other.tokens or source.tokens == other.tokens:
            continue
        groups_of.setdefault(source.tokens, {}).setdefault(source.text, set()).add(group)
        targets = equivalents.setdefault(source.tokens, {}).setdefault(source.text, {})
        targets.setdefault(other.tokens, other)
    by_first_token: dict[str, list[Expansion]] = {}
    for key, of_text in equivalents.items():
        meanings = _senses(groups_of[key], synonym_groups)
        for texts in meanings:
            found: dict[tuple[str, ...], Equivalent] = {}
            for text in texts:
                for tokens, equivalent in of_text[text].items():
                    found.setdefault(tokens, equivalent)
            source = parsed[texts[0]]
            surfaces = frozenset(texts) if len(meanings) > 1 else frozenset()
            entry = Expansion(source, _first_of_each_language(source, found), surfaces)
            by_first_token.setdefault(key[0], []).append(entry)
    for entries in by_first_token.values():
        entries.sort(key=lambda entry: len(entry.source.tokens), reverse=True)
    return Lexicon(by_first_token)


def _senses(groups_by_text: dict[str, set[int]], synonym_groups: range) -> list[list[str]]:
    """The words of the lists that share a stem, by meaning: inflections of one word
    (commit, commits) and words in a common synonym group are one sense; "generate" and
    "generics", or "developer" and "development", are two, told apart by the word the
    text has. (A glossary row joins no senses: its English words are several.)"""
    senses: list[tuple[list[str], set[int]]] = []
    for text, groups in groups_by_text.items():
        synonyms = {group for group in groups if group in synonym_groups}
        words_of_text = text.replace("-", " ").split()
        related = [
            sense
            for sense in senses
            if sense[1] & synonyms
            or any(_inflected(words_of_text, other.replace("-", " ").split()) for other in sense[0])
        ]
        merged = ([word for words, _ in related for word in words] + [text], set(synonyms))
        for sense in related:
            merged[1].update(sense[1])
            senses.remove(sense)
        senses.append(merged)
    return [words for words, _ in senses]


# Endings of an inflected word; a word of the lists is taken with a plural or final -e/-y
# cut only ("managed" in the lists is no inflection of "manage" in the text).
INFLECTIONS = ("ies", "ied", "ing", "es", "ed", "s", "e", "y", "d")
LIST_WORD_ENDINGS = ("ies", "es", "s", "e", "y")


def _inflected(a: list[str], b: list[str], b_endings: tuple[str, ...] = INFLECTIONS) -> bool:
    """Whether two phrases (as words) differ only in the inflection of their words: tests,
    testing and test; stage and staging; worry and worried; kid and kids."""
    return len(a) == len(b) and all(
        _bases(x) & _bases(y, b_endings) for x, y in zip(a, b, strict=True)
    )


def _bases(word: str, endings: tuple[str, ...] = INFLECTIONS) -> set[str]:
    """What a word may be an inflection of: itself, and itself without one of the endings
    (with a doubled consonant undoubled: running, run)."""
    bases = {word}
    for ending in endings:
        if word.endswith(ending) and len(word) - len(ending) >= 2:
            base = word[: -len(ending)]
            bases.add(base)
            if len(base) > 2 and base[-1] == base[-2]:
                bases.add(base[:-1])
    return bases


def _first_of_each_language(
    source: Equivalent, found: dict[tuple[str, ...], Equivalent]
) -> tuple[Equivalent, ...]:
    """At most MAX_ALTERNATIVES equivalents, at most MAX_SAME_LANGUAGE of them in the
    source's language, so that a word with many synonyms keeps its translation. (The
    lists hold English, which is ASCII, and Chinese.)"""
    english = source.text.isascii()
    same = [e for e in found.values() if e.text.isascii() == english][:MAX_SAME_LANGUAGE]
    other = [e for e in found.values() if e.text.isascii() != english]
    return tuple(same + other)[:MAX_ALTERNATIVES]


if __name__ == "__main__":
    write_stored(Path(__file__).with_name("data") / STORED)
