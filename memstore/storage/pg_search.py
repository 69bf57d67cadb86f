"""Full-text search on PostgreSQL: a tsvector per live memory (table memory_fts, GIN-indexed),
fed with the text as memstore segments it for SQLite (Han bigrams, search.segment) and split
into words as FTS5 splits it; PostgreSQL's `english` configuration stems them and drops its
stopwords. Queries are the same quoted terms SQLite's get (search.query_terms).

The index is written by the write transaction (WriteTransaction.write), not by a trigger:
the segmentation is memstore's Python, which the server does not run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from memstore.storage.records import MemoryRecord
from memstore.storage.search import segment

if TYPE_CHECKING:
    from sqlalchemy import Connection as SQLConnection

    from memstore.storage.dbapi import Connection

CONFIGURATION = "english"
# name, description, body as tsvector weights A, B and D; ts_rank's weights for D, C, B, A
# (each at most 1): search.BM25_WEIGHTS's 5 : 3 : 1.
WEIGHTS = "'{0.2, 0, 0.6, 1.0}'"
_WORDS = re.compile(r"\w+")


def words(text: str) -> str:
    """`text` as the words FTS5's unicode61 sees: Han runs in bigrams, everything between
    words (hyphens, dots, slashes) a separator, so that `example.com` is two words here too."""
    return " ".join(_WORDS.findall(segment(text).lower()))


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
            texts = (words(memory.name), words(memory.description), words(memory.body))
            live.append((memory.id, *texts))
        else:
            gone.append((memory.id,))
    if gone:
        connection.exec_driver_sql("DELETE FROM memory_fts WHERE memory_id = %s", gone)
    if live:
        connection.exec_driver_sql(
            f"INSERT INTO memory_fts (memory_id, document) VALUES (%s, {_DOCUMENT})"
            " ON CONFLICT (memory_id) DO UPDATE SET document = excluded.document",
            live,
        )


def tsquery(terms: Sequence[str], *, any_term: bool) -> str:
    """Quoted FTS5 terms (`"word"`, `"word"*`) as to_tsquery's text: each word a quoted
    lexeme, a prefix `:*`, joined by & (all) or | (any). Words are \\w+: no quote in them."""
    lexemes = []
    for term in terms:
        word = term.rstrip("*").strip('"').replace('""', '"')
        for part in _WORDS.findall(word.lower()):
            lexemes.append(f"'{part}'" + (":*" if term.endswith("*") else ""))
    return (" | " if any_term else " & ").join(lexemes)


_SCORED = (
    f"SELECT f.memory_id, ts_rank({WEIGHTS}, f.document, q.query) AS score"
    f" FROM memory_fts AS f, to_tsquery('{CONFIGURATION}', %s) AS q(query)"
    " WHERE f.document @@ q.query"
)


def ranked_ids(connection: Connection, terms: Sequence[str], limit: int) -> dict[int, float]:
    """The relevance (higher is better) of the best `limit` memories matching any of
    `terms`, by id."""
    query = tsquery(terms, any_term=True)
    if not query:
        return {}
    rows = connection.execute(
        f"{_SCORED} ORDER BY score DESC, f.memory_id LIMIT %s", (query, limit)
    )
    return {memory_id: float(score) for memory_id, score in rows}


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
    query = tsquery(terms, any_term=any_term)
    if not query:
        return []
    selected = ", ".join(f"m.{column}" for column in columns)
    of_type = "" if type is None else " AND m.type = %s"
    parameters: tuple[Any, ...] = (query,) if type is None else (query, type)
    return connection.execute(
        f"SELECT {selected}, -ranked.score FROM ({_SCORED}) AS ranked"
        " JOIN memory AS m ON m.id = ranked.memory_id"
        f" WHERE m.deleted_at IS NULL{of_type}"
        " ORDER BY ranked.score DESC, m.id LIMIT %s",
        (*parameters, limit),
    ).fetchall()
