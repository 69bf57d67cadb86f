"""Full-text search on PostgreSQL, ranked as FTS5 ranks on SQLite.

A table memory_fts holds a tsvector per live memory under a GIN index, fed with the text as
memstore segments it for SQLite (Han bigrams, search.segment) and split into words as FTS5's
unicode61 splits it, then stemmed by the `memstore` text search configuration: the Porter
stemmer FTS5 uses, with no stopwords (queries leave memstore's own out, as on SQLite). Name,
description and body carry the weights A, B and D, so each position says its column.

The GIN index finds the memories matching any query term; their terms' positions then give
FTS5's bm25 exactly (search.BM25_WEIGHTS per column, k1 1.2, b .75, idf over all memories):
ts_rank has no idf, and recall's choices rest on it (docs/postgresql.md).

The index is written by the write transaction (WriteTransaction.write), not by a trigger:
the segmentation is memstore's Python, which the server does not run.
"""

from __future__ import annotations

import math
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
    f"setweight(to_tsvector('{CONFIGURATION}', %s), 'A')"
    f" || setweight(to_tsvector('{CONFIGURATION}', %s), 'B')"
    f" || setweight(to_tsvector('{CONFIGURATION}', %s), 'D')"
)


def index(connection: SQLConnection, memories: Iterable[MemoryRecord]) -> None:
    """Bring the index in step with these memories' final states (in the writer's
    transaction): a live memory's words replace its old ones, a deleted one leaves."""
    live, gone = [], []
    for memory in memories:
        if memory.deleted_at is None:
            columns = [words(memory.name), words(memory.description), words(memory.body)]
            texts = [" ".join(column) for column in columns]
            live.append((memory.id, *texts, sum(len(column) for column in columns)))
        else:
            gone.append((memory.id,))
    if gone:
        connection.exec_driver_sql("DELETE FROM memory_fts WHERE memory_id = %s", gone)
    if live:
        connection.exec_driver_sql(
            f"INSERT INTO memory_fts (memory_id, document, words) VALUES (%s, {_DOCUMENT}, %s)"
            " ON CONFLICT (memory_id) DO UPDATE"
            " SET document = excluded.document, words = excluded.words",
            live,
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
    type: str
    words: int
    # lexeme -> {position: column weight}
    positions: dict[str, dict[int, str]]


def _candidates(connection: Connection, wanted: list[Phrase]) -> dict[int, Candidate]:
    """The memories matching any of `wanted`, with the positions of the wanted words."""
    exact = sorted({lexeme for phrase in wanted for lexeme in phrase.lexemes})
    prefixes = sorted({phrase.lexemes[-1] for phrase in wanted if phrase.prefix})
    rows = connection.execute(
        "SELECT f.memory_id, m.type, f.words, u.lexeme, u.positions, u.weights"
        " FROM memory_fts AS f JOIN memory AS m ON m.id = f.memory_id,"
        " unnest(f.document) AS u"
        " WHERE f.document @@ %s::tsquery AND m.deleted_at IS NULL"
        " AND (u.lexeme = ANY(%s::text[]) OR u.lexeme ^@ ANY(%s::text[]))",
        (" | ".join(phrase.tsquery() for phrase in wanted), exact, prefixes),
    )
    found: dict[int, Candidate] = {}
    for memory_id, type, length, lexeme, positions, weights in rows:
        candidate = found.setdefault(memory_id, Candidate(type, length, {}))
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


def bm25(
    connection: Connection, terms: Sequence[str], *, any_term: bool, type: str | None = None
) -> dict[int, float]:
    """FTS5's bm25 (higher is better) of every live memory matching all of `terms` (any,
    with any_term), of `type` when given, by id."""
    wanted = phrases(connection, terms)
    if not wanted:
        return {}
    candidates = _candidates(connection, wanted)
    rows, tokens = connection.execute("SELECT count(*), sum(words) FROM memory_fts").fetchone()
    average = (tokens or 0) / rows if rows else 1.0
    frequencies = {
        memory_id: _frequencies(wanted, candidate.positions)
        for memory_id, candidate in candidates.items()
    }
    # How many memories hold each phrase: its idf, over every memory (as FTS5 counts it).
    hits = [sum(1 for found in frequencies.values() if found[i] > 0) for i in range(len(wanted))]
    scores = {}
    for memory_id, found in frequencies.items():
        candidate = candidates[memory_id]
        if (type is not None and candidate.type != type) or not any(found):
            continue
        if not any_term and not all(found):
            continue
        length = 1 - B + B * candidate.words / (average or 1.0)
        scores[memory_id] = sum(
            _idf(rows, hits[i]) * f * (K1 + 1) / (f + K1 * length)
            for i, f in enumerate(found)
            if f > 0
        )
    return scores


def _frequencies(wanted: list[Phrase], positions: dict[str, dict[int, str]]) -> list[float]:
    """Each phrase's weighted count in one memory; only the phrases whose first word the
    memory has are counted (a memory holds few of a query's words)."""
    found = [0.0] * len(wanted)
    for i, phrase in enumerate(wanted):
        if phrase.prefix or phrase.lexemes[0] in positions:
            found[i] = _frequency(phrase, positions)
    return found


def _idf(rows: int, hits: int) -> float:
    idf = math.log((rows - hits + 0.5) / (hits + 0.5))
    return idf if idf > 0 else 1e-6  # as FTS5: a word in most memories still counts a little


def ranked_ids(connection: Connection, terms: Sequence[str], limit: int) -> dict[int, float]:
    """The bm25 (higher is better) of the best `limit` memories matching any of `terms`,
    by id."""
    scores = bm25(connection, terms, any_term=True)
    best = sorted(scores, key=lambda i: (-scores[i], i))[:limit]
    return {memory_id: scores[memory_id] for memory_id in best}


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
    scores = bm25(connection, terms, any_term=any_term, type=type)
    best = sorted(scores, key=lambda i: (-scores[i], i))[:limit]
    if not best:
        return []
    selected = ", ".join(columns)
    rows = connection.execute(
        f"SELECT id, {selected} FROM memory WHERE id = ANY(%s::int[])", (best,)
    ).fetchall()
    by_id = {row[0]: row[1:] for row in rows}
    return [(*by_id[i], -scores[i]) for i in best if i in by_id]
