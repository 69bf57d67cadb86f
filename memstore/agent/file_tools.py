"""The file tools' work on a path the workspace has already checked (see Workspace.path):
reading numbered lines, editing exact text, writing so that a crash never leaves half a file.
Each refuses a file with more than one hard link unless the user approved the call (see
refuse_linked).

What they read is bounded: read_file reads line by line and stops at its limit or the output
cap, a line longer than half the cap is cut, and edit_file refuses files over EDIT_MAX_BYTES.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memstore.agent.tool_calls import OUTPUT_MAX_CHARS, ToolRefused

READ_MAX_BYTES = 2_000_000
# edit_file reads the whole file: larger ones are refused (bash has sed for them).
EDIT_MAX_BYTES = 10_000_000


def read_numbered_lines(
    target: Path, path: str, *, count: int | None, first: int, links: bool = False
) -> str:
    """Lines `first` to `first + count - 1` of `target` (every line from `first` when `count`
    is None), numbered, within the output cap; `path` is the file as the model named it.
    A file with more than one hard link is read only when `links` (the user approved it):
    checked on the file opened, which a link made since the request cannot dodge."""
    if not target.is_file():
        raise ToolRefused(f"{path}: no such file")
    size = target.stat().st_size
    if size > READ_MAX_BYTES and not count:
        raise ToolRefused(f"{path} is {size:,} bytes; read it with a line limit")
    budget = OUTPUT_MAX_CHARS
    shown: list[str] = []
    number = 0
    capped = False
    # Line by line, stopping after the last line asked for, or when the output is full.
    with target.open("rb") as handle:
        refuse_linked(os.fstat(handle.fileno()), path, links, "read", "nothing read")
        for number, line in enumerate(read_lines(handle), 1):
            if number < first:
                continue
            if count is not None and number >= first + count:
                break
            entry = f"{number:6}\t{line}"
            if shown and len(entry) + 1 > budget:
                capped = True
                break
            shown.append(entry)
            budget -= len(entry) + 1
        else:  # the whole file was read
            if shown:
                return "\n".join(shown)
            if number == 0:
                return "(empty file)"
            return f"(no lines from offset {first}; the file has {number} lines)"
        # Line `number` was read but not shown; count what follows it if that is cheap.
        more = (
            f"{1 + lines_left(handle)} more lines"
            if size <= READ_MAX_BYTES
            else "more lines follow"
        )
    note = "output cap reached; " if capped else ""
    return "\n".join(shown) + f"\n[{note}{more}; read on with offset={number}]"


def edit_text(
    target: Path, path: str, old_text: str, new_text: str, replace_all: Any, *, links: bool
) -> str:
    """Replace `old_text` in `target`: the one match, or every one with `replace_all`.
    A file with more than one hard link is edited only when `links` (the user approved it):
    checked on the file opened, before any search whose answer (found, not found, found
    twice) would tell the model what the file holds, and again before the rename."""
    if not target.is_file():
        raise ToolRefused(f"{path}: no such file")
    size = target.stat().st_size
    if size > EDIT_MAX_BYTES:
        raise ToolRefused(
            f"{path} is {size:,} bytes; edit_file edits files up to {EDIT_MAX_BYTES:,} "
            "bytes (use bash, e.g. sed, for larger ones); nothing changed"
        )
    if not isinstance(old_text, str) or not old_text or not isinstance(new_text, str):
        raise ToolRefused("old_text must be non-empty text and new_text text")
    if replace_all is None:
        replace_all = False
    if not isinstance(replace_all, bool):
        raise ToolRefused(f"replace_all must be true or false, got {replace_all!r}")
    try:
        with target.open("rb") as handle:  # at most the cap, whatever it grew to since
            refuse_linked(os.fstat(handle.fileno()), path, links, "edited", "nothing changed")
            text = handle.read(EDIT_MAX_BYTES + 1).decode("utf-8")
    except UnicodeDecodeError:
        raise ToolRefused(f"{path} is not UTF-8 text; nothing changed") from None
    matches = text.count(old_text)
    if matches == 0:
        raise ToolRefused(f"old_text not found in {path} (0 matches); nothing changed")
    if matches > 1 and not replace_all:
        raise ToolRefused(
            f"old_text occurs {matches} times in {path}; give more context to make it "
            "unique, or set replace_all; nothing changed"
        )
    try:
        edited = text.replace(old_text, new_text).encode("utf-8")
    except UnicodeEncodeError as error:
        raise ToolRefused(
            f"new_text cannot be written as UTF-8 ({error.reason}); nothing changed"
        ) from None
    if len(text) > EDIT_MAX_BYTES:
        raise ToolRefused(f"{path} grew past {EDIT_MAX_BYTES:,} bytes; nothing changed")
    write_atomically(target, edited, path, links=links)
    return f"replaced {matches} match{'es' if matches > 1 else ''} in {path}"


def write_atomically(target: Path, data: bytes, path: str, *, links: bool) -> None:
    """Replace `target` with `data` so that a crash leaves the old file or the new one, never
    a truncated one: a temporary file beside it, synced, given the old file's mode, renamed.
    A file with more than one hard link is replaced only when `links` (the user approved)."""
    try:
        status = target.stat()
        mode: int | None = stat.S_IMODE(status.st_mode)
    except FileNotFoundError:
        mode = None  # a new file: the umask decides, as for any file created
    else:
        refuse_linked(status, path, links, "written", "nothing changed")
    for _ in range(100):
        temporary = target.with_name(f".{target.name}.{os.urandom(4).hex()}.tmp")
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
            break
        except FileExistsError:
            continue
    else:
        raise ToolRefused(f"cannot make a temporary file beside {target.name}")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    with contextlib.suppress(OSError):  # the rename itself survives a crash once synced
        folder = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


def refuse_linked(status: os.stat_result, path: str, links: bool, done: str, nothing: str) -> None:
    """Refuse a regular file with more than one hard link unless `links`: another of its
    names may be outside the workspace (~/.ssh/id_ed25519 linked in), where no path check
    sees. An edit or a write would replace it with a one-link copy holding that file's
    content, which read_file would then read unasked."""
    if status.st_nlink > 1 and stat.S_ISREG(status.st_mode) and not links:
        raise ToolRefused(
            f"{path} has {status.st_nlink} hard links: another of its names may be outside "
            f"the workspace, so it is {done} only with the user's approval; {nothing}"
        )


def read_lines(handle: Any) -> Iterator[str]:
    """The lines of a binary file, decoded (invalid UTF-8 shows as U+FFFD), one at a time;
    a line longer than half the output cap is cut, the rest of it read in blocks and dropped."""
    longest = max(OUTPUT_MAX_CHARS // 2, 1)
    while True:
        raw = handle.readline(longest)
        if not raw:
            return
        cut = False
        if not raw.endswith(b"\n"):
            while rest := handle.readline(1 << 20):
                cut = True
                if rest.endswith(b"\n"):
                    break
        line = raw.rstrip(b"\n").removesuffix(b"\r").decode("utf-8", "replace")
        yield f"{line} [line cut]" if cut else line


def lines_left(handle: Any) -> int:
    """How many lines remain from the handle's position, read in blocks."""
    left, last = 0, b"\n"
    while chunk := handle.read(1 << 20):
        left += chunk.count(b"\n")
        last = chunk[-1:]
    return left + (last != b"\n")
