"""A memory a person asks for in their own words (memctl chat's `/remember TEXT`).

"project: …" (a memory type, then a colon) sets its type; user otherwise. Its name comes from
its first words (made free), its description is its first line, its body the whole text.
"""

from __future__ import annotations

from memstore.errors import InvalidMemory, SecretRefused
from memstore.limits import INDEX_DESCRIPTION_MAX_CHARS
from memstore.storage.models import MemoryType
from memstore.storage.store import MemoryStore
from memstore.storage.validation import name_from_text

# The name is made of this many first words.
NAME_WORDS = 6


def split_type(text: str) -> tuple[MemoryType, str]:
    """The type a text starts with ("project: …") and the rest; user and the whole text
    when it starts with none."""
    head, colon, rest = text.partition(":")
    if colon and head.strip().lower() in {kind.value for kind in MemoryType}:
        return MemoryType(head.strip().lower()), rest.strip()
    return MemoryType.USER, text


def remember(
    store: MemoryStore, text: str, kind: MemoryType = MemoryType.USER, *, actor: str = "chat"
) -> str:
    """Save TEXT as a new memory of type `kind`; its name. InvalidMemory when the text holds
    what looks like a secret (the store refuses it), or is empty."""
    if not text.strip():
        raise InvalidMemory("text", "is empty")
    first_line = text.splitlines()[0]
    base = name_from_text(" ".join(first_line.split()[:NAME_WORDS]))
    try:
        with store.transaction(actor=actor) as tx:
            name = tx.free_name(base)
            tx.create(name, kind, first_line[:INDEX_DESCRIPTION_MAX_CHARS], text)
    except SecretRefused as error:
        raise InvalidMemory(
            "text", f"looks like it holds a secret ({error.kind}); not saved"
        ) from None
    return name
