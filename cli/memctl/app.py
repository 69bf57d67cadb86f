"""memctl: manage, search, audit, export and import memstore memories.

Commands stay thin: they parse options, call memstore, and render. Errors a user can cause
are MemstoreError subclasses, rendered once in main() as one line on stderr, exit code 1.
"""

import contextlib
import copy
import logging
import os
import shlex
import sqlite3
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from sqlalchemy.exc import DatabaseError
from typer.core import TyperGroup

from memctl.render import (
    change_summary,
    count,
    event_as_dict,
    memory_as_dict,
    plan_lines,
    print_json,
    print_json_rows,
    print_table,
    recall_summary,
    shown_score,
    visible_controls,
)
from memstore.errors import (
    MemoryNotFound,
    MemstoreError,
    NoDatabase,
    NothingToRestore,
    SecretRefused,
    SemanticUnavailable,
    StoreUnavailable,
)
from memstore.settings import (
    CONTEXT_TOKENS_VARIABLE,
    DB_VARIABLE,
    DEFAULT_CONTEXT_TOKENS,
    Settings,
    database_location,
)
from memstore.storage.models import MemoryEvent, MemoryRecord, Run
from memstore.storage.store import MemoryStore
from memstore.storage.workspace import Workspace, find_workspace, locate
from memstore.text import shorten

DEFAULT_DIRECTORY = ".memory"
# `memctl consolidate` when another consolidation of the store is running: sysexits'
# EX_TEMPFAIL, "try again later" (not 1: nothing failed, and a script may retry).
CONSOLIDATION_SKIPPED_EXIT = 75


class _Location:
    """Where this command's memory is: found while the command line is parsed (_set_db), given
    out when the command asks. A --db or MEMSTORE_DB that names nothing memstore can open is
    kept, not raised, until then: `memctl COMMAND --help` works whatever MEMSTORE_DB says, and
    a command that needs the database says what is wrong with it in one line."""

    def __init__(self) -> None:
        self._db: Path | str = Path(DEFAULT_DIRECTORY) / "memstore.db"  # a str: a server's URL
        self._workspace = Workspace(Path("."), "")
        # As given (a server's URL before its namespace is added).
        self._given: Path | str | None = None
        self.error: MemstoreError | None = None  # why the database given cannot be used
        self.db_given = False  # by --db or MEMSTORE_DB
        self.settings: Settings  # the environment's, read as the command line is parsed

    def found(self, db: Path | str, workspace: Workspace, given: Path | str | None) -> None:
        self._db, self._workspace, self._given, self.error = db, workspace, given, None

    def _usable(self) -> None:
        if self.error is not None:
            raise self.error

    @property
    def db(self) -> Path | str:
        self._usable()
        return self._db

    @property
    def workspace(self) -> Workspace:
        self._usable()
        return self._workspace

    @property
    def given(self) -> Path | str | None:
        self._usable()
        return self._given


State = _Location()


def _set_db(ctx: typer.Context, value: str | None) -> str | None:
    if value is None and State.db_given:
        return value  # given before the command name, not repeated after it
    State.settings = Settings.from_environment()
    # The option reads MEMSTORE_DB too (for --help): the settings read it as the old name,
    # and name it in their error. (Typer's own copy of Click's ParameterSource, by name.)
    source = ctx.get_parameter_source("db")
    typed = None if source is not None and source.name == "ENVIRONMENT" else value
    State.db_given = typed is not None or State.settings.db_typed is not None
    try:
        given = database_location(typed) if typed is not None else State.settings.db
        db, workspace = locate(
            given, Path.cwd(), State.settings.ceiling_directories, State.settings.namespace
        )
    except MemstoreError as error:  # said by the command that needs the database
        State.error = error
        return value
    State.found(db, workspace, given)
    return value


class _DbGroup(TyperGroup):
    """The app's command group. Its --db option (configure's) is copied onto every command
    below it, so that --db goes before or after the command name with one definition; only
    the app's own reads MEMSTORE_DB, so the environment never overrides a --db given first."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        option = next(p for p in self.params if p.name == "db")
        _add_db_option(self, option)


def _add_db_option(group: Any, option: Any) -> None:
    for command in group.commands.values():
        copied = copy.copy(option)
        copied.envvar = None
        copied.expose_value = False  # _set_db keeps it; the command's function takes none
        command.params.append(copied)
        if hasattr(command, "commands"):  # a group: `memctl semantic status --db X`
            _add_db_option(command, option)


app = typer.Typer(
    cls=_DbGroup,
    help="Long-term memory for coding agents: memories in SQLite, audited, exported to .memory/.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _db_exists() -> bool:
    """Whether the database is there: a server's always is (opening it creates the schema)."""
    return isinstance(State.db, str) or State.db.exists()


def _no_database_yet() -> bool:
    """Whether opening the store would create its database (a SQLite file not there yet).
    A command that may refuse what it was given checks that first then, so that a refusal
    leaves the disk as it was: no .memory/, database or .gitignore made for nothing."""
    return isinstance(State.db, Path) and not State.db.exists()


def _memory_to_change(name: str) -> None:
    """Before a command that changes the memory `name` opens the store: with no database yet
    there is no such memory (the store's own error), and none is created."""
    if _no_database_yet():
        raise MemoryNotFound(name)


def _store(actor: str = "cli", *, read_only: bool = False) -> MemoryStore:
    """The workspace's store. A command that only reads passes read_only: it creates no
    database (NoDatabase: "no memory here"), and opens one it cannot write read-only."""
    return MemoryStore(
        State.db,
        actor=actor,
        command=_command_line(),
        create=not read_only,
    )


