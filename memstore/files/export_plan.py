"""What an export does to each memory's file (ExportPlan): the file it goes to, written,
adopted as it is, or a suspect settled against the memory's history, which makes it
memstore's (rewritten or removed) or a conflict; a person's own memories kept out of a
shared folder.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Row

from memstore.errors import ExportFailed
from memstore.files.export_folder import read_folder_file
from memstore.files.export_state import past_versions, sha256
from memstore.files.format import INDEX_FILE_NAME, memory_file_name, render_memory_file
from memstore.files.hidden_shown import with_shown
from memstore.files.import_file import file_says_a_version
from memstore.files.inplace import render_in_place
from memstore.storage.models import MemoryRecord
from memstore.storage.store import MemoryStore


@dataclass
class ExportPlan:
    """What an export will do, file by file, before it touches the folder."""

    writes: dict[str, bytes] = field(default_factory=dict)
    removals: list[str] = field(default_factory=list)
    # Files found identical to what would be written, whose record needs refreshing.
    adopted: dict[str, bytes] = field(default_factory=dict)
    # File name: which side is newer (see ExportConflict).
    conflicts: dict[str, str] = field(default_factory=dict)
    # Files that differ from their record: (memory id, the file's bytes, conflict kind,
    # content to write or None to remove), settled against the memory's history. Kind "":
    # a file no record knows, left as it is unless it says a version of the memory.
    suspects: dict[str, tuple[int | None, bytes, str, bytes | None]] = field(default_factory=dict)
    # Recorded files that are gone already: their records go, there is nothing to delete.
    forgotten: list[str] = field(default_factory=list)
    # With force: the files overwritten or removed that hold text the database does not
    # have (a hand edit), and that text, kept in a copy beside each before it is lost.
    overwritten: dict[str, bytes] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    unchanged: int = 0


def former_file_names(
    connection: Connection, memories: Sequence[Row[Any]], records: dict[str, Row[Any]]
) -> dict[int, set[str]]:
    """`<name>.md` for every name a memory had before, for the memories recorded under
    another file than `<name>.md`: a memory renamed since moves to its new name's file."""
    current = {memory.id: memory_file_name(memory.name) for memory in memories}
    elsewhere = {
        record.memory_id
        for file_name, record in records.items()
        if record.memory_id in current and current[record.memory_id] != file_name
    }
    return {
        memory_id: {memory_file_name(str(v.get("name"))) for v in versions}
        for memory_id, versions in past_versions(connection, elsewhere).items()
    }


def file_targets(
    memories: Sequence[Row[Any]],
    records: dict[str, Row[Any]],
    on_disk: Collection[str],
    renamed: dict[int, set[str]],
) -> dict[str, Row[Any]]:
    """The file each memory is written to: the file it came from (an import) or was last
    written to, unless it is the file of a name it had before, else `<name>.md`. A file that
    is there comes first; a recorded one that is gone (deleted by hand, the memory changed
    since) is written again where it was."""
    by_id = {memory.id: memory for memory in memories}
    origin: dict[int, str] = {}
    for file_name, record in sorted(records.items(), key=lambda r: (r[0] not in on_disk, r[0])):
        memory = by_id.get(record.memory_id)
        if (
            file_name == INDEX_FILE_NAME
            or memory is None
            or file_name in renamed.get(memory.id, ())
        ):
            continue
        current = origin.get(memory.id)
        canonical = memory_file_name(memory.name)
        if current is None or (
            file_name == canonical and current != canonical and file_name in on_disk
        ):
            origin[memory.id] = file_name
    # A gone file is no one's any more: a memory whose own name's file it is comes first.
    names = {memory_file_name(m.name) for m in memories if m.id not in origin}
    origin = {i: f for i, f in origin.items() if f in on_disk or f not in names}
    targets: dict[str, Row[Any]] = {}
    for memory in sorted(memories, key=lambda m: m.id not in origin):
        file_name = origin.get(memory.id, memory_file_name(memory.name))
        if file_name in targets:
            raise ExportFailed(
                f"memory {memory.name!r} would be written to {file_name}, the file memory "
                f"{targets[file_name].name!r} came from; rename one of them"
            )
        targets[file_name] = memory
    return targets


