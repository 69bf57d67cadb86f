"""The agent loop of `memctl chat` (the seed's agent_loop, with its defects fixed).

Per user turn: recall picks memories; the system prompt (instructions + MEMORY.md index) is
built once; then, until the model stops asking for tools: the compression pipeline runs on
the working messages, the memories are injected into a *copy* of the current user message,
the model is called (streamed), tool calls run and their results go back. When the model is
done, extraction reads the full, uncompressed turn (final reply included) and consolidation
runs when due; `.memory/` is re-exported after any change.

Two message lists are kept: `history`, everything said, never compressed, appended to the
session transcript as it grows (a crash loses nothing); and `messages`, the working context
the pipeline compresses. The current user message is found by the identity of its text
block, which survives every compression step, rather than by a remembered position (the
seed's went stale after a snip, and crashed on list content).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from memstore.agent.approval import ApprovalPolicy
from memstore.agent.compact import (
    SUMMARY_PROMPT,
    CompactionSettings,
    compact_history,
    estimate_tokens,
    merge_same_roles,
    micro_compact,
    reactive_compact,
    repair_pairs,
    snip_compact,
    tool_result_budget,
)
from memstore.agent.events import AgentEvents, SilentEvents
from memstore.agent.memory import AgentMemory, TurnLearning, TurnRecall
from memstore.agent.model_request import cached_tools, inject, mark_cache_point, turn_index
from memstore.agent.reply_blocks import plain_blocks
from memstore.agent.sessions import SessionFiles
from memstore.agent.system_prompt import system_prompt
from memstore.agent.tool_calls import ToolResult
from memstore.agent.tools import Workspace
from memstore.errors import AgentFailed, ModelUnavailable, PromptTooLong, UnparseableReply
from memstore.llm.client import ModelClient, Usage, ask_text, stream_reply
from memstore.llm.messages import (
    Message,
    blocks,
    is_tool_results,
    tool_calls,
    tool_result,
    tool_use_ids,
)

log = logging.getLogger(__name__)

MAX_TOKENS = 8_000
STREAM_RETRIES = 3
STREAM_RETRY_DELAY_S = 1.0
MAX_TOOL_ROUNDS = 50
# Calls past this many in one reply are answered, not run: rounds are capped, and so are calls.
MAX_CALLS_PER_REPLY = 32
SUMMARY_MAX_TOKENS = 2_000


@dataclass
class TurnOutcome:
    reply: str
    recall: TurnRecall | None = None
    learning: TurnLearning | None = None
    compactions: list[str] = field(default_factory=list)


class Agent:
    def __init__(
        self,
        client: ModelClient,
        *,
        model: str,
        workspace: Workspace,
        session: SessionFiles,
        memory: AgentMemory | None,
        events: AgentEvents | None = None,
        max_tokens: int = MAX_TOKENS,
        compaction: CompactionSettings | None = None,
        can_delegate: bool = True,
        approval: ApprovalPolicy | None = None,
        instructions: str = "",
    ) -> None:
        """`approval` decides which bash, write and edit calls run; without one, none does
        (the REPL passes one that asks the user). `instructions`: the project's own, for the
        system prompt (agent/instructions.py reads them)."""
        self.client = client
        self.instructions = instructions
        self.model = model
        self.workspace = workspace
        self.session = session
        self.memory = memory
        if memory is not None and memory.store.path is not None:
            workspace.protect_database(memory.store.path)
        self.approval = approval or ApprovalPolicy()
        self.events: AgentEvents = events or SilentEvents()
        self.max_tokens = max_tokens
        self.compaction = compaction or CompactionSettings()
        self.history: list[Message] = []
        self.messages: list[Message] = []
        self.usage = Usage()  # the agent's own (streamed) calls
        # Everything else asked of a model for this session: selection, extraction,
        # consolidation and summaries.
        self.side_usage = Usage()
        self._side_client = client.counting(self.side_usage)
        self.last_recall: TurnRecall | None = None
        # Sub-agents get the same tools but `task`: one level of delegation only.
        self.tools = cached_tools(with_task=can_delegate)
        self._tasks = 0

    # -- one user turn ----------------------------------------------------------------------

    def turn(self, text: str) -> TurnOutcome:
        """Answer one user message, running tools as the model asks."""
        turn_block = {"type": "text", "text": text}
        self._close_previous_turn()
        self._append({"role": "user", "content": [turn_block]})
        outcome = TurnOutcome(reply="")
        if self.memory is not None:
            outcome.recall = self.memory.before_turn(self.history, usage=self.side_usage)
            self.last_recall = outcome.recall
        system = self.system_prompt()
        injected = outcome.recall.block if outcome.recall else ""
        reactive_done = False
        for _ in range(MAX_TOOL_ROUNDS):
            self._compress(turn_block, outcome)
            request = repair_pairs(inject(self.messages, turn_block, injected))
            try:
                reply = self._call(system, request)
            except UnparseableReply as error:
                # Nothing of the reply can run; the model is told why, and goes on.
                self.events.notice(f"[{error}; the model is asked again]")
                self._append(
                    {"role": "assistant", "content": [{"type": "text", "text": str(error)}]}
                )
                self._append({"role": "user", "content": [{"type": "text", "text": BAD_JSON_NOTE}]})
                continue
            except PromptTooLong:
                if reactive_done:
                    raise AgentFailed(
                        "the conversation is too long for the model even after compaction"
                    ) from None
                reactive_done = True
                self.events.notice("[reactive compact] the prompt was too long; compacting")
                outcome.compactions.append("reactive")
                self.messages = reactive_compact(
                    self.messages,
                    current_turn_start=turn_index(self.messages, turn_block) or 0,
                    summarize=self._summarize,
                    transcript_path=self.session.compaction_transcript(),
                )
                continue
            bad_input: dict[str, str] = {}
            content = plain_blocks(reply.content, bad_input) or [
                {"type": "text", "text": "(no answer)"}
            ]
            self._append({"role": "assistant", "content": content})
            outcome.reply = "".join(b.get("text", "") for b in content if b["type"] == "text")
            if not tool_use_ids({"content": content}):
                break
            if reply.stop_reason == "tool_use":
                self._run_tools(content, bad_input)
                continue
            # Calls in a reply cut short (max_tokens) may be incomplete: not run, but answered,
            # so the history stays valid; on max_tokens the model gets to try again.
            self._answer_calls(content, CUT_OFF_RESULT)
            if reply.stop_reason != "max_tokens":
                break
        else:
            self.events.notice(f"[stopped after {MAX_TOOL_ROUNDS} rounds of tool calls]")
        if self.memory is not None:
            outcome.learning = self.memory.after_turn(self.history, usage=self.side_usage)
        return outcome

    def resume(self, messages: list[Message]) -> None:
        """Go on with a saved conversation (the transcript goes on growing where it was)."""
        self.history = list(messages)
        self.messages = merge_same_roles(messages)

    def system_prompt(self) -> list[dict[str, Any]]:
        """Instructions (memctl's, then the project's) and the MEMORY.md index, built once per
        turn; cached by the API."""
        store = self.memory.store if self.memory is not None else None
        return system_prompt(self.workspace.root, self.instructions, store)

    def interrupted(self) -> None:
        """After Ctrl-C: answer any tool calls left open, so the history stays valid."""
        last = self.messages[-1] if self.messages else None
        if last is not None and last["role"] == "assistant" and tool_use_ids(last):
            self._answer_calls(blocks(last), INTERRUPTED_RESULT)

    # -- steps ------------------------------------------------------------------------------

    def _append(self, message: Message) -> None:
        # The lists first: an interrupt during the disk write must not leave them apart.
        self.history.append(message)
        self.messages = merge_same_roles([*self.messages, message])
        self.session.append(message)

    def _close_previous_turn(self) -> None:
        """A turn that was interrupted or failed may have left calls unanswered, or tool
        results the model never answered: close it, so the new turn starts cleanly."""
        self.interrupted()
        last = self.messages[-1] if self.messages else None
        if last is not None and is_tool_results(last):
            self._append(
                {"role": "assistant", "content": [{"type": "text", "text": UNFINISHED_TURN}]}
            )

    def _answer_calls(self, content: list[dict[str, Any]], text: str) -> None:
        calls = tool_calls({"content": content})
        results = [tool_result(b["id"], text, is_error=True) for b in calls]
        self._append({"role": "user", "content": results})

    def _compress(self, turn_block: dict[str, Any], outcome: TurnOutcome) -> None:
        settings = self.compaction
        before = len(self.messages)
        messages = tool_result_budget(
            self.messages, self.session.tool_results, max_chars=settings.tool_result_max_chars
        )
        messages = snip_compact(
            messages,
            max_messages=settings.snip_max_messages,
            keep_head=settings.snip_keep_head,
            keep_tail=settings.snip_keep_tail,
            keep_from=turn_index(messages, turn_block),
        )
        if len(messages) < before:
            outcome.compactions.append("snip")
            self.events.notice(f"[snip] {before - len(messages)} older messages set aside")
        compacted = micro_compact(messages, keep_recent=settings.micro_keep_recent)
        if compacted != messages:
            outcome.compactions.append("micro")
        messages = compacted
        turn_start = turn_index(messages, turn_block) or 0
        # Only what came before this turn can be summarised; the turn itself stays whole.
        if turn_start > 0 and estimate_tokens(messages) > settings.context_budget_tokens:
            self.events.notice("[auto compact] summarising the earlier conversation")
            outcome.compactions.append("auto")
            messages = compact_history(
                messages,
                current_turn_start=turn_start,
                summarize=self._summarize,
                transcript_path=self.session.compaction_transcript(),
            )
        self.messages = messages

    def _summarize(self, text: str) -> str:
        try:
            return ask_text(
                self._side_client,
                model=self.model,
                system=SUMMARY_PROMPT,
                prompt=text,
                max_tokens=SUMMARY_MAX_TOKENS,
                timeout=120,
                max_retries=2,
            )
        except ModelUnavailable as error:
            log.warning("summary failed (%s); the earlier conversation is left out", error)
            return "(no summary: the model could not be asked; see the saved transcript)"

    def _call(self, system: list[dict[str, Any]], request: list[Message]) -> Any:
        """One streamed model call; a failure that asking again may mend (a dropped
        connection, an overload in the middle of the stream) is retried STREAM_RETRIES
        times with backoff."""
        for attempt in range(STREAM_RETRIES + 1):
            try:
                return self._stream(system, request)
            except (PromptTooLong, UnparseableReply):
                raise
            except ModelUnavailable as error:
                if not error.transient or attempt == STREAM_RETRIES:
                    raise AgentFailed(str(error)) from None
                delay = STREAM_RETRY_DELAY_S * 2**attempt
                self.events.notice(f"[{error}; retrying in {delay:g} s]")
                time.sleep(delay)
        raise AssertionError("unreachable")

    def _stream(self, system: list[dict[str, Any]], request: list[Message]) -> Any:
        self.events.waiting(True)
        waiting = True

        def show(delta: str) -> None:
            nonlocal waiting
            if waiting:
                self.events.waiting(False)
                waiting = False
            self.events.text(delta)

        try:
            return stream_reply(
                self.client.counting(self.usage),
                model=self.model,
                max_tokens=self.max_tokens,
                system=system,
                tools=self.tools,
                messages=mark_cache_point(request),
                on_text=show,
            )
        finally:
            self.events.waiting(False)

    def _run_tools(self, content: list[dict[str, Any]], bad_input: dict[str, str]) -> None:
        """Run the calls and append their results; on Ctrl-C, the results so far are kept
        and the calls not yet run are answered as interrupted."""
        calls = tool_calls({"content": content})
        results: list[dict[str, Any]] = []
        try:
            for number, block in enumerate(calls):
                if number == MAX_CALLS_PER_REPLY:
                    self.events.notice(
                        f"[{len(calls) - number} more tool calls in this reply not run: "
                        f"at most {MAX_CALLS_PER_REPLY} run]"
                    )
                if number >= MAX_CALLS_PER_REPLY:  # answered without a line each
                    results.append(tool_result(block["id"], TOO_MANY_CALLS_RESULT, is_error=True))
                    continue
                arguments = block.get("input")
                self.events.tool_call(
                    block["name"], arguments if isinstance(arguments, dict) else {}
                )
                if block["id"] in bad_input:
                    result = ToolResult(bad_input[block["id"]], is_error=True)
                else:
                    result = self._run_call(block["name"], arguments)
                self.events.tool_result(block["name"], result)
                results.append(tool_result(block["id"], result.text, is_error=result.is_error))
        except KeyboardInterrupt:
            results += [
                tool_result(block["id"], INTERRUPTED_RESULT, is_error=True)
                for block in calls[len(results) :]
            ]
            raise
        finally:
            self._append({"role": "user", "content": results})

    def _run_call(self, name: str, arguments: Any) -> ToolResult:
        """One call: checked, approved (or answered with the refusal's reason), run."""
        if name == "task" and any(t["name"] == "task" for t in self.tools):
            return self._run_task(arguments)
        request = self.workspace.request(name, arguments)
        if isinstance(request, ToolResult):  # it cannot run as given
            return request
        decision = self.approval.decide(request)
        if not decision.allowed:
            return ToolResult(decision.reason, is_error=True)
        return self.workspace.run(name, arguments, asked=request.asks)

    def _run_task(self, arguments: Any) -> ToolResult:
        """Run a sub-agent on a self-contained task, in a fresh context; its answer is the
        result. It shares the workspace and the session folder, not the memory."""
        prompt = arguments.get("prompt") if isinstance(arguments, dict) else None
        if not isinstance(prompt, str) or not prompt.strip():
            return ToolResult("task needs a non-empty prompt", is_error=True)
        self._tasks += 1
        sub_agent = Agent(
            self.client,
            model=self.model,
            workspace=self.workspace,
            session=SessionFiles(self.session.directory / "tasks" / f"task-{self._tasks}"),
            memory=None,
            events=self.events,
            max_tokens=self.max_tokens,
            compaction=self.compaction,
            can_delegate=False,
            approval=self.approval,
            instructions=self.instructions,
        )
        try:
            outcome = sub_agent.turn(prompt)
        except AgentFailed as error:
            return ToolResult(f"the sub-agent failed: {error}", is_error=True)
        finally:
            self.usage.merge(sub_agent.usage)
            self.side_usage.merge(sub_agent.side_usage)
        return ToolResult(outcome.reply or "(the sub-agent gave no answer)")


INTERRUPTED_RESULT = "interrupted by the user"
TOO_MANY_CALLS_RESULT = (
    f"not run: too many tool calls in one reply (at most {MAX_CALLS_PER_REPLY} run); "
    "ask for fewer at a time"
)
CUT_OFF_RESULT = (
    "not run: your reply was cut off (max_tokens) before this call was complete; "
    "call it again, smaller or in parts"
)
UNFINISHED_TURN = "(This turn ended before I could answer.)"


BAD_JSON_NOTE = (
    "[memctl: your last reply held a tool call whose input was not valid JSON, so nothing in "
    "it ran. Send the call again, its input a JSON object.]"
)
