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
sits in it beside them, kept out of git (memory_folder.py).
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from memstore.storage.memory_folder import DATABASE_NAME, MEMORY_FOLDER

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
        from memstore.storage.backend import backend_at  # only a URL needs it

        return backend_at(given).in_project_namespace(given, namespace, found.root), found
    database = Path(os.path.abspath(given))
    return database, workspace_of_database(database) or found


def _home() -> Path | None:
    home = os.environ.get("HOME")
    return Path(os.path.abspath(home)) if home else None
