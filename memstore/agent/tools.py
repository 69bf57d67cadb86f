"""The agent's tools, confined to one workspace folder.

Every path the model gives is resolved against the workspace, symlinks included, and refused
when it leaves it: `..`, absolute paths elsewhere, and links pointing out all get a clear tool
result rather than an exception. Outputs are capped so that one tool call cannot flood the
context (the compression pipeline handles what is still large).
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BASH_TIMEOUT_S = 120
OUTPUT_MAX_CHARS = 50_000
READ_MAX_BYTES = 2_000_000
GLOB_MAX_RESULTS = 500


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
            f"Commands time out after {BASH_TIMEOUT_S} s unless timeout is given."
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

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._handlers: dict[str, Callable[..., str]] = {
            "bash": self.bash,
            "read_file": self.read_file,
            "write_file": self.write_file,
            "edit_file": self.edit_file,
            "glob": self.glob,
        }

    def run(self, name: str, arguments: Any) -> ToolResult:
        """Run one tool call; every failure becomes an error result for the model."""
        handler = self._handlers.get(name)
        if handler is None:
            return ToolResult(f"unknown tool {name!r}", is_error=True)
        if not isinstance(arguments, dict):
            return ToolResult("the tool input must be an object", is_error=True)
        try:
            return ToolResult(handler(**arguments))
        except ToolRefused as refusal:
            return ToolResult(str(refusal), is_error=True)
        except TypeError as error:  # missing or unexpected arguments
            return ToolResult(f"bad arguments for {name}: {error}", is_error=True)
        except OSError as error:
            return ToolResult(f"{name} failed: {error.strerror or error}", is_error=True)

    def path(self, given: Any) -> Path:
        """The workspace path for `given`, refusing anything that resolves outside it."""
        if not isinstance(given, str) or not given.strip():
            raise ToolRefused("path must be a non-empty string")
        if "\x00" in given:
            raise ToolRefused("path must not contain NUL")
        candidate = Path(given).expanduser()
        resolved = (candidate if candidate.is_absolute() else self.root / candidate).resolve()
        if resolved != self.root and not resolved.is_relative_to(self.root):
            raise ToolRefused(
                f"refused: {given!r} is outside the workspace {self.root}; "
                "only paths inside it can be read or written"
            )
        return resolved

    # -- the tools --------------------------------------------------------------------------

    def bash(self, command: str, timeout: int | None = None) -> str:
        if not isinstance(command, str) or not command.strip():
            raise ToolRefused("command must be a non-empty string")
        limit = min(int(timeout or BASH_TIMEOUT_S), 600)
        process = subprocess.Popen(
            ["bash", "-c", command],
            cwd=self.root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # so a timeout kills the whole process group
        )
        try:
            output, _ = process.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            text = cap(output.decode("utf-8", "replace"))
            return f"{text}\n[timed out after {limit} s; the command was killed]"
        text = cap(output.decode("utf-8", "replace"))
        if process.returncode:
            text += f"\n[exit code {process.returncode}]"
        return text or "(no output)"

    def read_file(self, path: str, limit: int | None = None, offset: int | None = None) -> str:
        target = self.path(path)
        if not target.is_file():
            raise ToolRefused(f"{path}: no such file")
        if target.stat().st_size > READ_MAX_BYTES and not limit:
            raise ToolRefused(
                f"{path} is {target.stat().st_size:,} bytes; read it with a line limit"
            )
        lines = target.read_text(encoding="utf-8", errors="replace").splitlines()
        start = max(int(offset or 1), 1) - 1
        end = start + int(limit) if limit else len(lines)
        shown = [f"{number:6}\t{line}" for number, line in enumerate(lines[start:end], start + 1)]
        text = "\n".join(shown)
        if end < len(lines):
            text += f"\n[{len(lines) - end} more lines; read on with offset={end + 1}]"
        return cap(text) or "(empty file)"

    def write_file(self, path: str, content: str) -> str:
        if not isinstance(content, str):
            raise ToolRefused("content must be a string")
        target = self.path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"wrote {len(content.encode()):,} bytes to {target.relative_to(self.root)}"

    def edit_file(self, path: str, old_text: str, new_text: str, replace_all: bool = False) -> str:
        target = self.path(path)
        if not target.is_file():
            raise ToolRefused(f"{path}: no such file")
        if not isinstance(old_text, str) or not old_text or not isinstance(new_text, str):
            raise ToolRefused("old_text must be non-empty text and new_text text")
        text = target.read_text(encoding="utf-8")
        matches = text.count(old_text)
        if matches == 0:
            raise ToolRefused(f"old_text not found in {path} (0 matches); nothing changed")
        if matches > 1 and not replace_all:
            raise ToolRefused(
                f"old_text occurs {matches} times in {path}; give more context to make it "
                "unique, or set replace_all; nothing changed"
            )
        target.write_text(text.replace(old_text, new_text), encoding="utf-8")
        return f"replaced {matches} match{'es' if matches > 1 else ''} in {path}"

    def glob(self, pattern: str) -> str:
        if not isinstance(pattern, str) or not pattern.strip():
            raise ToolRefused("pattern must be a non-empty string")
        if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
            raise ToolRefused(f"refused: {pattern!r} reaches outside the workspace")
        found = []
        for match in sorted(self.root.glob(pattern)):
            if match.resolve().is_relative_to(self.root) and match.is_file():
                found.append(str(match.relative_to(self.root)))
                if len(found) == GLOB_MAX_RESULTS:
                    break
        if not found:
            return "no files match"
        more = " (first matches only)" if len(found) == GLOB_MAX_RESULTS else ""
        return "\n".join(found) + more


def cap(text: str, limit: int = OUTPUT_MAX_CHARS) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[… {len(text) - limit:,} characters cut …]\n{text[-half:]}"
