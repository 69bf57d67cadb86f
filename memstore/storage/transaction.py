"""WriteTransaction: the writes of one command, each change with its history event, all
committed together under one run id, or none at all.

Which live memory holds a name is LiveNames' (storage/live_names.py); as it commits, the
run's and events' rows are written by storage/history_rows.py and a purge's erasures by
storage/purge.py."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, bindparam, select, update

from memstore.errors import (
    InvalidMemory,
    MemoryAltered,
    MemoryExists,
    MemoryNotFound,
    NothingToRestore,
)
from memstore.storage import fields
from memstore.storage.backend import backend_of_sql
from memstore.storage.engine import insert_rows
from memstore.storage.history_rows import PendingEvent, chained_events, write_run
from memstore.storage.live_names import HIDDEN, LiveNames
from memstore.storage.memory_ids import MemoryIds
from memstore.storage.models import (
    LIVE,
    MemoryRecord,
    Operation,
    memory_event_table,
    memory_table,
)
from memstore.storage.purge import erase_purged, is_purged, to_purge
from memstore.storage.state import state_hash
from memstore.storage.unaltered import is_unaltered
from memstore.storage.undoable import NAME_TAKEN, NONE_DELETED, PURGED, restore_refusal
from memstore.storage.validation import (
    check_name,
    check_reason,
    refuse_secret_reason,
    refuse_secrets,
    with_suffix,
)


@dataclass
class WriteTransaction:
    """The writes of one command, all committed together under one run id, or none at all.

    Changes are kept here and written in batches when the transaction commits: the final
    state of each touched memory, then one event per change. The transaction holds SQLite's
    write lock from its start (BEGIN IMMEDIATE), so numbering new memories from max(id) is
    safe, and a 10,000-file import costs a few statements rather than one per file.
    """

    connection: Connection
    actor: str
    command: str
    now: str
    run_id: str = field(default_factory=lambda: os.urandom(16).hex())  # 128 random bits, as uuid4
    # The chat session this transaction belongs to; the run it undoes, for an undo.
    session_id: str | None = None
    undoes: str | None = None
    # When the run began, if before this transaction (else: `now`).
    started_at: str | None = None
    # Store memories that look like they hold a secret: only when a person said so for
    # this command (`--allow-secret`); never for what a model proposes.
    allow_secrets: bool = False
    events: list[PendingEvent] = field(default_factory=list)
    # Final state of every memory this transaction touched, by id; which of them are new.
    _changed: dict[int, MemoryRecord] = field(default_factory=dict)
    _new_ids: set[int] = field(default_factory=set)
    # Live name -> id, read as names are asked for and kept current by every change.
    _live_ids: LiveNames | None = None
    _ids: MemoryIds | None = None
    # Memories whose content this transaction erases from history (purge).
    _purged: list[int] = field(default_factory=list)
    # Write the run row even if the run changes nothing (record_run).
    _record_run: bool = False
    # Memories whose row matched its last event as first changed here; those purged.
    _checked: set[int] = field(default_factory=set)

    # -- reads, seeing this transaction's own changes --------------------------------------

    def _live_names(self) -> LiveNames:
        if self._live_ids is None:
            self._live_ids = LiveNames(self.connection)
        return self._live_ids

    def find(self, name: str) -> MemoryRecord | None:
        id_ = self._live_names().get(name)
        return None if id_ is None or id_ == HIDDEN else self.by_id(id_)

    def get(self, name: str) -> MemoryRecord:
        memory = self.find(name)
        if memory is None:
            raise MemoryNotFound(name)
        return memory

    def free_name(self, name: str) -> str:
        """`name` if no live memory has it, else the first free `name-2`, `name-3`, ..."""
        number, candidate = 1, name
        while candidate in self._live_names():
            number += 1
            candidate = with_suffix(name, number)
        return candidate

    def find_identical(self, type: str, description: str, body: str) -> MemoryRecord | None:
        """A live memory whose type, description and body are exactly these (as stored)."""
        fresh = (m for m in self._changed.values() if m.is_live)
        same = (type, description, body)
        found = next((m for m in fresh if (m.type, m.description, m.body) == same), None)
        if found is not None:
            return found
        columns = memory_table.c
        rows = self.connection.execute(
            select(memory_table).where(
                LIVE, columns.type == type, columns.description == description, columns.body == body
            )
        ).mappings()
        return next((MemoryRecord(**r) for r in rows if r["id"] not in self._changed), None)

    def memories(self) -> list[MemoryRecord]:
        """The live memories as this transaction leaves them: stored ones by name, then new."""
        rows = self.connection.execute(
            select(memory_table).where(LIVE).order_by(memory_table.c.name)
        )
        stored = [self._changed.get(row["id"]) or MemoryRecord(**row) for row in rows.mappings()]
        fresh = [self._changed[id_] for id_ in sorted(self._new_ids)]
        return [m for m in [*stored, *fresh] if m.is_live]

    # -- writes ----------------------------------------------------------------------------

    def record_run(self) -> None:
        """Record this run even if it changes nothing (a run without events)."""
        self._record_run = True

    def create(
        self,
        name: str,
        type: str,
        description: str,
        body: str,
        extra: dict[str, Any] | None = None,
        **optional: Any,
    ) -> MemoryRecord:
        """A new memory; `optional`: values of the optional fields (storage/fields.py)."""
        name = check_name(name)
        if name in self._live_names():
            raise MemoryExists(name)
        given = {"type": type, "description": description, "body": body, "extra": extra}
        values = fields.applied({"name": name}, {**given, **optional})
        memory = MemoryRecord(
            id=self._new_id(),
            **fields.full(values),
            version=1,
            created_at=self.now,
            updated_at=self.now,
        )
        self._refuse_secrets(memory)
        self._new_ids.add(memory.id)
        self._apply(memory, Operation.CREATE, None)
        return memory

    def update(self, memory: MemoryRecord, **changes: Any) -> MemoryRecord:
        """The memory with the given fields (storage/fields.py) changed, each checked by its
        rule: None leaves a field as it is, fields.CLEAR empties an optional one. The same
        object when nothing changes."""
        memory = self._current(memory)
        old = memory.snapshot()
        new = fields.applied(old, changes)
        if new == old:
            return memory
        if self._on_server() and (new["type"] == "user") != (old["type"] == "user"):
            # Whether a memory is a person's own decides who sees it and all its history.
            raise InvalidMemory(
                "type",
                "on a server a memory cannot change to or from `user` (a person's own "
                "memories stay theirs); create a new memory instead",
            )
        if new["name"] != old["name"] and new["name"] in self._live_names():
            raise MemoryExists(new["name"])
        changed = memory.changed(**fields.full(new))
        if any(new.get(key) != old.get(key) for key in fields.SCANNED):
            self._refuse_secrets(changed)
        return self._apply(changed, Operation.UPDATE, memory)

    def delete(
        self,
        memory: MemoryRecord,
        *,
        merged_into: MemoryRecord | None = None,
        reason: str | None = None,
    ) -> MemoryRecord:
        """Soft-delete `memory`; a consolidation says which memory it was merged into, or
        why it dropped it (`reason`: one line, checked as a memory's text is, secrets
        included; recorded on the event)."""
        memory = self._current(memory)
        reason = check_reason(reason)
        if reason is not None and not self.allow_secrets:
            refuse_secret_reason(reason, memory.name)
        if (
            merged_into is not None
            and self._on_server()
            and (memory.type == "user") != (merged_into.type == "user")
        ):
            raise InvalidMemory(
                "merge",
                f"{memory.name!r} and {merged_into.name!r}: on a server a person's own (`user`) "
                "memory and the team's are not merged into each other",
            )
        return self._apply(
            memory.changed(deleted_at=self.now),
            Operation.DELETE,
            memory,
            merged_into=None if merged_into is None else merged_into.id,
            reason=reason,
        )

    def _current(self, memory: MemoryRecord) -> MemoryRecord:
        """This transaction's latest state of `memory`, which must be live."""
        current = self._changed.get(memory.id, memory)
        if not current.is_live:
            raise MemoryNotFound(current.name)
        return current

    def restore(self, name: str) -> MemoryRecord:
        """Bring back the most recently deleted memory called `name`."""
        taken = name in self._live_names()
        memory = None if taken else self._latest_deleted(name)
        refusal = restore_refusal(
            name_taken=taken,
            deleted_id=None if memory is None else memory.id,
            purged=memory is not None and is_purged(self.connection, memory.id),
        )
        if refusal is not None or memory is None:
            raise NothingToRestore(name, refusal or NONE_DELETED)
        self._refuse_secrets(memory)
        return self._apply(memory.changed(deleted_at=None), Operation.RESTORE, memory)

    def _latest_deleted(self, name: str) -> MemoryRecord | None:
        """The deleted memory called `name` that restore brings back: the latest deleted."""
        deleted_here = [m for m in self._changed.values() if m.name == name and not m.is_live]
        if deleted_here:
            return max(deleted_here, key=lambda m: m.id)
        rows = self.connection.execute(
            select(memory_table)
            .where(memory_table.c.name == name, ~LIVE)
            .order_by(memory_table.c.deleted_at.desc(), memory_table.c.id.desc())
        ).mappings()
        # Skip rows this transaction has already changed (restored, renamed).
        return next((MemoryRecord(**r) for r in rows if r["id"] not in self._changed), None)

    def restore_id(self, memory_id: int) -> MemoryRecord:
        """Bring back one particular deleted memory (an undo knows exactly which)."""
        memory = self.by_id(memory_id)
        if memory.is_live:
            raise NothingToRestore(memory.name, "it is not deleted")
        if memory.name in self._live_names():
            raise NothingToRestore(memory.name, NAME_TAKEN)
        if is_purged(self.connection, memory.id):
            raise NothingToRestore(memory.name, PURGED)
        self._refuse_secrets(memory)
        return self._apply(memory.changed(deleted_at=None), Operation.RESTORE, memory)

    def purge(self, name: str) -> list[MemoryRecord]:
        """Erase from history the content of every memory that ever had `name` (what
        `history NAME` shows): a live one is deleted first; as the transaction commits,
        each of their events keeps its row with its values replaced by a marker holding
        their SHA-256, as do the commands of the runs that wrote them and the memory rows'
        text. The history's hash chain still verifies; nothing can restore or undo it."""
        memories = to_purge(self.connection, name, self.by_id)
        backend_of_sql(self.connection).erase_freed_space(self.connection)
        # A purge erases what a memory's row holds, altered outside memstore or not.
        self._checked.update(memory.id for memory in memories)
        for memory in memories:
            if memory.is_live:
                self.delete(memory)
        self._purged.extend(memory.id for memory in memories)
        return memories

    def _refuse_secrets(self, memory: MemoryRecord) -> None:
        """The one secrets check of every write that makes a memory's text live: create,
        update, restore, and so import, undo, extraction, consolidation and /remember."""
        if not self.allow_secrets:
            refuse_secrets(
                memory.name,
                memory.description,
                memory.body,
                memory.extra,
                fields.scanned_others(memory),
            )

    def by_id(self, memory_id: int) -> MemoryRecord:
        """This transaction's view of a memory, live or deleted."""
        if memory_id in self._changed:
            return self._changed[memory_id]
        row = (
            self.connection.execute(select(memory_table).where(memory_table.c.id == memory_id))
            .mappings()
            .first()
        )
        if row is None:
            raise MemoryNotFound(f"#{memory_id}")
        return MemoryRecord(**row)

    def _apply(
        self,
        memory: MemoryRecord,
        operation: Operation,
        before: MemoryRecord | None,
        *,
        merged_into: int | None = None,
        reason: str | None = None,
    ) -> MemoryRecord:
        if before is not None:
            self._refuse_altered(before)
            memory = memory.changed(version=before.version + 1, updated_at=self.now)
        live = self._live_names()
        if before is not None and before.is_live:
            live.pop(before.name)
        if memory.is_live:
            live[memory.name] = memory.id
        self._changed[memory.id] = memory
        old = None if before is None or operation is Operation.RESTORE else before.snapshot()
        new = None if operation is Operation.DELETE else memory.snapshot()
        self.events.append(
            PendingEvent(
                memory.id,
                memory.name,
                operation,
                old,
                new,
                merged_into,
                state_hash(memory),
                reason,
            )
        )
        return memory

    def _refuse_altered(self, memory: MemoryRecord) -> None:
        """MemoryAltered when the stored row of `memory`, changed here for the first time,
        does not match its last event: its new event would vouch for a row changed outside
        memstore, shown to agents as sound. One indexed lookup per memory changed."""
        if memory.id in self._changed or memory.id in self._checked:
            return
        events = memory_event_table.c
        last = select(events.state).where(events.memory_id == memory_table.c.id)
        recorded = last.order_by(events.id.desc()).limit(1).scalar_subquery().label("recorded")
        query = select(memory_table, recorded).where(memory_table.c.id == memory.id)
        row = self.connection.execute(query).mappings().first()
        if row is not None:
            stored = MemoryRecord(**{k: v for k, v in row.items() if k != "recorded"})
            if not is_unaltered(stored, row["recorded"]):
                raise MemoryAltered(stored.name, writing=True)
        self._checked.add(memory.id)

    def write(self) -> None:
        """Write the changes and their events (called once, as the transaction commits)."""
        if not self.events:
            if self._record_run or self._purged:
                self._write_run()
            self._erase_purged()
            return
        if self._live_ids is not None and self._on_server():
            taken = self._live_ids.hidden_taken()
            if taken:
                raise MemoryExists(taken[0])
        columns = memory_table.c.keys()
        existing = [_row_of(m, columns) for i, m in self._changed.items() if i not in self._new_ids]
        created = [_row_of(m, columns) for i, m in self._changed.items() if i in self._new_ids]
        # Names are unique among live rows, and the final states may swap, free and reuse
        # names in any order: take the touched rows out of the live set first, then write
        # their final states, then the new rows.
        # (One row alone needs no such step: its final name is no other live memory's.)
        touched = [row["id"] for row in existing] if len(existing) > 1 else []
        for start in range(0, len(touched), 500):
            self.connection.execute(
                update(memory_table)
                .where(memory_table.c.id.in_(touched[start : start + 500]), LIVE)
                .values(deleted_at=self.now)
            )
        if existing:
            self.connection.execute(
                update(memory_table).where(memory_table.c.id == bindparam("b_id")),
                [{**row, "b_id": row["id"]} for row in existing],
            )
        insert_rows(self.connection, memory_table, created)
        backend_of_sql(self.connection).index(self.connection, self._changed.values())
        identity, host, last = self._write_run(with_last_event=True)
        events = chained_events(
            self.connection,
            self.events,
            run_id=self.run_id,
            actor=self.actor,
            command=self.command,
            now=self.now,
            identity=identity,
            host=host,
            last=last,
        )
        insert_rows(self.connection, memory_event_table, events)
        self._erase_purged()

    def _new_id(self) -> int:
        if self._ids is None:
            self._ids = MemoryIds(self.connection)
        return self._ids.new()

    def _on_server(self) -> bool:
        """Whether a server's row security applies: a person's own memories are theirs."""
        return backend_of_sql(self.connection).server

    def _write_run(
        self, *, with_last_event: bool = False
    ) -> tuple[str | None, str | None, tuple[Any, Any] | None]:
        """Write the run's row (see history_rows.write_run)."""
        run = {
            "id": self.run_id,
            "actor": self.actor,
            "command": self.command,
            "started_at": self.started_at or self.now,
            "session_id": self.session_id,
            "undoes": self.undoes,
        }
        return write_run(self.connection, run, purged=self._purged, with_last_event=with_last_event)

    def _erase_purged(self) -> None:
        """The purge's rewrites, after its delete events are written (storage/purge.py)."""
        erase_purged(self.connection, self._purged, self.by_id, self.run_id, self.now)


def _row_of(memory: MemoryRecord, columns: Iterable[str]) -> dict[str, Any]:
    return {column: getattr(memory, column) for column in columns}
