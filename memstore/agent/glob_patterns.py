"""Glob patterns over workspace-relative paths, for the glob tool and the approval rules'
paths: a pattern as a regular expression, and the walk that finds the files it matches.

The walk does not follow symlinked folders (they could lead out of the workspace, or around
in circles) and stops after GLOB_MAX_RESULTS matches.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
from pathlib import Path, PurePosixPath

from memstore.agent.tool_calls import ToolRefused

GLOB_MAX_RESULTS = 500
_WILDCARD = re.compile(r"[*?\[]")


def parse_glob(pattern: str) -> tuple[re.Pattern[str], str]:
    """The pattern's regular expression, and the literal folders it starts with ("" when
    none): where the walk starts. Refused when it is no pattern inside the workspace."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise ToolRefused("pattern must be a non-empty string")
    if "\x00" in pattern:
        raise ToolRefused("pattern must not contain NUL")
    if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
        raise ToolRefused(f"refused: {pattern!r} reaches outside the workspace")
    parts = PurePosixPath(pattern).parts
    if any("**" in part and part != "**" for part in parts):
        raise ToolRefused(
            f"invalid glob pattern {pattern!r}: '**' can only be a whole path component"
        )
    matcher = glob_regex(pattern)
    # The literal folders the pattern starts with are where the walk starts.
    literal = itertools.takewhile(lambda p: not _WILDCARD.search(p), parts[:-1])
    return matcher, "/".join(literal)


def matching_files(root: Path, start: Path, matcher: re.Pattern[str]) -> str:
    """The files under `start` (a folder of `root`) whose paths relative to `root` match, one
    a line, sorted; at most GLOB_MAX_RESULTS of them."""
    found: list[str] = []
    # os.walk does not follow symlinked folders (Path.glob's ** does, out of the
    # workspace), skips unreadable ones, and stops at GLOB_MAX_RESULTS matches.
    for folder, subfolders, files in os.walk(start):
        subfolders.sort()
        for name in sorted(files):
            path = Path(folder, name)
            relative = path.relative_to(root).as_posix()
            if not matcher.fullmatch(relative):
                continue
            with contextlib.suppress(OSError, RuntimeError):  # a broken link, a loop
                if path.resolve().is_relative_to(root) and path.is_file():
                    found.append(relative)  # run() makes it valid text
            if len(found) == GLOB_MAX_RESULTS:
                break
        if len(found) == GLOB_MAX_RESULTS:
            break
    if not found:
        return "no files match"
    text = "\n".join(sorted(found))
    if len(found) == GLOB_MAX_RESULTS:
        text += f"\n[stopped after {GLOB_MAX_RESULTS} matches; narrow the pattern]"
    return text


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob pattern as a regular expression over workspace-relative paths: `**/` is any
    number of folders, `*` and `?` stay within one name, `[...]` is a character class."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1 : end].replace("\\", "\\\\")
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    try:
        return re.compile("".join(out))
    except re.error as error:
        raise ToolRefused(f"invalid glob pattern {pattern!r}: {error}") from None
