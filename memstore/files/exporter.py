"""Export: write the canonical `.memory/` files from the database.

Files are written atomically (temporary file + rename), only when their content changes, and
MEMORY.md last. What was written is recorded in `exported_file`, so the next export can skip
unchanged memories without rendering them, and can tell a hand edit from its own output: a
file that differs both from what memstore last wrote and from what it would write now was
edited by hand, and is never overwritten without `force` (and then its text is first kept
in a copy beside it).

Each memory's file is planned by `export_plan`, MEMORY.md by `export_index`, and the folder
written by `export_folder`; here an export is run under the folder's lock and recorded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Row, select

from memstore.errors import ExportConflict, ExportFailed, InvalidMemory
from memstore.files.export_folder import (
    FolderChanges,
    folder_lock,
    is_export_file_name,
    keep_copies,
    markdown_files,
    read_folder_file,
    remove_stale_temporaries,
    write_all,
)
from memstore.files.export_index import IndexUpdate, plan_given_index, plan_index
from memstore.files.export_plan import (
    ExportPlan,
    file_targets,
    former_file_names,
    persons_own,
    plan_memory,
    private_leftovers,
    same_stat,
    settle_suspects,
)
from memstore.files.export_state import (
    FileState,
    folder_key,
    legacy_key,
    load_records,
    remember_files,
    sha256,
)
from memstore.files.format import INDEX_FILE_NAME, render_index
from memstore.files.hidden_shown import hiding_memories, shown_memory
from memstore.storage.engine import writer
from memstore.storage.models import LIVE, MemorySummary, memory_table
from memstore.storage.store import MemoryStore
from memstore.storage.validation import check_name


@dataclass
class ExportResult:
    directory: Path
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    # One line each, for the user: e.g. a hand-written MEMORY.md left alone.
    notes: list[str] = field(default_factory=list)
    # With `hold_conflicts`: the files left as they are, each with which side is newer
    # (ExportConflict's reasons).
    held: dict[str, str] = field(default_factory=dict)
    # With `force`: each file overwritten or removed that held text the database does not
    # have (a hand edit), and the copy of it kept beside it (keep_copies).
    kept: dict[str, Path] = field(default_factory=dict)


def export_memories(
    store: MemoryStore,
    directory: str | Path,
    *,
    force: bool = False,
    dry_run: bool = False,
    index: IndexUpdate | None = None,
    personal: bool = False,
    hold_conflicts: bool = False,
    hidden_shown: bool = False,
) -> ExportResult:
    """Write the folder; with `dry_run`, only say what would be written and removed. `index`
    writes MEMORY.md in another tool's form instead of memstore's. `hold_conflicts`: the
    files that would be conflicts are left as they are (and in `held`), and every other file
    is written, instead of ExportConflict with nothing written. `hidden_shown`: the folder is
    fed to a model as it is (Claude Code's): the memories' texts are written with the
    characters no one sees shown (files/hidden_shown.py); the store keeps them.

    On a server a person's `user` memories are theirs alone (row-level security): they are
    written only to a `personal` folder (Claude Code's, in their home). Any other folder may
    be committed and shared, as the workspace's .memory/ is: it leaves them out, and a file
    an earlier export wrote for one is removed."""
    directory = Path(directory).resolve()
    try:
        if not dry_run:
            directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ExportFailed(f"cannot create {directory}: {error.strerror or error}") from None
    with folder_lock(directory):
        try:
            return _export_locked(
                store, directory, force, dry_run, index, personal, hold_conflicts, hidden_shown
            )
        except OSError as error:
            where = error.filename or directory
            raise ExportFailed(f"cannot read {where}: {error.strerror or error}") from None


def _export_locked(
    store: MemoryStore,
    directory: Path,
    force: bool,
    dry_run: bool,
    index: IndexUpdate | None,
    personal: bool,
    hold_conflicts: bool = False,
    hidden_shown: bool = False,
) -> ExportResult:
    if not dry_run:
        remove_stale_temporaries(directory)
    key = folder_key(directory, store.path)
    summary_columns = [memory_table.c[name] for name in ("id", *MemorySummary._fields, "version")]
    with store.engine.connect() as connection:
        every = connection.execute(select(*summary_columns).where(LIVE)).all()
        records = load_records(connection, key, legacy_key(directory))
        private = persons_own(every) if store.is_server and not personal else {}
        memories = [memory for memory in every if memory.id not in private]
        renamed = former_file_names(connection, memories, records)
        hiding = hiding_memories(connection) if hidden_shown else set()
    on_disk = markdown_files(directory)
    # Names and records come from a database file someone may have edited by hand: nothing
    # outside the rules may become a path.
    for memory in memories:
        try:
            check_name(memory.name)
        except InvalidMemory as error:
            raise ExportFailed(f"memory {memory.id} in the database has an {error}") from None
    records = {name: row for name, row in records.items() if is_export_file_name(name)}
    plan = ExportPlan()
    targets = file_targets(memories, records, on_disk, renamed)
    file_of = {memory.id: name for name, memory in targets.items()}
    to_render = []
    for file_name, memory in targets.items():
        record = records.get(file_name)
        stat = on_disk.get(file_name)
        if (
            record is not None
            and stat is not None
            and record.memory_id == memory.id
            and record.memory_version == memory.version
            and same_stat(record, stat)
            and memory.id not in hiding
        ):
            plan.unchanged += 1
        else:
            to_render.append(memory.id)
    # Only memories that changed since the last export are read in full and rendered (and,
    # where hidden characters are shown, those that hold one).
    for full in store.by_ids(to_render).values():
        file_name = file_of[full.id]
        written = shown_memory(full) if hidden_shown else full
        plan_memory(
            plan,
            directory,
            file_name,
            written,
            records.get(file_name),
            on_disk.get(file_name),
            recheck=written is not full,
        )
    if index is None:
        text = render_index(
            (MemorySummary(m.name, m.type, m.description) for m in memories),
            files={memory.name: file_name for file_name, memory in targets.items()},
        )
        plan_index(
            store, plan, directory, text.encode(), records.get(INDEX_FILE_NAME), on_disk, force
        )
    live_ids = {memory.id for memory in every}
    stale = [name for name in records if name not in targets and name != INDEX_FILE_NAME]
    for file_name in stale:
        record = records[file_name]
        if file_name not in on_disk:
            plan.forgotten.append(file_name)
        elif _disk_matches_record(directory / file_name, record, on_disk[file_name]):
            plan.removals.append(file_name)
        else:
            kind = "both" if record.memory_id in live_ids else "deleted"
            if record.memory_id in private:  # a person's own, edited here since
                same = record.memory_version == private[record.memory_id].version
                kind = "file" if same else "both"
            plan.suspects[file_name] = (
                record.memory_id,
                read_folder_file(directory / file_name),
                kind,
                None,
            )
    private_leftovers(plan, directory, private, records, targets, on_disk)
    settle_suspects(store, plan, force=force, hidden_shown=hidden_shown)
    if plan.conflicts and not hold_conflicts:
        raise ExportConflict(str(directory), sorted(plan.conflicts), plan.conflicts)
    # Held, a conflicting file is neither written nor removed, and its record stays: the
    # next import and export still see what each side changed.
    if index is not None:
        plan_given_index(plan, directory, index, targets, on_disk)

    # The index goes last, so that it never lists a file that is not there yet.
    ordered = sorted(plan.writes, key=lambda name: name == INDEX_FILE_NAME)
    if dry_run:
        removed = sorted(n for n in plan.removals if n in on_disk)
        unchanged = plan.unchanged + len(plan.adopted)
        return ExportResult(directory, ordered, removed, unchanged, held=dict(plan.conflicts))
    # Before anything is overwritten: what only the file holds is never lost.
    kept = keep_copies(directory, plan.overwritten)
    applied = FolderChanges(stats={name: on_disk[name] for name in plan.adopted})
    contents = dict(plan.adopted)
    try:
        write_all(directory, {name: plan.writes[name] for name in ordered}, plan.removals, applied)
    except OSError as error:
        # Remember what was written, so that the next export recognises it as its own.
        contents.update({name: plan.writes[name] for name in applied.written})
        _record_export(store, key, contents, applied.stats, applied.removed, targets, records)
        where = error.filename or directory
        raise ExportFailed(f"cannot write {where}: {error.strerror or error}") from None
    contents.update(plan.writes)
    _record_export(
        store, key, contents, applied.stats, [*plan.removals, *plan.forgotten], targets, records
    )
    return ExportResult(
        directory,
        ordered,
        sorted(n for n in plan.removals if n in on_disk),
        plan.unchanged + len(plan.adopted),
        plan.notes,
        dict(plan.conflicts),
        kept,
    )


def _record_export(
    store: MemoryStore,
    key: str,
    contents: dict[str, bytes],
    stats: dict[str, os.stat_result],
    removals: list[str],
    targets: dict[str, Any],
    records: dict[str, Row[Any]],
) -> None:
    if (not contents and not removals) or store.read_only:
        # A store it cannot write (a read-only file, folder or mount) is still exported: the
        # next export, finding no record, compares the files with the memories' versions.
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


def _disk_matches_record(path: Path, record: Row[Any], stat: os.stat_result) -> bool:
    return same_stat(record, stat) or sha256(read_folder_file(path)) == record.sha256
