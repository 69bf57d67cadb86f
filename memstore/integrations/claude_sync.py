"""Claude Code's memory folder kept in step with the store by itself: at SessionStart, `memctl
hook` compares a fingerprint of the folder (name, size and mtime of each Markdown file in it)
and the store's change mark (its history's last id) with what the last sync recorded, and
when either changed starts `memctl claude sync` detached (as the learning worker is started:
integrations/claude_sessions.py), so that Claude Code never waits for a sync. When nothing
changed, nothing is read past a directory listing and nothing is written.

The record is a small JSON file beside the learning queue (`.memory/sessions/`), written by
the sync once it has run: {"folder": str, "files": [[name, size, mtime_ns], ...], "mark": [...],
"conflicts": [name, ...], "skipped": {name: why}, "id": str, "deleted": [name, ...],
"spared": [name, ...]}: the sync's status, with the files it left (changed on both sides) and
those it could not import. Each of those is said in one line of the learning log when a sync
first leaves it (for that reason), not again at every sync.

A file gone from Claude Code's folder (Claude Code prunes its own memories) deletes its memory
only if Claude Code created it; a memory another made (the team's) is kept and written back
(claude_code.sync_folder). Either is said to the person, not only to the model: `deleted` and
`spared` are what syncs did since the person was last told, and the next SessionStart hook
shows them in one line (`notice`, Claude Code's `systemMessage`), once: the record's `id` is
then kept in NOTICE_FILE, and a sync carries over what was not shown yet.
The sync runs one at a time per store, under the store's run lock of kind SYNC_RUN.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memstore.integrations.claude_sessions import note_once, start_worker

STATE_FILE = "claude-code-sync.json"
# The id of the last sync record whose deletions the person was shown.
NOTICE_FILE = "claude-code-sync-shown"
# A notice names this many memories, then says how many more.
NOTICE_NAMES = 5
DELETED_NOTICE = (
    "Claude Code deleted {names} from its memory folder: deleted in memstore too"
    " ('memctl restore NAME' brings one back)"
)
SPARED_NOTICE = (
    "Claude Code deleted {names} from its memory folder, which it did not create: kept in"
    " memstore and written back ('memctl rm NAME' deletes one)"
)
# The kind of run_lock.run_alone's lock a sync holds: one sync per store.
SYNC_RUN = "claude-sync"
SYNC_COMMAND = (sys.executable, "-m", "memctl", "claude", "sync")

CONFLICT_LINE = (
    "left as they are, changed both in Claude Code's folder and in the store: {}; keep the"
    " file's with 'memctl claude import --force', the store's with 'memctl claude export --force'"
)
SKIPPED_LINE = "not imported: {path}: {reason}"

Fingerprint = list[list[Any]]


def fingerprint(folder: Path) -> Fingerprint | None:
    """Name, size and mtime (ns) of each Markdown file directly in `folder`, by name; None
    when there is no such folder. One directory listing: no file is opened."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return None
    found: Fingerprint = []
    for entry in entries:
        if not entry.name.endswith(".md"):
            continue
        try:
            status = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        found.append([entry.name, status.st_size, status.st_mtime_ns])
    return sorted(found)


def recorded(state_folder: Path) -> dict[str, Any]:
    """What the last sync recorded; nothing when it has not run (or its file is unreadable)."""
    try:
        data = json.loads((state_folder / STATE_FILE).read_bytes())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def needs_sync(state_folder: Path, folder: Path, mark: Sequence[Any]) -> bool:
    """Whether the folder or the store changed since the last sync (never: a folder that
    does not exist, which Claude Code makes when it first saves a memory)."""
    files = fingerprint(folder)
    if files is None:
        return False
    last = recorded(state_folder)
    return (
        last.get("folder") != str(folder)
        or last.get("files") != files
        or last.get("mark") != list(mark)
    )


