"""MEMORY.md as export plans it: memstore's index written when the file is memstore's (what
the last export wrote, or exactly the index of some state of the database), a hand-written
one left with a note, or another tool's index kept in its own form (IndexUpdate).
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import Row, select

from memstore.files.export_folder import read_folder_file
from memstore.files.export_plan import ExportPlan, same_stat
from memstore.files.export_state import sha256
from memstore.files.format import (
    INDEX_FILE_NAME,
    INDEX_MAX_BYTES,
    TYPE_ORDER,
    index_line,
    omitted_note,
)
from memstore.storage.models import MemorySummary, memory_event_table
from memstore.storage.store import MemoryStore


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


def plan_index(
    store: MemoryStore,
    plan: ExportPlan,
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
    if record is not None and same_stat(record, stat) and record.sha256 == new_hash:
        plan.unchanged += 1
        return
    disk = read_folder_file(directory / INDEX_FILE_NAME)
    if sha256(disk) == new_hash:
        plan.adopted[INDEX_FILE_NAME] = disk
    elif (record is not None and sha256(disk) == record.sha256) or _says_an_index_state(
        store, disk
    ):
        plan.writes[INDEX_FILE_NAME] = index
    elif force:  # someone's index replaced: theirs is kept in a copy
        plan.writes[INDEX_FILE_NAME] = index
        plan.overwritten[INDEX_FILE_NAME] = disk
    else:
        plan.notes.append(
            f"{INDEX_FILE_NAME} was not written by memstore: left as it is "
            "('memctl export --force' replaces it with memstore's index)"
        )


def plan_given_index(
    plan: ExportPlan,
    directory: Path,
    index: IndexUpdate,
    targets: dict[str, Row[Any]],
    on_disk: dict[str, os.stat_result],
) -> None:
    disk = read_folder_file(directory / INDEX_FILE_NAME) if INDEX_FILE_NAME in on_disk else None
    files = {name: MemorySummary(m.name, m.type, m.description) for name, m in targets.items()}
    created = [name for name in plan.writes if name not in on_disk]
    content = index(disk, files, created, [n for n in plan.removals if n in on_disk])
    if content is not None and content != disk:
        plan.writes[INDEX_FILE_NAME] = content


# The link is `<name>.md`, or the file a memory imported from another tool is kept in.
_INDEX_LINE = re.compile(
    r"- \[(?P<name>[a-z0-9-]+)\]\((?:<[^<>\n]+\.md>|[^\s()<>]+\.md)\) — [^\n]*\n"
)
# Such a line where a line starts, the last one with or without its line break.
_WHOLE_INDEX_LINE = re.compile(
    r"^- \[(?P<name>[a-z0-9-]+)\]\((?:<[^<>\n]+\.md>|[^\s()<>]+\.md)\) — [^\n]*(?:\n|\Z)",
    re.M,
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


def without_index_lines(content: bytes, names: Collection[str]) -> bytes:
    """MEMORY.md without the lines, in memstore's form, that link a memory of `names`
    (whoever wrote the rest of it, which is kept byte for byte)."""
    wanted = set(names)
    if not wanted:
        return content
    text = content.decode("utf-8", "surrogateescape")
    kept = _WHOLE_INDEX_LINE.sub(lambda line: "" if line["name"] in wanted else line[0], text)
    return kept.encode("utf-8", "surrogateescape")
