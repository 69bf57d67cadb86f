"""The approval prompt of `memctl chat`: before a bash command, a write or an edit runs, show
what will run and ask: once (y), always for this session (a), or no (n, with a reason the
model gets). Which calls need asking is memstore.agent.approval's decision, not this one's.

What is shown comes from the model: control characters and bidirectional overrides are
shown escaped, so that the text on screen is the text that runs.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from pathlib import Path

from memstore.agent.approval import ApprovalPolicy, Decision, ToolRequest
from memstore.text import show_hidden

SHOWN_LINES = 40  # of a diff or new file: enough to judge, short enough to read
DIFF_MAX_BYTES = 1_000_000  # a bigger file is described by its size alone
# C0/C1 controls (tab and line breaks aside), and the invisible or reordering characters
# that make text on screen differ from the text that runs.
_HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
ANSWERS = {"y": "once", "yes": "once", "a": "always", "always": "always", "n": "no", "no": "no"}


def visible(text: str) -> str:
    """`text` with every hidden or controlling character written as an escape (the rest of
    what shows as nothing, tag characters for one, as memstore.text writes it: \\u{E0041})."""
    shown = _HIDDEN.sub(lambda m: f"\\u{ord(m.group()):04x}", text).replace("\t", "    ")
    return show_hidden(shown)


def describe(request: ToolRequest, root: Path) -> list[str]:
    """The lines that show what the call will do."""
    if request.name == "bash":
        lines = [f"  $ {line}" for line in str(request.input.get("command", "")).split("\n")]
        timeout = request.input.get("timeout")
        return ["Run this command?", *lines, *([f"  (timeout {timeout} s)"] if timeout else [])]
    if request.asks and request.name == "read_file":  # say what is read, then ask
        return [f"{request.summary}. Read it?"]
    # A write or an edit of a file with more than one hard link: the summary's first line
    # says so, before what is written.
    linked = [request.summary.split("\n")[0] + "."] if request.asks else []
    if request.name == "write_file":
        return linked + _describe_write(request, root)
    if request.name == "edit_file":
        return linked + _describe_edit(request)
    return [request.summary]


def _describe_write(request: ToolRequest, root: Path) -> list[str]:
    content = str(request.input.get("content", ""))
    target = root / request.path
    size = f"{len(content.encode('utf-8')):,} bytes, {len(content.splitlines()):,} lines"
    old = _current_text(target)
    if old is None:
        verb = "Replace" if target.exists() else "Create"
        return [f"{verb} {request.path} ({size})?", *_shown(content.splitlines(), "  + ")]
    diff = list(difflib.unified_diff(old.splitlines(), content.splitlines(), lineterm="", n=1))
    body = diff[2:] if diff else ["(the content is unchanged)"]
    return [f"Write {request.path} ({size})?", *_shown(body, "  ")]


def _describe_edit(request: ToolRequest) -> list[str]:
    every = " (every match)" if request.input.get("replace_all") else ""
    old = str(request.input.get("old_text", "")).split("\n")
    new = str(request.input.get("new_text", "")).split("\n")
    body = [f"- {line}" for line in old] + [f"+ {line}" for line in new]
    return [f"Edit {request.path}{every}?", *_shown(body, "  ")]


def _current_text(path: Path) -> str | None:
    """The file's text to diff against, or None: no file, too big, not text."""
    try:
        if not path.is_file() or path.stat().st_size > DIFF_MAX_BYTES:
            return None
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _shown(lines: list[str], prefix: str) -> list[str]:
    shown = [prefix + line for line in lines[:SHOWN_LINES]]
    if len(lines) > SHOWN_LINES:
        shown.append(f"  … {len(lines) - SHOWN_LINES:,} more lines")
    return shown


def terminal_approver(
    root: Path, show: Callable[[str], None], ask: Callable[[str], str]
) -> Callable[[ToolRequest], Decision]:
    """An Approver that shows each request with `show` and reads answers with `ask` (which
    raises EOFError when there is no more input, KeyboardInterrupt on Ctrl-C)."""

    def approve(request: ToolRequest) -> Decision:
        for line in describe(request, root):
            show(visible(line))
        rule = ApprovalPolicy.session_rule(request)
        while True:
            try:
                answer = ask("  [y] once  [a] always this session  [n] no › ").strip().lower()
            except EOFError:
                return Decision(False, "the user gave no answer")
            choice = ANSWERS.get(answer)
            if choice == "once":
                return Decision(True, "allowed by the user")
            if choice == "always":
                show(f"  allowed for the rest of this session: {visible(str(rule))}")
                return Decision(True, "allowed by the user for this session", always=True)
            if choice == "no":
                try:
                    reason = ask("  why (optional, the model sees it) › ").strip()
                except EOFError:
                    reason = ""
                return Decision(False, reason)
            show("  answer y, a or n")

    return approve
