"""The rules a memory's fields obey, and turning free text into a valid name.

A name becomes a filename (`<name>.md`), so the rule is strict: kebab-case ASCII, which is
also safe on Windows (no reserved characters) once the reserved device names are refused.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from enum import StrEnum
from typing import Any

from memstore.errors import InvalidMemory, SecretRefused
from memstore.limits import DESCRIPTION_MAX_CHARS

NAME_PATTERN = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
NAME_MAX_LENGTH = 64
BODY_MAX_BYTES = 100_000
# A reason recorded with a change is a line, as a consolidation's prompt asks the model for.
REASON_MAX_CHARS = 200
# What a purge writes over a run's command or an event's reason (storage/chain.py's marker).
PURGED_MARKER = re.compile(r"\[purged sha256:[0-9a-f]{64}\]")
# Device names that Windows refuses as file stems, whatever the extension.
# "memory" would be MEMORY.md, the index, on case-insensitive file systems.
RESERVED_NAMES = frozenset(
    ["memory", "con", "prn", "aux", "nul"]
    + [f"com{i}" for i in range(10)]
    + [f"lpt{i}" for i in range(10)]
)


class MemoryType(StrEnum):
    USER = "user"
    FEEDBACK = "feedback"
    PROJECT = "project"
    REFERENCE = "reference"


TYPES = tuple(t.value for t in MemoryType)


def _check_encodable(field: str, text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidMemory(
            field, "must be valid Unicode text (it has undecodable bytes)"
        ) from None


def check_name(name: str) -> str:
    if not name:
        raise InvalidMemory("name", "must not be empty")
    if len(name) > NAME_MAX_LENGTH:
        raise InvalidMemory(
            "name", f"must be at most {NAME_MAX_LENGTH} characters, got {len(name)}"
        )
    if not NAME_PATTERN.fullmatch(name):
        raise InvalidMemory("name", f"must be kebab-case ([a-z0-9]+(-[a-z0-9]+)*), got {name!r}")
    if name in RESERVED_NAMES:
        raise InvalidMemory("name", f"{name!r} is a reserved device name on Windows")
    return name


def check_type(type_: str) -> str:
    if type_ not in TYPES:
        raise InvalidMemory("type", f"must be one of {', '.join(TYPES)}, got {type_!r}")
    return type_


def normalize_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def check_description(description: str) -> str:
    description = description.strip()
    _check_encodable("description", description)
    if not description:
        raise InvalidMemory("description", "must not be empty")
    if len(description.splitlines()) > 1:
        raise InvalidMemory("description", "must be a single line")
    if "\x00" in description:
        raise InvalidMemory("description", "must not contain NUL characters")
    # A description is a line of MEMORY.md, which people `cat` and `git diff`: a terminal
    # escape there would retitle the terminal, or worse.
    control = next((c for c in description if unicodedata.category(c) == "Cc" and c != "\t"), None)
    if control is not None:
        raise InvalidMemory("description", f"must not contain control characters, got {control!r}")
    if len(description) > DESCRIPTION_MAX_CHARS:
        raise InvalidMemory(
            "description",
            f"must be at most {DESCRIPTION_MAX_CHARS} characters, got {len(description)}",
        )
    return description


def normalize_body(body: str) -> str:
    """The stored form of a body: LF line ends, no surrounding blank space.

    It is what reading the canonical file back yields, so export → import → export is stable.
    """
    return normalize_newlines(body).strip()


def check_body(body: str) -> str:
    body = normalize_body(body)
    _check_encodable("body", body)
    if not body:
        raise InvalidMemory("body", "must not be empty")
    if "\x00" in body:
        raise InvalidMemory("body", "must not contain NUL characters")
    size = len(body.encode("utf-8"))
    if size > BODY_MAX_BYTES:
        raise InvalidMemory("body", f"must be at most {BODY_MAX_BYTES} bytes, got {size}")
    return body


def check_new_memory(
    name: str,
    type_: str,
    description: str,
    body: str,
    extra: dict[str, Any] | None = None,
    *,
    allow_secrets: bool = False,
) -> None:
    """Refuse, as MemoryStore.create does before it writes, a new memory whose fields break
    these rules (InvalidMemory) or that holds what looks like a secret (SecretRefused, unless
    `allow_secrets`), with no store: memctl checks before it creates a database, so that a
    memory refused leaves none behind. The store checks again, and what only it can tell
    (a name already taken)."""
    name = check_name(name)
    check_type(type_)
    description = check_description(description)
    body = check_body(body)
    if not allow_secrets:
        refuse_secrets(name, description, body, dict(extra or {}))


def refuse_secrets(
    name: str,
    description: str,
    body: str,
    extra: dict[str, Any],
    others: dict[str, Any] | None = None,
) -> None:
    """SecretRefused when a memory's text holds what looks like a secret (`others`: the
    values of its other fields searched, storage/fields.py's SCANNED_OTHERS)."""
    # It compiles its patterns: imported only on writes.
    from memstore.storage.secrets import memory_secret, refusal

    found = memory_secret(name, description, body, extra, others)
    if found is not None:
        raise refusal(found, name)


