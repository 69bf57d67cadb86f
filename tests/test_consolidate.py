"""Consolidation through the real anthropic client against the scripted local server: plans
are validated whole, applied in one transaction, recorded, guarded and undone exactly."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memstore.errors import (
    CannotUndo,
    ConsolidationRefused,
    ConsolidationSkipped,
    InvalidMemory,
)
from memstore.learning import consolidate as consolidation
from memstore.learning.consolidate import apply_plan, consolidate_memories, plan_consolidation
from memstore.learning.consolidation_due import consolidation_due
from memstore.llm.client import ModelClient
from memstore.storage.run_lock import lock_file, run_alone
from memstore.storage.store import MemoryStore
from memstore.storage.undo import undo_run
from tests.anthropic_server import AnthropicServer, error_reply, gated_reply, text_reply
from tests.conftest import MemctlRunner, database_errors, raw_sql, stored_text

MEMORIES = [
    ("user-tabs", "user", "User wants 4 spaces, never tabs", "Indent with 4 spaces."),
    ("user-indent", "user", "Indentation is 4 spaces", "No tab characters, ever."),
    ("project-db", "project", "The database is MySQL 5.7", "Upgraded to 8.0 in March."),
    ("project-ci", "project", "CI runs on Jenkins", "The Jenkinsfile is at the root."),
    ("reference-wiki", "reference", "Team wiki", "https://wiki.example.com/team"),
    ("feedback-tests", "feedback", "Run tests before committing", "Always run pytest first."),
]


def merge(sources: list[str], name: str, kind: str, description: str, body: str) -> dict[str, Any]:
    return {
        "sources": sources,
        "name": name,
        "type": kind,
        "description": description,
        "body": body,
    }


GOOD_PLAN = {
    "merge": [
        merge(["user-tabs", "user-indent"], "user-indentation", "user", "4 spaces", "Never tabs."),
        merge(["project-db"], "project-db", "project", "The database is MySQL 8.0", "Since March."),
    ],
    "drop": [{"name": "project-ci", "reason": "moved to GitHub Actions"}],
}


@pytest.fixture
def filled(store: MemoryStore) -> MemoryStore:
    with store.transaction() as tx:
        for name, kind, description, body in MEMORIES:
            tx.create(name, kind, description, body, {"source": "test"})
    return store


def state(store: MemoryStore) -> dict[str, tuple[Any, ...]]:
    return {m.name: (m.type, m.description, m.body, m.extra) for m in store.memories()}


def plan_reply(plan: Any) -> Any:
    return text_reply(json.dumps(plan))


@pytest.mark.both_engines
def test_a_plan_is_applied_in_one_recorded_run_and_undone_exactly(
    filled: MemoryStore, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    before = state(filled)
    anthropic_server.script(plan_reply(GOOD_PLAN))
    outcome = consolidate_memories(store=filled, client=client)

    assert outcome.applied and outcome.plan.before == 6 and outcome.plan.after == 4
    after = state(filled)
    assert set(after) == {"user-indentation", "project-db", "reference-wiki", "feedback-tests"}
    assert after["project-db"][1] == "The database is MySQL 8.0"
    # The request showed every memory, with its body.
    prompt = anthropic_server.requests[0]["messages"][0]["content"]
    assert all(name in prompt and body in prompt for name, _, _, body in MEMORIES)

    # One run; each merged source links to its result; the drop has no link.
    run = f"'{outcome.run_id}'"  # hex: no quoting needed, on either engine
    with raw_sql(filled) as connection:
        merges = connection.execute(
            f"SELECT source_name, result_name FROM consolidation_merge WHERE run_id = {run} "
            "ORDER BY source_name"
        ).fetchall()
        assert merges == [("user-indent", "user-indentation"), ("user-tabs", "user-indentation")]
        assert connection.execute(
            f"SELECT actor, created, updated, deleted FROM run_summary WHERE run_id = {run}"
        ).fetchone() == ("consolidation", 1, 1, 3)

        undone = undo_run(filled, outcome.run_id or "")
        assert state(filled) == before
        assert sorted(undone.restored) == ["project-ci", "user-indent", "user-tabs"]
        assert undone.deleted == ["user-indentation"] and undone.reverted == ["project-db"]
        assert connection.execute(
            f"SELECT undone_by FROM run_summary WHERE run_id = {run}"
        ).fetchone() == (undone.run_id,)
    with pytest.raises(CannotUndo, match="already undone"):
        undo_run(filled, outcome.run_id or "")
    # The undo is a run too, and can itself be undone: back to the consolidated state.
    undo_run(filled, undone.run_id[:8])
    assert state(filled) == after


def test_a_merge_may_keep_a_source_name(
    filled: MemoryStore, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    kept_id = filled.get("user-tabs").id
    plan = {"merge": [merge(["user-tabs", "user-indent"], "user-tabs", "user", "4 spaces", "x")]}
    anthropic_server.script(plan_reply(plan))
    outcome = consolidate_memories(store=filled, client=client)
    assert outcome.updated == ["user-tabs"] and outcome.deleted == ["user-indent"]
    assert filled.get("user-tabs").id == kept_id
    deletion = [e for e in filled.history.events("user-indent") if e.operation == "delete"]
    assert deletion[0].merged_into == kept_id


HOSTILE_PLANS: list[Any] = [
    [],
    "Everything looks fine to me.",
    {"merge": "all of them"},
    {"merge": [], "drop": [], "delete_everything": True},
    {"merge": [merge(["no-such-memory"], "x", "user", "d", "b")]},
    {
        "merge": [
            merge(["user-tabs"], "a", "user", "d", "b"),
            merge(["user-tabs"], "b", "user", "d", "b"),
        ]
    },
    {"merge": [merge(["user-tabs"], "a", "user", "d", "b")], "drop": [{"name": "user-tabs"}]},
    {"merge": [merge(["user-tabs"], "project-ci", "user", "d", "b")]},
    {"merge": [merge(["user-tabs"], "a", "secret-plans", "d", "b")]},
    {"merge": [merge(["user-tabs"], "a", "user", "d", "key: AKIAIOSFODNN7EXAMPLE")]},
    {"merge": [merge(["user-tabs"], "a", "user", "d", "y" * 10_000_000)]},
    {
        "merge": [
            merge(["user-tabs"], "a", "user", "d", "b"),
            merge(["user-indent"], "a", "user", "d", "b"),
        ]
    },
    {"drop": [{"name": "../../etc/passwd"}]},
]


@pytest.mark.parametrize("plan", HOSTILE_PLANS)
def test_an_invalid_answer_changes_nothing(
    filled: MemoryStore, client: ModelClient, anthropic_server: AnthropicServer, plan: Any
) -> None:
    before, events = state(filled), len(filled.history.events())
    anthropic_server.script(text_reply(plan if isinstance(plan, str) else json.dumps(plan)))
    with pytest.raises(ConsolidationRefused, match="not applied"):
        consolidate_memories(store=filled, client=client, confirmed=True)
    assert state(filled) == before and len(filled.history.events()) == events


@pytest.mark.parametrize(
    "reply", [error_reply(529, "overloaded_error"), error_reply(500, "api_error")]
)
def test_a_failed_call_changes_nothing(
    filled: MemoryStore, client: ModelClient, anthropic_server: AnthropicServer, reply: Any
) -> None:
    before = state(filled)
    anthropic_server.script(reply)
    with pytest.raises(ConsolidationRefused, match=str(reply.status)):
        consolidate_memories(store=filled, client=client)
    assert state(filled) == before


def test_an_empty_plan_changes_nothing_but_counts_as_a_run(
    filled: MemoryStore, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    for i in range(4):
        filled.create(f"extra-{i}", "project", "More", "b")
    assert consolidation_due(filled) is not None
    before, events = state(filled), len(filled.history.events())
    anthropic_server.script(plan_reply({"merge": [], "drop": []}))
    outcome = consolidate_memories(store=filled, client=client)
    assert (
        not outcome.applied and state(filled) == before and len(filled.history.events()) == events
    )
    # Recorded as a run without events, so the trigger waits for new changes.
    last = filled.history.last_run("consolidation")
    assert last is not None and last.id == outcome.run_id
    assert consolidation_due(filled) is None


@pytest.mark.parametrize(
    ("plan", "warning"),
    [
        ({"drop": [{"name": "project-db"}, {"name": "project-ci"}]}, "every project memory"),
        ({"drop": [{"name": "user-tabs"}]}, "drops user preferences: user-tabs"),
        (
            {
                "merge": [
                    merge(
                        [
                            "user-tabs",
                            "project-db",
                            "project-ci",
                            "reference-wiki",
                            "feedback-tests",
                        ],
                        "everything",
                        "project",
                        "all in one",
                        "b",
                    )
                ]
            },
            r"removes 4 of 6 memories \(more than 50%\)",
        ),
    ],
)
def test_drastic_plans_need_confirmation(
    filled: MemoryStore,
    client: ModelClient,
    anthropic_server: AnthropicServer,
    plan: Any,
    warning: str,
) -> None:
    before = state(filled)
    anthropic_server.script(plan_reply(plan), plan_reply(plan))
    with pytest.raises(ConsolidationRefused, match=warning):
        consolidate_memories(store=filled, client=client)
    assert state(filled) == before
    assert consolidate_memories(store=filled, client=client, confirmed=True).applied


def test_a_plan_is_not_applied_over_changes_made_while_it_was_planned(
    filled: MemoryStore, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.script(plan_reply(GOOD_PLAN))
    plan = plan_consolidation(store=filled, client=client)
    filled.update("project-ci", body="Edited meanwhile.")
    with pytest.raises(ConsolidationRefused, match="'project-ci' changed"):
        apply_plan(filled, plan)
    assert filled.get("project-ci").body == "Edited meanwhile."


@pytest.mark.both_engines
def test_undo_is_refused_when_a_memory_changed_since(
    filled: MemoryStore, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.script(plan_reply(GOOD_PLAN))
    outcome = consolidate_memories(store=filled, client=client)
    filled.update("user-indentation", body="Edited after consolidation.")
    with pytest.raises(CannotUndo, match="user-indentation"):
        undo_run(filled, outcome.run_id or "")
    assert filled.get("user-indentation").body == "Edited after consolidation."


def test_large_stores_go_in_batches_by_type(
    store: MemoryStore,
    client: ModelClient,
    anthropic_server: AnthropicServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(consolidation, "BATCH_MAX_MEMORIES", 4)
    with store.transaction() as tx:
        for i in range(6):
            tx.create(f"project-{i}", "project", f"Fact {i}", "b")
        for i in range(3):
            tx.create(f"user-{i}", "user", f"Preference {i}", "b")
    empty = {"merge": [], "drop": []}
    anthropic_server.script(
        plan_reply({"drop": [{"name": "project-0"}]}),
        plan_reply(empty),
        plan_reply({"merge": [merge(["user-0", "user-1"], "user-0", "user", "both", "b")]}),
    )
    outcome = consolidate_memories(store=store, client=client)
    prompts = [r["messages"][0]["content"] for r in anthropic_server.requests]
    assert len(prompts) == 3
    assert "project-3" in prompts[0] and "project-4" in prompts[1] and "user-0" in prompts[2]
    assert all(("user-" in p) != ("project-" in p) for p in prompts)
    assert sorted(outcome.deleted) == ["project-0", "user-1"]


def test_a_batch_may_not_touch_memories_it_was_not_shown(
    store: MemoryStore,
    client: ModelClient,
    anthropic_server: AnthropicServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(consolidation, "BATCH_MAX_MEMORIES", 2)
    with store.transaction() as tx:
        tx.create("project-a", "project", "A", "b")
        tx.create("user-a", "user", "A", "b")
        tx.create("user-b", "user", "B", "b")
    anthropic_server.script(plan_reply({"drop": [{"name": "user-a"}]}))
    with pytest.raises(ConsolidationRefused, match="'user-a' is not one of the memories"):
        consolidate_memories(store=store, client=client, confirmed=True)
    assert store.count() == 3


def test_when_consolidation_is_due(
    store: MemoryStore, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    for i in range(9):
        store.create(f"note-{i}", "project", f"Fact {i}", "b")
    assert consolidation_due(store) is None  # below the threshold
    store.create("note-9", "project", "Fact 9", "b")
    assert consolidation_due(store) == "10 memories, never consolidated"
    anthropic_server.script(plan_reply({"drop": [{"name": "note-0"}]}))
    consolidate_memories(store=store, client=client)
    assert consolidation_due(store) is None  # just ran: not on every turn
    for i in range(10, 14):
        store.create(f"note-{i}", "project", f"Fact {i}", "b")
    assert consolidation_due(store) is None  # 4 changes
    store.update("note-1", body="changed")
    assert consolidation_due(store) == "13 memories, 5 changed since the last consolidation"
    # Above the cap, any change is enough.
    assert consolidation_due(store, max_memories=12, min_changes=50) == (
        "13 memories, more than the cap of 12"
    )


# -- memctl consolidate ---------------------------------------------------------------------


def model_env(server: AnthropicServer) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": server.url}


@pytest.fixture
def cli_store(tmp_path: Path, memctl: MemctlRunner) -> Path:
    db = tmp_path / ".memory" / "memstore.db"
    with MemoryStore(db) as store, store.transaction() as tx:
        for name, kind, description, body in MEMORIES:
            tx.create(name, kind, description, body)
    assert memctl("export").returncode == 0
    return db


def test_memctl_consolidate_dry_run_apply_and_undo(
    tmp_path: Path, cli_store: Path, memctl: MemctlRunner, anthropic_server: AnthropicServer
) -> None:
    files = tmp_path / ".memory"
    before = {p.name: p.read_bytes() for p in files.glob("*.md")}
    anthropic_server.script(plan_reply(GOOD_PLAN))
    dry = memctl("consolidate", "--dry-run", env=model_env(anthropic_server))
    assert dry.returncode == 0, dry.stderr
    assert "merge    user-tabs, user-indent → user-indentation (user): 4 spaces" in dry.stdout
    assert "drop     project-ci: moved to GitHub Actions" in dry.stdout
    assert "6 → 4 memories" in dry.stdout and "nothing changed" in dry.stderr
    assert {p.name: p.read_bytes() for p in files.glob("*.md")} == before

    anthropic_server.script(plan_reply(GOOD_PLAN))
    done = memctl("consolidate", env=model_env(anthropic_server))
    assert done.returncode == 0, done.stderr
    assert "consolidated 6 → 4 memories" in done.stderr
    assert not (files / "user-tabs.md").exists() and (files / "user-indentation.md").exists()
    assert "user-indentation" in (files / "MEMORY.md").read_text()

    runs = memctl("history", "--runs").stdout
    assert "consolidation" in runs

    undone = memctl("consolidate", "--undo")
    assert undone.returncode == 0, undone.stderr
    assert "removed user-indentation" in undone.stderr
    assert {p.name: p.read_bytes() for p in files.glob("*.md")} == before
    runs = memctl("history", "--runs").stdout.splitlines()
    assert "undone by" in runs[-2] and "undoes" in runs[-1]


def test_memctl_consolidate_refusals_are_one_line(
    cli_store: Path, memctl: MemctlRunner, anthropic_server: AnthropicServer
) -> None:
    no_key = memctl("consolidate", env={"ANTHROPIC_API_KEY": "", "ANTHROPIC_AUTH_TOKEN": ""})
    assert no_key.returncode == 1
    assert no_key.stderr.startswith(
        "memctl: error: consolidation needs the model: set ANTHROPIC_API_KEY"
    )
    assert len(no_key.stderr.splitlines()) == 1

    anthropic_server.script(plan_reply({"drop": [{"name": "user-tabs"}]}))
    guarded = memctl("consolidate", env=model_env(anthropic_server))
    assert guarded.returncode == 1
    assert guarded.stderr.splitlines()[-1].startswith("memctl: error: not applied: it drops user")
    assert "--yes" in guarded.stderr

    anthropic_server.script(text_reply("I merged them all for you!"))
    prose = memctl("consolidate", env=model_env(anthropic_server))
    assert prose.returncode == 1 and "no JSON object" in prose.stderr
    assert "Traceback" not in prose.stderr

    nothing = memctl("consolidate", "--undo")
    assert nothing.returncode == 1 and "no consolidation run to undo" in nothing.stderr
    assert memctl("consolidate", "--undo", "ffffffff").stderr == (
        "memctl: error: no run 'ffffffff'\n"
    )
    with MemoryStore(cli_store) as store:
        assert store.count() == len(MEMORIES)


def test_growing_past_the_cap_after_a_run_is_due(
    store: MemoryStore, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    with store.transaction() as tx:
        for i in range(35):
            tx.create(f"note-{i:02}", "project", f"Fact {i}", "b")
    drops = {"drop": [{"name": f"note-{i:02}"} for i in range(7)]}
    anthropic_server.script(plan_reply(drops))
    consolidate_memories(store=store, client=client)
    assert store.count() == 28
    for i in range(3):
        store.create(f"late-{i}", "project", "Later", "b")
    assert consolidation_due(store) == "31 memories, more than the cap of 30"


def test_a_memory_shown_shortened_cannot_be_merged(
    filled: MemoryStore, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    filled.update("project-ci", body="Jenkins. " * 1_000)
    plan = {"merge": [merge(["project-ci", "project-db"], "project-infra", "project", "d", "b")]}
    anthropic_server.script(plan_reply(plan))
    with pytest.raises(ConsolidationRefused, match="'project-ci' was shown shortened"):
        consolidate_memories(store=filled, client=client)
    prompt = anthropic_server.requests[0]["messages"][0]["content"]
    assert "shortened: keep or drop it" in prompt
    assert filled.get("project-ci").body.startswith("Jenkins.")


@pytest.mark.both_engines
def test_undo_says_what_to_do_when_a_name_was_taken_since(
    filled: MemoryStore, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.script(plan_reply({"drop": [{"name": "project-ci"}]}))
    outcome = consolidate_memories(store=filled, client=client)
    filled.create("project-ci", "project", "A new memory with the old name", "b")
    with pytest.raises(CannotUndo, match="rename or delete that one first"):
        undo_run(filled, outcome.run_id or "")
    assert filled.get("project-ci").description == "A new memory with the old name"


# -- one consolidation of a store at a time ---------------------------------------------------


def wait_for(condition: Callable[[], bool], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def consolidation_runs(store: MemoryStore) -> int:
    with raw_sql(store) as connection:
        return connection.execute(
            "SELECT count(*) FROM run WHERE actor = 'consolidation'"
        ).fetchone()[0]


@pytest.mark.both_engines
def test_a_second_consolidation_skips_while_one_is_running(
    filled: MemoryStore,
    database: Path | str,
    memctl_process: MemctlRunner,
    anthropic_server: AnthropicServer,
) -> None:
    """Two memctl processes on one store: the first holds the lock while the model thinks
    (its reply waits until the second has ended); the second, started meanwhile, skips in
    one line, exit 75, asking the model nothing."""
    env = {**model_env(anthropic_server), "MEMSTORE_DB": str(database)}
    thinking = threading.Event()
    anthropic_server.script(gated_reply(json.dumps(GOOD_PLAN), thinking))
    results: dict[str, Any] = {}
    first = threading.Thread(
        target=lambda: results.update(first=memctl_process("consolidate", env=env))
    )
    first.start()
    try:
        wait_for(lambda: len(anthropic_server.requests) == 1)  # the first is planning
        second = memctl_process("consolidate", env=env)
        assert first.is_alive()  # still waiting for its plan
    finally:
        thinking.set()
        first.join()
    assert second.returncode == 75, second.stderr
    assert second.stderr == (
        "memctl: consolidation skipped: another consolidation of this store is running; "
        "nothing changed; try again when it ends\n"
    )
    assert len(anthropic_server.requests) == 1  # the second asked the model nothing
    assert results["first"].returncode == 0, results["first"].stderr
    assert "consolidated 6 → 4 memories" in results["first"].stderr
    assert consolidation_runs(filled) == 1

    # Released when the first ended: the next one runs (and a dry run never waits for it).
    anthropic_server.script(plan_reply({"merge": [], "drop": []}))
    third = memctl_process("consolidate", env=env)
    assert third.returncode == 0 and "nothing to consolidate" in third.stderr
    assert consolidation_runs(filled) == 2
    if filled.path is not None:
        assert not lock_file(filled.path, "consolidation").exists()


@pytest.mark.both_engines
def test_a_dry_run_does_not_take_the_lock(
    filled: MemoryStore,
    database: Path | str,
    memctl: MemctlRunner,
    client: ModelClient,
    anthropic_server: AnthropicServer,
) -> None:
    before = state(filled)
    anthropic_server.script(plan_reply(GOOD_PLAN))
    env = {**model_env(anthropic_server), "MEMSTORE_DB": str(database)}
    with run_alone(filled, "consolidation") as held:
        assert held
        dry = memctl("consolidate", "--dry-run", env=env)
        assert dry.returncode == 0, dry.stderr
        assert "6 → 4 memories" in dry.stdout
        # The library's own consolidation skips, before asking anything.
        with pytest.raises(ConsolidationSkipped, match="another consolidation"):
            consolidate_memories(store=filled, client=client)
    assert len(anthropic_server.requests) == 1 and state(filled) == before


HOLDER = """
import sys, time
from memstore.storage.run_lock import run_alone
from memstore.storage.store import MemoryStore
with MemoryStore(sys.argv[1]) as store, run_alone(store, "consolidation") as held:
    print(held, flush=True)
    time.sleep(120)
