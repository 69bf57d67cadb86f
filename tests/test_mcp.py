"""`memctl mcp`, the real installed command in a subprocess, driven by the `mcp` SDK's own stdio
client: its tools and resources, the store, history and `.memory/` after each call, and
hostile calls that must change nothing and leave the server answering."""

from __future__ import annotations

import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult, Implementation

from memstore.files.format import render_index
from memstore.storage.store import MemoryStore
from tests.conftest import MemctlRunner

MEMCTL = str(Path(sys.executable).with_name("memctl"))
CLIENT = Implementation(name="test-client", version="9.9")
TOOLS = {"recall", "search", "show", "list", "remember", "update", "forget", "history"}


def _environment(**extra: str) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("MEMSTORE_DB", "MEMCTL_DB")}
    return {**environment, **extra}


@asynccontextmanager
async def connected(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """A session with `memctl [ARGS] mcp` started in `cwd`; its stderr goes to cwd/stderr."""
    server = StdioServerParameters(
        command=MEMCTL, args=[*args, "mcp"], cwd=cwd, env=env or _environment()
    )
    with (cwd / "stderr").open("w") as errlog:
        async with (
            stdio_client(server, errlog=errlog) as (read, write),
            ClientSession(read, write, client_info=CLIENT, read_timeout_seconds=60) as session,
        ):
            await session.initialize()
            yield session


def run(
    cwd: Path,
    scenario: Callable[[ClientSession], Awaitable[None]],
    env: dict[str, str] | None = None,
) -> None:
    async def main() -> None:
        async with connected(cwd, env=env) as session:
            await scenario(session)

    anyio.run(main)
    assert "Traceback" not in (cwd / "stderr").read_text()


def _store(where: Path | str) -> MemoryStore:
    """The store of `memctl mcp` run in the workspace `where`, or the server database whose
    URL `where` is."""
    if isinstance(where, str):
        return MemoryStore(where, create=False)
    return MemoryStore(where / ".memory" / "memstore.db", create=False)


def _world(workspace: Path) -> tuple[Any, ...]:
    """Everything a call could change: the memories, the history, and `.memory/`'s files."""
    with _store(workspace) as store:
        memories = store.memories()
        events = store.history.events()
        runs = store.history.runs()
    folder = workspace / ".memory"
    files = {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.name.startswith("memstore.db")
    }
    return memories, events, runs, files


def _ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def _error(result: CallToolResult) -> str:
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert "\n" not in text and "Traceback" not in text
    return text


async def _remember(session: ClientSession, **fields: str) -> dict[str, Any]:
    return _ok(await session.call_tool("remember", fields))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / ".memory").mkdir(parents=True)
    return project


@pytest.fixture
def where(workspace: Path, database: Path | str) -> Path | str:
    """For a test on both engines: the store `memctl mcp` in the workspace uses, for
    _store(): the workspace's own on SQLite, the server's database (MEMSTORE_DB) on
    PostgreSQL."""
    return database if isinstance(database, str) else workspace


@pytest.fixture
def engine_environment(where: Path | str) -> dict[str, str]:
    """memctl's environment for that store."""
    return _environment(MEMSTORE_DB=where) if isinstance(where, str) else _environment()