def check_reason(reason: str | None) -> str | None:
    """The stored form of why a change was made (a consolidation's drop: the model's
    words): one line of at most REASON_MAX_CHARS, no control characters; None for none."""
    if reason is None or not reason.strip():
        return None
    reason = reason.strip()
    _check_encodable("reason", reason)
    if len(reason.splitlines()) > 1:
        raise InvalidMemory("reason", "must be a single line")
    control = next((c for c in reason if unicodedata.category(c) == "Cc"), None)
    if control is not None:
        raise InvalidMemory("reason", f"must not contain control characters, got {control!r}")
    if len(reason) > REASON_MAX_CHARS:
        raise InvalidMemory(
            "reason", f"must be at most {REASON_MAX_CHARS} characters, got {len(reason)}"
        )
    if PURGED_MARKER.fullmatch(reason):
        # The chain reads that text as a purge's marker, for the hash it holds.
        raise InvalidMemory("reason", "must not be a purge's marker")
    return reason


def refuse_secret_reason(reason: str, name: str) -> None:
    """SecretRefused when a reason holds what looks like a secret, as a memory's text would:
    it is kept in history and shown wherever history is."""
    from memstore.storage.secrets import find_secrets, normalise

    found = find_secrets(normalise(reason))
    if found:
        raise SecretRefused("reason", found[0].kind, name)


def slugify(text: str, max_length: int = NAME_MAX_LENGTH) -> str:
    """Free text → a kebab-case name, or '' when nothing ASCII is left (e.g. Chinese)."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    if len(slug) > max_length:
        cut = slug[:max_length]
        # Prefer cutting at a word boundary when one is reasonably close.
        boundary = cut.rfind("-")
        slug = cut[:boundary] if boundary >= max_length // 2 else cut.rstrip("-")
    if slug in RESERVED_NAMES:
        slug = f"{slug}-memory"
    return slug


def name_from_text(*candidates: str) -> str:
    """The first candidate that slugifies to something, else a hash of the candidates.

    Callers pass only text that identifies the memory (a file name, a given name), never its
    description or body: editing those must not change the derived name.
    """
    for candidate in candidates:
        slug = slugify(candidate)
        if slug:
            return slug
    digest = hashlib.sha256("\n".join(candidates).encode("utf-8", "surrogatepass")).hexdigest()
    return f"memory-{digest[:10]}"


def with_suffix(name: str, number: int) -> str:
    """`name-N`, cut so that it stays a valid name of at most NAME_MAX_LENGTH characters."""
    suffix = f"-{number}"
    return name[: NAME_MAX_LENGTH - len(suffix)].rstrip("-") + suffix
