"""The model's reply as the plain blocks the history and the transcript keep, and the reason
a tool call in it cannot run when its input is not an object the tools can take."""

from __future__ import annotations

from typing import Any

from memstore.agent.compact import finite


def plain_blocks(content: Any, bad_input: dict[str, str]) -> list[dict[str, Any]]:
    """The reply's blocks as plain dicts, without blank text blocks (the API refuses text
    blocks of only white space when they are sent back). A tool call's input that is not
    an object, or holds Infinity or NaN, is kept as an object the API accepts back, and the
    reason it cannot run is put in `bad_input` under the call's id."""
    plain = [_plain_block(block, bad_input) for block in content]
    return [b for b in plain if b["type"] != "text" or b["text"].strip()]


def _plain_block(block: Any, bad_input: dict[str, str]) -> dict[str, Any]:
    """An SDK content block as the plain dict the history and transcript keep."""
    if block.type == "text":
        return {"type": "text", "text": block.text}
    if block.type == "tool_use":
        arguments, non_finite = finite(block.input)
        if not isinstance(arguments, dict):
            bad_input[block.id] = (
                f"not run: the tool input must be a JSON object, not {_json_kind(arguments)}"
            )
            arguments = {}
        elif non_finite:
            bad_input[block.id] = (
                "not run: the tool input holds a number that is not finite (Infinity or NaN); "
                "send finite numbers"
            )
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": arguments}
    dumped: dict[str, Any] = block.model_dump(exclude_none=True)
    return finite(dumped)[0]


def _json_kind(value: Any) -> str:
    kinds = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a number")
