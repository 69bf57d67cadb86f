"""Copying a whole store, history included, into an empty one: SQLite to PostgreSQL and
back (and file to file, server to server), so a person can start alone and join a team later,
and leave again (`memctl copy --to TARGET`, docs/postgresql.md#moving-a-store).

Every row is copied as it is stored: memories live and deleted with their ids, versions and
timestamps, runs with who made them, events with their values' JSON text (the hash chain
hashes that text), purge records and semantic vectors. The full-text index is rebuilt by the
target's own machinery; what export last wrote (exported_file) is per-machine state and stays
behind. The source is read in one snapshot and its chain verified first; the target is
written in one transaction, which verifies the copied chain before it commits and ends with a
run of its own (actor `copy`), so a failure anywhere leaves the target as it was.

The source is read by `copy_source`, the target written by `copy_target`; the copy's own
checks (same file, --owner where it means nothing) and its report are here.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.exc import DBAPIError

from memstore.errors import CopyRefused, StoreUnavailable
from memstore.settings import database_location, shown_url
from memstore.storage.copy_source import read_source, row_dicts
from memstore.storage.copy_target import (
    check_copied_chain,
    refuse_non_empty,
    write_rows,
)
from memstore.storage.dbapi import first_line
from memstore.storage.schema_version import SCHEMA_HEAD
from memstore.storage.store import MemoryStore

ACTOR = "copy"


@dataclass
class CopyReport:
    source: str
    target: str
    memories: int
    live: int
    runs: int
    events: int
    purges: int
    vectors: int
    # The source's chain head, which the target's equals (None when --force copied a
    # history that does not verify).
    head: str | None
    seconds: float
    dry_run: bool
    # The copy's own run on the target.
    run_id: str | None = None
    # The schema revision the source was migrated from to be read, if it was.
    migrated_from: str | None = None
    # Why the source's history does not verify, when --force copied it anyway.
    unverified: str | None = None
    # Whether the target is a file the copy creates (or, with --dry-run, would create).
    created: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def copy_store(
    source: MemoryStore,
    target: str | Path,
    *,
    command: str,
    force: bool = False,
    dry_run: bool = False,
    migrated_from: str | None = None,
    owner: str | None = None,
) -> CopyReport:
    """Copy `source` with its whole history into the empty store at `target` (a file or a
    postgresql:// URL), in one transaction there. `command` is the run's command as typed;
    the source's location (its password masked) is added to it.

    Refused (CopyRefused, nothing written) when the target holds any memory or run, when
    the source's history does not verify (unless `force`: then it is copied as it is, and
    fails to verify on the target as on the source), and on PostgreSQL when the connecting
    role does not own the target's tables. `migrated_from`: the revision the source had
    before it was opened (file_revision), reported when opening it migrated it. `owner`:
    on a server, the role whose own the copied `user` memories become (default: the role
    copying); a server source keeps each memory's owner, and `owner` is refused with it."""
    started = time.monotonic()
    if owner is not None and source.is_server:
        raise CopyRefused(
            "copy: --owner is for a copy from a file: a server's memories keep theirs"
        )
    if isinstance(target, str):
        target = database_location(target)  # a path, a server's URL, or refused
    creating = isinstance(target, Path)
    target_path = target if isinstance(target, Path) else None
    if target_path is not None:
        if owner is not None:
            raise CopyRefused("copy: --owner names a role on a server; a file has no roles")
        if target_path.is_dir():
            raise CopyRefused(f"copy: {target_path} is a folder; give the database file's path")
        creating = not target_path.exists()
        if source.path is not None and not creating and _same_file(source.path, target_path):
            raise CopyRefused("copy: the source and the target are the same database")
    source_rows = read_source(source, force=force)
    report = CopyReport(
        source=source.location,
        target=str(target) if target_path is not None else shown_url(str(target)),
        memories=source_rows.count("memory"),
        live=sum(1 for row in row_dicts(source_rows, "memory") if row["deleted_at"] is None),
        runs=source_rows.count("run"),
        events=source_rows.count("memory_event"),
        purges=source_rows.count("memory_purge"),
        vectors=source_rows.count("memory_vector"),
        head=source_rows.head,
        seconds=0.0,
        dry_run=dry_run,
        unverified=source_rows.unverified,
        created=creating,
        migrated_from=migrated_from if migrated_from not in (None, SCHEMA_HEAD) else None,
    )
    if dry_run and creating:
        report.seconds = time.monotonic() - started
        return report
    copied = False
    try:
        with MemoryStore(target, actor=ACTOR, command=command, create=not dry_run) as store:
            report.target = store.location
            with store.transaction(actor=ACTOR, command=_command(command, source)) as tx:
                store.backend.prepare_copy(tx.connection, owner)
                refuse_non_empty(tx.connection, store.location)
                if dry_run:
                    raise _DryRun
                write_rows(tx.connection, source_rows, owner)
                if source_rows.unverified is None:
                    check_copied_chain(tx.connection, source_rows.head)
                tx.record_run()
                report.run_id = tx.run_id
        copied = True
    except _DryRun:
        pass
    except StoreUnavailable as error:  # the target's transaction said why, in one line
        raise StoreUnavailable(f"copy: {error}; nothing copied") from error
    except Exception as error:
        refused = _database_refusal(error)
        if refused is None:
            raise
        raise StoreUnavailable(
            f"copy: {report.target} refused the copy ({refused}); nothing copied"
        ) from error
    finally:
        if creating and not copied and target_path is not None and not dry_run:
            _remove_database(target_path)
    report.seconds = time.monotonic() - started
    return report


class _DryRun(Exception):
    """Leaves the target's transaction (rolled back) once a dry run checked it."""


def _database_refusal(error: BaseException) -> str | None:
    """A database's refusal of a statement in one line (the COPY and the chain's check run
    on the driver's connection, whose errors SQLAlchemy does not wrap), or None."""
    reason = error.orig if isinstance(error, DBAPIError) else error
    if isinstance(reason, sqlite3.Error) or type(reason).__module__.startswith("psycopg"):
        return first_line(reason)
    return None


def _command(command: str, source: MemoryStore) -> str:
    """The copy run's command: as typed, and where from (a password masked)."""
    where = source.location if source.path is None else str(source.path.resolve())
    return f"{command} (from {where})"


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve().samefile(b.resolve())
    except OSError:
        return False


def _remove_database(path: Path) -> None:
    """A database file this copy created and could not fill: gone, as if never tried."""
    for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        leftover.unlink(missing_ok=True)
