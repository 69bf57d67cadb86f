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
import secrets
import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISREG
from typing import Any, Protocol

try:
    import fcntl
except ImportError:  # Windows: exports into one folder are not serialised
    fcntl = None  # type: ignore[assignment]

from sqlalchemy import Connection, Row, select

from memstore.errors import ExportConflict, ExportFailed, InvalidMemory
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
    INDEX_MAX_BYTES,
    TYPE_ORDER,
    index_line,
    memory_file_name,
    omitted_note,
    render_index,
    render_memory_file,
)
from memstore.files.import_file import file_says_a_version
from memstore.files.inplace import render_in_place
from memstore.storage.engine import writer
from memstore.storage.models import (
    LIVE,
    MemoryRecord,
    MemorySummary,
    memory_event_table,
    memory_table,
)
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


@dataclass
class _Plan:
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
    notes: list[str] = field(default_factory=list)
    unchanged: int = 0


class IndexUpdate(Protocol):
    """Another tool's MEMORY.md, kept in its own form (Claude Code's): given the file's bytes
    (None when there is none), every memory file of the folder with its memory, and the
    files this export creates and removes, the new bytes, or None to leave it as it is."""

    def __call__(
        self,
        disk: bytes | None,
        files: dict[str, MemorySummary],
        created: Sequence[str],
        removed: Sequence[str],
    ) -> bytes | None: ...


