"""Claude Code's auto-memory folder (found by integrations/claude_folder.py): importing it
into the store, and writing the store's changes back into it in place. The folder holds one
Markdown file per memory, with the frontmatter memstore's own files have, and a MEMORY.md
index of `- [Title](file.md) — hook` lines.

Import and write-back are the library's own (files/importer.py, files/exporter.py and its
in-place rewriting), with what this folder needs: only the files directly in it, its MEMORY.md
kept as Claude Code writes it, and the store's writes under the actor `claude-code`.
`sync_folder` runs both, as `memctl claude sync` does after the hook saw a change
(integrations/claude_sync.py).

Claude Code hands the folder to its model as it is, without memstore's escaping: what
memstore writes there shows the characters no one sees (tag characters, bidirectional
controls; memstore.text.show_hidden), in the memories' files and in MEMORY.md, while the
store keeps them (files/hidden_shown.py). A file so written and imported again changes
nothing; a file edited by hand brings the escapes it shows into the fields edited.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memstore.errors import ExportConflict, ExportFailed, NoClaudeFolder
from memstore.files.exporter import ExportResult, export_memories
from memstore.files.format import TYPE_ORDER, index_line
from memstore.files.import_file import MAX_FILE_BYTES
from memstore.files.import_folder import FolderRead
from memstore.files.importer import ImportReport, import_memories
from memstore.integrations.claude_folder import ClaudeFolder, find_folder, project_of, slug
from memstore.integrations.door import Door
from memstore.storage.models import MemorySummary
from memstore.text import show_hidden

__all__ = ["ClaudeFolder", "find_folder", "project_of", "slug"]

ACTOR = "claude-code"
INDEX_FILE = "MEMORY.md"


def existing(folder: ClaudeFolder) -> ClaudeFolder:
    """`folder`, which must be a folder; NoClaudeFolder otherwise."""
    if not folder.path.is_dir():
        raise NoClaudeFolder(str(folder.project), str(folder.path))
    return folder


def import_folder(
    door: Door,
    folder: ClaudeFolder,
    *,
    dry_run: bool = False,
    force: bool = False,
    skip_invalid: bool = False,
    default_type: str | None = None,
    read: FolderRead | None = None,
    own_deletions_only: bool = False,
) -> ImportReport:
    """Claude Code's memories into the store, as one run of the actor `claude-code`; then
    `.memory/` is written again, as after any change through a door. `read`: the folder as
    read_for_import read it already (top_level, with the same options).
    `own_deletions_only`: a file gone from the folder deletes its memory only if Claude Code
    created it (`claude-code`); another's is kept, in the report's `spared`."""
    existing(folder)
    report = import_memories(
        door.store,
        folder.path,
        actor=ACTOR,
        top_level=True,
        deletions=True,
        deletes_only=ACTOR if own_deletions_only else None,
        export_command="memctl claude export",
        dry_run=dry_run,
        force=force,
        skip_invalid=skip_invalid,
        default_type=default_type,
        read=read,
        hidden_shown=True,
    )
    if report.run_id is not None:
        door.export()
    return report


def export_folder(
    door: Door,
    folder: ClaudeFolder,
    *,
    dry_run: bool = False,
    force: bool = False,
    hold_conflicts: bool = False,
) -> ExportResult:
    """The store's memories written back into Claude Code's folder: files as they are
    unless their memory changed, a changed one rewritten in place, a new memory as a new
    file, MEMORY.md in Claude Code's form. The folder is in the person's home, their own:
    on a server it gets their `user` memories too. `hold_conflicts`: a file changed on both
    sides is left (in the result's `held`) and the rest written, instead of ExportConflict."""
    existing(folder)
    _check_entries(folder.path)

    def index(
        disk: bytes | None,
        files: dict[str, MemorySummary],
        created: Sequence[str],
        removed: Sequence[str],
    ) -> bytes | None:
        # A file gone from the folder (Claude Code deleted it) is removed as well.
        gone = [*removed, *_dangling(disk, folder.path, files)]
        return claude_index(disk, files, created, gone)

    try:
        return export_memories(
            door.store,
            folder.path,
            force=force,
            dry_run=dry_run,
            index=index,
            personal=True,
            hold_conflicts=hold_conflicts,
            hidden_shown=True,
        )
    except ExportConflict as error:
        # Its advice names this folder's commands: `memctl export --force` would overwrite
        # the workspace's .memory/, not Claude Code's folder.
        raise ExportConflict(
            error.directory,
            error.paths,
            error.reasons,
            import_command="memctl claude import",
            export_command="memctl claude export",
        ) from None


def _dangling(disk: bytes | None, folder: Path, files: dict[str, MemorySummary]) -> list[str]:
    """The files of the folder MEMORY.md links that are neither there nor written now."""
    if disk is None:
        return []
    # MEMORY.md shows a file's name as show_hidden writes it (a file import refuses for its
    # name, whose line is Claude Code's).
    there = {show_hidden(name) for name in [*files, *os.listdir(folder)]}
    linked = re.findall(
        r"(?m)^\s*[-*+]\s.*\]\((?:\./)?<?([^/\\<>()\n]+\.md)>?\)", disk.decode("utf-8", "replace")
    )
    return sorted(
        {
            name
            for name in linked
            if name not in files
            and name not in there
            and name != INDEX_FILE
            and not os.path.lexists(folder / name)
        }
    )


def _check_entries(folder: Path) -> None:
    """Refuse a folder whose Markdown entries are not all regular files: a link is never
    followed nor replaced, and MEMORY.md, which is read whole, is capped."""
    for entry in os.scandir(folder):
        if not entry.name.endswith(".md"):
            continue
        status = entry.stat(follow_symlinks=False)
        if not stat.S_ISREG(status.st_mode):
            raise ExportFailed(
                f"{entry.path} is not a regular file (a link?): not followed, nothing written"
            )
        if entry.name == INDEX_FILE and status.st_size > MAX_FILE_BYTES:
            raise ExportFailed(
                f"{entry.path} is over {MAX_FILE_BYTES:,} bytes: not read, nothing written"
            )


def _link(file_name: str) -> re.Pattern[str]:
    """A list line linking the file: `(name.md)`, `(./name.md)` or `(<my name.md>)`."""
    name = re.escape(file_name)
    return re.compile(rf"^\s*[-*+]\s.*\]\((?:\./)?(?:{name}|<{name}>)\)")


def claude_index(
    disk: bytes | None,
    files: dict[str, MemorySummary],
    created: Sequence[str],
    removed: Sequence[str],
) -> bytes | None:
    """MEMORY.md as Claude Code keeps it: every line of its own stays as written (headings,
    notes, its titles and hooks); the lines that link a removed file go, and a new file gets
    a `- [name](file) — description` line at the end. Without a MEMORY.md, one is written
    listing every file. None: leave the file as it is (it is not UTF-8 text).

    Claude Code's model reads the file whole at every session's start: a character no one
    sees is shown in it, in a line of its own too (a leading byte-order mark stays)."""
    if disk is None:
        ordered = sorted(files.items(), key=lambda f: (TYPE_ORDER.get(f[1].type, 9), f[1].name))
        return show_hidden("".join(index_line(m, name) for name, m in ordered)).encode() or None
    try:
        text = disk.decode("utf-8")
    except UnicodeDecodeError:
        return None
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines(keepends=True)
    gone = [_link(name) for name in removed]
    kept = [line for line in lines if not any(link.match(line) for link in gone)]
    listed = "".join(kept)
    added = [
        index_line(files[name], name).replace("\n", newline)
        for name in sorted(created)
        if name in files and not any(_link(name).match(line) for line in kept)
    ]
    if added and listed and not listed.endswith(("\n", "\r")):
        listed += newline
    written = listed + "".join(added)
    bom = "\ufeff" if written.startswith("\ufeff") else ""
    return (bom + show_hidden(written.removeprefix(bom))).encode()


@dataclass(frozen=True)
class SyncResult:
    imported: ImportReport
    exported: ExportResult
    # The files left as they are, by name: each and its memory both changed.
    conflicts: list[str]
    # The files not imported, by name, and why (a conflict is in `conflicts` only).
    skipped: dict[str, str]


def sync_folder(door: Door, folder: ClaudeFolder) -> SyncResult:
    """Claude Code's edits imported, then the store's changes written back, with the rules of
    `memctl claude import` and `export` without --force: a file changed in both places is
    left as it is on both sides (its import is skipped, and so is its write-back, while every
    other file is written) and named in `conflicts`; a file that cannot be imported (invalid,
    a secret, no memory) is left out, named in `skipped` with why, and the rest imported.
    A file gone from the folder deletes only a memory Claude Code created: another's (the
    team's) is kept, and written back (in `imported.spared`)."""
    existing(folder)
    imported = import_folder(door, folder, skip_invalid=True, own_deletions_only=True)
    conflicts = set()
    skipped = {}
    for problem in [*imported.problems, *imported.not_memories]:
        name = Path(problem.path).name
        if "both are newer" in problem.reason:
            conflicts.add(name)
        else:
            skipped[name] = problem.reason
    exported = export_folder(door, folder, hold_conflicts=True)
    conflicts.update(exported.held)
    return SyncResult(imported, exported, sorted(conflicts), skipped)
