"""Export: write the canonical `.memory/` files from the database.

Files are written atomically (temporary file + rename), only when their content changes, and
MEMORY.md last. What was written is recorded in `exported_file`, so the next export can skip
unchanged memories without rendering them, and can tell a hand edit from its own output: a
file that differs both from what memstore last wrote and from what it would write now was
edited by hand, and is never overwritten without `force`.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from sqlmodel import Session, col, delete, select

from memstore.db import writer
from memstore.errors import ExportConflict
from memstore.files import (
    INDEX_FILE_NAME,
    IndexEntry,
    memory_file_name,
    render_index,
    render_memory_file,
)
from memstore.models import ExportedFile, Memory, utc_now
from memstore.store import MemoryStore


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
    unchanged: int = 0


def export_memories(
    store: MemoryStore, directory: str | Path, *, force: bool = False
) -> ExportResult:
    directory = Path(directory).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    key = str(directory)
    with Session(store.engine) as session:
        memories = list(session.exec(select(Memory).where(col(Memory.deleted_at).is_(None))))
        records = {
            r.file_name: r
            for r in session.exec(select(ExportedFile).where(ExportedFile.directory == key))
        }
    on_disk = {
        entry.name: entry.stat()
        for entry in os.scandir(directory)
        if entry.name.endswith(".md") and entry.is_file(follow_symlinks=False)
    }
    plan = _Plan()
    targets = {memory_file_name(m.name): m for m in memories}
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
            continue
        _plan_file(
            plan, directory, file_name, render_memory_file(memory).encode(), record, stat, force
        )
    index = render_index(IndexEntry(m.name, m.type, m.description) for m in memories).encode()
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
        if (
            stat is None
            or force
            or _disk_matches_record(directory / file_name, records[file_name], stat)
        ):
            plan.removals.append(file_name)
        else:
            plan.conflicts.append(file_name)
    if plan.conflicts:
        raise ExportConflict(str(directory), sorted(plan.conflicts))

    # The index goes last, so that it never lists a file that is not there yet.
    ordered = sorted(plan.writes, key=lambda name: name == INDEX_FILE_NAME)
    for file_name in ordered:
        _write_atomically(directory / file_name, plan.writes[file_name])
    for file_name in plan.removals:
        (directory / file_name).unlink(missing_ok=True)
    _record_export(store, key, {**plan.adopted, **plan.writes}, plan.removals, targets, directory)
    return ExportResult(
        directory,
        [n for n in ordered],
        sorted(n for n in plan.removals if n in on_disk),
        plan.unchanged + len(plan.adopted),
    )


def _plan_file(
    plan: _Plan,
    directory: Path,
    file_name: str,
    content: bytes,
    record: ExportedFile | None,
    stat: os.stat_result | None,
    force: bool,
) -> None:
    if stat is None:
        plan.writes[file_name] = content
        return
    new_hash = _sha256(content)
    if record is not None and _same_stat(record, stat):
        disk_hash = record.sha256
    else:
        disk_hash = _sha256((directory / file_name).read_bytes())
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
    files: dict[str, bytes],
    removals: list[str],
    targets: dict[str, Memory],
    directory: Path,
) -> None:
    if not files and not removals:
        return
    now = utc_now()
    with Session(writer(store.engine)) as session, session.begin():
        if removals or files:
            session.exec(
                delete(ExportedFile).where(
                    col(ExportedFile.directory) == key,
                    col(ExportedFile.file_name).in_([*removals, *files]),
                )
            )
        for file_name, content in files.items():
            stat = (directory / file_name).stat()
            memory = targets.get(file_name)
            session.add(
                ExportedFile(
                    directory=key,
                    file_name=file_name,
                    memory_id=memory.id if memory else None,
                    memory_version=memory.version if memory else None,
                    sha256=_sha256(content),
                    size=stat.st_size,
                    mtime_ns=stat.st_mtime_ns,
                    exported_at=now,
                )
            )


def _write_atomically(path: Path, content: bytes) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "wb") as handle:
            handle.write(content)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def _disk_matches_record(path: Path, record: ExportedFile, stat: os.stat_result) -> bool:
    return _same_stat(record, stat) or _sha256(path.read_bytes()) == record.sha256


def _same_stat(record: ExportedFile, stat: os.stat_result) -> bool:
    return record.size == stat.st_size and record.mtime_ns == stat.st_mtime_ns


def _sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()
