"""The repository as a Claude Code plugin marketplace (`.claude-plugin/marketplace.json`,
`plugins/memstore/`): the manifests' shape, their hooks and MCP server run as Claude Code runs
them (the installed memctl, Claude Code's hook JSON on stdin), the hook's one line when memctl
is not on PATH; and, when a `claude` binary is there, `claude plugin validate` and a session of
the real Claude Code with the plugin, its model the loopback server."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
import typer.main
from memctl.app import app

from memstore import __version__
from memstore.integrations.claude_settings import HOOK_EVENTS
from memstore.learning.extract import EXTRACTION_SYSTEM
from memstore.storage.store import MemoryStore
from tests.anthropic_server import AnthropicServer, text_reply
from tests.test_hook import hook_event

ROOT = Path(__file__).resolve().parents[1]
MARKETPLACE = ROOT / ".claude-plugin" / "marketplace.json"
PLUGIN = ROOT / "plugins" / "memstore"
BIN = Path(sys.executable).parent  # where the installed memctl is
NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def hook_commands() -> dict[str, list[dict[str, Any]]]:
    """hooks.json's command hooks, by event."""
    hooks = load(PLUGIN / "hooks" / "hooks.json")["hooks"]
    return {
        event: [hook for group in groups for hook in group["hooks"]]
        for event, groups in hooks.items()
    }


