"""Model selection: the small model is shown a catalog of the memories (`i: name —
description`) and the recent user text, and answers with a JSON array of the indices of
those that matter for the turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from memstore.llm.client import ModelClient, ask_text, small_model_name
from memstore.llm.replies import json_from_reply
from memstore.recall.fusion import SEMANTIC_TEXT_MAX_CHARS, offline_recall
from memstore.storage.records import MemorySummary
from memstore.text import show_hidden

if TYPE_CHECKING:
    from memstore.recall.vectors import SemanticIndex
    from memstore.storage.reads import MemoryReads

SELECTION_MAX_TOKENS = 64
# Selection runs before every model call of the agent: better a quick fallback than a wait.
SELECTION_TIMEOUT_S = 15.0
SELECTION_SYSTEM = (
    "You choose which saved memories a coding agent should see before answering the user. "
    "Reply with a JSON array of the indices of the memories that are clearly useful for the "
    "user's latest messages, most useful first, for example [3, 0]. Reply [] when none is. "
    "Reply with the array only."
)
# The selection prompt shows at most this many memories (about 70 bytes each): with more, the
# ones the offline path ranks for the text come first, then the rest by name.
SELECTION_CATALOG_MAX_ENTRIES = 200
CATALOG_RELATED_ENTRIES = 50


def model_selection(
    client: ModelClient, text: str, catalog: Sequence[MemorySummary], max_items: int
) -> list[str]:
    """The names of the memories of `catalog` the model chooses for `text`, best first.
    ModelUnavailable when it cannot be asked; ValueError for a reply without an array."""
    reply = ask_text(
        client,
        model=small_model_name(),
        system=SELECTION_SYSTEM,
        prompt=selection_prompt(text, [(m.name, m.description) for m in catalog]),
        max_tokens=SELECTION_MAX_TOKENS,
        timeout=SELECTION_TIMEOUT_S,
    )
    return [catalog[i].name for i in parse_indices(reply, len(catalog), max_items)]


def memory_catalog(
    store: MemoryReads,
    text: str,
    limit: int,
    *,
    newest: str | None = None,
    semantic: SemanticIndex | None = None,
) -> list[MemorySummary]:
    """The memories to show the model: all of them, or when there are more than `limit`,
    those the text is about first (`newest`: the newest message, compared in meaning; by
    default the end of the text). One changed outside memstore is left out, with a line on
    stderr (storage/unaltered.py)."""
    summaries = [MemorySummary(m.name, m.type, m.description) for m in store.unaltered_all()]
    if len(summaries) <= limit:
        return summaries
    if newest is None:
        newest = text[-SEMANTIC_TEXT_MAX_CHARS:]
    hits, _ = offline_recall(store, text, CATALOG_RELATED_ENTRIES, newest=newest, semantic=semantic)
    related = [hit.memory.name for hit in hits]
    by_name = {summary.name: summary for summary in summaries}
    chosen = [by_name[name] for name in related if name in by_name]
    shown = set(related)
    chosen += [summary for summary in summaries if summary.name not in shown]
    return chosen[:limit]


def selection_prompt(text: str, catalog: Sequence[tuple[str, str]]) -> str:
    lines = "\n".join(
        f"{i}: {name} — {description}" for i, (name, description) in enumerate(catalog)
    )
    # What no one would see in a memory or a message is shown to the model as \u{…}.
    return show_hidden(f"Recent user messages:\n{text}\n\nMemories:\n{lines}")


def parse_indices(reply: str, count: int, max_items: int) -> list[int]:
    """Indices from the model's reply: the first JSON array in it (inside a code fence or
    prose too), keeping in-range integers once each, at most `max_items`."""
    picked: list[int] = []
    for value in json_from_reply(reply, list):
        is_index = isinstance(value, int) and not isinstance(value, bool)
        if is_index and 0 <= value < count and value not in picked:
            picked.append(value)
    return picked[:max_items]
