"""Plain-text and JSON rendering for memctl output (no heavy imports: start-up matters)."""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import sys
import unicodedata
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from memstore.text import HIDDEN, show_hidden

if TYPE_CHECKING:
    from memstore.learning.consolidate import ConsolidationPlan
    from memstore.recall.turn import Recall
    from memstore.storage.history_reader import EventView, RunView
    from memstore.storage.records import MemoryRecord


def count(number: int, singular: str, plural: str = "") -> str:
    """`1 memory`, `2 memories`: a number with its noun."""
    return f"{number} {singular if number == 1 else plural or singular + 's'}"


def shown_score(score: float) -> str:
    """A search or recall score for a table: two decimals, unless that would show a match as
    0.00. bm25 scores a word that half the memories or more have at about 0 (FTS5 floors its
    idf at 1e-6), as every word in a store of two memories: two significant digits
    then (2.7e-06), so that it still reads as a match and still orders."""
    if score == 0 or round(score, 2) != 0:
        return f"{score:.2f}"
    return f"{score:.1e}"


def recall_summary(result: Recall) -> str:
    """Which path recalled how many memories, and why."""
    why = f" ({result.reason})" if result.reason else ""
    if result.path == "none":
        return f"nothing to recall{why}"
    return f"{result.path} recall{why}: {count(len(result.names), 'memory', 'memories')}"


def memory_as_dict(memory: MemoryRecord) -> dict[str, Any]:
    return {
        "name": memory.name,
        "type": memory.type,
        "description": memory.description,
        "body": memory.body,
        "extra": memory.extra,
        "created_at": memory.created_at,
        "updated_at": memory.updated_at,
    }


def event_as_dict(event: EventView, run: RunView | None = None) -> dict[str, Any]:
    """An event for --json, with who made its run (None: unknown, or the run not given)."""
    return {
        "event_id": event.id,
        "at": event.created_at,
        "memory_id": event.memory_id,
        "memory_name": event.memory_name,
        "operation": event.operation,
        "actor": event.actor,
        "identity": run.identity if run is not None else None,
        "host": run.host if run is not None else None,
        "run_id": event.run_id,
        "old_value": event.old_value,
        "new_value": event.new_value,
        # Why (a consolidation's drop: the model's reason); None when none was recorded.
        "reason": event.reason,
    }


def run_as_dict(run: RunView) -> dict[str, Any]:
    """A run for --json: its fields in the table's order."""
    return {
        "id": run.id,
        "actor": run.actor,
        "command": run.command,
        "started_at": run.started_at,
        "session_id": run.session_id,
        "undoes": run.undoes,
        "identity": run.identity,
        "host": run.host,
    }


def print_json(value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False, indent=2, default=_json_default)
    sys.stdout.write(json_hidden(text) + "\n")


def json_hidden(text: str) -> str:
    """JSON text with the characters a reader would not see (memstore.text's HIDDEN) written
    as JSON's own \\u escapes: the same data to a program, visible to a person or a model.
    Only a string can hold such a character, so the substitution keeps the JSON valid."""
    if text.isascii():
        return text
    return HIDDEN.sub(_json_escape, text)


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # beyond the BMP, JSON spells a character as its UTF-16 surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):  # a BLOB from `memctl sql`
        return value.hex()
    raise TypeError(f"cannot show {type(value).__name__} as JSON")


