"""Extraction: after a turn, ask the model what is worth remembering, and write it safely.

The model sees the end of the turn (the last messages, including the final assistant reply;
tool calls and results summarised, not dumped) and the memories that exist, and answers with
a JSON array of {name, type, description, body}. Every item is untrusted: it is validated
(name made kebab-case, one of the four types, non-empty and capped fields, no secrets) and
dropped with a logged reason when it fails, never written half. The items that pass are
written in one transaction; an item whose name exists updates that memory.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from memstore.errors import InvalidMemory, MemoryAltered, ModelUnavailable
from memstore.learning.proposal import ProposedMemory, proposed_memory
from memstore.llm.client import ModelClient, ask_text, small_model_name
from memstore.llm.messages import message_text, turn_start
from memstore.llm.replies import json_from_reply
from memstore.recall.keyword import keyword_recall
from memstore.recall.selection import memory_catalog
from memstore.storage.models import MemoryRecord, MemorySummary
from memstore.storage.store import MemoryStore
from memstore.storage.validation import NAME_PATTERN
from memstore.text import cut_middle, show_hidden

if TYPE_CHECKING:
    from memstore.recall.vectors import SemanticIndex

log = logging.getLogger(__name__)

ACTOR = "extraction"
RECENT_MESSAGES = 10
MAX_ITEMS_PER_TURN = 5
# A memory is a note, not a document.
ITEM_BODY_MAX_BYTES = 4_096
# Caps on what the model is shown. It sees the whole text of the memories it may update.
FULL_TEXT_RELATED = 8
FULL_TEXT_SMALL_STORE = 50
FULL_TEXT_MAX_CHARS = 2_000
FULL_TEXT_BUDGET_CHARS = 8_000
MESSAGE_MAX_CHARS = 4_000
TRANSCRIPT_MAX_CHARS = 24_000
CATALOG_MAX_ENTRIES = 200
EXTRACTION_MAX_TOKENS = 2_048
EXTRACTION_TIMEOUT_S = 60.0
# The failure of a conversation with no text in it: nothing was asked, nothing is wrong.
NOTHING_TO_LEARN = "nothing to learn from"

EXTRACTION_SYSTEM = """\
You maintain the long-term memory of a coding agent. Read the end of a conversation between \
the user and the agent, and decide what is worth remembering in future sessions.

Keep only durable facts that will still matter later:
- user: the user's preferences, role and way of working ("always use 4 spaces, never tabs").
- feedback: guidance the user gave on how the agent should work (corrections, confirmations).
- project: facts about the project that the code does not say (decisions, deadlines, owners).
- reference: where to find things outside the code (dashboards, tickets, documents).
Do not keep what is temporary, what the code or git history already says, or this turn's task.

Never keep secrets: no API keys, tokens, passwords, private keys or connection strings with \
credentials. If one matters, remember only where it is kept (for example "the key is in .env").

The existing memories are listed. If something new changes or extends one of them, reuse its \
exact name and give its full new description and body; do not create a second memory on the \
same subject.

Reply with a JSON array only, at most {max_items} items, each \
{{"name": "kebab-case-name", "type": "user|feedback|project|reference", \
"description": "one line", "body": "the memory in a few sentences"}}. \
Reply [] when nothing is worth remembering, which is the usual case."""


@dataclass
class Extraction:
    """What one extraction did."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    # Items the model proposed that were not written, each with why.
    dropped: list[str] = field(default_factory=list)
    # Why the model was not asked or its answer was unusable ("" when it answered).
    failure: str = ""
    # The model could not be reached (as opposed to an answer that was unusable).
    unavailable: bool = False
    run_id: str | None = None

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated)


