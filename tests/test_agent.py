"""The agent's parts in process: workspace-confined tools, the compression pipeline, and the
loop against the scripted server (reactive compaction, interruption, injection)."""

from __future__ import annotations

import itertools
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from memstore.agent import loop
from memstore.agent.approval import ApprovalPolicy
from memstore.agent.compact import (
    CompactionSettings,
    micro_compact,
    repair_pairs,
    snip_compact,
    tool_result_budget,
)
from memstore.agent.loop import Agent
from memstore.agent.memory import AgentMemory
from memstore.agent.model_request import inject
from memstore.agent.sessions import SessionFiles
from memstore.agent.tools import Workspace
from memstore.errors import AgentFailed
from memstore.llm.client import ModelClient
from memstore.storage.store import MemoryStore
from tests.anthropic_server import (
    AnthropicServer,
    error_reply,
    message_reply,
    midstream_error_reply,
    text_reply,
    tool_reply,
    truncated_stream_reply,
)

# -- tools ------------------------------------------------------------------------------------


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    root = tmp_path / "work"
    root.mkdir()
    (tmp_path / "outside.txt").write_text("secret")
    return Workspace(root)


@pytest.mark.parametrize(
    "path", ["../outside.txt", "/etc/passwd", "sub/../../outside.txt", "~/x", "link-out/x"]
)
def test_paths_that_leave_the_workspace_are_refused(workspace: Workspace, path: str) -> None:
    (workspace.root / "link-out").symlink_to(workspace.root.parent)
    for tool, arguments in [
        ("read_file", {"path": path}),
        ("write_file", {"path": path, "content": "x"}),
        ("edit_file", {"path": path, "old_text": "a", "new_text": "b"}),
    ]:
        result = workspace.run(tool, arguments)
        assert result.is_error and "outside the workspace" in result.text, (tool, result)
    assert (workspace.root.parent / "outside.txt").read_text() == "secret"


def test_a_symlink_inside_the_workspace_is_fine(workspace: Workspace) -> None:
    (workspace.root / "real.txt").write_text("hello\n")
    (workspace.root / "alias.txt").symlink_to(workspace.root / "real.txt")
    assert "hello" in workspace.run("read_file", {"path": "alias.txt"}).text


def test_edit_file_counts_matches(workspace: Workspace) -> None:
    target = workspace.root / "a.py"
    target.write_text("x = 1\nx = 1\ny = 2\n")
    none = workspace.run("edit_file", {"path": "a.py", "old_text": "z", "new_text": "w"})
    assert none.is_error and "0 matches" in none.text
    many = workspace.run("edit_file", {"path": "a.py", "old_text": "x = 1", "new_text": "x = 3"})
    assert many.is_error and "occurs 2 times" in many.text
    assert target.read_text() == "x = 1\nx = 1\ny = 2\n"
    one = workspace.run("edit_file", {"path": "a.py", "old_text": "y = 2", "new_text": "y = 5"})
    assert one.text == "replaced 1 match in a.py"
    every = workspace.run(
        "edit_file", {"path": "a.py", "old_text": "x = 1", "new_text": "x = 3", "replace_all": True}
    )
    assert every.text == "replaced 2 matches in a.py"
    assert target.read_text() == "x = 3\nx = 3\ny = 5\n"