def test_tools_and_resources_are_described_for_a_model(workspace: Path) -> None:
    async def scenario(session: ClientSession) -> None:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(tools) == TOOLS
        for tool in tools.values():
            assert tool.description and len(tool.description) > 80
            assert tool.output_schema is not None
            for name, schema in tool.input_schema["properties"].items():
                assert schema.get("description"), (tool.name, name)
                strings = [schema, *schema.get("anyOf", [])]
                for option in strings:
                    if option.get("type") == "string" and "enum" not in option:
                        assert option.get("maxLength"), (tool.name, name)
        assert tools["recall"].annotations.read_only_hint  # type: ignore[union-attr]
        # `update` takes the version under the name `show` gives it.
        assert "version" in tools["show"].output_schema["properties"]  # type: ignore[index]
        assert "version" in tools["update"].input_schema["properties"]
        assert "expected_version" not in tools["update"].input_schema["properties"]
        resources = (await session.list_resources()).resources
        assert [(r.name, str(r.uri)) for r in resources] == [("MEMORY.md", "memstore://index")]
        templates = (await session.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["memstore://memory/{name}"]

    run(workspace, scenario)


@pytest.mark.both_engines
def test_each_tool_changes_the_store_as_one_audited_run_of_the_client(
    workspace: Path, where: Path | str, engine_environment: dict[str, str]
) -> None:
    async def scenario(session: ClientSession) -> None:
        made = await _remember(
            session,
            type="feedback",
            description="Run the tests with pytest -x before each commit",
            body="The user asked: always run `pytest -x` before committing.",
        )
        assert made["changed"] and made["name"] == "run-the-tests-with-pytest-x"
        with _store(where) as store:
            assert store.get(made["name"]).type == "feedback"
            (run_row,) = store.history.runs()
        assert (run_row["actor"], run_row["command"]) == ("mcp", "mcp remember (test-client 9.9)")
        exported = workspace / ".memory" / f"{made['name']}.md"
        assert "pytest -x" in exported.read_text()

        # An identical memory is reported, not saved twice; a taken name gets a free one.
        again = await _remember(
            session,
            type="feedback",
            description="Run the tests with pytest -x before each commit",
            body="The user asked: always run `pytest -x` before committing.",
        )
        assert (again["changed"], again["name"], again["run_id"]) == (False, made["name"], None)
        other = await _remember(
            session,
            type="project",
            name=made["name"],
            description="The CI runs pytest on Python 3.11 and 3.12",
            body="See .github/workflows/ci.yml.",
        )
        assert other["name"] == f"{made['name']}-2" and "taken" in other["note"]
        with _store(where) as store:
            assert len(store.history.runs()) == 2

        found = _ok(await session.call_tool("search", {"query": "pytest", "type": "project"}))
        assert [hit["name"] for hit in found["hits"]] == [other["name"]]
        listed = _ok(await session.call_tool("list", {"type": "feedback"}))
        assert (listed["count"], listed["memories"][0]["name"]) == (1, made["name"])
        first = _ok(await session.call_tool("list", {"limit": 1}))
        assert (first["count"], len(first["memories"])) == (2, 1)
        shown = _ok(await session.call_tool("show", {"name": made["name"]}))
        assert shown["text"] == exported.read_text()
        recalled = _ok(await session.call_tool("recall", {"text": "Should I run pytest now?"}))
        assert recalled["path"] == "keyword"
        best = recalled["memories"][0]
        assert best["name"] in (made["name"], other["name"]) and "pytest" in best["matched"]

        # An update names the version `show` gave; a stale one is refused.
        updated = _ok(
            await session.call_tool(
                "update",
                {"name": made["name"], "new_name": "pytest-before-commit", "version": 1},
            )
        )
        assert (updated["name"], updated["version"]) == ("pytest-before-commit", 2)
        assert not exported.exists()
        assert (workspace / ".memory" / "pytest-before-commit.md").is_file()
        stale = await session.call_tool(
            "update", {"name": "pytest-before-commit", "body": "New.", "version": 1}
        )
        assert "changed since version 1" in _error(stale)
        # By its former name too (clients written before it was `version`).
        former = {"name": "pytest-before-commit", "body": "New.", "expected_version": 1}
        assert "changed since version 1" in _error(await session.call_tool("update", former))

        forgotten = _ok(await session.call_tool("forget", {"name": "pytest-before-commit"}))
        assert forgotten["changed"] and "memctl restore" in forgotten["note"]
        with _store(where) as store:
            assert store.find("pytest-before-commit") is None
            commands = [row["command"] for row in store.history.runs()]
        assert commands[-2:] == ["mcp update (test-client 9.9)", "mcp forget (test-client 9.9)"]

        history = _ok(await session.call_tool("history", {"name": "pytest-before-commit"}))
        assert [e["operation"] for e in history["events"]] == ["create", "update", "delete"]
        assert history["events"][1]["changed"] == ["name"]
        assert {e["actor"] for e in history["events"]} == {"mcp"}
        recent = _ok(await session.call_tool("history", {"limit": 2}))
        assert [r["command"] for r in recent["runs"]] == commands[-2:]

    run(workspace, scenario, engine_environment)
    restored = subprocess.run(
        [MEMCTL, "restore", "pytest-before-commit"], cwd=workspace, env=engine_environment
    )
    assert restored.returncode == 0
    with _store(where) as store:
        assert store.get("pytest-before-commit").description.startswith("Run the tests")
    # On PostgreSQL the server holds it all: no database in the workspace.
    assert (workspace / ".memory" / "memstore.db").exists() == isinstance(where, Path)


def test_resources_are_rendered_from_the_store(workspace: Path) -> None:
    async def scenario(session: ClientSession) -> None:
        await _remember(session, type="user", name="tabs", description="Tabs", body="Tabs.")
        (index,) = (await session.read_resource("memstore://index")).contents
        with _store(workspace) as store:
            assert index.text == render_index(store.summaries())  # type: ignore[union-attr]
        # Not read from disk: a file edited by hand is not what the resource says.
        (workspace / ".memory" / "tabs.md").write_text("edited by hand\n")
        (memory,) = (await session.read_resource("memstore://memory/tabs")).contents
        assert "name: tabs" in memory.text and "Tabs." in memory.text  # type: ignore[union-attr]
        for uri in ("memstore://memory/nothere", "memstore://memory/..%2F..%2Fetc"):
            with pytest.raises(Exception, match=r"Unknown resource|no memory|invalid"):
                await session.read_resource(uri)

    run(workspace, scenario)


def test_history_gives_a_drop_its_reason(workspace: Path) -> None:
    with MemoryStore(workspace / ".memory" / "memstore.db") as store:
        store.create("old-ci", "project", "CI runs on Jenkins", "The Jenkinsfile is at the root.")
        with store.transaction(actor="consolidation") as tx:
            tx.delete(tx.get("old-ci"), reason="Moved to \u202eGitHub Actions")

    async def scenario(session: ClientSession) -> None:
        history = _ok(await session.call_tool("history", {"name": "old-ci"}))
        reasons = [e["reason"] for e in history["events"]]
        assert reasons == [None, "Moved to \\u{202E}GitHub Actions"]  # shown, as all text is

    run(workspace, scenario)


@pytest.mark.both_engines
def test_recall_chooses_as_memctl_recall_offline(
    workspace: Path, memctl: MemctlRunner, engine_environment: dict[str, str]
) -> None:
    texts = ["how do I run the tests?", "deploy to staging on friday", "nothing matches zebra"]

    async def scenario(session: ClientSession) -> None:
        for description, body in [
            ("Run the tests with pytest -x", "Always `pytest -x` before a commit."),
            ("Deploys go to staging first", "Never deploy on Fridays; staging, then production."),
            ("Prefers tabs", "Indent with tabs."),
        ]:
            await _remember(session, type="project", description=description, body=body)
        for text in texts:
            recalled = _ok(await session.call_tool("recall", {"text": text}))
            answer = memctl(
                "recall", "--offline", "--json", text, cwd=workspace, env=engine_environment
            )
            offline = json.loads(answer.stdout)
            assert [m["name"] for m in recalled["memories"]] == [
                m["name"] for m in offline["memories"]
            ]
            assert [m["matched"] for m in recalled["memories"]] == [
                m["matched"] for m in offline["memories"]
            ]
        assert recalled["memories"] == [] and recalled["reason"]

    run(workspace, scenario, engine_environment)


def test_a_hand_edit_in_memory_folder_is_kept_and_the_result_says_so(workspace: Path) -> None:
    async def scenario(session: ClientSession) -> None:
        await _remember(session, type="user", name="tabs", description="Tabs", body="Tabs.")
        edited = workspace / ".memory" / "tabs.md"
        edited.write_text(edited.read_text().replace("Tabs.", "Tabs, width 8 (by hand)."))
        made = await _remember(session, type="user", description="Likes dark mode", body="Dark.")
        assert made["changed"] and ".memory/ was not rewritten" in made["note"]
        assert "(by hand)" in edited.read_text()
        with _store(workspace) as store:
            assert store.get("likes-dark-mode").body == "Dark."

    run(workspace, scenario)


HUGE = "x" * 200_000
HOSTILE: list[tuple[str, dict[str, Any], str]] = [
    ("remember", {"type": "user", "description": "d", "body": "b", "name": "../evil"}, "name"),
    ("remember", {"type": "user", "description": "d", "body": "b", "name": "a/b"}, "name"),
    ("remember", {"type": "user", "description": "d", "body": HUGE}, "at most 100000"),
    ("remember", {"type": "user", "description": HUGE, "body": "b"}, "at most 1000"),
    ("remember", {"type": "user", "description": "d", "body": "b", "name": HUGE}, "at most 64"),
    ("remember", {"type": "secret", "description": "d", "body": "b"}, "type"),
    ("remember", {"type": "user", "description": "d"}, "body"),
    ("remember", {"type": "user", "description": "two\nlines", "body": "b"}, "single line"),
    ("remember", {"type": "user", "description": "key", "body": "AKIA" + "Z" * 16}, "secret"),
    ("remember", {"type": "user", "description": "d", "body": "\x00"}, "NUL"),
    ("update", {"name": "tabs", "body": "token ghp_" + "a" * 36}, "secret"),
    ("update", {"name": "tabs", "new_name": "../tabs"}, "name"),
    ("update", {"name": "tabs"}, "nothing to change"),
    ("update", {"name": "nothere", "body": "b"}, "no memory named"),
    ("update", {"name": "tabs", "body": "b", "version": 7}, "changed since"),
    ("update", {"name": "tabs", "body": "b", "expected_version": 7}, "changed since"),
    ("update", {"name": "tabs", "body": "b", "version": 1, "expected_version": 2}, "differ"),
    ("update", {"name": "tabs", "body": "b", "version_seen": 1}, "unknown argument 'version_"),
    ("remember", {"type": "user", "description": "d", "body": "b", "x" * 10**5: 1}, "unknown"),
    ("forget", {"name": "../../etc/passwd"}, "name"),
    ("forget", {"name": "nothere"}, "no memory named"),
    ("show", {"name": "/etc/passwd"}, "name"),
    ("history", {"name": "nothere"}, "no history"),
    ("search", {"query": HUGE}, "at most 1000"),
    ("search", {"query": "tabs", "limit": "lots"}, "limit"),
    ("search", {"query": "tabs", "limit": 10**9}, "limit"),
    ("recall", {"text": HUGE}, "at most 10000"),
    ("recall", {"text": ["not", "text"]}, "text"),
    ("list", {"type": "nope"}, "type"),
    ("no-such-tool", {}, "Unknown tool"),
]


def test_hostile_calls_change_nothing_and_the_server_keeps_answering(workspace: Path) -> None:
    async def scenario(session: ClientSession) -> None:
        await _remember(session, type="user", name="tabs", description="Tabs", body="Tabs.")
        for tool, arguments, message in HOSTILE:
            before = _world(workspace)
            text = _error(await session.call_tool(tool, arguments))
            assert message in text, (tool, text)
            assert text.startswith(f"{tool}: ") or tool == "no-such-tool", text
            assert len(text) < 500, text  # the value of a huge argument is not echoed
            assert _world(workspace) == before, (tool, arguments)
        assert _ok(await session.call_tool("list", {}))["count"] == 1

    run(workspace, scenario)
    assert not (workspace.parent / "evil.md").exists()


def _raw_server(workspace: Path) -> subprocess.Popen[str]:
    """`memctl mcp` on an empty store of `workspace`, its stdin, stdout and stderr as pipes
    of text: the raw protocol, as a client's process sees it."""
    MemoryStore(workspace / ".memory" / "memstore.db").close()
    server = subprocess.Popen(
        [MEMCTL, "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=workspace,
        env=_environment(),
    )
    assert server.stdin is not None and server.stdout is not None
    return server


def test_malformed_messages_are_answered_and_the_server_lives_on(workspace: Path) -> None:
    """Raw lines on stdin, as a broken client might send them: each gets a JSON-RPC error
    or is dropped, nothing but protocol reaches stdout, and a well-formed call still works."""
    lines = [
        "this is not json",
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}),
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            }
        ),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": "nonsense"}),
        json.dumps({"jsonrpc": "2.0", "id": 4, "method": "no/such/method", "params": {}}),
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 5,
                "method": "tools/call",
                "params": {"name": "remember", "arguments": "not an object"},
            }
        ),
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 6,
                "method": "tools/call",
                "params": {"name": "list", "arguments": {}},
            }
        ),
    ]
    # stdin stays open until the last reply: at end of input the server cancels what runs.
    server = _raw_server(workspace)
    server.stdin.write("\n".join(lines) + "\n")
    server.stdin.flush()
    replies: dict[int, Any] = {}
    deadline = time.monotonic() + 60
    # Read by a thread, not select(): two replies that arrive in one read leave the second in
    # the file's buffer, where select() never sees it.
    received: queue.Queue[str] = queue.Queue()
    stdout = server.stdout
    assert stdout is not None

    def pump() -> None:
        for line in stdout:
            received.put(line)

    threading.Thread(target=pump, daemon=True).start()
    # Calls run concurrently (5's reply can come after 6's); 3 may get no reply at all.
    while not {1, 2, 4, 5, 6} <= replies.keys() and time.monotonic() < deadline:
        try:
            line = received.get(timeout=1)
        except queue.Empty:
            continue
        reply = json.loads(line)  # nothing but JSON-RPC on stdout
        replies[reply["id"]] = reply
    server.stdin.close()
    assert server.wait(timeout=60) == 0
    assert "Traceback" not in server.stderr.read()  # type: ignore[union-attr]
    assert replies[1]["error"]["code"] == -32602  # initialize without its parameters
    assert replies[4]["error"]["code"] == -32601  # no such method
    assert "error" in replies[5]  # arguments that are no object
    # Params that are no object: the SDK drops the line as no request, or answers an error.
    assert 3 not in replies or "error" in replies[3]
    assert replies[6]["result"]["structuredContent"] == {"memories": [], "count": 0}
    with _store(workspace) as store:
        assert store.history.runs() == []