def plan_memory(
    plan: ExportPlan,
    directory: Path,
    file_name: str,
    memory: MemoryRecord,
    record: Row[Any] | None,
    stat: os.stat_result | None,
    *,
    recheck: bool = False,
) -> None:
    """A file memstore wrote and no one changed since is rewritten; one that differs is a
    suspect, settled against history (with force too: a hand edit is kept in a copy).
    `recheck`: `memory` is what the file must say, not the stored memory (its hidden
    characters shown), so a file as memstore last wrote it for this version is compared with
    it too: an older memstore wrote the memory as it is."""
    if stat is None:
        plan.writes[file_name] = render_memory_file(memory).encode()
        return
    disk = read_folder_file(directory / file_name)
    disk_hash = sha256(disk)
    if record is None or record.memory_id != memory.id:
        record = None
    elif record.memory_version == memory.version and disk_hash == record.sha256 and not recheck:
        # As memstore last wrote or read it, and the memory has not changed since: the
        # file says what the memory says, in its own words; it stays byte for byte.
        plan.adopted[file_name] = disk
        return
    content = render_in_place(memory, disk, file_name) or render_memory_file(memory).encode()
    if sha256(content) == disk_hash:
        if (
            record is not None
            and record.memory_version == memory.version
            and record.sha256 == disk_hash
            and same_stat(record, stat)
        ):
            plan.unchanged += 1  # rechecked, and as recorded: nothing to record again
        else:
            plan.adopted[file_name] = disk
    elif record is not None and disk_hash == record.sha256:
        plan.writes[file_name] = content
    else:
        if record is None:
            kind = "unknown"
        else:
            kind = "file" if record.memory_version == memory.version else "both"
        plan.suspects[file_name] = (memory.id, disk, kind, content)


def settle_suspects(
    store: MemoryStore, plan: ExportPlan, *, force: bool = False, hidden_shown: bool = False
) -> None:
    """Files that differ from what memstore last recorded there: those that say exactly
    what a version of their memory said are memstore's (an export was interrupted before it
    recorded them; the project was moved, copied or cloned) and are overwritten or removed;
    the rest hold text the database does not have, and are conflicts (but a file no record
    knows, kind "", is someone's and is left). With `force` a conflict is overwritten or
    removed too, its text in `overwritten`, to be kept. `hidden_shown`: a version said with
    its hidden characters shown is one too."""
    if not plan.suspects:
        return
    with store.engine.connect() as connection:
        versions = past_versions(connection, {v[0] for v in plan.suspects.values() if v[0]})
    if hidden_shown:
        versions = {memory_id: with_shown(said) for memory_id, said in versions.items()}
    for file_name, (memory_id, disk, kind, content) in plan.suspects.items():
        if memory_id is None or not file_says_a_version(disk, file_name, versions[memory_id]):
            if not kind:  # someone's file, left as it is
                continue
            if not force:
                plan.conflicts[file_name] = kind
                continue
            plan.overwritten[file_name] = disk
        if content is None:
            plan.removals.append(file_name)
        else:
            plan.writes[file_name] = content


def persons_own(memories: Sequence[Row[Any]]) -> dict[int, Row[Any]]:
    """On a server: the `user` memories among those the role sees, each the person's own."""
    return {memory.id: memory for memory in memories if memory.type == "user"}


def private_leftovers(
    plan: ExportPlan,
    directory: Path,
    private: dict[int, Row[Any]],
    records: dict[str, Row[Any]],
    targets: dict[str, Row[Any]],
    on_disk: dict[str, os.stat_result],
) -> None:
    """A person's own memory in a file no record of this folder knows (it was exported
    before `memctl copy` brought the store to the server, or from another clone): a suspect
    removed when it says exactly what a version of the memory said, else left as someone's
    file."""
    planned = {*plan.writes, *plan.removals, *plan.suspects, *records, *targets}
    for memory in private.values():
        file_name = memory_file_name(memory.name)
        if file_name in on_disk and file_name not in planned:
            plan.suspects[file_name] = (
                memory.id,
                read_folder_file(directory / file_name),
                "",
                None,
            )


def same_stat(record: Row[Any], stat: os.stat_result) -> bool:
    return record.size == stat.st_size and record.mtime_ns == stat.st_mtime_ns
