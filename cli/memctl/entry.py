"""memctl's entry point. `memctl hook` runs before every prompt a person types in Claude Code,
so it is dispatched here, before Typer and the ORM are imported (most of any other command's
start-up), as is `memctl --version` alone, which scripts ask; every other command line,
`memctl hook --help` included, goes to the Typer app."""

from __future__ import annotations

import sys


def main() -> None:
    # The whole dispatch is under one handler: a Ctrl-C in the first second lands while Python
    # is still importing Typer and the ORM, before any command's own handling has begun.
    try:
        _dispatch()
    except KeyboardInterrupt:
        sys.stderr.write("memctl: interrupted\n")
        raise SystemExit(130) from None


def _dispatch() -> None:
    if sys.argv[1:] in (["--version"], ["-V"]):  # what the app's --version prints
        from memstore import __version__

        print(f"memctl {__version__}")
        raise SystemExit(0)
    hook_db = _hook_command(sys.argv[1:])
    if hook_db is not None:
        from memctl.hook import run

        (db,) = hook_db
        raise SystemExit(run(db))
    from memctl.app import main as app_main

    app_main()


def _hook_command(args: list[str]) -> tuple[str | None] | None:
    """(the --db given, as typed, or None) when `args` are `hook` with at most a --db before
    or after it; None for any other command line. The hook reads the value (a path, a
    server's URL, or refused in one line, and no answer) as it reads MEMSTORE_DB's."""
    db: str | None = None
    rest: list[str] = []
    words = iter(args)
    for word in words:
        if word == "--db" and db is None:
            value = next(words, None)
            if value is None:
                return None
            db = value
        elif word.startswith("--db=") and db is None:
            db = word.removeprefix("--db=")
        else:
            rest.append(word)
    return (db,) if rest == ["hook"] else None
