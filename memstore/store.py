"""MemoryStore: memories in SQLite, every write with its history event in one transaction."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import func, text
from sqlalchemy.exc import OperationalError
from sqlmodel import Session, col, select

from memstore.db import open_database, writer
from memstore.errors import MemoryExists, MemoryNotFound, NothingToRestore, StoreUnavailable
from memstore.files import IndexEntry, render_index
from memstore.models import Memory, MemoryEvent, Operation, Run, utc_now
from memstore.search import BM25_WEIGHTS, match_expression, query_terms
from memstore.validation import check_body, check_description, check_name, check_type


@dataclass(frozen=True)
class SearchHit:
    memory: Memory
    # bm25 relevance, higher is better.
    score: float


@dataclass
class _PendingEvent:
    memory: Memory
    memory_name: str
    operation: Operation
    old_value: dict[str, Any] | None
    new_value: dict[str, Any] | None


@dataclass
class WriteTransaction:
    """The writes of one command; each records its event under the command's run id.

    Events are written when the transaction commits, after the memories are flushed in one
    batch, so a large import costs a few statements rather than one per file.
    """

    session: Session
    actor: str
    command: str
    now: str
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    events: list[_PendingEvent] = field(default_factory=list)
    _names_taken: set[str] = field(default_factory=set)
    _names_freed: set[str] = field(default_factory=set)

    def find(self, name: str) -> Memory | None:
        with self.session.no_autoflush:
            return self.session.exec(
                select(Memory).where(Memory.name == name, col(Memory.deleted_at).is_(None))
            ).first()

    def get(self, name: str) -> Memory:
        memory = self.find(name)
        if memory is None or memory.deleted_at is not None:
            raise MemoryNotFound(name)
        return memory

    def live_memories(self) -> list[Memory]:
        return list(self.session.exec(select(Memory).where(col(Memory.deleted_at).is_(None))))

    def _name_is_free(self, name: str) -> bool:
        if name in self._names_taken:
            return False
        return name in self._names_freed or self.find(name) is None

    def create(
        self,
        name: str,
        type: str,
        description: str,
        body: str,
        extra: dict[str, Any] | None = None,
    ) -> Memory:
        name = check_name(name)
        if not self._name_is_free(name):
            raise MemoryExists(name)
        memory = Memory(
            name=name,
            type=check_type(type),
            description=check_description(description),
            body=check_body(body),
            extra=dict(extra or {}),
            created_at=self.now,
            updated_at=self.now,
        )
        self.session.add(memory)
        self._take_name(name)
        self._record(memory, Operation.CREATE, None, memory.snapshot())
        return memory

    def update(
        self,
        memory: Memory,
        *,
        name: str | None = None,
        type: str | None = None,
        description: str | None = None,
        body: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> bool:
        """Apply the given fields; False (and no event) when nothing changes."""
        old = memory.snapshot()
        new = dict(old)
        if name is not None:
            new["name"] = check_name(name)
        if type is not None:
            new["type"] = check_type(type)
        if description is not None:
            new["description"] = check_description(description)
        if body is not None:
            new["body"] = check_body(body)
        if extra is not None:
            new["extra"] = dict(extra)
        if new == old:
            return False
        if new["name"] != old["name"]:
            if not self._name_is_free(new["name"]):
                raise MemoryExists(new["name"])
            self._free_name(old["name"])
            self._take_name(new["name"])
        memory.name, memory.type = new["name"], new["type"]
        memory.description, memory.body, memory.extra = (
            new["description"],
            new["body"],
            new["extra"],
        )
        memory.version += 1
        memory.updated_at = self.now
        self._record(memory, Operation.UPDATE, old, new)
        return True

    def delete(self, memory: Memory) -> None:
        memory.deleted_at = self.now
        memory.version += 1
        memory.updated_at = self.now
        self._free_name(memory.name)
        self._record(memory, Operation.DELETE, memory.snapshot(), None)

    def restore(self, name: str) -> Memory:
        if not self._name_is_free(name):
            raise NothingToRestore(name, "a memory with that name exists")
        with self.session.no_autoflush:
            memory = self.session.exec(
                select(Memory)
                .where(Memory.name == name, col(Memory.deleted_at).is_not(None))
                .order_by(col(Memory.deleted_at).desc(), col(Memory.id).desc())
            ).first()
        if memory is None:
            raise NothingToRestore(name, "no deleted memory has that name")
        memory.deleted_at = None
        memory.version += 1
        memory.updated_at = self.now
        self._take_name(name)
        self._record(memory, Operation.RESTORE, None, memory.snapshot())
        return memory

    def _take_name(self, name: str) -> None:
        self._names_taken.add(name)
        self._names_freed.discard(name)

    def _free_name(self, name: str) -> None:
        self._names_freed.add(name)
        self._names_taken.discard(name)

    def _record(
        self,
        memory: Memory,
        operation: Operation,
        old: dict[str, Any] | None,
        new: dict[str, Any] | None,
    ) -> None:
        self.events.append(_PendingEvent(memory, memory.name, operation, old, new))

    def flush_events(self) -> None:
        if not self.events:
            return
        self.session.add(
            Run(id=self.run_id, actor=self.actor, command=self.command, started_at=self.now)
        )
        self.session.flush()  # assigns ids to new memories, in one batch
        self.session.add_all(
            MemoryEvent(
                memory_id=event.memory.id,  # type: ignore[arg-type]
                memory_name=event.memory_name,
                operation=event.operation.value,
                actor=self.actor,
                run_id=self.run_id,
                old_value=event.old_value,
                new_value=event.new_value,
                created_at=self.now,
            )
            for event in self.events
        )
        self.session.flush()


class MemoryStore:
    """A memstore database. Opening it creates or migrates the schema."""

    def __init__(self, path: str | Path, *, actor: str = "api", command: str = "") -> None:
        self.path = Path(path)
        self.actor = actor
        self.command = command
        self.engine = open_database(self.path)
        self._writer = writer(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @contextmanager
    def transaction(
        self, *, actor: str | None = None, command: str | None = None
    ) -> Iterator[WriteTransaction]:
        """One atomic unit of writes: everything in it commits together or not at all."""
        try:
            with Session(self._writer, expire_on_commit=False) as session, session.begin():
                tx = WriteTransaction(
                    session,
                    actor or self.actor,
                    command if command is not None else self.command,
                    utc_now(),
                )
                yield tx
                tx.flush_events()
        except OperationalError as error:
            raise StoreUnavailable(f"database {self.path} is unavailable: {error.orig}") from error

    # -- writes -----------------------------------------------------------------------------

    def create(
        self, name: str, type: str, description: str, body: str, extra: dict[str, Any] | None = None
    ) -> Memory:
        with self.transaction() as tx:
            return tx.create(name, type, description, body, extra)

    def update(
        self,
        name: str,
        *,
        new_name: str | None = None,
        type: str | None = None,
        description: str | None = None,
        body: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> Memory:
        with self.transaction() as tx:
            memory = tx.get(name)
            tx.update(
                memory, name=new_name, type=type, description=description, body=body, extra=extra
            )
            return memory

    def delete(self, name: str) -> Memory:
        with self.transaction() as tx:
            memory = tx.get(name)
            tx.delete(memory)
            return memory

    def restore(self, name: str) -> Memory:
        with self.transaction() as tx:
            return tx.restore(name)

    # -- reads ------------------------------------------------------------------------------

    def find(self, name: str) -> Memory | None:
        with Session(self.engine) as session:
            return session.exec(
                select(Memory).where(Memory.name == name, col(Memory.deleted_at).is_(None))
            ).first()

    def get(self, name: str) -> Memory:
        memory = self.find(name)
        if memory is None:
            raise MemoryNotFound(name)
        return memory

    def memories(self, type: str | None = None) -> list[Memory]:
        with Session(self.engine) as session:
            query = select(Memory).where(col(Memory.deleted_at).is_(None))
            if type is not None:
                query = query.where(Memory.type == check_type(type))
            return list(session.exec(query.order_by(Memory.name)))

    def count(self) -> int:
        with Session(self.engine) as session:
            return session.exec(
                select(func.count()).select_from(Memory).where(col(Memory.deleted_at).is_(None))
            ).one()

    def history(self, name: str | None = None, limit: int | None = None) -> list[MemoryEvent]:
        """Events, oldest first; for a name, every event of any memory that ever had it."""
        with Session(self.engine) as session:
            query = select(MemoryEvent)
            if name is not None:
                ids = select(MemoryEvent.memory_id).where(MemoryEvent.memory_name == name)
                query = query.where(col(MemoryEvent.memory_id).in_(ids))
            query = query.order_by(col(MemoryEvent.id).desc())
            if limit is not None:
                query = query.limit(limit)
            return list(reversed(session.exec(query).all()))

    def run(self, run_id: str) -> Run | None:
        with Session(self.engine) as session:
            return session.get(Run, run_id)

    def search(self, query: str, limit: int = 10) -> list[SearchHit]:
        """Live memories matching the words of `query`, best first (bm25).

        All words must match; when nothing does, any word may.
        """
        terms = query_terms(query)
        if not terms or limit <= 0:
            return []
        hits = self._match(match_expression(terms), limit)
        if not hits and len(terms) > 1:
            hits = self._match(match_expression(terms, any_term=True), limit)
        return hits

    def _match(self, expression: str, limit: int) -> list[SearchHit]:
        weights = ", ".join(str(w) for w in BM25_WEIGHTS)
        ranked = text(
            f"SELECT rowid, bm25(memory_fts, {weights}) AS score FROM memory_fts "
            "WHERE memory_fts MATCH :expression ORDER BY score LIMIT :limit"
        )
        with Session(self.engine) as session:
            result = session.connection().execute(
                ranked, {"expression": expression, "limit": limit}
            )
            scores: dict[int, float] = {row[0]: row[1] for row in result}
            memories = session.exec(select(Memory).where(col(Memory.id).in_(scores))).all()
        ranked_memories = sorted(memories, key=lambda m: scores[m.id or 0])
        return [SearchHit(m, -float(scores[m.id or 0])) for m in ranked_memories]

    def index_text(self) -> str:
        """The MEMORY.md text for the live memories."""
        with Session(self.engine) as session:
            rows = session.exec(
                select(Memory.name, Memory.type, Memory.description).where(
                    col(Memory.deleted_at).is_(None)
                )
            ).all()
        return render_index(IndexEntry(*row) for row in rows)
