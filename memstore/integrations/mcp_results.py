"""What the MCP server's tools return: each tool's structured result, whose JSON schema the
server publishes as the tool's output schema (so a client can check it and a model can read
which fields to expect)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from memstore.files.format import render_memory_file
from memstore.storage.chain import is_purged
from memstore.storage.models import MemoryEvent, MemoryRecord, MemorySummary
from memstore.text import show_hidden


class Shown(BaseModel):
    """A result the model reads: a character no person would see (a tag character, a
    bidirectional override) in any of its text is written as \\u{…}, as every output does."""

    @field_validator("*", mode="after")
    @classmethod
    def _hidden_shown(cls, value: Any) -> Any:
        return show_hidden(value) if isinstance(value, str) else value


class MemoryListing(Shown):
    name: str = Field(description="The memory's name (kebab-case; its file is <name>.md).")
    type: str = Field(description="user, feedback, project or reference.")
    description: str = Field(description="Its one line, as the MEMORY.md index shows it.")

    @classmethod
    def of(cls, memory: MemoryRecord | MemorySummary) -> MemoryListing:
        return cls(name=memory.name, type=memory.type, description=memory.description)


class RecalledMemory(MemoryListing):
    body: str = Field(description="What the memory says, in full.")
    score: float = Field(description="How strongly it was recalled (higher is better).")
    matched: list[str] = Field(description="The words of the text that the memory has.")
    similarity: float | None = Field(
        description="How near it is to the text in meaning (cosine, -1 to 1), when semantic "
        "recall took part; else null."
    )


class RecallResult(Shown):
    path: str = Field(
        description="How the memories were chosen: keyword, keyword+semantic, or none."
    )
    reason: str = Field(description="Why nothing was recalled, when nothing was; else empty.")
    memories: list[RecalledMemory] = Field(description="The memories to use, best first.")


class SearchHitResult(MemoryListing):
    score: float = Field(description="bm25 relevance (higher is better).")


class SearchResult(Shown):
    hits: list[SearchHitResult] = Field(description="The matching memories, best first.")
    note: str = Field(description="Why there are no hits, when there are none; else empty.")


class ShownMemory(MemoryListing):
    body: str = Field(description="What the memory says (Markdown).")
    version: int = Field(description="Bumped by every change; give it to `update` as `version`.")
    created_at: str = Field(description="When it was created (ISO 8601, UTC).")
    updated_at: str = Field(description="When it last changed (ISO 8601, UTC).")
    text: str = Field(description="Its canonical file text (.memory/<name>.md).")

    @classmethod
    def of_record(cls, memory: MemoryRecord) -> ShownMemory:
        # The fields this result shows, read from the record by name (storage/fields.py).
        shown = {key: getattr(memory, key) for key in cls.model_fields if key != "text"}
        return cls(**shown, text=render_memory_file(memory))


class ListResult(Shown):
    memories: list[MemoryListing] = Field(description="The memories, by name (at most `limit`).")
    count: int = Field(description="How many memories there are (of the type, if given).")


class ChangeResult(Shown):
    name: str = Field(description="The name the memory has now (the name used).")
    changed: bool = Field(description="Whether the store was changed.")
    version: int | None = Field(description="Its version now; null once forgotten.")
    run_id: str | None = Field(description="The history's run of this change; null if none.")
    note: str = Field(description="What happened, in one line.")


class EventResult(Shown):
    at: str = Field(description="When (ISO 8601, UTC).")
    operation: str = Field(description="create, update, delete or restore.")
    name: str = Field(description="The memory's name at that event.")
    actor: str = Field(description="Who changed it: cli, chat, mcp, import, ...")
    run_id: str = Field(description="The run the change was part of.")
    changed: list[str] = Field(description="Which fields an update changed.")
    reason: str | None = Field(
        default=None,
        description="Why, when history records it: a consolidation's reason for a drop.",
    )

    @classmethod
    def of(cls, event: MemoryEvent) -> EventResult:
        old, new = event.old_value, event.new_value
        changed: list[str] = []
        if isinstance(old, dict) and isinstance(new, dict):
            changed = [key for key in new if old.get(key) != new.get(key)]
        elif is_purged(old) or is_purged(new):
            changed = ["content purged"]
        return cls(
            at=event.created_at,
            operation=event.operation,
            name=event.memory_name,
            actor=event.actor,
            run_id=event.run_id,
            changed=changed,
            reason=None if changed == ["content purged"] else event.reason,
        )


class RunResult(Shown):
    started_at: str = Field(description="When the run began (ISO 8601, UTC).")
    run_id: str = Field(description="The run's id.")
    actor: str = Field(description="Who ran it: cli, chat, mcp, import, consolidation, ...")
    command: str = Field(description="The command, as recorded.")
    created: int = Field(description="Memories it created.")
    updated: int = Field(description="Memories it changed.")
    deleted: int = Field(description="Memories it deleted.")
    restored: int = Field(description="Memories it restored.")

    @classmethod
    def of(cls, row: dict[str, Any]) -> RunResult:
        counts = {key: int(row[key] or 0) for key in ("created", "updated", "deleted", "restored")}
        return cls(
            started_at=row["started_at"],
            run_id=row["run_id"],
            actor=row["actor"],
            command=row["command"],
            **counts,
        )


class HistoryResult(Shown):
    events: list[EventResult] = Field(
        description="For a name: its events, oldest first; else empty."
    )
    runs: list[RunResult] = Field(description="Without a name: the recent runs, oldest first.")
