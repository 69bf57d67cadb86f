"""Where Claude Code keeps a workspace's auto-memory folder, found without reading it: cheap
enough for `memctl hook` at every SessionStart (no SQLAlchemy, no YAML).

Claude Code keeps a project's memories in `<config>/projects/<slug>/memory/` (config:
$CLAUDE_CONFIG_DIR, else ~/.claude). The project is the canonical git root above the folder
(a worktree's main checkout) or else the folder itself; the slug is its absolute path with
every character but an ASCII letter or digit replaced by `-` (one per UTF-16 code unit, as
JavaScript counts them), cut at 200 characters with `-<hash>` appended when longer.
docs/integrations.md says where this rule comes from.
"""

from __future__ import annotations

import os
import struct
import unicodedata
from dataclasses import dataclass
from pathlib import Path

SLUG_MAX_CHARS = 200
MEMORY_FOLDER = "memory"


@dataclass(frozen=True)
class ClaudeFolder:
    # The folder Claude Code keys the memory by, and the memory folder itself.
    project: Path
    path: Path


def find_folder(root: Path, config_dir: Path) -> ClaudeFolder:
    """Where Claude Code keeps the memory of the project at `root` (it may not exist)."""
    project = project_of(root)
    projects = config_dir / "projects"
    name = slug(str(project))
    if len(name) > SLUG_MAX_CHARS and not (projects / name).is_dir():
        # The suffix is Bun's hash in Claude Code's own binary, djb2 under Node: a folder
        # with the same 200 characters is the project's when it is the only one.
        prefix = name[:SLUG_MAX_CHARS] + "-"
        found = [p for p in _folders(projects) if p.name.startswith(prefix)]
        if len(found) == 1:
            name = found[0].name
    return ClaudeFolder(project, projects / name / MEMORY_FOLDER)


def _folders(parent: Path) -> list[Path]:
    try:
        return [Path(entry.path) for entry in os.scandir(parent) if entry.is_dir()]
    except OSError:
        return []


def slug(project: str) -> str:
    """Claude Code's name for a project's folder (its sanitizePath)."""
    project = unicodedata.normalize("NFC", project)
    name = "".join(
        char if char.isascii() and char.isalnum() else "-" * (2 if ord(char) > 0xFFFF else 1)
        for char in project
    )
    if len(name) <= SLUG_MAX_CHARS:
        return name
    return f"{name[:SLUG_MAX_CHARS]}-{_base36(abs(_djb2(project)))}"


def _djb2(text: str) -> int:
    """JavaScript's `hash = ((hash << 5) - hash + charCode) | 0` over UTF-16 code units."""
    encoded = text.encode("utf-16-le")
    value = 0
    for (unit,) in struct.iter_unpack("<H", encoded):
        value = ((value << 5) - value + unit) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while True:
        number, digit = divmod(number, 36)
        text = digits[digit] + text
        if number == 0:
            return text


def project_of(root: Path) -> Path:
    """The project Claude Code keys memory by: the git root at or above `root`, resolved
    through a worktree to its main checkout (only when the worktree's link back agrees, as
    Claude Code checks), else `root`."""
    root = Path(os.path.abspath(root))
    top = next((f for f in (root, *root.parents) if (f / ".git").exists()), None)
    if top is None:
        return root
    try:
        git_file = (top / ".git").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return top  # a .git folder: an ordinary checkout
    if not git_file.startswith("gitdir:"):
        return top
    try:
        git_dir = Path(os.path.realpath(top / git_file.removeprefix("gitdir:").strip()))
        pointer = (git_dir / "commondir").read_text(encoding="utf-8").strip()
        common = Path(os.path.realpath(git_dir / pointer))
        back = (git_dir / "gitdir").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return top
    if git_dir.parent != common / "worktrees":
        return top
    if os.path.realpath(top / back) != os.path.join(os.path.realpath(top), ".git"):
        return top
    return common if common.name != ".git" else common.parent