def _command_line() -> str:
    """The command as typed, for the run's record, with every option's value left out
    (`-b ...`): a body or description given on the command line stays out of history."""
    command: Any = typer.main.get_command(app)
    takes_value = _value_options(command)
    words = ["memctl"]
    hide_next = options_done = False
    for arg in sys.argv[1:]:
        if hide_next:
            words.append("...")
            hide_next = False
        elif options_done or not arg.startswith("-") or arg == "-":
            words.append(arg)
            subcommand = getattr(command, "commands", {}).get(arg)
            if subcommand is not None and not options_done:
                command = subcommand
                takes_value |= _value_options(command)
        elif arg == "--":
            options_done = True
            words.append(arg)
        elif arg.startswith("--") and "=" in arg:
            words.append(arg.partition("=")[0] + "=...")
        elif arg in takes_value:
            words.append(arg)
            hide_next = True
        elif not arg.startswith("--") and arg[:2] in takes_value:
            words.append(arg[:2] + "...")  # -bVALUE
        else:
            words.append(arg)
    return shlex.join(words)


def _value_options(command: Any) -> set[str]:
    """The option names of `command` that take a value (not flags)."""
    return {
        name
        for param in command.params
        if param.param_type_name == "option" and not param.is_flag and not param.count
        for name in param.opts
    }


def _err(message: str) -> None:
    sys.stderr.write(message + "\n")


def _quoted(text: str) -> str:
    """The user's text quoted in a message: a query of 10,000 words is not repeated whole."""
    return repr(shorten(text, QUOTED_MAX_CHARS))


def fail(message: str) -> NoReturn:
    _err(f"memctl: error: {message}")
    raise SystemExit(1)


TYPE_HELP = "user, feedback, project or reference."
AllowSecretOption = Annotated[
    bool,
    typer.Option(
        "--allow-secret",
        help="Store it even though it looks like it holds a secret (a key, token, password).",
    ),
]


def _secret_hint(error: SecretRefused) -> NoReturn:
    fail(f"{error}; if it is not a secret, run again with --allow-secret")


# A message quotes at most this much of the user's text.
QUOTED_MAX_CHARS = 80

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _print_version(asked: bool) -> None:
    if asked:
        from memstore import __version__

        print(f"memctl {__version__}")
        raise typer.Exit()


@app.callback()
def configure(
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            envvar=DB_VARIABLE,
            callback=_set_db,
            help="The database file (default: .memory/memstore.db of the workspace, found"
            " upward from the current folder as git finds a repository), or a PostgreSQL"
            " server's postgresql://... URL. Before or after the command name.",
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            is_eager=True,
            callback=_print_version,
            help="Print memctl's version and exit.",
        ),
    ] = False,
) -> None:
    pass  # _set_db, the option's callback, keeps it (for every command: see _DbGroup)


@app.command("list")
def list_memories(
    type: Annotated[str | None, typer.Option("--type", "-t", help=TYPE_HELP)] = None,
    json: JsonOption = False,
) -> None:
    """List the memories."""
    with _store(read_only=True) as store:
        if json:
            print_json([memory_as_dict(m) for m in store.memories(type)])
            return
        summaries = store.summaries(type)
    if summaries:
        print_table(["NAME", "TYPE", "DESCRIPTION"], summaries)
    else:
        _err("no memories yet: add one with 'memctl add' or bring a folder in with 'memctl import'")


@app.command()
def show(name: str, json: JsonOption = False) -> None:
    """Show one memory in its canonical file form."""
    from memstore.files.format import render_memory_file

    with _store(read_only=True) as store:
        memory = store.get(name)
    if json:
        print_json(memory_as_dict(memory))
    else:
        text = render_memory_file(memory)
        # A memory is untrusted text: on a terminal its escape sequences are shown, not run.
        sys.stdout.write(visible_controls(text) if sys.stdout.isatty() else text)


@app.command()
def add(
    name: str,
    type: Annotated[str, typer.Option("--type", "-t", help=TYPE_HELP)],
    description: Annotated[
        str, typer.Option("--description", "-d", help="One line, shown in the index.")
    ],
    body: Annotated[
        str | None, typer.Option("--body", "-b", help="Markdown body (default: read stdin).")
    ] = None,
    allow_secret: AllowSecretOption = False,
) -> None:
    """Add a memory; the body comes from --body or stdin."""
    if body is None:
        if sys.stdin.isatty():
            fail("give the body with --body, or pipe it on stdin")
        body = sys.stdin.read()
    try:
        if _no_database_yet():
            from memstore.storage.validation import check_new_memory

            check_new_memory(name, type, description, body, allow_secrets=allow_secret)
        with _store() as store:
            memory = store.create(name, type, description, body, allow_secrets=allow_secret)
    except SecretRefused as error:
        _secret_hint(error)
    _err(f"added {memory.name}")


@app.command()
def edit(
    name: str,
    new_name: Annotated[str | None, typer.Option("--name", help="Rename the memory.")] = None,
    type: Annotated[str | None, typer.Option("--type", "-t", help=TYPE_HELP)] = None,
    description: Annotated[
        str | None, typer.Option("--description", "-d", help="A new one-line description.")
    ] = None,
    body: Annotated[str | None, typer.Option("--body", "-b", help="A new Markdown body.")] = None,
    allow_secret: AllowSecretOption = False,
) -> None:
    """Change a memory: with options, or in $EDITOR on its canonical text."""
    _memory_to_change(name)
    with _store() as store:
        if any(v is not None for v in (new_name, type, description, body)):
            fields: dict[str, Any] = {
                "name": new_name,
                "type": type,
                "description": description,
                "body": body,
            }
            try:
                with store.transaction(allow_secrets=allow_secret) as tx:
                    memory = tx.get(name)
                    updated = tx.update(memory, **fields)
            except SecretRefused as error:
                _secret_hint(error)
        else:
            memory, updated = _edit_in_editor(store, name, allow_secret)
    _err(f"updated {updated.name}" if updated is not memory else f"no changes to {name}")


