"""`memctl chat`: the terminal face of the agent in memstore.agent. It only reads messages
(chat_input.py), renders what the agent reports, and runs the slash commands.

On a terminal: line editing and history, a spinner while the model thinks, the answer
streamed and shown as Markdown, tool calls one line each, cut to the width. Piped (tests,
scripts): plain text, streamed as it comes, nothing cut. Either way the model's reply is shown
with its control characters and the characters no one sees written visibly (render.py's
visible_controls): it may quote a hostile memory or file.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memctl.approve import terminal_approver
from memctl.chat_input import (
    MessageInput,
    PipedInput,
    TerminalInput,
    interrupts_not_dropped,
)
from memctl.render import (
    count,
    one_line,
    print_table,
    recall_summary,
    shown_score,
    visible_after,
    visible_controls,
)
from memstore.agent.approval import SKIP_FLAG, ApprovalPolicy, load_allow_rules
from memstore.agent.compact import CompactionSettings
from memstore.agent.instructions import project_instructions
from memstore.agent.loop import Agent
from memstore.agent.memory import AgentMemory
from memstore.agent.sessions import (
    SessionFiles,
    find_session,
    load_usage,
    save_usage,
    session_folder,
    sessions_folder,
)
from memstore.agent.tool_calls import ToolResult
from memstore.agent.tools import Workspace
from memstore.errors import AgentFailed, InvalidMemory, MemstoreError
from memstore.learning.remember import remember, split_type
from memstore.recall.vectors import SemanticIndex
from memstore.storage.memory_folder import LINE_HISTORY_FILE, MEMORY_FOLDER
from memstore.storage.store import MemoryStore

HELP = """\
/memory [NAME]     list the memories, or show one
/remember TEXT     save TEXT as a memory (start with 'project:', 'feedback:' or
                   'reference:' for another type than user)
/forget NAME       delete a memory (memctl restore NAME brings it back)
/recall            which memories were injected this turn, and why
/cost              tokens used this session, cache reads and writes included
/exit              end the session (Ctrl-D too); Ctrl-C stops the current turn
Enter sends; Esc Enter, Ctrl-J or a line ending in \\ starts a new line; a paste is one message"""


@dataclass
class TerminalEvents:
    """Renders the agent's progress: rich on a terminal, plain text when piped."""

    tty: bool
    _text: list[str] = field(default_factory=list)
    _status: Any = None
    _live: Any = None
    _console: Any = None

    def __post_init__(self) -> None:
        if self.tty:
            from rich.console import Console

            self._console = Console(highlight=False)

    def waiting(self, active: bool) -> None:
        if not self.tty:
            return
        if active and self._status is None:
            self.finish()
            self._status = self._console.status("thinking…", spinner="dots")
            self._status.start()
        elif not active and self._status is not None:
            self._status.stop()
            self._status = None

    def text(self, delta: str) -> None:
        if not delta:
            return
        before = self._text[-1] if self._text else ""
        self._text.append(delta)
        if not self.tty:
            sys.stdout.write(visible_after(before, delta))
            sys.stdout.flush()
            return
        from rich.live import Live
        from rich.markdown import Markdown

        if self._live is None:
            # Transient: the live area is erased at the end and the answer printed once.
            self._live = Live(console=self._console, refresh_per_second=8, transient=True)
            self._live.start()
        self._live.update(_Tail(Markdown(visible_controls("".join(self._text)))))

    def finish(self) -> None:
        """End the answer being streamed, if any (also after Ctrl-C: what came is kept)."""
        if self._live is not None:
            from rich.markdown import Markdown

            self._live.stop()
            self._live = None
            self._console.print(Markdown(visible_controls("".join(self._text))))
        elif self._text and not self.tty and not "".join(self._text).endswith("\n"):
            sys.stdout.write("\n")
        self._text.clear()

    def tool_call(self, name: str, arguments: Any) -> None:
        self.finish()
        self.line(f"⏺ {name}({_brief(arguments)})", style="cyan")

    def tool_result(self, name: str, result: ToolResult) -> None:
        lines = result.text.splitlines()
        first = one_line(lines[0]) if lines else ""
        more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
        mark = "✗" if result.is_error else "⎿"
        self.line(f"  {mark} {first}{more}", style="red" if result.is_error else "dim")

    def notice(self, message: str) -> None:
        self.finish()
        self.line(message, style="yellow")

    def line(self, text: str, style: str = "") -> None:
        """One line; on a terminal cut to its width (piped output is never cut)."""
        if self.tty:
            self._console.print(
                text,
                style=style or None,
                markup=False,
                emoji=False,
                overflow="ellipsis",
                no_wrap=True,
            )
        else:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()

    def block(self, text: str) -> None:
        """Text shown whole (help, a memory, what an approval is asked for), wrapped on a
        terminal."""
        if self.tty:
            self._console.print(text, markup=False, emoji=False)
        else:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()


