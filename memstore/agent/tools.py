"""The agent's tools, confined to one workspace folder: what the model is told of them, and
the Workspace that checks each call and runs it.

Every path the model gives is resolved against the workspace, symlinks included, and refused
when it leaves it: `..`, absolute paths elsewhere, and links pointing out all get a clear tool
result rather than an exception. "~" is never expanded: a path starting with it is refused
(it would name a home folder); a folder literally named "~" is reachable as "./~".

`Workspace.run` never raises (except KeyboardInterrupt and SystemExit): bad arguments, files
that are not UTF-8, invalid glob patterns and unexpected errors all become error results.

The tools' work is in modules of their own: `shell` (bash), `file_tools` (read, write, edit)
and `glob_patterns` (glob); what a call and its result are is in `tool_calls`.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from memstore.agent.file_tools import edit_text, read_numbered_lines, write_atomically
from memstore.agent.glob_patterns import matching_files, parse_glob
from memstore.agent.shell import BASH_TIMEOUT_S, run_bash
from memstore.agent.tool_calls import (
    OUTPUT_MAX_CHARS,
    ToolRefused,
    ToolRequest,
    ToolResult,
    valid_text,
    whole_number,
)
from memstore.storage.memory_folder import SESSIONS_FOLDER
from memstore.text import cut_middle, show_hidden

# How much of a write or an edit the approval summary shows.
SUMMARY_MAX_CHARS = 20_000
# Folders the file tools never write, wherever they are: git's machinery (hooks, config) and
# memstore's own (memories change through memory commands, which are audited).
PROTECTED_FOLDERS = (".git", ".memory")
# With a database file, what SQLite keeps beside it.
DATABASE_SUFFIXES = ("", "-wal", "-shm", "-journal")
# The tools that refuse a file with more than one hard link unless the user was asked.
FILE_TOOLS = ("read_file", "write_file", "edit_file")


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
            links = self._links(name, arguments)
            return ToolRequest(
                name,
                arguments,
                valid_text(self._summary(name, arguments, links)),
                self._relative(name, arguments),
                asks=links > 1,
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

    def _links(self, name: str, arguments: dict[str, Any]) -> int:
        """How many hard links the file a read_file, write_file or edit_file call would touch
        has (1 for any other call, or a file not there yet): another name of it may be outside
        the workspace, where no path check sees. A write or an edit replaces it with a copy
        that read_file reads unasked, and an edit's answers (found, not found) tell its text."""
        if name not in FILE_TOOLS:
            return 1
        target = self.path(arguments["path"], writing=name != "read_file")
        with contextlib.suppress(OSError):
            status = target.stat()
            if stat.S_ISREG(status.st_mode):
                return status.st_nlink
        return 1

    def _summary(self, name: str, arguments: dict[str, Any], links: int = 1) -> str:
        """Exactly what the call will run or write, for the user to approve."""
        if links > 1:
            note = (
                f"{arguments['path']}, a file with {links} hard links: its other names "
                "may be outside the workspace"
            )
            if name == "read_file":
                return f"read {note}"
            # The first line says it, then what the call writes, as for any write.
            consequence = {
                "edit_file": "the edit leaves a copy of it here that read_file reads unasked",
                "write_file": "the write puts a new file here; the other names keep the old one",
            }[name]
            first = f"{name.split('_')[0]} {note}; {consequence}"
            return f"{first}\n{self._summary(name, arguments)}"
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

    def run(self, name: str, arguments: Any, *, asked: bool = False) -> ToolResult:
        """Run one tool call; every failure becomes an error result for the model.
        (Approval is the caller's: see memstore.agent.approval; `asked`: the user approved
        a call that its ToolRequest said `asks`.)

        Only KeyboardInterrupt and SystemExit (not Exceptions) propagate."""
        try:
            self._check(name, arguments)
            if name in FILE_TOOLS and asked:
                linked: dict[str, Callable[..., str]] = {
                    "read_file": self._read,
                    "write_file": self._write,
                    "edit_file": self._edit,
                }
                text = linked[name](**arguments, links_allowed=True)
            else:
                text = self._handlers[name](**arguments)
            # What a file or a command says that a person would not see (tag characters a
            # model reads as text) is shown to the model as \u{…}, as memstore shows it.
            return ToolResult(show_hidden(valid_text(text)))
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
        return run_bash(self.root, command, timeout)

    def read_file(self, path: str, limit: Any = None, offset: Any = None) -> str:
        return self._read(path, limit, offset, links_allowed=False)

    def _read(
        self, path: str, limit: Any = None, offset: Any = None, *, links_allowed: bool
    ) -> str:
        count = None if limit is None else whole_number(limit, "limit", minimum=1)
        # offset 0 is taken as 1, as the model sometimes counts from 0.
        first = 1 if offset is None else max(whole_number(offset, "offset", minimum=0), 1)
        target = self.path(path)
        return read_numbered_lines(target, path, count=count, first=first, links=links_allowed)

    def write_file(self, path: str, content: str) -> str:
        return self._write(path, content, links_allowed=False)

    def _write(self, path: str, content: str, *, links_allowed: bool) -> str:
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
        write_atomically(target, data, path, links=links_allowed)
        return f"wrote {len(data):,} bytes to {target.relative_to(self.root)}"

    def edit_file(self, path: str, old_text: str, new_text: str, replace_all: Any = False) -> str:
        return self._edit(path, old_text, new_text, replace_all, links_allowed=False)

    def _edit(
        self,
        path: str,
        old_text: str,
        new_text: str,
        replace_all: Any = False,
        *,
        links_allowed: bool,
    ) -> str:
        target = self.path(path, writing=True)
        return edit_text(target, path, old_text, new_text, replace_all, links=links_allowed)

    def glob(self, pattern: str) -> str:
        matcher, folders = parse_glob(pattern)
        start = self.path(folders) if folders else self.root
        return matching_files(self.root, start, matcher)
