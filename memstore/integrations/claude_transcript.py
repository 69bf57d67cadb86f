"""Claude Code's session transcript (the JSONL file its hooks name as `transcript_path`), read
from a byte offset into the messages extraction takes (llm/messages.py).

Each line is one JSON object. The lines read are those of `type` "user" and "assistant" of the
main conversation (not `isSidechain`: a subagent's), whose `message` is {role, content}:
content a string or blocks. Text is kept; a tool call becomes one line `tool NAME(brief input)`
and a tool's result one line saying its size, never its text; thinking is dropped. What is not
the conversation is skipped: the title lines (`summary`), file snapshots, system lines (a
compaction's boundary), a compaction's summary (`isCompactSummary`: what it sums up was read
from the lines before it), Claude Code's own notes in the user's place (`isMeta`) and what a
local slash command printed there.

Every line is untrusted: one that is not a JSON object, not UTF-8 or over MAX_LINE_BYTES is
skipped (counted); the last line, when it has no newline yet (Claude Code is still writing
it), is not read, and the offset stays before it, to be read whole next time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memstore.llm.messages import Message, message_text

# A line longer than this is a pasted image or a tool's huge output, not conversation.
MAX_LINE_BYTES = 1_048_576
BRIEF_MAX_CHARS = 80
# What a read covers at most: the rest is read by the next one.
READ_MAX_BYTES = 16 * 1_048_576
_BLOCK = 65_536

# What a local slash command (/cost, /context) printed, in the user's place: its output.
_COMMAND_OUTPUT = ("<local-command-stdout>", "<local-command-stderr>")
# The input field that says best what a call of Claude Code's own tools did.
_BRIEF_FIELDS = ("command", "file_path", "path", "pattern", "url", "query", "description")


@dataclass
class TranscriptEntry:
    """One message read, and the offset just after the line it came from."""

    message: Message
    end: int


@dataclass
class TranscriptChunk:
    """What one read found from `start` on: its messages, where the next read starts, how
    many lines it skipped as unreadable."""

    start: int
    end: int
    entries: list[TranscriptEntry] = field(default_factory=list)
    skipped: int = 0
    # The file is shorter than the offset: replaced or cut; nothing was read.
    shrunk: bool = False


def read_transcript(path: Path, offset: int, max_bytes: int = READ_MAX_BYTES) -> TranscriptChunk:
    """The whole lines of `path` from byte `offset` on (about `max_bytes` of them at most).
    OSError when the file cannot be read."""
    with path.open("rb") as file:
        size = _size(file)
        if offset > size:
            return TranscriptChunk(offset, offset, shrunk=True)
        file.seek(offset)
        chunk = TranscriptChunk(offset, offset)
        while chunk.end - offset < max_bytes:
            line = file.readline(MAX_LINE_BYTES + 1)
            if not line.endswith(b"\n"):
                if len(line) <= MAX_LINE_BYTES or not _skip_rest_of_line(file):
                    break  # still being written: read whole next time
                chunk.skipped += 1
                chunk.end = file.tell()
                continue
            chunk.end += len(line)
            entry = _entry(line)
            if entry is None:
                chunk.skipped += 1
            elif entry is not _NOT_CONVERSATION:
                message = _message(entry)
                if message is not None:
                    chunk.entries.append(TranscriptEntry(message, chunk.end))
        return chunk


def _size(file: Any) -> int:
    return os.fstat(file.fileno()).st_size


def _skip_rest_of_line(file: Any) -> bool:
    """Read past the end of an over-long line; False when it has no end yet."""
    while True:
        part = file.readline(_BLOCK)
        if not part:
            return False
        if part.endswith(b"\n"):
            return True


_NOT_CONVERSATION: dict[str, Any] = {}


def _entry(line: bytes) -> dict[str, Any] | None:
    """The line's object when it is conversation, _NOT_CONVERSATION when it is a line of
    another kind, None when it is unreadable."""
    try:
        entry = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(entry, dict):
        return None
    kind = entry.get("type")
    if kind not in ("user", "assistant"):
        return _NOT_CONVERSATION  # summary, file-history-snapshot, system, queue-operation…
    if entry.get("isSidechain") is True or entry.get("isMeta") is True:
        return _NOT_CONVERSATION
    if entry.get("isCompactSummary") is True:
        return _NOT_CONVERSATION
    message = entry.get("message")
    if not isinstance(message, dict) or message.get("role") != kind:
        return None
    return entry


def _message(entry: Mapping[str, Any]) -> Message | None:
    """The entry's message as extraction reads it: text blocks only (tool calls and results
    as one line each), or None when nothing of it is left."""
    message = entry["message"]
    role = message["role"]
    content = message.get("content")
    if isinstance(content, str):
        if not content.strip() or content.lstrip().startswith(_COMMAND_OUTPUT):
            return None
        return {"role": role, "content": content}
    if not isinstance(content, list):
        return None
    texts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str) and block["text"].strip():
            texts.append(block["text"])
        elif kind == "tool_use":
            texts.append(f"[tool {_name(block.get('name'))}({_brief(block.get('input'))})]")
        elif kind == "tool_result":
            texts.append(_result_line(block))
        # thinking, redacted_thinking, image, document: not what is learned from
    if not texts:
        return None
    return {"role": role, "content": [{"type": "text", "text": text} for text in texts]}


def _name(name: Any) -> str:
    return _one_line(name, 40) if isinstance(name, str) and name else "a tool"


def _brief(arguments: Any) -> str:
    """A few words of a tool call's input: its most telling field, cut."""
    if not isinstance(arguments, dict):
        return ""
    for key in _BRIEF_FIELDS:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            return _one_line(value, BRIEF_MAX_CHARS)
    for value in arguments.values():
        if isinstance(value, str) and value.strip():
            return _one_line(value, BRIEF_MAX_CHARS)
    return ""


def _result_line(block: Mapping[str, Any]) -> str:
    content = block.get("content")
    text = content if isinstance(content, str) else message_text(block)
    status = "failed" if block.get("is_error") is True else "returned"
    return f"[the tool {status} {len(text):,} characters]"


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