def test_read_file_with_a_line_limit(workspace: Workspace) -> None:
    (workspace.root / "lines.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    text = workspace.run("read_file", {"path": "lines.txt", "limit": 3}).text
    assert "line 3" in text and "line 4" not in text and "7 more lines" in text
    text = workspace.run("read_file", {"path": "lines.txt", "offset": 9}).text
    assert "line 8" not in text and "line 10" in text


def test_bash_runs_in_the_workspace_and_times_out(workspace: Workspace) -> None:
    assert workspace.run("bash", {"command": "pwd"}).text.strip() == str(workspace.root)
    failed = workspace.run("bash", {"command": "echo oops; exit 3"})
    assert "oops" in failed.text and "[exit code 3]" in failed.text
    slow = workspace.run("bash", {"command": "sleep 30 & sleep 30", "timeout": 1})
    assert "timed out after 1 s" in slow.text


def test_glob_and_unknown_tools(workspace: Workspace) -> None:
    (workspace.root / "src").mkdir()
    (workspace.root / "src" / "a.py").write_text("")
    (workspace.root / "src" / "b.txt").write_text("")
    assert workspace.run("glob", {"pattern": "**/*.py"}).text == "src/a.py"
    assert workspace.run("glob", {"pattern": "../*"}).is_error
    assert workspace.run("launch_missiles", {}).is_error
    assert workspace.run("read_file", {"wrong": "argument"}).is_error


# -- the compression pipeline ----------------------------------------------------------------


def random_history(rng: random.Random, turns: int) -> list[dict[str, Any]]:
    """User turns, each with a few rounds of tool calls and a final reply."""
    messages: list[dict[str, Any]] = []
    call = 0
    for turn in range(turns):
        messages.append({"role": "user", "content": [{"type": "text", "text": f"turn {turn}"}]})
        for _ in range(rng.randint(0, 4)):
            ids = [f"call{call + i}" for i in range(rng.randint(1, 3))]
            call += len(ids)
            messages.append(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": i, "name": "bash", "input": {}} for i in ids
                    ],
                }
            )
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": i,
                            "content": "o" * rng.randint(1, 2000),
                        }
                        for i in ids
                    ],
                }
            )
        messages.append({"role": "assistant", "content": [{"type": "text", "text": "done"}]})
    return messages


def assert_valid_for_the_api(messages: list[dict[str, Any]]) -> None:
    """Roles alternate, start with the user, and each tool result answers a call of the
    message just before it."""
    assert messages[0]["role"] == "user"
    for previous, message in itertools.pairwise(messages):
        assert previous["role"] != message["role"]
    for i, message in enumerate(messages):
        content = message["content"] if isinstance(message["content"], list) else []
        for block in content:
            if block.get("type") == "tool_result":
                calls = {b.get("id") for b in messages[i - 1]["content"]}
                assert block["tool_use_id"] in calls


def test_snip_never_separates_a_tool_call_from_its_result() -> None:
    rng = random.Random(7)
    for _ in range(300):
        history = random_history(rng, rng.randint(1, 30))
        keep_from = max(
            i
            for i, m in enumerate(history)
            if m["role"] == "user" and m["content"][0]["type"] == "text"
        )
        snipped = snip_compact(
            history,
            max_messages=rng.randint(4, 40),
            keep_head=rng.randint(1, 4),
            keep_tail=rng.randint(1, 20),
            keep_from=keep_from,
        )
        assert_valid_for_the_api(snipped)
        # The current turn is kept whole.
        assert snipped[-(len(history) - keep_from) :][1:] == history[keep_from + 1 :]


def test_micro_compact_shortens_only_old_large_results() -> None:
    history = random_history(random.Random(3), 12)
    compacted = micro_compact(history, keep_recent=2)
    results = [
        (block, original)
        for message, before in zip(compacted, history, strict=True)
        if isinstance(message["content"], list)
        for block, original in zip(message["content"], before["content"], strict=True)
        if block.get("type") == "tool_result"
    ]
    for block, original in results[:-2]:
        if len(original["content"]) > 600:
            assert "old tool result shortened" in block["content"]
            assert len(block["content"]) < 300
        else:
            assert block == original
    assert [b for b, _ in results[-2:]] == [o for _, o in results[-2:]]


