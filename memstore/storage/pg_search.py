"""Full-text search on PostgreSQL, ranked as FTS5 ranks on SQLite.

A table memory_fts holds a tsvector per live memory under a GIN index, fed with the text as
memstore segments it for SQLite (Han bigrams, search.segment) and split into words as FTS5's
unicode61 splits it, then stemmed by the `memstore` text search configuration: the Porter
stemmer FTS5 uses, with no stopwords (queries leave memstore's own out, as on SQLite). Name,
description and body carry the weights A, B and D, so each position says its column.

The server computes FTS5's bm25 exactly (search.BM25_WEIGHTS per column, k1 1.2, b .75, idf
over all memories) and returns the best few: a trigger on memory_fts (revision 0006) keeps
memory_fts_term, each memory's words with their column-weighted counts, and memory_fts_stats,
the memories and words in all, so a query word reads its own rows only. A phrase of several
words is counted from the positions of the memories holding it (the GIN index finds them).
ts_rank was not used: it has no idf, and recall's choices rest on it (docs/postgresql.md).

The index is written by the write transaction (WriteTransaction.write), not by a trigger:
the segmentation is memstore's Python, which the server does not run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from memstore.storage.records import MemoryRecord
from memstore.storage.search import BM25_WEIGHTS, segment

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
        if memory.deleted_at is None:
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


def phrases(connection: Connection, terms: Sequence[str]) -> list[Phrase]:
    """Quoted FTS5 terms (`"word"`, `"two words"`, `"word"*`: search.query_terms) stemmed
    by the index's configuration, repeats kept (a repeated term counts again, as in FTS5)."""
    split = [(_WORDS.findall(term.rstrip("*").strip('"').lower()), term) for term in terms]
    distinct = sorted({word for parts, _ in split for word in parts})
    if not distinct:
        return []
    rows = connection.execute(
        f"SELECT w, array(SELECT lexeme FROM unnest(to_tsvector('{CONFIGURATION}', w))"
        " ORDER BY positions[1]) FROM unnest(%s::text[]) AS w",
        (distinct,),
    )
    stems = {word: tuple(lexemes) for word, lexemes in rows}
    found = []
    for parts, term in split:
        lexemes = tuple(lexeme for part in parts for lexeme in stems[part])
        if lexemes:
            found.append(Phrase(lexemes, term.endswith("*")))
    return found


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


def _phrase_hits(connection: Connection, wanted: list[Phrase]) -> list[tuple[Any, ...]]:
    """(phrase, memory, weighted count, words) of the phrases of several words, counted from
    the positions of the memories holding all their words (few: a phrase is specific)."""
    hits = []
    for i, phrase in enumerate(wanted):
        if len(phrase.lexemes) == 1:
            continue
        for memory_id, candidate in _candidates(connection, phrase).items():
            frequency = _frequency(phrase, candidate.positions)
            if frequency > 0:
                hits.append((i, memory_id, frequency, candidate.words))
    return hits


def _word_hits(wanted: list[Phrase]) -> tuple[list[str], list[Any]]:
    """SQL giving (phrase, memory, weighted count, words) for each phrase of one word, from
    the rows of memory_fts_term holding it (a prefix: a range of them), and its parameters."""
    parts, parameters = [], []
    for i, phrase in enumerate(wanted):
        if len(phrase.lexemes) > 1:
            continue
        (lexeme,) = phrase.lexemes
        if phrase.prefix:
            parts.append(
                f"SELECT {i}, memory_id, sum(frequency), words FROM memory_fts_term"
                " WHERE lexeme >= %s AND lexeme < %s GROUP BY memory_id, words"
            )
            parameters += [lexeme, _after(lexeme)]
        else:
            parts.append(
                f"SELECT {i}, memory_id, frequency, words FROM memory_fts_term WHERE lexeme = %s"
            )
            parameters.append(lexeme)
    return parts, parameters


def _after(prefix: str) -> str:
    """The first string after every string starting with `prefix`, in code point order."""
    following = ord(prefix[-1]) + 1
    if 0xD800 <= following < 0xE000:  # surrogates are no characters
        following = 0xE000
    return prefix[:-1] + chr(min(following, 0x10FFFF))


# FTS5's bm25 over the hits of each phrase: its idf counts the memories it is in (n), over
# the whole index (a word in most memories still counts a little, as in FTS5).
_SCORED = """
WITH hits (i, memory_id, frequency, words) AS ({hits}),
idf AS (
    SELECT i, ln(((SELECT documents FROM memory_fts_stats) - count(*) + 0.5)::float8
        / (count(*) + 0.5)) AS idf
    FROM hits GROUP BY i),
average AS (SELECT coalesce(nullif(words::float8 / greatest(documents, 1), 0), 1) AS words
    FROM memory_fts_stats)
SELECT h.memory_id, sum(
    CASE WHEN idf.idf > 0 THEN idf.idf ELSE 1e-6 END * (h.frequency * {k1_plus_1}::float8)
    / (h.frequency + {k1}::float8 * (1::float8 - {b}::float8 + {b}::float8 * h.words
        / (SELECT words FROM average)))) AS score
FROM hits AS h JOIN idf USING (i)
{where}
GROUP BY h.memory_id {having}
ORDER BY score DESC, h.memory_id LIMIT %s
"""


def bm25(
    connection: Connection,
    terms: Sequence[str],
    limit: int,
    *,
    any_term: bool,
    type: str | None = None,
) -> dict[int, float]:
    """FTS5's bm25 (higher is better) of the best `limit` live memories matching all of
    `terms` (any, with any_term), of `type` when given, by id, best first. Scored by the
    server: only the best rows come back."""
    wanted = phrases(connection, terms)
    if not wanted:
        return {}
    parts, parameters = _word_hits(wanted)
    phrase_hits = _phrase_hits(connection, wanted)
    if phrase_hits:
        parts.append("SELECT * FROM unnest(%s::int[], %s::int[], %s::float8[], %s::int[])")
        parameters += [list(column) for column in zip(*phrase_hits, strict=True)]
    if not parts:
        return {}
    where, having = "", ""
    if type is not None:
        where = "WHERE h.memory_id IN (SELECT id FROM memory WHERE type = %s)"
        parameters.append(type)
    if not any_term:
        having = f"HAVING count(*) = {len(wanted)}"
    query = _SCORED.format(
        hits=" UNION ALL ".join(parts), where=where, having=having, k1=K1, k1_plus_1=K1 + 1, b=B
    )
    rows = connection.execute(query, (*parameters, limit))
    return {memory_id: score for memory_id, score in rows}


def ranked_ids(connection: Connection, terms: Sequence[str], limit: int) -> dict[int, float]:
    """The bm25 (higher is better) of the best `limit` memories matching any of `terms`,
    by id."""
    return bm25(connection, terms, limit, any_term=True)


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
    followed by its score as search.ranked_matches gives it (lower is better)."""
    scores = bm25(connection, terms, limit, any_term=any_term, type=type)
    if not scores:
        return []
    selected = ", ".join(columns)
    rows = connection.execute(
        f"SELECT id, {selected} FROM memory WHERE id = ANY(%s::int[])", (list(scores),)
    ).fetchall()
    by_id = {row[0]: row[1:] for row in rows}
    return [(*by_id[i], -score) for i, score in scores.items() if i in by_id]
