"""memctl's entry point. `memctl hook` runs before every prompt a person types in Claude Code,
so it is dispatched here, before Typer and the ORM are imported (most of any other command's
start-up); every other command line, `memctl hook --help` included, goes to the Typer app."""

from __future__ import annotations

import sys
from pathlib import Path

from memstore.settings import database_location


def main() -> None:
    hook_db = _hook_command(sys.argv[1:])
    if hook_db is not None:
        from memctl.hook import run

        (db,) = hook_db
        raise SystemExit(run(db))
    from memctl.app import main as app_main

    app_main()


def _hook_command(args: list[str]) -> tuple[Path | str | None] | None:
    """(the --db given, a path or a server's URL, or None) when `args` are `hook` with at
    most a --db before or after it; None for any other command line."""
    db: Path | str | None = None
    rest: list[str] = []
    words = iter(args)
    for word in words:
        if word == "--db" and db is None:
            value = next(words, None)
            if value is None:
                return None
            db = database_location(value)
        elif word.startswith("--db=") and db is None:
            db = database_location(word.removeprefix("--db="))
        else:
            rest.append(word)
    return (db,) if rest == ["hook"] else None
