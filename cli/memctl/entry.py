"""memctl's entry point. `memctl hook` runs before every prompt a person types in Claude Code,
so it is dispatched here, before Typer and the ORM are imported (most of any other command's
start-up), as is `memctl --version` alone, which scripts ask; every other command line,
`memctl hook --help` included, goes to the Typer app."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator


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
        (db,) = hook_db
        with _interrupts_held():  # quick, and it answers a program, not a person
            from memctl.hook import run

            code = run(db)
        raise SystemExit(code)
    with _interrupts_held():
        from memctl.app import main as app_main
    app_main()


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """A Ctrl-C while memctl's modules are imported is held until they are, then raised: one
    that lands inside an import (a C extension's set-up) can come out as another error, or
    end Python without a word."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


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
