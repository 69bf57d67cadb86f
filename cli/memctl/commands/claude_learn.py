"""`memctl claude learn`: the worker `memctl hook` starts, detached, at Claude Code's Stop,
SessionEnd and PreCompact, to learn from the sessions it recorded (the library's
integrations/claude_learning.py), then to consolidate the store when that is due
(integrations/claude_consolidation.py). Its output goes to the log beside the queue
(`.memory/sessions/claude-code-learning.log`): one line per thing worth saying, timestamped."""

from __future__ import annotations

import logging
import sys

from memctl.context import State, command_line, err, no_database_yet
from memctl.render import count

LOGGERS = (
    "memstore.integrations.claude_learning",
    "memstore.integrations.claude_consolidation",
    "memstore.learning.extract",
)


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
        consolidated = report.consolidated
        if report.created or report.updated or (consolidated and consolidated.applied):
            door.export()
    if report.busy:
        return
    err(
        f"{_now()} claude learn: {count(len(report.sessions), 'session')},"
        f" {count(report.model_calls, 'model call')}, {len(report.created)} created,"
        f" {len(report.updated)} updated"
        + (f"; left for later: {', '.join(report.failed)}" if report.failed else "")
        + (
            f"; consolidated {consolidated.plan.before} → {consolidated.plan.after} memories"
            f" (run {(consolidated.run_id or '')[:8]})"
            if consolidated is not None
            else ""
        )
    )


TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def _log_with_time() -> None:
    handler = logging.StreamHandler(sys.stderr)
    # The time as _now() writes it, so that every line of the log reads alike.
    handler.setFormatter(
        logging.Formatter("%(asctime)s claude learn: %(message)s", datefmt=TIME_FORMAT)
    )
    for name in LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(logging.INFO)
        logger.addHandler(handler)
        logger.propagate = False


def _now() -> str:
    import time

    return time.strftime(TIME_FORMAT)


def sync() -> None:
    """Import Claude Code's memory folder's edits, then write the store's changes back to it,
    with import's and export's rules without --force; a file changed in both places is left,
    and one that cannot be imported is named with why (run by the hook at SessionStart,
    detached, when either side changed; one at a time)."""
    from memstore.errors import MemstoreError
    from memstore.integrations.claude_code import ACTOR, find_folder, sync_folder
    from memstore.integrations.claude_sessions import learning_folder
    from memstore.integrations.claude_sync import SYNC_RUN, log_gone, log_left, record
    from memstore.integrations.door import Door
    from memstore.storage.run_lock import run_alone

    state = learning_folder(State.db, State.workspace)
    if no_database_yet():
        err(f"{_now()} claude sync: no database at {State.db}: nothing synced")
        return
    folder = find_folder(State.workspace.root, State.settings.claude_config_dir)
    if not folder.path.is_dir():
        err(f"{_now()} claude sync: no folder {folder.path}: nothing synced")
        return
    with Door.open(ACTOR, db=State.db, settings=State.settings, create=False) as door:
        door.store.command = command_line()  # its runs say they are the sync's
        with run_alone(door.store, SYNC_RUN) as alone:
            if not alone:
                return  # another sync runs: it records what it leaves
            try:
                result = sync_folder(door, folder)
            except MemstoreError as error:
                err(f"{_now()} claude sync: {error}")
                return
            log_left(state, folder.path, result.conflicts, result.skipped)
            log_gone(state, result.imported.deleted, result.imported.spared)
            record(
                state,
                folder.path,
                door.store.change_mark(),
                conflicts=result.conflicts,
                skipped=result.skipped,
                deleted=result.imported.deleted,
                spared=result.imported.spared,
            )
        imported = result.imported
        exported = result.exported
        changed = len(imported.created) + len(imported.updated) + len(imported.deleted)
        written = len(exported.written) + len(exported.removed)
        if changed or written:
            err(
                f"{_now()} claude sync: {count(changed, 'memory', 'memories')} imported,"
                f" {count(written, 'file')} written"
            )