def export_memories(
    store: MemoryStore,
    directory: str | Path,
    *,
    force: bool = False,
    dry_run: bool = False,
    index: IndexUpdate | None = None,
    personal: bool = False,
) -> ExportResult:
    """Write the folder; with `dry_run`, only say what would be written and removed. `index`
    writes MEMORY.md in another tool's form instead of memstore's.

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
    with _folder_lock(directory):
        try:
            return _export_locked(store, directory, force, dry_run, index, personal)
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
) -> ExportResult:
    if not dry_run:
        _remove_stale_temporaries(directory)
    key = folder_key(directory, store.path)
    summary_columns = [memory_table.c[name] for name in ("id", *MemorySummary._fields, "version")]
    with store.engine.connect() as connection:
        every = connection.execute(select(*summary_columns).where(LIVE)).all()
        records = load_records(connection, key, legacy_key(directory))
        private = {} if personal or store.url is None else _persons_own(every)
        memories = [memory for memory in every if memory.id not in private]
        renamed = _former_file_names(connection, memories, records)
    on_disk = _markdown_files(directory)
    # Names and records come from a database file someone may have edited by hand: nothing
    # outside the rules may become a path.
    for memory in memories:
        try:
            check_name(memory.name)
        except InvalidMemory as error:
            raise ExportFailed(f"memory {memory.id} in the database has an {error}") from None
    records = {name: row for name, row in records.items() if _is_export_file_name(name)}
    plan = _Plan()
    targets = _targets(memories, records, on_disk, renamed)
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
            and _same_stat(record, stat)
        ):
            plan.unchanged += 1
        else:
            to_render.append(memory.id)
    # Only memories that changed since the last export are read in full and rendered.
    for full in store.by_ids(to_render).values():
        file_name = file_of[full.id]
        _plan_memory(
            plan, directory, file_name, full, records.get(file_name), on_disk.get(file_name), force
        )
    if index is None:
        text = render_index(
            (MemorySummary(m.name, m.type, m.description) for m in memories),
            files={memory.name: file_name for file_name, memory in targets.items()},
        )
        _plan_index(
            store, plan, directory, text.encode(), records.get(INDEX_FILE_NAME), on_disk, force
        )
    live_ids = {memory.id for memory in every}
    stale = [name for name in records if name not in targets and name != INDEX_FILE_NAME]
    for file_name in stale:
        record = records[file_name]
        if file_name not in on_disk:
            plan.forgotten.append(file_name)
        elif force or _disk_matches_record(directory / file_name, record, on_disk[file_name]):
            plan.removals.append(file_name)
        else:
            kind = "both" if record.memory_id in live_ids else "deleted"
            if record.memory_id in private:  # a person's own, edited here since
                same = record.memory_version == private[record.memory_id].version
                kind = "file" if same else "both"
            plan.suspects[file_name] = (record.memory_id, _read(directory / file_name), kind, None)
    _private_leftovers(plan, directory, private, records, targets, on_disk)
    _settle_suspects(store, plan)
    if plan.conflicts:
        raise ExportConflict(str(directory), sorted(plan.conflicts), plan.conflicts)
    if index is not None:
        _plan_given_index(plan, directory, index, targets, on_disk)

    # The index goes last, so that it never lists a file that is not there yet.
    ordered = sorted(plan.writes, key=lambda name: name == INDEX_FILE_NAME)
    if dry_run:
        removed = sorted(n for n in plan.removals if n in on_disk)
        return ExportResult(directory, ordered, removed, plan.unchanged + len(plan.adopted))
    applied = _Applied(stats={name: on_disk[name] for name in plan.adopted})
    contents = dict(plan.adopted)
    try:
        _write_all(directory, {name: plan.writes[name] for name in ordered}, plan.removals, applied)
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
    )


def _former_file_names(
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


def _targets(
    memories: Sequence[Row[Any]],
    records: dict[str, Row[Any]],
    on_disk: Collection[str],
    renamed: dict[int, set[str]],
) -> dict[str, Row[Any]]:
    """The file each memory is written to: the file it came from (an import) or was last
    written to, while that file is there and is not the file of a name it had before,
    else `<name>.md`."""
    by_id = {memory.id: memory for memory in memories}
    origin: dict[int, str] = {}
    for file_name, record in sorted(records.items()):
        memory = by_id.get(record.memory_id)
        if (
            file_name == INDEX_FILE_NAME
            or memory is None
            or file_name not in on_disk
            or file_name in renamed.get(memory.id, ())
        ):
            continue
        current = origin.get(memory.id)
        canonical = memory_file_name(memory.name)
        if current is None or (file_name == canonical and current != canonical):
            origin[memory.id] = file_name
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


def _plan_memory(
    plan: _Plan,
    directory: Path,
    file_name: str,
    memory: MemoryRecord,
    record: Row[Any] | None,
    stat: os.stat_result | None,
    force: bool,
) -> None:
    if stat is None:
        plan.writes[file_name] = render_memory_file(memory).encode()
        return
    disk = _read(directory / file_name)
    disk_hash = sha256(disk)
    if record is None or record.memory_id != memory.id:
        record = None
    elif record.memory_version == memory.version and disk_hash == record.sha256:
        # As memstore last wrote or read it, and the memory has not changed since: the
        # file says what the memory says, in its own words; it stays byte for byte.
        plan.adopted[file_name] = disk
        return
    content = render_in_place(memory, disk, file_name) or render_memory_file(memory).encode()
    if sha256(content) == disk_hash:
        plan.adopted[file_name] = disk
    elif force or (record is not None and disk_hash == record.sha256):
        plan.writes[file_name] = content
    else:
        if record is None:
            kind = "unknown"
        else:
            kind = "file" if record.memory_version == memory.version else "both"
        plan.suspects[file_name] = (memory.id, disk, kind, content)


def _plan_index(
    store: MemoryStore,
    plan: _Plan,
    directory: Path,
    index: bytes,
    record: Row[Any] | None,
    on_disk: dict[str, os.stat_result],
    force: bool,
) -> None:
    """MEMORY.md is derived: written when it is memstore's (or absent), else left as the
    user wrote it, with a note. It is never a conflict: nothing in it can be imported.

    It is memstore's when it is what the last export wrote there, or (as a memory file that
    says what a version of its memory said) exactly the index memstore writes for some state
    of the database: an export cut short before it recorded it, a copy."""
    stat = on_disk.get(INDEX_FILE_NAME)
    new_hash = sha256(index)
    if stat is None:
        plan.writes[INDEX_FILE_NAME] = index
        return
    if record is not None and _same_stat(record, stat) and record.sha256 == new_hash:
        plan.unchanged += 1
        return
    disk = _read(directory / INDEX_FILE_NAME)
    if sha256(disk) == new_hash:
        plan.adopted[INDEX_FILE_NAME] = disk
    elif (
        force
        or (record is not None and sha256(disk) == record.sha256)
        or _says_an_index_state(store, disk)
    ):
        plan.writes[INDEX_FILE_NAME] = index
    else:
        plan.notes.append(
            f"{INDEX_FILE_NAME} was not written by memstore: left as it is "
            "('memctl export --force' replaces it with memstore's index)"
        )


def _plan_given_index(
    plan: _Plan,
    directory: Path,
    index: IndexUpdate,
    targets: dict[str, Row[Any]],
    on_disk: dict[str, os.stat_result],
) -> None:
    disk = _read(directory / INDEX_FILE_NAME) if INDEX_FILE_NAME in on_disk else None
    files = {name: MemorySummary(m.name, m.type, m.description) for name, m in targets.items()}
    created = [name for name in plan.writes if name not in on_disk]
    content = index(disk, files, created, [n for n in plan.removals if n in on_disk])
    if content is not None and content != disk:
        plan.writes[INDEX_FILE_NAME] = content


# The link is `<name>.md`, or the file a memory imported from another tool is kept in.
_INDEX_LINE = re.compile(
    r"- \[(?P<name>[a-z0-9-]+)\]\((?:<[^<>\n]+\.md>|[^\s()<>]+\.md)\) — [^\n]*\n"
)
_OMITTED_NOTE = re.compile(r"> (?P<count>[1-9][0-9]{0,9}) more memories are not listed[^\n]*\n")


def _says_an_index_state(store: MemoryStore, content: bytes) -> bool:
    """Whether a MEMORY.md is exactly the index memstore writes for some state of the
    database: each line links a memory as one of its versions was (name, type, description),
    the lines in memstore's order, and a cut-off note as memstore writes it. Then it holds
    nothing the database does not know; a line of anyone else's makes it theirs."""
    try:
        lines = content.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return False
    note = _OMITTED_NOTE.fullmatch(lines[-1]) if lines else None
    if note is not None and lines.pop() != omitted_note(int(note["count"]), INDEX_MAX_BYTES):
        return False
    names = []
    for line in lines:
        match = _INDEX_LINE.fullmatch(line)
        if match is None:
            return False
        names.append(match["name"])
    if len(set(names)) != len(names):
        return False
    ranks = _index_line_ranks(store, set(names)) if names else {}
    previous = (-1, "")
    for name, line in zip(names, lines, strict=True):
        # The least type the line can have that keeps memstore's order (type, then name).
        fits = [
            rank
            for rank in ranks.get(line, ())
            if rank > previous[0] or (rank == previous[0] and name > previous[1])
        ]
        if not fits:
            return False
        previous = (min(fits), name)
    return True