def _edit_in_editor(
    store: MemoryStore, name: str, allow_secret: bool
) -> tuple[MemoryRecord, MemoryRecord]:
    """Edit the canonical text in $VISUAL/$EDITOR and apply it. The edited text is kept
    (and its path printed) whenever it cannot be applied, so no typing is lost."""
    import subprocess
    import tempfile

    from memstore.errors import UnreadableFile
    from memstore.files.format import memory_fields, render_memory_file

    opened = store.get(name)
    editor = State.settings.editor
    folder = Path(tempfile.mkdtemp(prefix="memctl-edit-"))
    path = folder / f"{name}.md"
    path.write_text(render_memory_file(opened), encoding="utf-8")
    try:
        completed = subprocess.run([*shlex.split(editor), str(path)], check=False)
    except (OSError, ValueError) as error:
        fail(f"cannot run editor {editor!r}: {getattr(error, 'strerror', None) or error}")
    if completed.returncode != 0:
        fail(f"editor {editor!r} exited with status {completed.returncode}; nothing changed")
    try:
        fields = memory_fields(path.read_text(encoding="utf-8"))
        with store.transaction(allow_secrets=allow_secret) as tx:
            memory = tx.get(name)
            if memory.version != opened.version:
                fail(f"{name} changed while you were editing; your text is kept in {path}")
            updated = tx.update(memory, **fields)
    except SecretRefused as error:
        fail(
            f"{error}; your text is kept in {path} (if it is not a secret, run again with "
            "--allow-secret)"
        )
    except (UnreadableFile, UnicodeDecodeError, MemstoreError) as error:
        fail(f"{error}; nothing changed, your text is kept in {path}")
    path.unlink()
    folder.rmdir()
    return memory, updated


@app.command("rm")
def remove(name: str) -> None:
    """Delete a memory (it stays in history; 'memctl restore' brings it back)."""
    _memory_to_change(name)
    with _store() as store:
        store.delete(name)
    _err(f"deleted {name} (restore with: memctl restore {name})")


@app.command()
def restore(name: str, allow_secret: AllowSecretOption = False) -> None:
    """Bring back the most recently deleted memory of this name."""
    if _no_database_yet():
        raise NothingToRestore(name, "no deleted memory has that name")
    try:
        with _store() as store:
            store.restore(name, allow_secrets=allow_secret)
    except SecretRefused as error:
        _secret_hint(error)
    _err(f"restored {name}")


@app.command()
def search(
    query: str,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, help="At most this many results.")
    ] = 10,
    json: JsonOption = False,
) -> None:
    """Full-text search over name, description and body, best first."""
    from memstore.storage.search import search_terms

    if not search_terms(query):
        _err(
            f"no searchable words in {_quoted(query)}: common words like 'the' or 'how' are"
            " not searched"
        )
        if json:
            print_json([])
        return
    with _store(read_only=True) as store:
        hits = store.search(query, limit)
    if json:
        print_json([{**memory_as_dict(h.memory), "score": h.score} for h in hits])
    elif hits:
        print_table(
            ["NAME", "TYPE", "SCORE", "DESCRIPTION"],
            [
                (h.memory.name, h.memory.type, shown_score(h.score), h.memory.description)
                for h in hits
            ],
        )
    else:
        _err(f"no memory matches {_quoted(query)}")


@app.command("recall")
def recall_command(
    text: str,
    offline: Annotated[
        bool,
        typer.Option(
            "--offline",
            help="Do not ask the model: keywords, and meaning when semantic recall is on.",
        ),
    ] = False,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="At most N memories.")] = 5,
    json: JsonOption = False,
) -> None:
    """Which memories the agent would be shown for TEXT, by which path, and why."""
    from memstore.llm.client import make_client
    from memstore.recall.turn import recall
    from memstore.recall.vectors import SemanticIndex

    client = None if offline else make_client()
    with _store(read_only=True) as store:
        result = recall(
            [{"role": "user", "content": text}],
            limit,
            store=store,
            client=client,
            semantic=SemanticIndex(store),
        )
        memories = {name: store.find(name) for name in result.names}
    if client is None and not offline and result.path.offline:
        result.reason = "no ANTHROPIC_API_KEY set"
    if json:
        print_json(
            {
                "path": result.path,
                "reason": result.reason,
                "memories": [
                    {
                        "name": n,
                        "score": result.scores.get(n),
                        "matched": list(result.matched.get(n, ())),
                        "similarity": result.similarity.get(n),
                        "description": m.description if m else "",
                    }
                    for n, m in memories.items()
                ],
            }
        )
        return
    _err(recall_summary(result))
    if result.names:
        headers = ["NAME", "SCORE", "DESCRIPTION"]
        rows = [
            [
                n,
                shown_score(result.scores[n]) if n in result.scores else "",
                m.description if m else "",
            ]
            for n, m in memories.items()
        ]
        if result.matched:  # the keyword path says which words each memory has
            headers.insert(2, "MATCHED")
            for row, name in zip(rows, memories, strict=True):
                row.insert(2, ", ".join(result.matched.get(name, ())))
        if result.similarity:  # and semantic recall, how near in meaning
            headers.insert(2, "SIMILAR")
            for row, name in zip(rows, memories, strict=True):
                near = result.similarity.get(name)
                row.insert(2, f"{near:.2f}" if near is not None else "")
        print_table(headers, rows)