"""


@pytest.mark.both_engines
def test_a_holder_that_crashed_does_not_block_the_next_consolidation(
    store: MemoryStore, database: Path | str
) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(database)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "True\n"
        with run_alone(store, "consolidation") as held:
            assert not held
    finally:
        holder.kill()  # SIGKILL: no release of any kind
        holder.wait()

    def free() -> bool:
        # The server ends a killed client's session (and its lock) as soon as it notices.
        with run_alone(store, "consolidation") as held:
            return held

    wait_for(free, seconds=60)
    if store.path is not None:
        assert not lock_file(store.path, "consolidation").exists()


def test_an_undo_is_done_even_when_memory_holds_a_hand_edit(
    tmp_path: Path, cli_store: Path, memctl: MemctlRunner, anthropic_server: AnthropicServer
) -> None:
    """The undo is committed before the re-export: a file edited by hand in .memory/ is kept,
    and the command says so and exits 0 (exit 1 told a script the undo had failed)."""
    anthropic_server.script(plan_reply(GOOD_PLAN))
    assert memctl("consolidate", env=model_env(anthropic_server)).returncode == 0
    edited = tmp_path / ".memory" / "project-db.md"
    edited.write_text(edited.read_text() + "\nA line of my own.\n")

    undone = memctl("consolidate", "--undo")
    assert undone.returncode == 0, undone.stderr
    assert "removed user-indentation" in undone.stderr
    assert "note: the undo is saved in the store;" in undone.stderr
    assert "refusing to overwrite 1 file(s)" in undone.stderr
    assert "A line of my own." in edited.read_text()
    with MemoryStore(cli_store) as store:
        assert store.count() == len(MEMORIES)


# -- why a memory was dropped --------------------------------------------------------------

REASON = GOOD_PLAN["drop"][0]["reason"]


def deletions(store: MemoryStore, name: str) -> list[Any]:
    return [e for e in store.history.events(name) if e.operation == "delete"]


@pytest.mark.both_engines
def test_a_drop_records_the_models_reason_on_the_chain_undone_and_purged(
    filled: MemoryStore, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.script(plan_reply(GOOD_PLAN))
    outcome = consolidate_memories(store=filled, client=client)
    assert [e.reason for e in deletions(filled, "project-ci")] == [REASON]
    # A merged source says where it went, not why.
    assert [e.reason for e in deletions(filled, "user-tabs")] == [None]
    assert filled.history.verify().events == 11

    # Undone: the memory is back, its drop and its reason stay history.
    undo_run(filled, outcome.run_id or "")
    assert filled.get("project-ci").body == "The Jenkinsfile is at the root."
    assert [e.reason for e in deletions(filled, "project-ci")] == [REASON]
    filled.history.verify()

    # The reason speaks of the memory: a purge erases it with the content, keeping its hash.
    filled.purge("project-ci")
    first_drop = deletions(filled, "project-ci")[0]
    assert first_drop.reason == f"[purged sha256:{hashlib.sha256(REASON.encode()).hexdigest()}]"
    assert REASON not in stored_text(filled)
    filled.history.verify()
    # Even a purged memory's reason is no one's to rewrite.
    with raw_sql(filled) as connection, pytest.raises(database_errors(), match="append-only"):
        connection.execute("UPDATE memory_event SET reason = 'forged' WHERE reason IS NOT NULL")


def test_a_drop_reason_is_one_line_cut_to_its_cap_and_checked(
    filled: MemoryStore, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    plan = {
        "drop": [
            {"name": "project-ci", "reason": "Superseded\nby the\tGitHub  workflow "},
            {"name": "reference-wiki", "reason": "gone " * 100},
            {"name": "project-db"},
        ]
    }
    anthropic_server.script(plan_reply(plan))
    reasons = [drop.reason for drop in plan_consolidation(store=filled, client=client).drops]
    assert reasons == ["Superseded by the GitHub workflow", ("gone " * 40).strip(), ""]

    for reason, refusal in (
        ("the key was AKIAIOSFODNN7EXAMPLE", "reason holds what looks like"),
        ("outdated \x1b]0;owned\x07", "reason: must not contain control characters"),
    ):
        anthropic_server.script(plan_reply({"drop": [{"name": "project-ci", "reason": reason}]}))
        with pytest.raises(ConsolidationRefused, match=refusal):
            consolidate_memories(store=filled, client=client)
    assert filled.get("project-ci") and len(filled.history.events()) == len(MEMORIES)


@pytest.mark.parametrize(
    ("reason", "rule"),
    [
        ("two\nlines", "single line"),
        ("x" * 201, "at most 200 characters"),
        ("[purged sha256:" + "0" * 64 + "]", "purge's marker"),
        ("password: hunter2-Correct-Horse", "looks like"),
    ],
)
def test_a_transaction_checks_the_reason_it_records(
    filled: MemoryStore, reason: str, rule: str
) -> None:
    with pytest.raises(InvalidMemory, match=rule), filled.transaction() as tx:
        tx.delete(tx.get("project-ci"), reason=reason)
    assert filled.get("project-ci")


def test_memctl_history_shows_a_drop_reason_and_verify_catches_it_changed(
    cli_store: Path, memctl: MemctlRunner, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.script(plan_reply(GOOD_PLAN))
    assert memctl("consolidate", env=model_env(anthropic_server)).returncode == 0
    shown = memctl("history", "project-ci").stdout
    assert f"reason: {REASON}" in shown.splitlines()[-1]
    events = json.loads(memctl("history", "project-ci", "--json").stdout)
    assert [e["reason"] for e in events] == [None, REASON]
    run = json.loads(memctl("history", "--run", events[-1]["run_id"], "--json").stdout)
    assert {e["memory_name"]: e["reason"] for e in run["events"]}["project-ci"] == REASON
    assert f"reason: {REASON}" in memctl("history", "--run", events[-1]["run_id"]).stdout
    assert memctl("history", "--verify").returncode == 0

    connection = sqlite3.connect(cli_store, isolation_level=None)
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        connection.execute("UPDATE memory_event SET reason = 'it was wrong' WHERE reason > ''")
    connection.execute("DROP TRIGGER memory_event_no_update")
    connection.execute("DROP TRIGGER memory_event_reason_no_update")
    connection.execute("UPDATE memory_event SET reason = 'it was wrong' WHERE reason > ''")
    connection.close()
    verified = memctl("history", "--verify")
    assert verified.returncode != 0
    assert "project-ci" in verified.stderr and "does not match its hash" in verified.stderr
    assert "memory_event_reason_no_update is missing" in verified.stderr
