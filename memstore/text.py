"""Plain-text helpers shared by every layer."""

from __future__ import annotations

import re


def cut_middle(text: str, limit: int, *, verb: str = "cut") -> str:
    """`text` whole when it has at most `limit` characters, else its first and last
    limit/2 with a line saying how many characters were `verb` between (the end of an
    output matters as much as its start)."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[… {len(text) - limit:,} characters {verb} …]\n{text[-half:]}"


def shorten(text: str, limit: int) -> str:
    """`text` whole when it has at most `limit` characters, else cut to `limit` ending in "…"."""
    if len(text) <= limit:
        return text
    return text[: limit - 1].rstrip() + "…"


# Characters a model reads but a person does not see: Unicode's format characters (Cf:
# the bidirectional embeddings, overrides, isolates and marks that reorder what is shown,
# zero-width spaces, the tag characters U+E0000–E007F that models read as ASCII and
# terminals draw as nothing) and the other default-ignorable code points (Hangul fillers,
# Mongolian selectors, the variation selectors' supplement). Kept: the zero-width joiner
# and non-joiner, which Persian, Indic scripts and emoji need, and one variation selector
# after a character (❤️); a second in a row is shown, as it carries no glyph of its own
# and a run of them can spell a hidden message.
HIDDEN = re.compile(
    "[\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u17b4\u17b5"
    "\u180b-\u180f\u200b\u200e\u200f\u202a-\u202e\u2060-\u206f\u3164\ufeff\uffa0\ufff0-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff]"
    "|(?<=[\ufe00-\ufe0f])[\ufe00-\ufe0f]"
)


def show_hidden(text: str) -> str:
    """`text` with every character a reader would not see written as its code point,
    `\\u{E0041}` (a tag character spelling A), so that a person and a model read the
    same text. The one convention for the terminal and the model: docs/file-format.md."""
    if text.isascii():  # nearly every text: no hidden character can be in it
        return text
    return HIDDEN.sub(lambda match: f"\\u{{{ord(match.group()):04X}}}", text)
