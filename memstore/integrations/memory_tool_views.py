"""What the memory tool shows the model, in the form of the SDK's own file views: a file's
lines numbered, where a text occurs by line, and a listing of /memories with each file's
size. Plain text from memories; the checks of what the model asks are memory_tool's."""

from __future__ import annotations

from collections.abc import Iterable

from memstore.files.format import render_memory_file
from memstore.storage.models import MemoryRecord
from memstore.text import show_hidden

ROOT = "/memories"
# A view of /memories lists at most this many files (it goes into the model's context).
LISTING_MAX_FILES = 1_000
# The SDK's own file views number lines in a column this wide.
LINE_NUMBER_WIDTH = 6


def numbered(lines: list[str], first: int, last: int) -> str:
    """Lines `first` to `last` (from 1) of a file, each after its number; a character no
    person would see (a tag character) written as \\u{…}, as every output shows it."""
    return "\n".join(
        f"{str(number).rjust(LINE_NUMBER_WIDTH)}\t{show_hidden(lines[number - 1])}"
        for number in range(first, last + 1)
    )


def lines_of(content: str, part: str) -> list[int]:
    """The line numbers at which `part` starts in `content`."""
    lines, start = [], content.find(part)
    while start != -1:
        lines.append(content.count("\n", 0, start) + 1)
        start = content.find(part, start + 1)
    return lines


def listing(path: str, memories: Iterable[MemoryRecord]) -> str:
    """A view of /memories (as `path` spells it): its size, then each memory's file."""
    files = [(len(render_memory_file(memory).encode()), memory.name) for memory in memories]
    lines = [f"{_size(sum(size for size, _ in files))}\t{ROOT}"]
    lines += [f"{_size(size)}\t{ROOT}/{name}.md" for size, name in files[:LISTING_MAX_FILES]]
    if len(files) > LISTING_MAX_FILES:
        lines.append(
            f"({len(files) - LISTING_MAX_FILES:,} more files are not listed: a listing "
            f"shows {LISTING_MAX_FILES:,})"
        )
    header = (
        f"Here're the files and directories up to 2 levels deep in {path}, excluding hidden items:"
    )
    return "\n".join([header, *lines])


def _size(size: int) -> str:
    """A size as the SDK's own directory views print it: 512B, 1.5K, 2M."""
    if size < 1024:
        return f"{size}B"
    kib = size / 1024
    if kib < 1024:
        return f"{kib:.1f}K".replace(".0K", "K")
    return f"{kib / 1024:.1f}M".replace(".0M", "M")
