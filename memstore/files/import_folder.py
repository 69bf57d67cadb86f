"""A folder as import reads it: its Markdown files found, each read (import_file), given a
name of its own, and checked for secrets, before anything is written (FolderRead).

memctl reads a folder with read_for_import before it creates a database, so that an import
refused leaves nothing behind; import_memories then applies what was read.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memstore.errors import (
    FileProblem,
    ImportFailed,
    ImportRejected,
    InvalidMemory,
    NotAMemory,
    UnreadableFile,
)
from memstore.files.export_state import folder_key, legacy_key, load_records, sha256
from memstore.files.format import INDEX_FILE_NAME, render_memory_file
from memstore.files.import_file import ImportItem, read_memory_file, says_version
from memstore.storage.fields import SCANNED_OTHERS
from memstore.storage.models import MemoryRecord
from memstore.storage.store import MemoryStore
from memstore.storage.validation import check_type, with_suffix

Progress = Callable[[int, int], None]


def memory_paths(
    directory: Path, problems: list[FileProblem] | None = None, *, top_level: bool = False
) -> list[str]:
    """Markdown files below `directory` (only in it, with `top_level`) as sorted relative
    paths; hidden folders and index files left out. Folders that cannot be read, and file
    names that cannot be shown on one line, are added to `problems`."""
    found: list[str] = []

    def unreadable(error: OSError) -> None:
        if problems is not None:
            where = os.path.relpath(error.filename or directory, directory)
            problems.append(FileProblem(where, f"cannot read folder: {error.strerror}"))

    for root, folders, files in os.walk(directory, onerror=unreadable):
        folders[:] = [] if top_level else [f for f in folders if not f.startswith(".")]
        prefix = os.path.relpath(root, directory)
        prefix = "" if prefix == "." else prefix.replace(os.sep, "/") + "/"
        for name in files:
            if not name.endswith(".md") or name.startswith(".") or name == INDEX_FILE_NAME:
                continue
            if name.isprintable():
                found.append(prefix + name)
            elif problems is not None:
                shown = name.encode("unicode_escape").decode("ascii")
                problems.append(FileProblem(prefix + shown, "a file name with control characters"))
    return sorted(found)


def read_folder(
    directory: Path,
    *,
    default_type: str | None = None,
    progress: Progress | None = None,
    top_level: bool = False,
    exported: Callable[[list[ImportItem]], Collection[str]] | None = None,
) -> tuple[list[ImportItem], list[FileProblem], list[FileProblem]]:
    """The folder's files as items, each with its own name (see _make_names_unique, to
    which `exported` tells the top-level files that are copies export wrote), the files
    that cannot be read, and the files that are no memory (NotAMemory)."""
    if not directory.is_dir():
        raise ImportFailed(f"no such folder: {directory}")
    problems: list[FileProblem] = []
    not_memories: list[FileProblem] = []
    paths = memory_paths(directory, problems, top_level=top_level)
    items: list[ImportItem] = []
    for done, relative in enumerate(paths, 1):
        try:
            items.append(read_memory_file(directory / relative, relative, default_type))
        except NotAMemory as error:
            not_memories.append(FileProblem(relative, f"not a memory: {error}"))
        except (UnreadableFile, InvalidMemory) as error:
            problems.append(FileProblem(relative, str(error)))
        if progress is not None:
            progress(done, len(paths))
    _make_names_unique(items, exported)
    return items, problems, not_memories


def _make_names_unique(
    items: list[ImportItem], exported: Callable[[list[ImportItem]], Collection[str]] | None = None
) -> None:
    """Give every item its own name. Names given in files claim theirs first, so that adding
    a file with a derived name never takes the name of a memory another file declares.

    Export writes a memory read from a subfolder to `<name>.md` at the top: two files of one
    memory. They are not made two memories. A file that says exactly what the file holding
    its name says is left out (`left_out`). A file in a subfolder that declares the name of
    a top-level file that is the copy export wrote of the memory of that name (`exported`
    tells which) is read instead of it (`over_export`), and the exported copy is left out."""
    taken: dict[str, str] = {}
    holder: dict[str, ImportItem] = {}
    # Each memory said so far, by what it says (its name as the file gives it, before any
    # numbering), to the first file that said it.
    said: dict[str, ImportItem] = {}
    as_exported: Collection[str] | None = None

    def over_export(sub: ImportItem, top: ImportItem) -> bool:
        nonlocal as_exported
        if "/" not in sub.path or "/" in top.path or not sub.name_declared or exported is None:
            return False
        if as_exported is None:
            as_exported = exported(items)
        return top.path in as_exported

    # The next suffix to try per name: many files sharing a name cost one try each, not
    # one per file already numbered.
    next_number: dict[str, int] = {}
    for item in sorted(items, key=lambda i: not i.name_declared):
        same = said.setdefault(_memory_key(item), item)
        if same is not item:
            item.left_out = f"says exactly what {same.path} says: the same memory, read once"
            continue
        first = holder.get(item.name)
        if first is not None and over_export(first, item):
            first.over_export = True
            item.left_out = f"as the last export wrote it; {first.path} says its memory"
            continue
        if first is not None and over_export(item, first):
            item.over_export = True
            first.left_out = f"as the last export wrote it; {item.path} says its memory"
            taken[item.name] = item.path
            holder[item.name] = item
            continue
        if item.name in taken:
            number = next_number.get(item.name, 2)
            while with_suffix(item.name, number) in taken:
                number += 1
            next_number[item.name] = number + 1
            new_name = with_suffix(item.name, number)
            item.notes.append(
                f"name {item.name!r} is also used by {taken[item.name]}; using {new_name!r}"
            )
            item.name = new_name
        taken[item.name] = item.path
        holder[item.name] = item


def _memory_key(item: ImportItem) -> str:
    """What a file says as a memory: two files with equal keys are one memory."""
    return json.dumps(item.values(), sort_keys=True, ensure_ascii=False, default=repr)


@dataclass
class FolderRead:
    """A folder's files as import reads them, checked, before anything is written."""

    items: list[ImportItem]
    left_out: list[ImportItem]  # the same memory as another file says (their notes)
    problems: list[FileProblem]  # what --skip-invalid skips
    not_memories: list[FileProblem] = field(default_factory=list)  # skipped, saying so