def test_tool_result_budget_saves_the_whole_output(tmp_path: Path) -> None:
    huge = "".join(f"row {i}\n" for i in range(10_000))
    history = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t/1", "name": "bash", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t/1", "content": huge}],
        },
    ]
    budgeted = tool_result_budget(history, tmp_path / "results")
    text = budgeted[2]["content"][0]["content"]
    assert len(text) < 3_000 and "row 0" in text and "saved in" in text
    (saved,) = (tmp_path / "results").iterdir()
    assert saved.read_text() == huge and saved.name == "t_1.txt"
    assert history[2]["content"][0]["content"] == huge  # the input is not changed


def test_injection_goes_into_a_copy_of_the_current_message() -> None:
    turn_block = {"type": "text", "text": "current question"}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "[note]"}, turn_block]},
    ]
    request = inject(messages, turn_block, "<relevant_memories>M</relevant_memories>")
    assert [b["text"] for b in request[0]["content"]] == [
        "[note]",
        "<relevant_memories>M</relevant_memories>",
        "current question",
    ]
    assert messages[0]["content"] == [{"type": "text", "text": "[note]"}, turn_block]


# -- the loop ---------------------------------------------------------------------------------


def make_agent(
    tmp_path: Path,
    client: ModelClient,
    store: MemoryStore | None = None,
    approval: ApprovalPolicy | None = None,
    **settings: int,
) -> Agent:
    """An agent on tmp_path/work; every call runs unless `approval` says otherwise."""
    root = tmp_path / "work"
    root.mkdir(exist_ok=True)
    memory = (
        AgentMemory(store, client, session_id="s", export_dir=root / ".memory")
        if store is not None
        else None
    )
    return Agent(
        client,
        model="scripted",
        workspace=Workspace(root),
        session=SessionFiles(tmp_path / "session"),
        memory=memory,
        compaction=CompactionSettings(**settings),
        approval=approval or ApprovalPolicy(skip_all=True),
    )


TOO_LONG = error_reply(400, "invalid_request_error", "prompt is too long: 250000 tokens > 200000")


