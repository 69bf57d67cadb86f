"""A door: a tool outside memctl that reads and changes the workspace's store (an MCP client,
an SDK app's memory tool). Every change goes through the store's WriteTransaction, so it is
validated, checked for secrets and recorded as a run under the door's actor; after a change
that wrote something, `.memory/` is exported again, as memctl chat does after a turn.

A door never passes `allow_secrets`: only a person at memctl can say a secret is none.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from memstore.errors import MemstoreError, NoDatabase
from memstore.files.exporter import export_memories
from memstore.settings import Settings
from memstore.storage.store import MemoryStore
from memstore.storage.transaction import WriteTransaction
from memstore.storage.workspace import Workspace, locate

log = logging.getLogger(__name__)


@dataclass
class Door:
    store: MemoryStore
    workspace: Workspace
    actor: str
    # What went wrong with the last re-export, if it did (the change itself was committed).
    export_failure: str | None = None

    @classmethod
    def open(
        cls,
        actor: str,
        *,
        db: Path | str | None = None,
        start: Path | None = None,
        settings: Settings | None = None,
        create: bool = True,
    ) -> Door:
        """The store of the workspace memctl would use from `start` (the current folder), or
        the database `db` (by default MEMSTORE_DB); created when there is none yet, unless
        `create` is false (then NoDatabase)."""
        settings = settings if settings is not None else Settings.from_environment()
        given = db if db is not None else settings.db
        database, workspace = locate(
            given,
            start if start is not None else Path.cwd(),
            settings.ceiling_directories,
            settings.namespace,
        )
        store = MemoryStore(database, actor=actor, command=actor, create=create)
        return cls(store, workspace, actor)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Door:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @contextmanager
    def change(self, command: str) -> Iterator[WriteTransaction]:
        """One change, as one run of this door's actor described by `command`; `.memory/` is
        written again once it committed, when it wrote anything."""
        with self.store.transaction(actor=self.actor, command=command) as tx:
            yield tx
        if tx.events:
            self.export()

    def export(self) -> None:
        """Write `.memory/` again. A failure (a hand-edited file, a full disk) does not undo the
        change, which the database holds: it is logged and kept in `export_failure`."""
        try:
            export_memories(self.store, self.workspace.memory_folder)
            self.export_failure = None
        except (MemstoreError, OSError, RecursionError, ValueError) as error:
            self.export_failure = str(error)
            log.warning("export of %s failed: %s", self.workspace.memory_folder, error)


@dataclass
class LazyDoor:
    """A door opened when first needed, its database created only by the first change: a tool
    started in any folder (an MCP server added for every project, an SDK app) leaves no
    `.memory/` where nothing was remembered, and a read there finds nothing."""

    actor: str
    db: Path | str | None = None
    # Where the tool started (not where it is when it first opens the store).
    start: Path | None = None
    settings: Settings | None = None
    door: Door | None = None

    def __post_init__(self) -> None:
        self.start = Path.cwd() if self.start is None else self.start

    def open(self, *, create: bool) -> Door:
        """The door; NoDatabase when there is no database yet and not `create`."""
        if self.door is None:
            self.door = Door.open(
                self.actor, db=self.db, start=self.start, settings=self.settings, create=create
            )
        return self.door

    def existing_store(self) -> MemoryStore | None:
        """The store, or None while nothing was remembered here (no database yet)."""
        try:
            return self.open(create=False).store
        except NoDatabase:
            return None

    def close(self) -> None:
        if self.door is not None:
            self.door.close()
