"""memctl: manage, search, audit, export and import memstore memories.

This module is the Typer app: its global options (--db, --version), its commands, a module
per group in `memctl.commands`, registered in the order `memctl --help` lists them, and
main(). Commands stay thin: they parse options, call memstore, and render. Errors a user can
cause are MemstoreError subclasses, rendered once in main() as one line on stderr, exit 1.
"""

import copy
import logging
import os
import sqlite3
import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from memctl.coercion import plain_values_first
from memctl.commands import (
    audit,
    chat,
    claude,
    claude_learn,
    files,
    memories,
    semantic,
    server,
    ui,
)
from memctl.context import State, err, fail, set_db
from memctl.render import print_json
from memstore.errors import MemstoreError, NoDatabase
from memstore.settings import DB_VARIABLE


class _DbGroup(TyperGroup):
    """The app's command group. Its --db option (configure's) is copied onto every command
    below it, so that --db goes before or after the command name with one definition; only
    the app's own reads MEMSTORE_DB, so the environment never overrides a --db given first."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        option = next(p for p in self.params if p.name == "db")
        _add_db_option(self, option)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # Every parameter is there by now (Typer adds its completion options after __init__).
        plain_values_first(self)
        return list(super().parse_args(ctx, args))


def _add_db_option(group: Any, option: Any) -> None:
    for command in group.commands.values():
        copied = copy.copy(option)
        copied.envvar = None
        copied.expose_value = False  # set_db keeps it; the command's function takes none
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
            callback=set_db,
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
    pass  # set_db, the option's callback, keeps it (for every command: see _DbGroup)


# The commands, in the order `memctl --help` lists them (the two groups come last).
app.command("list")(memories.list_memories)
app.command("show")(memories.show)
app.command("add")(memories.add)
app.command("edit")(memories.edit)
app.command("rm")(memories.remove)
app.command("restore")(memories.restore)
app.command("search")(memories.search)
app.command("recall")(memories.recall_command)
app.command("history")(audit.history)
app.command("undo")(audit.undo)
app.command("purge")(audit.purge)
app.command("chat")(chat.chat)
app.command("consolidate")(chat.consolidate)
app.command("export")(files.export_command)
app.command("import")(files.import_command)
app.command("index")(files.index)
app.command("sql")(audit.sql)
app.command("copy")(server.copy_command)
app.command("grant")(server.grant_command)
app.command("mcp")(server.mcp)
app.command("path")(server.path)
app.command("ui")(ui.ui)
app.command("hook")(claude.hook)
app.add_typer(semantic.app, name="semantic")
app.add_typer(claude.app, name="claude")
claude.app.command("learn")(claude_learn.learn)
claude.app.command("sync")(claude_learn.sync)


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


def _app_for(args: list[str]) -> typer.Typer:
    """The app that runs `args`: when they name a command after nothing but --db, the app
    with that command alone, since Typer builds every command it has before it parses (a
    good part of a quick command's time); the whole app for anything else (help, an option
    first, a name it does not know, shell completion)."""
    name = _leading_command(args)
    if name is None or any(variable.endswith("_COMPLETE") for variable in os.environ):
        return app
    commands = [info for info in app.registered_commands if info.name == name]
    groups = [info for info in app.registered_groups if info.name == name]
    if not commands and not groups:
        return app
    alone = copy.copy(app)
    alone.registered_commands, alone.registered_groups = commands, groups
    return alone


def _leading_command(args: list[str]) -> str | None:
    """The first word of `args` when only --db and its value come before it."""
    words = iter(args)
    for word in words:
        if word == "--db":
            next(words, None)
        elif not word.startswith("--db="):
            return None if word.startswith("-") else word
    return None


def _interrupted(error: BaseException) -> bool:
    """Whether `error` was raised while handling a Ctrl-C (its causes and shown contexts)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__cause__ or (None if seen.__suppress_context__ else seen.__context__)
    return False


def _database_errors() -> tuple[type[Exception], ...]:
    """The database errors main() says in one line: sqlite3's, and psycopg's and
    SQLAlchemy's when they were imported. A command that only reads never imports
    SQLAlchemy (its start-up would be most of theirs), and then cannot have met its errors."""
    errors: list[type[Exception]] = [sqlite3.DatabaseError]
    for module in ("psycopg", "sqlalchemy.exc"):
        loaded = sys.modules.get(module)
        if loaded is not None:
            errors.append(loaded.DatabaseError)
    return tuple(errors)


def main() -> None:
    # Each command line starts from nothing found yet: one process may run main() many times
    # (the tests do), and a --db given to one must not linger for the next.
    State.reset()
    logging.basicConfig(format="memctl: %(message)s", level=logging.WARNING)
    # psycopg warns as it leaves a pipeline a refused statement aborted ("error ignored
    # terminating <psycopg.Pipeline …>"): the refusal itself is the one line memctl says.
    logging.getLogger("psycopg").setLevel(logging.ERROR)
    try:
        _app_for(sys.argv[1:])(prog_name="memctl")
    except NoDatabase as error:
        # A command that only reads: there is nothing to read, which is no error.
        err(
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
    except _database_errors() as error:  # e.g. corrupted pages met late
        if isinstance(State.db, str):
            from memstore.storage.postgres.server import server_error

            fail(str(server_error(State.db, error)))
        from memstore.storage.sqlite.engine import database_error

        fail(str(database_error(State.db, error)))
    except KeyboardInterrupt:
        err("memctl: interrupted")
        raise SystemExit(130) from None
    except SystemExit as exit_:
        # Typer turns Ctrl-C into a silent exit 130: say why memctl stopped. (A command that
        # says so itself, as `sql` does, exits `from None`, which hides the interrupt.)
        if _interrupted(exit_):
            err("memctl: interrupted")
        raise
    except BrokenPipeError:
        # Output piped into e.g. `head` that stopped reading: not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(0) from None