def test_only_remember_creates_the_database(tmp_path: Path) -> None:
    async def scenario(session: ClientSession) -> None:
        # Reading an empty workspace finds nothing, which is no error.
        assert _ok(await session.call_tool("list", {})) == {"memories": [], "count": 0}
        recalled = _ok(await session.call_tool("recall", {"text": "tabs"}))
        assert recalled["memories"] == [] and "no memory here yet" in recalled["reason"]
        searched = _ok(await session.call_tool("search", {"query": "tabs"}))
        assert searched["hits"] == [] and "remember" in searched["note"]
        assert _ok(await session.call_tool("history", {})) == {"events": [], "runs": []}
        # A memory named, or a change, needs one that exists.
        for tool, arguments in [
            ("show", {"name": "a"}),
            ("update", {"name": "a", "body": "b"}),
            ("forget", {"name": "a"}),
            ("history", {"name": "a"}),
        ]:
            text = _error(await session.call_tool(tool, arguments))
            assert "no memory here yet" in text and "remember" in text
        (index,) = (await session.read_resource("memstore://index")).contents
        assert "name" not in index.text  # type: ignore[union-attr]
        assert not (tmp_path / ".memory").exists()
        await _remember(session, type="user", description="Likes tabs", body="Tabs.")
        assert _ok(await session.call_tool("list", {}))["count"] == 1

    run(tmp_path, scenario)
    assert (tmp_path / ".memory" / "likes-tabs.md").is_file()


