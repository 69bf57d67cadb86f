"""The workspace's own instructions for coding agents: CLAUDE.md and AGENTS.md at its root,
read once per session into the system prompt, as Claude Code reads a project's CLAUDE.md.

They are the project's instructions, not memories: never written into the store. Only the
workspace's own files are read (a link that leads out of it is skipped, as the file tools
refuse it); `~/.claude/CLAUDE.md` is not, being a person's notes for Claude Code's own tools
across all projects, where memstore keeps such preferences as `user` memories.
"""

from __future__ import annotations

import logging
import os
import stat

from memstore.agent.tool_calls import ToolRefused
from memstore.agent.tools import Workspace
from memstore.recall.block import as_data

log = logging.getLogger(__name__)

INSTRUCTION_FILES = ("CLAUDE.md", "AGENTS.md")
# Per file: Claude Code itself warns about a CLAUDE.md past 40,000 characters.
FILE_MAX_CHARS = 20_000


def project_instructions(workspace: Workspace) -> str:
    """The files' text, each under its name, escaped as data is (&lt; &gt; &amp;) so that no
    tag in it is real; "" when the workspace has none."""
    parts = []
    seen: set[str] = set()
    for name in INSTRUCTION_FILES:
        try:
            path = workspace.path(name)
        except (ToolRefused, OSError) as error:
            log.warning("%s is not read: %s", name, error)
            continue
        if str(path) in seen:
            continue  # AGENTS.md as a link to CLAUDE.md: once is enough
        text = _read(str(path))
        if text:
            seen.add(str(path))
            parts.append(f"## {name}\n\n{as_data(text)}")
    return "\n\n".join(parts)


def _read(path: str) -> str:
    """The file's text, cut at FILE_MAX_CHARS; "" when it is absent or not a regular file
    (a FIFO is never waited on)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        # UTF-8 takes at most 4 bytes a character: this reads past the cap, never the rest.
        raw = os.read(fd, FILE_MAX_CHARS * 4 + 1)
    except OSError as error:
        log.warning("%s is not read: %s", path, error.strerror or error)
        return ""
    finally:
        os.close(fd)
    text = raw.decode("utf-8", errors="replace").strip()
    if len(text) > FILE_MAX_CHARS:
        return text[:FILE_MAX_CHARS] + (
            f"\n[… cut: only the first {FILE_MAX_CHARS:,} characters of this file are shown]"
        )
    return text
