"""Plain-text helpers shared by every layer."""

from __future__ import annotations


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
