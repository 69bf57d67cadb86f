"""The Anthropic API's client-side memory tool (`memory_20250818`), backed by memstore.

An SDK app passes `MemstoreMemoryTool` to `client.beta.messages.tool_runner(tools=[...])`;
Claude then views and edits a `/memories` directory whose files are the store's memories:
`/memories/<name>.md` is the memory `<name>` in its canonical file form (files/format.py),
and a view of `/memories` lists the store. A path only names a memory, and no file is
ever opened by the path the model gives, so no path can reach outside the store.
`MemstoreAsyncMemoryTool` is the same tool for an `AsyncAnthropic` client's runner.

Each command that changes something is one run of the door's actor, `memory_tool`, its
command saying what it did; `.memory/` is written again after it. A refused command (a
path outside /memories, a name the store's rules reject, a text over the cap, a secret,
an edit that leaves no valid memory file) raises ToolError, which the SDK's tool runner
returns to the model as an error result, and changes nothing.

- create: text with frontmatter is read as the importer reads a file named `<name>.md`;
  text without is read as if its frontmatter were empty: the type from a `user-`,
  `feedback-`, `project-` or `reference-` name prefix, else DEFAULT_TYPE; the description
  from the text's first line; the body the whole text.
- str_replace, insert: the edit is made on the canonical text, which is read back with
  memctl edit's parser (name, description and type must stay in the frontmatter; the name
  stays the path's: renaming is `rename`).
- delete: a soft delete (`memctl restore NAME` brings it back); rename: the name changes,
  history keeps the old one.

What a view shows (numbered lines, the listing) is memory_tool_views'; it imports no SDK.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError
from anthropic.types.beta import (
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)
from anyio import to_thread

from memstore.errors import (
    InvalidMemory,
    MemoryAltered,
    MemoryExists,
    MemstoreError,
    NoDatabase,
    SecretRefused,
    UnreadableFile,
)
from memstore.files.format import memory_fields, render_memory_file
from memstore.files.import_file import read_memory_bytes
from memstore.integrations.door import Door, LazyDoor
from memstore.integrations.memory_tool_views import ROOT, lines_of, listing, numbered
from memstore.settings import Settings
from memstore.storage.models import MemoryRecord, MemoryType
from memstore.storage.transaction import WriteTransaction
from memstore.storage.validation import BODY_MAX_BYTES, check_name
from memstore.text import shorten

ACTOR = "memory_tool"
# What the model saves without saying a type: mostly what it learned about the work.
DEFAULT_TYPE = MemoryType.PROJECT.value
# Any text a command gives, and any file an edit leaves: the body's cap, and room for a
# frontmatter. Checked before anything is parsed.
FILE_MAX_BYTES = BODY_MAX_BYTES + 10_000
# Paths and strings echoed in an error are cut to this many characters.
ECHO_MAX_CHARS = 120


class MemstoreMemoryTool(BetaAbstractMemoryTool):
    """The memory tool's handler over a memstore Door (see the module's docstring)."""

    def __init__(self, door: Door | LazyDoor, *, owns_door: bool = False) -> None:
        """Over `door`; a LazyDoor (as `open` gives it) is opened when first needed, and
        closed with the tool."""
        super().__init__()
        self._doors = door if isinstance(door, LazyDoor) else LazyDoor(door.actor, door=door)
        self._owns_door = owns_door or isinstance(door, LazyDoor)

    @classmethod
    def open(
        cls, *, db: Path | None = None, start: Path | None = None, settings: Settings | None = None
    ) -> MemstoreMemoryTool:
        """The tool over the store memctl would use from `start` (the current folder), or
        the database `db`; close it (or use it in a `with`) when done. The database is
        opened when first needed, and created by the first change: a view, or a command
        refused, leaves no `.memory/` where nothing was remembered."""
        return cls(LazyDoor(ACTOR, db=db, start=start, settings=settings))

    @property
    def door(self) -> Door:
        """The door, opened now (and its database created) if it was not yet."""
        return self._doors.open(create=True)

    def close(self) -> None:
        if self._owns_door:
            self._doors.close()

    def __enter__(self) -> MemstoreMemoryTool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- the commands ------------------------------------------------------------------------

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        path = _text(command, "path")
        name = memory_name(path)
        with _refusals():
            store = self._doors.existing_store()
            if name is None:
                return listing(path, store.unaltered_all() if store is not None else [])
            memory = store.find(name) if store is not None else None
            # A memory changed outside memstore is not shown (a line on stderr names it).
            if memory is not None and store is not None and not store.unaltered([memory]):
                raise MemoryAltered(memory.name)
        if memory is None:
            raise _no_such_file(path)
        lines = render_memory_file(memory).split("\n")[:-1]  # the file ends with a newline
        first, last = _view_range(getattr(command, "view_range", None), len(lines))
        shown = numbered(lines, first, last)
        return f"Here's the content of {path} with line numbers:\n{shown}"

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        path = _text(command, "path")
        name = _file_name(path)
        text = _capped(_text(command, "file_text"), "file_text")
        with self._change(f"{ACTOR} create {path}", path, create=True) as tx:
            if tx.find(name) is not None:
                raise ToolError(f"File {path} already exists")
            framed = _has_frontmatter(text)
            # Text without frontmatter is read as a file whose frontmatter is empty.
            source = text if framed else f"---\n---\n{text}"
            item = read_memory_bytes(source.encode(), f"{name}.md", DEFAULT_TYPE)
            if item.name != name:
                raise ToolError(
                    f"The frontmatter names the memory {_echo(item.name)!r} but the path is "
                    f"{path}: the path names it. Nothing was changed."
                )
            memory = tx.create(**item.values())
        done = f"File created successfully at: {path}"
        if framed:
            return done
        # The model's later insert_line counts from the top of the file it now is.
        start = render_memory_file(memory).count("\n") - memory.body.count("\n")
        return (
            f"{done}. It is stored with a frontmatter (name, description, type) above the "
            f"text, which starts at line {start}."
        )

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        path = _text(command, "path")
        name = _file_name(path)
        old = _capped(_text(command, "old_str"), "old_str")
        new = _capped(_text(command, "new_str"), "new_str")
        if not old:
            raise ToolError("No replacement was performed: old_str is empty.")
        changed_line = 0

        def replace(content: str) -> str:
            nonlocal changed_line
            lines = lines_of(content, old)
            if not lines:
                raise ToolError(
                    f"No replacement was performed, old_str `{_echo(old)}` did not appear "
                    f"verbatim in {path}."
                )
            if len(lines) > 1:
                raise ToolError(
                    f"No replacement was performed. Multiple occurrences of old_str "
                    f"`{_echo(old)}` in lines: {', '.join(map(str, lines))}. "
                    "Please ensure it is unique"
                )
            changed_line = lines[0]
            return content.replace(old, new)

        after = self._edit(path, name, replace, f"{ACTOR} str_replace {path}")
        lines = after.split("\n")[:-1]
        first, last = max(1, changed_line - 2), min(len(lines), changed_line + 2 + new.count("\n"))
        return (
            "The memory file has been edited. Here is the snippet showing the change "
            f"(with line numbers):\n{numbered(lines, first, last)}"
        )

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        path = _text(command, "path")
        name = _file_name(path)
        text = _capped(_text(command, "insert_text"), "insert_text")
        at = getattr(command, "insert_line", None)
        if not isinstance(at, int) or isinstance(at, bool):
            raise ToolError("Invalid `insert_line` parameter: it must be a line number.")

        def insert(content: str) -> str:
            lines = content.split("\n")[:-1]
            if not 0 <= at <= len(lines):
                raise ToolError(
                    f"Invalid `insert_line` parameter: {at}. "
                    f"It should be within the range [0, {len(lines)}]."
                )
            lines.insert(at, text.rstrip("\n"))
            return "\n".join(lines) + "\n"

        self._edit(path, name, insert, f"{ACTOR} insert {path} at line {at}")
        return f"The file {path} has been edited."

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        path = _text(command, "path")
        if memory_name(path) is None:
            raise ToolError(f"Cannot delete the {ROOT} directory itself")
        name = _file_name(path)
        with self._change(f"{ACTOR} delete {path}", path) as tx:
            tx.delete(self._existing(tx, name, path))
        return f"Successfully deleted {path}"

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        old_path, new_path = _text(command, "old_path"), _text(command, "new_path")
        if memory_name(old_path) is None:
            raise ToolError(f"Cannot rename the {ROOT} directory itself")
        old_name, new_name = _file_name(old_path), _file_name(new_path)
        with self._change(f"{ACTOR} rename {old_path} {new_path}", old_path) as tx:
            memory = self._existing(tx, old_name, old_path)
            if new_name != old_name and tx.find(new_name) is not None:
                raise ToolError(f"The destination {new_path} already exists")
            tx.update(memory, name=new_name)
        return f"Successfully renamed {old_path} to {new_path}"

    # -- the store ---------------------------------------------------------------------------

    @contextmanager
    def _change(
        self, description: str, path: str, *, create: bool = False
    ) -> Iterator[WriteTransaction]:
        """One run of the door, with the store's refusals said to the model. Only `create`
        makes the database: before it exists, the memory at `path` does not."""
        try:
            door = self._doors.open(create=create)
        except NoDatabase:
            raise _no_such_file(path) from None
        with _refusals(), door.change(description) as tx:
            yield tx

    def _existing(self, tx: WriteTransaction, name: str, path: str) -> MemoryRecord:
        memory = tx.find(name)
        if memory is None:
            raise _no_such_file(path)
        return memory

    def _edit(self, path: str, name: str, edit: Callable[[str], str], description: str) -> str:
        """Apply `edit` to the memory's canonical text and store what the edited text says;
        the memory's canonical text after it."""
        with self._change(description, path) as tx:
            memory = self._existing(tx, name, path)
            after = _capped(edit(render_memory_file(memory)), "the edited file")
            try:
                fields = memory_fields(after)
            except (UnreadableFile, InvalidMemory) as error:
                raise ToolError(
                    f"Refused: the edited {path} would not be a memory file ({error}). "
                    "Nothing was changed."
                ) from None
            if fields["name"] != name:
                raise ToolError(
                    f"The edit changes the name in the frontmatter to {_echo(fields['name'])!r}; "
                    f"use the rename command to rename {path}. Nothing was changed."
                )
            updated = tx.update(memory, **fields)
            return render_memory_file(updated)


