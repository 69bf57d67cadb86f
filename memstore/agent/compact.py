"""The context-compression pipeline run before every model call (the seed's s08), fixed.

1. tool_result_budget: a very large tool result is saved to a file and replaced by a preview.
2. snip_compact: a long history keeps its head and its tail; the cut never separates a tool
   call from its result (the seed's could, and the API then refuses the request).
3. micro_compact: old tool results are shortened; the recent ones stay whole.
4. compact_history: over the context budget, the history is summarised by the model, after
   the full transcript is saved; the current turn is kept as it is.
reactive_compact runs once when the API still says the prompt is too long.

Messages are Anthropic-style dicts; content is a string or a list of block dicts. Every
function returns a new list and never mutates the messages it is given.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from memstore.llm.messages import (
    Message,
    blocks,
    is_tool_results,
    message_text,
    tool_result,
    tool_use_ids,
)

TOOL_RESULT_MAX_CHARS = 20_000
TOOL_RESULT_PREVIEW_CHARS = 2_000
SNIP_MAX_MESSAGES = 80
SNIP_KEEP_HEAD = 2
SNIP_KEEP_TAIL = 40
MICRO_KEEP_RECENT = 6
MICRO_MIN_CHARS = 600
MICRO_PREVIEW_CHARS = 200
CONTEXT_BUDGET_TOKENS = 120_000
SUMMARY_INPUT_MAX_CHARS = 200_000
# How much of a tool result the summariser reads, and of a misplaced one the request keeps.
SUMMARY_RESULT_MAX_CHARS = 1_000
MISPLACED_RESULT_MAX_CHARS = 200


@dataclass(frozen=True)
class CompactionSettings:
    """When each step of the pipeline acts; the defaults suit a 200k-token model."""

    tool_result_max_chars: int = TOOL_RESULT_MAX_CHARS
    snip_max_messages: int = SNIP_MAX_MESSAGES
    snip_keep_head: int = SNIP_KEEP_HEAD
    snip_keep_tail: int = SNIP_KEEP_TAIL
    micro_keep_recent: int = MICRO_KEEP_RECENT
    context_budget_tokens: int = CONTEXT_BUDGET_TOKENS


def estimate_tokens(messages: Sequence[Message]) -> int:
    """A cheap estimate: about four characters of JSON per token."""
    return len(json.dumps(messages, ensure_ascii=False, default=str)) // 4


def _with_result(block: dict[str, Any], text: str) -> dict[str, Any]:
    return {**block, "content": text}


# -- the last step: a request the API accepts ---------------------------------------------


def repair_pairs(messages: Sequence[Message]) -> list[Message]:
    """The messages as the API accepts them, whatever an interruption, a failure or a saved
    transcript left: roles alternate, starting and ending with the user; every tool call is
    answered in the next message, by a result placed before any text; a result whose call is
    gone, or a block in the wrong role, becomes text; repeated ids are dropped; no message
    or text block is empty. A history that is already valid comes back unchanged."""
    merged = merge_same_roles([m for m in messages if m.get("role") in ("user", "assistant")])
    out: list[Message] = []
    if not merged or merged[0]["role"] != "user":
        out.append({"role": "user", "content": "(the conversation continues)"})
    for message in merged:
        content = [b for b in blocks(message) if not _blank(b)]
        if message["role"] == "assistant":
            content = _assistant_blocks(content)
        else:
            previous = out[-1] if out and out[-1]["role"] == "assistant" else None
            calls = tool_use_ids(previous) if previous is not None else set()
            content = _answered(_as_text(content, "tool_use"), calls)
        if not content:
            content = [{"type": "text", "text": "(empty)"}]
        out.append(
            message if content == message.get("content") else {**message, "content": content}
        )
    if out[-1]["role"] == "assistant":
        calls = tool_use_ids(out[-1])
        ending = _answered([], calls) if calls else [{"type": "text", "text": "(continue)"}]
        out.append({"role": "user", "content": ending})
    return out


def _blank(block: dict[str, Any]) -> bool:
    return block.get("type") == "text" and not str(block.get("text", "")).strip()


def _assistant_blocks(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool calls once per id; tool results (a user's block) as text."""
    seen: set[str] = set()
    kept = []
    for block in _as_text(content, "tool_result"):
        if block.get("type") == "tool_use":
            if str(block.get("id")) in seen:
                continue
            seen.add(str(block.get("id")))
        kept.append(block)
    return kept


