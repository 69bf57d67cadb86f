"""`memctl claude learn`: the worker `memctl hook` starts, detached, at Claude Code's Stop,
SessionEnd and PreCompact, to learn from the sessions it recorded (the library's
integrations/claude_learning.py). Its output goes to the log beside the queue
(`.memory/sessions/claude-code-learning.log`): one line per thing worth saying, timestamped."""

from __future__ import annotations

import logging
import sys

from memctl.context import State, err, no_database_yet

LOGGERS = ("memstore.integrations.claude_learning", "memstore.learning.extract")


def learn() -> None:
    """Learn from the Claude Code sessions `memctl hook` recorded: their new lines, as chat's
    extraction learns after a turn (run by the hook, detached; one at a time per store)."""
    from memstore.errors import NoDatabase
    from memstore.integrations.claude_learning import ACTOR, learn_sessions
    from memstore.integrations.claude_sessions import NO_MODEL, learning_folder
    from memstore.integrations.door import Door
    from memstore.llm.client import make_client

    _log_with_time()
    if no_database_yet():
        err(f"{_now()} claude learn: no database at {State.db}: nothing learned")
        return
    client = make_client()
    if client is None:
        err(f"{_now()} claude learn: {NO_MODEL}")
        return
    try:
        door = Door.open(ACTOR, db=State.db, settings=State.settings, create=False)
    except NoDatabase:
        err(f"{_now()} claude learn: no database at {State.db}: nothing learned")
        return
    with door:
        report = learn_sessions(door.store, client, learning_folder(State.db, State.workspace))
        if report.created or report.updated:
            door.export()
    if report.busy:
        return
    err(
        f"{_now()} claude learn: {len(report.sessions)} session(s), {report.model_calls} model"
        f" call(s), {len(report.created)} created, {len(report.updated)} updated"
        + (f"; left for later: {', '.join(report.failed)}" if report.failed else "")
    )


def _log_with_time() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s claude learn: %(message)s"))
    for name in LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(logging.INFO)
        logger.addHandler(handler)
        logger.propagate = False


def _now() -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S")
