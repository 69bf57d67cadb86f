"""Import: bring memory folders (ours, Claude Code's, hand-written) into the database.

Every file is read and checked first; then the whole import is applied in one transaction,
creating or updating memories by name. Files that are not quite canonical are normalised,
and each normalisation is reported; only files that cannot be read as a memory are refused.

A file is read by `import_file`, the folder by `import_folder`; here is what is applied: the
plan by name or by the file's record, what changed since the last export, and the report.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, select

from memstore.errors import FileProblem, ImportRejected, InvalidMemory
from memstore.files.export_state import (
    FileState,
    folder_key,
    legacy_key,
    load_records,
    past_versions,
    remember_files,
)
from memstore.files.format import INDEX_FILE_NAME, synced_extra
from memstore.files.hidden_shown import shown_value, with_shown
from memstore.files.import_file import ImportItem, says_version
from memstore.files.import_folder import FolderRead, Progress, read_for_import, updated_memory
from memstore.storage.fields import CLEAR, restoring
from memstore.storage.models import MemoryRecord, Operation, memory_event_table
from memstore.storage.store import MemoryStore


@dataclass
class ImportReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    # With `deletions`: memories whose file is gone from the folder.
    deleted: list[str] = field(default_factory=list)
    # With `deletions` and `deletes_only`: memories whose file is gone that another actor
    # created, kept (an export writes their files again).
    spared: list[str] = field(default_factory=list)
    # Normalisations, one line each: "path: what was changed".
    notes: list[str] = field(default_factory=list)
    problems: list[FileProblem] = field(default_factory=list)
    # Markdown files that are no memory (no frontmatter: a person's notes), skipped.
    not_memories: list[FileProblem] = field(default_factory=list)
    dry_run: bool = False
    run_id: str | None = None


def import_memories(
    store: MemoryStore,
    directory: str | Path,
    *,
    skip_invalid: bool = False,
    dry_run: bool = False,
    default_type: str | None = None,
    progress: Progress | None = None,
    allow_secrets: bool = False,
    actor: str = "import",
    top_level: bool = False,
    force: bool = False,
    deletions: bool = False,
    deletes_only: str | None = None,
    export_command: str = "memctl export",
    read: FolderRead | None = None,
    hidden_shown: bool = False,
) -> ImportReport:
    """Import the folder's files in one transaction under `actor`. `top_level`: only files
    directly in the folder. `force`: a file edited since the last export whose memory also
    changed is imported over the database's version (which history keeps) instead of being
    refused as a conflict. `deletions`: a file of the folder's records that is gone deletes
    its memory (soft: `restore` brings it back), unless the memory changed since; with
    `deletes_only`, only a memory that actor created (one another created is kept, in
    `spared`).
    `export_command`: the command that writes this folder, as the messages name it.
    `read`: the folder as read_for_import read it already (with the same options).
    `hidden_shown`: export writes the folder with the characters no one sees shown
    (files/hidden_shown.py): a file's text that is its memory's so shown is no change."""
    if read is None:
        read = read_for_import(
            directory,
            store,
            skip_invalid=skip_invalid,
            default_type=default_type,
            progress=progress,
            allow_secrets=allow_secrets,
            top_level=top_level,
        )
    key = folder_key(Path(directory), store.path)
    legacy = legacy_key(Path(directory))
    items, left_out, problems = read.items, read.left_out, read.problems
    report = ImportReport(problems=problems, not_memories=read.not_memories, dry_run=dry_run)
    report.notes.extend(f"{item.path}: {item.left_out}" for item in left_out)
    if dry_run:
        with store.engine.connect() as connection:
            records = load_records(connection, key, legacy)
            live = store.memories()
            items = _since_last_export(
                connection, items, records, live, report, force, export_command, hidden_shown
            )
            items = _not_older(connection, items, live, report)
            _raise_if_rejected(report, skip_invalid)
            actions = _plan(items, live, records, report, hidden_shown)
            if deletions:
                claimed = {memory.id for _, memory, _ in actions if memory is not None}
                found = _gone(Path(directory), records, live, report, claimed)[0]
                _spare(connection, found, deletes_only, report)
        return report
    with store.transaction(actor=actor, allow_secrets=allow_secrets) as tx:
        records = load_records(tx.connection, key, legacy)
        live = tx.memories()
        items = _since_last_export(
            tx.connection, items, records, live, report, force, export_command, hidden_shown
        )
        items = _not_older(tx.connection, items, live, report)
        _raise_if_rejected(report, skip_invalid)
        results: dict[str, MemoryRecord] = {}
        for item, memory, changes in _plan(items, live, records, report, hidden_shown):
            try:
                if memory is None:
                    results[item.path] = tx.create(**item.values())
                else:
                    results[item.path] = tx.update(memory, **changes) if changes else memory
            except InvalidMemory as error:
                # What only the store judges, before it writes anything: on a server, a
                # memory that would change to or from `user`. The file's problem, as any.
                report.problems.append(FileProblem(item.path, str(error)))
                _raise_if_rejected(report, skip_invalid)
                planned = report.created if memory is None else report.updated
                planned.remove(item.name if memory is None else memory.name)
        claimed = {memory.id for memory in results.values()}
        gone: list[MemoryRecord] = []
        forget: list[str] = []
        if deletions:
            gone, forget = _gone(Path(directory), records, live, report, claimed)
            gone = _spare(tx.connection, gone, deletes_only, report)
        for memory in gone:
            tx.delete(memory)
        # The folder's files are now in the database: an export to this folder may rewrite
        # them in canonical form (or remove them with their memory) without calling them
        # hand-edited, and a later import knows which copies are stale. No size and mtime
        # are recorded, so that export renders each once and puts it in canonical form.
        remember_files(
            tx.connection,
            key,
            records,
            [
                FileState(item.path, m.id, m.version, item.sha256, size=0, mtime_ns=0)
                for item in items
                if "/" not in item.path and item.path in results
                for m in [results[item.path]]
            ],
            forget,
        )
        report.run_id = tx.run_id if tx.events else None
    return report


def _not_older(
    connection: Connection, items: list[ImportItem], live: list[MemoryRecord], report: ImportReport
) -> list[ImportItem]:
    """Never backwards: a file read instead of the exported copy of its memory (`over_export`)
    that says what an older version of that memory said is a stale copy, left out with a
    note (the memory changed since, and export wrote the change to the top-level file)."""
    by_name = {memory.name: memory for memory in live}
    suspects = [
        (item, memory)
        for item in items
        if item.over_export
        and (memory := by_name.get(item.name)) is not None
        and not says_version(item, memory.snapshot())
    ]
    if not suspects:
        return items
    versions = past_versions(connection, {memory.id for _, memory in suspects})
    stale = set()
    for item, memory in suspects:
        if any(says_version(item, version) for version in versions[memory.id]):
            stale.add(item.path)
            report.unchanged.append(memory.name)
            report.notes.append(
                f"{item.path}: an older version of its memory; the database's is newer, so "
                "the file is not imported"
            )
    return [item for item in items if item.path not in stale]


def _raise_if_rejected(report: ImportReport, skip_invalid: bool) -> None:
    if report.problems and not skip_invalid:
        raise ImportRejected(report.problems)


def _since_last_export(
    connection: Connection,
    items: list[ImportItem],
    records: dict[str, Any],
    live: list[MemoryRecord],
    report: ImportReport,
    force: bool = False,
    export_command: str = "memctl export",
    hidden_shown: bool = False,
) -> list[ImportItem]:
    """The items to import: none that would bring back what the database has moved on from.

    A file still as memstore last wrote (or read) it says nothing new. A file that says what
    an older version of its memory said is a stale copy (of a moved, copied or interrupted
    export): importing it would undo the change since, so it is left out with a note. A file
    edited by hand whose memory also changed in the database since is a conflict.
    """
    # This folder's import command: `memctl import`, or `memctl claude import`.
    import_command = export_command.removesuffix("export") + "import"
    by_id = {m.id: m for m in live}
    kept = []
    suspects = []
    for item in items:
        record = records.get(item.path)
        if record is None:
            kept.append(item)
        elif item.sha256 == record.sha256:
            report.unchanged.append(item.name)
        elif (memory := by_id.get(record.memory_id)) and memory.version == record.memory_version:
            kept.append(item)  # edited since, and its memory was not: the file is newer
        else:
            suspects.append((item, record, memory))
    versions = past_versions(connection, {record.memory_id for _, record, _ in suspects})
    if hidden_shown:
        versions = {memory_id: with_shown(said) for memory_id, said in versions.items()}
    for item, record, memory in suspects:
        current = [] if memory is None else [memory.snapshot()]
        if hidden_shown:
            current = with_shown(current)
        if any(says_version(item, version) for version in current):
            report.unchanged.append(item.name)  # written by an export that was cut short
            continue
        if any(says_version(item, version) for version in versions.get(record.memory_id, [])):
            report.unchanged.append(item.name)
            report.notes.append(
                f"{item.path}: an older version of its memory; the database's is newer, so "
                f"the file is not imported ('{export_command}' rewrites it)"
            )
            continue
        since = "deleted" if memory is None else "changed"
        if force:
            kept.append(item)
            report.notes.append(
                f"{item.path}: edited by hand, and its memory was {since} in the database "
                "since the last export: the file's text is imported (history keeps the other)"
            )
            continue
        report.problems.append(
            FileProblem(
                item.path,
                f"edited by hand, and its memory was {since} in the database since the "
                "last export: both are newer; keep the database's with "
                f"'{export_command} --force', the file's with '{import_command} --force', or"
                " redo the edit with 'memctl edit'",
            )
        )
    # Repairs are said of the files imported: one unchanged since was reported when it was.
    report.notes[:0] = [f"{item.path}: {note}" for item in kept for note in item.notes]
    return kept


def _gone(
    directory: Path,
    records: dict[str, Any],
    live: list[MemoryRecord],
    report: ImportReport,
    claimed: set[int],
) -> tuple[list[MemoryRecord], list[str]]:
    """The memories whose recorded file is gone from the folder and that did not change
    since it was last read or written (one that did is kept, with a note), and the records
    to forget. A memory still recorded in a file that is there, or that a file of this
    import updates (a file renamed), stays.

    The record of a memory deleted or kept here stays (export settles it), so that when the
    memory is written back, kept or restored, it goes to the same file, whose line in the
    folder's index holds again."""
    by_id = {m.id: m for m in live}
    gone = {
        name: record
        for name, record in records.items()
        if name != INDEX_FILE_NAME and "/" not in name and not os.path.lexists(directory / name)
    }
    present = {r.memory_id for name, r in records.items() if name not in gone}
    memories = []
    forget = []
    for name, record in sorted(gone.items()):
        memory = by_id.get(record.memory_id)
        if memory is None or memory.id in present or memory.id in claimed:
            forget.append(name)
        elif memory.version == record.memory_version:
            memories.append(memory)
            report.deleted.append(memory.name)
        else:
            report.notes.append(
                f"{name}: removed from the folder, but its memory {memory.name!r} changed in "
                "the database since: kept (an export writes it again)"
            )
    return memories, forget


