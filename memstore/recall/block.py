"""The block of recalled memories injected into the user's message: each memory as its
file, with its age, escaped as data so that it can neither close the block nor open a tag.
"""

from __future__ import annotations

import logging
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


# Everything that reads as an angle bracket, not only < and > (fullwidth, small, CJK and
# mathematical forms, guillemets, ornaments, and the negated signs whose compatibility form
# holds one), is escaped like them: recalled text cannot spell a tag, whatever case, spacing,
# width or zero-width characters it uses. French quotes are the price: «mot» reads &lt;mot&gt;.
_LOOKS_LIKE_OPEN = (
    "<\uff1c\ufe64\u2039\u3008\u2329\u27e8\u02c2\u276e\u1438\u226e"
    "\u00ab\u300a\u2770\u29fc\u276c\u27ea\u2991\u2993\u226a\u22d6\u22d8"
)
_LOOKS_LIKE_CLOSE = (
    ">\uff1e\ufe65\u203a\u3009\u232a\u27e9\u02c3\u276f\u1433\u226f"
    "\u00bb\u300b\u2771\u29fd\u276d\u27eb\u2992\u2994\u226b\u22d7\u22d9"
)
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
