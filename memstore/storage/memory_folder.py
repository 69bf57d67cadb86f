"""The `.memory/` folder's layout, and its database kept out of git: the database sits in
it beside the canonical files and MEMORY.md a team commits, ignored by a `.gitignore`
memstore writes when it creates the database (no move, no migration for existing
workspaces), and created readable by its owner only.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

MEMORY_FOLDER = ".memory"
DATABASE_NAME = "memstore.db"
# memctl chat's, beside the database: its sessions' transcripts, and the lines typed.
SESSIONS_FOLDER = "sessions"
LINE_HISTORY_FILE = "chat_history"


def ignored_names(database_name: str) -> list[str]:
    """What must never be committed from `.memory/`: the database with its journal files,
    the chat's transcripts and typed-line history (keys included), export's temporaries."""
    return [
        database_name,
        f"{database_name}-wal",
        f"{database_name}-shm",
        f"{database_name}-journal",
        f"{database_name}-*.lock",  # storage/run_lock.py: while a consolidation runs
        f"{SESSIONS_FOLDER}/",
        LINE_HISTORY_FILE,
        ".*.tmp",
    ]


GITIGNORE_HEADER = "# memstore: the database, transcripts and line history stay local"


def ensure_gitignore(database: Path, *, created: bool) -> None:
    """Keep the database of a `.memory/` folder out of git.

    Writes `.memory/.gitignore` when there is none. When memstore has just created the
    database, a user's own `.gitignore` gets the lines it lacks appended; otherwise it is
    left as the user keeps it. Never rewrites a line. Best effort: a folder that cannot be
    written is logged, not an error (the database itself was opened).
    """
    folder = database.parent
    if folder.name != MEMORY_FOLDER:
        return
    path = folder / ".gitignore"
    try:
        try:
            existing = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            existing = None
        if existing is not None and not created:
            return
        present = set((existing or "").splitlines())
        missing = [line for line in ignored_names(database.name) if line not in present]
        if not missing:
            return
        text = "" if existing is None else existing
        if text and not text.endswith("\n"):
            text += "\n"
        text += "\n".join([GITIGNORE_HEADER, *missing]) + "\n"
        _write_new_text(path, text, replace=existing is not None)
    except OSError as error:
        log.warning("cannot write %s: %s", path, error.strerror or error)


def _write_new_text(path: Path, text: str, *, replace: bool) -> None:
    """Write `text` to `path` through a temporary file and a rename: a crash leaves the
    old file or the new one. A new file is created exclusively (O_EXCL): a file that
    appeared meanwhile is the user's and stays."""
    if not replace:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        return
    if path.is_symlink() or not path.is_file():
        return  # not a plain file of the user's: leave it
    temporary = path.with_name(f".gitignore.{os.getpid()}.tmp")
    descriptor = os.open(
        temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, path.stat().st_mode & 0o777
    )
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def create_private_file(path: Path) -> bool:
    """Create an empty file readable by its owner only (0600), unless one exists. SQLite
    gives the database's -wal and -shm files the database's own mode. True if created."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
    except FileExistsError:
        return False
    return True
