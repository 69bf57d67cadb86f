"""Whether a tool call may run: the user is asked before the agent acts.

Read-only tools (read_file, glob, and task itself, whose sub-agent's calls go through the same
policy) run without asking, except a read_file of a file with more than one hard link: the
other may be outside the workspace (~/.ssh/id_ed25519 linked in). Such a file is asked about
for a write_file or an edit_file too, which would replace it with a one-link copy of its
content that read_file then reads unasked. These calls (`ToolRequest.asks`) are always asked:
no allow rule matches them, nor an "always" the user gave an ordinary call; "always" given to
one of them allows that tool's calls on linked files for the rest of the session.

bash, write_file and edit_file run only when an allow rule from the user's settings matches,
when the user allowed such calls "always" earlier in this session, or when the dangerous
opt-out (skip_all) is on; otherwise the policy's `ask` is called (the REPL
shows the request and asks). Without `ask` (stdin is not a terminal) such a call is refused,
with a reason that says how to allow it. The loop answers a refused call to the model as an
error tool result carrying the reason.

The allow-list lives in a user-level settings file, never in the workspace: a cloned repository
must not be able to approve its own commands. Rules:

    "bash"                 every command (as dangerous as skip_all for bash)
    "bash(pytest *)"       a command matching the pattern, `*` standing for any text
    "write_file"           every write; "write_file(src/**)" writes to paths matching the glob
    "edit_file(*.md)"      edits of paths matching the glob (`*` within a name, `**` any folders)

A bash pattern never matches a command holding shell control characters (; & | ` $ ( ) < > or
a line break): `pytest *` must not approve `pytest; curl … | sh`. Such commands are asked about.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from memstore.agent.glob_patterns import glob_regex
from memstore.agent.tool_calls import ToolRefused, ToolRequest
from memstore.errors import InvalidSettings
from memstore.settings import Settings, read_allow_rules

# The command-line flag of the opt-out, named here so that refusals can mention it.
SKIP_FLAG = "--dangerously-skip-approvals"
READ_ONLY_TOOLS = frozenset({"read_file", "glob", "task"})
APPROVED_TOOLS = frozenset({"bash", "write_file", "edit_file"})
_SHELL_CONTROL = re.compile(r"[;&|`$()<>\n\r]")
_RULE = re.compile(r"^\s*(bash|write_file|edit_file)\s*(?:\((.*)\))?\s*$", re.S)


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""
    # Allowed for the rest of the session: `ApprovalPolicy.session_rule` says what that covers.
    always: bool = False


Approver = Callable[[ToolRequest], Decision]


@dataclass(frozen=True)
class Rule:
    tool: str
    pattern: str | None = None  # None: every call of the tool

    @classmethod
    def parse(cls, text: str) -> Rule:
        match = _RULE.match(text) if isinstance(text, str) else None
        if match is None:
            raise InvalidSettings(
                f"allow rule {text!r} is not understood: write bash, bash(PATTERN), "
                "write_file(GLOB) or edit_file(GLOB)"
            )
        pattern = match.group(2)
        if pattern is not None and not pattern.strip():
            raise InvalidSettings(f"allow rule {text!r} has an empty pattern")
        rule = cls(match.group(1), None if pattern is None else pattern.strip())
        if rule.pattern is not None and rule.tool != "bash":
            try:  # a broken glob is the settings' error, said once, not each tool call's
                glob_regex(rule.pattern)
            except ToolRefused as error:
                raise InvalidSettings(f"allow rule {text!r}: {error}") from None
        return rule

    def matches(self, request: ToolRequest) -> bool:
        if request.name != self.tool or request.asks:
            return False
        if self.pattern is None:
            return True
        if self.tool == "bash":
            command = str(request.input.get("command", "")).strip()
            return not _SHELL_CONTROL.search(command) and fnmatchcase(command, self.pattern)
        return bool(request.path) and glob_regex(self.pattern).fullmatch(request.path) is not None

    def __str__(self) -> str:
        return self.tool if self.pattern is None else f"{self.tool}({self.pattern})"


@dataclass
class ApprovalPolicy:
    """What the user allows. One policy serves a session, sub-agents included, so that what
    was allowed "always" holds for the rest of the session. `decide` returns a refusal's
    reason as the text the model gets back."""

    allow: list[Rule] = field(default_factory=list)
    ask: Approver | None = None
    skip_all: bool = False
    # Rules the user granted "always" during this session.
    granted: list[Rule] = field(default_factory=list)

    def decide(self, request: ToolRequest) -> Decision:
        if request.name not in APPROVED_TOOLS and not request.asks:
            return Decision(True, "read-only")
        if self.skip_all:
            return Decision(True, f"approvals skipped ({SKIP_FLAG})")
        for rule in [*self.allow, *self.granted]:
            if rule.matches(request):
                return Decision(True, f"allowed by {rule}")
        if self.ask is None:
            return Decision(False, self.no_terminal_reason(request))
        decision = self.ask(request)
        if not decision.allowed:
            # The reason goes back to the model as the call's result.
            why = decision.reason.strip() or "no reason given"
            return Decision(False, f"not run: the user refused this call: {why}")
        if decision.always:
            self.granted.append(self.session_rule(request))
        return decision

    @staticmethod
    def session_rule(request: ToolRequest) -> Rule:
        """What "always for this session" allows: that exact command for bash, any path
        for a file tool (protected paths stay refused); asked about a file with more than
        one hard link, that tool's calls on such files only."""
        if request.asks:
            return _LinkedFiles(request.name)
        if request.name == "bash":
            command = str(request.input.get("command", "")).strip()
            return _ExactCommand("bash", command)
        return Rule(request.name)

    @staticmethod
    def no_terminal_reason(request: ToolRequest) -> str:
        if request.asks:
            return (
                f"not run: {request.summary}; it needs the user's approval and there is no "
                f"terminal to ask on (or run with {SKIP_FLAG})"
            )
        example = "bash(pytest *)" if request.name == "bash" else f"{request.name}(src/**)"
        return (
            f"not run: {request.name} needs the user's approval and there is no terminal to "
            f"ask on; the user can allow it with a rule such as {example!r} in "
            f"{Settings.from_environment().settings_file} or run with {SKIP_FLAG}"
        )


@dataclass(frozen=True)
class _ExactCommand(Rule):
    """A command allowed always in this session: that command only, shell characters and
    all (the user saw it whole)."""

    def matches(self, request: ToolRequest) -> bool:
        command = str(request.input.get("command", "")).strip()
        return request.name == "bash" and command == self.pattern

    def __str__(self) -> str:
        return f"bash command {self.pattern!r}"


@dataclass(frozen=True)
class _LinkedFiles(Rule):
    """Calls of a file tool on files with more than one hard link, allowed always in this
    session when the user answered one such question "always"."""

    def matches(self, request: ToolRequest) -> bool:
        return request.name == self.tool and request.asks

    def __str__(self) -> str:
        return f"{self.tool} of files with more than one hard link"


def load_allow_rules(path: Path | None = None) -> list[Rule]:
    """The allow rules of the settings file (default: the user's, see memstore.settings);
    none when there is no file. InvalidSettings for a file that cannot be read or a rule not
    understood."""
    return parse_rules(read_allow_rules(path or Settings.from_environment().settings_file))


def parse_rules(texts: Iterable[Any]) -> list[Rule]:
    return [Rule.parse(text) for text in texts]