class MemstoreAsyncMemoryTool(BetaAsyncAbstractMemoryTool):
    """MemstoreMemoryTool for the async tool runner: each command runs on a worker thread
    (SQLite blocks), one at a time, as the runner awaits it."""

    def __init__(self, tool: MemstoreMemoryTool) -> None:
        super().__init__()
        self.tool = tool

    @classmethod
    def open(
        cls, *, db: Path | None = None, start: Path | None = None, settings: Settings | None = None
    ) -> MemstoreAsyncMemoryTool:
        return cls(MemstoreMemoryTool.open(db=db, start=start, settings=settings))

    def close(self) -> None:
        self.tool.close()

    async def __aenter__(self) -> MemstoreAsyncMemoryTool:
        return self

    async def __aexit__(self, *_: object) -> None:
        self.close()

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return await to_thread.run_sync(self.tool.view, command)

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return await to_thread.run_sync(self.tool.create, command)

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return await to_thread.run_sync(self.tool.str_replace, command)

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return await to_thread.run_sync(self.tool.insert, command)

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return await to_thread.run_sync(self.tool.delete, command)

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return await to_thread.run_sync(self.tool.rename, command)


# -- paths -------------------------------------------------------------------------------------


def memory_name(path: str) -> str | None:
    """The memory a path names, or None for /memories itself; ToolError for anything else."""
    shown = _echo(path)
    if any(c in path for c in "\\%\x00") or any(part in (".", "..") for part in path.split("/")):
        raise ToolError(f"Path {shown} would escape {ROOT} directory")
    if path.rstrip("/") == ROOT:
        return None
    if not path.startswith(ROOT + "/"):
        raise ToolError(f"Path must start with {ROOT}, got: {shown}")
    file_name = path.removeprefix(ROOT + "/")
    if "/" in file_name:
        raise ToolError(
            f"Directories inside {ROOT} are not supported ({shown}): "
            f"each memory is one file, {ROOT}/<name>.md"
        )
    if not file_name.endswith(".md"):
        raise ToolError(f"Memory files are Markdown, {ROOT}/<name>.md: {shown} is not")
    try:
        return check_name(file_name.removesuffix(".md"))
    except InvalidMemory as error:
        raise ToolError(
            f"Invalid file name {_echo(file_name)!r}: the name before .md {error.rule} "
            f"(for example {ROOT}/user-preferences.md)"
        ) from None


