"""The agent's tools, confined to one workspace folder.

Every path the model gives is resolved against the workspace, symlinks included, and refused
when it leaves it: `..`, absolute paths elsewhere, and links pointing out all get a clear tool
result rather than an exception. "~" is never expanded: a path starting with it is refused
(it would name a home folder); a folder literally named "~" is reachable as "./~".

`Workspace.run` never raises (except KeyboardInterrupt and SystemExit): bad arguments, files
that are not UTF-8, invalid glob patterns and unexpected errors all become error results.

Outputs are capped so that one tool call cannot flood the context (the compression pipeline
handles what is still large), and so is the memory a call uses: a command's output goes to an
unnamed temporary file of which only the head and tail are read, read_file reads line by line
and stops at its limit, and glob stops walking after GLOB_MAX_RESULTS matches.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import inspect
import itertools
import math
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from memstore.storage.workspace import SESSIONS_FOLDER
from memstore.text import cut_middle

BASH_TIMEOUT_S = 120
BASH_TIMEOUT_MAX_S = 600
# A command that prints more than this is stopped: the output goes to a temporary file, and
# `yes` would fill the disk (or the RAM, where /tmp is tmpfs) in a minute.
BASH_OUTPUT_MAX_BYTES = 100_000_000
OUTPUT_MAX_CHARS = 50_000
READ_MAX_BYTES = 2_000_000
# edit_file reads the whole file: larger ones are refused (bash has sed for them).
EDIT_MAX_BYTES = 10_000_000
# How much of a write or an edit the approval summary shows.
SUMMARY_MAX_CHARS = 20_000
# Folders the file tools never write, wherever they are: git's machinery (hooks, config) and
# memstore's own (memories change through memory commands, which are audited).
PROTECTED_FOLDERS = (".git", ".memory")
# With a database file, what SQLite keeps beside it.
DATABASE_SUFFIXES = ("", "-wal", "-shm", "-journal")
GLOB_MAX_RESULTS = 500


@dataclass(frozen=True)
class ToolRequest:
    """One tool call as the user is asked about it. `summary` says exactly what will run or
    be written; it is untrusted text (escape control characters to display it). `path` is
    the workspace-relative path a file tool will write ("" for bash)."""

    name: str
    input: dict[str, Any]
    summary: str
    path: str = ""


@dataclass(frozen=True)
class ToolResult:
    text: str
    is_error: bool = False


class ToolRefused(Exception):
    """The call cannot run as given; the message goes back to the model."""


TOOL_DEFINITIONS: list[dict[str, Any]] = [
    {
        "name": "bash",
        "description": (
            "Run a shell command in the workspace folder and return its output "
            f"(stdout and stderr, at most {OUTPUT_MAX_CHARS:,} characters). "
            f"Commands time out after {BASH_TIMEOUT_S} s unless timeout is given. Background "
            "jobs (&) are stopped when the command ends."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "timeout": {"type": "integer", "description": "Seconds, at most 600."},
            },
            "required": ["command"],
        },
    },
    {
        "name": "read_file",
        "description": "Read a text file of the workspace, numbered lines; optionally only the "
        "first `limit` lines, from line `offset` (1-based).",
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "limit": {"type": "integer"},
                "offset": {"type": "integer"},
            },
            "required": ["path"],
        },
    },
    {
        "name": "write_file",
        "description": "Create or overwrite a file of the workspace with the given content.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    },
    {
        "name": "edit_file",
        "description": "Replace exact text in a file. old_text must occur exactly once unless "
        "replace_all is true; the result says how many matches there were.",
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "old_text": {"type": "string"},
                "new_text": {"type": "string"},
                "replace_all": {"type": "boolean"},
            },
            "required": ["path", "old_text", "new_text"],
        },
    },
    {
        "name": "glob",
        "description": "List workspace files matching a glob pattern such as 'src/**/*.py'.",
        "input_schema": {
            "type": "object",
            "properties": {"pattern": {"type": "string"}},
            "required": ["pattern"],
        },
    },
]


class Workspace:
    """The folder the agent works in, and the tools that act on it."""

    def __init__(self, root: Path, *, databases: Iterable[Path] = ()) -> None:
        """`databases`: memstore databases the tools must not touch, wherever they are
        (their SQLite side files and the `sessions` folder beside them too)."""
        self.root = root.resolve()
        self.off_limits: list[Path] = []
        for database in databases:
            self.protect_database(database)
        self._handlers: dict[str, Callable[..., str]] = {
            "bash": self.bash,
            "read_file": self.read_file,
            "write_file": self.write_file,
            "edit_file": self.edit_file,
            "glob": self.glob,
        }

    def protect_database(self, database: Path) -> None:
        database = database.resolve()
        self.off_limits += [database.with_name(database.name + s) for s in DATABASE_SUFFIXES]
        self.off_limits.append(database.parent / SESSIONS_FOLDER)

    def request(self, name: str, arguments: Any) -> ToolRequest | ToolResult:
        """The call as the user is asked about it, or the error result when it cannot run
        as given (bad input, a path outside the workspace or protected)."""
        try:
            self._check(name, arguments)
            return ToolRequest(
                name,
                arguments,
                valid_text(self._summary(name, arguments)),
                self._relative(name, arguments),
            )
        except ToolRefused as refusal:
            return ToolResult(valid_text(str(refusal)), is_error=True)
        except Exception as error:  # an OSError while resolving a path, for one
            return ToolResult(valid_text(f"{name} failed: {error}"), is_error=True)

    def _check(self, name: str, arguments: Any) -> None:
        handler = self._handlers.get(name)
        if handler is None:
            raise ToolRefused(f"unknown tool {name!r}")
        if not isinstance(arguments, dict):
            kind = type(arguments).__name__
            raise ToolRefused(f"the tool input must be a JSON object, not {kind}")
        try:
            inspect.signature(handler).bind(**arguments)
        except TypeError as error:  # missing or unexpected arguments
            raise ToolRefused(f"bad arguments for {name}: {error}") from None
        texts = {
            "bash": ("command",),
            "write_file": ("path", "content"),
            "edit_file": ("path", "old_text", "new_text"),
        }
        for key in texts.get(name, ()):
            if not isinstance(arguments[key], str):
                raise ToolRefused(f"{key} must be a string")
        if name in ("write_file", "edit_file"):
            self.path(arguments["path"], writing=True)

    def _relative(self, name: str, arguments: dict[str, Any]) -> str:
        if name not in ("write_file", "edit_file"):
            return ""
        return self.path(arguments["path"], writing=True).relative_to(self.root).as_posix()

    def _summary(self, name: str, arguments: dict[str, Any]) -> str:
        """Exactly what the call will run or write, for the user to approve."""
        if name == "bash":
            timeout = arguments.get("timeout")
            return f"$ {arguments['command']}" + (f"\n(timeout {timeout} s)" if timeout else "")
        if name == "write_file":
            target = self.path(arguments["path"], writing=True)
            content = arguments["content"]
            what = "replace" if target.exists() else "create"
            head = f"{what} {self._relative(name, arguments)} ({len(content):,} characters):"
            return f"{head}\n{cut_middle(content, SUMMARY_MAX_CHARS)}"
        if name == "edit_file":
            every = " (every match)" if arguments.get("replace_all") else ""
            old = "\n".join("- " + line for line in arguments["old_text"].split("\n"))
            new = "\n".join("+ " + line for line in arguments["new_text"].split("\n"))
            head = f"edit {self._relative(name, arguments)}{every}:"
            half = SUMMARY_MAX_CHARS // 2
            return f"{head}\n{cut_middle(old, half)}\n{cut_middle(new, half)}"
        return f"{name} {arguments}"

    def run(self, name: str, arguments: Any) -> ToolResult:
        """Run one tool call; every failure becomes an error result for the model.
        (Approval is the caller's: see memstore.agent.approval.)

        Only KeyboardInterrupt and SystemExit (not Exceptions) propagate."""
        try:
            self._check(name, arguments)
            return ToolResult(valid_text(self._handlers[name](**arguments)))
        except ToolRefused as refusal:
            return ToolResult(valid_text(str(refusal)), is_error=True)
        except OSError as error:
            where = f" ({error.filename})" if error.filename else ""
            text = f"{name} failed: {error.strerror or error}{where}"
            return ToolResult(valid_text(text), is_error=True)
        except Exception as error:
            text = f"{name} failed: {type(error).__name__}: {error}"
            return ToolResult(valid_text(text), is_error=True)

    def path(self, given: Any, *, writing: bool = False) -> Path:
        """The workspace path for `given`, refusing anything that resolves outside it, and
        memstore's own files (and, for a write, .git/ and .memory/).

        "~" is not expanded, and a path that starts with it is refused rather than taken as a
        folder of the workspace: the model almost certainly means a home folder."""
        if not isinstance(given, str) or not given.strip():
            raise ToolRefused("path must be a non-empty string")
        if "\x00" in given:
            raise ToolRefused("path must not contain NUL")
        if given.startswith("~"):
            raise ToolRefused(
                f"refused: {given!r} starts with '~', a home folder outside the workspace; "
                f"paths are relative to the workspace {self.root} (write './{given}' for a "
                "folder named '~' inside it)"
            )
        candidate = Path(given)
        try:
            resolved = (candidate if candidate.is_absolute() else self.root / candidate).resolve()
        except (OSError, RuntimeError) as error:  # a symlink loop, for one
            raise ToolRefused(f"{given}: cannot resolve the path ({error})") from None
        if resolved != self.root and not resolved.is_relative_to(self.root):
            raise ToolRefused(
                f"refused: {given!r} is outside the workspace {self.root}; "
                "only paths inside it can be read or written"
            )
        if reason := self.protected(resolved, writing=writing):
            raise ToolRefused(f"refused: {given!r} is {reason}")
        return resolved

    def protected(self, resolved: Path, *, writing: bool) -> str:
        """Why the file tools must not touch `resolved` ("" when they may). Compared without
        case (a case-insensitive file system has one .git for .GIT and .Git), after symlinks
        are resolved, and by inode for an existing file (a hard link to the database)."""
        lowered = str(resolved).lower()
        for path in self.off_limits:
            if lowered == str(path).lower() or lowered.startswith(str(path).lower() + os.sep):
                return "memstore's own data (its database or chat sessions), never a file tool's"
        with contextlib.suppress(OSError):
            status = resolved.stat()
            for path in self.off_limits:
                with contextlib.suppress(OSError):
                    if os.path.samestat(status, path.stat()) and stat.S_ISREG(status.st_mode):
                        return "a link to memstore's database, never a file tool's"
        if not writing:
            return ""
        parts = [part.lower() for part in resolved.relative_to(self.root).parts]
        if ".git" in parts:
            return "inside .git/ (hooks, config): the file tools never write there"
        if ".memory" in parts:
            return (
                "inside .memory/, memstore's own folder: memories change through memctl's "
                "memory commands (audited), not file writes"
            )
        return ""

    # -- the tools --------------------------------------------------------------------------

    def bash(self, command: str, timeout: Any = None) -> str:
        if not isinstance(command, str) or not command.strip():
            raise ToolRefused("command must be a non-empty string")
        given = BASH_TIMEOUT_S if timeout is None else whole_number(timeout, "timeout", minimum=1)
        limit = min(given, BASH_TIMEOUT_MAX_S)
        # The output goes to an unnamed file, not a pipe: memory stays bounded however much
        # the command prints, and a background job that keeps the file open does not keep us
        # waiting, as it would keep a pipe open: we wait for bash itself, not for end of file.
        reaping = become_subreaper()
        ours = set(child_processes()) if reaping else set()
        with tempfile.TemporaryFile() as output:
            process: subprocess.Popen[bytes] | None = None
            try:
                # Started inside the try: a Ctrl-C as Popen returns (bash running, `process`
                # not yet set) still leaves nothing running, bash being one of the children
                # kill_leftovers finds.
                process = subprocess.Popen(
                    ["bash", "-c", command],
                    cwd=self.root,
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # so a timeout kills the whole process group
                )
                stopped = wait_for(process, output, limit)
            except BaseException:  # Ctrl-C in the agent: leave nothing running
                if process is not None:
                    kill_group(process)
                if reaping:
                    kill_leftovers(ours)
                raise
            # Background jobs still in the group would go on writing to a file nobody reads;
            # those that left it (setsid) were reparented to us, and are stopped too.
            kill_group(process)
            if reaping:
                kill_leftovers(ours)
            text = head_and_tail(output)
        if stopped:
            return f"{text}\n[{stopped}; the command was killed]"
        if process.returncode:
            text += f"\n[exit code {process.returncode}]"
        return text or "(no output)"

    def read_file(self, path: str, limit: Any = None, offset: Any = None) -> str:
        count = None if limit is None else whole_number(limit, "limit", minimum=1)
        # offset 0 is taken as 1, as the model sometimes counts from 0.
        first = 1 if offset is None else max(whole_number(offset, "offset", minimum=0), 1)
        target = self.path(path)
        if not target.is_file():
            raise ToolRefused(f"{path}: no such file")
        size = target.stat().st_size
        if size > READ_MAX_BYTES and not count:
            raise ToolRefused(f"{path} is {size:,} bytes; read it with a line limit")
        budget = OUTPUT_MAX_CHARS
        shown: list[str] = []
        number = 0
        capped = False
        # Line by line, stopping after the last line asked for, or when the output is full.
        with target.open("rb") as handle:
            for number, line in enumerate(read_lines(handle), 1):
                if number < first:
                    continue
                if count is not None and number >= first + count:
                    break
                entry = f"{number:6}\t{line}"
                if shown and len(entry) + 1 > budget:
                    capped = True
                    break
                shown.append(entry)
                budget -= len(entry) + 1
            else:  # the whole file was read
                if shown:
                    return "\n".join(shown)
                if number == 0:
                    return "(empty file)"
                return f"(no lines from offset {first}; the file has {number} lines)"
            # Line `number` was read but not shown; count what follows it if that is cheap.
            more = (
                f"{1 + lines_left(handle)} more lines"
                if size <= READ_MAX_BYTES
                else "more lines follow"
            )
        note = "output cap reached; " if capped else ""
        return "\n".join(shown) + f"\n[{note}{more}; read on with offset={number}]"

    def write_file(self, path: str, content: str) -> str:
        if not isinstance(content, str):
            raise ToolRefused("content must be a string")
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError as error:
            raise ToolRefused(
                f"content cannot be written as UTF-8 ({error.reason}); nothing written"
            ) from None
        target = self.path(path, writing=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        # The folders made may hold a link now: check the final path again.
        target = self.path(path, writing=True)
        write_atomically(target, data)
        return f"wrote {len(data):,} bytes to {target.relative_to(self.root)}"

    def edit_file(self, path: str, old_text: str, new_text: str, replace_all: Any = False) -> str:
        target = self.path(path, writing=True)
        if not target.is_file():
            raise ToolRefused(f"{path}: no such file")
        size = target.stat().st_size
        if size > EDIT_MAX_BYTES:
            raise ToolRefused(
                f"{path} is {size:,} bytes; edit_file edits files up to {EDIT_MAX_BYTES:,} "
                "bytes (use bash, e.g. sed, for larger ones); nothing changed"
            )
        if not isinstance(old_text, str) or not old_text or not isinstance(new_text, str):
            raise ToolRefused("old_text must be non-empty text and new_text text")
        if replace_all is None:
            replace_all = False
        if not isinstance(replace_all, bool):
            raise ToolRefused(f"replace_all must be true or false, got {replace_all!r}")
        try:
            with target.open("rb") as handle:  # at most the cap, whatever it grew to since
                text = handle.read(EDIT_MAX_BYTES + 1).decode("utf-8")
        except UnicodeDecodeError:
            raise ToolRefused(f"{path} is not UTF-8 text; nothing changed") from None
        matches = text.count(old_text)
        if matches == 0:
            raise ToolRefused(f"old_text not found in {path} (0 matches); nothing changed")
        if matches > 1 and not replace_all:
            raise ToolRefused(
                f"old_text occurs {matches} times in {path}; give more context to make it "
                "unique, or set replace_all; nothing changed"
            )
        try:
            edited = text.replace(old_text, new_text).encode("utf-8")
        except UnicodeEncodeError as error:
            raise ToolRefused(
                f"new_text cannot be written as UTF-8 ({error.reason}); nothing changed"
            ) from None
        if len(text) > EDIT_MAX_BYTES:
            raise ToolRefused(f"{path} grew past {EDIT_MAX_BYTES:,} bytes; nothing changed")
        write_atomically(target, edited)
        return f"replaced {matches} match{'es' if matches > 1 else ''} in {path}"

    def glob(self, pattern: str) -> str:
        if not isinstance(pattern, str) or not pattern.strip():
            raise ToolRefused("pattern must be a non-empty string")
        if "\x00" in pattern:
            raise ToolRefused("pattern must not contain NUL")
        if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
            raise ToolRefused(f"refused: {pattern!r} reaches outside the workspace")
        parts = PurePosixPath(pattern).parts
        if any("**" in part and part != "**" for part in parts):
            raise ToolRefused(
                f"invalid glob pattern {pattern!r}: '**' can only be a whole path component"
            )
        matcher = glob_regex(pattern)
        # The literal folders the pattern starts with are where the walk starts.
        literal = list(itertools.takewhile(lambda p: not _WILDCARD.search(p), parts[:-1]))
        start = self.path("/".join(literal)) if literal else self.root
        found: list[str] = []
        # os.walk does not follow symlinked folders (Path.glob's ** does, out of the
        # workspace), skips unreadable ones, and stops at GLOB_MAX_RESULTS matches.
        for folder, subfolders, files in os.walk(start):
            subfolders.sort()
            for name in sorted(files):
                path = Path(folder, name)
                relative = path.relative_to(self.root).as_posix()
                if not matcher.fullmatch(relative):
                    continue
                with contextlib.suppress(OSError, RuntimeError):  # a broken link, a loop
                    if path.resolve().is_relative_to(self.root) and path.is_file():
                        found.append(relative)  # run() makes it valid text
                if len(found) == GLOB_MAX_RESULTS:
                    break
            if len(found) == GLOB_MAX_RESULTS:
                break
        if not found:
            return "no files match"
        text = "\n".join(sorted(found))
        if len(found) == GLOB_MAX_RESULTS:
            text += f"\n[stopped after {GLOB_MAX_RESULTS} matches; narrow the pattern]"
        return text


_WILDCARD = re.compile(r"[*?\[]")


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob pattern as a regular expression over workspace-relative paths: `**/` is any
    number of folders, `*` and `?` stay within one name, `[...]` is a character class."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1 : end].replace("\\", "\\\\")
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    try:
        return re.compile("".join(out))
    except re.error as error:
        raise ToolRefused(f"invalid glob pattern {pattern!r}: {error}") from None


def write_atomically(target: Path, data: bytes) -> None:
    """Replace `target` with `data` so that a crash leaves the old file or the new one, never
    a truncated one: a temporary file beside it, synced, given the old file's mode, renamed."""
    try:
        mode: int | None = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        mode = None  # a new file: the umask decides, as for any file created
    for _ in range(100):
        temporary = target.with_name(f".{target.name}.{os.urandom(4).hex()}.tmp")
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
            break
        except FileExistsError:
            continue
    else:
        raise ToolRefused(f"cannot make a temporary file beside {target.name}")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    with contextlib.suppress(OSError):  # the rename itself survives a crash once synced
        folder = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


def whole_number(value: Any, name: str, *, minimum: int) -> int:
    """`value` as an int (the model may send 30, 30.0 or "30"); anything else is refused
    with a message the model can act on."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and len(value) <= 20:
        try:
            number = int(value.strip())
        except ValueError:
            number = None
    if number is None:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "…"
        raise ToolRefused(f"{name} must be a whole number, got {shown}")
    if number < minimum:
        raise ToolRefused(f"{name} must be at least {max(minimum, 1)}, got {number}")
    return number


def wait_for(process: subprocess.Popen[bytes], output: Any, limit: float) -> str:
    """Wait for bash to exit; why it had to be stopped ("" when it exited by itself)."""
    deadline = time.monotonic() + limit
    while True:
        try:
            process.wait(timeout=0.2)
            return ""
        except subprocess.TimeoutExpired:
            pass
        if os.fstat(output.fileno()).st_size > BASH_OUTPUT_MAX_BYTES:
            kill_group(process)
            return f"it printed more than {BASH_OUTPUT_MAX_BYTES // 1_000_000} MB"
        if time.monotonic() > deadline:
            kill_group(process)
            return f"timed out after {limit:g} s"


PR_SET_CHILD_SUBREAPER = 36


@functools.cache
def become_subreaper() -> bool:
    """On Linux, make this process the reaper of its orphaned descendants: a job a command
    started in a session of its own (setsid, a daemon) is then reparented here when bash
    ends, where kill_leftovers finds it. Elsewhere, False: such jobs outlive the command."""
    if not sys.platform.startswith("linux") or not os.path.isdir("/proc"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def process_tree() -> dict[int, list[int]]:
    """Each process's children, from /proc."""
    tree: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                stat_line = handle.read()
            # The name, in parentheses, may hold spaces and ")": the fields follow the last.
            parent = int(stat_line[stat_line.rindex(b")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # it ended meanwhile
        tree.setdefault(parent, []).append(int(entry.name))
    return tree


def child_processes() -> list[int]:
    return process_tree().get(os.getpid(), [])


def kill_leftovers(ours: set[int]) -> None:
    """Kill every process reparented to us since the command started (those not in `ours`,
    our children before it), with all their descendants, and reap them; again until none
    is left, as a dying process's own children are reparented to us in turn."""
    for _ in range(50):
        tree = process_tree()
        new = [pid for pid in tree.get(os.getpid(), []) if pid not in ours]
        if not new:
            return
        doomed, pending = [], list(new)
        while pending:
            pid = pending.pop()
            doomed.append(pid)
            pending += tree.get(pid, [])
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 2
        for pid in new:
            with contextlib.suppress(ChildProcessError):
                while os.waitpid(pid, os.WNOHANG) == (0, 0) and time.monotonic() < deadline:
                    time.sleep(0.01)


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """Kill the command's whole process group, then reap bash; a job that left the group
    (setsid) is left to kill_leftovers."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)


def head_and_tail(output: Any) -> str:
    """The command's output: whole if short, else its first and last OUTPUT_MAX_CHARS/2
    characters, reading only those from the file, and how many bytes were cut between."""
    limit = OUTPUT_MAX_CHARS
    half = limit // 2
    size = output.seek(0, os.SEEK_END)
    output.seek(0)
    if size <= 4 * limit:  # at most 4 bytes a character: cut by characters, as usual
        return cut_middle(output.read().decode("utf-8", "replace"), limit)
    # surrogateescape keeps invalid bytes one "character" each, so that the bytes cut can
    # be counted exactly; they are shown as U+FFFD.
    head = (
        output.read(4 * half)
        .decode("utf-8", "surrogateescape")[:half]
        .encode("utf-8", "surrogateescape")
    )
    output.seek(size - 4 * half)
    tail_bytes = output.read(4 * half)
    skip = 0  # the read may start inside a character: skip its continuation bytes
    while skip < 3 and tail_bytes[skip] & 0xC0 == 0x80:
        skip += 1
    tail = (
        tail_bytes[skip:]
        .decode("utf-8", "surrogateescape")[-half:]
        .encode("utf-8", "surrogateescape")
    )
    cut = size - len(head) - len(tail)
    return (
        f"{head.decode('utf-8', 'replace')}\n[… {cut:,} bytes of output cut …]\n"
        f"{tail.decode('utf-8', 'replace')}"
    )


def read_lines(handle: Any) -> Iterator[str]:
    """The lines of a binary file, decoded (invalid UTF-8 shows as U+FFFD), one at a time;
    a line longer than half the output cap is cut, the rest of it read in blocks and dropped."""
    longest = max(OUTPUT_MAX_CHARS // 2, 1)
    while True:
        raw = handle.readline(longest)
        if not raw:
            return
        cut = False
        if not raw.endswith(b"\n"):
            while rest := handle.readline(1 << 20):
                cut = True
                if rest.endswith(b"\n"):
                    break
        line = raw.rstrip(b"\n").removesuffix(b"\r").decode("utf-8", "replace")
        yield f"{line} [line cut]" if cut else line


def lines_left(handle: Any) -> int:
    """How many lines remain from the handle's position, read in blocks."""
    left, last = 0, b"\n"
    while chunk := handle.read(1 << 20):
        left += chunk.count(b"\n")
        last = chunk[-1:]
    return left + (last != b"\n")


def valid_text(text: str) -> str:
    """`text` as valid Unicode: a file name that is not UTF-8 reaches Python as lone
    surrogates, which neither the transcript nor the API request can encode."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
