"""What one call to the model is sent, besides the system prompt: the tools (with `task`, the
sub-agent, where delegation is allowed), and the working messages with the turn's memories
put into a copy of the current user message; each marked where the API should cache.

The current user message is found by the identity of its text block, which survives every
compression step, rather than by a remembered position.
"""

from __future__ import annotations

import logging
from typing import Any

from memstore.agent.tools import TOOL_DEFINITIONS
from memstore.llm.messages import Message, blocks

log = logging.getLogger(__name__)


def inject(messages: list[Message], turn_block: dict[str, Any], memories: str) -> list[Message]:
    """The request: the messages, with the memories put into a copy of the message holding
    the current turn's text. The stored messages are never changed."""
    if not memories:
        return list(messages)
    index = turn_index(messages, turn_block)
    if index is None:
        log.warning("the current user message was not found; memories not injected")
        return list(messages)
    content = []
    for block in blocks(messages[index]):
        if block is turn_block:
            content.append({"type": "text", "text": memories})
        content.append(block)
    request = list(messages)
    request[index] = {**messages[index], "content": content}
    return request


def turn_index(messages: list[Message], turn_block: dict[str, Any]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        if any(block is turn_block for block in blocks(messages[index])):
            return index
    return None


TASK_TOOL: dict[str, Any] = {
    "name": "task",
    "description": "Hand a self-contained sub-task (a search through the code, an investigation) "
    "to a sub-agent with a fresh context and the same tools; you get its final answer. Use it "
    "when the work would flood this conversation with output.",
    "input_schema": {
        "type": "object",
        "properties": {
            "description": {"type": "string", "description": "A few words, shown to the user."},
            "prompt": {"type": "string", "description": "Everything the sub-agent needs."},
        },
        "required": ["prompt"],
    },
}


def cached_tools(*, with_task: bool) -> list[dict[str, Any]]:
    """The tool definitions, the last one marked so the API caches them all."""
    tools = [dict(tool) for tool in [*TOOL_DEFINITIONS, *([TASK_TOOL] if with_task else [])]]
    tools[-1]["cache_control"] = {"type": "ephemeral"}
    return tools


def mark_cache_point(request: list[Message]) -> list[Message]:
    """The request with its last block marked: the conversation so far is cached for the
    next call, which then pays only for what is new."""
    if not request:
        return request
    last = request[-1]
    content = blocks(last)
    if not content:
        return request
    content = [*content[:-1], {**content[-1], "cache_control": {"type": "ephemeral"}}]
    return [*request[:-1], {**last, "content": content}]
