"""The arguments `memctl mcp`'s tools take: each one's cap, published in the tool's input
schema and checked before any work, and the types of a memory's fields as a client gives
them, each with the description a model reads."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from memstore.limits import DESCRIPTION_MAX_CHARS
from memstore.storage.models import MemoryType
from memstore.storage.validation import BODY_MAX_BYTES, NAME_MAX_LENGTH

# Caps on the arguments a client sends, checked before any work. A field of a memory is
# capped as the store caps it; the texts that are only searched are capped at what helps.
RECALL_TEXT_MAX_CHARS = 10_000
QUERY_MAX_CHARS = 1_000
RECALL_MAX_MEMORIES = 20
SEARCH_MAX_HITS = 50
HISTORY_MAX_ENTRIES = 200
# A listing as long as a client's context can take; by default the index's length.
LIST_MAX_MEMORIES = 1_000

Name = Annotated[
    str,
    Field(
        description="A memory's name: kebab-case (a-z, 0-9, hyphens), as list, search and "
        "recall show it.",
        max_length=NAME_MAX_LENGTH,
    ),
]
Description = Annotated[
    str,
    Field(
        description="One line saying what the memory is about; it is what the MEMORY.md index "
        "shows, so make it specific.",
        max_length=DESCRIPTION_MAX_CHARS,
    ),
]
Body = Annotated[
    str,
    Field(
        description="What to remember, in Markdown: the fact, preference or guidance, and why.",
        max_length=BODY_MAX_BYTES,
    ),
]
Kind = Annotated[
    MemoryType,
    Field(
        description="user (the person's preferences and profile), feedback (how they want "
        "you to work), project (facts about this project), reference (pointers to outside "
        "material)."
    ),
]