def _file_name(path: str) -> str:
    name = memory_name(path)
    if name is None:
        raise ToolError(f"{ROOT} is a directory; name a file in it, {ROOT}/<name>.md")
    return name


# -- helpers -----------------------------------------------------------------------------------


@contextmanager
def _refusals() -> Iterator[None]:
    """The store's refusals as the one line the model reads; nothing was written."""
    try:
        yield
    except SecretRefused as error:
        # Never the secret itself, nor the name (a name made from text can hold one).
        raise ToolError(
            f"Refused: the memory's {error.field} {error.rule}; secrets are not saved in "
            "memory. Nothing was changed."
        ) from None
    except MemoryExists as error:
        raise ToolError(f"File {ROOT}/{error.name}.md already exists") from None
    except (MemstoreError, UnreadableFile) as error:
        raise ToolError(f"Refused: {error}. Nothing was changed.") from None


def _no_such_file(path: str) -> ToolError:
    return ToolError(f"The path {path} does not exist. Please provide a valid path.")


def _text(command: object, field: str) -> str:
    """A command's text field; the SDK passes the model's input through unchecked."""
    value = getattr(command, field, None)
    if not isinstance(value, str):
        raise ToolError(f"`{field}` must be text")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # JSON can carry an unpaired surrogate ("\\ud800")
        raise ToolError(f"`{field}` is not valid Unicode text") from None
    return value