def extract_memories(
    messages: Sequence[Mapping[str, Any]],
    *,
    store: MemoryStore,
    client: ModelClient | None,
    session_id: str | None = None,
    model: str | None = None,
    max_items: int = MAX_ITEMS_PER_TURN,
    semantic: SemanticIndex | None = None,
    actor: str = ACTOR,
    command: str | None = None,
    all_new: bool = False,
) -> Extraction:
    """Learn from the end of a conversation; never raises for a model failure (it is
    logged and reported in `Extraction.failure`).

    `all_new`: every message of `messages` is new, none was reviewed yet (a stretch of a
    Claude Code transcript): all of it is the turn to learn from, not only its end."""
    if client is None:
        return Extraction(failure="no model client")
    if all_new:
        transcript = render_transcript(messages, turn_from=0)
    else:
        transcript = render_transcript(extraction_window(messages))
    if not transcript.strip():
        return Extraction(failure=NOTHING_TO_LEARN)
    catalog = memory_catalog(store, transcript, CATALOG_MAX_ENTRIES, semantic=semantic)
    shown_whole = shown_in_full(store, transcript, catalog)
    try:
        reply = ask_text(
            client,
            model=model or small_model_name(),
            system=EXTRACTION_SYSTEM.format(max_items=max_items),
            prompt=extraction_prompt(transcript, catalog, shown_whole),
            max_tokens=EXTRACTION_MAX_TOKENS,
            timeout=EXTRACTION_TIMEOUT_S,
        )
        raw_items = json_from_reply(reply, list)
    except (ModelUnavailable, ValueError) as error:
        log.warning("extraction: nothing learned (%s)", error)
        return Extraction(failure=str(error), unavailable=isinstance(error, ModelUnavailable))
    result = Extraction()
    items = validate_items(raw_items, max_items, result.dropped)
    for reason in result.dropped:
        log.warning("extraction: dropped %s", reason)
    if not items:
        return result
    if command is None:
        command = "chat extraction" + (f" (session {session_id})" if session_id else "")
    # What the model saw: a memory changed since (by the user, another session) is not
    # overwritten with text written from its older version.
    updatable = {memory.name: (memory.id, memory.version) for memory in shown_whole}
    with store.transaction(actor=actor, command=command, session_id=session_id) as tx:
        for item in items:
            existing = tx.find(item.name)
            seen = (existing.id, existing.version) if existing is not None else None
            if existing is not None and updatable.get(existing.name) != seen:
                # The model never saw this memory's text, or not as it is now: replacing it
                # could lose what it says. A twin is safe; consolidation merges the two.
                name = tx.free_name(item.name)
                log.warning("extraction: %r was not shown as it is; saved as %r", item.name, name)
                existing, item = None, replace(item, name=name)
            if existing is None:
                tx.create(item.name, item.type, item.description, item.body)
                result.created.append(item.name)
                continue
            # An update keeps the memory's type: a user preference stays one (retyping it
            # would also slip past consolidation's guard on dropping preferences).
            try:
                updated = tx.update(existing, description=item.description, body=item.body)
            except MemoryAltered as error:
                # Changed outside memstore since the model was shown it: nothing of it was
                # written, and the rest of what was learned is kept.
                log.warning("extraction: skipped %r: %s", item.name, error)
                continue
            if updated is not existing:
                result.updated.append(item.name)
        result.run_id = tx.run_id if tx.events else None
    return result


def validate_items(
    raw_items: list[Any], max_items: int, dropped: list[str]
) -> list[ProposedMemory]:
    """The model's items that are safe to write; the others are described in `dropped`."""
    kept: list[ProposedMemory] = []
    for position, raw in enumerate(raw_items):
        label = f"item {position}"
        if isinstance(raw, dict) and isinstance(raw.get("name"), str):
            # Only a valid name is shown: anything else may be what the model was told not
            # to keep (a key pasted as a name), and this goes to the log.
            label += f" ({raw['name']!r})" if NAME_PATTERN.fullmatch(raw["name"]) else ""
        if len(kept) == max_items:
            dropped.append(f"{label}: more than {max_items} items in one turn")
            continue
        try:
            item = proposed_memory(raw, body_max_bytes=ITEM_BODY_MAX_BYTES)
        except InvalidMemory as error:
            dropped.append(f"{label}: {error}")
            continue
        if any(other.name == item.name for other in kept):
            dropped.append(f"{label}: a second item named {item.name!r}")
            continue
        kept.append(item)
    return kept


EARLIER_HEADER = "[Earlier in the conversation: context only; it was reviewed after its turn]"
TURN_HEADER = "[This turn: what to learn from]"


