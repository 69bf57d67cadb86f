"""The secret check through every door that writes a memory: the corpus (tests/secret_corpus.py)
sent through each, the credentials refused and the look-alikes stored. One test, parametrised
by door; each door takes the whole corpus in one batch (one MCP session, one chat session,
one import), as a client would send it.

The check is shared (storage/validation.refuse_secrets, run by WriteTransaction on every
write, and by import and extraction before they write); what this proves is that each door
reaches it and says so in its own way, and stores what it should.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from anthropic.types.beta import BetaMemoryTool20250818CreateCommand

from memstore.agent.memory import AgentMemory, MemorySettings
from memstore.errors import SecretRefused
from memstore.integrations.memory_tool import MemstoreMemoryTool
from memstore.llm.client import ModelClient
from memstore.settings import Settings
from memstore.storage.store import MemoryStore
from tests.anthropic_server import AnthropicServer, text_reply
from tests.conftest import MemctlRunner, write
from tests.secret_corpus import ALL_LOOK_ALIKES, CAUGHT
from tests.test_hook import prompt, session_start
from tests.test_mcp import connected

CREDENTIAL_TEXTS = [text for _, text in CAUGHT]
TEXTS = CREDENTIAL_TEXTS + ALL_LOOK_ALIKES


def _stored(store_path: Path) -> set[str]:
    """The bodies of the live memories of the store at `store_path`."""
    if not store_path.exists():
        return set()
    with MemoryStore(store_path, create=False) as store:
        return {memory.body.strip() for memory in store.memories()}


def _file(index: int, text: str) -> str:
    return f"---\nname: m-{index}\ntype: project\ndescription: Note {index}\n---\n{text}\n"


# -- the doors: each takes the texts and returns the bodies stored ---------------------------


def add_door(request: pytest.FixtureRequest, tmp_path: Path, texts: list[str]) -> set[str]:
    memctl: MemctlRunner = request.getfixturevalue("memctl")
    for index, text in enumerate(texts):
        done = memctl("add", f"m-{index}", "-t", "project", "-d", f"Note {index}", input=text)
        _says_refused(done, ("--allow-secret",))
    return _stored(tmp_path / ".memory" / "memstore.db")


def edit_door(request: pytest.FixtureRequest, tmp_path: Path, texts: list[str]) -> set[str]:
    memctl: MemctlRunner = request.getfixturevalue("memctl")
    for index, text in enumerate(texts):
        assert (
            memctl("add", f"m-{index}", "-t", "project", "-d", "N", "-b", "plain").returncode == 0
        )
        _says_refused(memctl("edit", f"m-{index}", "-b", text), ("--allow-secret",))
    return _stored(tmp_path / ".memory" / "memstore.db") - {"plain"}


def import_door(request: pytest.FixtureRequest, tmp_path: Path, texts: list[str]) -> set[str]:
    memctl: MemctlRunner = request.getfixturevalue("memctl")
    for index, text in enumerate(texts):
        write(tmp_path / "notes" / f"m-{index}.md", _file(index, text))
    done = memctl("import", str(tmp_path / "notes"), "--skip-invalid")
    assert done.returncode == 0, done.stderr
    refused = [line for line in done.stderr.splitlines() if "looks like" in line]
    assert len(refused) == len(CREDENTIAL_TEXTS), done.stderr
    return _stored(tmp_path / ".memory" / "memstore.db")


def claude_import_door(
    request: pytest.FixtureRequest, tmp_path: Path, texts: list[str]
) -> set[str]:
    memctl: MemctlRunner = request.getfixturevalue("memctl")
    project, home = tmp_path / "project", tmp_path / "home"
    (project / ".git").mkdir(parents=True)
    slug = re.sub(r"[^a-zA-Z0-9]", "-", str(project))
    folder = home / ".claude" / "projects" / slug / "memory"
    for index, text in enumerate(texts):
        write(folder / f"m-{index}.md", _file(index, text))
    environment = {k: v for k, v in os.environ.items() if k != "CLAUDE_CONFIG_DIR"}
    environment["HOME"] = str(home)
    done = memctl("claude", "import", "--skip-invalid", cwd=project, env=environment)
    assert done.returncode == 0, done.stderr
    refused = [line for line in done.stderr.splitlines() if "looks like" in line]
    assert len(refused) == len(CREDENTIAL_TEXTS), done.stderr
    return _stored(project / ".memory" / "memstore.db")


def mcp_door(request: pytest.FixtureRequest, tmp_path: Path, texts: list[str]) -> set[str]:
    workspace = tmp_path / "project"
    (workspace / ".memory").mkdir(parents=True)

    async def main() -> None:
        async with connected(workspace) as session:
            for index, text in enumerate(texts):
                arguments = {"type": "project", "description": f"Note {index}", "body": text}
                result = await session.call_tool("remember", arguments)
                if result.is_error:
                    said = result.content[0].text  # type: ignore[union-attr]
                    assert "secret" in said and "\n" not in said, said

    anyio.run(main)
    assert "Traceback" not in (workspace / "stderr").read_text()
    return _stored(workspace / ".memory" / "memstore.db")


def memory_tool_door(request: pytest.FixtureRequest, tmp_path: Path, texts: list[str]) -> set[str]:
    from anthropic.lib.tools import ToolError

    settings = Settings.from_environment({})
    with MemstoreMemoryTool.open(start=tmp_path, settings=settings) as tool:
        for index, text in enumerate(texts):
            command = BetaMemoryTool20250818CreateCommand(
                command="create", path=f"/memories/m-{index}.md", file_text=text
            )
            try:
                tool.create(command)
            except ToolError as error:
                assert "secrets are not saved" in str(error), error
    return _stored(tmp_path / ".memory" / "memstore.db")


def chat_remember_door(
    request: pytest.FixtureRequest, tmp_path: Path, texts: list[str]
) -> set[str]:
    """memctl chat's /remember, a person's door: one line each (line breaks become spaces)."""
    memctl: MemctlRunner = request.getfixturevalue("memctl")
    server: AnthropicServer = request.getfixturevalue("anthropic_server")
    lines = [f"/remember project: {' '.join(text.split())}" for text in texts]
    done = memctl(
        "chat",
        input="\n".join([*lines, "/exit"]) + "\n",
        env={
            "ANTHROPIC_API_KEY": "test-key",
            "ANTHROPIC_BASE_URL": server.url,
            "MEMSTORE_SETTINGS": os.devnull,
        },
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("looks like it holds a secret") == len(CREDENTIAL_TEXTS)
    assert server.requests == []
    flattened = {" ".join(text.split()): text.strip() for text in texts}
    return {flattened[body] for body in _stored(tmp_path / ".memory" / "memstore.db")}


def chat_learning_door(
    request: pytest.FixtureRequest, tmp_path: Path, texts: list[str]
) -> set[str]:
    """What memctl chat learns after a turn: the model proposes the texts, five a turn as
    extraction takes them, through the chat's own AgentMemory."""
    client: ModelClient = request.getfixturevalue("client")
    server: AnthropicServer = request.getfixturevalue("anthropic_server")
    path = tmp_path / ".memory" / "memstore.db"
    turn = [{"role": "user", "content": "remember these"}, {"role": "assistant", "content": "ok"}]
    with MemoryStore(path) as store:
        memory = AgentMemory(
            store,
            client,
            session_id="s",
            export_dir=None,
            settings=MemorySettings(consolidation_threshold=10**6),
        )
        for start in range(0, len(texts), 5):
            batch = [
                {"name": f"m-{i}", "type": "project", "description": f"Note {i}", "body": text}
                for i, text in enumerate(texts[start : start + 5], start)
            ]
            server.script(text_reply(json.dumps(batch)))
            learnt = memory.after_turn(turn).extraction
            assert learnt.failure == "" and all("secret" in d for d in learnt.dropped)
    return _stored(path)


