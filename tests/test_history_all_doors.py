"""The state is a function of the history, whatever door wrote it (issue 28): a store built
through every door (the CLI's add, edit, rm, restore and import; chat's extraction over the
loopback model server; consolidation and its undo; MCP; the memory tool; claude import; a
purge; a copy) replays to its rows exactly, and every event's recorded state and every run's
place on the runs' chain hold: `memctl history --verify` passes on it and on its copy."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import anyio
from anthropic.types.beta import (
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818StrReplaceCommand,
)

from memstore.integrations.memory_tool import MemstoreMemoryTool
from memstore.learning.consolidate import consolidate_memories
from memstore.learning.extract import extract_memories
from memstore.llm.client import ModelClient
from memstore.settings import Settings
from memstore.storage.records import MemoryRecord
from memstore.storage.replay import REPLAYED_EVENTS, replay, replayed_event
from memstore.storage.state import state_hash
from memstore.storage.store import MemoryStore
from memstore.storage.undo import undo_run
from tests.anthropic_server import AnthropicServer, text_reply
from tests.conftest import MemctlRunner, write
from tests.test_mcp import connected

CLAUDE_NOTE = (
    "---\nname: user-role\ndescription: The user is a data engineer\ntype: user\n---\n\n"
    "Works on Airflow pipelines.\n"
)


def ok(done: Any) -> None:
    assert done.returncode == 0, done.stderr


def test_a_store_built_through_every_door_replays_to_its_rows(
    tmp_path: Path,
    memctl: MemctlRunner,
    client: ModelClient,
    anthropic_server: AnthropicServer,
) -> None:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    home = tmp_path / "home"
    env = {"HOME": str(home)}
    db = project / ".memory" / "memstore.db"

    def run(*args: str) -> None:
        ok(memctl(*args, cwd=project, env=env))

    # The CLI.
    run("add", "deploy", "-t", "project", "-d", "How we deploy", "-b", "Through CI.")
    run("add", "tabs", "-t", "feedback", "-d", "Indent with tabs", "-b", "Width four.")
    run("edit", "deploy", "-b", "Through CI, from main.")
    run("edit", "tabs", "--name", "indentation")
    run("rm", "indentation")
    run("restore", "indentation")
    run("add", "leak", "-t", "project", "-d", "A key", "-b", "pasted by mistake")
    run("purge", "leak", "--yes")
    # Import of a folder.
    folder = tmp_path / "notes"
    write(
        folder / "wiki.md",
        "---\nname: wiki\ndescription: Team wiki\ntype: reference\n---\n\nhttps://wiki.example.com\n",
    )
    run("import", str(folder))
    # Claude Code's memory folder, imported.
    slug = re.sub(r"[^a-zA-Z0-9]", "-", str(project))
    write(home / ".claude" / "projects" / slug / "memory" / "user_role.md", CLAUDE_NOTE)
    run("claude", "import")
    # Chat's extraction over the loopback model server, consolidation and its undo.
    with MemoryStore(db, actor="chat", command="memctl chat") as store:
        proposed = [
            {"name": "db", "type": "project", "description": "The database is MySQL 5.7",
             "body": "Upgraded in March."},
            {"name": "ci", "type": "project", "description": "CI runs on Jenkins",
             "body": "The Jenkinsfile is at the root."},
        ]  # fmt: skip
        anthropic_server.script(text_reply(json.dumps(proposed)))
        turn = [
            {"role": "user", "content": "We moved the database to MySQL and CI to Jenkins."},
            {"role": "assistant", "content": "Noted."},
        ]
        assert len(extract_memories(turn, store=store, client=client).created) == 2
        plan = {
            "merge": [
                {"sources": ["db"], "name": "db", "type": "project",
                 "description": "The database is MySQL 8.0", "body": "Since March."},
            ],
            "drop": [{"name": "ci", "reason": "moved to GitHub Actions"}],
        }  # fmt: skip
        anthropic_server.script(text_reply(json.dumps(plan)))
        outcome = consolidate_memories(store=store, client=client)
        assert outcome.applied and outcome.run_id is not None
        undo_run(store, outcome.run_id)
    # MCP.

    async def mcp() -> None:
        async with connected(project, env={**os.environ, **env}) as session:
            made = await session.call_tool(
                "remember",
                {"type": "feedback", "description": "Run pytest -x", "body": "Before commits."},
            )
            name = made.structured_content["name"]  # type: ignore[index]
            await session.call_tool("update", {"name": name, "body": "Always.", "version": 1})
            await session.call_tool("forget", {"name": "wiki"})

    anyio.run(mcp)
    # The memory tool.
    with MemstoreMemoryTool.open(start=project, settings=Settings.from_environment({})) as tool:
        tool.create(
            BetaMemoryTool20250818CreateCommand(
                command="create",
                path="/memories/style.md",
                file_text="Black, line length 100.\n\nSort imports with isort.\n",
            )
        )
        tool.str_replace(
            BetaMemoryTool20250818StrReplaceCommand(
                command="str_replace",
                path="/memories/style.md",
                old_str="with isort",
                new_str="with ruff",
            )
        )
    # A copy, and every door's rows replayed on both.
    copy = tmp_path / "copy.db"
    run("copy", "--to", str(copy))
    for database in (db, copy):
        done = memctl("--db", str(database), "history", "--verify", cwd=project, env=env)
        assert done.returncode == 0, done.stderr
        with MemoryStore(database) as store:
            replayed_rows_are_the_rows(store)
            actors = {run["actor"] for run in store.history.runs()}
    assert {"cli", "import", "claude-code", "extraction", "consolidation", "undo", "mcp",
            "memory_tool", "purge", "copy"} <= actors, actors  # fmt: skip


def replayed_rows_are_the_rows(store: MemoryStore) -> None:
    """Each memory's events replayed give its row, field by field (the same replay verify
    uses, here compared with the rows as MemoryStore reads them)."""
    with store.engine.connect() as connection:
        events = [
            replayed_event(row) for row in connection.exec_driver_sql(REPLAYED_EVENTS).fetchall()
        ]
    rows = {memory.id: memory for memory in _every_row(store)}
    by_memory: dict[int, list[Any]] = {}
    for event in events:
        by_memory.setdefault(event.memory_id, []).append(event)
    assert set(by_memory) == set(rows)
    for memory_id, history in by_memory.items():
        replayed, row = replay(memory_id, history), rows[memory_id]
        assert not replayed.broken and not replayed.misstated, row.name
        if row.description.startswith("[purged sha256:"):
            assert replayed.purged_state() == {k: getattr(row, k) for k in replayed.purged_state()}
            continue
        assert replayed.state() == {k: getattr(row, k) for k in replayed.state()}, row.name
        assert history[-1].state == state_hash(row)


def _every_row(store: MemoryStore) -> list[MemoryRecord]:
    from memstore.storage.reader import record_from_row
    from memstore.storage.records import RECORD_COLUMNS

    with store.engine.connect() as connection:
        rows = connection.exec_driver_sql(f"SELECT {', '.join(RECORD_COLUMNS)} FROM memory")
        return [record_from_row(row) for row in rows.fetchall()]
