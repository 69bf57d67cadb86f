"""Whether `memctl undo RUN` and `memctl restore NAME` would be refused, and why: the rules
undo.py and WriteTransaction.restore apply, on either connection (a HistoryReads, SQLAlchemy's
or the DBAPI one), so that a page that only reads (memctl ui) offers no command they refuse.

An undo also refuses, inside its transaction, what only its writes find out (a name taken by a
newer memory, a secret the memory holds); those are not foreseen here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from memstore.storage.backend import backend_of
from memstore.storage.chain import is_purged
from memstore.storage.dbapi import Connection
from memstore.storage.fields import LIVE_SQL
from memstore.storage.history_reader import EventView, RunView

# Why `memctl restore NAME` is refused (errors.NothingToRestore's reason).
NAME_TAKEN = "a memory with that name exists"
NONE_DELETED = "no deleted memory has that name"
PURGED = "its content was purged from history"


class UndoReads(Protocol):
    """What deciding an undo reads of history: History and HistoryReader both have it."""

    def undo_of(self, run_id: str) -> RunView | None: ...

    def hidden_events(self, run_id: str) -> int: ...

    def events_after(self, event_id: int, memory_ids: Sequence[int]) -> Sequence[EventView]: ...


def undo_refusal(history: UndoReads, run_id: str, events: Sequence[EventView]) -> str | None:
    """Why undoing the run `run_id`, whose events are `events`, is refused (CannotUndo's
    message), or None when nothing history says stands in its way."""
    undone_by = history.undo_of(run_id)
    hidden = undone_by is None and history.hidden_events(run_id) > 0
    purged = any(is_purged(e.old_value) or is_purged(e.new_value) for e in events)
    stopped = undone_by is not None or hidden or not events or purged
    return refusal_of(
        run_id,
        undone_by=None if undone_by is None else undone_by.id,
        hidden=hidden,
        events=len(events),
        purged=purged,
        later=[] if stopped else changed_after(history, events),
    )


def refusal_of(
    run_id: str,
    *,
    undone_by: str | None,
    hidden: bool,
    events: int,
    purged: bool,
    later: Sequence[str],
) -> str | None:
    """The rule itself, in its order, from what history says of the run: undone already,
    memories another person's own, no event, content purged since, memories changed since
    (`later`: their names). memctl ui reads these for many runs at once (ui/reads.py)."""
    short = run_id[:8]
    if undone_by is not None:
        return f"run {short} was already undone by run {undone_by[:8]}"
    if hidden:
        return (
            f"run {short} also changed memories that are another person's own; "
            "only they can undo it"
        )
    if not events:
        return f"run {short} changed no memory"
    if purged:
        return f"run {short} wrote content that was purged from history since"
    if later:
        names = ", ".join(sorted(later))
        return f"changed since run {short}: {names}; undoing it would lose those changes"
    return None


def changed_after(history: UndoReads, events: Sequence[EventView]) -> list[str]:
    """Names of the run's memories that have events after the run's last one."""
    last = max(event.id or 0 for event in events)
    touched = sorted({event.memory_id for event in events})
    return sorted({event.memory_name for event in history.events_after(last, touched)})


def restore_refusal(*, name_taken: bool, deleted_id: int | None, purged: bool) -> str | None:
    """Why `memctl restore` is refused (NothingToRestore's reason), or None: a live memory
    has the name, no deleted memory has it, or the one it would bring back was purged."""
    if name_taken:
        return NAME_TAKEN
    if deleted_id is None:
        return NONE_DELETED
    if purged:
        return PURGED
    return None


def restore_refusal_of(connection: Connection, name: str) -> str | None:
    """restore_refusal for `memctl restore NAME` on a DBAPI connection, as it would run now:
    the deleted memory it would bring back is the latest deleted of that name."""
    mark = backend_of(connection).mark
    execute = connection.execute
    taken = execute(
        f"SELECT 1 FROM memory WHERE name = {mark} AND {LIVE_SQL} LIMIT 1", (name,)
    ).fetchone()
    row = execute(
        f"SELECT id FROM memory WHERE name = {mark} AND NOT ({LIVE_SQL})"
        " ORDER BY deleted_at DESC, id DESC LIMIT 1",
        (name,),
    ).fetchone()
    deleted_id = None if row is None else int(row[0])
    purged = deleted_id is not None and (
        execute(
            f"SELECT 1 FROM memory_purge WHERE memory_id = {mark} LIMIT 1", (deleted_id,)
        ).fetchone()
        is not None
    )
    return restore_refusal(name_taken=taken is not None, deleted_id=deleted_id, purged=purged)
