"""The block of recalled memories injected into the user's message: each memory as its
file, with its age, escaped as data so that it can neither close the block nor open a tag.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Sequence
from datetime import UTC, datetime

from memstore.storage.records import MemoryRecord
from memstore.text import show_hidden

log = logging.getLogger(__name__)

MEMORY_MAX_BYTES = 4_096
BLOCK_MAX_BYTES = 16_384


def memories_block(
    memories: Sequence[MemoryRecord],
    now: datetime | None = None,
    *,
    compact: bool = False,
    memory_max_bytes: int = MEMORY_MAX_BYTES,
    block_max_bytes: int = BLOCK_MAX_BYTES,
) -> str:
    """The memories inside <relevant_memories>, as data: their text is escaped (as_data), so
    a memory can neither close the wrapper nor open a tag of its own. Each is shown as its
    file, or `compact`ly: a heading of name, type and description, then the body."""
    if not memories:
        return ""
    now = now or datetime.now(UTC)
    render = _compact if compact else _rendered
    parts: list[str] = []
    size = 0
    for shown, memory in enumerate(memories):
        part = _with_age(memory, now) + as_data(_cut(render(memory), memory_max_bytes))
        part_size = len(part.encode())
        if size + part_size > block_max_bytes:
            left = len(memories) - shown
            parts.append(
                f"[{left} more relevant memories left out: "
                f"this block is capped at {block_max_bytes:,} bytes]\n"
            )
            break
        parts.append(part)
        size += part_size
    return "<relevant_memories>\n" + "\n".join(parts) + "</relevant_memories>"


def _rendered(memory: MemoryRecord) -> str:
    """The memory as its file; a memory that cannot be rendered (frontmatter nested too
    deep, for one) is shown without its extra keys rather than breaking the turn."""
    from memstore.files.format import render_memory_file

    try:
        return render_memory_file(memory)
    except (RecursionError, ValueError, TypeError) as error:
        log.warning("memory %r shown without its extra keys: %s", memory.name, type(error).__name__)
        head = f"name: {memory.name}\ndescription: {memory.description}\ntype: {memory.type}"
        return f"---\n{head}\n---\n{memory.body}\n"


def _compact(memory: MemoryRecord) -> str:
    """The memory without its file's frontmatter (nor the YAML it costs to write one)."""
    return f"## {memory.name} ({memory.type}): {memory.description}\n{memory.body}\n"


# Everything a model could read as a tag's angle bracket, not only < and >, is escaped like
# them: recalled text cannot spell a tag, whatever case, spacing, width or zero-width
# characters it uses. Which characters: `tag_bracket`'s rule, written out here (it runs on
# every injected text; a test checks these strings against the rule over all of Unicode).
# French quotes are the price: «mot» reads &lt;mot&gt;.
_LOOKS_LIKE_OPEN = (
    "<\u00ab\u02c2\u02f1\u1438\u2039\u226a\u226e\u22d6\u22d8\u2329\u2343\u276c\u276e"
    "\u2770\u27e8\u27ea\u2991\u2993\u2996\u29c0\u29fc\u2a79\u2a7b\u2aa1\u2aa3\u2aa6"
    "\u2af7\u3008\u300a\ufe3d\ufe3f\ufe64\uff1c"
)
_LOOKS_LIKE_CLOSE = (
    ">\u00bb\u02c3\u02f2\u1433\u203a\u226b\u226f\u22d7\u22d9\u232a\u2344\u2369\u276d"
    "\u276f\u2771\u27e9\u27eb\u2992\u2994\u2995\u29c1\u29fd\u2a7a\u2a7c\u2aa2\u2aa7"
    "\u2af8\u3009\u300b\ufe3e\ufe40\ufe65\uff1e"
)
# Glyphs that are < and > though their names do not say so.
_HOMOGLYPHS = {"\u1438": "<", "\u1433": ">"}  # Canadian syllabics PA and PO
# With one of these beside it, a less-than or greater-than sign is a relation of prose or
# mathematics (≤, ≲, ⋜, ≶, ⥶), not a bracket.
_RELATION_WORDS = frozenset(
    {"EQUAL", "EQUALS", "EQUIVALENT", "SIMILAR", "APPROXIMATE", "ARROW", "OR", "NOR"}
)


def tag_bracket(char: str) -> str:
    """ "<" or ">" when a model could read `char` as a tag's angle bracket, "" otherwise:
    - its compatibility form holds < or > (fullwidth, small, ≮);
    - its name has LESS-THAN or GREATER-THAN once, decorated at most (circled, dotted,
      nested, "much", an APL quad, an arc bracket: ⧀ ⩹ ⪡ ⍃ ⦕), not beside a second
      relation (≤ ≥ ≲ ≶ stay: prose uses them, and they read as no bracket);
    - its name says ANGLE BRACKET or ANGLE QUOTATION MARK (⟨ 〈 ❰ « ‹), or it is a spacing
      modifier letter's left or right arrowhead (˂ ˱);
    - a few glyphs whose names do not tell (Canadian syllabics ᐸ ᐳ).
    Not: combining marks (they sit on another letter), tag characters (shown as \\u{…}
    before this), triangles, arrows and angles (◁ ➤ ∠), which no tag is written with."""
    if char in _HOMOGLYPHS:
        return _HOMOGLYPHS[char]
    folded = unicodedata.normalize("NFKD", char)
    if "<" in folded or ">" in folded:
        return "<" if "<" in folded else ">"
    if unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return ""
    name = unicodedata.name(char, "")
    words = set(re.split("[ -]", name))
    less, greater = name.count("LESS-THAN"), name.count("GREATER-THAN")
    if less + greater == 1:
        return "" if _RELATION_WORDS & words else "<" if less else ">"
    arrowhead = name.startswith("MODIFIER LETTER") and name.endswith(
        ("LEFT ARROWHEAD", "RIGHT ARROWHEAD")
    )
    if "ANGLE BRACKET" in name or "ANGLE QUOTATION MARK" in name or arrowhead:
        return "<" if "LEFT" in words else ">" if "RIGHT" in words else ""
    return ""


_AS_DATA = str.maketrans(
    {"&": "&amp;"}
    | dict.fromkeys(_LOOKS_LIKE_OPEN, "&lt;")
    | dict.fromkeys(_LOOKS_LIKE_CLOSE, "&gt;")
)


def as_data(text: str) -> str:
    """`text` (recalled memories, the memory index) escaped for the prompt: &, < and > (and
    their look-alikes) as &amp;, &lt; and &gt;, and the characters a person would not see
    (tag characters, bidirectional controls) written as \\u{…}, so that the model reads
    what a person reviewing the memory sees."""
    return show_hidden(text).translate(_AS_DATA)


def _with_age(memory: MemoryRecord, now: datetime) -> str:
    saved = datetime.fromisoformat(memory.updated_at)  # utc_now()'s form, with its Z
    days = (now - saved).days
    if days < 1:
        return ""
    unit = "day" if days == 1 else "days"
    return f"(saved {days} {unit} ago — verify against the current code before relying on it)\n"


def _cut(text: str, limit: int) -> str:
    data = text.encode()
    if len(data) <= limit:
        return text
    kept = data[:limit].decode("utf-8", "ignore")
    return f"{kept}\n[cut: this memory is {len(data):,} bytes; the first {limit:,} are shown]\n"