class _Tail:
    """The last lines of a renderable that fit on the screen: a live area taller than the
    screen cannot be redrawn in place, and its top would be printed again and again."""

    def __init__(self, renderable: Any) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.segment import Segment

        lines = console.render_lines(self.renderable, options, pad=False)
        for line in lines[-max(console.size.height - 1, 1) :]:
            yield from line
            yield Segment.line()


def _brief(arguments: Any) -> str:
    """A tool call's input in a few words, whatever its shape (it comes from the model)."""
    if isinstance(arguments, dict):
        for key in ("command", "path", "pattern"):
            if isinstance(arguments.get(key), str):
                return one_line(arguments[key])
    try:
        return one_line(arguments)
    except (TypeError, ValueError):
        return one_line(repr(arguments))


def run_chat(
    *,
    db: Path | str,
    workspace: Path,
    model: str,
    use_memory: bool,
    client: Any,
    context_tokens: int,
    resume: str | None = None,
    skip_approvals: bool = False,
    settings_file: Path | None = None,
) -> None:
    tty = sys.stdin.isatty() and sys.stdout.isatty()
    allow = load_allow_rules(settings_file)  # a settings file in error stops here, in one line
    events = TerminalEvents(tty)
    # On a server, the chat's local files go in the workspace's .memory/, as its database's would.
    local = workspace / MEMORY_FOLDER / "memstore.db" if isinstance(db, str) else db
    sessions = sessions_folder(local)
    resumed = None if resume is None else find_session(sessions, resume)
    folder, unsaved = session_folder(sessions, resumed)  # elsewhere in a read-only .memory/
    session, session_id = SessionFiles(folder), folder.name
    export_dir = workspace / MEMORY_FOLDER
    # An existing database is opened read-only where it cannot be written: recall still works.
    create = isinstance(db, str) or not db.exists()
    command = f"memctl chat (session {session_id})"
    with MemoryStore(db, actor="chat", command=command, create=create) as store:
        memory = (
            AgentMemory(
                store,
                client,
                session_id=session_id,
                export_dir=export_dir,
                # Its model loaded and vectors computed by a thread: never on a prompt.
                semantic=SemanticIndex(store, background=True),
            )
            if use_memory
            else None
        )
        reader: MessageInput = (
            TerminalInput(local.parent / LINE_HISTORY_FILE) if tty else PipedInput()
        )
        # Piped, nobody can be asked: what needs approval is refused, unless a rule allows it.
        ask = terminal_approver(workspace, events.block, reader.ask) if tty else None
        tools = Workspace(workspace, databases=[local])
        agent = Agent(
            client,
            model=model,
            workspace=tools,
            session=session,
            memory=memory,
            events=events,
            compaction=CompactionSettings(context_budget_tokens=context_tokens),
            approval=ApprovalPolicy(allow=allow, ask=ask, skip_all=skip_approvals),
            instructions=project_instructions(tools),
        )
        if resume is not None:
            messages, skipped = session.load()
            agent.resume(messages)
            load_usage(session.directory, agent.usage, agent.side_usage)
            note = f"; {skipped} unreadable lines skipped" if skipped else ""
            events.line(f"resumed session {session_id}: {count(len(messages), 'message')}{note}")
        memories = count(store.count(), "memory", "memories") if use_memory else "memory off"
        events.line(
            f"memctl chat · {model} · {workspace} · {memories} · /help for commands", style="dim"
        )
        if skip_approvals:
            events.notice(f"{SKIP_FLAG}: commands, writes and edits run without asking")
        if unsaved:
            events.notice(unsaved)
        if memory is not None and memory.semantic is not None:
            memory.semantic.start()  # while the user types the first prompt
        try:
            _repl(agent, store, events, reader, export_dir)
        finally:
            if memory is not None and memory.semantic is not None:
                memory.semantic.close()
            if session.transcript.exists():  # nothing is saved before the first message
                events.line(f"session saved in {session.directory}", style="dim")


def _repl(
    agent: Agent,
    store: MemoryStore,
    events: TerminalEvents,
    reader: MessageInput,
    export_dir: Path,
) -> None:
    while True:
        try:
            text = reader.read().strip()
        except EOFError:
            return
        except KeyboardInterrupt:
            continue
        if not text:
            continue
        if text.startswith("/"):
            if not slash_command(text, agent, store, events, export_dir):
                return
            continue
        _turn(agent, text, events)


