"""Memories proposed by the model: untrusted input, checked field by field before any write.

Extraction and consolidation both take their memories from a model's JSON. Nothing in it is
trusted: the name becomes a filename, so it is validated or made kebab-case; the type must be
one of the four; fields must be non-empty strings within caps; and no field may hold a secret.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memstore.errors import InvalidMemory
from memstore.limits import PROPOSED_DESCRIPTION_MAX_CHARS
from memstore.storage.secrets import memory_secret, refusal
from memstore.storage.validation import (
    TYPES,
    check_body,
    check_description,
    check_name,
    name_from_text,
)


@dataclass(frozen=True)
class ProposedMemory:
    name: str
    type: str
    description: str
    body: str


def proposed_memory(raw: Any, *, body_max_bytes: int) -> ProposedMemory:
    """One answer item as a memory, or InvalidMemory saying what is wrong with it."""
    if not isinstance(raw, dict):
        raise InvalidMemory("item", f"must be an object, got {type(raw).__name__}")
    fields: dict[str, str] = {}
    for key in ("name", "type", "description", "body"):
        value = raw.get(key)
        if not isinstance(value, str) or not value.strip():
            raise InvalidMemory(key, "must be a non-empty string")
        fields[key] = value
    kind = fields["type"].strip().lower()
    if kind not in TYPES:
        raise InvalidMemory("type", f"must be one of {', '.join(TYPES)}, got {fields['type']!r}")
    if len(fields["description"]) > PROPOSED_DESCRIPTION_MAX_CHARS:
        raise InvalidMemory(
            "description", f"must be at most {PROPOSED_DESCRIPTION_MAX_CHARS} characters"
        )
    if len(fields["body"].encode("utf-8", "surrogatepass")) > body_max_bytes:
        raise InvalidMemory("body", f"must be at most {body_max_bytes:,} bytes")
    proposed = ProposedMemory(
        name=safe_name(fields["name"]),
        type=kind,
        description=check_description(fields["description"]),
        body=check_body(fields["body"]),
    )
    # The same check as every write, made here so that one bad item is dropped alone; the
    # name is checked as the model gave it (a key pasted as a name), and as it is kept.
    for name in (fields["name"], proposed.name):
        found = memory_secret(name, proposed.description, proposed.body)
        if found is not None:
            raise refusal(found)
    return proposed


def safe_name(proposed: str) -> str:
    """The model's name if it is valid, else a kebab-case name made from it."""
    try:
        return check_name(proposed)
    except InvalidMemory:
        return name_from_text(proposed)
