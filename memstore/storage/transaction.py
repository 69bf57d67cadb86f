"""WriteTransaction: the writes of one command, each change with its history event, all
committed together under one run id, or none at all."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import (
    JSON,
    ColumnElement,
    Connection,
    Text,
    bindparam,
    cast,
    delete,
    func,
    insert,
    literal_column,
    select,
    update,
)

from memstore.errors import (
    InvalidMemory,
    MemoryExists,
    MemoryNotFound,
    NothingToRestore,
)
from memstore.storage import chain, fields, who
from memstore.storage.engine import insert_rows, to_json
from memstore.storage.models import (
    LIVE,
    MemoryRecord,
    Operation,
    memory_event_table,
    memory_purge_table,
    memory_table,
    memory_vector_table,
    run_table,
)
from memstore.storage.validation import check_name, refuse_secrets, with_suffix

_EVENTS = memory_event_table.c


class PendingEvent(NamedTuple):
    """An event of a transaction, written when it commits."""

    memory_id: int
    memory_name: str
    operation: Operation
    old: dict[str, Any] | None
    new: dict[str, Any] | None
    merged_into: int | None = None


# A transaction asking for more names than this reads all live names at once (an import),
# fewer one by one: reading all of them made every single write cost O(store) under the
# writers' lock.
NAMES_ONE_BY_ONE = 32
# The id LiveNames gives a name that a memory this role cannot see holds: on a server,
# another person's own (`user`) memory. The name is taken; nothing more is known of it.
HIDDEN = -1
# The most memory ids a transaction takes from the server's sequence at once.
ID_BLOCK = 1024
# A column of the last event of a server's history chain.
_LAST_CHAINED = "SELECT {} FROM event_chain ORDER BY id DESC LIMIT 1"


class LiveNames:
    """The live names' ids as a writing transaction sees them: what it asked the database
    (which no other writer changes while it holds the write lock) under its own changes.

    On a server, row-level security hides other people's own memories, but their names are
    still taken: a name no visible memory has is asked of the unique index itself
    (memstore_live_name, revision 0008); past the one-by-one names, those a transaction
    makes live are asked all at once before it writes (`hidden_taken`)."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._known: dict[str, int | None] = {}  # None: no live memory has that name
        self._all = False
        self._server = connection.dialect.name == "postgresql"
        self._unprobed: set[str] = set()

    def get(self, name: str) -> int | None:
        if name not in self._known:
            if not self._all and len(self._known) < NAMES_ONE_BY_ONE:
                self._known[name] = self._lookup(name)
            else:
                if not self._all:
                    self._load_all()
                if name not in self._known and self._server:
                    self._unprobed.add(name)
        return self._known.get(name)

    def _lookup(self, name: str) -> int | None:
        if self._server:
            found = self._connection.exec_driver_sql(
                "SELECT memstore_live_name(%s)", (name,)
            ).scalar()
            return None if found is None else int(found)
        return self._connection.execute(
            select(memory_table.c.id).where(memory_table.c.name == name, LIVE)
        ).scalar()

    def hidden_taken(self) -> list[str]:
        """Names this transaction makes live that a memory it cannot see holds (asked of the
        server's unique index at once; only names never looked up one by one)."""
        mine = sorted(name for name in self._unprobed if self._known.get(name) is not None)
        if not mine:
            return []
        taken = self._connection.exec_driver_sql(
            "SELECT memstore_names_taken(%s::text[])", (mine,)
        ).scalar()
        return sorted(taken or [])

    def __contains__(self, name: str) -> bool:
        return self.get(name) is not None

    def __setitem__(self, name: str, id_: int) -> None:
        self._known[name] = id_

    def pop(self, name: str) -> None:
        self._known[name] = None

    def _load_all(self) -> None:
        rows = self._connection.execute(select(memory_table.c.name, memory_table.c.id).where(LIVE))
        stored: dict[str, int | None] = {name: id_ for name, id_ in rows}
        self._known = {**stored, **self._known}  # this transaction's changes over the stored
        self._all = True


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
    _next_id: int | None = None
    # On a server: ids taken from memory.id's sequence, not used yet (smallest last).
    _id_pool: list[int] = field(default_factory=list)
    _id_block: int = 1
    # Memories whose content this transaction erases from history (purge).
    _purged: list[int] = field(default_factory=list)
    # Write the run row even if the run changes nothing (record_run).
    _record_run: bool = False

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
            id=self._allocate_id(),
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
        if self._on_postgres() and (new["type"] == "user") != (old["type"] == "user"):
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
        self, memory: MemoryRecord, *, merged_into: MemoryRecord | None = None
    ) -> MemoryRecord:
        """Soft-delete `memory`; a consolidation says which memory it was merged into."""
        memory = self._current(memory)
        if (
            merged_into is not None
            and self._on_postgres()
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
        )

    def _current(self, memory: MemoryRecord) -> MemoryRecord:
        """This transaction's latest state of `memory`, which must be live."""
        current = self._changed.get(memory.id, memory)
        if not current.is_live:
            raise MemoryNotFound(current.name)
        return current

    def restore(self, name: str) -> MemoryRecord:
        """Bring back the most recently deleted memory called `name`."""
        if name in self._live_names():
            raise NothingToRestore(name, "a memory with that name exists")
        deleted_here = [m for m in self._changed.values() if m.name == name and not m.is_live]
        memory = max(deleted_here, key=lambda m: m.id) if deleted_here else None
        if memory is None:
            rows = self.connection.execute(
                select(memory_table)
                .where(memory_table.c.name == name, ~LIVE)
                .order_by(memory_table.c.deleted_at.desc(), memory_table.c.id.desc())
            ).mappings()
            # Skip rows this transaction has already changed (restored, renamed).
            memory = next((MemoryRecord(**r) for r in rows if r["id"] not in self._changed), None)
        if memory is None:
            raise NothingToRestore(name, "no deleted memory has that name")
        if self._is_purged(memory.id):
            raise NothingToRestore(name, "its content was purged from history")
        self._refuse_secrets(memory)
        return self._apply(memory.changed(deleted_at=None), Operation.RESTORE, memory)

    def restore_id(self, memory_id: int) -> MemoryRecord:
        """Bring back one particular deleted memory (an undo knows exactly which)."""
        memory = self.by_id(memory_id)
        if memory.is_live:
            raise NothingToRestore(memory.name, "it is not deleted")
        if memory.name in self._live_names():
            raise NothingToRestore(memory.name, "a memory with that name exists")
        if self._is_purged(memory.id):
            raise NothingToRestore(memory.name, "its content was purged from history")
        self._refuse_secrets(memory)
        return self._apply(memory.changed(deleted_at=None), Operation.RESTORE, memory)

    def purge(self, name: str) -> list[MemoryRecord]:
        """Erase from history the content of every memory that ever had `name` (what
        `history NAME` shows): a live one is deleted first; as the transaction commits,
        each of their events keeps its row with its values replaced by a marker holding
        their SHA-256, as do the commands of the runs that wrote them and the memory rows'
        text. The history's hash chain still verifies; nothing can restore or undo it."""
        ids = self.connection.execute(
            select(memory_event_table.c.memory_id)
            .where(memory_event_table.c.memory_name == name)
            .distinct()
            .order_by(memory_event_table.c.memory_id)
        ).scalars()
        memories = [self.by_id(memory_id) for memory_id in ids]
        if not memories:
            raise MemoryNotFound(name)
        if not self._on_postgres():
            # Freed space is overwritten with zeros, so the erased text is not left in the file.
            self.connection.exec_driver_sql("PRAGMA secure_delete = ON")
        for memory in memories:
            if memory.is_live:
                self.delete(memory)
        self._purged.extend(memory.id for memory in memories)
        return memories

    def _erase_purged(self) -> None:
        """The purge's rewrites, after its delete events are written (the triggers let an
        event's values become a marker only for a memory recorded in memory_purge)."""
        execute = self.connection.execute
        for memory_id in self._purged:
            events = execute(
                select(
                    _EVENTS.id,
                    _stored_text(_EVENTS.old_value),
                    _stored_text(_EVENTS.new_value),
                    _EVENTS.run_id,
                ).where(_EVENTS.memory_id == memory_id)
            ).all()
            execute(
                insert(memory_purge_table).values(
                    run_id=self.run_id,
                    memory_id=memory_id,
                    memory_name=self.by_id(memory_id).name,
                    events=len(events),
                    purged_at=self.now,
                )
            )
            execute(
                update(memory_event_table)
                .where(_EVENTS.id == bindparam("b_id"))
                .values(old_value=self._marker("b_old"), new_value=self._marker("b_new")),
                [
                    {"b_id": event_id, "b_old": _purged_or_none(old), "b_new": _purged_or_none(new)}
                    for event_id, old, new, _ in events
                ],
            )
            for run_id in sorted({run_id for *_, run_id in events} - {self.run_id}):
                runs = run_table.c
                command = execute(select(runs.command).where(runs.id == run_id)).scalar_one()
                execute(
                    update(run_table)
                    .where(runs.id == run_id)
                    .values(command=chain.purged_command(command))
                )
            memory = self.by_id(memory_id)
            marker = f"[purged sha256:{chain.value_hash(to_json(memory.snapshot()))}]"
            execute(
                update(memory_table)
                .where(memory_table.c.id == memory_id)
                .values(description=marker, body=marker, extra={})
            )
            execute(delete(memory_vector_table).where(memory_vector_table.c.memory_id == memory_id))
        if self._purged and not self._on_postgres():
            # The full-text index keeps a deleted text's words until its segments merge
            # (FTS5's own command, which only SQL can say).
            self.connection.exec_driver_sql(
                "INSERT INTO memory_fts (memory_fts) VALUES ('optimize')"
            )

    def _marker(self, name: str) -> ColumnElement[Any]:
        """A purge marker's JSON text, written as it is (not serialised again); PostgreSQL
        takes text into a JSON column only by a cast."""
        value = bindparam(name, type_=Text)
        return cast(value, JSON) if self._on_postgres() else value

    def _is_purged(self, memory_id: int) -> bool:
        purges = memory_purge_table.c
        query = select(purges.id).where(purges.memory_id == memory_id).limit(1)
        return self.connection.execute(query).first() is not None

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

    def _allocate_id(self) -> int:
        if self._on_postgres():
            # From the sequence: max(id) does not see other people's own memories there.
            if not self._id_pool:
                ids = self.connection.exec_driver_sql(
                    "SELECT nextval(pg_get_serial_sequence('memory', 'id'))"
                    " FROM generate_series(1, %s)",
                    (self._id_block,),
                ).scalars()
                self._id_pool = sorted(ids, reverse=True)
                self._id_block = min(self._id_block * 2, ID_BLOCK)
            return int(self._id_pool.pop())
        if self._next_id is None:
            highest = self.connection.execute(select(func.max(memory_table.c.id))).scalar()
            self._next_id = (highest or 0) + 1
        self._next_id += 1
        return self._next_id - 1

    def _apply(
        self,
        memory: MemoryRecord,
        operation: Operation,
        before: MemoryRecord | None,
        *,
        merged_into: int | None = None,
    ) -> MemoryRecord:
        if before is not None:
            memory = memory.changed(version=before.version + 1, updated_at=self.now)
        live = self._live_names()
        if before is not None and before.is_live:
            live.pop(before.name)
        if memory.is_live:
            live[memory.name] = memory.id
        self._changed[memory.id] = memory
        old = None if before is None or operation is Operation.RESTORE else before.snapshot()
        new = None if operation is Operation.DELETE else memory.snapshot()
        self.events.append(PendingEvent(memory.id, memory.name, operation, old, new, merged_into))
        return memory

    def write(self) -> None:
        """Write the changes and their events (called once, as the transaction commits)."""
        if not self.events:
            if self._record_run or self._purged:
                self._write_run()
            self._erase_purged()
            return
        if self._live_ids is not None and self._on_postgres():
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
        if self._on_postgres():
            from memstore.storage import pg_search

            pg_search.index(self.connection, self._changed.values())
        identity, host, last = self._write_run(with_last_event=True)
        events = self._chained_events(identity, host, last)
        insert_rows(self.connection, memory_event_table, events)
        self._erase_purged()

    def _on_postgres(self) -> bool:
        return self.connection.dialect.name == "postgresql"

    def _chained_events(
        self, identity: str | None, host: str | None, last: tuple[Any, Any] | None
    ) -> list[dict[str, Any]]:
        """The event rows, numbered after the last event (id and hash, or None: read here)
        and each hashed onto the chain (this transaction holds the write lock: nobody else
        appends meanwhile)."""
        if last is None:
            last = self.connection.execute(
                select(_EVENTS.id, _EVENTS.hash).order_by(_EVENTS.id.desc()).limit(1)
            ).first()
        if last is not None and last[0] is None:  # a server's chain has no event yet
            last = None
        next_id, previous = (last[0] + 1, last[1]) if last is not None else (1, chain.GENESIS)
        rows = []
        for number, event in enumerate(self.events, next_id):
            row: dict[str, Any] = {
                "id": number,
                "memory_id": event.memory_id,
                "memory_name": event.memory_name,
                "operation": event.operation.value,
                "actor": self.actor,
                "run_id": self.run_id,
                "created_at": self.now,
                "merged_into": event.merged_into,
                "old_value": event.old,
                "new_value": event.new,
            }
            stored = chain.ChainedEvent(
                **{**row, "old_value": to_json(event.old), "new_value": to_json(event.new)},
                command=self.command,
                identity=identity,
                host=host,
            )
            row["hash"] = previous = chain.event_hash(previous, stored)
            rows.append(row)
        return rows

    def _write_run(
        self, *, with_last_event: bool = False
    ) -> tuple[str | None, str | None, tuple[Any, Any] | None]:
        """Write the run's row; its identity and host as stored (the chain covers them) and,
        on a server when asked, the id and hash of the chain's last event, read by the same
        statement (event_chain: every event's, even those this role cannot see)."""
        row = {
            "id": self.run_id,
            "actor": self.actor,
            "command": self.command,
            "started_at": self.started_at or self.now,
            "session_id": self.session_id,
            "undoes": self.undoes,
            "host": who.host(),
        }
        # PostgreSQL's trigger sets the connecting role; SQLite has none: the OS user.
        if not self._on_postgres():
            row["identity"] = who.os_user()
        returned: list[ColumnElement[Any]] = [run_table.c.identity, run_table.c.host]
        if with_last_event and self._on_postgres():
            returned += [
                literal_column(f"({_LAST_CHAINED.format(column)})") for column in ("id", "hash")
            ]
        stored = self.connection.execute(insert(run_table).returning(*returned), row).one()
        if len(stored) > 2:
            return stored[0], stored[1], (stored[2], stored[3])
        return stored[0], stored[1], None


def _stored_text(column: ColumnElement[Any]) -> ColumnElement[str]:
    """A JSON column's stored text, not its value: a purge marker keeps the text's hash.
    (A cast: psycopg parses JSON as it reads it, whatever SQLAlchemy expects.)"""
    return cast(column, Text)


def _purged_or_none(text: str | None) -> str | None:
    return None if text is None else chain.purged_value(text)


def _row_of(memory: MemoryRecord, columns: Iterable[str]) -> dict[str, Any]:
    return {column: getattr(memory, column) for column in columns}
