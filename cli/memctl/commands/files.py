"""The .memory/ folder: export, import, index; and the re-export after a change."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memctl.context import (
    AllowSecretOption,
    State,
    err,
    fail,
    no_database_yet,
    open_store,
    reading,
    secret_hint,
)
from memctl.render import one_line, visible_controls
from memstore.errors import SecretRefused
from memstore.settings import DB_VARIABLE
from memstore.text import show_hidden

if TYPE_CHECKING:
    from memstore.storage.store import MemoryStore


def export_command(
    directory: Annotated[
        str | None,
        typer.Argument(help="Where to write (default: the workspace's .memory/)."),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Overwrite files edited by hand, each kept first in a copy beside it."
        ),
    ] = False,
) -> None:
    """Write the canonical .memory/ files and MEMORY.md. On a server your `user` memories stay
    out (the folder is shared): `memctl claude export` writes them to your own folder."""
    folder = _folder(directory)
    if folder.exists() and not folder.is_dir():  # said before a database is created for it
        fail(f"cannot create {folder.absolute()}: a file is there, not a folder")
    parent = folder.absolute().parent
    if not folder.exists() and not parent.is_dir():  # a typo must not write anywhere
        fail(f"cannot export to {folder.absolute()}: {parent} does not exist (export creates"
             " the last folder only)")  # fmt: skip
    with open_store(read_only=True) as store:  # a store it cannot write is still exported
        reexport(store, folder, force=force)


def import_command(
    directory: Annotated[
        str | None,
        typer.Argument(help="The folder to read (default: the workspace's .memory/)."),
    ] = None,
    skip_invalid: Annotated[
        bool, typer.Option("--skip-invalid", help="Import the readable files, skip the rest.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would change; change nothing.")
    ] = False,
    default_type: Annotated[
        str | None, typer.Option("--default-type", help="Type for files that name none.")
    ] = None,
    allow_secret: AllowSecretOption = False,
    keep_removed: Annotated[
        bool,
        typer.Option(
            "--keep-removed",
            help="Keep the memories whose file was removed from the folder (by default a"
            " file removed deletes its memory, restorable, unless it changed since).",
        ),
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Where a file and its memory both changed since the last export, take the"
            " file's text (history keeps the database's).",
        ),
    ] = False,
) -> None:
    """Read memory files (ours, Claude Code's, hand-written) into the database; a file removed
    from the folder since deletes its memory (docs/file-format.md)."""
    from memstore.errors import ImportRejected
    from memstore.files.import_folder import read_for_import
    from memstore.files.importer import import_memories

    folder = _folder(directory)
    if folder.is_file():
        fail(f"{folder} is a file: memctl import reads a folder (put the file in one)")
    progress = _progress_printer() if sys.stderr.isatty() else None
    try:
        read = None
        new = no_database_yet()
        if new:  # read and checked first: an import refused creates no database
            read = read_for_import(
                folder,
                None,
                skip_invalid=skip_invalid,
                default_type=default_type,
                progress=progress,
                allow_secrets=allow_secret,
            )
        with import_store(dry_run=dry_run and new) as store:
            report = import_memories(
                store,
                folder,
                skip_invalid=skip_invalid,
                dry_run=dry_run,
                default_type=default_type,
                progress=progress,
                allow_secrets=allow_secret,
                deletions=not keep_removed,
                force=force,
                read=read,
            )
    except ImportRejected as error:
        for problem in error.problems:
            err(f"invalid: {one_line(str(problem))}")
        raise
    except SecretRefused as error:
        secret_hint(error)
    render_import(report, folder)


def index() -> None:
    """Print the MEMORY.md index text."""
    from memstore.files.format import render_index  # loads yaml, which listing does not need

    with reading() as store:
        text = render_index(store.summaries())
    # As `memctl show`: the terminal's escapes on a terminal, the hidden characters anywhere.
    sys.stdout.write(visible_controls(text) if sys.stdout.isatty() else show_hidden(text))


def _folder(given: str | None) -> Path:
    """A folder argument, the workspace's .memory/ when not given. An empty one is refused:
    it would mean the current folder, and is most often an unset variable ("$DIR")."""
    if given is None:
        return State.workspace.memory_folder
    if not given.strip():
        fail("the folder given is an empty string: name a folder, or none for .memory/")
    return Path(given)


def reexport(store: MemoryStore, directory: Path, *, force: bool = False) -> None:
    from memstore.files.exporter import export_memories

    result = export_memories(store, directory, force=force)
    for note in result.notes:
        err(f"note: {note}")
    for file_name, copy in result.kept.items():
        err(f"note: {file_name} held text the database does not have: kept as it was in {copy}")
    err(
        f"exported to {result.directory}: {len(result.written)} written, "
        f"{len(result.removed)} removed, {result.unchanged} unchanged"
    )


def reexport_after(store: MemoryStore, directory: Path, done: str) -> None:
    """The export after a change that is committed: files edited by hand are kept, and the
    command still succeeds (exit 0), saying what was not written and how to write it."""
    from memstore.errors import ExportConflict

    try:
        reexport(store, directory)
    except ExportConflict as conflict:
        err(f"note: {done} is saved in the store; {directory} was left as it is: {conflict}")


@contextlib.contextmanager
def import_store(*, dry_run: bool) -> Iterator[MemoryStore]:
    """The store an import goes into; for a dry run with no database yet, an empty one in a
    temporary folder, gone after: a dry run creates nothing."""
    if not dry_run:
        with open_store(actor="import") as store:
            yield store
        return
    import tempfile

    from memstore.storage.store import MemoryStore

    with (
        tempfile.TemporaryDirectory(prefix="memctl-dry-run-") as folder,
        MemoryStore(Path(folder) / "empty.db", actor="import") as store,
    ):
        yield store


def render_import(report: Any, directory: Path) -> None:
    """An import's notes and skipped files on stderr; with --dry-run, what would change on
    stdout; then the counts."""
    for note in report.notes:
        err(f"note: {one_line(note)}")
    for problem in [*report.not_memories, *report.problems]:
        err(f"skipped: {one_line(str(problem))}")
    verb = "would import" if report.dry_run else "imported"
    if report.dry_run:
        for name in report.created:
            print(f"create  {name}")
        for name in report.updated:
            print(f"update  {name}")
        for name in report.deleted:
            print(f"delete  {name}")
    deleted = f", {len(report.deleted)} deleted" if report.deleted else ""
    err(
        f"{verb} {directory}: {len(report.created)} created, {len(report.updated)} updated"
        f"{deleted}, {len(report.unchanged)} unchanged,"
        f" {len(report.not_memories) + len(report.problems)} skipped"
    )
    if not report.dry_run and (report.created or report.updated):
        _hint_semantic_index()


def _hint_semantic_index() -> None:
    """After an import: many memories without a vector are computed by a `memctl semantic
    index` of their own, in the background (recalls would compute them a few at a time)."""
    import subprocess

    from memstore.recall.vectors import vectors_to_index

    with open_store() as store:
        missing = vectors_to_index(store)
    if not missing:
        return
    index = [sys.executable, "-m", "memctl", "semantic", "index"]
    # The database by the environment, not argv: a server's URL may hold a password, and
    # argv is anyone's to read in `ps`.
    environment = {**os.environ, DB_VARIABLE: str(State.db)}
    try:
        # Detached, its output nowhere: it must not hold the terminal or outlive a pipe.
        subprocess.Popen(
            index,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as error:
        err(f"semantic recall: {missing} memories have no vector yet ({error});"
             " `memctl semantic index` computes them")  # fmt: skip
        return
    err(
        f"semantic recall: computing {missing} vectors in the background"
        " (`memctl semantic status` says how many are done)"
    )


def _progress_printer() -> Callable[[int, int], None]:
    def show(done: int, total: int) -> None:
        if total >= 200 and (done % 100 == 0 or done == total):
            sys.stderr.write(f"\rreading {done}/{total} files")
            if done == total:
                sys.stderr.write("\n")

    return show