def _turn(agent: Agent, text: str, events: TerminalEvents) -> None:
    """One turn, whatever happens in it: the session goes on."""
    try:
        with interrupts_not_dropped():
            outcome = agent.turn(text)
    except KeyboardInterrupt:
        events.waiting(False)
        events.finish()
        agent.interrupted()
        events.notice("[turn stopped; the session goes on]")
        return
    except AgentFailed as error:
        events.finish()
        events.notice(f"error: {error}. Your message is kept; send another to go on.")
        return
    except MemstoreError as error:
        events.finish()
        events.notice(f"error: {error}. The session goes on.")
        return
    except Exception as error:  # a bug: say it in one line, keep the session and its log
        events.finish()
        _log_crash(agent)
        events.notice(
            f"internal error: {type(error).__name__}: {error}. The session goes on; "
            f"details in {agent.session.directory / 'errors.log'}"
        )
        return
    finally:
        save_usage(agent.session.directory, agent.usage, agent.side_usage)
    events.finish()
    if outcome.learning is not None:
        _report_learning(outcome, events)


def _log_crash(agent: Agent) -> None:
    import traceback

    agent.session.directory.mkdir(parents=True, exist_ok=True)
    with (agent.session.directory / "errors.log").open("a", encoding="utf-8") as handle:
        handle.write(f"{datetime.now(UTC).isoformat()}\n{traceback.format_exc()}\n")


def _report_learning(outcome: Any, events: TerminalEvents) -> None:
    learning = outcome.learning
    extraction = learning.extraction
    saved = [f"{n} (new)" for n in extraction.created] + [
        f"{n} (updated)" for n in extraction.updated
    ]
    if saved:
        events.line(f"remembered: {', '.join(saved)}", style="green")
    consolidation = learning.consolidation
    if consolidation is not None and consolidation.applied:
        plan = consolidation.plan
        events.line(
            f"memories consolidated: {plan.before} → {plan.after} "
            f"(undo: memctl consolidate --undo {consolidation.run_id[:8]})",
            style="green",
        )
    for problem in (
        learning.consolidation_skipped,
        learning.consolidation_failure,
        learning.export_failure,
        *learning.notes,
    ):
        if problem:
            events.notice(problem)


def slash_command(
    text: str, agent: Agent, store: MemoryStore, events: TerminalEvents, export_dir: Path
) -> bool:
    """Run one /command; False when the session should end."""
    command, _, argument = text.partition(" ")
    argument = argument.strip()
    try:
        if command in ("/exit", "/quit"):
            return False
        if command == "/help":
            events.block(HELP)
        elif command == "/memory":
            _show_memory(store, argument, events)
        elif command == "/remember":
            kind, text = split_type(argument)
            if not text:
                raise InvalidMemory("text", "usage: /remember TEXT")
            name = remember(store, text, kind)
            _export(store, export_dir)
            events.line(f"remembered {name}", style="green")
        elif command == "/forget":
            if not argument:
                events.notice("usage: /forget NAME")
            else:
                store.delete(argument)
                _export(store, export_dir)
                events.line(f"forgot {argument} (memctl restore {argument} brings it back)")
        elif command == "/recall":
            _show_recall(agent, events)
        elif command == "/cost":
            _show_cost(agent, events)
        else:
            events.notice(f"unknown command {command}; /help lists them")
    except MemstoreError as error:
        events.notice(f"error: {error}")
    return True


def _show_memory(store: MemoryStore, name: str, events: TerminalEvents) -> None:
    if name:
        from memstore.files.format import render_memory_file

        events.block(visible_controls(render_memory_file(store.get(name)).rstrip()))
        return
    summaries = store.summaries()
    if not summaries:
        events.line("no memories yet")
        return
    events.finish()
    print_table(["NAME", "TYPE", "DESCRIPTION"], summaries)


def _show_recall(agent: Agent, events: TerminalEvents) -> None:
    chosen = agent.last_recall
    if chosen is None:
        events.line("nothing recalled yet this session")
        return
    result = chosen.recall
    events.line(recall_summary(result))
    for name in result.names:
        score = result.scores.get(name)
        matched = ", ".join(result.matched.get(name, ()))
        near = result.similarity.get(name)
        events.line(
            f"  {name}"
            + (f"  score {shown_score(score)}" if score is not None else "")
            + (f"  similar {near:.2f}" if near is not None else "")
            + (f"  matched: {matched}" if matched else "")
        )


def _show_cost(agent: Agent, events: TerminalEvents) -> None:
    for label, usage in (("agent", agent.usage), ("memory and summaries", agent.side_usage)):
        events.line(
            f"{label}: {usage.calls} model calls · input {usage.input_tokens:,} · output "
            f"{usage.output_tokens:,} · cache reads {usage.cache_read_input_tokens:,} · "
            f"cache writes {usage.cache_creation_input_tokens:,} tokens"
        )


def _export(store: MemoryStore, export_dir: Path) -> None:
    from memstore.files.exporter import export_memories

    export_memories(store, export_dir)