def record(
    state_folder: Path,
    folder: Path,
    mark: Sequence[Any],
    *,
    conflicts: Sequence[str] = (),
    skipped: Mapping[str, str] | None = None,
    deleted: Sequence[str] = (),
    spared: Sequence[str] = (),
) -> None:
    """Record the folder and the store as the sync left them (atomically), with the files it
    left as they are (`conflicts`) and those it did not import, with why (`skipped`); the
    memories it deleted and kept whose files were gone, with those of the syncs before whose
    the person was not shown yet."""
    state_folder.mkdir(mode=0o700, exist_ok=True)
    last = recorded(state_folder)
    unshown = last.get("id") is not None and last.get("id") != _shown(state_folder)
    data = {
        "folder": str(folder),
        "files": fingerprint(folder) or [],
        "mark": list(mark),
        "conflicts": sorted(conflicts),
        "skipped": dict(sorted((skipped or {}).items())),
        "id": uuid.uuid4().hex,
        "deleted": _names(last.get("deleted") if unshown else None, deleted),
        "spared": _names(last.get("spared") if unshown else None, spared),
    }
    _write(state_folder / STATE_FILE, json.dumps(data) + "\n")


def notice(state_folder: Path) -> str | None:
    """The line to show the person about what the syncs deleted, or kept, since they were
    last shown; marked shown as it is given (so given once). None: nothing to say."""
    last = recorded(state_folder)
    ident = last.get("id")
    if not isinstance(ident, str) or ident == _shown(state_folder):
        return None
    parts = [
        line.format(names=_listed(names))
        for line, names in (
            (DELETED_NOTICE, _names(last.get("deleted"), ())),
            (SPARED_NOTICE, _names(last.get("spared"), ())),
        )
        if names
    ]
    if not parts:
        return None
    _write(state_folder / NOTICE_FILE, ident + "\n")
    return "memstore: " + "; ".join(parts)


def _names(earlier: Any, now: Sequence[str]) -> list[str]:
    kept = [name for name in earlier if isinstance(name, str)] if isinstance(earlier, list) else []
    return sorted({*kept, *now})


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:NOTICE_NAMES])
    more = len(names) - NOTICE_NAMES
    return f"{shown} and {more} more" if more > 0 else shown


def _shown(state_folder: Path) -> str | None:
    try:
        return (state_folder / NOTICE_FILE).read_text(encoding="utf-8").strip()
    except (OSError, ValueError):
        return None


def _write(path: Path, text: str) -> None:
    """`text` in `path`, atomically, the person's alone; a link is not followed."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
    with os.fdopen(os.open(temporary, flags, 0o600), "w", encoding="utf-8") as file:
        file.write(text)
    os.replace(temporary, path)


def start_sync(state_folder: Path, cwd: Path, db: str | None) -> int:
    """Start `memctl claude sync` detached, its output in the learning log. The process id."""
    state_folder.mkdir(mode=0o700, exist_ok=True)
    return start_worker(state_folder, cwd, db, command=SYNC_COMMAND)


def log_line(state_folder: Path, line: str) -> None:
    """One line in the learning log (the same line twice in a row is said once)."""
    note_once(state_folder, line, source="claude sync")


def log_left(
    state_folder: Path, folder: Path, conflicts: Sequence[str], skipped: Mapping[str, str]
) -> None:
    """Say in the log each file this sync left that the last one did not leave already, for
    the same reason: the conflicts in one line, each file not imported in one line of its own
    (a file left at every sync would otherwise be said at every SessionStart that syncs)."""
    last = recorded(state_folder)
    said = last.get("conflicts")
    said_conflicts = set(said) if isinstance(said, list) else set()
    new = [name for name in conflicts if name not in said_conflicts]
    if new:
        log_line(state_folder, CONFLICT_LINE.format(", ".join(new)))
    said_skipped = last.get("skipped")
    if not isinstance(said_skipped, dict):
        said_skipped = {}
    for name, reason in sorted(skipped.items()):
        if said_skipped.get(name) != reason:
            log_line(state_folder, SKIPPED_LINE.format(path=folder / name, reason=reason))


def log_gone(state_folder: Path, deleted: Sequence[str], spared: Sequence[str]) -> None:
    """Say in the log the memories this sync deleted, and kept, whose files were gone."""
    if deleted:
        log_line(state_folder, DELETED_NOTICE.format(names=", ".join(sorted(deleted))))
    if spared:
        log_line(state_folder, SPARED_NOTICE.format(names=", ".join(sorted(spared))))