def _spare(
    connection: Connection,
    gone: list[MemoryRecord],
    deletes_only: str | None,
    report: ImportReport,
) -> list[MemoryRecord]:
    """Of the memories whose file is gone, those to delete: with `deletes_only`, the ones that
    actor created; another's is kept, in `spared` (no longer in `deleted`)."""
    if deletes_only is None or not gone:
        return gone
    creators = dict(
        connection.execute(
            select(memory_event_table.c.memory_id, memory_event_table.c.actor).where(
                memory_event_table.c.operation == Operation.CREATE.value,
                memory_event_table.c.memory_id.in_([memory.id for memory in gone]),
            )
        ).all()
    )
    deleted = []
    for memory in gone:
        if creators.get(memory.id) == deletes_only:
            deleted.append(memory)
        else:
            report.deleted.remove(memory.name)
            report.spared.append(memory.name)
    return deleted


def _plan(
    items: list[ImportItem],
    live: list[MemoryRecord],
    records: dict[str, Any],
    report: ImportReport,
    hidden_shown: bool = False,
) -> list[tuple[ImportItem, MemoryRecord | None, dict[str, Any]]]:
    """(item, the memory it updates or None to create, the changed fields) for every item.
    A file recorded as holding a live memory updates that memory, whatever name the file
    reads as now (the memory may have been renamed since); any other file goes by name."""
    by_name = {m.name: m for m in live}
    by_id = {m.id: m for m in live}
    actions: list[tuple[ImportItem, MemoryRecord | None, dict[str, Any]]] = []
    for item in items:
        record = records.get(item.path)
        memory = updated_memory(item, record, by_id, by_name)
        if memory is None:
            report.created.append(item.name)
            actions.append((item, None, {}))
            continue
        changes = _changes(item, memory, hidden_shown)
        (report.updated if changes else report.unchanged).append(memory.name)
        actions.append((item, memory, changes))
    return actions


def _changes(item: ImportItem, memory: MemoryRecord, hidden_shown: bool = False) -> dict[str, Any]:
    shown = shown_value if hidden_shown else (lambda value: value)
    if item.extra in (synced := synced_extra(memory.extra, memory.type), shown(synced)):
        item.extra = memory.extra  # what export wrote, not a change
    # Every field but the name (the file's record, not its name, says which memory it is),
    # an optional one the file leaves out cleared.
    wanted = restoring(item.values())
    del wanted["name"]
    # A text the file says as export wrote it, its hidden characters shown, is no change:
    # the memory keeps them (only a field edited in the file takes the file's text).
    return {
        key: value
        for key, value in wanted.items()
        if (now := getattr(memory, key)) != (None if value is CLEAR else value)
        and shown(now) != value
    }