def test_the_database_given_by_db_or_the_environment(tmp_path: Path) -> None:
    database = tmp_path / "elsewhere" / ".memory" / "memstore.db"
    database.parent.mkdir(parents=True)
    folder = tmp_path / "anywhere"
    folder.mkdir()

    async def remember(env: dict[str, str] | None, *args: str) -> None:
        async with connected(folder, *args, env=env) as session:
            await _remember(session, type="user", description="Likes dark mode", body="Dark.")

    anyio.run(remember, None, "--db", str(database))
    anyio.run(remember, _environment(MEMSTORE_DB=str(database)))
    with MemoryStore(database, create=False) as store:
        assert [m.name for m in store.memories()] == ["likes-dark-mode"]
    assert (tmp_path / "elsewhere" / ".memory" / "likes-dark-mode.md").is_file()
    assert not (folder / ".memory").exists()


def test_without_the_extra_memctl_mcp_says_how_to_install_it(memctl: MemctlRunner) -> None:
    # As if the mcp SDK were not installed: importing it fails.
    code = (
        "import sys; sys.modules['mcp'] = None; sys.argv = ['memctl', 'mcp'];"
        " from memctl.app import main; main()"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_environment()
    )
    assert completed.returncode == 1
    assert completed.stdout == ""
    (line,) = completed.stderr.splitlines()
    assert "pip install '.[mcp]'" in line and "pipx inject agent-memstore" in line