semantic_app = typer.Typer(
    help="Semantic recall: a local sentence encoder beside the keyword path (optional).",
    no_args_is_help=True,
)
app.add_typer(semantic_app, name="semantic")


@semantic_app.command("status")
def semantic_status(json: JsonOption = False) -> None:
    """Whether recall uses the semantic model (its files checked), where it is, and how many
    vectors are stored."""
    from memstore.recall.model_files import ENCODER_PACKAGE, ENCODER_VERSION, MODEL_NAME
    from memstore.recall.vectors import SemanticModel

    model = SemanticModel()
    reason = model.unavailable_reason()
    if reason is None:
        try:
            model.encoder()  # that the files load, not only that they are there
        except SemanticUnavailable as error:
            reason = str(error)
    present = live = 0  # no database yet: the model's state is still worth telling
    if _db_exists():
        with _store(read_only=True) as store:
            present, live = store.vector_counts(MODEL_NAME)
    status = {
        "on": reason is None,
        "reason": reason or "",
        "model": MODEL_NAME,
        "package": f"{ENCODER_PACKAGE}=={ENCODER_VERSION}",
        "folder": str(model.folder),
        "memories": live,
        "vectors": present,
    }
    if json:
        print_json(status)
        return
    print(f"semantic recall: {'on' if reason is None else 'off (' + reason + ')'}")
    where = f"in {status['folder']}" if model.folder.is_dir() else "not installed"
    print(f"model: {status['model']} ({status['package']}) {where}")
    print(f"vectors: {present} of {count(live, 'memory', 'memories')}")


@semantic_app.command("index")
def semantic_index() -> None:
    """Compute the vectors of memories that have none (recall also does, when it needs them)."""
    import time

    from memstore.recall.vectors import SemanticIndex, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        fail(f"semantic recall is off: {reason}")

    def show(done: int, total: int) -> None:
        sys.stderr.write(f"\rcomputing vectors: {done}/{total}")
        if done == total:
            sys.stderr.write("\n")

    if _no_database_yet():  # no memory to compute a vector of: none is made for it
        raise NoDatabase(str(State.db))
    started = time.perf_counter()
    with _store() as store:
        computed = SemanticIndex(store).index_all(show if sys.stderr.isatty() else None)
    _err(f"computed {count(computed, 'vector')} in {time.perf_counter() - started:.1f} s")


@app.command()
def history(
    name: Annotated[
        str | None, typer.Argument(help="Only this memory (any memory that had this name).")
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", min=1, help="Only the last N events.")
    ] = None,
    runs: Annotated[
        bool, typer.Option("--runs", help="One line per run (command, consolidation, undo).")
    ] = False,
    run_id: Annotated[
        str | None,
        typer.Option(
            "--run",
            metavar="RUN",
            help="One run in detail: who made it, on which host, its command and its events.",
        ),
    ] = None,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="Check the history's hash chain; exit 1 naming the first event that fails.",
        ),
    ] = False,
    json: JsonOption = False,
) -> None:
    """The audit log: every change, oldest first."""
    if verify:
        with _store(read_only=True) as store:
            report = store.history.verify()
        if json:  # a chain that breaks is an error, exit 1, as without --json
            print_json({"verified": True, "events": report.events, "unseen": report.unseen,
                        "head": report.head})  # fmt: skip
            return
        unseen = (
            f" (and {report.unseen} of other people's own memories, by their hash only)"
            if report.unseen
            else ""
        )
        print(f"history verified: {report.events} events{unseen}, chain head {report.head}")
        return
    if run_id is not None:
        if name is not None or runs:
            fail("--run shows one run; leave out the name and --runs")
        with _store(read_only=True) as store:
            run = store.history.find_run(run_id)
            _show_run(run, store.history.run_events(run.id), json)
        return
    if runs:
        if name is not None:
            fail("--runs lists every run; leave out the name")
        with _store(read_only=True) as store:
            rows = store.history.runs(limit)
        if json:
            print_json(rows)
        elif rows:
            print_table(
                [
                    "STARTED",
                    "RUN",
                    "ACTOR",
                    "CREATED",
                    "UPDATED",
                    "DELETED",
                    "RESTORED",
                    "NOTE",
                    "COMMAND",
                ],
                [
                    (
                        r["started_at"],
                        r["run_id"][:8],
                        r["actor"],
                        r["created"],
                        r["updated"],
                        r["deleted"],
                        r["restored"],
                        _run_note(r),
                        r["command"],
                    )
                    for r in rows
                ],
            )
        else:
            _err("no runs yet")
        return
    with _store(read_only=True) as store:
        events = store.history.events(name, limit)
        made_by = store.history.runs_by_id({e.run_id for e in events}) if json else {}
    if json:
        print_json([event_as_dict(e, made_by.get(e.run_id)) for e in events])
    elif events:
        _events_table(events)
    else:
        _err("no history yet" if name is None else f"no history for {name!r}")