def _index_line_ranks(store: MemoryStore, names: set[str]) -> dict[str, set[int]]:
    """Every index line the memories named `names` have had (their events' new values),
    each with the type orders it had."""
    table = memory_event_table
    found: dict[str, set[int]] = {}
    wanted = sorted(names)
    with store.engine.connect() as connection:
        for start in range(0, len(wanted), 500):
            values = connection.execute(
                select(table.c.new_value).where(
                    table.c.memory_name.in_(wanted[start : start + 500]),
                    table.c.new_value.is_not(None),
                )
            ).scalars()
            for value in values:
                if not isinstance(value, dict) or value.get("name") not in names:
                    continue
                summary = MemorySummary(
                    str(value["name"]), str(value.get("type")), str(value.get("description"))
                )
                rank = TYPE_ORDER.get(summary.type, len(TYPE_ORDER))
                found.setdefault(index_line(summary), set()).add(rank)
    return found


def _settle_suspects(store: MemoryStore, plan: _Plan) -> None:
    """Files that differ from what memstore last recorded there: those that say exactly
    what a version of their memory said are memstore's (an export was interrupted before it
    recorded them; the project was moved, copied or cloned) and are overwritten or removed;
    the rest hold text the database does not have, and are conflicts (but a file no record
    knows, kind "", is someone's and is left)."""
    if not plan.suspects:
        return
    with store.engine.connect() as connection:
        versions = past_versions(connection, {v[0] for v in plan.suspects.values() if v[0]})
    for file_name, (memory_id, disk, kind, content) in plan.suspects.items():
        if memory_id is None or not file_says_a_version(disk, file_name, versions[memory_id]):
            if kind:  # "": someone's file, left as it is
                plan.conflicts[file_name] = kind
        elif content is None:
            plan.removals.append(file_name)
        else:
            plan.writes[file_name] = content


def _persons_own(memories: Sequence[Row[Any]]) -> dict[int, Row[Any]]:
    """On a server: the `user` memories among those the role sees, each the person's own."""
    return {memory.id: memory for memory in memories if memory.type == "user"}


