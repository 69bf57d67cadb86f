"""A tool call as the agent handles it: the request the user is asked about, the result the
model reads, the refusal that becomes an error result; and the checks every tool's arguments
and output pass (whole numbers, valid text, the cap on one call's output).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# What one tool call may hand back, in characters: one call cannot flood the context (the
# compression pipeline handles what is still large).
OUTPUT_MAX_CHARS = 50_000


@dataclass(frozen=True)
class ToolRequest:
    """One tool call as the user is asked about it. `summary` says exactly what will run or
    be written; it is untrusted text (escape control characters to display it). `path` is
    the workspace-relative path a file tool will write ("" for bash). `asks`: a read_file,
    write_file or edit_file of a file with more than one hard link, which may be a file
    outside the workspace: asked about always, whatever the allow rules say."""

    name: str
    input: dict[str, Any]
    summary: str
    path: str = ""
    asks: bool = False


@dataclass(frozen=True)
class ToolResult:
    text: str
    is_error: bool = False


class ToolRefused(Exception):
    """The call cannot run as given; the message goes back to the model."""


def whole_number(value: Any, name: str, *, minimum: int) -> int:
    """`value` as an int (the model may send 30, 30.0 or "30"); anything else is refused
    with a message the model can act on."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and len(value) <= 20:
        try:
            number = int(value.strip())
        except ValueError:
            number = None
    if number is None:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "…"
        raise ToolRefused(f"{name} must be a whole number, got {shown}")
    if number < minimum:
        raise ToolRefused(f"{name} must be at least {max(minimum, 1)}, got {number}")
    return number


def valid_text(text: str) -> str:
    """`text` as valid Unicode: a file name that is not UTF-8 reaches Python as lone
    surrogates, which neither the transcript nor the API request can encode."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
