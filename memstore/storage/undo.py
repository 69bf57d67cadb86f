"""Undo a run: bring every memory it touched back to its state just before it.

History makes this exact: the first event of a run for a memory says what the memory was
before the run (absent, deleted, or live with the event's old value). An undo is itself a run
(actor "undo", run.undoes = the undone run), so it is audited and can be undone in turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memstore.errors import CannotUndo, NothingToRestore
from memstore.storage.fields import restoring
from memstore.storage.models import MemoryEvent, Operation, Run
from memstore.storage.store import MemoryStore
from memstore.storage.undoable import undo_refusal

ACTOR = "undo"


@dataclass
class UndoResult:
    undone: Run
    run_id: str = ""
    # Names as they are after the undo.
    deleted: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    reverted: list[str] = field(default_factory=list)


def last_undoable_run(store: MemoryStore, actor: str) -> str | None:
    """The id of `actor`'s latest run that changed memories and was not undone, or None."""
    candidates = [
        row["run_id"]
        for row in store.history.runs()
        if row["actor"] == actor and row["events"] and not row["undone_by"]
    ]
    return candidates[-1] if candidates else None


def undo_run(store: MemoryStore, run_id: str) -> UndoResult:
    """Revert the run `run_id` (or an unambiguous prefix of it) in one transaction.

    Refused, changing nothing, when the run was undone already, changed nothing, or when a
    memory it touched has changed since: undoing then would lose that later change.
    """
    run = store.history.find_run(run_id)
    short = run.id[:8]
    result = UndoResult(run)
    with store.transaction(
        actor=ACTOR, command=f"undo run {run.id} ({run.command})", undoes=run.id
    ) as tx:
        # Checked inside the transaction, which holds the write lock: nothing can change
        # between these checks and the undo.
        events = store.history.run_events(run.id)
        refusal = undo_refusal(store.history, run.id, events)
        if refusal is not None:
            raise CannotUndo(refusal)
        first: dict[int, MemoryEvent] = {}
        for event in events:
            first.setdefault(event.memory_id, event)
        # Memories the run brought into being (or back) go first, which frees their names.
        for memory_id, event in first.items():
            if event.operation in (Operation.CREATE, Operation.RESTORE):
                memory = tx.delete(tx.by_id(memory_id))
                result.deleted.append(memory.name)
        for memory_id, event in first.items():
            if event.operation not in (Operation.UPDATE, Operation.DELETE):
                continue
            old = event.old_value or {}
            memory = tx.by_id(memory_id)
            if not memory.is_live:
                try:
                    memory = tx.restore_id(memory_id)
                except NothingToRestore:
                    raise CannotUndo(
                        f"{memory.name!r} is now the name of a newer memory; rename or delete "
                        f"that one first (memctl edit / memctl rm), then undo run {short} again"
                    ) from None
                result.restored.append(memory.name)
            else:
                result.reverted.append(str(old.get("name", memory.name)))
            # Every field of the definition, emptied where the event's value has none.
            tx.update(memory, **restoring(old))
        result.run_id = tx.run_id
    return result