def read_for_import(
    directory: str | Path,
    store: MemoryStore | None,
    *,
    skip_invalid: bool = False,
    default_type: str | None = None,
    progress: Progress | None = None,
    allow_secrets: bool = False,
    top_level: bool = False,
) -> FolderRead:
    """The folder's files read and checked as import_memories reads them into `store` (None:
    a store not created yet, which holds nothing): InvalidMemory for a bad `default_type`,
    ImportFailed for no folder, ImportRejected for files that cannot be imported (unless
    `skip_invalid`). It writes nothing: memctl reads a folder with it before it creates a
    database, so that an import refused leaves no database behind."""
    if default_type is not None:
        check_type(default_type)
    exported: Callable[[list[ImportItem]], Collection[str]] | None = None
    held: Callable[[list[ImportItem]], set[str]] = _held_by_none
    if store is not None:
        key = folder_key(Path(directory), store.path)
        legacy = legacy_key(Path(directory))
        exported = functools.partial(_as_exported, store, key, legacy)
        held = functools.partial(_held, store, key, legacy)
    items, problems, not_memories = read_folder(
        Path(directory),
        default_type=default_type,
        progress=progress,
        top_level=top_level,
        exported=exported,
    )
    left_out = [item for item in items if item.left_out is not None]
    items = [item for item in items if item.left_out is None]
    if not allow_secrets:
        items = _without_secrets(items, problems, held)
    if problems and not skip_invalid:
        raise ImportRejected(problems)
    return FolderRead(items, left_out, problems, not_memories)


def _held_by_none(items: list[ImportItem]) -> set[str]:
    """What a store not created yet holds of `items`: nothing (see _held)."""
    return set()


def _without_secrets(
    items: list[ImportItem],
    problems: list[FileProblem],
    held: Callable[[list[ImportItem]], set[str]],
) -> list[ImportItem]:
    """The items that hold no secret, or only one the database already holds as the file
    says it (`held`: a memory kept with --allow-secret, exported, read back), which import
    leaves unchanged. Any other file with one is a problem of that file, like any other
    (listed, and left out by --skip-invalid), not a refusal of the whole import; the store
    checks every write again."""
    # It compiles its patterns: imported only when importing.
    from memstore.storage.secrets import memory_secret, refusal

    found = {}
    for item in items:
        others = {key: item.optional[key] for key in SCANNED_OTHERS if key in item.optional}
        secret = memory_secret(item.name, item.description, item.body, item.extra, others)
        if secret is not None:
            found[item.path] = secret
    if not found:
        return items
    unchanged = held([item for item in items if item.path in found])
    kept = []
    for item in items:
        secret = found.get(item.path)
        if secret is None or item.path in unchanged:
            kept.append(item)
        else:
            refused = refusal(secret)
            problems.append(FileProblem(item.path, f"{refused} (--allow-secret imports it)"))
    return kept


def _held(store: MemoryStore, key: str, legacy: str, items: list[ImportItem]) -> set[str]:
    """The paths of the items that import counts unchanged because the database already
    holds what they say: the file as memstore last wrote or read it, or a file saying
    exactly what the live memory it would update says. Importing them writes nothing."""
    with store.engine.connect() as connection:
        records = load_records(connection, key, legacy)
    live = store.memories()
    by_name = {m.name: m for m in live}
    by_id = {m.id: m for m in live}
    held = set()
    for item in items:
        record = records.get(item.path)
        if record is not None and item.sha256 == record.sha256:
            held.add(item.path)
            continue
        memory = updated_memory(item, record, by_id, by_name)  # never a new one
        if memory is not None and says_version(item, memory.snapshot()):
            held.add(item.path)
    return held


def updated_memory(
    item: ImportItem,
    record: Any,
    by_id: dict[int, MemoryRecord],
    by_name: dict[str, MemoryRecord],
) -> MemoryRecord | None:
    """The live memory a file updates: the one its record says it holds (the memory may have
    been renamed since), else the one of the name it says; None when it makes a new one."""
    return (by_id.get(record.memory_id) if record is not None else None) or by_name.get(item.name)


def _as_exported(store: MemoryStore, key: str, legacy: str, items: list[ImportItem]) -> set[str]:
    """The paths of the items that are the copy export wrote of the live memory of the name
    they say: memstore's canonical file of that memory, as memstore last wrote it there (a
    file of the user's own, which export keeps in its own shape, is not one)."""
    with store.engine.connect() as connection:
        records = load_records(connection, key, legacy)
    memories = {memory.id: memory for memory in store.memories()}
    return {
        item.path
        for item in items
        if (record := records.get(item.path)) is not None
        and record.sha256 == item.sha256
        and (memory := memories.get(record.memory_id)) is not None
        and memory.name == item.name
        and sha256(render_memory_file(memory).encode()) == item.sha256
    }
