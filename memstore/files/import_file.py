"""One file as import reads it: its bytes checked and read as a memory (ImportItem).

A file that is not quite canonical is normalised, each repair said as a note; one that cannot
be read as a memory is refused (UnreadableFile, InvalidMemory), and a Markdown file with no
frontmatter is no memory (NotAMemory). Only regular files are read, never through a link.
Whether a file says what a version of its memory said is judged here too: export and import
both ask it.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memstore.errors import InvalidMemory, UnreadableFile
from memstore.files.export_state import sha256
from memstore.files.format import MODELED_KEYS, parse_memory_text, synced_extra
from memstore.limits import DESCRIPTION_MAX_CHARS
from memstore.storage.fields import CONTENT, OPTIONAL, RULES
from memstore.storage.validation import (
    TYPES,
    check_body,
    check_description,
    check_name,
    check_type,
    name_from_text,
)
from memstore.text import shorten

MAX_FILE_BYTES = 1_048_576
ORIGINAL_NAME_KEY = "original_name"
_TYPE_PREFIX = re.compile(rf"^({'|'.join(TYPES)})(?:[_\-.\s]|$)", re.IGNORECASE)


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
    # (see import_folder's _make_names_unique).
    left_out: str | None = None
    # A file in a subfolder read instead of the top-level copy export wrote of its memory.
    over_export: bool = False
    # The optional fields (storage/fields.py) the file gives a value, checked.
    optional: dict[str, Any] = field(default_factory=dict)

    def values(self) -> dict[str, Any]:
        """The memory the file says, as a snapshot of its fields (storage/fields.py)."""
        given = {key: getattr(self, key) for key in CONTENT if key not in OPTIONAL}
        return {**given, **self.optional}


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