DOORS: dict[str, Callable[[pytest.FixtureRequest, Path, list[str]], set[str]]] = {
    "add": add_door,
    "edit": edit_door,
    "import": import_door,
    "claude import": claude_import_door,
    "mcp": mcp_door,
    "memory tool": memory_tool_door,
    "chat /remember": chat_remember_door,
    "chat learning": chat_learning_door,
}


def _says_refused(done: Any, hints: tuple[str, ...]) -> None:
    """A door of memctl: either it stored the text, or it said why in one line."""
    if done.returncode == 0:
        return
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert "looks like" in lines[0] and all(hint in lines[0] for hint in hints), lines[0]


@pytest.mark.parametrize("door", DOORS)
def test_each_door_refuses_every_credential_and_stores_every_look_alike(
    door: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    stored = DOORS[door](request, tmp_path, TEXTS)
    leaked = [label for label, text in CAUGHT if text.strip() in stored]
    lost = [text[:40] for text in ALL_LOOK_ALIKES if text.strip() not in stored]
    assert leaked == [] and lost == []


def test_the_doors_share_one_check(tmp_path: Path) -> None:
    """Every door writes through WriteTransaction, which refuses a secret itself: a door
    that forgot its own check could still not store one."""
    with MemoryStore(tmp_path / "memstore.db") as store:
        for text in CREDENTIAL_TEXTS:
            with pytest.raises(SecretRefused), store.transaction() as tx:
                tx.create("m", "project", "d", text)
        assert store.count() == 0


def test_the_hook_does_not_run_the_check(tmp_path: Path) -> None:
    """Claude Code's hook reads memories on every prompt: the check, a cost of writes, stays
    out of its path (docs/file-format.md says so)."""
    project = tmp_path / "project"
    with MemoryStore(project / ".memory" / "memstore.db") as store:
        store.create("deploy", "project", "How to deploy", "Run `make deploy`.")
    script = (
        "import json, sys\n"
        "sys.argv = ['memctl', 'hook']\n"
        "from memctl.entry import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "sys.stderr.write(json.dumps(sorted(sys.modules)))\n"
    )
    for stdin in (prompt(project, "how do we deploy"), session_start(project)):
        done = subprocess.run(
            [sys.executable, "-c", script], input=stdin.encode(), capture_output=True, check=True
        )
        assert done.stdout.startswith(b'{"hookSpecificOutput"'), done.stdout
        modules = json.loads(done.stderr)
        assert [m for m in modules if m.startswith("memstore.storage.secret")] == []
