"""A kind of run that a store may have only one of at a time, across processes and machines:
a consolidation holds it from before it reads the store to after it applies its plan, and a
second one that finds it held does not wait but skips (docs/chat.md#one-consolidation-at-a-time).

PostgreSQL: a session-level advisory lock (pg_try_advisory_lock) on a connection of its own,
keyed by the kind and the current schema (a project namespace), so two projects on one server
never stop each other. SQLite: flock on a file beside the database. Either way a holder that
crashes cannot block the next one: the server ends the lock with the session, the OS with the
process. A server restart ends it too; what the run does is still checked when it is applied
(a consolidation's plan is refused if its sources changed since it read them).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from memstore.errors import StoreUnavailable

try:
    import fcntl
except ImportError:  # Windows: runs of a kind are not kept apart there (docs/chat.md)
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from memstore.storage.store import MemoryStore

# The first key of the two-key form of PostgreSQL's advisory locks ("runl"): the writers' lock
# takes the one-key form, a different space of keys.
RUN_LOCK = 0x72756E6C
# The second key: the first 32 bits of the md5 of the kind and the current schema.
_KEY = "('x' || left(md5(%s || '/' || coalesce(current_schema(), '')), 8))::bit(32)::int"


def lock_file(database: Path, kind: str) -> Path:
    """The file SQLite's lock for `kind` is taken on (it exists only while it is held)."""
    return database.with_name(f"{database.name}-{kind}.lock")


@contextlib.contextmanager
def run_alone(store: MemoryStore, kind: str) -> Iterator[bool]:
    """Hold the store's lock for `kind` while the block runs, yielding True; yield False at
    once, holding nothing, when another process (or connection) holds it."""
    if store.is_server:
        with _advisory_lock(store.engine, kind) as held:
            yield held
        return
    assert store.path is not None
    with _file_lock(lock_file(store.path, kind)) as held:
        yield held


@contextlib.contextmanager
def _advisory_lock(engine: Engine, kind: str) -> Iterator[bool]:
    # A connection of its own, in autocommit: the lock is the session's, and no transaction
    # stays open (with its snapshot) while the run asks the model.
    connection = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    try:
        key = connection.exec_driver_sql(f"SELECT {_KEY}", (kind,)).scalar_one()
        held = connection.exec_driver_sql(
            "SELECT pg_try_advisory_lock(%s, %s)", (RUN_LOCK, key)
        ).scalar_one()
        if not held:
            yield False
            return
        try:
            yield True
        finally:
            try:
                connection.exec_driver_sql("SELECT pg_advisory_unlock(%s, %s)", (RUN_LOCK, key))
            except StoreUnavailable:
                # The session is gone (a restart) and its lock with it; this connection must
                # not go back to the pool.
                connection.invalidate()
    finally:
        connection.close()


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[bool]:
    if fcntl is None:
        yield True
        return
    descriptor = _locked(path)
    if descriptor is None:
        yield False
        return
    try:
        yield True
    finally:
        # Removed while still locked: whoever opened it meanwhile finds, once the lock is
        # theirs, that the file is no longer the one at the path, and starts over.
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        os.close(descriptor)


def _locked(path: Path) -> int | None:
    """A descriptor of `path`, created if need be, holding its lock; None when another
    holds it."""
    assert fcntl is not None
    while True:
        try:
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as error:
            raise StoreUnavailable(f"cannot lock {path}: {error.strerror or error}") from None
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            return None
        try:
            current = os.stat(path, follow_symlinks=False).st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(descriptor).st_ino:
            return descriptor
        os.close(descriptor)  # the holder before us removed it: take the new one
