"""Consolidation scheduled by the worker that learns from Claude Code's sessions
(integrations/claude_learning.py): after a worker has learned something, it consolidates the
store when that is due, as Claude Code's own memory consolidation decides, by time and
sessions since the last run: at least MIN_HOURS since the last consolidation (or none ever),
at least MIN_SESSIONS Claude Code sessions that taught the store something since then, and
the store's own conditions (learning/consolidation_due.py: enough memories, enough of them
changed). It is memstore's consolidation (learning/consolidate.py), one run of the actor
`consolidation` that `memctl undo RUN` takes back, under the store's consolidation lock: a
chat, `memctl consolidate` or another machine's worker consolidating meanwhile makes this one
skip. The check is made inside that lock, so that two workers never both find it due.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select

from memstore.errors import ConsolidationSkipped, MemstoreError
from memstore.learning import consolidate
from memstore.learning.consolidation_due import consolidation_due
from memstore.llm.client import ModelClient
from memstore.storage.models import run_table
from memstore.storage.store import MemoryStore

log = logging.getLogger(__name__)

# A day between runs, as Claude Code consolidates its own memory: what a day's sessions
# taught is merged together, and the model is not paid to tidy after every session.
MIN_HOURS = 24.0
# And a few sessions' worth of new memories since the last run (Claude Code waits for five):
# one long day of a single session has little to merge.
MIN_SESSIONS = 5


@dataclass(frozen=True)
class ScheduledConsolidation:
    """What the worker's check found and did: `ran` with its outcome, or why not."""

    reason: str
    ran: consolidate.Consolidation | None = None
    # Due, but not done: another consolidation of the store was running, or the model's
    # plan was refused (it is tried again after the next session that teaches something).
    failure: str = ""


def consolidate_when_due(
    store: MemoryStore,
    client: ModelClient,
    learner: str,
    *,
    model: str | None = None,
    now: datetime | None = None,
    min_hours: float = MIN_HOURS,
    min_sessions: int = MIN_SESSIONS,
) -> ScheduledConsolidation:
    """Consolidate the store when it is due (see the module doc); never raises for the
    model, a refused plan or another consolidation running: `failure` says which. `learner`:
    the actor of the worker's runs, whose sessions are counted."""
    try:
        with consolidate.consolidation_lock(store):
            reason = due(store, learner, now=now, min_hours=min_hours, min_sessions=min_sessions)
            if reason is None:
                return ScheduledConsolidation("not due")
            log.info("consolidation due: %s", reason)
            plan = consolidate.plan_consolidation(store=store, client=client, model=model)
            command, store.command = store.command, f"claude learn: consolidation ({reason})"
            try:
                outcome = consolidate.apply_plan(store, plan)
            finally:
                store.command = command
    except ConsolidationSkipped as skipped:
        log.info("%s", skipped)
        return ScheduledConsolidation("due", failure=str(skipped))
    except MemstoreError as error:
        log.warning("%s", error)
        return ScheduledConsolidation("due", failure=str(error))
    return ScheduledConsolidation(reason, ran=outcome)


def due(
    store: MemoryStore,
    learner: str,
    *,
    now: datetime | None = None,
    min_hours: float = MIN_HOURS,
    min_sessions: int = MIN_SESSIONS,
) -> str | None:
    """Why the worker should consolidate now, or None when it should not."""
    last = store.history.last_run(consolidate.ACTOR)
    since = None if last is None else last.started_at
    if since is not None:
        elapsed = (now or datetime.now(UTC)) - _parsed(since)
        if elapsed < timedelta(hours=min_hours):
            return None
    sessions = sessions_since(store, learner, since)
    if sessions < min_sessions:
        return None
    store_reason = consolidation_due(store)
    if store_reason is None:
        return None
    return f"{sessions} Claude Code sessions since the last, {store_reason}"


def sessions_since(store: MemoryStore, learner: str, at: str | None) -> int:
    """How many Claude Code sessions taught the store something after `at` (ever: None):
    the distinct sessions of the runs of `learner`, the worker's actor (each carries its
    session's id; the folder sync's runs, of the same actor, carry none)."""
    runs = run_table.c
    query = select(func.count(func.distinct(runs.session_id))).where(
        runs.actor == learner, runs.session_id.is_not(None)
    )
    if at is not None:
        query = query.where(runs.started_at > at)
    with store.engine.connect() as connection:
        return int(connection.execute(query).scalar_one())


def _parsed(stamp: str) -> datetime:
    """A run's start (utc_now's text) as an aware datetime."""
    parsed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
