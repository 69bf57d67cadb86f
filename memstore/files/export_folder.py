"""The folder as export writes it: one export at a time (a lock on the folder), its files
read never through a link, every new content written atomically (temporaries renamed into
place when all are written), and the temporaries of an export that was killed removed.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISREG

try:
    import fcntl
except ImportError:  # Windows: exports into one folder are not serialised
    fcntl = None  # type: ignore[assignment]

from memstore.errors import ExportFailed


@dataclass
class FolderChanges:
    """What an export changed in the folder so far."""

    stats: dict[str, os.stat_result] = field(default_factory=dict)
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def write_all(
    directory: Path, writes: dict[str, bytes], removals: list[str], applied: FolderChanges
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


def _remove_files(directory: Path, names: list[str], applied: FolderChanges) -> None:
    for name in names:
        if name not in applied.removed:
            (directory / name).unlink(missing_ok=True)
            applied.removed.append(name)


def keep_copies(directory: Path, contents: dict[str, bytes]) -> dict[str, Path]:
    """Each file's text in a new file beside it, `.<file>.overwritten-<UTC time>`, before
    `export --force` overwrites or removes it; the copies made, by file. A hidden name that
    does not end in `.md`: neither import nor export reads it, and nothing removes it."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    kept = {}
    for name, content in contents.items():
        for attempt in range(1, 1000):
            suffix = "" if attempt == 1 else f"-{attempt}"
            path = directory / f".{name}.overwritten-{stamp}{suffix}"
            try:
                fd = os.open(path, _CREATE_FLAGS, 0o666)
                with open(fd, "wb", closefd=True) as handle:
                    handle.write(content)
            except FileExistsError:  # a copy of the same second: the next number
                continue
            except OSError as error:
                raise ExportFailed(
                    f"cannot keep a copy of {directory / name} before overwriting it"
                    f" ({error.strerror or error}): nothing was overwritten"
                ) from None
            kept[name] = path
            break
    return kept


def is_export_file_name(file_name: str) -> bool:
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


def remove_stale_temporaries(directory: Path) -> None:
    """Delete the temporary files of exports that were killed mid-write (SIGKILL, power
    loss): entries named as _write_temporary names them, for an export file name, whose
    process is gone, whatever they are (a link is removed, not followed). A live export's
    file is never touched."""
    for entry in os.scandir(directory):
        match = _TEMPORARY.fullmatch(entry.name)
        if (
            match is None
            or not is_export_file_name(match["file"])
            or entry.is_dir(follow_symlinks=False)
            or _process_exists(int(match["pid"]))
        ):
            continue
        # Cleaning up is a courtesy: the export itself does not need it.
        with contextlib.suppress(OSError):
            os.unlink(entry.path)


def markdown_files(directory: Path) -> dict[str, os.stat_result]:
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
def folder_lock(directory: Path) -> Iterator[None]:
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


def read_folder_file(path: Path) -> bytes:
    """A file of the folder, never through a link."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with open(fd, "rb", closefd=True) as handle:
        return handle.read()
