"""End to end: the real `memctl chat` process, driven on stdin, against the scripted server."""

from __future__ import annotations

import json
import os
import shutil
import stat
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memstore.storage.store import MemoryStore
from tests.anthropic_server import (
    AnthropicServer,
    error_reply,
    gated_reply,
    paused_reply,
    text_reply,
    tool_reply,
)
from tests.conftest import MemctlRunner
from tests.read_only_mount import memctl_read_only, skip_without_read_only_mounts
from tests.terminal import Terminal

PREFERENCE = {
    "name": "user-indentation",
    "type": "user",
    "description": "Always 4 spaces, never tabs",
    "body": "The user wants Python indented with 4 spaces and never tab characters.",
}


def model_env(server: AnthropicServer) -> dict[str, str]:
    # Not the user's settings file: no allow rule approves anything unless a test says so.
    return {
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": server.url,
        "MEMSTORE_SETTINGS": os.devnull,
    }


def main_calls(server: AnthropicServer) -> list[dict[str, Any]]:
    """The agent's own calls (they carry the tools), not selection or extraction."""
    return [request for request in server.requests if "tools" in request]


def texts(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "\n".join(
        block.get("text", "") if block["type"] == "text" else json.dumps(block) for block in content
    )


@pytest.mark.both_engines
def test_a_preference_from_session_one_reaches_session_two(
    tmp_path: Path,
    memctl: MemctlRunner,
    anthropic_server: AnthropicServer,
    workspace_database: Path | str,
    database_env: dict[str, str],
) -> None:
    env = {**model_env(anthropic_server), **database_env}
    # Session 1: an empty store, so no selection call; the reply; then extraction.
    anthropic_server.script(
        text_reply("Noted: 4 spaces from now on."),
        text_reply(json.dumps([PREFERENCE])),
    )
    first = memctl("chat", input="always use 4 spaces, never tabs\n/exit\n", env=env)
    assert first.returncode == 0, first.stderr
    assert "Noted: 4 spaces from now on." in first.stdout
    assert "remembered: user-indentation (new)" in first.stdout
    # On a server a person's `user` memories are their own: the team's .memory/ leaves them
    # out (recall still finds them, below).
    on_server = isinstance(workspace_database, str)
    assert (tmp_path / ".memory" / "user-indentation.md").exists() != on_server
    assert ("user-indentation" in (tmp_path / ".memory" / "MEMORY.md").read_text()) != on_server
    transcripts = list((tmp_path / ".memory" / "sessions").glob("*/transcript.jsonl"))
    assert len(transcripts) == 1 and "always use 4 spaces" in transcripts[0].read_text()
    assert (tmp_path / ".memory" / "sessions" / ".gitignore").read_text().endswith("*\n")

    # Session 2, a new process: two turns, each with selection, the reply, and extraction.
    anthropic_server.requests.clear()
    anthropic_server.script(
        text_reply("[0]"),
        text_reply("Here is hello.py."),
        text_reply("[]"),
        text_reply("[0]"),
        text_reply("Added a docstring."),
        text_reply("[]"),
    )
    second = memctl(
        "chat", input="write a hello world script in python\nnow add a docstring\n", env=env
    )
    assert second.returncode == 0, second.stderr
    first_turn, second_turn = main_calls(anthropic_server)
    system = first_turn["system"][0]["text"]
    assert "- [user-indentation](user-indentation.md) — Always 4 spaces, never tabs" in system
    current = texts(first_turn["messages"][-1])
    assert "<relevant_memories>" in current and PREFERENCE["body"] in current
    assert current.rstrip().endswith("write a hello world script in python")
    # In the second turn, the earlier user message is as the user typed it: memories are
    # injected into a copy of the current message only, never into the history.
    user_messages = [m for m in second_turn["messages"] if m["role"] == "user"]
    assert texts(user_messages[0]) == "write a hello world script in python"
    assert "<relevant_memories>" in texts(user_messages[-1])
    assert all("<relevant_memories>" not in texts(m) for m in user_messages[:-1])
    # Caching: the system prompt, the tools and the conversation so far are marked.
    assert first_turn["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert first_turn["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert second_turn["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert first_turn["stream"] is True
    # The memory is where the test's engine keeps it (on PostgreSQL, in the server only).
    with MemoryStore(workspace_database) as store:
        assert store.get("user-indentation").body == PREFERENCE["body"]
        assert store.history.last_run("extraction") is not None
    assert (tmp_path / ".memory" / "memstore.db").exists() == (store.url is None)


@pytest.mark.both_engines
def test_a_turn_skips_the_consolidation_another_process_is_running_and_says_so(
    tmp_path: Path,
    memctl_process: MemctlRunner,
    anthropic_server: AnthropicServer,
    workspace_database: Path | str,
    database_env: dict[str, str],
) -> None:
    """`memctl consolidate` holds the store's consolidation while its model thinks; a chat
    turn meanwhile finds consolidation due, skips it without asking the model, and says so."""
    with MemoryStore(workspace_database) as store, store.transaction() as tx:
        for i in range(12):  # due: at least 10 memories, never consolidated
            tx.create(f"note-{i}", "project", f"Fact number {i}", "b")
    env = {**model_env(anthropic_server), **database_env}
    thinking = threading.Event()
    anthropic_server.script(gated_reply('{"merge": [], "drop": []}', thinking))
    consolidating = threading.Thread(target=lambda: memctl_process("consolidate", env=env))
    consolidating.start()
    try:
        while not anthropic_server.requests:  # the consolidation is planning
            time.sleep(0.02)
        # The chat's turn: selection, the reply, extraction; no consolidation call.
        anthropic_server.script(text_reply("[]"), text_reply("Hello."), text_reply("[]"))
        chat = memctl_process("chat", input="hello\n", env=env)
        assert consolidating.is_alive()
    finally:
        thinking.set()
        consolidating.join()
    assert chat.returncode == 0, chat.stderr
    assert "Hello." in chat.stdout
    assert (
        "consolidation skipped: another consolidation of this store is running; nothing "
        "changed; it runs again when due" in chat.stdout
    )
    assert len(anthropic_server.requests) == 4
    with MemoryStore(workspace_database) as store:
        runs = [run for run in store.history.runs() if run["actor"] == "consolidation"]
        assert len(runs) == 1


def test_a_tool_round_trip_and_a_refused_escape(
    tmp_path: Path, memctl: MemctlRunner, anthropic_server: AnthropicServer
) -> None:
    workspace = tmp_path / "project"
    workspace.mkdir()
    (tmp_path / "secret.txt").write_text("top secret")
    anthropic_server.script(
        tool_reply(("write_file", {"path": "hello.py", "content": "print('hi')\n"})),
        tool_reply(("read_file", {"path": "hello.py"}), ("read_file", {"path": "../secret.txt"})),
        text_reply("Wrote and checked hello.py."),
        text_reply("[]"),
    )
    done = memctl(
        "chat",
        "--workspace",
        str(workspace),
        "--dangerously-skip-approvals",
        input="create hello.py\n",
        env=model_env(anthropic_server),
    )
    assert done.returncode == 0, done.stderr
    assert "--dangerously-skip-approvals: commands, writes and edits run without asking" in (
        done.stdout
    )
    assert (workspace / "hello.py").read_text() == "print('hi')\n"
    assert "⏺ write_file(hello.py)" in done.stdout and "⏺ read_file(../secret.txt)" in done.stdout
    results = main_calls(anthropic_server)[2]["messages"][-1]["content"]
    read_back, escape = [block for block in results if block["type"] == "tool_result"]
    assert "print('hi')" in read_back["content"] and "is_error" not in read_back
    assert escape["is_error"] is True and "outside the workspace" in escape["content"]
    assert "top secret" not in json.dumps(anthropic_server.requests)
    # The workspace's memory lives in the workspace.
    assert (workspace / ".memory" / "memstore.db").exists()


def test_slash_commands(
    tmp_path: Path, memctl: MemctlRunner, anthropic_server: AnthropicServer
) -> None:
    commands = "\n".join(
        [
            "/remember project: the staging database is reset every Sunday",
            "/memory",
            "/memory the-staging-database-is-reset-every",
            "/recall",
            "/cost",
            "/remember token sk-ant-api03-" + "A1b2C3d4E5" * 8,
            "/forget the-staging-database-is-reset-every",
            "/forget no-such-memory",
            "/nonsense",
            "/exit",
        ]
    )
    done = memctl("chat", input=commands + "\n", env=model_env(anthropic_server))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "remembered the-staging-database-is-reset-every" in out
    assert "type: project" in out
    assert "nothing recalled yet" in out
    assert "0 model calls" in out and "cache reads 0" in out
    assert "looks like it holds a secret (Anthropic API key); not saved" in out
    assert "forgot the-staging-database-is-reset-every" in out
    assert "no memory named 'no-such-memory'" in out
    assert "unknown command /nonsense" in out
    assert anthropic_server.requests == []
    assert not (tmp_path / ".memory" / "the-staging-database-is-reset-every.md").exists()


def test_an_api_failure_is_reported_and_the_session_goes_on(
    memctl: MemctlRunner, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.script(
        *[error_reply(529, "overloaded_error", "Overloaded")] * 5,  # the first try + 4 retries
        text_reply("Second time lucky."),
        text_reply("[]"),
    )
    done = memctl("chat", input="hello\nhello again\n", env=model_env(anthropic_server))
    assert done.returncode == 0, done.stderr
    assert "error: the model API answered 529: Overloaded" in done.stdout
    assert "Second time lucky." in done.stdout
    # The failed turn's message was kept: the next request carries both.
    last = main_calls(anthropic_server)[-1]["messages"]
    assert "hello" in texts(last[0]) and "hello again" in texts(last[0])


def test_no_api_key_says_how_to_set_one(memctl: MemctlRunner) -> None:
    env = {"ANTHROPIC_API_KEY": "", "ANTHROPIC_AUTH_TOKEN": "", "ANTHROPIC_BASE_URL": ""}
    done = memctl("chat", env=env)
    assert done.returncode == 1
    assert done.stderr.startswith("memctl: error: memctl chat needs a model: set ANTHROPIC_API_KEY")
    assert "ANTHROPIC_BASE_URL" in done.stderr and "recall --offline" in done.stderr
    assert len(done.stderr.splitlines()) == 1


def test_a_long_session_is_compacted(
    tmp_path: Path, memctl: MemctlRunner, anthropic_server: AnthropicServer
) -> None:
    # Turn 1: 41 rounds of tool calls (83 messages) with 1,000-character outputs. Turn 2
    # snips turn 1's middle and, over the context budget, summarises what came before it.
    anthropic_server.script(
        *[tool_reply(("bash", {"command": "printf '%01000d' 0"}))] * 41,
        text_reply("ran them all"),
        text_reply("[]"),
        text_reply("SUMMARY: the user ran printf 41 times"),
        text_reply("second answer"),
        text_reply("[]"),
    )
    done = memctl(
        "chat",
        "--context-tokens",
        "1000",
        "--dangerously-skip-approvals",
        input="run printf 41 times\nwhat did we do?\n",
        env=model_env(anthropic_server),
    )
    assert done.returncode == 0, done.stderr
    assert "[snip]" in done.stdout and "[auto compact]" in done.stdout
    calls = main_calls(anthropic_server)
    # Within turn 1, older outputs were shortened (micro), the recent ones kept whole.
    late = json.dumps(calls[40]["messages"])
    assert "old tool result shortened" in late and "0" * 1000 in late
    final = json.dumps(calls[-1]["messages"])
    assert "SUMMARY: the user ran printf 41 times" in final and "what did we do?" in final
    assert len(final) < 8_000
    summary_request = next(r for r in anthropic_server.requests if "Summarise" in str(r["system"]))
    assert "run printf 41 times" in summary_request["messages"][0]["content"]
    # The full conversation is on disk, and so is the context as it was before compaction.
    (session,) = [p for p in (tmp_path / ".memory" / "sessions").iterdir() if p.is_dir()]
    assert len((session / "transcript.jsonl").read_text().splitlines()) == 86
    assert "run printf 41 times" in (session / "before-compaction-1.jsonl").read_text()


def test_prompt_too_long_triggers_one_reactive_compaction(
    memctl: MemctlRunner, anthropic_server: AnthropicServer
) -> None:
    too_long = error_reply(400, "invalid_request_error", "prompt is too long: 201000 tokens")
    anthropic_server.script(
        text_reply("first answer"),
        text_reply("[]"),
        too_long,
        text_reply("SUMMARY: a first question was answered"),
        text_reply("second answer"),
        text_reply("[]"),
    )
    done = memctl(
        "chat", input="first question\nsecond question\n", env=model_env(anthropic_server)
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("[reactive compact]") == 1 and "second answer" in done.stdout
    retry = json.dumps(main_calls(anthropic_server)[-1]["messages"])
    assert "SUMMARY: a first question was answered" in retry and "first answer" not in retry


def test_a_session_can_be_resumed_after_a_crash(
    tmp_path: Path, memctl: MemctlRunner, anthropic_server: AnthropicServer
) -> None:
    env = {**model_env(anthropic_server)}
    anthropic_server.script(text_reply("Nice to meet you, Ada."))
    assert memctl("chat", "--no-memory", input="my name is Ada\n", env=env).returncode == 0
    (session,) = [p for p in (tmp_path / ".memory" / "sessions").iterdir() if p.is_dir()]
    with (session / "transcript.jsonl").open("a") as transcript:
        transcript.write('{"role": "user", "content": [{"type": "te')  # killed mid-write
    anthropic_server.requests.clear()
    anthropic_server.script(text_reply("Your name is Ada."))
    resumed = memctl("chat", "--no-memory", "--resume", input="what is my name?\n", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert (
        f"resumed session {session.name}: 2 messages; 1 unreadable lines skipped" in resumed.stdout
    )
    (request,) = main_calls(anthropic_server)
    assert [texts(m) for m in request["messages"]] == [
        "my name is Ada",
        "Nice to meet you, Ada.",
        "what is my name?",
    ]
    # The transcript goes on after the partial line, readable.
    lines = (session / "transcript.jsonl").read_text().splitlines()
    assert len(lines) == 5 and json.loads(lines[-1])["content"][0]["text"] == "Your name is Ada."
    missing = memctl("chat", "--session", "19990101", input="", env=env)
    assert missing.returncode == 1 and "no saved session '19990101'" in missing.stderr
    assert anthropic_server.replies == []  # every scripted answer was asked for


def test_cost_shows_the_sessions_tokens_and_cache_use(
    memctl: MemctlRunner, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.script(
        text_reply(
            "Hello.", input_tokens=1200, output_tokens=30, cache_read=900, cache_creation=300
        ),
        text_reply("[]", input_tokens=400, output_tokens=2),
    )
    done = memctl("chat", input="hi\n/cost\n", env=model_env(anthropic_server))
    assert done.returncode == 0, done.stderr
    assert (
        "agent: 1 model calls · input 1,200 · output 30 · cache reads 900 · cache writes 300"
        in done.stdout
    )
    assert "memory and summaries: 1 model calls · input 400 · output 2" in done.stdout


def test_recall_command_says_why_the_keyword_path_chose_each_memory(
    memctl: MemctlRunner, anthropic_server: AnthropicServer
) -> None:
    added = memctl(
        "add",
        "project-deploy",
        "-t",
        "project",
        "-d",
        "Deploys use the release workflow",
        "-b",
        "x",
    )
    assert added.returncode == 0, added.stderr
    anthropic_server.script(
        text_reply("I cannot choose."),  # selection: not an array, so keyword recall
        text_reply("Tag a release."),
        text_reply("[]"),  # extraction: nothing to learn
    )
    done = memctl(
        "chat", input="how do I deploy?\n/recall\n/exit\n", env=model_env(anthropic_server)
    )
    assert done.returncode == 0, done.stderr
    assert "keyword recall (unusable model reply" in done.stdout
    assert "  project-deploy  score " in done.stdout and "matched: deploy" in done.stdout


# -- the terminal: a real pty, keys typed as a person types them ----------------------------


@pytest.fixture
def terminal(tmp_path: Path, anthropic_server: AnthropicServer) -> Iterator[Any]:
    """Start `memctl chat ARGS` on a pseudo-terminal (one per test), at the prompt."""
    opened: list[Terminal] = []

    def start(*args: str, rows: int = 40) -> Terminal:
        term = Terminal(["chat", *args], cwd=tmp_path, env=model_env(anthropic_server), rows=rows)
        opened.append(term)
        term.wait_for("›")
        return term

    yield start
    for term in opened:
        term.close()


def user_texts(server: AnthropicServer) -> list[str]:
    """The newest user message of each of the agent's calls, as the model got it."""
    return [texts(call["messages"][-1]) for call in main_calls(server)]


def test_a_pasted_block_of_lines_is_one_message(
    terminal: Any, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.script(text_reply("Got all three lines."))
    term = terminal("--no-memory")
    term.paste("first line\nsecond line\nthird line")
    term.type("\r")
    term.wait_for("Got all three lines.")
    term.type("\x04")  # Ctrl-D at an empty prompt ends the session
    assert term.finish() == 0
    assert user_texts(anthropic_server) == ["first line\nsecond line\nthird line"]


def test_a_multi_line_message_can_be_typed(
    terminal: Any, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.script(text_reply("One message."))
    term = terminal("--no-memory")
    # A line ending in a backslash goes on; Esc then Enter starts a new line too.
    term.type("first\\\rsecond\x1b\rthird\r")
    term.wait_for("One message.")
    term.type("/exit\r")
    assert term.finish() == 0
    assert user_texts(anthropic_server) == ["first\nsecond\nthird"]


def test_ctrl_c_mid_answer_keeps_the_partial_answer_once(
    terminal: Any, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.script(
        paused_reply("Partial answer here, and then much more that never comes.", 30),
        text_reply("A fresh answer."),
    )
    term = terminal("--no-memory")
    term.type("tell me a story\r")
    term.wait_for("Partial answer here")
    time.sleep(0.3)  # a person reads a moment before pressing Ctrl-C
    term.type("\x03")
    term.wait_for("[turn stopped; the session goes on]")
    term.type("go on\r")
    screen = term.wait_for("A fresh answer.")
    term.type("\x04")
    assert term.finish() == 0
    assert screen.count("Partial answer here") == 1
    assert "^C" not in screen


def test_keys_typed_while_an_answer_streams_reach_the_next_prompt(
    terminal: Any, anthropic_server: AnthropicServer
) -> None:
    # In the terminal's line mode a typed-ahead Enter arrived as a new line (the message was
    # not sent) and a Ctrl-D was an end-of-file nobody read: the session never ended.
    anthropic_server.script(
        paused_reply("The first answer, then a pause before its end.", 2),
        paused_reply("The second answer, then a pause before its end.", 2),
    )
    term = terminal("--no-memory")
    term.type("first question\r")
    term.wait_for("The first answer")
    term.type("second question\r")
    term.wait_for("The second answer")
    term.type("\x04")
    assert term.finish(timeout=30) == 0
    assert user_texts(anthropic_server) == ["first question", "second question"]
    screen = term.screen()
    assert "pause before its end." in screen.split("The second answer")[1]
    assert "second question" in screen  # shown at the prompt it reached, once
    assert screen.count("second question") == 1


@pytest.mark.parametrize("how", ["ctrl-d", "a refusal at start-up"])
def test_the_terminal_is_left_as_it_was(
    tmp_path: Path, anthropic_server: AnthropicServer, how: str
) -> None:
    # The chat takes the terminal out of line mode from its start: every way out restores it.
    args = ["chat", "--no-memory"]
    if how != "ctrl-d":
        args += ["--workspace", str(tmp_path / "no-such-folder")]
    term = Terminal(args, cwd=tmp_path, env=model_env(anthropic_server))
    try:
        before = termios.tcgetattr(term.fd)
        if how == "ctrl-d":
            term.wait_for("›")
            term.type("\x04")
            assert term.finish() == 0
        else:
            assert term.finish() == 1
            assert "no folder" in term.screen()
        assert termios.tcgetattr(term.fd) == before
        assert before[3] & termios.ICANON and before[3] & termios.ECHO
    finally:
        term.close()


def test_a_streamed_answer_taller_than_the_screen_is_shown_once(
    terminal: Any, anthropic_server: AnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a pytest-xdist worker's environment holds (tests/terminal.py): the window is still
    # the pty's 15 rows.
    monkeypatch.setenv("LINES", "24")
    monkeypatch.setenv("COLUMNS", "80")
    answer = "\n\n".join(f"paragraph {i} of the answer" for i in range(40))
    anthropic_server.script(text_reply(answer))
    term = terminal("--no-memory", rows=15)
    term.type("a long answer please\r")
    term.wait_for("paragraph 39 of the answer")
    term.type("\x04")
    assert term.finish() == 0
    screen = term.screen()
    assert [screen.count(f"paragraph {i} of the answer") for i in range(40)] == [1] * 40


def test_the_line_history_is_private_and_keeps_no_secrets(
    tmp_path: Path, terminal: Any, anthropic_server: AnthropicServer
) -> None:
    key = "sk-ant-api03-" + "A1b2C3d4E5" * 8
    anthropic_server.script(text_reply("ok"), text_reply("ok"))
    term = terminal("--no-memory")
    term.type("the tests live in tests/\r")
    term.wait_for("ok")
    term.type(f"use the key {key}\r")
    term.wait_for("ok\n", times=2)
    term.type("/cost\r")
    term.wait_for("memory and summaries")
    term.type("\x04")
    assert term.finish() == 0
    history = tmp_path / ".memory" / "chat_history"
    assert stat.S_IMODE(history.stat().st_mode) == 0o600
    saved = history.read_text()
    assert "+the tests live in tests/" in saved and "+/cost" in saved
    assert key not in saved and "use the key" not in saved


def test_an_old_history_file_is_made_private_and_loses_its_secrets(
    tmp_path: Path, terminal: Any
) -> None:
    key = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
    history = tmp_path / ".memory" / "chat_history"
    history.parent.mkdir()
    history.write_text(f"how do I deploy?\nexport GITHUB_TOKEN={key}\n")  # readline's format
    history.chmod(0o644)
    term = terminal("--no-memory")
    term.type("\x1b[A")  # up: the previous line comes back
    term.wait_for("› how do I deploy?")
    term.type("\x03\x04")
    assert term.finish() == 0
    assert stat.S_IMODE(history.stat().st_mode) == 0o600
    assert key not in history.read_text() and "+how do I deploy?" in history.read_text()


# -- piped: plain text, nothing cut ------------------------------------------------------------


def test_piped_input_is_one_message_per_line_and_a_backslash_goes_on(
    memctl: MemctlRunner, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.script(text_reply("first"), text_reply("second"))
    done = memctl(
        "chat",
        "--no-memory",
        input="line one\\\nline two\nanother message\n",
        env=model_env(anthropic_server),
    )
    assert done.returncode == 0, done.stderr
    assert user_texts(anthropic_server) == ["line one\nline two", "another message"]
    assert "\x1b" not in done.stdout  # no spinner, colours or Markdown codes when piped


# A reply quoting a hostile file: an instruction in tag characters, a right-to-left override,
# a terminal sequence, and a second variation selector that starts the stream's next piece
# (the scripted server sends 20 characters a piece), so it is shown although its piece alone
# does not say it follows one.
HIDDEN_SYSTEM = "".join(chr(0xE0000 + ord(c)) for c in "<system>")
HOSTILE_REPLY = (
    "The heart: ".ljust(18, ".")
    + f"\u2764\ufe0f\ufe0f and {HIDDEN_SYSTEM}, invoice\u202etxt.exe\x1b[2J"
)
SHOWN_REPLY = (
    "\u2764\ufe0f\\u{FE0F} and \\u{E003C}\\u{E0073}\\u{E0079}\\u{E0073}\\u{E0074}\\u{E0065}"
    "\\u{E006D}\\u{E003E}, invoice\\u{202E}txt.exe\\x1b[2J"
)


def test_the_models_reply_shows_what_it_hides_piped(
    memctl: MemctlRunner, anthropic_server: AnthropicServer
) -> None:
    assert HOSTILE_REPLY[19:21] == "\ufe0f\ufe0f"  # across the second piece's start
    anthropic_server.script(text_reply(HOSTILE_REPLY))
    done = memctl("chat", "--no-memory", input="read it\n", env=model_env(anthropic_server))
    assert done.returncode == 0, done.stderr
    assert SHOWN_REPLY in done.stdout
    assert not any(c in done.stdout for c in ("\u202e", "\x1b", "\U000e003c"))


def test_memory_name_shows_what_the_memory_hides(
    memctl: MemctlRunner, anthropic_server: AnthropicServer, tmp_path: Path
) -> None:
    with MemoryStore(tmp_path / ".memory" / "memstore.db") as store:
        store.create("deploy-notes", "project", "Deploy", f"Deploy.{HIDDEN_SYSTEM}\u202e")
    done = memctl(
        "chat", "--no-memory", input="/memory deploy-notes\n", env=model_env(anthropic_server)
    )
    assert done.returncode == 0, done.stderr
    assert "Deploy.\\u{E003C}\\u{E0073}" in done.stdout and "\\u{202E}" in done.stdout
    assert HIDDEN_SYSTEM[0] not in done.stdout and "\u202e" not in done.stdout


def test_the_models_reply_shows_what_it_hides_on_a_terminal(
    terminal: Any, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.script(text_reply(HOSTILE_REPLY))
    term = terminal("--no-memory")
    term.type("read it\r")
    screen = term.wait_for("txt.exe")
    term.type("\x04")
    assert term.finish() == 0
    assert "\\u{E003C}\\u{E0073}" in screen and "invoice\\u{202E}txt.exe" in screen


def test_a_session_is_said_saved_only_when_something_was(
    memctl: MemctlRunner, anthropic_server: AnthropicServer
) -> None:
    """A chat left before any message saved nothing: it said "session saved in …" of a
    session that --session could not find."""
    env = model_env(anthropic_server)
    empty = memctl("chat", "--no-memory", input="", env=env)
    assert empty.returncode == 0, empty.stderr
    assert "session saved" not in empty.stdout + empty.stderr
    anthropic_server.script(text_reply("hello"))
    talked = memctl("chat", "--no-memory", input="hi\n", env=env)
    assert talked.returncode == 0, talked.stderr
    assert "session saved in" in talked.stdout + talked.stderr


def test_piped_tool_lines_are_not_cut(
    tmp_path: Path, memctl: MemctlRunner, anthropic_server: AnthropicServer
) -> None:
    command = "echo " + "long-word-" * 30
    anthropic_server.script(tool_reply(("bash", {"command": command})), text_reply("done"))
    done = memctl(
        "chat",
        "--no-memory",
        "--dangerously-skip-approvals",
        input="run it\n",
        env=model_env(anthropic_server),
    )
    assert done.returncode == 0, done.stderr
    assert f"⏺ bash({command})" in done.stdout
    assert f"  ⎿ {'long-word-' * 30}" in done.stdout


def test_tool_input_of_any_shape_is_shown_and_answered(
    memctl: MemctlRunner, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.script(
        tool_reply(("bash", ["ls", "-la"]), ("read_file", "notes.txt"), ("glob", None)),  # type: ignore[arg-type]
        text_reply("sorry"),
    )
    done = memctl("chat", "--no-memory", input="look\n", env=model_env(anthropic_server))
    assert done.returncode == 0, done.stderr
    assert "internal error" not in done.stdout
    assert "⏺ bash(" in done.stdout and "⏺ read_file(" in done.stdout
    assert "sorry" in done.stdout
    results = main_calls(anthropic_server)[1]["messages"][-1]["content"]
    assert [r["is_error"] for r in results] == [True, True, True]


def test_cost_goes_on_after_resume(memctl: MemctlRunner, anthropic_server: AnthropicServer) -> None:
    env = model_env(anthropic_server)
    anthropic_server.script(text_reply("one", input_tokens=1000, output_tokens=10))
    assert memctl("chat", "--no-memory", input="hi\n", env=env).returncode == 0
    anthropic_server.script(text_reply("two", input_tokens=500, output_tokens=5, cache_read=7))
    resumed = memctl("chat", "--no-memory", "--resume", input="again\n/cost\n", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert (
        "agent: 2 model calls · input 1,500 · output 15 · cache reads 7 · cache writes 0"
        in resumed.stdout
    )


# -- approvals: asked on a terminal, refused when piped, skipped only when told -------------


def test_the_terminal_asks_before_a_command_a_write_or_an_edit(
    tmp_path: Path, terminal: Any, anthropic_server: AnthropicServer
) -> None:
    (tmp_path / "notes.txt").write_text("keep this line\nand this one\n")
    anthropic_server.script(
        tool_reply(("bash", {"command": "touch once.txt"})),
        tool_reply(("bash", {"command": "touch again.txt"})),
        tool_reply(("bash", {"command": "touch again.txt"})),
        tool_reply(("write_file", {"path": "notes.txt", "content": "keep this line\nnot this\n"})),
        tool_reply(("edit_file", {"path": "notes.txt", "old_text": "keep", "new_text": "drop"})),
        tool_reply(("read_file", {"path": "notes.txt"})),
        text_reply("all done"),
    )
    term = terminal("--no-memory")
    term.type("tidy up\r")
    term.wait_for("  $ touch once.txt\n  [y] once  [a] always this session  [n] no ›")
    term.type("y\r")
    term.wait_for("  $ touch again.txt\n  [y] once")
    term.type("a\r")
    term.wait_for("allowed for the rest of this session: bash command 'touch again.txt'")
    # The second `touch again.txt` runs unasked; the write shows its diff.
    term.wait_for("Write notes.txt (24 bytes, 2 lines)?\n  @@ -1,2 +1,2 @@")
    term.wait_for("  -and this one\n  +not this\n  [y] once")
    term.type("n\r")
    term.wait_for("why (optional, the model sees it) ›")
    term.type("keep my notes\r")
    term.wait_for("Edit notes.txt?\n  - keep\n  + drop\n  [y] once")
    term.type("n\r")
    term.wait_for("why (optional, the model sees it) ›", times=2)  # the edit's, not the write's
    term.type("\r")
    screen = term.wait_for("all done")
    term.type("\x04")
    assert term.finish() == 0
    assert screen.count("[y] once  [a] always this session  [n] no ›") == 4  # not read_file
    assert (tmp_path / "once.txt").exists() and (tmp_path / "again.txt").exists()
    assert (tmp_path / "notes.txt").read_text() == "keep this line\nand this one\n"
    results = [
        block
        for call in main_calls(anthropic_server)
        for block in call["messages"][-1]["content"]
        if block["type"] == "tool_result"
    ]
    assert [r.get("is_error", False) for r in results] == [False, False, False, True, True, False]
    assert results[3]["content"] == "not run: the user refused this call: keep my notes"
    assert results[4]["content"] == "not run: the user refused this call: no reason given"


def test_what_the_model_asks_to_run_is_shown_escaped(
    tmp_path: Path, terminal: Any, anthropic_server: AnthropicServer
) -> None:
    # A right-to-left override and an escape sequence would make the screen lie.
    command = "echo safe \u202e; rm -rf ~ \x1b[2K"
    anthropic_server.script(tool_reply(("bash", {"command": command})), text_reply("ok"))
    term = terminal("--no-memory")
    term.type("go\r")
    term.wait_for("$ echo safe \\u202e; rm -rf ~ \\u001b[2K")
    # Ctrl-C once the question is asked (the prompt reads it as a key): before that, the
    # terminal turns it into SIGINT, which Python drops when it lands in a GC callback.
    term.wait_for("[n] no ›")
    term.type("\x03")  # Ctrl-C at the question stops the turn; nothing runs
    term.wait_for("[turn stopped; the session goes on]")
    term.type("\x04")
    assert term.finish() == 0


def test_piped_without_the_flag_refuses_what_needs_approval_and_goes_on(
    tmp_path: Path, memctl: MemctlRunner, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.script(
        tool_reply(
            ("bash", {"command": "touch ran.txt"}),
            ("write_file", {"path": "new.txt", "content": "x"}),
            ("glob", {"pattern": "*"}),
        ),
        text_reply("I could not."),
        text_reply("Second answer."),
    )
    done = memctl(
        "chat", "--no-memory", input="make files\nand now?\n", env=model_env(anthropic_server)
    )
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "ran.txt").exists() and not (tmp_path / "new.txt").exists()
    bash, write, glob = main_calls(anthropic_server)[1]["messages"][-1]["content"]
    for refused in (bash, write):
        assert refused["is_error"] is True
        assert "needs the user's approval and there is no terminal" in refused["content"]
        assert "--dangerously-skip-approvals" in refused["content"]
    assert "is_error" not in glob  # read-only: no approval needed
    assert "I could not." in done.stdout and "Second answer." in done.stdout


def test_an_allow_rule_of_the_settings_runs_piped(
    tmp_path: Path, memctl: MemctlRunner, anthropic_server: AnthropicServer
) -> None:
    settings = tmp_path / "settings.toml"
    settings.write_text('[chat]\nallow = ["bash(touch *)"]\n')
    env = {**model_env(anthropic_server), "MEMSTORE_SETTINGS": str(settings)}
    anthropic_server.script(
        tool_reply(("bash", {"command": "touch allowed.txt"})),
        tool_reply(("bash", {"command": "touch x.txt; touch sneaky.txt"})),
        text_reply("done"),
    )
    done = memctl("chat", "--no-memory", input="go\n", env=env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "allowed.txt").exists()
    assert not (tmp_path / "x.txt").exists() and not (tmp_path / "sneaky.txt").exists()

    settings.write_text('[chat]\nallow = ["rm -rf"]\n')
    refused = memctl("chat", "--no-memory", input="go\n", env=env)
    assert refused.returncode == 1 and len(refused.stderr.splitlines()) == 1
    assert refused.stderr.startswith("memctl: error: allow rule 'rm -rf' is not understood")

    # A glob that is not one is refused when the settings are read, not when a tool call
    # first meets it (it crashed the turn there).
    settings.write_text('[chat]\nallow = ["write_file([z-a])"]\n')
    anthropic_server.script(tool_reply(("write_file", {"path": "a.txt", "content": "x"})))
    bad_glob = memctl("chat", "--no-memory", input="go\n", env=env)
    assert bad_glob.returncode == 1 and len(bad_glob.stderr.splitlines()) == 1, bad_glob.stderr
    assert bad_glob.stderr.startswith("memctl: error: allow rule 'write_file([z-a])'")
    assert not (tmp_path / "a.txt").exists()


def test_chat_starts_on_a_read_only_store_recalls_and_says_once_it_learns_nothing(
    tmp_path: Path, memctl: MemctlRunner, anthropic_server: AnthropicServer
) -> None:
    skip_without_read_only_mounts()
    added = memctl(
        "add",
        PREFERENCE["name"],
        "-t",
        PREFERENCE["type"],
        "-d",
        PREFERENCE["description"],
        "-b",
        PREFERENCE["body"],
    )
    assert added.returncode == 0, added.stderr
    memory = tmp_path / ".memory"
    before = sorted(p.name for p in memory.iterdir())
    # Two turns, each with selection and the reply: no extraction call (nothing could be saved).
    anthropic_server.script(
        text_reply("[0]"), text_reply("4 spaces."), text_reply("[0]"), text_reply("Still 4.")
    )
    chat = memctl_read_only(
        memory,
        "chat",
        cwd=tmp_path,
        env=model_env(anthropic_server),
        input="how do I indent python?\nand in tests?\n",
    )
    assert chat.returncode == 0, chat.stderr
    assert "4 spaces." in chat.stdout and "Still 4." in chat.stdout
    assert len(anthropic_server.requests) == 4
    first_turn = main_calls(anthropic_server)[0]
    assert PREFERENCE["body"] in texts(first_turn["messages"][-1])  # recalled
    said = "is read-only: recall works, but nothing is learned this session"
    assert chat.stdout.count(said) == 1, chat.stdout
    # The session is saved where it can be, and the chat says where.
    saved = [line for line in chat.stdout.splitlines() if "this session is saved in" in line]
    assert len(saved) == 1 and f"cannot write {memory / 'sessions'}" in saved[0], chat.stdout
    folder = Path(saved[0].rsplit(" ", 1)[1])
    try:
        assert "how do I indent python?" in (folder / "transcript.jsonl").read_text()
    finally:
        shutil.rmtree(folder.parent)
    assert sorted(p.name for p in memory.iterdir()) == before