@app.command()
def purge(
    name: str,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Erase a memory's content from history for good (a leaked key): its events stay,
    their content replaced by a marker and its SHA-256; recorded as its own run."""
    import getpass

    if _no_database_yet():
        fail(f"no history for {name!r}")
    with _store(actor="purge") as store:
        store.command += f" (by {getpass.getuser()})"
        events = store.history.events(name)
        if not events:
            fail(f"no history for {name!r}")
        if not yes:
            if not sys.stdin.isatty():
                fail("purge cannot be undone: run again with --yes to confirm")
            memories = len({event.memory_id for event in events})
            typer.confirm(
                f"Erase the content of {name!r} ({memories} memory, {len(events)} events) "
                "from history? The memory is deleted and cannot be restored",
                abort=True,
                err=True,
            )
        try:
            report = store.purge(name)
        except StoreUnavailable as error:
            if store.url is None or "permission denied" not in str(error):
                raise
            fail(
                f"{error}: on a server only the tables' owner role may erase history; run"
                " memctl purge as that role (docs/postgresql.md)"
            )
    _err(f"purged {name}: the content of {report.events} events erased (run {report.run_id[:8]})")


NO_MODEL_HELP = (
    "set ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL for an Anthropic-compatible local server); "
    "list, show, search, recall --offline, history, export and import work without it"
)


@app.command()
def chat(
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace",
            "-w",
            help="The folder the agent works in (default: the workspace, as `memctl path`).",
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="The model (default: $MEMSTORE_MODEL or Sonnet)."),
    ] = None,
    no_memory: Annotated[
        bool, typer.Option("--no-memory", help="No recall, no learning, no memory index.")
    ] = False,
    context_tokens: Annotated[
        int,
        typer.Option(
            "--context-tokens",
            envvar=CONTEXT_TOKENS_VARIABLE,
            min=1_000,
            help="Summarise earlier turns when the conversation grows past this (estimated).",
        ),
    ] = DEFAULT_CONTEXT_TOKENS,
    resume: Annotated[
        bool, typer.Option("--resume", help="Go on with the last saved session.")
    ] = False,
    session: Annotated[
        str | None, typer.Option("--session", help="Go on with this saved session (id or prefix).")
    ] = None,
    dangerously_skip_approvals: Annotated[
        bool,
        typer.Option(
            "--dangerously-skip-approvals",
            help="Run every command, write and edit the model asks for without asking you "
            "(for unattended runs in a sandbox).",
        ),
    ] = False,
) -> None:
    """Talk to a coding agent that remembers across sessions."""
    from memctl.chat_input import keys_kept_for_the_prompt

    # From the start: what a person types while memctl starts (the agent's modules take a
    # moment to load) reaches the first prompt as typed.
    on_terminal = sys.stdin.isatty() and sys.stdout.isatty()
    with keys_kept_for_the_prompt() if on_terminal else contextlib.nullcontext():
        _chat(
            workspace, model, no_memory, context_tokens, session, resume, dangerously_skip_approvals
        )


def _chat(
    workspace: Path | None,
    model: str | None,
    no_memory: bool,
    context_tokens: int,
    session: str | None,
    resume: bool,
    skip_approvals: bool,
) -> None:
    from memctl.chat import run_chat
    from memstore.llm.client import make_client

    # The memory of the folder's workspace (found upward from it), unless --db says otherwise.
    ceilings = State.settings.ceiling_directories
    found = State.workspace if workspace is None else find_workspace(workspace, ceilings=ceilings)
    workspace = found.root if workspace is None else workspace.resolve()
    if not workspace.is_dir():
        fail(f"no folder {workspace}")
    client = make_client(max_retries=4)
    if client is None:
        fail(f"memctl chat needs a model: {NO_MODEL_HELP}")
    db = State.db if State.db_given else found.database
    run_chat(
        db=db,
        workspace=workspace,
        model=model or State.settings.model,
        use_memory=not no_memory,
        client=client,
        context_tokens=context_tokens,
        resume=session or ("last" if resume else None),
        skip_approvals=skip_approvals,
        settings_file=State.settings.settings_file,
    )


@app.command()
def consolidate(
    run: Annotated[
        str | None, typer.Argument(help="With --undo: the run to undo (default: the last).")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the model's plan; change nothing.")
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Apply a plan that needs confirmation.")
    ] = False,
    undo: Annotated[
        bool, typer.Option("--undo", help="Restore the state before a consolidation run.")
    ] = False,
    max_memories: Annotated[
        int, typer.Option("--max", min=1, help="Keep at most this many memories.")
    ] = 30,
    directory: Annotated[
        Path | None,
        typer.Option("--export-dir", help="Re-export here afterwards (default: .memory/)."),
    ] = None,
) -> None:
    """Merge duplicates and drop outdated memories with the model, in one undoable run.
    Exits 75 when another consolidation of the store is running (docs/memctl.md)."""
    from memstore.errors import ConsolidationRefused, ConsolidationSkipped
    from memstore.learning import consolidate as consolidation
    from memstore.llm.client import make_client

    if run is not None and not undo:
        fail("a run id is only taken with --undo")
    directory = directory or State.workspace.memory_folder
    if undo:
        if _no_database_yet():
            fail("no consolidation run to undo")
        with _store(actor="cli") as store:
            _undo(store, run, directory)
        return
    client = make_client()
    if client is None:  # said before a database is created for nothing
        fail(f"consolidation needs the model: {NO_MODEL_HELP}")
    with _store(actor="cli") as store:
        # One consolidation of a store at a time, from reading it to applying the plan; a
        # dry run changes nothing and takes no turn.
        alone = contextlib.nullcontext() if dry_run else consolidation.consolidation_lock(store)
        try:
            with alone:
                plan = consolidation.plan_consolidation(
                    store=store, client=client, max_memories=max_memories
                )
                for line in plan_lines(plan):
                    print(line)
                if dry_run:
                    _err("dry run: nothing changed")
                    return
                if plan.empty:
                    consolidation.apply_plan(store, plan)  # recorded: the trigger waits
                    _err("nothing to consolidate")
                    return
                warnings = plan.warnings()
                confirmed = yes
                if warnings and not yes:
                    if not sys.stdin.isatty():
                        raise ConsolidationRefused(
                            f"not applied: {'; '.join(warnings)}; run again with --yes to apply"
                        )
                    confirmed = typer.confirm(f"This plan {'; '.join(warnings)}. Apply it?")
                    if not confirmed:
                        fail("not applied")
                outcome = consolidation.apply_plan(store, plan, confirmed=confirmed)
        except ConsolidationSkipped as skipped:
            _err(f"memctl: {skipped}; try again when it ends")
            raise SystemExit(CONSOLIDATION_SKIPPED_EXIT) from None
        _err(
            f"consolidated {plan.before} → {count(plan.after, 'memory', 'memories')} "
            f"in run {outcome.run_id}; "
            f"undo with: memctl consolidate --undo {(outcome.run_id or '')[:8]}"
        )
        _reexport_after(store, directory, "the consolidation")


def _undo(store: MemoryStore, run: str | None, directory: Path) -> None:
    from memstore.learning.consolidate import ACTOR
    from memstore.storage.undo import last_undoable_run, undo_run

    if run is None:
        run = last_undoable_run(store, ACTOR)
    if run is None:
        fail("no consolidation run to undo")
    result = undo_run(store, run)
    parts = [
        f"{label} {', '.join(names)}"
        for label, names in [
            ("restored", result.restored),
            ("reverted", result.reverted),
            ("removed", result.deleted),
        ]
        if names
    ]
    _err(f"undid run {result.undone.id[:8]}: {'; '.join(parts)} (run {result.run_id[:8]})")
    _reexport_after(store, directory, "the undo")


def _reexport(store: MemoryStore, directory: Path, *, force: bool = False) -> None:
    from memstore.files.exporter import export_memories

    result = export_memories(store, directory, force=force)
    for note in result.notes:
        _err(f"note: {note}")
    _err(
        f"exported to {result.directory}: {len(result.written)} written, "
        f"{len(result.removed)} removed, {result.unchanged} unchanged"
    )


def _reexport_after(store: MemoryStore, directory: Path, done: str) -> None:
    """The export after a change that is committed: files edited by hand are kept, and the
    command still succeeds (exit 0), saying what was not written and how to write it."""
    from memstore.errors import ExportConflict

    try:
        _reexport(store, directory)
    except ExportConflict as conflict:
        _err(f"note: {done} is saved in the store; {directory} was left as it is: {conflict}")


def _events_table(events: list[MemoryEvent]) -> None:
    print_table(
        ["AT", "OPERATION", "NAME", "ACTOR", "RUN", "CHANGE"],
        [
            (e.created_at, e.operation, e.memory_name, e.actor, e.run_id[:8], change_summary(e))
            for e in events
        ],
    )


def _show_run(run: Run, events: list[MemoryEvent], json: bool) -> None:
    """`memctl history --run`: the run's fields (who made it: unknown before revision 0007),
    then its events."""
    if json:
        print_json({**run.model_dump(), "events": [event_as_dict(e, run) for e in events]})
        return
    for label, value in (
        ("run", run.id),
        ("started", run.started_at),
        ("actor", run.actor),
        ("identity", run.identity or "unknown"),
        ("host", run.host or "unknown"),
        ("command", run.command),
        ("session", run.session_id),
        ("undoes", run.undoes),
    ):
        if value is not None:
            print(f"{label + ':':<10}{value}")
    if events:
        print()
        _events_table(events)


def _run_note(row: dict[str, Any]) -> str:
    notes = []
    if row["undoes"]:
        notes.append(f"undoes {row['undoes'][:8]}")
    if row["undone_by"]:
        notes.append(f"undone by {row['undone_by'][:8]}")
    if row["session_id"]:
        notes.append(f"session {row['session_id'][:8]}")
    return ", ".join(notes)


def _folder(given: str | None) -> Path:
    """A folder argument, the workspace's .memory/ when not given. An empty one is refused:
    it would mean the current folder, and is most often an unset variable ("$DIR")."""
    if given is None:
        return State.workspace.memory_folder
    if not given.strip():
        fail("the folder given is an empty string: name a folder, or none for .memory/")
    return Path(given)


@app.command("export")
def export_command(
    directory: Annotated[
        str | None,
        typer.Argument(help="Where to write (default: the workspace's .memory/)."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite files edited by hand.")] = False,
) -> None:
    """Write the canonical .memory/ files and MEMORY.md. On a server your `user` memories stay
    out (the folder is shared): `memctl claude export` writes them to your own folder."""
    folder = _folder(directory)
    if folder.exists() and not folder.is_dir():  # said before a database is created for it
        fail(f"cannot create {folder.absolute()}: a file is there, not a folder")
    with _store(read_only=True) as store:  # a store it cannot write is still exported
        _reexport(store, folder, force=force)


@app.command("import")
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
) -> None:
    """Read memory files (ours, Claude Code's, hand-written) into the database; a file removed
    from the folder since deletes its memory (docs/file-format.md)."""
    from memstore.errors import ImportRejected
    from memstore.files.importer import import_memories, read_for_import

    folder = _folder(directory)
    if folder.is_file():
        fail(f"{folder} is a file: memctl import reads a folder (put the file in one)")
    progress = _progress_printer() if sys.stderr.isatty() else None
    try:
        read = None
        new = _no_database_yet()
        if new:  # read and checked first: an import refused creates no database
            read = read_for_import(
                folder,
                None,
                skip_invalid=skip_invalid,
                default_type=default_type,
                progress=progress,
                allow_secrets=allow_secret,
            )
        with _import_store(dry_run=dry_run and new) as store:
            report = import_memories(
                store,
                folder,
                skip_invalid=skip_invalid,
                dry_run=dry_run,
                default_type=default_type,
                progress=progress,
                allow_secrets=allow_secret,
                deletions=not keep_removed,
                read=read,
            )
    except ImportRejected as error:
        for problem in error.problems:
            _err(f"invalid: {problem}")
        raise
    except SecretRefused as error:
        _secret_hint(error)
    _render_import(report, folder)


@contextlib.contextmanager
def _import_store(*, dry_run: bool) -> Iterator[MemoryStore]:
    """The store an import goes into; for a dry run with no database yet, an empty one in a
    temporary folder, gone after: a dry run creates nothing."""
    if not dry_run:
        with _store(actor="import") as store:
            yield store
        return
    import tempfile

    with (
        tempfile.TemporaryDirectory(prefix="memctl-dry-run-") as folder,
        MemoryStore(Path(folder) / "empty.db", actor="import") as store,
    ):
        yield store


def _render_import(report: Any, directory: Path) -> None:
    """An import's notes and skipped files on stderr; with --dry-run, what would change on
    stdout; then the counts."""
    for note in report.notes:
        _err(f"note: {note}")
    for problem in [*report.not_memories, *report.problems]:
        _err(f"skipped: {problem}")
    verb = "would import" if report.dry_run else "imported"
    if report.dry_run:
        for name in report.created:
            print(f"create  {name}")
        for name in report.updated:
            print(f"update  {name}")
        for name in report.deleted:
            print(f"delete  {name}")
    deleted = f", {len(report.deleted)} deleted" if report.deleted else ""
    _err(
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

    with _store() as store:
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
        _err(f"semantic recall: {missing} memories have no vector yet ({error});"
             " `memctl semantic index` computes them")  # fmt: skip
        return
    _err(
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


claude_app = typer.Typer(
    help="Claude Code's auto-memory folder of this workspace: bring it in, write back to it.",
    no_args_is_help=True,
)
app.add_typer(claude_app, name="claude")
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
        if dry_run and not _db_exists():
            db = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "memstore.db"
        door = stack.enter_context(Door.open(ACTOR, db=db, settings=State.settings))
        door.store.command = _command_line()
        yield door


@claude_app.command("path")
def claude_path() -> None:
    """Print the workspace's Claude Code memory folder (and, on stderr, its project)."""
    folder = _claude_folder()
    print(folder.path)
    exists = "exists" if folder.path.is_dir() else "does not exist yet"
    _err(f"project: {folder.project}; folder {exists}")


@claude_app.command("import")
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
    from memstore.files.importer import read_for_import
    from memstore.integrations.claude_code import existing, import_folder

    folder = existing(_claude_folder())
    try:
        read = None
        if not dry_run and _no_database_yet():  # checked first: a refusal creates nothing
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
            _err(f"invalid: {problem}")
        if any("both are newer" in problem.reason for problem in error.problems):
            _err(CLAUDE_CONFLICT_HINT)
        raise
    _render_import(report, folder.path)
    if door.export_failure:
        _err(f"note: .memory/ was not written again: {door.export_failure}")


@claude_app.command("export")
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
        _err(CLAUDE_CONFLICT_HINT)
        raise
    if dry_run:
        for name in result.written:
            print(f"{'rewrite' if (folder.path / name).exists() else 'create '}  {name}")
        for name in result.removed:
            print(f"remove   {name}")
    verb = "would write" if dry_run else "wrote"
    _err(
        f"{verb} {folder.path}: {len(result.written)} written, {len(result.removed)} removed, "
        f"{result.unchanged} unchanged"
    )


@app.command()
def index() -> None:
    """Print the MEMORY.md index text."""
    from memstore.files.format import render_index  # loads yaml, which listing does not need

    with _store(read_only=True) as store:
        text = render_index(store.summaries())
    sys.stdout.write(visible_controls(text) if sys.stdout.isatty() else text)


@app.command()
def sql(
    query: str,
    json: JsonOption = False,
    timeout: Annotated[
        float,
        typer.Option("--timeout", min=0, help="Stop the query after this many seconds (0: never)."),
    ] = 30.0,
    max_rows: Annotated[
        int, typer.Option("--max-rows", min=0, help="Print at most this many rows (0: all).")
    ] = 10_000,
) -> None:
    """Run one read-only SQL query; docs/audit.md lists the tables and views. Ctrl-C stops it."""
    import signal

    with _store(read_only=True) as store:  # migrates the database first, where it can be written
        running = store.read_only_query(query, timeout=timeout or None, max_rows=max_rows or None)
    with running:
        # Python's own SIGINT handling waits for SQLite to return, which a runaway query
        # never does: the handler interrupts the connection instead.
        previous = signal.signal(signal.SIGINT, lambda *_: running.interrupt())
        try:
            columns = running.start()
            if json:
                print_json_rows(columns, running.rows())
            elif columns:
                print_table(columns, running.rows())
        except KeyboardInterrupt:
            sys.stdout.flush()
            _err("memctl: sql interrupted")
            raise SystemExit(130) from None
        finally:
            signal.signal(signal.SIGINT, previous)
    if running.truncated:
        _err(f"stopped after {max_rows} rows: --max-rows N for more, 0 for all")


@app.command("copy")
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
    from memstore.storage.copy import copy_store, file_revision

    target = _copy_target(to)  # a --to that is no path nor URL is said before anything else
    if not _db_exists():
        fail(f"copy: there is no store at {State.db} to copy")
    before = None if isinstance(State.db, str) else file_revision(State.db)
    with _store(actor="copy", read_only=True) as store:
        report = copy_store(
            store,
            target,
            command=_command_line(),
            force=force,
            dry_run=dry_run,
            migrated_from=before,
            owner=owner,
        )
    if report.migrated_from is not None:
        _err(f"note: {report.source} was migrated from revision {report.migrated_from} to read it")
    if report.unverified is not None:
        _err(f"note: copied a history that does not verify: {report.unverified}")
    if json:
        print_json(report.as_dict())
        return
    new = " (a new file)" if report.created else ""
    _err(
        f"{'would copy' if report.dry_run else 'copied'} {report.source} to {report.target}{new}:"
        f" {count(report.memories, 'memory', 'memories')} ({report.live} live),"
        f" {count(report.runs, 'run')}, {count(report.events, 'event')},"
        f" {count(report.purges, 'purge')}, {count(report.vectors, 'vector')}"
        f" in {report.seconds:.1f} s"
    )
    if not report.dry_run:
        verified = "" if report.head is None else f"its history verifies (head {report.head}); "
        _err(f"{verified}recorded as run {(report.run_id or '')[:8]} there")


@app.command("grant")
def grant_command(
    role: Annotated[str, typer.Argument(help="The application role to grant, e.g. memstore_app.")],
) -> None:
    """On a PostgreSQL server, as the tables' owner: let ROLE (the role people's memctl log
    in as, or one they are members of) use this project's store (docs/postgresql.md)."""
    if not isinstance(State.db, str):
        fail("grant is for a store on a PostgreSQL server; a SQLite file is its owner's alone")
    from memstore.storage.postgres import grant_application_role
    from memstore.storage.server import shown_url

    with _store(actor="grant") as store:
        grant_application_role(store.engine, role)
    _err(f"granted {role} the use of this project's store on {shown_url(State.db)}")


def _copy_target(to: str) -> Path | str:
    """copy's --to: a file, or a server's URL in the project namespace this workspace's own
    would be in (the URL's, else MEMSTORE_NAMESPACE, else the git remote's)."""
    target = database_location(to)
    if isinstance(target, Path):
        return target
    from memstore.storage.namespace import resolve

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


@app.command()
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


@app.command()
def path() -> None:
    """Print the database path (and, on stderr, the workspace and whether it exists yet)."""
    if isinstance(State.db, str):  # a server's URL, without its password
        from memstore.storage.server import shown_url

        print(shown_url(State.db))
    else:
        print(State.db)
    how = f"given by --db or {DB_VARIABLE}" if State.db_given else State.workspace.how
    exists = "exists" if _db_exists() else "not created yet ('memctl add' or 'import' will)"
    _err(f"workspace: {State.workspace.root} ({how}); database {exists}")
    if isinstance(State.db, str):
        from memstore.storage.namespace import resolve

        given = State.given if isinstance(State.given, str) else State.db
        namespace = resolve(given, State.settings.namespace, State.workspace.root)[1]
        name = namespace.name or "(none)"
        _err(f"namespace: {name} ({namespace.how}); schema {namespace.schema or 'public'}")


@app.command()
def hook() -> None:
    """Answer a Claude Code hook: its JSON on stdin, the memories to add on stdout; nothing,
    and exit 0, when anything goes wrong (see docs/integrations.md)."""
    from memctl.hook import run

    run(State.db if State.db_given else None)


# What a listing's --json prints when there is no database: what an empty store gives.
EMPTY_JSON: dict[str, Any] = {
    "list": [],
    "search": [],
    "history": [],
    "sql": [],
    "recall": {"path": "none", "reason": "no memories", "memories": []},
}


def _command_name(args: list[str]) -> str | None:
    """The command of a memctl command line: its first word that is not an option (nor
    --db's value)."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--db":
            skip = True
        elif not arg.startswith("-"):
            return arg
    return None


def _interrupted(error: BaseException) -> bool:
    """Whether `error` was raised while handling a Ctrl-C (its causes and shown contexts)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__cause__ or (None if seen.__suppress_context__ else seen.__context__)
    return False


def main() -> None:
    logging.basicConfig(format="memctl: %(message)s", level=logging.WARNING)
    # psycopg warns as it leaves a pipeline a refused statement aborted ("error ignored
    # terminating <psycopg.Pipeline …>"): the refusal itself is the one line memctl says.
    logging.getLogger("psycopg").setLevel(logging.ERROR)
    try:
        app(prog_name="memctl")
    except NoDatabase as error:
        # A command that only reads: there is nothing to read, which is no error.
        _err(
            f"no memory here ({error}); add one with 'memctl add' or bring a folder in with"
            " 'memctl import'"
        )
        if "--json" in sys.argv[1:]:  # a script parses stdout: it gets the empty answer
            empty = EMPTY_JSON.get(_command_name(sys.argv[1:]) or "")
            if empty is not None:
                print_json(empty)
        raise SystemExit(0) from None
    except MemstoreError as error:
        fail(str(error))
    except (DatabaseError, sqlite3.DatabaseError) as error:  # e.g. corrupted pages met late
        if isinstance(State.db, str):
            from memstore.storage.server import server_error

            fail(str(server_error(State.db, error)))
        from memstore.storage.engine import database_error

        fail(str(database_error(State.db, error)))
    except KeyboardInterrupt:
        _err("memctl: interrupted")
        raise SystemExit(130) from None
    except SystemExit as exit_:
        # Typer turns Ctrl-C into a silent exit 130: say why memctl stopped. (A command that
        # says so itself, as `sql` does, exits `from None`, which hides the interrupt.)
        if _interrupted(exit_):
            _err("memctl: interrupted")
        raise
    except BrokenPipeError:
        # Output piped into e.g. `head` that stopped reading: not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(0) from None