def _private_leftovers(
    plan: _Plan,
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
            plan.suspects[file_name] = (memory.id, _read(directory / file_name), "", None)


@dataclass
class _Applied:
    """What an export changed in the folder so far."""

    stats: dict[str, os.stat_result] = field(default_factory=dict)
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def _write_all(
    directory: Path, writes: dict[str, bytes], removals: list[str], applied: _Applied
) -> None:
    """Every new content goes to a temporary file first; only when all are written are they
    renamed into place (in `writes`' order), so a full disk leaves every file old or new,
    never half-written. When the temporaries do not fit, the files to remove go first (their
    memories are gone; the space they free may be what the export needs) and it tries again."""
    temporaries: dict[str, tuple[str, os.stat_result]] = {}
    try:
        try:
            temporaries = _write_temporaries(directory, writes)
        except OSError:
            if not removals:
                raise
            _remove_files(directory, removals, applied)
            temporaries = _write_temporaries(directory, writes)
        for name in writes:
            temporary, stat = temporaries.pop(name)
            os.replace(temporary, directory / name)
            applied.stats[name] = stat
            applied.written.append(name)
        _remove_files(directory, removals, applied)
    finally:
        for temporary, _ in temporaries.values():
            with contextlib.suppress(OSError):
                os.unlink(temporary)


def _write_temporaries(
    directory: Path, writes: dict[str, bytes]
) -> dict[str, tuple[str, os.stat_result]]:
    made: dict[str, tuple[str, os.stat_result]] = {}
    try:
        for name, content in writes.items():
            made[name] = _write_temporary(directory, name, content)
    except BaseException:
        for temporary, _ in made.values():
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        raise
    return made


def _remove_files(directory: Path, names: list[str], applied: _Applied) -> None:
    for name in names:
        if name not in applied.removed:
            (directory / name).unlink(missing_ok=True)
            applied.removed.append(name)


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


def _is_export_file_name(file_name: str) -> bool:
    """A Markdown file directly in the folder (a record may come from an import, so any such
    name, not only `<memory name>.md`); never a path elsewhere."""
    return (
        file_name.endswith(".md")
        and len(file_name) > 3
        and not file_name.startswith(".")
        and "/" not in file_name
        and "\\" not in file_name
        and file_name.isprintable()
    )


# What _write_temporary names its temporary files: `.<file>.<pid>-<random>.tmp` (older
# versions wrote `.<file>.<pid>.tmp`, which a planted link could predict).
_TEMPORARY = re.compile(r"\.(?P<file>.+)\.(?P<pid>[1-9][0-9]{0,9})(?:-[0-9a-f]{16})?\.tmp")
# A new file only: never through a link or onto a file someone put there.
_CREATE_FLAGS = (
    os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
)


def _write_temporary(directory: Path, name: str, content: bytes) -> tuple[str, os.stat_result]:
    """Write `content` to a new temporary file beside `name`; its path and stat (which the
    rename keeps)."""
    temporary = str(directory / f".{name}.{os.getpid()}-{secrets.token_hex(8)}.tmp")
    fd = os.open(temporary, _CREATE_FLAGS, 0o666)
    try:
        with open(fd, "wb", closefd=True) as handle:
            handle.write(content)
            handle.flush()
            stat = os.fstat(handle.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return temporary, stat


def _remove_stale_temporaries(directory: Path) -> None:
    """Delete the temporary files of exports that were killed mid-write (SIGKILL, power
    loss): entries named as _write_temporary names them, for an export file name, whose
    process is gone, whatever they are (a link is removed, not followed). A live export's
    file is never touched."""
    for entry in os.scandir(directory):
        match = _TEMPORARY.fullmatch(entry.name)
        if (
            match is None
            or not _is_export_file_name(match["file"])
            or entry.is_dir(follow_symlinks=False)
            or _process_exists(int(match["pid"]))
        ):
            continue
        # Cleaning up is a courtesy: the export itself does not need it.
        with contextlib.suppress(OSError):
            os.unlink(entry.path)


def _markdown_files(directory: Path) -> dict[str, os.stat_result]:
    """The folder's regular `*.md` files and their stat; links and others are not ours."""
    found = {}
    for entry in os.scandir(directory):
        if not entry.name.endswith(".md"):
            continue
        with contextlib.suppress(FileNotFoundError):
            stat = entry.stat(follow_symlinks=False)
            if S_ISREG(stat.st_mode):
                found[entry.name] = stat
    return found


# How long an export waits for another one into the same folder to finish.
LOCK_WAIT_SECONDS = 30.0


@contextlib.contextmanager
def _folder_lock(directory: Path) -> Iterator[None]:
    """Hold an exclusive lock on the folder itself (flock on its descriptor: no lock file
    for anyone to commit), so that two exports into one folder run one after the other."""
    if fcntl is None:
        yield
        return
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as error:
        raise ExportFailed(f"cannot open {directory}: {error.strerror or error}") from None
    try:
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ExportFailed(
                        f"another export into {directory} has been running for over "
                        f"{LOCK_WAIT_SECONDS:.0f} s; try again when it ends"
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # releases the lock


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
    return _same_stat(record, stat) or sha256(_read(path)) == record.sha256


def _read(path: Path) -> bytes:
    """A file of the folder, never through a link."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with open(fd, "rb", closefd=True) as handle:
        return handle.read()


def _same_stat(record: Row[Any], stat: os.stat_result) -> bool:
    return record.size == stat.st_size and record.mtime_ns == stat.st_mtime_ns
