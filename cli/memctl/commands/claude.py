"""Claude Code: `memctl claude` (its auto-memory folder: path, import, export; memstore in its
settings: install, uninstall) and `memctl hook` as Typer runs it (`memctl.entry` runs the hook
itself before Typer is imported)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from memctl.commands.files import render_import
from memctl.context import State, command_line, db_exists, err, fail, no_database_yet
from memctl.render import one_line, visible_controls

app = typer.Typer(
    help="Claude Code: its auto-memory folder of this workspace (bring it in, write back to "
    "it), and memstore's hooks and MCP server in its settings.",
    no_args_is_help=True,
)

DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="List what would change; change nothing.")
]

CLAUDE_CONFLICT_HINT = (
    "note: in Claude Code's folder, 'memctl claude import' brings in its edits first; where "
    "a file and its memory both changed, 'memctl claude import --force' keeps the file's text "
    "(the memory's stays in history) and 'memctl claude export --force' the database's"
)


def _claude_folder() -> Any:
    from memstore.integrations.claude_code import find_folder

    return find_folder(State.workspace.root, State.settings.claude_config_dir)


@contextlib.contextmanager
def _claude_door(dry_run: bool) -> Iterator[Any]:
    """The store as a door of the actor `claude-code`. A dry run where there is no database
    yet compares with an empty one of its own, so as to create none."""
    import tempfile

    from memstore.integrations.claude_code import ACTOR
    from memstore.integrations.door import Door

    with contextlib.ExitStack() as stack:
        db = State.db
        if dry_run and not db_exists():
            db = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "memstore.db"
        door = stack.enter_context(Door.open(ACTOR, db=db, settings=State.settings))
        door.store.command = command_line()
        yield door


@app.command("path")
def claude_path() -> None:
    """Print the workspace's Claude Code memory folder (and, on stderr, its project)."""
    folder = _claude_folder()
    print(folder.path)
    exists = "exists" if folder.path.is_dir() else "does not exist yet"
    err(f"project: {folder.project}; folder {exists}")


@app.command("import")
def claude_import(
    dry_run: DryRunOption = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Where a file and its memory both changed, take the file's text (the "
            "memory's stays in history).",
        ),
    ] = False,
    skip_invalid: Annotated[
        bool, typer.Option("--skip-invalid", help="Import the readable files, skip the rest.")
    ] = False,
    default_type: Annotated[
        str | None, typer.Option("--default-type", help="Type for files that name none.")
    ] = None,
) -> None:
    """Read Claude Code's memory folder of this workspace into the database."""
    from memstore.errors import ImportRejected
    from memstore.files.import_folder import read_for_import
    from memstore.integrations.claude_code import existing, import_folder

    folder = existing(_claude_folder())
    try:
        read = None
        if not dry_run and no_database_yet():  # checked first: a refusal creates nothing
            read = read_for_import(
                folder.path,
                None,
                skip_invalid=skip_invalid,
                default_type=default_type,
                top_level=True,
            )
        with _claude_door(dry_run) as door:
            report = import_folder(
                door,
                folder,
                dry_run=dry_run,
                force=force,
                skip_invalid=skip_invalid,
                default_type=default_type,
                read=read,
            )
    except ImportRejected as error:
        for problem in error.problems:
            err(f"invalid: {one_line(str(problem))}")
        if any("both are newer" in problem.reason for problem in error.problems):
            err(CLAUDE_CONFLICT_HINT)
        raise
    render_import(report, folder.path)
    if door.export_failure:
        err(f"note: .memory/ was not written again: {door.export_failure}")


