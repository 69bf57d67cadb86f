"""A purged memory taken out of an exported folder at once: its files removed and its line
taken out of MEMORY.md, as exports write (under the folder's lock, the index replaced by an
atomic rename before the files it stops listing go, no link followed), and the export's
records kept true.

Not a whole export: one would stop at any file edited by hand elsewhere in the folder and
leave the purged content on disk until someone settled it. Here a purged memory's file goes
whether it was edited or not (it holds the content the purge erased), and only its own
index line is taken out of MEMORY.md, whoever wrote the rest of it.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from memstore.files.export_folder import (
    FolderChanges,
    folder_lock,
    is_export_file_name,
    markdown_files,
    read_folder_file,
    remove_stale_temporaries,
    write_all,
)
from memstore.files.export_index import without_index_lines
from memstore.files.export_state import (
    FileState,
    folder_key,
    legacy_key,
    load_records,
    remember_files,
    sha256,
)
from memstore.files.format import INDEX_FILE_NAME
from memstore.storage.engine import writer
from memstore.storage.store import MemoryStore


@dataclass
class PurgedFiles:
    directory: Path
    removed: list[str] = field(default_factory=list)
    # Whether MEMORY.md was rewritten without the purged memory's line.
    index_rewritten: bool = False


def remove_purged(
    store: MemoryStore, directory: Path, memory_ids: Collection[int], names: Collection[str]
) -> PurgedFiles:
    """Remove from `directory` the files of the purged memories `memory_ids` (those the
    export records say are theirs, and `<name>.md` for each of the `names` they had), and
    their lines from MEMORY.md; a name a live memory holds now is that memory's, and kept."""
    directory = Path(directory).resolve()
    result = PurgedFiles(directory)
    if not directory.is_dir():
        return result
    purged = set(memory_ids)
    taken = {name for name in names if _held_by_another(store, name, purged)}
    names = [name for name in names if name not in taken]
    with folder_lock(directory):
        # A killed export's temporary file may hold the purged text too.
        remove_stale_temporaries(directory)
        key = folder_key(directory, store.path)
        with store.engine.connect() as connection:
            records = load_records(connection, key, legacy_key(directory))
        on_disk = markdown_files(directory)
        others = {name for name, row in records.items() if row.memory_id not in purged}
        candidates = {name for name, row in records.items() if row.memory_id in purged}
        candidates |= {f"{name}.md" for name in names} - others
        removals = sorted(
            name
            for name in candidates
            if name in on_disk and name != INDEX_FILE_NAME and is_export_file_name(name)
        )
        writes: dict[str, bytes] = {}
        index_was_ours = False
        if INDEX_FILE_NAME in on_disk:
            disk = read_folder_file(directory / INDEX_FILE_NAME)
            record = records.get(INDEX_FILE_NAME)
            index_was_ours = record is not None and record.sha256 == sha256(disk)
            kept = without_index_lines(disk, names)
            if kept != disk:
                writes[INDEX_FILE_NAME] = kept
        applied = FolderChanges()
        try:
            write_all(directory, writes, removals, applied)
        finally:
            _record(store, key, records, writes, applied, index_was_ours)
    result.removed = applied.removed
    result.index_rewritten = INDEX_FILE_NAME in applied.written
    return result


def _held_by_another(store: MemoryStore, name: str, purged: set[int]) -> bool:
    live = store.find(name)
    return live is not None and live.id not in purged


def _record(
    store: MemoryStore,
    key: str,
    records: Collection[str],
    writes: dict[str, bytes],
    applied: FolderChanges,
    index_was_ours: bool,
) -> None:
    """The removed files forgotten; MEMORY.md, when it was memstore's, recorded as written
    (so that the next export still knows it as its own)."""
    if store.read_only or (not applied.removed and not applied.written):
        return
    files = [
        FileState(
            name,
            None,
            None,
            sha256(writes[name]),
            applied.stats[name].st_size,
            applied.stats[name].st_mtime_ns,
        )
        for name in applied.written
        if index_was_ours
    ]
    with writer(store.engine).begin() as connection:
        remember_files(connection, key, records, files, applied.removed)