def print_json_rows(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Rows of `memctl sql` as a JSON array of objects, one line per row, written as they
    come. Always valid JSON: a BLOB is hex, and infinities (which JSON has no number
    for) are the strings "Infinity" and "-Infinity" (SQLite stores no NaN: it is NULL)."""
    out = sys.stdout
    out.write("[")
    separator = "\n  "
    try:
        for row in rows:
            values = {c: _json_value(v) for c, v in zip(columns, row, strict=True)}
            text = json.dumps(values, ensure_ascii=False, allow_nan=False)
            out.write(separator + json_hidden(text))
            separator = ",\n  "
    finally:  # a time limit or Ctrl-C between rows: what was printed is still JSON
        out.write("]\n" if separator == "\n  " else "\n]\n")


def _json_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


# Column widths come from this many first rows; the rest stream with those widths.
TABLE_SAMPLE_ROWS = 1_000


def print_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Aligned columns, measured in terminal cells (a Chinese character takes two); on a
    terminal, lines are cut to its width. Rows are written as they come (a long `memctl sql`
    result is never held whole), as wide as the first rows need."""
    iterator = iter(rows)
    cells = [
        [one_line(value) for value in row] for row in itertools.islice(iterator, TABLE_SAMPLE_ROWS)
    ]
    widths = [cell_width(h) for h in headers]
    for row in cells:
        for i, value in enumerate(row[:-1]):
            widths[i] = min(max(widths[i], cell_width(value, at_most=60)), 60)
    limit = os.get_terminal_size().columns if sys.stdout.isatty() else None
    lines = [_line(headers, widths)] + [_line(row, widths) for row in cells]
    out = "\n".join(cut_to_cells(line, limit) if limit else line for line in lines)
    sys.stdout.write(out + "\n")
    for rest in iterator:
        line = _line([one_line(value) for value in rest], widths)
        sys.stdout.write((cut_to_cells(line, limit) if limit else line) + "\n")


def _line(values: Sequence[str], widths: Sequence[int]) -> str:
    padded = [
        value + " " * (widths[i] - cell_width(value, at_most=widths[i]))
        for i, value in enumerate(values[:-1])
    ]
    return "  ".join([*padded, values[-1]]).rstrip()


def _char_cells(char: str) -> int:
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def cell_width(text: str, *, at_most: int | None = None) -> int:
    """How many terminal cells `text` takes; counted no further than `at_most` when given
    (a column is at most so wide: a long value is not measured to its end)."""
    if text.isascii():  # _char_cells counts every ASCII character as one cell
        return len(text)
    if at_most is None:
        return sum(_char_cells(char) for char in text)
    used = 0
    for char in text:
        used += _char_cells(char)
        if used >= at_most:
            break
    return used


def cut_to_cells(text: str, cells: int) -> str:
    """The longest start of `text` that fits in `cells` terminal cells."""
    used = 0
    for index, char in enumerate(text):
        used += _char_cells(char)
        if used > cells:
            return text[:index]
    return text


# C0 and C1 controls (ESC starts every terminal sequence: colours, title, clear screen, OSC 52
# clipboard writes; C1 CSI/OSC do the same in one character) and DEL. The characters that
# show as nothing (bidirectional overrides, tag characters) are memstore.text's show_hidden.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_LAYOUT = re.compile("[\t\n\r\v\f]")


def visible_controls(text: str) -> str:
    """Text with its control characters shown as escapes (ESC as \\x1b) and its hidden ones
    as \\u{…}, tabs and line breaks kept: what a memory says, not what it would do to a
    terminal, nor what it would tell a model a person cannot see."""
    return show_hidden(_CONTROL.sub(_escape, text))


def visible_after(before: str, text: str) -> str:
    """visible_controls of `text` where it follows `before` (a streamed reply's next piece):
    a variation selector right after one that ended the piece before is shown, as in the
    whole text."""
    last = before[-1:]
    return visible_controls(last + text)[len(visible_controls(last)) :]


def _escape(match: re.Match[str]) -> str:
    character = match.group()
    if character in "\t\n":
        return character
    code = ord(character)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def one_line(value: Any) -> str:
    """A value as one line of plain text, safe to print."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.hex()
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    # Imported text is untrusted: control characters (terminal escapes) are shown, not run.
    return " ".join(visible_controls(_LAYOUT.sub(" ", text)).split())


def change_summary(event: EventView) -> str:
    """What an event changed, in a few words."""
    from memstore.storage.chain import is_purged  # hashlib, which a listing does not need
    from memstore.storage.fields import CONTENT, RULES, Place

    old, new = event.old_value, event.new_value
    if is_purged(old) or is_purged(new):
        return "content purged"
    if event.reason is not None:  # a consolidation's drop: why, rather than what it was
        return f"reason: {event.reason}"
    if old is None or new is None:
        snapshot = new or old or {}
        return str(snapshot.get("description", ""))
    parts = []
    for key in (key for key in CONTENT if old.get(key) != new.get(key)):
        # A frontmatter value is one line, shown; the body and the other keys, too long to.
        if RULES[key].place is Place.FRONTMATTER:
            parts.append(f"{key}: {old.get(key)} → {new.get(key)}")
        else:
            parts.append(f"{key} changed")
    return "; ".join(parts)


def plan_lines(plan: ConsolidationPlan) -> list[str]:
    """A consolidation plan as the user reviews it."""
    lines = []
    for merge in plan.merges:
        result = merge.result
        arrow = "rewrite" if merge.sources == (result.name,) else "merge"
        lines.append(
            f"{arrow:8} {', '.join(merge.sources)} → {result.name} ({result.type}): "
            f"{one_line(result.description)}"
        )
    for drop in plan.drops:
        lines.append(f"{'drop':8} {drop.name}: {one_line(drop.reason) or 'no reason given'}")
    lines.append(f"{plan.before} → {count(plan.after, 'memory', 'memories')}")
    return lines