def test_in_a_terminal_memctl_mcp_says_a_client_starts_it(tmp_path: Path) -> None:
    """A person who runs it by hand is told what it is for, instead of a silent server
    that Ctrl-C does not stop (the SDK's stdin reader blocks on the terminal)."""
    import pty

    controller, terminal = pty.openpty()
    try:
        completed = subprocess.run(
            [MEMCTL, "mcp"],
            stdin=terminal,
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=_environment(),
            timeout=60,
        )
    finally:
        os.close(controller)
        os.close(terminal)
    assert completed.returncode == 1
    assert completed.stdout == ""
    (line,) = completed.stderr.splitlines()
    assert "claude mcp add memstore -- memctl mcp" in line
    assert not (tmp_path / ".memory").exists()


def test_ctrl_c_stops_the_server_and_says_so(workspace: Path) -> None:
    """A person who started `memctl mcp` by hand stops it with Ctrl-C: exit 130 and one line
    on stderr, as every memctl command (Typer alone exits 130 without a word)."""
    server = _raw_server(workspace)
    request = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    server.stdin.write(json.dumps(request) + "\n")
    server.stdin.flush()
    # Its answer says the server is in its loop, past start-up: the interrupt lands there.
    assert select.select([server.stdout], [], [], 60)[0], "the server did not answer"
    assert json.loads(server.stdout.readline())["id"] == 1
    server.send_signal(signal.SIGINT)
    try:
        _, stderr = server.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        pytest.fail("Ctrl-C did not stop the server")
    assert server.returncode == 130
    assert stderr.strip().splitlines() == ["memctl: interrupted"]
