"""Full-text search on SQLite: the terms (search_terms.query_terms) as an FTS5 MATCH
expression, ranked by FTS5's bm25 with search_terms.BM25_WEIGHTS."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from memstore.storage.fields import LIVE_SQL
from memstore.storage.search_terms import BM25_WEIGHTS


def match_expression(terms: list[str], *, any_term: bool = False) -> str:
    """All terms (implicit AND), or any of them (OR)."""
    return (" OR " if any_term else " ").join(terms)


def ranked_matches(
    connection: sqlite3.Connection,
    columns: Sequence[str],
    expression: str,
    limit: int,
    type: str | None = None,
) -> list[tuple[Any, ...]]:
    """Rows of live memories matching `expression` (of `type`, when given), best first, each
    followed by its bm25 score (lower is better). Ranked inside the subquery, so only `limit`
    rows are joined.

    Runs on the DBAPI connection: a search is one statement, and SQLAlchemy's per-call
    overhead was most of its latency (benchmarks/bench_store.py measures it).
    """
    selected = ", ".join(f"memory.{column}" for column in columns)
    parameters: tuple[Any, ...]
    ranked, parameters = _RANKED, (expression, limit)
    if type is not None:
        ranked, parameters = _RANKED_OF_TYPE, (expression, type, limit)
    return connection.execute(
        f"SELECT {selected}, ranked.score FROM ({ranked}) AS ranked"
        " JOIN memory ON memory.id = ranked.rowid ORDER BY ranked.score",
        parameters,
    ).fetchall()


def ranked_ids(connection: sqlite3.Connection, expression: str, limit: int) -> dict[int, float]:
    """The bm25 score (higher is better) of the best `limit` memories matching `expression`,
    by id: no join, for recall to combine several queries before it loads any memory.
    The index holds live memories only."""
    rows = connection.execute(_RANKED, (expression, limit))
    return {rowid: -score for rowid, score in rows}


# The best `limit` rows of the index for a MATCH expression, with their bm25 (lower is better).
_SCORED = (
    f"SELECT rowid, bm25(memory_fts, {', '.join(str(w) for w in BM25_WEIGHTS)}) AS score"
    " FROM memory_fts WHERE memory_fts MATCH ?"
)
_RANKED = f"{_SCORED} ORDER BY score LIMIT ?"
# The same, among the memories of one type (filtered before the limit, not after it).
_RANKED_OF_TYPE = (
    f"{_SCORED} AND rowid IN (SELECT id FROM memory WHERE type = ? AND {LIVE_SQL})"
    " ORDER BY score LIMIT ?"
)