def _capped(text: str, what: str) -> str:
    size = len(text.encode("utf-8"))
    if size > FILE_MAX_BYTES:
        raise ToolError(
            f"Refused: {what} is {size:,} bytes; a memory file is at most "
            f"{FILE_MAX_BYTES:,} bytes. Nothing was changed."
        )
    return text


def _echo(text: str) -> str:
    return shorten(text, ECHO_MAX_CHARS)


def _has_frontmatter(text: str) -> bool:
    # A line of "---" opens it; "-----BEGIN RSA PRIVATE KEY-----" does not (it is refused as
    # the secret it is, not as a file without frontmatter).
    return text.lstrip("\ufeff").split("\n", 1)[0].rstrip() == "---"


def _view_range(given: Any, count: int) -> tuple[int, int]:
    """The first and last line to show, from the model's view_range [start, end] (end -1:
    to the end)."""
    if given is None:
        return 1, count
    valid = (
        isinstance(given, list)
        and len(given) == 2
        and all(isinstance(n, int) and not isinstance(n, bool) for n in given)
    )
    if not valid:
        raise ToolError("Invalid `view_range`: it should be a list of two line numbers.")
    start, end = given
    if not 1 <= start <= max(count, 1):
        raise ToolError(
            f"Invalid `view_range`: {given}. Its first element `{start}` should be within "
            f"the range of lines of the file: [1, {count}]."
        )
    if end != -1 and end < start:
        raise ToolError(
            f"Invalid `view_range`: {given}. Its second element `{end}` should be -1 or at "
            f"least its first element `{start}`."
        )
    return start, count if end == -1 else min(end, count)