def test_prompt_too_long_compacts_once_and_retries(
    tmp_path: Path, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    agent = make_agent(tmp_path, client)
    anthropic_server.script(text_reply("first answer"))
    agent.turn("first question")
    anthropic_server.script(
        TOO_LONG, text_reply("SUMMARY-OF-TURN-ONE"), text_reply("second answer")
    )
    outcome = agent.turn("second question")
    assert outcome.reply == "second answer" and outcome.compactions == ["reactive"]
    retry = anthropic_server.requests[-1]
    sent = json.dumps(retry["messages"])
    assert "SUMMARY-OF-TURN-ONE" in sent and "first question" not in sent
    assert "second question" in sent
    # The history and the transcript keep everything.
    lines = (tmp_path / "session" / "transcript.jsonl").read_text().splitlines()
    assert len(lines) == 4 and "first question" in lines[0]
    assert list((tmp_path / "session").glob("before-compaction-*.jsonl"))

    anthropic_server.script(TOO_LONG, text_reply("summary"), TOO_LONG)
    with pytest.raises(AgentFailed, match=r"too long .* even after compaction"):
        agent.turn("third question")


def test_ctrl_c_during_tools_leaves_a_valid_history(
    tmp_path: Path, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    agent = make_agent(tmp_path, client)
    anthropic_server.script(tool_reply(("bash", {"command": "echo hi"})))

    def interrupt(*_: Any, **__: Any) -> Any:
        raise KeyboardInterrupt

    agent.workspace.run = interrupt  # type: ignore[method-assign]  # Ctrl-C while it runs
    with pytest.raises(KeyboardInterrupt):
        agent.turn("run it")
    agent.interrupted()
    assert agent.history[-1]["content"][0]["content"] == "interrupted by the user"
    anthropic_server.script(text_reply("ok"), text_reply("[]"))
    agent.workspace = Workspace(agent.workspace.root)
    assert agent.turn("never mind").reply == "ok"
    assert_valid_for_the_api(anthropic_server.requests[-1]["messages"])


def test_a_long_turn_is_compacted_and_stays_valid(
    tmp_path: Path, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    agent = make_agent(
        tmp_path, client, snip_max_messages=10, snip_keep_tail=4, micro_keep_recent=2
    )
    anthropic_server.script(text_reply("warm-up"))
    agent.turn("hello")
    big = "printf '%01000d' 0"
    anthropic_server.script(*[tool_reply(("bash", {"command": big}))] * 8, text_reply("all done"))
    outcome = agent.turn("run it eight times")
    assert outcome.reply == "all done"
    assert "micro" in outcome.compactions
    for request in anthropic_server.requests:
        assert_valid_for_the_api(request["messages"])
    last = json.dumps(anthropic_server.requests[-1]["messages"])
    assert "old tool result shortened" in last and "run it eight times" in last
    assert len(agent.history) == 2 + 1 + 16 + 1
    anthropic_server.script(text_reply("short"))
    assert "snip" in agent.turn("and now?").compactions
    assert "earlier messages of this conversation were removed" in json.dumps(
        anthropic_server.requests[-1]["messages"]
    )


def test_memory_is_recalled_injected_and_learnt(
    tmp_path: Path, store: MemoryStore, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    store.create("user-tabs", "user", "Never tabs", "Use 4 spaces.")
    agent = make_agent(tmp_path, client, store)
    item = {"name": "project-name", "type": "project", "description": "It is Foo", "body": "Foo."}
    anthropic_server.script(text_reply("[0]"), text_reply("Sure."), text_reply(json.dumps([item])))
    outcome = agent.turn("indent my code")
    assert outcome.recall is not None and outcome.recall.recall.names == ["user-tabs"]
    assert outcome.learning is not None and outcome.learning.extraction.created == ["project-name"]
    assert (tmp_path / "work" / ".memory" / "project-name.md").exists()
    assert os.path.getsize(tmp_path / "work" / ".memory" / "MEMORY.md") > 0
    # The extraction request saw the final reply.
    assert "Sure." in anthropic_server.requests[-1]["messages"][0]["content"]
    # Usage: the agent's call, and the two memory calls (selection, extraction).
    assert (agent.usage.calls, agent.side_usage.calls) == (1, 2)
    assert (agent.side_usage.input_tokens, agent.side_usage.output_tokens) == (20, 10)


def test_a_task_runs_in_a_sub_agent_with_a_fresh_context(
    tmp_path: Path, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    agent = make_agent(tmp_path, client)
    (agent.workspace.root / "todo.txt").write_text("fix the parser\n")
    anthropic_server.script(
        tool_reply(("task", {"description": "find todos", "prompt": "list the TODO files"})),
        tool_reply(("glob", {"pattern": "*.txt"})),  # the sub-agent works with the tools
        text_reply("todo.txt holds one item"),  # its answer
        text_reply("There is one TODO."),
    )
    outcome = agent.turn("what is left to do?")
    assert outcome.reply == "There is one TODO."
    main_first, sub_first, sub_second, main_second = anthropic_server.requests
    assert [t["name"] for t in main_first["tools"]][-1] == "task"
    assert "task" not in [t["name"] for t in sub_first["tools"]]  # one level only
    assert sub_first["messages"] == [
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "list the TODO files",
                    "cache_control": {"type": "ephemeral"},
                }
            ],
        }
    ]
    assert "todo.txt" in json.dumps(sub_second["messages"][-1])
    result = main_second["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["content"] == "todo.txt holds one item"
    assert agent.usage.calls == 4
    assert (tmp_path / "session" / "tasks" / "task-1" / "transcript.jsonl").exists()


def test_repair_pairs_leaves_valid_histories_alone_and_fixes_broken_ones() -> None:
    rng = random.Random(11)
    for _ in range(100):
        history = random_history(rng, rng.randint(1, 8))
        history.append({"role": "user", "content": [{"type": "text", "text": "next"}]})
        assert repair_pairs(history) == history
    call = {"type": "tool_use", "id": "c1", "name": "bash", "input": {}}
    broken = [
        {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {"role": "assistant", "content": [call]},  # never answered
        {"role": "user", "content": [{"type": "text", "text": "next"}]},
        {"role": "assistant", "content": []},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "again"},
                {"type": "tool_result", "tool_use_id": "gone", "content": "old output"},
            ],
        },
    ]
    repaired = repair_pairs(broken)
    assert_valid_for_the_api(repaired)
    assert repaired[0]["content"] == "(the conversation continues)"
    assert repaired[4]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "c1",
        "content": "no result",
        "is_error": True,
    }
    assert repaired[5]["content"] == [{"type": "text", "text": "(empty)"}]
    assert repaired[6]["content"][0]["text"] == "[an earlier tool result: old output]"


