"""A memory's text as the page shows it: what it says, never what it would do.

HTML escaping (Jinja2's autoescape) keeps text from becoming markup; this keeps the
characters that change how text reads from acting, written as the CLI and the hook write
them: C0 and C1 controls and DEL as `\\x1b` (an ANSI escape sequence starts with ESC), and
the characters a reader does not see (memstore.text's HIDDEN: bidirectional controls that
reorder text, zero-width characters, the Unicode tag characters a model reads) as
show_hidden writes them, `\\u{202E}`, `\\u{E0049}`. Each escape is in a marked span, so
that it does not pass for text the memory typed. Tabs and line breaks stay.
"""

from __future__ import annotations

import re

from markupsafe import Markup, escape

from memstore.text import HIDDEN, show_hidden

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_MARKED = re.compile(f"{_CONTROL.pattern}|{HIDDEN.pattern}")


def _written(text: str, match: re.Match[str]) -> str:
    """The escape of the character `match` found in `text`, as the CLI writes it."""
    character = match.group()
    if _CONTROL.fullmatch(character):
        return f"\\x{ord(character):02x}"
    alone = show_hidden(character)
    if alone != character:
        return alone
    # A variation selector after another is hidden only where it stands: written in its place.
    return show_hidden(text[match.start() - 1 : match.end()])[1:]


def visible(text: str) -> str:
    """`text` with every control and hidden character written as its escape (plain text)."""
    return _MARKED.sub(lambda match: _written(text, match), text)


def shown(value: object) -> Markup:
    """A value as safe HTML: escaped, its controls and hidden characters as marked escapes
    (a template filter: `{{ memory.body | shown }}`)."""
    text = value if isinstance(value, str) else "" if value is None else str(value)
    parts: list[str] = []
    last = 0
    for match in _MARKED.finditer(text):
        parts.append(str(escape(text[last : match.start()])))
        parts.append(f'<span class="hidden-char">{escape(_written(text, match))}</span>')
        last = match.end()
    parts.append(str(escape(text[last:])))
    return Markup("".join(parts))
