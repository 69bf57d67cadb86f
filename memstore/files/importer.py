"""Import: bring memory folders (ours, Claude Code's, hand-written) into the database.

Every file is read and checked first; then the whole import is applied in one transaction,
creating or updating memories by name. Files that are not quite canonical are normalised,
and each normalisation is reported; only files that cannot be read as a memory are refused.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import re
import stat
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection

from memstore.errors import (
    FileProblem,
    ImportFailed,
    ImportRejected,
    InvalidMemory,
    NotAMemory,
    SecretRefused,
    UnreadableFile,
)
from memstore.files.export_state import (
    FileState,
    folder_key,
    legacy_key,
    load_records,
    past_versions,
    remember_files,
    sha256,
)
from memstore.files.format import (
    INDEX_FILE_NAME,
    MODELED_KEYS,
    parse_memory_text,
    render_memory_file,
    synced_extra,
)
from memstore.limits import DESCRIPTION_MAX_CHARS
from memstore.storage.fields import CLEAR, CONTENT, OPTIONAL, RULES, SCANNED_OTHERS, restoring
from memstore.storage.models import MemoryRecord
from memstore.storage.store import MemoryStore
from memstore.storage.validation import (
    TYPES,
    check_body,
    check_description,
    check_name,
    check_type,
    name_from_text,
    with_suffix,
)
from memstore.text import shorten

MAX_FILE_BYTES = 1_048_576
ORIGINAL_NAME_KEY = "original_name"
_TYPE_PREFIX = re.compile(rf"^({'|'.join(TYPES)})(?:[_\-.\s]|$)", re.IGNORECASE)

Progress = Callable[[int, int], None]


@dataclass
class ImportItem:
    path: str
    name: str
    type: str
    description: str
    body: str
    extra: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    # The file as read: to compare with what export last wrote there.
    sha256: str = ""
    # False when the name was derived (from the file name or text), not given in the file.
    name_declared: bool = True
    # Why the file is left out, said as a note: another file of the folder says its memory
    # (see _make_names_unique).
    left_out: str | None = None
    # A file in a subfolder read instead of the top-level copy export wrote of its memory.
    over_export: bool = False
    # The optional fields (storage/fields.py) the file gives a value, checked.
    optional: dict[str, Any] = field(default_factory=dict)

    def values(self) -> dict[str, Any]:
        """The memory the file says, as a snapshot of its fields (storage/fields.py)."""
        given = {key: getattr(self, key) for key in CONTENT if key not in OPTIONAL}
        return {**given, **self.optional}


@dataclass
class ImportReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    # With `deletions`: memories whose file is gone from the folder.
    deleted: list[str] = field(default_factory=list)
    # Normalisations, one line each: "path: what was changed".
    notes: list[str] = field(default_factory=list)
    problems: list[FileProblem] = field(default_factory=list)
    # Markdown files that are no memory (no frontmatter: a person's notes), skipped.
    not_memories: list[FileProblem] = field(default_factory=list)
    dry_run: bool = False
    run_id: str | None = None


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


def read_memory_file(path: Path, relative: str, default_type: str | None) -> ImportItem:
    return read_memory_bytes(_read_regular_file(path), relative, default_type)


def read_memory_bytes(raw: bytes, relative: str, default_type: str | None) -> ImportItem:
    """What a file's bytes say as a memory; UnreadableFile or InvalidMemory when nothing."""
    path = Path(relative)
    if len(raw) > MAX_FILE_BYTES:
        raise UnreadableFile(f"file is over the limit of {MAX_FILE_BYTES:,} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UnreadableFile(f"not UTF-8 text (invalid byte at offset {error.start})") from None
    parsed = parse_memory_text(text)
    notes: list[str] = []
    if parsed.lenient_yaml:
        notes.append("frontmatter is not strict YAML; read it line by line")
    metadata = dict(parsed.metadata)
    if not parsed.body:
        raise UnreadableFile("no body after the frontmatter")
    body = check_body(parsed.body)
    type_ = _memory_type(metadata, path.stem, default_type, notes)
    description = _description(metadata.get("description"), body, notes)
    given = metadata.get("name")
    extra = {k: v for k, v in metadata.items() if k not in MODELED_KEYS}
    optional = {
        key: RULES[key].check(metadata[key])
        for key in OPTIONAL
        if key in MODELED_KEYS and metadata.get(key) is not None
    }
    name = _name(given, path.stem, extra, notes)
    return ImportItem(
        relative,
        name,
        type_,
        description,
        body,
        extra,
        notes,
        sha256(raw),
        name_declared=name == given,
        optional=optional,
    )


# Never through a link (it could point anywhere); never blocking on a FIFO's open.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def _read_regular_file(path: Path) -> bytes:
    """The first MAX_FILE_BYTES + 1 bytes of a regular file; links, FIFOs, devices and
    sockets are refused without being read (a FIFO would hang, a link could leave the folder)."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UnreadableFile("a symbolic link; only regular files are imported") from None
        raise UnreadableFile(f"cannot read: {error.strerror or error}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnreadableFile("not a regular file; only regular files are imported")
        chunks = []
        left = MAX_FILE_BYTES + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError as error:
        raise UnreadableFile(f"cannot read: {error.strerror or error}") from None
    finally:
        os.close(fd)


def _memory_type(
    metadata: dict[str, Any], stem: str, default_type: str | None, notes: list[str]
) -> str:
    nested = metadata.get("metadata")
    given = metadata.get("type")
    if given is None and isinstance(nested, dict):
        given = nested.get("type")
    if isinstance(given, str):
        if given in TYPES:
            return given
        if given.strip().lower() in TYPES:
            notes.append(f"type {given!r} read as {given.strip().lower()!r}")
            return given.strip().lower()
    prefix = _TYPE_PREFIX.match(stem)
    reason = "no type" if given is None else f"unknown type {given!r}"
    if prefix:
        type_ = prefix.group(1).lower()
        notes.append(f"{reason}; using {type_!r} from the file name")
        return type_
    if default_type is not None:
        notes.append(f"{reason}; using --default-type {default_type!r}")
        return check_type(default_type)
    raise UnreadableFile(
        f"{reason} (expected one of {', '.join(TYPES)}) and the file name does not tell; "
        "pass --default-type"
    )


def _description(given: Any, body: str, notes: list[str]) -> str:
    if given is not None and not isinstance(given, str):
        given = str(given)
    if isinstance(given, str) and len(given.strip()) > DESCRIPTION_MAX_CHARS:
        notes.append(f"description is over {DESCRIPTION_MAX_CHARS:,} characters; cut it")
        given = shorten(given.strip(), DESCRIPTION_MAX_CHARS)
    if isinstance(given, str) and given.strip():
        lines = given.strip().splitlines()
        if len(lines) > 1:
            notes.append("description spanned several lines; joined them")
            return check_description(" ".join(line.strip() for line in lines if line.strip()))
        return check_description(given)
    first_line = next(line for line in body.splitlines() if line.strip())
    derived = first_line.strip().lstrip("#").strip()[:150] or first_line.strip()[:150]
    notes.append("no description; using the body's first line")
    return check_description(derived)


def _name(given: Any, stem: str, extra: dict[str, Any], notes: list[str]) -> str:
    if isinstance(given, str) and ".." in re.split(r"[/\\]", given.strip()):
        # Free text is repaired into a name; a path that climbs out of its folder is hostile.
        shown = shorten(given.strip(), 80)
        raise UnreadableFile(f"name {shown!r} is a path that leaves its folder")
    if isinstance(given, str):
        try:
            return check_name(given)
        except InvalidMemory:
            pass
    given_text = "" if given is None else str(given).strip()
    name = name_from_text(stem, given_text)
    if given_text:
        extra[ORIGINAL_NAME_KEY] = given_text
        notes.append(f"name {given_text!r} is not a valid name; using {name!r}")
    else:
        notes.append(f"no name; using {name!r}")
    return name


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


def says_version(item: ImportItem, version: dict[str, Any]) -> bool:
    """Whether a file says what `version` (a memory's snapshot) says; its name aside, which
    a file may spell differently (free text, a numbered duplicate)."""
    extra = version.get("extra") or {}
    said = item.values()
    return all(
        said.get(key) == version.get(key) for key in CONTENT if key not in ("name", "extra")
    ) and item.extra in (extra, synced_extra(extra, item.type))


def file_says_a_version(raw: bytes, file_name: str, versions: list[dict[str, Any]]) -> bool:
    """Whether a file's bytes say exactly what one of `versions` said: then it holds nothing
    the database does not know (memstore wrote it, or it was imported)."""
    for type_ in dict.fromkeys(str(v.get("type")) for v in versions):
        try:
            item = read_memory_bytes(raw, file_name, type_)
        except (UnreadableFile, InvalidMemory):
            return False
        if any(says_version(item, version) for version in versions):
            return True
    return False


def _changes(item: ImportItem, memory: MemoryRecord) -> dict[str, Any]:
    if item.extra == synced_extra(memory.extra, memory.type):
        item.extra = memory.extra  # what export wrote, not a change
    # Every field but the name (the file's record, not its name, says which memory it is),
    # an optional one the file leaves out cleared.
    wanted = restoring(item.values())
    del wanted["name"]
    return {
        key: value
        for key, value in wanted.items()
        if getattr(memory, key) != (None if value is CLEAR else value)
    }


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
    export_command: str = "memctl export",
    read: FolderRead | None = None,
) -> ImportReport:
    """Import the folder's files in one transaction under `actor`. `top_level`: only files
    directly in the folder. `force`: a file edited since the last export whose memory also
    changed is imported over the database's version (which history keeps) instead of being
    refused as a conflict. `deletions`: a file of the folder's records that is gone deletes
    its memory (soft: `restore` brings it back), unless the memory changed since.
    `export_command`: the command that writes this folder, as the messages name it.
    `read`: the folder as read_for_import read it already (with the same options)."""
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
                connection, items, records, live, report, force, export_command
            )
            items = _not_older(connection, items, live, report)
        _raise_if_rejected(report, skip_invalid)
        actions = _plan(items, live, records, report)
        if deletions:
            claimed = {memory.id for _, memory, _ in actions if memory is not None}
            _gone(Path(directory), records, live, report, claimed)
        return report
    with store.transaction(actor=actor, allow_secrets=allow_secrets) as tx:
        records = load_records(tx.connection, key, legacy)
        live = tx.memories()
        items = _since_last_export(
            tx.connection, items, records, live, report, force, export_command
        )
        items = _not_older(tx.connection, items, live, report)
        _raise_if_rejected(report, skip_invalid)
        results: dict[str, MemoryRecord] = {}
        for item, memory, changes in _plan(items, live, records, report):
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
    from memstore.storage.secrets import memory_secret  # compiles its patterns: only when importing

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
            refused = SecretRefused(secret.field, secret.finding.kind)
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
        memory = _updated_memory(item, record, by_id, by_name)  # never a new one
        if memory is not None and says_version(item, memory.snapshot()):
            held.add(item.path)
    return held


def _updated_memory(
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
) -> list[ImportItem]:
    """The items to import: none that would bring back what the database has moved on from.

    A file still as memstore last wrote (or read) it says nothing new. A file that says what
    an older version of its memory said is a stale copy (of a moved, copied or interrupted
    export): importing it would undo the change since, so it is left out with a note. A file
    edited by hand whose memory also changed in the database since is a conflict.
    """
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
    for item, record, memory in suspects:
        if memory is not None and says_version(item, memory.snapshot()):
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
                f"'{export_command} --force', or redo the edit with 'memctl edit'",
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
    import updates (a file renamed), stays."""
    by_id = {m.id: m for m in live}
    gone = {
        name: record
        for name, record in records.items()
        if name != INDEX_FILE_NAME and "/" not in name and not os.path.lexists(directory / name)
    }
    present = {r.memory_id for name, r in records.items() if name not in gone}
    memories = []
    for name, record in sorted(gone.items()):
        memory = by_id.get(record.memory_id)
        if memory is None or memory.id in present or memory.id in claimed:
            continue
        if memory.version == record.memory_version:
            memories.append(memory)
            report.deleted.append(memory.name)
        else:
            report.notes.append(
                f"{name}: removed from the folder, but its memory {memory.name!r} changed in "
                "the database since: kept (an export writes it again)"
            )
    return memories, list(gone)


def _plan(
    items: list[ImportItem],
    live: list[MemoryRecord],
    records: dict[str, Any],
    report: ImportReport,
) -> list[tuple[ImportItem, MemoryRecord | None, dict[str, Any]]]:
    """(item, the memory it updates or None to create, the changed fields) for every item.
    A file recorded as holding a live memory updates that memory, whatever name the file
    reads as now (the memory may have been renamed since); any other file goes by name."""
    by_name = {m.name: m for m in live}
    by_id = {m.id: m for m in live}
    actions: list[tuple[ImportItem, MemoryRecord | None, dict[str, Any]]] = []
    for item in items:
        record = records.get(item.path)
        memory = _updated_memory(item, record, by_id, by_name)
        if memory is None:
            report.created.append(item.name)
            actions.append((item, None, {}))
            continue
        changes = _changes(item, memory)
        (report.updated if changes else report.unchanged).append(memory.name)
        actions.append((item, memory, changes))
    return actions
