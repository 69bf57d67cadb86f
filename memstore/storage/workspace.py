"""Where a project's memory lives: the workspace, found upward from a folder as git finds a
repository, and the layout of its `.memory/` folder.

A workspace is the nearest folder, from the start folder upward, that holds a `.memory/`
folder or is the root of a git repository (has `.git`). The search stops at the filesystem
root, and at $HOME: $HOME is a workspace only if it has a `.memory/` folder (a dotfiles
repository in $HOME does not make every folder below it one), and, as git's
GIT_CEILING_DIRECTORIES, before any of the ceiling folders it is given (memctl's come from
MEMSTORE_CEILING_DIRECTORIES; tests use it so that a stray /tmp/.memory is not theirs).
With none found, the start folder is the workspace, and a command that writes creates its
`.memory/` there.

`.memory/` is the folder a team commits (the canonical files and MEMORY.md); the database
sits in it beside them, kept out of git by a `.gitignore` memstore writes when it creates
the database: no move, no migration for existing workspaces, and the files a team commits
stay where Claude Code and the seed put them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

MEMORY_FOLDER = ".memory"
DATABASE_NAME = "memstore.db"
# memctl chat's, beside the database: its sessions' transcripts, and the lines typed.
SESSIONS_FOLDER = "sessions"
LINE_HISTORY_FILE = "chat_history"
# How the workspace was chosen, as `memctl path` says it.
FOUND_MEMORY = "has a .memory/ folder"
FOUND_GIT = "root of a git repository"
FOUND_NONE = "no .memory/ or git repository above: the current folder"
FROM_DATABASE = "the folder of the database's .memory/"


@dataclass(frozen=True)
class Workspace:
    root: Path
    how: str

    @property
    def memory_folder(self) -> Path:
        return self.root / MEMORY_FOLDER

    @property
    def database(self) -> Path:
        return self.memory_folder / DATABASE_NAME


def find_workspace(
    start: Path, home: Path | None = None, ceilings: Collection[Path] = ()
) -> Workspace:
    """The workspace of `start` (see the module's docstring); `ceilings` are absolute."""
    start = Path(os.path.abspath(start))
    if home is None:
        home = _home()
    for folder in (start, *start.parents):
        if folder != start and folder in ceilings:
            break
        if (folder / MEMORY_FOLDER).is_dir():
            return Workspace(folder, FOUND_MEMORY)
        if folder == home:
            break
        if (folder / ".git").exists():  # a folder, or a file in a worktree or submodule
            return Workspace(folder, FOUND_GIT)
    return Workspace(start, FOUND_NONE)


def workspace_of_database(database: Path) -> Workspace | None:
    """The workspace a database belongs to, when it sits in a `.memory/` folder."""
    database = Path(os.path.abspath(database))
    if database.parent.name != MEMORY_FOLDER:
        return None
    return Workspace(database.parent.parent, FROM_DATABASE)


def locate(
    given: Path | str | None,
    start: Path,
    ceilings: Collection[Path] = (),
    namespace: str | None = None,
) -> tuple[Path | str, Workspace]:
    """The database and the workspace, as every door onto the store finds them: the database
    `given` (by --db or MEMSTORE_DB) and the workspace it sits in, or else the workspace found
    upward from `start` and its database. A server's URL (a str) is given back naming its
    project namespace (the URL's own, else `namespace`, else the workspace's git remote:
    storage/postgres/namespace.py), with the workspace found upward from `start`. A str `given`
    is read as --db is (settings.database_location): a path, a server's URL, or refused."""
    found = find_workspace(start, ceilings=ceilings)
    if given is None:
        return found.database, found
    if isinstance(given, str):
        from memstore.settings import database_location

        given = database_location(given)  # a str as typed: a path, a server's URL, or refused
    if isinstance(given, str):
        from memstore.storage.postgres.namespace import resolve

        url, _ = resolve(given, namespace, found.root)
        return url, found
    database = Path(os.path.abspath(given))
    return database, workspace_of_database(database) or found


def _home() -> Path | None:
    home = os.environ.get("HOME")
    return Path(os.path.abspath(home)) if home else None


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
