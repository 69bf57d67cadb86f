"""A memory's text as the page shows it: what it says, never what it would do.

HTML escaping (Jinja2's autoescape) keeps text from becoming markup; this keeps the
characters that change how text reads from acting: C0 and C1 controls (an ANSI escape
sequence starts with ESC), DEL, the bidirectional marks, embeddings, overrides and isolates
(text that reads in another order than it is), and the Unicode tag characters (invisible
text a model reads). Each is shown as its escape, `\\x1b` or `\\u202e`, in a marked span.
Tabs and line breaks stay.
"""

from __future__ import annotations

import re

from markupsafe import Markup, escape

_HIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\U000e0000-\U000e007f]"
)


def code(character: str) -> str:
    """The escape a hidden character is shown as."""
    point = ord(character)
    if point < 0x100:
        return f"\\x{point:02x}"
    return f"\\u{point:04x}" if point < 0x10000 else f"\\U{point:08x}"


def visible(text: str) -> str:
    """`text` with every hidden character replaced by its escape (plain text)."""
    return _HIDDEN.sub(lambda match: code(match.group()), text)


def shown(value: object) -> Markup:
    """A value as safe HTML: escaped, its hidden characters as marked escapes (a template
    filter: `{{ memory.body | shown }}`)."""
    text = value if isinstance(value, str) else "" if value is None else str(value)
    parts: list[str] = []
    last = 0
    for match in _HIDDEN.finditer(text):
        parts.append(str(escape(text[last : match.start()])))
        parts.append(f'<span class="hidden-char">{escape(code(match.group()))}</span>')
        last = match.end()
    parts.append(str(escape(text[last:])))
    return Markup("".join(parts))
