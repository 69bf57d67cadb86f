"""The store as a whole and the servers it lives on: path (where it is), copy (into another
store, a server's or a file), grant (a server's application role), mcp (serving it)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from memctl.context import JsonOption, State, command_line, db_exists, err, fail, open_store
from memctl.render import count, print_json
from memstore.settings import DB_VARIABLE, database_location


def path() -> None:
    """Print the database path (and, on stderr, the workspace and whether it exists yet)."""
    if isinstance(State.db, str):  # a server's URL, without its password
        from memstore.storage.postgres.server import shown_url

        print(shown_url(State.db))
    else:
        print(State.db)
    how = f"given by --db or {DB_VARIABLE}" if State.db_given else State.workspace.how
    exists = "exists" if db_exists() else "not created yet ('memctl add' or 'import' will)"
    err(f"workspace: {State.workspace.root} ({how}); database {exists}")
    if isinstance(State.db, str):
        from memstore.storage.postgres.namespace import resolve

        given = State.given if isinstance(State.given, str) else State.db
        namespace = resolve(given, State.settings.namespace, State.workspace.root)[1]
        name = namespace.name or "(none)"
        err(f"namespace: {name} ({namespace.how}); schema {namespace.schema or 'public'}")


def copy_command(
    to: Annotated[
        str,
        typer.Option(
            "--to",
            metavar="TARGET",
            help="The empty store to copy into: a database file's path or a postgresql://... URL.",
        ),
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be copied; copy nothing.")
    ] = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="Copy a history that does not verify, as it is."),
    ] = False,
    owner: Annotated[
        str | None,
        typer.Option(
            "--owner",
            metavar="ROLE",
            help="Into a server from a file: the role whose own the `user` memories become"
            " (default: the role copying).",
        ),
    ] = None,
    json: JsonOption = False,
) -> None:
    """Copy this store (--db), history included, into an empty one: a file into a
    PostgreSQL server to join a team, or back into a file to leave (docs/postgresql.md)."""
    from memstore.storage.copy import copy_store
    from memstore.storage.copy_source import file_revision

    target = _copy_target(to)  # a --to that is no path nor URL is said before anything else
    if not db_exists():
        fail(f"copy: there is no store at {State.db} to copy")
    before = None if isinstance(State.db, str) else file_revision(State.db)
    with open_store(actor="copy", read_only=True) as store:
        report = copy_store(
            store,
            target,
            command=command_line(),
            force=force,
            dry_run=dry_run,
            migrated_from=before,
            owner=owner,
        )
    if report.migrated_from is not None:
        err(f"note: {report.source} was migrated from revision {report.migrated_from} to read it")
    if report.unverified is not None:
        err(f"note: copied a history that does not verify: {report.unverified}")
    if json:
        print_json(report.as_dict())
        return
    new = " (a new file)" if report.created else ""
    err(
        f"{'would copy' if report.dry_run else 'copied'} {report.source} to {report.target}{new}:"
        f" {count(report.memories, 'memory', 'memories')} ({report.live} live),"
        f" {count(report.runs, 'run')}, {count(report.events, 'event')},"
        f" {count(report.purges, 'purge')}, {count(report.vectors, 'vector')}"
        f" in {report.seconds:.1f} s"
    )
    if not report.dry_run:
        verified = "" if report.head is None else f"its history verifies (head {report.head}); "
        err(f"{verified}recorded as run {(report.run_id or '')[:8]} there")


def grant_command(
    role: Annotated[str, typer.Argument(help="The application role to grant, e.g. memstore_app.")],
) -> None:
    """On a PostgreSQL server, as the tables' owner: let ROLE (the role people's memctl log
    in as, or one they are members of) use this project's store (docs/postgresql.md)."""
    if not isinstance(State.db, str):
        fail("grant is for a store on a PostgreSQL server; a SQLite file is its owner's alone")
    from memstore.storage.postgres.engine import grant_application_role
    from memstore.storage.postgres.server import shown_url

    with open_store(actor="grant") as store:
        grant_application_role(store.engine, role)
    err(f"granted {role} the use of this project's store on {shown_url(State.db)}")


def _copy_target(to: str) -> Path | str:
    """copy's --to: a file, or a server's URL in the project namespace this workspace's own
    would be in (the URL's, else MEMSTORE_NAMESPACE, else the git remote's)."""
    target = database_location(to)
    if isinstance(target, Path):
        return target
    from memstore.storage.postgres.namespace import resolve

    return resolve(target, State.settings.namespace, State.workspace.root)[0]


# From a clone, as the README installs memctl (agent-memstore is not on PyPI).
MCP_EXTRA_HELP = (
    "memctl mcp needs the MCP SDK, memctl's mcp extra: in memstore's clone, pip install"
    " '.[mcp]' (pipx: pipx inject agent-memstore 'mcp>=2.3'; uv: uv tool install --force"
    " '.[mcp]', naming every extra you use: '.[mcp,semantic]'); see docs/integrations.md"
)

MCP_TERMINAL_HELP = (
    "memctl mcp speaks MCP over stdin and stdout to a client that starts it, not to a"
    " terminal: in Claude Code, claude mcp add memstore -- memctl mcp (docs/integrations.md)"
)


def mcp() -> None:
    """Serve this workspace's memory to an MCP client (Claude Code, Claude Desktop) on stdio.

    A client starts it: in Claude Code, `claude mcp add memstore -- memctl mcp` in the
    project's folder; Claude Desktop needs --db. Needs the mcp extra. Setup, tools and
    resources: docs/integrations.md.
    """
    from memstore import __version__

    try:
        from memstore.integrations.mcp_server import serve
    except ImportError as error:
        if (error.name or "").partition(".")[0] not in ("mcp", "mcp_types"):
            raise
        fail(MCP_EXTRA_HELP)
    if sys.stdin.isatty():
        # A person typing: the SDK's stdin reader would wait silently and outlive Ctrl-C.
        fail(MCP_TERMINAL_HELP)
    serve(State.db if State.db_given else None, __version__)