def _as_text(content: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """Blocks of `kind` (out of place in this role) turned into a line of text."""
    return [
        {"type": "text", "text": f"[{kind.replace('_', ' ')}: {_summary(b)}]"}
        if b.get("type") == kind
        else b
        for b in content
    ]


def _summary(block: dict[str, Any]) -> str:
    if block.get("type") == "tool_use":
        return str(block.get("name", "?"))
    return message_text(block)[:MISPLACED_RESULT_MAX_CHARS] or "(empty)"


def _answered(content: list[dict[str, Any]], calls: set[str]) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    answered: set[str] = set()
    orphans = []
    for block in content:
        if block.get("type") != "tool_result":
            continue
        call = str(block.get("tool_use_id"))
        if call in calls and call not in answered:
            results.append(block)
            answered.add(call)
        elif call not in calls:
            orphans.append({"type": "text", "text": f"[an earlier tool result: {_summary(block)}]"})
    missing = [tool_result(call, "no result", is_error=True) for call in sorted(calls - answered)]
    others = [b for b in content if b.get("type") != "tool_result"]
    return results + missing + orphans + others


# -- 1. tool_result_budget -------------------------------------------------------------------


def tool_result_budget(
    messages: Sequence[Message], save_dir: Path, *, max_chars: int = TOOL_RESULT_MAX_CHARS
) -> list[Message]:
    """Very large tool results saved under `save_dir`, replaced by a preview and the path."""
    out: list[Message] = []
    for message in messages:
        if not is_tool_results(message):
            out.append(message)
            continue
        new_blocks = []
        for block in blocks(message):
            text = message_text(block) if block.get("type") == "tool_result" else ""
            if len(text) > max_chars:
                path = save_dir / f"{_safe(str(block.get('tool_use_id', 'result')))}.txt"
                with open_private(path, "w") as handle:
                    handle.write(text)
                block = _with_result(
                    block,
                    f"{text[:TOOL_RESULT_PREVIEW_CHARS]}\n[… output of {len(text):,} characters "
                    f"cut here; the whole output is saved in {path}]",
                )
            new_blocks.append(block)
        out.append({**message, "content": new_blocks})
    return out


def _safe(identifier: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in identifier)[:100]


# -- 2. snip_compact -------------------------------------------------------------------------


def snip_compact(
    messages: Sequence[Message],
    *,
    max_messages: int = SNIP_MAX_MESSAGES,
    keep_head: int = SNIP_KEEP_HEAD,
    keep_tail: int = SNIP_KEEP_TAIL,
    keep_from: int | None = None,
) -> list[Message]:
    """Head and tail of a long history, with a note where the middle was.

    The tail reaches back at least to `keep_from` (the current turn's user message, which
    must not be cut). The head is extended until its last tool calls have their results;
    the tail never starts with tool results whose calls were cut. Messages of one role that
    end up side by side are merged, so roles keep alternating and the distance of every
    tail message from the end is unchanged.
    """
    if len(messages) <= max_messages:
        return list(messages)
    head_end = min(keep_head, len(messages))
    while head_end < len(messages) and tool_use_ids(messages[head_end - 1]):
        head_end += 1  # include the results of the head's last tool calls
    tail_start = max(len(messages) - keep_tail, head_end)
    if keep_from is not None:
        tail_start = min(tail_start, keep_from)
    while tail_start < len(messages) and is_tool_results(messages[tail_start]):
        tail_start -= 1  # start at the calls, not at their orphaned results
    if tail_start <= head_end:
        return list(messages)
    cut = tail_start - head_end
    note = {
        "role": "user",
        "content": f"[{cut} earlier messages of this conversation were removed to save context]",
    }
    return merge_same_roles([*messages[:head_end], note, *messages[tail_start:]])


def merge_same_roles(messages: Sequence[Message]) -> list[Message]:
    """Adjacent messages of one role merged into one (their blocks concatenated)."""
    merged: list[Message] = []
    for message in messages:
        if merged and merged[-1].get("role") == message.get("role"):
            previous = merged[-1]
            merged[-1] = {**previous, "content": blocks(previous) + blocks(message)}
        else:
            merged.append(message)
    return merged


# -- 3. micro_compact ------------------------------------------------------------------------


def micro_compact(
    messages: Sequence[Message], *, keep_recent: int = MICRO_KEEP_RECENT
) -> list[Message]:
    """Tool results older than the `keep_recent` most recent ones cut to a short preview."""
    positions = [
        (i, j)
        for i, message in enumerate(messages)
        if is_tool_results(message)
        for j, block in enumerate(blocks(message))
        if block.get("type") == "tool_result"
    ]
    old = set(positions[: max(len(positions) - keep_recent, 0)])
    if not old:
        return list(messages)
    out: list[Message] = []
    for i, message in enumerate(messages):
        if not is_tool_results(message):
            out.append(message)
            continue
        new_blocks = []
        for j, block in enumerate(blocks(message)):
            text = message_text(block) if (i, j) in old else ""
            if len(text) > MICRO_MIN_CHARS:
                block = _with_result(
                    block,
                    f"{text[:MICRO_PREVIEW_CHARS]}\n[old tool result shortened to save "
                    f"context: {len(text):,} characters in all]",
                )
            new_blocks.append(block)
        out.append({**message, "content": new_blocks})
    return out


# -- 4. compact_history and reactive_compact -------------------------------------------------

SUMMARY_PROMPT = (
    "Summarise the conversation so far for the coding agent that will continue it: the "
    "user's goals and requests, decisions made, files created or changed, commands run and "
    "their outcomes, and what is still to do. Be specific (paths, names, numbers); at most "
    "about 500 words."
)


def compact_history(
    messages: Sequence[Message],
    *,
    current_turn_start: int,
    summarize: Callable[[str], str],
    transcript_path: Path,
) -> list[Message]:
    """The history before the current turn replaced by the model's summary of it.

    The messages are saved to `transcript_path` first (the agent's session transcript holds
    the whole conversation besides); the current turn (from `current_turn_start`) is kept
    whole.
    """
    earlier, current = list(messages[:current_turn_start]), list(messages[current_turn_start:])
    if not earlier:
        return list(messages)
    save_transcript(messages, transcript_path)
    summary = summarize(render_for_summary(earlier))
    note = {
        "role": "user",
        "content": f"[Summary of the earlier conversation; the full transcript is saved in "
        f"{transcript_path}]\n\n{summary}",
    }
    return merge_same_roles(
        [note, {"role": "assistant", "content": "Understood; I'll continue from there."}, *current]
    )


def reactive_compact(
    messages: Sequence[Message],
    *,
    current_turn_start: int,
    summarize: Callable[[str], str],
    transcript_path: Path,
) -> list[Message]:
    """After the API refused the prompt as too long: summarise, shorten every old result
    hard, and if the current turn alone is still too long, keep only its start and end."""
    compacted = compact_history(
        messages,
        current_turn_start=current_turn_start,
        summarize=summarize,
        transcript_path=transcript_path,
    )
    compacted = micro_compact(compacted, keep_recent=1)
    # The summary, its acknowledgement and the current user message stay at the head.
    return snip_compact(compacted, max_messages=12, keep_head=3, keep_tail=8)


def render_for_summary(messages: Sequence[Message]) -> str:
    lines = []
    for message in messages:
        for block in blocks(message):
            kind = block.get("type")
            if kind == "text":
                lines.append(f"{message.get('role')}: {block.get('text', '')}")
            elif kind == "tool_use":
                lines.append(f"[tool call {block.get('name')}: {json.dumps(block.get('input'))}]")
            elif kind == "tool_result":
                lines.append(f"[tool result: {message_text(block)[:SUMMARY_RESULT_MAX_CHARS]}]")
    text = "\n".join(lines)
    return text[-SUMMARY_INPUT_MAX_CHARS:]


def save_transcript(messages: Sequence[Message], path: Path) -> None:
    with open_private(path, "w") as handle:
        for message in messages:
            handle.write(json_line(message, ensure_ascii=False))


def open_private(path: Path, mode: str) -> IO[str]:
    """`path` opened for writing ("w") or appending ("a"), readable by the user only, in a
    folder only the user can enter: transcripts and tool outputs hold secrets verbatim."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if mode == "a" else os.O_TRUNC)
    fd = os.open(path, flags | os.O_NOFOLLOW, 0o600)
    os.fchmod(fd, 0o600)  # a file made before this rule
    return open(fd, mode, encoding="utf-8")


def json_line(message: Any, *, ensure_ascii: bool = True) -> str:
    """One JSON line, never holding Infinity or NaN (which json.loads reads back and the API
    refuses): any such number is written as null."""
    try:
        text = json.dumps(message, ensure_ascii=ensure_ascii, default=str, allow_nan=False)
    except ValueError:
        text = json.dumps(finite(message)[0], ensure_ascii=ensure_ascii, default=str)
    return text + "\n"


def finite(value: Any) -> tuple[Any, bool]:
    """`value` with every non-finite number replaced by None, and whether there was one."""
    if isinstance(value, float) and not math.isfinite(value):
        return None, True
    if isinstance(value, dict):
        items = [(key, finite(item)) for key, item in value.items()]
        return {key: item for key, (item, _) in items}, any(found for _, (_, found) in items)
    if isinstance(value, list | tuple):
        pairs = [finite(item) for item in value]
        return [item for item, _ in pairs], any(found for _, found in pairs)
    return value, False