def run_hook_command(
    command: str, stdin: str, cwd: Path, path: str
) -> subprocess.CompletedProcess[str]:
    """A hook's command as Claude Code runs it: through the shell, in the session's folder,
    with CLAUDE_PLUGIN_ROOT set and the event's JSON on stdin."""
    environment = {k: v for k, v in os.environ.items() if k not in ("MEMSTORE_DB", "MEMCTL_DB")}
    environment.update(PATH=path, CLAUDE_PLUGIN_ROOT=str(PLUGIN), CLAUDE_PROJECT_DIR=str(cwd))
    return subprocess.run(
        ["/bin/sh", "-c", command],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environment,
        timeout=60,
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A project with one memory, which the hooks should find."""
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    memory = {
        "--type": "project",
        "--description": "How to deploy to the staging cluster",
        "--body": "Run make deploy ENV=staging; the staging cluster is eu-west-2.",
    }
    added = subprocess.run(
        [str(BIN / "memctl"), "add", "deploy-staging", *(w for p in memory.items() for w in p)],
        capture_output=True,
        text=True,
        cwd=project,
        env={k: v for k, v in os.environ.items() if k not in ("MEMSTORE_DB", "MEMCTL_DB")},
        timeout=60,
    )
    assert added.returncode == 0, added.stderr
    return project


def test_the_marketplace_lists_the_plugin() -> None:
    marketplace = load(MARKETPLACE)
    assert NAME.match(marketplace["name"])
    assert marketplace["owner"]["name"]
    [entry] = marketplace["plugins"]
    assert entry["name"] == "memstore"
    assert entry["description"]
    assert (ROOT / entry["source"]).resolve() == PLUGIN
    manifest = load(PLUGIN / ".claude-plugin" / "plugin.json")
    assert manifest["name"] == entry["name"]
    assert manifest["version"] == __version__  # released together with memctl
    assert manifest["description"] and manifest["license"] == "MIT"


def test_the_hooks_are_the_events_memctl_hook_answers() -> None:
    commands = hook_commands()
    assert tuple(commands) == HOOK_EVENTS  # what `memctl claude install` writes too
    for event, hooks in commands.items():
        [hook] = hooks
        assert hook["type"] == "command"
        assert hook["timeout"] <= 10  # never keeps a prompt waiting long
        assert hook["command"] == f'sh "${{CLAUDE_PLUGIN_ROOT}}/scripts/memctl-hook.sh" {event}'
    assert (PLUGIN / "scripts" / "memctl-hook.sh").is_file()


@pytest.mark.parametrize("event", ["SessionStart", "UserPromptSubmit"])
def test_each_hook_answers_through_the_installed_memctl(workspace: Path, event: str) -> None:
    [hook] = hook_commands()[event]
    fields = {"source": "startup"} if event == "SessionStart" else {"prompt": "deploy to staging"}
    answered = run_hook_command(
        hook["command"],
        hook_event(event, workspace, **fields),
        workspace,
        f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    assert answered.returncode == 0, answered.stderr
    output = json.loads(answered.stdout)["hookSpecificOutput"]
    assert output["hookEventName"] == event
    assert "deploy-staging" in output["additionalContext"]


def test_stop_through_the_plugin_records_the_session_and_says_nothing(workspace: Path) -> None:
    [hook] = hook_commands()["Stop"]
    transcript = workspace / "transcript.jsonl"
    transcript.write_text("")
    answered = run_hook_command(
        hook["command"],
        hook_event("Stop", workspace, session_id="s-1", transcript_path=str(transcript)),
        workspace,
        f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    assert (answered.returncode, answered.stdout) == (0, "")


@pytest.mark.parametrize("event", HOOK_EVENTS)
def test_without_memctl_the_hook_says_so_in_one_line_and_never_blocks(
    tmp_path: Path, event: str
) -> None:
    [hook] = hook_commands()[event]
    empty = tmp_path / "bin"  # a PATH with no memctl on it
    empty.mkdir()
    answered = run_hook_command(
        hook["command"].replace("sh ", "/bin/sh ", 1),
        hook_event(event, tmp_path, prompt="hello"),
        tmp_path,
        str(empty),
    )
    # Exit 0: Claude Code goes on (2 would block the prompt; any other code is an error).
    assert answered.returncode == 0
    [line] = answered.stderr.splitlines()
    assert line.startswith("memstore: memctl is not on PATH; install it")
    if event == "SessionStart":  # shown to the person once, as the session starts
        assert json.loads(answered.stdout) == {"systemMessage": line}
    else:
        assert answered.stdout == ""


def test_the_mcp_server_is_memctl_mcp(workspace: Path) -> None:
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    [(name, server)] = load(PLUGIN / ".mcp.json")["mcpServers"].items()
    assert (name, server) == ("memstore", {"command": "memctl", "args": ["mcp"]})
    command = shutil.which(server["command"], path=str(BIN))
    assert command is not None

    async def tools() -> set[str]:
        environment = {k: v for k, v in os.environ.items() if k != "MEMSTORE_DB"}
        parameters = StdioServerParameters(
            command=command, args=server["args"], cwd=workspace, env=environment
        )
        with open(os.devnull, "w") as errlog:
            async with (
                stdio_client(parameters, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return {tool.name for tool in (await session.list_tools()).tools}

    assert {"recall", "search", "remember", "forget", "show"} <= anyio.run(tools)


def test_the_commands_use_memctls_own_commands() -> None:
    """Each slash command has a description, and every `memctl X` it names is a command."""
    root = typer.main.get_command(app)
    assert isinstance(root, typer.main.TyperGroup)
    known = set(root.list_commands(typer.Context(root)))
    commands = sorted((PLUGIN / "commands").glob("*.md"))
    assert {path.stem for path in commands} == {"remember", "search", "forget", "known"}
    for path in commands:
        text = path.read_text(encoding="utf-8")
        front = re.match(r"---\n(.*?)\n---\n", text, re.S)
        assert front is not None and re.search(r"(?m)^description: \S", front[1]), path.name
        named = set(re.findall(r"`memctl ([a-z]+)", text))
        assert named and named <= known, f"{path.name}: {named - known}"


def claude_binary() -> str | None:
    """Claude Code's CLI: on PATH, or installed with npm beside the clone."""
    found = shutil.which("claude") or ROOT / "node_modules" / ".bin" / "claude"
    return str(found) if Path(found).exists() else None


def required_claude() -> str:
    claude = claude_binary()
    if claude is None:
        if os.environ.get("MEMSTORE_REQUIRE_CLAUDE") == "1":
            pytest.fail("MEMSTORE_REQUIRE_CLAUDE=1 and no claude binary found")
        pytest.skip("no claude binary (npm install @anthropic-ai/claude-code)")
    return claude


@pytest.mark.parametrize("target", [PLUGIN, ROOT], ids=["plugin", "marketplace"])
def test_claude_plugin_validate_passes(tmp_path: Path, target: Path) -> None:
    claude = required_claude()
    environment = {**os.environ, "HOME": str(tmp_path)}  # it writes nothing of the user's
    environment.pop("CLAUDE_CONFIG_DIR", None)
    validated = subprocess.run(
        [claude, "plugin", "validate", "--strict", str(target)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert "Validation passed" in validated.stdout


def texts(request: dict[str, Any]) -> list[str]:
    """Every text block of a request's messages."""
    found = []
    for message in request["messages"]:
        content = message["content"]
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        found += [block["text"] for block in blocks if block.get("type") == "text"]
    return found


def test_claude_code_runs_the_plugin(
    tmp_path: Path, workspace: Path, anthropic_server: AnthropicServer
) -> None:
    """The real Claude Code, its model the loopback server, the plugin loaded as installed:
    the request it sends carries the hooks' memories, the MCP tools and /memstore:known."""
    claude = required_claude()
    environment = {k: v for k, v in os.environ.items() if k not in ("MEMSTORE_DB", "MEMCTL_DB")}
    environment.pop("CLAUDE_CONFIG_DIR", None)
    environment.update(
        HOME=str(tmp_path / "home"),
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        ANTHROPIC_BASE_URL=anthropic_server.url,
        ANTHROPIC_API_KEY="sk-ant-test-key",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_TELEMETRY="1",
        # `claude -p` sends its first request without waiting for MCP servers that are slow to
        # connect (memctl mcp on a loaded machine): set to false, it waits for them.
        MCP_CONNECTION_NONBLOCKING="false",
    )
    (tmp_path / "home").mkdir()

    def session(prompt: str) -> dict[str, Any]:
        anthropic_server.requests.clear()
        anthropic_server.script(*[text_reply("ok")] * 5)
        done = subprocess.run(
            [claude, "-p", prompt, "--plugin-dir", str(PLUGIN)],
            capture_output=True,
            text=True,
            cwd=workspace,
            env=environment,
            timeout=180,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        [request] = [r for r in anthropic_server.requests if r.get("tools")]
        return request

    asked = session("how do I deploy to staging?")
    text = "\n".join(texts(asked))
    assert "<memory_index>\n- [deploy-staging](deploy-staging.md)" in text  # SessionStart
    assert "<relevant_memories>\n## deploy-staging (project)" in text  # UserPromptSubmit
    if importlib.util.find_spec("mcp") is not None:
        tools = {tool["name"] for tool in asked["tools"]}
        assert {f"mcp__plugin_memstore_memstore__{n}" for n in ("recall", "remember")} <= tools

    known = session("/memstore:known")
    [expanded] = [t for t in texts(known) if t.startswith("memstore's index of this workspace")]
    assert "\n- [deploy-staging](deploy-staging.md) — How to deploy" in expanded


def test_claude_code_goes_on_without_memctl(
    tmp_path: Path, anthropic_server: AnthropicServer
) -> None:
    """memctl not on the PATH Claude Code runs hooks with: both hooks succeed with the one
    line, and the prompt reaches the model."""
    claude = required_claude()
    empty = tmp_path / "bin"
    empty.mkdir()
    (tmp_path / "home").mkdir()
    environment = {k: v for k, v in os.environ.items() if k != "CLAUDE_CONFIG_DIR"}
    environment.update(
        HOME=str(tmp_path / "home"),
        PATH=f"{empty}{os.pathsep}/usr/bin{os.pathsep}/bin",
        ANTHROPIC_BASE_URL=anthropic_server.url,
        ANTHROPIC_API_KEY="sk-ant-test-key",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_TELEMETRY="1",
    )
    if shutil.which("memctl", path=environment["PATH"]):
        pytest.skip("memctl is installed system-wide")
    anthropic_server.script(*[text_reply("ok")] * 5)
    streamed = ["--output-format", "stream-json", "--verbose", "--include-hook-events"]
    done = subprocess.run(
        [claude, "-p", "hello", "--plugin-dir", str(PLUGIN), *streamed],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environment,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    hooks = {e["hook_event"]: e for e in events if e.get("subtype") == "hook_response"}
    assert {"SessionStart", "UserPromptSubmit"} <= set(hooks)  # Stop too, as -p ends
    for hook in hooks.values():
        assert (hook["exit_code"], hook["outcome"]) == (0, "success")
        assert hook["stderr"].startswith("memstore: memctl is not on PATH")
    assert json.loads(hooks["SessionStart"]["stdout"])["systemMessage"].startswith("memstore:")
    assert any(r.get("tools") for r in anthropic_server.requests)  # the prompt went on


def test_a_session_of_claude_code_teaches_memstore(
    tmp_path: Path, workspace: Path, anthropic_server: AnthropicServer
) -> None:
    """The plugin installed as a person installs it (the marketplace, then the plugin), one
    real session states a preference, and the worker its Stop hook starts learns it: one run
    of `claude-code`, named by the session Claude Code gave it."""
    claude = required_claude()
    preference = {
        "name": "user-indentation",
        "type": "user",
        "description": "Always 4 spaces, never tabs",
        "body": "The user wants Python indented with 4 spaces, never tab characters.",
    }
    extraction = EXTRACTION_SYSTEM.split("{")[0]

    def extracting(payload: dict[str, Any]) -> bool:
        system = payload.get("system", "")
        if isinstance(system, list):  # content blocks
            system = "".join(block.get("text", "") for block in system)
        return extraction in system

    def answer(payload: dict[str, Any]) -> Any:
        return text_reply(json.dumps([preference]) if extracting(payload) else "ok")

    anthropic_server.responder = answer
    (tmp_path / "home").mkdir()
    environment = {k: v for k, v in os.environ.items() if k not in ("MEMSTORE_DB", "MEMCTL_DB")}
    environment.pop("CLAUDE_CONFIG_DIR", None)
    environment.update(
        HOME=str(tmp_path / "home"),
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        ANTHROPIC_BASE_URL=anthropic_server.url,
        ANTHROPIC_API_KEY="sk-ant-test-key",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_TELEMETRY="1",
    )
    for command in (["marketplace", "add", str(ROOT)], ["install", "memstore@memstore"]):
        done = subprocess.run(
            [claude, "plugin", *command],
            capture_output=True,
            text=True,
            cwd=workspace,
            env=environment,
            timeout=180,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    said = "Please always indent Python with 4 spaces, never tabs."
    done = subprocess.run(
        [claude, "-p", said, "--output-format", "json"],
        capture_output=True,
        text=True,
        cwd=workspace,
        env=environment,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    session = json.loads(done.stdout)["session_id"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with MemoryStore(workspace / ".memory" / "memstore.db") as store:
            runs = [r for r in store.history.runs() if r["actor"] == "claude-code"]
            if runs:
                break
        time.sleep(0.5)
    assert [r["session_id"] for r in runs] == [session]
    with MemoryStore(workspace / ".memory" / "memstore.db") as store:
        assert store.get("user-indentation").description == preference["description"]
    asked = [r for r in anthropic_server.requests if extracting(r)]
    assert len(asked) == 1 and said in json.dumps(asked[0]["messages"])