def render_transcript(
    messages: Sequence[Mapping[str, Any]], *, turn_from: int | None = None
) -> str:
    """The conversation as plain text: what was said, and one line per tool call or result.

    Messages before the current turn (which starts at the last user message with text) are
    marked as context: they were shown to extraction after their own turn, and learning
    from them again would only reword what is already kept. `turn_from`: where the turn
    starts instead (0: all of it).
    """
    start = turn_from if turn_from is not None else turn_start(messages) or 0
    lines: list[str] = []
    for index, message in enumerate(messages):
        if index == start:
            lines.append(TURN_HEADER)
        elif index == 0:
            lines.append(EARLIER_HEADER)
        role = str(message.get("role", "?"))
        for part in _message_parts(message):
            lines.append(f"{role}: {cut_middle(part, MESSAGE_MAX_CHARS, verb='left out')}")
    transcript = "\n\n".join(lines)
    # The end of the turn matters most: keep it when the whole does not fit.
    return transcript[-TRANSCRIPT_MAX_CHARS:]


def _message_parts(message: Mapping[str, Any]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content] if content.strip() else []
    parts: list[str] = []
    if not isinstance(content, Sequence):
        return parts
    for block in content:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            text = str(block.get("text", ""))
            if text.strip():
                parts.append(text)
        elif kind == "tool_use":
            arguments = json.dumps(block.get("input", {}), ensure_ascii=False)
            parts.append(f"[called {block.get('name', 'a tool')}: {arguments[:160]}]")
        elif kind == "tool_result":
            result = message_text(block)
            status = "failed" if block.get("is_error") else "returned"
            parts.append(f"[the tool {status} {len(result):,} characters]")
    return parts


def extraction_window(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The last RECENT_MESSAGES messages, and the turn's user message when it is older (a
    turn of many tool calls would otherwise hide what the user asked)."""
    window = list(messages[-RECENT_MESSAGES:])
    start = turn_start(messages)
    if start is not None and start < len(messages) - len(window):
        window.insert(0, messages[start])
    return window


def shown_in_full(
    store: MemoryStore, transcript: str, catalog: Sequence[MemorySummary]
) -> list[MemoryRecord]:
    """The memories whose whole text the model is shown, so that it may update them: those
    the conversation is about first, then, in a small store, the most recently changed, up
    to FULL_TEXT_BUDGET_CHARS; none longer than a note. Only memories of `catalog` whose row
    matches their last event: one changed outside memstore is left out, with a line on
    stderr (storage/unaltered.py)."""
    names = {m.name for m in catalog}
    candidates = [hit.memory for hit in keyword_recall(store, transcript, FULL_TEXT_RELATED)]
    if len(catalog) <= FULL_TEXT_SMALL_STORE:
        recent = sorted(store.memories(), key=lambda m: m.updated_at, reverse=True)
        candidates += recent
    shown: list[MemoryRecord] = []
    size = 0
    for memory in candidates:
        too_long = len(memory.body) > FULL_TEXT_MAX_CHARS
        if memory.name not in names or too_long or any(m.id == memory.id for m in shown):
            continue
        size += len(memory.body) + len(memory.description)
        if size > FULL_TEXT_BUDGET_CHARS:
            break
        shown.append(memory)
    return store.unaltered(shown)


def extraction_prompt(
    transcript: str, catalog: Sequence[MemorySummary], shown_whole: Sequence[MemoryRecord]
) -> str:
    whole = {m.name for m in shown_whole}
    full = "\n\n".join(f"### {m.name} ({m.type})\n{m.description}\n{m.body}" for m in shown_whole)
    others = "\n".join(
        f"- {m.name} ({m.type}): {m.description}" for m in catalog if m.name not in whole
    )
    parts = []
    if full:
        parts.append(
            "Existing memories you may update (reuse the name, give the full new text):\n" + full
        )
    if others:
        parts.append(f"Other existing memories (do not reuse these names):\n{others}")
    existing = "\n\n".join(parts) or "Existing memories: (none yet)"
    # What no one would see (a file read in the conversation may hide text in tag
    # characters) is shown to the model as \u{…}: it cannot ask for a memory unseen.
    return show_hidden(
        f"{existing}\n\nThe end of the conversation:\n<conversation>\n{transcript}\n</conversation>"
    )
