"""What every memctl command shares: where this command line's memory is (State, filled in
while the command line is parsed), opening its store, the command line as a run records it,
one-line errors, and the options several commands take.

No heavy imports here (SQLAlchemy, the store): a command that does not open the store does
not pay for them, and a command that only reads opens it without them (reading()).
"""

import shlex
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from memstore.errors import MemoryNotFound, MemstoreError, SecretRefused
from memstore.settings import Settings, database_location
from memstore.storage.workspace import Workspace, locate
from memstore.text import shorten, show_hidden

if TYPE_CHECKING:
    from memstore.storage.reads import MemoryReads
    from memstore.storage.store import MemoryStore

DEFAULT_DIRECTORY = ".memory"
# A message quotes at most this much of the user's text.
QUOTED_MAX_CHARS = 80


class _Location:
    """Where this command's memory is: found while the command line is parsed (set_db), given
    out when the command asks. A --db or MEMSTORE_DB that names nothing memstore can open is
    kept, not raised, until then: `memctl COMMAND --help` works whatever MEMSTORE_DB says, and
    a command that needs the database says what is wrong with it in one line."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """As before any command line was parsed: main() starts each one from here, so that
        one process may run many (the tests do)."""
        self._db: Path | str = Path(DEFAULT_DIRECTORY) / "memstore.db"  # a str: a server's URL
        self._workspace = Workspace(Path("."), "")
        # As given (a server's URL before its namespace is added).
        self._given: Path | str | None = None
        self.error: MemstoreError | None = None  # why the database given cannot be used
        self.db_given = False  # by --db or MEMSTORE_DB
        self.settings: Settings  # the environment's, read as the command line is parsed
        # The command line's root command (the app's group), for command_line().
        self.root_command: Any = None

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


def set_db(ctx: typer.Context, value: str | None) -> str | None:
    """The --db option's callback (the app's, and its copy on every command): finds State."""
    State.root_command = ctx.find_root().command
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


def db_exists() -> bool:
    """Whether the database is there: a server's always is (opening it creates the schema)."""
    return isinstance(State.db, str) or State.db.exists()


def no_database_yet() -> bool:
    """Whether opening the store would create its database (a SQLite file not there yet).
    A command that may refuse what it was given checks that first then, so that a refusal
    leaves the disk as it was: no .memory/, database or .gitignore made for nothing."""
    return isinstance(State.db, Path) and not State.db.exists()


def memory_to_change(name: str) -> None:
    """Before a command that changes the memory `name` opens the store: with no database yet
    there is no such memory (the store's own error), and none is created."""
    if no_database_yet():
        raise MemoryNotFound(name)


def open_store(actor: str = "cli", *, read_only: bool = False) -> "MemoryStore":
    """The workspace's store. A command that only reads passes read_only: it creates no
    database (NoDatabase: "no memory here"), and opens one it cannot write read-only."""
    from memstore.storage.store import MemoryStore

    return MemoryStore(
        State.db,
        actor=actor,
        command=command_line(),
        create=not read_only,
    )


@contextmanager
def reading() -> Iterator["MemoryReads"]:
    """The workspace's store for a command that only reads. A database that is there at
    the schema this code expects is read on the DBAPI connection (ReadOnlyStore), without
    SQLAlchemy, whose import would be most of the command's time; any other (none yet, one
    to migrate, one that cannot be read) is opened as open_store(read_only=True) opens it,
    which migrates it or says why not, as before."""
    store: MemoryReads
    unreadable: tuple[type[Exception], ...] = (MemstoreError, *driver_errors())
    try:
        from memstore.storage.reads import ReadOnlyStore

        store = ReadOnlyStore(State.db)
    except unreadable:
        store = open_store(read_only=True)
    try:
        yield store
    finally:
        store.close()


def driver_errors() -> tuple[type[Exception], ...]:
    """What the database drivers raise: sqlite3's errors, and psycopg's once it is imported
    (a command that never imported it cannot have met one)."""
    psycopg = sys.modules.get("psycopg")
    return (sqlite3.Error,) if psycopg is None else (sqlite3.Error, psycopg.Error)


def command_line() -> str:
    """The command as typed, for the run's record, with every option's value left out
    (`-b ...`): a body or description given on the command line stays out of history."""
    command: Any = State.root_command
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


def err(message: str) -> None:
    # A message may name a file or quote a memory: what no one would see is shown.
    sys.stderr.write(show_hidden(message) + "\n")


def quoted(text: str) -> str:
    """The user's text quoted in a message: a query of 10,000 words is not repeated whole."""
    return repr(shorten(text, QUOTED_MAX_CHARS))


def fail(message: str) -> NoReturn:
    err(f"memctl: error: {message}")
    raise SystemExit(1)


def secret_hint(error: SecretRefused) -> NoReturn:
    fail(f"{error}; if it is not a secret, run again with --allow-secret")


TYPE_HELP = "user, feedback, project or reference."
AllowSecretOption = Annotated[
    bool,
    typer.Option(
        "--allow-secret",
        help="Store it even though it looks like it holds a secret (a key, token, password).",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
