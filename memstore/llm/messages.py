"""The shape of a conversation's messages, as the Messages API has them.

A message is a dict with a role ("user" or "assistant") and a content that is a string or a
list of block dicts ("text", "tool_use", "tool_result", ...). A tool_result block has a
content of the same shape. Every reader of messages (recall, extraction, the agent and its
compression) asks these functions, so that the shape is known in one place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Message = dict[str, Any]

# What recall reads of a conversation: the last few user messages, their end if long.
RECENT_USER_TURNS = 3
RECENT_TEXT_MAX_CHARS = 2_000


def blocks(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The message's content as a list of blocks."""
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [b for b in content or [] if isinstance(b, dict)]


def message_text(message: Mapping[str, Any]) -> str:
    """The text of a message, or of a tool_result block: its string content, or its text
    blocks, one a line."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = [
            str(block.get("text", ""))
            for block in content
            if isinstance(block, Mapping) and block.get("type") == "text"
        ]
        return "\n".join(p for p in parts if p)
    return ""


def tool_calls(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tool_use blocks of a message, in order."""
    return [b for b in blocks(message) if b.get("type") == "tool_use"]


def tool_use_ids(message: Mapping[str, Any]) -> set[str]:
    """The ids of the tool calls in a message."""
    return {str(b.get("id")) for b in tool_calls(message)}


def is_tool_results(message: Mapping[str, Any]) -> bool:
    """A user message that carries tool results (the answer to the previous tool calls)."""
    return message.get("role") == "user" and any(
        b.get("type") == "tool_result" for b in blocks(message)
    )


def tool_result(tool_use_id: str, text: str, *, is_error: bool = False) -> dict[str, Any]:
    """The block answering the tool call `tool_use_id`."""
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": text}
    if is_error:
        block["is_error"] = True
    return block


def turn_start(messages: Sequence[Mapping[str, Any]]) -> int | None:
    """The index of the last user message with text (not only tool results): where the
    current turn starts."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "user" and message_text(message).strip():
            return index
    return None


def recent_user_text(messages: Iterable[Mapping[str, Any]], turns: int = RECENT_USER_TURNS) -> str:
    """The last `turns` user messages that carry text (a turn of tool results only does not
    use up a slot), oldest first, cut to the most recent RECENT_TEXT_MAX_CHARS characters."""
    texts: list[str] = []
    for message in reversed(list(messages)):
        if message.get("role") != "user":
            continue
        text = message_text(message).strip()
        if text:
            texts.append(text)
            if len(texts) == turns:
                break
    joined = "\n".join(reversed(texts))
    return joined[-RECENT_TEXT_MAX_CHARS:]
