"""Writing a changed memory back into a file that is not in memstore's canonical form (a
Claude Code memory, a hand-written note) the way its author would: the frontmatter as it was,
with only the lines of what changed rewritten, CRLF and a byte-order mark kept.

Every rewrite is checked by reading it back as import would; when it does not say exactly
what the memory says, the caller writes the canonical form instead.
"""

from __future__ import annotations

import re

import yaml

from memstore.errors import InvalidMemory, UnreadableFile
from memstore.files.format import render_memory_file
from memstore.files.import_file import ImportItem, read_memory_bytes, says_version
from memstore.storage.fields import full
from memstore.storage.models import MemoryRecord

_FRONTMATTER = re.compile(r"(?P<open>---[ \t]*\n)(?P<front>.*?\n)?(?P<close>---[ \t]*\n\n*)", re.S)


def render_in_place(memory: MemoryRecord, disk: bytes, file_name: str) -> bytes | None:
    """`memory` written over `disk` keeping the file's own frontmatter; None when the file is
    canonical already (or unreadable), or when its frontmatter cannot say what changed."""
    try:
        text = disk.decode("utf-8")
        before = read_memory_bytes(disk, file_name, memory.type)
    except (UnicodeDecodeError, UnreadableFile, InvalidMemory):
        return None
    # A file that names no type was imported with --default-type: read it back the same way.
    default_type = None if _states_a_type(disk, file_name) else before.type
    if _is_canonical(before, disk, memory):
        return None
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    crlf = "\r\n" in text
    match = _FRONTMATTER.match(text.removeprefix("\ufeff").replace("\r\n", "\n"))
    if match is None:
        return None
    front = match["front"] or ""
    wanted = memory.snapshot()
    for _ in range(3):
        rewritten = f"{match['open']}{front}{match['close']}{memory.body}\n"
        if crlf:
            rewritten = rewritten.replace("\n", "\r\n")
        content = (bom + rewritten).encode()
        try:
            after = read_memory_bytes(content, file_name, default_type)
        except (UnreadableFile, InvalidMemory):
            return None
        if says_version(after, wanted):
            return content
        # Rewrite the lines of what reads differently (a description read from the body's
        # first line is written out once the body changes), then check again.
        if after.description != memory.description:
            front = _set_line(front, "description", memory.description)
        if after.type != memory.type:
            front = _set_line(front, "type", memory.type)
            front = re.sub(r"(?m)^([ \t]+)type:[ \t].*$", rf"\g<1>type: {memory.type}", front)
    return None


def _set_line(front: str, key: str, value: str) -> str:
    """`key: value` in place of the top-level `key:` line, or added at the end."""
    dumped = yaml.safe_dump({key: value}, allow_unicode=True, width=1_000_000).rstrip("\n")
    if "\n" in dumped:
        return front  # the check after will refuse it
    pattern = re.compile(rf"(?m)^{key}:(?:[ \t].*)?$")
    if pattern.search(front):
        return pattern.sub(lambda _: dumped, front, count=1)
    return f"{front}{dumped}\n"


def _states_a_type(disk: bytes, file_name: str) -> bool:
    try:
        read_memory_bytes(disk, file_name, None)
    except (UnreadableFile, InvalidMemory):
        return False
    return True


def _is_canonical(item: ImportItem, disk: bytes, memory: MemoryRecord) -> bool:
    as_written = memory.changed(**{**full(item.values()), "name": memory.name})
    return render_memory_file(as_written).encode() == disk
