"""Export: write the canonical `.memory/` files from the database.

Files are written atomically (temporary file + rename), only when their content changes, and
MEMORY.md last. What was written is recorded in `exported_file`, so the next export can skip
unchanged memories without rendering them, and can tell a hand edit from its own output: a
file that differs both from what memstore last wrote and from what it would write now was
edited by hand, and is never overwritten without `force`.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Row, select

from memstore.db import writer
from memstore.errors import ExportConflict, ExportFailed, InvalidMemory
from memstore.export_state import FileState, directory_key, load_records, remember_files, sha256
from memstore.files import (
    INDEX_FILE_NAME,
    memory_file_name,
    render_index,
    render_memory_file,
)
from memstore.models import MemorySummary, memory_table
from memstore.store import MemoryStore
from memstore.validation import NAME_PATTERN, check_name


@dataclass
class ExportResult:
    directory: Path
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0


@dataclass
class _Plan:
    writes: dict[str, bytes] = field(default_factory=dict)
    removals: list[str] = field(default_factory=list)
    # Files found identical to what would be written, whose record needs refreshing.
    adopted: dict[str, bytes] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)
    # Recorded files that are gone already: their records go, there is nothing to delete.
    forgotten: list[str] = field(default_factory=list)
    unchanged: int = 0


def export_memories(
    store: MemoryStore, directory: str | Path, *, force: bool = False
) -> ExportResult:
    directory = Path(directory).resolve()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ExportFailed(f"cannot create {directory}: {error.strerror or error}") from None
    _remove_stale_temporaries(directory)
    key = directory_key(directory)
    live = memory_table.c.deleted_at.is_(None)
    summary_columns = [
        memory_table.c[name] for name in ("id", "name", "type", "description", "version")
    ]
    with store.engine.connect() as connection:
        memories = connection.execute(select(*summary_columns).where(live)).all()
        records = load_records(connection, key)
    on_disk = {
        entry.name: entry.stat()
        for entry in os.scandir(directory)
        if entry.name.endswith(".md") and entry.is_file(follow_symlinks=False)
    }
    # Names and records come from a database file someone may have edited by hand: nothing
    # outside the rules may become a path.
    for memory in memories:
        try:
            check_name(memory.name)
        except InvalidMemory as error:
            raise ExportFailed(f"memory {memory.id} in the database has an {error}") from None
    records = {name: row for name, row in records.items() if _is_export_file_name(name)}
    plan = _Plan()
    targets = {memory_file_name(m.name): m for m in memories}
    to_render = []
    for file_name, memory in targets.items():
        record = records.get(file_name)
        stat = on_disk.get(file_name)
        if (
            record is not None
            and stat is not None
            and record.memory_id == memory.id
            and record.memory_version == memory.version
            and _same_stat(record, stat)
        ):
            plan.unchanged += 1
        else:
            to_render.append(memory.id)
    # Only memories that changed since the last export are read in full and rendered.
    for full in store.memories_by_id(to_render):
        file_name = memory_file_name(full.name)
        content = render_memory_file(full).encode()
        _plan_file(
            plan,
            directory,
            file_name,
            content,
            records.get(file_name),
            on_disk.get(file_name),
            force,
        )
    index = render_index(MemorySummary(m.name, m.type, m.description) for m in memories).encode()
    _plan_file(
        plan,
        directory,
        INDEX_FILE_NAME,
        index,
        records.get(INDEX_FILE_NAME),
        on_disk.get(INDEX_FILE_NAME),
        force,
    )
    stale = [name for name in records if name not in targets and name != INDEX_FILE_NAME]
    for file_name in stale:
        stat = on_disk.get(file_name)
        if stat is None:
            plan.forgotten.append(file_name)
        elif force or _disk_matches_record(directory / file_name, records[file_name], stat):
            plan.removals.append(file_name)
        else:
            plan.conflicts.append(file_name)
    if plan.conflicts:
        raise ExportConflict(str(directory), sorted(plan.conflicts))

    # The index goes last, so that it never lists a file that is not there yet.
    ordered = sorted(plan.writes, key=lambda name: name == INDEX_FILE_NAME)
    stats = {name: on_disk[name] for name in plan.adopted}
    contents = dict(plan.adopted)
    try:
        for name in ordered:
            stats[name] = _write_atomically(directory / name, plan.writes[name])
            contents[name] = plan.writes[name]
        for file_name in plan.removals:
            (directory / file_name).unlink(missing_ok=True)
    except OSError as error:
        # Remember what was written, so that the next export recognises it as its own.
        _record_export(store, key, contents, stats, [], targets, records)
        where = error.filename or directory
        raise ExportFailed(f"cannot write {where}: {error.strerror or error}") from None
    _record_export(store, key, contents, stats, [*plan.removals, *plan.forgotten], targets, records)
    return ExportResult(
        directory,
        ordered,
        sorted(n for n in plan.removals if n in on_disk),
        plan.unchanged + len(plan.adopted),
    )


def _plan_file(
    plan: _Plan,
    directory: Path,
    file_name: str,
    content: bytes,
    record: Row[Any] | None,
    stat: os.stat_result | None,
    force: bool,
) -> None:
    if stat is None:
        plan.writes[file_name] = content
        return
    new_hash = sha256(content)
    if record is not None and _same_stat(record, stat) and record.sha256 == new_hash:
        disk_hash = record.sha256  # nothing to write; no need to read
    else:
        # About to overwrite: read what is there, since an edit can keep size and mtime.
        disk_hash = sha256((directory / file_name).read_bytes())
    if disk_hash == new_hash:
        if record is None or not _same_stat(record, stat) or record.sha256 != new_hash:
            plan.adopted[file_name] = content
        else:
            plan.unchanged += 1
    elif force or (record is not None and disk_hash == record.sha256):
        plan.writes[file_name] = content
    else:
        plan.conflicts.append(file_name)


def _record_export(
    store: MemoryStore,
    key: str,
    contents: dict[str, bytes],
    stats: dict[str, os.stat_result],
    removals: list[str],
    targets: dict[str, Any],
    records: dict[str, Row[Any]],
) -> None:
    if not contents and not removals:
        return
    files = [
        FileState(
            name,
            targets[name].id if name in targets else None,
            targets[name].version if name in targets else None,
            sha256(content),
            stats[name].st_size,
            stats[name].st_mtime_ns,
        )
        for name, content in contents.items()
    ]
    with writer(store.engine).begin() as connection:
        remember_files(connection, key, records, files, removals)


def _is_export_file_name(file_name: str) -> bool:
    if file_name == INDEX_FILE_NAME:
        return True
    stem = file_name.removesuffix(".md")
    return file_name.endswith(".md") and NAME_PATTERN.fullmatch(stem) is not None


# What _write_atomically names its temporary files: `.<file>.<pid>.tmp`.
_TEMPORARY = re.compile(r"\.(?P<file>.+)\.(?P<pid>[1-9][0-9]{0,9})\.tmp")


def _write_atomically(path: Path, content: bytes) -> os.stat_result:
    """Write via a temporary file and a rename; the written file's stat."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "wb") as handle:
            handle.write(content)
            handle.flush()
            stat = os.fstat(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return stat


def _remove_stale_temporaries(directory: Path) -> None:
    """Delete the temporary files of exports that were killed mid-write (SIGKILL, power
    loss). Only files named as _write_atomically names them, for an export file name, and
    only when the process in the name is gone: a live export's file is never touched."""
    for entry in os.scandir(directory):
        match = _TEMPORARY.fullmatch(entry.name)
        if (
            match is None
            or not _is_export_file_name(match["file"])
            or not entry.is_file(follow_symlinks=False)
            or _process_exists(int(match["pid"]))
        ):
            continue
        # Cleaning up is a courtesy: the export itself does not need it.
        with contextlib.suppress(OSError):
            os.unlink(entry.path)


def _process_exists(pid: int) -> bool:
    # On Windows os.kill(pid, 0) terminates the process rather than probing it: keep all.
    if pid == os.getpid() or os.name != "posix":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        return True  # someone else's process (EPERM), or a number we cannot check: keep
    return True


def _disk_matches_record(path: Path, record: Row[Any], stat: os.stat_result) -> bool:
    return _same_stat(record, stat) or sha256(path.read_bytes()) == record.sha256


def _same_stat(record: Row[Any], stat: os.stat_result) -> bool:
    return record.size == stat.st_size and record.mtime_ns == stat.st_mtime_ns