@app.command("export")
def claude_export(
    dry_run: DryRunOption = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Overwrite files changed in Claude Code since memstore last read them.",
        ),
    ] = False,
) -> None:
    """Write the database's memories back into Claude Code's memory folder, in place."""
    from memstore.errors import ExportConflict
    from memstore.integrations.claude_code import existing, export_folder

    folder = existing(_claude_folder())  # before the store: a refusal creates no database
    try:
        with _claude_door(dry_run) as door:
            result = export_folder(door, folder, dry_run=dry_run, force=force)
    except ExportConflict:
        err(CLAUDE_CONFLICT_HINT)
        raise
    if dry_run:
        # A file's name is the folder's, anyone's: shown as it is, not as it would act.
        for name in result.written:
            print(f"{'rewrite' if (folder.path / name).exists() else 'create '}  {one_line(name)}")
        for name in result.removed:
            print(f"remove   {one_line(name)}")
    for file_name, copy in result.kept.items():  # --force: each hand edit kept first
        err(f"note: {one_line(file_name)} held text the database does not have: kept in {copy}")
    verb = "would write" if dry_run else "wrote"
    err(
        f"{verb} {folder.path}: {len(result.written)} written, {len(result.removed)} removed, "
        f"{result.unchanged} unchanged"
    )


ScopeOption = Annotated[
    bool,
    typer.Option("--project", help="This project's settings, not yours (--user, the default)."),
]
UserOption = Annotated[bool, typer.Option("--user", help="Your settings, for every project.")]


@app.command("install")
def claude_install(
    user: UserOption = False, project: ScopeOption = False, dry_run: DryRunOption = False
) -> None:
    """Write memstore's hooks and MCP server into Claude Code's settings (without the plugin)."""
    _settings(install=True, user=user, project=project, dry_run=dry_run)


@app.command("uninstall")
def claude_uninstall(
    user: UserOption = False, project: ScopeOption = False, dry_run: DryRunOption = False
) -> None:
    """Take memstore's hooks and MCP server out of Claude Code's settings."""
    _settings(install=False, user=user, project=project, dry_run=dry_run)


def _settings(*, install: bool, user: bool, project: bool, dry_run: bool) -> None:
    from memstore.integrations import claude_settings

    if user and project:
        fail("--user and --project: give one")
    scope = "project" if project else "user"
    root = State.workspace.root if project else Path.cwd()  # --user needs no workspace
    memctl = _memctl_to_name() if install else None
    config_dir = State.settings.claude_config_dir
    changes = claude_settings.plan(scope, config_dir, root, install=install, memctl=memctl)
    for change in changes:
        if dry_run:
            # The settings files' own lines are in the diff: a project's come with its clone.
            print(visible_controls(change.diff()), end="")
    backups = [] if dry_run else claude_settings.apply(changes)
    for change in changes:
        verb = "would change" if dry_run else "changed"
        err(f"{verb} {change.path}" if change.changed else f"unchanged {change.path}")
    for backup in backups:
        err(f"backup: {backup}")
    for change in changes:
        if change.spent_backup is not None and not dry_run:
            err(f"removed {change.spent_backup}: {change.path} is as it was before install")
    if backups or dry_run or any(change.changed for change in changes):
        err("Claude Code reads them when it starts: restart it (/hooks and /mcp show them)")


def _memctl_to_name() -> Any:
    """The memctl the settings name: "memctl" when PATH finds this one, else this one's path;
    with the --db given on this command line (a file's absolute path, a server's URL)."""
    import os
    import shutil
    import sys

    from memstore.integrations.claude_settings import Memctl, program_for, running_memctl
    from memstore.settings import shown_url

    running = running_memctl(sys.argv[0], sys.executable)
    on_path = shutil.which("memctl")
    program = program_for(running, on_path)
    if running is None and on_path is None:
        err("note: memctl is not on PATH: Claude Code will not find it (pipx install it)")
    elif program != "memctl":
        found = "no memctl" if on_path is None else f"another memctl ({on_path})"
        err(f"note: PATH finds {found}: the settings name {program}")
    db = None
    # Only a --db typed here: MEMSTORE_DB reaches the hook as it reaches this command.
    if State.db_given and State.given != State.settings.db:
        given = State.given
        if isinstance(given, str):
            if shown_url(given) != given:
                fail(
                    "--db holds a password, which the settings would keep in clear: give "
                    "the URL without it (the password in ~/.pgpass)"
                )
            db = given
        else:
            db = os.path.abspath(str(given))  # the hook runs in the session's folder
    return Memctl(program, db)


def hook() -> None:
    """Answer a Claude Code hook: its JSON on stdin, the memories to add on stdout; nothing,
    and exit 0, when anything goes wrong (see docs/integrations.md)."""
    from memctl.hook import run

    run(State.db if State.db_given else None)
