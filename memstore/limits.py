"""Caps on a memory's description. They differ on purpose: each says who writes the text
and where it is shown."""

# A description as stored and exported: whatever a person or a file gives, within reason.
DESCRIPTION_MAX_CHARS = 1_000
# A description the model proposes (extraction, consolidation): one line, as it was asked.
PROPOSED_DESCRIPTION_MAX_CHARS = 200
# A description as its line of MEMORY.md shows it (longer ones end in "…"): the index is
# read at the start of every session, so each line stays short.
INDEX_DESCRIPTION_MAX_CHARS = 150
