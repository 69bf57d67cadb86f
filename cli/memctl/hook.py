"""memctl hook: Claude Code's hook JSON on stdin, its answer on stdout (the library's
integrations/claude_hook.py makes it). Whatever happens it exits 0, printing nothing when
there is nothing to add or something went wrong (said in one line on stderr): a hook that
fails must not stop the prompt. See docs/integrations.md."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from memstore.integrations.claude_hook import respond

log = logging.getLogger("memctl.hook")


def run(db: Path | str | None) -> int:
    """Answer the hook read on stdin; the exit status, always 0."""
    logging.basicConfig(format="memctl: %(message)s", level=logging.WARNING)
    if sys.stdin is None or sys.stdin.isatty():
        log.warning("hook: reads a Claude Code hook's JSON on stdin (see docs/integrations.md)")
        return 0
    try:
        raw = sys.stdin.buffer.read()
    except OSError as error:
        log.warning("hook: cannot read stdin: %s", error)
        return 0
    answer = respond(raw, db=db)
    if answer:
        try:
            sys.stdout.write(answer + "\n")
            sys.stdout.flush()
        except OSError as error:  # Claude Code stopped reading: nothing to be done
            log.warning("hook: cannot write stdout: %s", error)
            # Nor at exit, when Python would flush what is left and fail again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