def test_a_turn_interrupted_during_tools_then_compacted_stays_valid(
    tmp_path: Path, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    agent = make_agent(tmp_path, client, context_budget_tokens=1)
    anthropic_server.script(text_reply("hello"))
    agent.turn("first")
    anthropic_server.script(
        text_reply("SUMMARY 1"),  # every turn after the first is over this tiny budget
        tool_reply(("bash", {"command": "echo a"}), ("bash", {"command": "echo b"})),
    )
    runs = []

    def first_runs_then_ctrl_c(name: str, arguments: Any, *, asked: bool = False) -> Any:
        if runs:
            raise KeyboardInterrupt
        runs.append(name)
        return Workspace(agent.workspace.root).run(name, arguments, asked=asked)

    agent.workspace.run = first_runs_then_ctrl_c  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        agent.turn("run two things")
    agent.interrupted()
    agent.workspace = Workspace(agent.workspace.root)
    results = agent.history[-1]["content"]
    assert [r["content"].strip() for r in results] == ["a", "interrupted by the user"]
    # The next turn is over budget: the earlier turns are summarised, the request is valid.
    anthropic_server.script(text_reply("SUMMARY 2"), text_reply("fine"))
    outcome = agent.turn("never mind")
    assert outcome.reply == "fine" and "auto" in outcome.compactions
    for request in anthropic_server.requests:
        if "tools" in request:
            assert_valid_for_the_api(request["messages"])


def test_a_reply_cut_off_inside_a_tool_call_is_answered_and_retried(
    tmp_path: Path, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    agent = make_agent(tmp_path, client)
    cut = message_reply(
        [{"type": "tool_use", "id": "big", "name": "write_file", "input": {"path": "a.txt"}}],
        "max_tokens",
    )
    anthropic_server.script(cut, message_reply([], "end_turn"))
    outcome = agent.turn("write a big file")
    assert not (agent.workspace.root / "a.txt").exists()  # the incomplete call did not run
    retry = anthropic_server.requests[1]["messages"]
    assert_valid_for_the_api(retry)
    assert "cut off (max_tokens)" in retry[-1]["content"][0]["content"]
    assert outcome.reply == "(no answer)"
    anthropic_server.script(text_reply("ok"))
    agent.turn("next")
    assert_valid_for_the_api(anthropic_server.requests[-1]["messages"])


def test_an_error_in_the_middle_of_a_stream_is_retried(
    tmp_path: Path,
    client: ModelClient,
    anthropic_server: AnthropicServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(loop, "STREAM_RETRY_DELAY_S", 0.01)
    agent = make_agent(tmp_path, client)
    anthropic_server.script(midstream_error_reply(), text_reply("complete answer"))
    assert agent.turn("hello").reply == "complete answer"
    anthropic_server.script(*[midstream_error_reply()] * (loop.STREAM_RETRIES + 1))
    with pytest.raises(AgentFailed, match="answered 200: Overloaded"):
        agent.turn("again")


def random_block(rng: random.Random, ids: list[str]) -> dict[str, Any]:
    kind = rng.choice(["text", "blank", "tool_use", "tool_result"])
    if kind == "text":
        return {"type": "text", "text": rng.choice(["a", "b c"])}
    if kind == "blank":
        return {"type": "text", "text": rng.choice(["", " ", "\n\n"])}
    if kind == "tool_use":
        return {"type": "tool_use", "id": rng.choice(ids), "name": "bash", "input": {}}
    return {"type": "tool_result", "tool_use_id": rng.choice(ids), "content": "out"}


def test_repair_pairs_makes_any_message_list_a_valid_request() -> None:
    rng = random.Random(5)
    for _ in range(3_000):
        ids = [f"t{i}" for i in range(rng.randint(1, 4))]
        messages: list[dict[str, Any]] = []
        for _ in range(rng.randint(0, 8)):
            content: Any = [random_block(rng, ids) for _ in range(rng.randint(0, 4))]
            if rng.random() < 0.15:
                content = rng.choice(["", "plain text"])
            messages.append({"role": rng.choice(["user", "assistant"]), "content": content})
        repaired = repair_pairs(messages)
        assert_valid_for_the_api(repaired)
        assert repaired[-1]["role"] == "user"
        for message, following in itertools.pairwise(repaired):
            if message["role"] == "assistant" and isinstance(message["content"], list):
                calls = {b["id"] for b in message["content"] if b["type"] == "tool_use"}
                answers = {
                    b.get("tool_use_id") for b in following["content"] if isinstance(b, dict)
                }
                assert calls <= answers
        for message in repaired:
            content = message["content"]
            if isinstance(content, str):
                assert content.strip()
                continue
            assert content and all(b["type"] != "text" or b["text"].strip() for b in content)
            kinds = [b["type"] for b in content]
            ids_here = [b.get("id") or b.get("tool_use_id") for b in content if b["type"] != "text"]
            assert len(ids_here) == len(set(ids_here))
            if message["role"] == "user":
                assert "tool_use" not in kinds
                assert kinds == sorted(kinds, key=lambda k: k != "tool_result")
            else:
                assert "tool_result" not in kinds


def test_odd_file_names_and_blank_replies_do_not_break_the_session(
    tmp_path: Path, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    agent = make_agent(tmp_path, client)
    (agent.workspace.root / os.fsdecode(b"bad\xff.txt")).write_text("x")
    anthropic_server.script(
        tool_reply(("glob", {"pattern": "*"}), text="\n\n"), text_reply("found it")
    )
    assert agent.turn("list files").reply == "found it"
    sent = anthropic_server.requests[1]["messages"]
    assert_valid_for_the_api(sent)
    assert all(b.get("text", "x").strip() for m in sent for b in m["content"])
    assert "bad\ufffd.txt" in json.dumps(sent[-1], ensure_ascii=False)
    # The transcript holds it, and a resumed session reads every message back.
    messages, skipped = agent.session.load()
    assert skipped == 0 and len(messages) == len(agent.history)


def test_a_transcript_with_unicode_line_separators_resumes_whole(tmp_path: Path) -> None:
    session = SessionFiles(tmp_path / "s")
    history = [
        {"role": "user", "content": "minified: a\u2028b"},
        {"role": "assistant", "content": [{"type": "text", "text": "ok\x85"}]},
    ]
    for message in history:
        session.append(message)
    assert session.load() == (history, 0)


def test_a_stream_that_ends_early_is_retried(
    tmp_path: Path,
    client: ModelClient,
    anthropic_server: AnthropicServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(loop, "STREAM_RETRY_DELAY_S", 0.01)
    agent = make_agent(tmp_path, client)
    anthropic_server.script(truncated_stream_reply(), text_reply("the whole answer"))
    assert agent.turn("hello").reply == "the whole answer"
    assert len(anthropic_server.requests) == 2
