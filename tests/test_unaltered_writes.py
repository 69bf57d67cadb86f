"""A memory changed outside memstore is never laundered by a write: the first time a
transaction changes a memory (update, rename, delete, merge, restore), its row is compared
with its last event's state, and MemoryAltered refuses the write, nothing written, so that
readers keep leaving it out (storage/unaltered.py). A purge still erases it. The model's
own reads (chat's index and recall catalog, extraction, consolidation) leave it out too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from anthropic.lib.tools import ToolError
from anthropic.types.beta import (
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818RenameCommand,
)

from memstore.agent.system_prompt import system_prompt
from memstore.errors import ConsolidationRefused, MemoryAltered
from memstore.integrations.memory_tool import MemstoreMemoryTool
from memstore.learning.consolidate import apply_plan, plan_consolidation
from memstore.learning.extract import extract_memories
from memstore.llm.client import ModelClient
from memstore.recall.selection import memory_catalog
from memstore.settings import Settings
from memstore.storage.store import MemoryStore
from tests.anthropic_server import AnthropicServer, text_reply
from tests.conftest import MemctlRunner, raw_sql
from tests.test_mcp import connected
from tests.test_unaltered_feed import EVIL, TAMPERING, workspace

pytestmark = pytest.mark.both_engines

REFUSED = (
    "memory 'deploy' was changed outside memstore (its row does not match its last event in"
    " history); nothing was written; run `memctl history --verify`"
)


def tamper(store: MemoryStore, statement: str) -> None:
    """`statement` run with a SQL client; on a server, as a superuser who switched its
    checks off for the session (tests/test_unaltered_engines.py)."""
    with raw_sql(store) as connection:
        if store.url is not None:
            connection.execute("SET session_replication_role = replica")
        connection.execute(statement)


def events(store: MemoryStore) -> int:
    with raw_sql(store) as connection:
        return int(connection.execute("SELECT count(*) FROM memory_event").fetchone()[0])


@pytest.fixture
def tampered(store: MemoryStore) -> MemoryStore:
    store.create("deploy", "project", "How we deploy", "Through CI.")
    store.create("tabs", "feedback", "Tabs", "Indent with tabs.")
    tamper(store, f"UPDATE memory SET body = '{EVIL}' WHERE name = 'deploy'")
    return store


def left_out_still(store: MemoryStore, written: int) -> None:
    """Nothing was written: the altered row is as the SQL client left it, still left out."""
    assert events(store) == written
    assert store.get("deploy").body == EVIL
    assert [m.name for m in store.unaltered_all()] == ["tabs"]


@pytest.mark.parametrize(
    "write",
    [
        pytest.param(lambda s: s.update("deploy", description="How we ship"), id="update"),
        pytest.param(lambda s: s.update("deploy", new_name="shipping"), id="rename"),
        pytest.param(lambda s: s.delete("deploy"), id="delete"),
    ],
)
def test_a_write_to_an_altered_memory_is_refused_and_writes_nothing(
    tampered: MemoryStore, write: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    written = events(tampered)
    with pytest.raises(MemoryAltered) as raised:
        write(tampered)
    assert str(raised.value) == REFUSED
    left_out_still(tampered, written)
    capsys.readouterr()


def test_a_merge_of_an_altered_memory_is_refused_both_ways(
    tampered: MemoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    written = events(tampered)
    for source, target in (("deploy", "tabs"), ("tabs", "deploy")):
        with pytest.raises(MemoryAltered), tampered.transaction() as tx:
            kept = tx.update(tx.get(target), body="Merged.")
            tx.delete(tx.get(source), merged_into=kept)
    left_out_still(tampered, written)
    capsys.readouterr()


def test_a_deleted_memory_altered_is_not_restored(
    store: MemoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    store.create("deploy", "project", "How we deploy", "Through CI.")
    store.delete("deploy")
    tamper(store, f"UPDATE memory SET body = '{EVIL}' WHERE name = 'deploy'")
    written = events(store)
    with pytest.raises(MemoryAltered, match="nothing was written"):
        store.restore("deploy")
    assert events(store) == written and store.find("deploy") is None
    capsys.readouterr()


def test_sound_memories_are_written_as_before_and_a_refusal_spares_the_rest(
    tampered: MemoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    # A transaction that catches the refusal (extraction does) keeps its other writes:
    # the check comes before anything of the altered memory is changed.
    with tampered.transaction() as tx:
        with pytest.raises(MemoryAltered):
            tx.update(tx.get("deploy"), description="How we ship")
        tx.update(tx.get("tabs"), body="Indent with tabs, width four.")
        tx.update(tx.get("tabs"), description="Tabs, width four")
    assert tampered.get("tabs").description == "Tabs, width four"
    assert [m.name for m in tampered.unaltered_all()] == ["tabs"]
    assert tampered.get("deploy").body == EVIL
    capsys.readouterr()


def test_a_purge_still_erases_an_altered_memory(tampered: MemoryStore) -> None:
    tampered.purge("deploy")
    assert tampered.find("deploy") is None
    tampered.history.verify()


def test_memctl_edit_says_one_line(memctl: MemctlRunner, tmp_path: Path) -> None:
    done = memctl("add", "deploy", "-t", "project", "-d", "How we deploy", "-b", "CI.")
    assert done.returncode == 0, done.stderr
    with MemoryStore(tmp_path / ".memory" / "memstore.db") as store:
        tamper(store, f"UPDATE memory SET body = '{EVIL}' WHERE name = 'deploy'")
    done = memctl("edit", "deploy", "-d", "How we ship")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"memctl: error: {REFUSED}"


# -- what the model is shown ----------------------------------------------------------------


def test_chat_index_and_recall_catalog_leave_it_out(
    tampered: MemoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    text = system_prompt(Path("/tmp"), "", tampered)[0]["text"]
    assert "tabs" in text and "deploy" not in text
    assert [s.name for s in memory_catalog(tampered, "deploy", 50)] == ["tabs"]
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 2 and all("left out memory 'deploy'" in line for line in said)


def test_consolidation_neither_sees_nor_merges_it(
    tampered: MemoryStore, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.script(text_reply(json.dumps({"merge": [], "drop": []})))
    plan = plan_consolidation(store=tampered, client=client)
    prompt = anthropic_server.requests[0]["messages"][0]["content"]
    assert "tabs" in prompt and "deploy" not in prompt and EVIL not in prompt
    assert set(plan.versions) == {"tabs"}


def test_a_memory_altered_while_consolidation_plans_fails_the_run_cleanly(
    store: MemoryStore, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    store.create("deploy", "project", "How we deploy", "Through CI.")
    store.create("tabs", "feedback", "Tabs", "Indent with tabs.")
    anthropic_server.script(text_reply(json.dumps({"merge": [], "drop": [{"name": "deploy"}]})))
    plan = plan_consolidation(store=store, client=client)
    tamper(store, f"UPDATE memory SET body = '{EVIL}' WHERE name = 'deploy'")
    written = events(store)
    with pytest.raises(ConsolidationRefused, match="consolidation not applied: memory 'deploy'"):
        apply_plan(store, plan, confirmed=True)
    assert events(store) == written and store.get("deploy").body == EVIL


def test_extraction_is_not_shown_it_and_skips_it_when_altered_meanwhile(
    store: MemoryStore,
    client: ModelClient,
    anthropic_server: AnthropicServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store.create("deploy", "project", "How we deploy", "Through CI.")
    store.create("tabs", "feedback", "Tabs", "Indent with tabs.")
    proposed = [
        {"name": "deploy", "type": "project", "description": "How we ship", "body": "CI."},
        {"name": "lint", "type": "feedback", "description": "Lint first", "body": "Run ruff."},
    ]

    def altered_while_asked(request: dict[str, Any]) -> Any:
        # The model was shown `deploy` whole; it is changed before the answer is written.
        shown = json.dumps(request)
        assert "Through CI." in shown
        tamper(store, f"UPDATE memory SET body = '{EVIL}' WHERE name = 'deploy'")
        return text_reply(json.dumps(proposed))

    anthropic_server.responder = altered_while_asked
    messages = [
        {"role": "user", "content": "How do we deploy? And lint first, always."},
        {"role": "assistant", "content": "Through CI; noted about linting."},
    ]
    result = extract_memories(messages, store=store, client=client)
    assert result.created == ["lint"] and result.updated == []
    assert store.get("deploy").body == EVIL
    assert [m.name for m in store.unaltered_all()] == ["lint", "tabs"]

    # Next time, the model is shown nothing of it.
    anthropic_server.responder = None
    anthropic_server.script(text_reply("[]"))
    extract_memories(messages, store=store, client=client)
    assert EVIL not in json.dumps(anthropic_server.requests[-1])
    assert "left out memory 'deploy'" in capsys.readouterr().err


# -- the doors an agent writes through ------------------------------------------------------


def test_mcp_and_the_memory_tool_refuse_it_in_one_line(tmp_path: Path) -> None:
    root = workspace(tmp_path, TAMPERING["body"])
    db = root / ".memory" / "memstore.db"
    with MemoryStore(db) as store:
        written = events(store)
    with MemstoreMemoryTool.open(start=root, settings=Settings.from_environment({})) as tool:
        for command in (
            BetaMemoryTool20250818DeleteCommand(command="delete", path="/memories/deploy-notes.md"),
            BetaMemoryTool20250818RenameCommand(
                command="rename",
                old_path="/memories/deploy-notes.md",
                new_path="/memories/shipping.md",
            ),
        ):
            with pytest.raises(ToolError, match=r"changed outside memstore.*nothing was written"):
                getattr(tool, command.command)(command)
    found: dict[str, Any] = {}

    async def main() -> None:
        async with connected(root) as session:
            found["update"] = await session.call_tool(
                "update", {"name": "deploy-notes", "description": "How we ship"}
            )
            found["forget"] = await session.call_tool("forget", {"name": "deploy-notes"})

    anyio.run(main)
    for tool_name, result in found.items():
        assert result.is_error, tool_name
        said = result.content[0].text
        assert said.startswith(f"{tool_name}: memory 'deploy-notes' was changed outside"), said
        assert "nothing was written" in said and "\n" not in said
    assert "Traceback" not in (root / "stderr").read_text()
    with MemoryStore(db) as store:
        assert events(store) == written
        assert EVIL in store.get("deploy-notes").body
