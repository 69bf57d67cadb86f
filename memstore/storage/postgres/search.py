"""Full-text search on PostgreSQL, ranked as FTS5 ranks on SQLite.

A table memory_fts holds a tsvector per live memory under a GIN index, fed with the text as
memstore segments it for SQLite (Han bigrams, search_terms.segment) and split into words as FTS5's
unicode61 splits it, then stemmed by the `memstore` text search configuration: the Porter
stemmer FTS5 uses, with no stopwords (queries leave memstore's own out, as on SQLite). Name,
description and body carry the weights A, B and D, so each position says its column.

The server computes FTS5's bm25 exactly (search_terms.BM25_WEIGHTS per column, k1 1.2, b .75, idf
over all memories) and returns the best few. Triggers on memory_fts (revisions 0006, 0009)
keep memory_fts_term, each memory's words with their column-weighted counts (its key carries
them: a word's rows are an index-only scan), memory_fts_lexeme, how many memories hold each
word, and memory_fts_stats, the memories and words in all. A search is two statements: the
words stemmed with their idf's counts and the totals; then the score of the memories holding
them, each phrase's idf sent as a constant. When all words must match, a word in many more
memories than the rarest one is read at the rarest one's memories only. A phrase of several
words is counted from the positions of the memories holding it (the GIN index finds them).
ts_rank was not used: it has no idf, and recall's choices rest on it (docs/postgresql.md).

The index is written by the write transaction (WriteTransaction.write), not by a trigger:
the segmentation is memstore's Python, which the server does not run.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from memstore.storage.records import MemoryRecord
from memstore.storage.search_terms import BM25_WEIGHTS, segment

if TYPE_CHECKING:
    from sqlalchemy import Connection as SQLConnection

    from memstore.storage.dbapi import Connection

CONFIGURATION = "memstore"
# The tsvector weight of each column, and bm25's weight for it.
COLUMN_WEIGHTS = dict(zip("ABD", BM25_WEIGHTS, strict=True))
# FTS5's bm25 constants.
K1 = 1.2
B = 0.75
_WORDS = re.compile(r"\w+")


def words(text: str) -> list[str]:
    """`text` as the words FTS5's unicode61 sees: Han runs in bigrams, everything between
    words (hyphens, dots, slashes) a separator, so that `example.com` is two words here too."""
    return _WORDS.findall(segment(text).lower())


_DOCUMENT = (
    f"setweight(to_tsvector('{CONFIGURATION}', a), 'A')"
    f" || setweight(to_tsvector('{CONFIGURATION}', b), 'B')"
    f" || setweight(to_tsvector('{CONFIGURATION}', d), 'D')"
)


def index(connection: SQLConnection, memories: Iterable[MemoryRecord]) -> None:
    """Bring the index in step with these memories' final states (in the writer's
    transaction): a live memory's words replace its old ones, a deleted one leaves. One
    statement each, whatever the number of memories (the index's statement triggers, 0006)."""
    live: list[list[Any]] = [[], [], [], [], []]
    gone = []
    for memory in memories:
        if memory.is_live:
            columns = [words(memory.name), words(memory.description), words(memory.body)]
            texts = [" ".join(column) for column in columns]
            row = (memory.id, *texts, sum(len(column) for column in columns))
            for values, value in zip(live, row, strict=True):
                values.append(value)
        else:
            gone.append(memory.id)
    if gone:
        connection.exec_driver_sql(
            "DELETE FROM memory_fts WHERE memory_id = ANY(%s::int[])", (gone,)
        )
    if live[0]:
        connection.exec_driver_sql(
            f"INSERT INTO memory_fts (memory_id, document, words) SELECT id, {_DOCUMENT}, n"
            " FROM unnest(%s::int[], %s::text[], %s::text[], %s::text[], %s::int[])"
            " AS t (id, a, b, d, n)"
            " ON CONFLICT (memory_id) DO UPDATE"
            " SET document = excluded.document, words = excluded.words",
            tuple(live),
        )


class Phrase(NamedTuple):
    """A query term as the index holds it: its stemmed words in order; a prefix search
    matches any word starting with the last one."""

    lexemes: tuple[str, ...]
    prefix: bool

    def tsquery(self) -> str:
        quoted = [f"'{lexeme}'" for lexeme in self.lexemes]
        if self.prefix:
            quoted[-1] += ":*"
        return "(" + " <-> ".join(quoted) + ")"


class Query(NamedTuple):
    """A search's phrases, and what their idf needs: how many memories this role sees
    holding each phrase of one word (by lexeme and whether a prefix), and the index's
    totals."""

    phrases: list[Phrase]
    counts: dict[tuple[str, bool], int]
    documents: int
    words: int


# The stems of the query's words, in order; for each word that is a term of its own, how
# many memories this role sees holding it (memory_fts_lexeme, revision 0009: a row per
# privacy, under row-level security as the words' rows are); and the index's totals. One
# statement.
_TERMS = f"""
SELECT q.w, s.lexemes,
    CASE WHEN q.counted AND cardinality(s.lexemes) = 1 THEN
        (SELECT coalesce(sum(documents), 0) FROM memory_fts_lexeme AS l
         WHERE l.lexeme = s.lexemes[1]) END,
    (SELECT documents FROM memory_fts_stats), (SELECT words FROM memory_fts_stats)
FROM unnest(%s::text[], %s::bool[]) AS q (w, counted)
CROSS JOIN LATERAL (SELECT array(SELECT lexeme FROM unnest(to_tsvector('{CONFIGURATION}', q.w))
    ORDER BY positions[1]) AS lexemes) AS s
"""
# How many memories hold a word starting with each prefix (a range of the key: its C
# collation orders by code point).
_PREFIXES = (
    "SELECT p, (SELECT count(DISTINCT memory_id) FROM memory_fts_term"
    " WHERE lexeme >= p AND lexeme < a) FROM unnest(%s::text[], %s::text[]) AS q (p, a)"
)


def phrases(connection: Connection, terms: Sequence[str]) -> list[Phrase]:
    """Quoted FTS5 terms (`"word"`, `"two words"`, `"word"*`: search_terms.query_terms) stemmed
    by the index's configuration, repeats kept (a repeated term counts again, as in FTS5)."""
    return query(connection, terms).phrases


def query(connection: Connection, terms: Sequence[str]) -> Query:
    """`terms` as phrases (see `phrases`), with the counts of those of one word."""
    split = [(_WORDS.findall(term.rstrip("*").strip('"').lower()), term) for term in terms]
    distinct = sorted({word for parts, _ in split for word in parts})
    if not distinct:
        return Query([], {}, 0, 0)
    alone = {parts[0] for parts, term in split if len(parts) == 1 and not term.endswith("*")}
    rows = connection.execute(_TERMS, (distinct, [word in alone for word in distinct])).fetchall()
    stems: dict[str, tuple[str, ...]] = {}
    counts: dict[tuple[str, bool], int] = {}
    for word, lexemes, count, _, _ in rows:
        stems[word] = tuple(lexemes)
        if count is not None:
            counts[(lexemes[0], False)] = count
    found = []
    for parts, term in split:
        lexemes = tuple(lexeme for part in parts for lexeme in stems[part])
        if lexemes:
            found.append(Phrase(lexemes, term.endswith("*")))
    prefixes = sorted({p.lexemes[0] for p in found if p.prefix and len(p.lexemes) == 1})
    if prefixes:
        counted = connection.execute(_PREFIXES, (prefixes, [_after(p) for p in prefixes]))
        counts.update(((prefix, True), count) for prefix, count in counted)
    documents, words = rows[0][3:]
    return Query(found, counts, documents or 0, words or 0)


class Candidate(NamedTuple):
    words: int
    # lexeme -> {position: column weight}
    positions: dict[str, dict[int, str]]


def _candidates(connection: Connection, phrase: Phrase) -> dict[int, Candidate]:
    """The memories matching `phrase`, with the positions of its words."""
    exact = list(phrase.lexemes)
    prefixes = [phrase.lexemes[-1]] if phrase.prefix else []
    rows = connection.execute(
        "SELECT f.memory_id, f.words, u.lexeme, u.positions, u.weights"
        " FROM memory_fts AS f, unnest(f.document) AS u"
        " WHERE f.document @@ %s::tsquery"
        " AND (u.lexeme = ANY(%s::text[]) OR u.lexeme ^@ ANY(%s::text[]))",
        (phrase.tsquery(), exact, prefixes),
    )
    found: dict[int, Candidate] = {}
    for memory_id, length, lexeme, positions, weights in rows:
        candidate = found.setdefault(memory_id, Candidate(length, {}))
        candidate.positions[lexeme] = dict(zip(positions, weights, strict=True))
    return found


def _frequency(phrase: Phrase, positions: dict[str, dict[int, str]]) -> float:
    """FTS5's weighted count of the phrase in one memory: each instance counts its column's
    weight."""
    first, *rest = phrase.lexemes
    if phrase.prefix and not rest:
        starts: dict[int, str] = {}
        for lexeme, found in positions.items():
            if lexeme.startswith(first):
                starts.update(found)
    else:
        starts = positions.get(first, {})
    total = 0.0
    for position, column in starts.items():
        last = len(rest)
        if all(
            _at(positions, lexeme, position + k, phrase.prefix and k == last) == column
            for k, lexeme in enumerate(rest, 1)
        ):
            total += COLUMN_WEIGHTS[column]
    return total


def _at(positions: dict[str, dict[int, str]], lexeme: str, position: int, prefix: bool) -> str:
    if not prefix:
        return positions.get(lexeme, {}).get(position, "")
    for word, found in positions.items():
        if word.startswith(lexeme) and position in found:
            return found[position]
    return ""


def _phrase_hits(
    connection: Connection, wanted: list[Phrase]
) -> dict[int, list[tuple[int, float, int]]]:
    """(memory, weighted count, words) of each phrase of several words, by its place in
    `wanted`, counted from the positions of the memories holding all their words (few: a
    phrase is specific)."""
    hits: dict[int, list[tuple[int, float, int]]] = {}
    for i, phrase in enumerate(wanted):
        if len(phrase.lexemes) == 1:
            continue
        found = hits[i] = []
        for memory_id, candidate in _candidates(connection, phrase).items():
            frequency = _frequency(phrase, candidate.positions)
            if frequency > 0:
                found.append((memory_id, frequency, candidate.words))
    return hits


def _after(prefix: str) -> str:
    """The first string after every string starting with `prefix`, in code point order."""
    following = ord(prefix[-1]) + 1
    if 0xD800 <= following < 0xE000:  # surrogates are no characters
        following = 0xE000
    return prefix[:-1] + chr(min(following, 0x10FFFF))


def idf(documents: int, holding: int) -> float:
    """FTS5's idf of a phrase `holding` memories of `documents` hold: a phrase in most of
    them still counts a little, as in FTS5."""
    value = math.log((documents - holding + 0.5) / (holding + 0.5))
    return value if value > 0 else 1e-6


# A phrase's part of a memory's bm25, from its weighted count in the memory (frequency) and
# the memory's length (words); the phrase's idf and the index's average length as
# parameters. In FTS5's order of operations, so that a term's part is the same
# floating-point number on both engines.
_TERM_SCORE = (
    f"%s::float8 * ((frequency * {K1 + 1}::float8) / (frequency + {K1}::float8"
    f" * (1::float8 - {B}::float8 + {B}::float8 * words / %s::float8)))"
)
# The memories each kind of phrase is in, with its weighted count and their length: the rows
# of a word; the rows of the words starting with a prefix; the hits of a phrase of several
# words (counted from positions, _phrase_hits), sent as lists.
_ROWS = {
    "word": "SELECT memory_id, frequency, words FROM memory_fts_term WHERE lexeme = %s{among}",
    "prefix": "SELECT memory_id, sum(frequency) AS frequency, words FROM memory_fts_term"
    " WHERE lexeme >= %s AND lexeme < %s{among} GROUP BY memory_id, words",
    "listed": "SELECT * FROM unnest(%s::int[], %s::float8[], %s::int[])"
    " AS h (memory_id, frequency, words)",
}
# With all phrases required, only the memories holding the rarest one can match: the rows of
# a word in more memories than PROBE_RATIO times as many are taken at those memories alone
# (a semi-join, which the planner makes a hash of them or a probe of the key per memory),
# so that the aggregate sees a few hundred rows rather than tens of thousands.
PROBE_RATIO = 2
_RAREST = {
    "word": "SELECT memory_id FROM memory_fts_term WHERE lexeme = %s",
    "prefix": "SELECT DISTINCT memory_id FROM memory_fts_term WHERE lexeme >= %s AND lexeme < %s",
    "listed": "SELECT unnest(%s::int[]) AS memory_id",
}
_AMONG_RAREST = " AND memory_id IN (SELECT memory_id FROM rarest)"


def _rows(phrase: Phrase, hits: list[tuple[int, float, int]] | None) -> tuple[str, list[Any]]:
    """Which of _ROWS gives the memories holding `phrase`, and its parameters."""
    if hits is not None:
        return "listed", [list(column) for column in zip(*hits, strict=True)] or [[], [], []]
    (lexeme,) = phrase.lexemes
    if phrase.prefix:
        return "prefix", [lexeme, _after(lexeme)]
    return "word", [lexeme]


def bm25(
    connection: Connection,
    terms: Sequence[str],
    limit: int,
    *,
    any_term: bool,
    type: str | None = None,
    columns: Sequence[str] = (),
) -> list[tuple[Any, ...]]:
    """FTS5's bm25 (higher is better) of the best `limit` live memories matching all of
    `terms` (any, with any_term), of `type` when given, best first: rows of the memory's id,
    its `columns` and the score. Scored by the server in one statement, after the one that
    stems the terms and counts the memories holding them (and one per phrase of several
    words): only the best rows come back."""
    found = query(connection, terms)
    wanted = found.phrases
    if not wanted:
        return []
    listed = _phrase_hits(connection, wanted)
    holding = [
        len(listed[i]) if i in listed else found.counts[(phrase.lexemes[0], phrase.prefix)]
        for i, phrase in enumerate(wanted)
    ]
    if not any_term and min(holding) == 0:
        return []
    average = found.words / max(found.documents, 1) or 1.0
    rarest = None if any_term else min(range(len(wanted)), key=holding.__getitem__)
    head, parts, parameters = "", [], list[Any]()
    kinds = [_rows(phrase, listed.get(i)) for i, phrase in enumerate(wanted)]
    for i, (kind, arguments) in enumerate(kinds):
        among = ""
        if rarest is not None and kind != "listed" and holding[i] > PROBE_RATIO * holding[rarest]:
            among = _AMONG_RAREST
            if not head:
                its_kind, its_arguments = kinds[rarest]
                head = f"WITH rarest AS MATERIALIZED ({_RAREST[its_kind]}) "
                parameters[:0] = its_arguments[:1] if its_kind == "listed" else its_arguments
        rows = _ROWS[kind].format(among=among)
        parts.append(f"SELECT {i} AS i, memory_id, {_TERM_SCORE} AS score FROM ({rows}) AS h")
        parameters += [idf(found.documents, holding[i]), average, *arguments]
    where, having = "", ""
    if type is not None:
        where = " WHERE s.memory_id IN (SELECT id FROM memory WHERE type = %s)"
        parameters.append(type)
    if not any_term:
        having = f" HAVING count(*) = {len(wanted)}"
    # Each memory's parts summed in the order of the phrases, as FTS5 sums them: whatever
    # the plan (a hash of the memories, or a sort of them, which does not keep the order of
    # equal keys), memories of the same words tie exactly, as on SQLite, and their ids decide.
    ranked = (
        f"SELECT s.memory_id, sum(s.score) AS score FROM (SELECT * FROM"
        f" ({' UNION ALL '.join(parts)}) AS u ORDER BY memory_id, i) AS s"
        f"{where} GROUP BY s.memory_id{having} ORDER BY score DESC, s.memory_id LIMIT %s"
    )
    parameters.append(limit)
    if columns:
        selected = ", ".join(f"m.{column}" for column in columns)
        ranked = (
            f"SELECT r.memory_id, {selected}, r.score FROM ({ranked}) AS r"
            " JOIN memory AS m ON m.id = r.memory_id ORDER BY r.score DESC, r.memory_id"
        )
    return connection.execute(head + ranked, parameters).fetchall()


def ranked_ids(connection: Connection, terms: Sequence[str], limit: int) -> dict[int, float]:
    """The bm25 (higher is better) of the best `limit` memories matching any of `terms`,
    by id."""
    return {row[0]: row[-1] for row in bm25(connection, terms, limit, any_term=True)}


def ranked_matches(
    connection: Connection,
    columns: Sequence[str],
    terms: Sequence[str],
    limit: int,
    type: str | None = None,
    *,
    any_term: bool,
) -> list[tuple[Any, ...]]:
    """Rows of live memories matching `terms` (of `type`, when given), best first, each
    followed by its score as sqlite/search.ranked_matches gives it (lower is better): the
    memories' rows come with their scores."""
    rows = bm25(connection, terms, limit, any_term=any_term, type=type, columns=columns)
    return [(*row[1:-1], -row[-1]) for row in rows]
