"""memctl run in the test's own process, as a process of its own would run it.

A `memctl` process costs about half a second of start-up (Python, Typer, SQLAlchemy); the
suite runs memctl hundreds of times. In-process, the same entry point (`memctl.entry.main`)
runs with what a process would have had: its command line, an environment of its own, its
working folder, standard input from the test, standard output and error captured as bytes
and decoded as `subprocess.run(text=True)` decodes them, and an uncaught exception printed
as Python prints it (so a test that says "no traceback" can still fail). Everything is put
back afterwards. What only a real process shows (start-up time, imports, signals, a tty, the
console script) is tested with the `memctl_process` fixture instead.
"""

from __future__ import annotations

import io
import logging
import os
import signal
import subprocess
import sys
import traceback
from pathlib import Path

# A process killed by SIGINT: what subprocess reports for an uncaught KeyboardInterrupt.
_INTERRUPTED = -signal.SIGINT


def run_memctl_in_process(
    args: list[str], *, input: str, env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    from memctl.entry import main

    out, err = io.BytesIO(), io.BytesIO()
    stdin = io.TextIOWrapper(io.BytesIO(input.encode()), encoding="utf-8")
    stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    stderr = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", write_through=True)
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_argv, saved_environment, saved_folder = sys.argv, dict(os.environ), os.getcwd()
    saved_sigint = signal.getsignal(signal.SIGINT)
    root = logging.getLogger()
    # A process starts with no logging handler: memctl's own is the one that writes.
    saved_logging = root.handlers[:], root.level, logging.getLogger("psycopg").level
    root.handlers = []
    sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
    sys.argv = ["memctl", *args]
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    try:
        main()
        code = 0
    except SystemExit as exit_:
        code = _exit_code(exit_, stderr)
    except KeyboardInterrupt:
        traceback.print_exc(file=stderr)
        code = _INTERRUPTED
    except BaseException:  # what Python prints, and its exit status, for any other
        traceback.print_exc(file=stderr)
        code = 1
    finally:
        for stream in (stdout, stderr):
            stream.flush()
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        sys.argv = saved_argv
        os.chdir(saved_folder)
        os.environ.clear()
        os.environ.update(saved_environment)
        signal.signal(signal.SIGINT, saved_sigint)
        root.handlers, level, psycopg_level = saved_logging
        root.setLevel(level)
        logging.getLogger("psycopg").setLevel(psycopg_level)
    return subprocess.CompletedProcess(
        ["memctl", *args], code, _as_text(out.getvalue()), _as_text(err.getvalue())
    )


def _exit_code(exit_: SystemExit, stderr: io.TextIOWrapper) -> int:
    """The status a process exits with for this SystemExit (Python's rules)."""
    if exit_.code is None:
        return 0
    if isinstance(exit_.code, int):
        return exit_.code
    print(exit_.code, file=stderr)
    return 1


def _as_text(data: bytes) -> str:
    """Bytes as subprocess.run(text=True) gives them: UTF-8, universal newlines."""
    return data.decode("utf-8", errors="strict").replace("\r\n", "\n").replace("\r", "\n")
