"""Consolidation scheduled by the worker that learns from Claude Code's sessions: the real
`memctl claude learn` against the loopback model server, after sessions recorded as the hook
records them; due by time and sessions since the last consolidation, one at a time."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memstore.integrations.claude_consolidation import MIN_SESSIONS, due
from memstore.integrations.claude_learning import ACTOR
from memstore.integrations.claude_sessions import LOG_FILE, record_session
from memstore.learning.consolidate import ACTOR as CONSOLIDATION
from memstore.storage.run_lock import run_alone
from memstore.storage.store import MemoryStore
from tests.anthropic_server import AnthropicServer, slow_reply, text_reply
from tests.test_claude_learning import Transcript, environment

MEMCTL = Path(sys.executable).with_name("memctl")
LEARN = [str(MEMCTL), "claude", "learn"]
# A plan that merges the first two facts the sessions taught.
MERGE = {
    "merge": [
        {
            "sources": ["fact-0", "fact-1"],
            "name": "fact-0",
            "type": "project",
            "description": "Facts 0 and 1 of the build",
            "body": "Fact 0. Fact 1.",
        }
    ],
    "drop": [],
}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A workspace whose store holds ten memories: enough for consolidation to be due."""
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    with MemoryStore(database(root), actor="test") as store:
        for i in range(10):
            store.create(f"note-{i}", "project", f"Note {i} on the release", f"Release note {i}.")
    return root


def database(project: Path) -> Path:
    return project / ".memory" / "memstore.db"


def record_sessions(project: Path, home: Path, count: int) -> list[dict[str, Any]]:
    """`count` Claude Code sessions, each stating a fact, recorded as a Stop records them;
    the extraction replies that learn them."""
    replies = []
    for i in range(count):
        session = str(uuid.uuid4())
        transcript = Transcript(home / ".claude" / "projects" / "p" / f"{session}.jsonl", project)
        transcript.user(f"Note for later: build fact {i} holds on every branch.")
        transcript.assistant({"type": "text", "text": f"Understood, fact {i}."})
        event = {
            "session_id": session,
            "transcript_path": str(transcript.path),
            "cwd": str(project),
            "hook_event_name": "Stop",
        }
        record_session(project / ".memory" / "sessions", event)
        fact = {
            "name": f"fact-{i}",
            "type": "project",
            "description": f"Build fact {i}",
            "body": f"Fact {i}.",
        }
        replies.append(text_reply(json.dumps([fact])))
    return replies


def learn(project: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(LEARN, env=env, cwd=project, capture_output=True, text=True, check=True)


def consolidations(project: Path) -> list[Any]:
    with MemoryStore(database(project), actor="test") as store:
        return [run for run in store.history.runs() if run["actor"] == CONSOLIDATION]


def names(project: Path) -> set[str]:
    with MemoryStore(database(project), actor="test") as store:
        return {memory.name for memory in store.memories()}


def consolidated_before(project: Path, hours: float) -> None:
    """A consolidation run (one that changed nothing) `hours` ago."""
    started = (datetime.now(UTC) - timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    store = MemoryStore(database(project), actor="test")
    with store, store.transaction(actor=CONSOLIDATION, started_at=started) as tx:
        tx.record_run()


def asks_for_a_plan(request: dict[str, Any]) -> bool:
    return "You tidy the long-term memory" in json.dumps(request.get("system"))


def test_due_after_enough_sessions_one_consolidation_that_undo_takes_back(
    project: Path, home: Path, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.script(
        *record_sessions(project, home, MIN_SESSIONS), text_reply(json.dumps(MERGE))
    )
    env = environment(home, anthropic_server)
    done = learn(project, env)
    assert "consolidated 15 → 14 memories" in done.stderr, done.stderr
    requests = anthropic_server.requests
    assert len(requests) == MIN_SESSIONS + 1 and asks_for_a_plan(requests[-1])
    assert not any(asks_for_a_plan(request) for request in requests[:-1])
    (run,) = consolidations(project)
    assert run["command"].startswith("claude learn: consolidation (5 Claude Code sessions")
    assert "fact-1" not in names(project)
    assert not (project / ".memory" / "fact-1.md").exists()  # .memory/ exported after it

    undo = subprocess.run(
        [str(MEMCTL), "undo", run["run_id"][:8]], env=env, cwd=project, capture_output=True
    )
    assert undo.returncode == 0, undo.stderr
    assert {"fact-0", "fact-1"} <= names(project)
    with MemoryStore(database(project), actor="test") as store:
        assert store.get("fact-0").body == "Fact 0."
    assert (project / ".memory" / "fact-1.md").exists()

    # Just consolidated: the next session learned is not followed by another.
    anthropic_server.script(*record_sessions(project, home, 1))
    learn(project, env)
    assert len(anthropic_server.requests) == MIN_SESSIONS + 2
    assert len(consolidations(project)) == 1


@pytest.mark.parametrize(
    ("sessions", "hours_ago", "expected"),
    [
        (MIN_SESSIONS - 1, None, 0),  # too few sessions, never consolidated
        (MIN_SESSIONS, 1, 0),  # too soon after the last
        (MIN_SESSIONS, 25, 1),  # a day later, enough sessions
    ],
)
def test_due_by_time_and_sessions_since_the_last(
    project: Path,
    home: Path,
    anthropic_server: AnthropicServer,
    sessions: int,
    hours_ago: float | None,
    expected: int,
) -> None:
    if hours_ago is not None:
        consolidated_before(project, hours_ago)
    anthropic_server.script(
        *record_sessions(project, home, sessions), text_reply(json.dumps(MERGE))
    )
    learn(project, environment(home, anthropic_server))
    asked = [r for r in anthropic_server.requests if asks_for_a_plan(r)]
    assert len(asked) == expected
    runs = consolidations(project)
    assert len(runs) == expected + (hours_ago is not None)
    assert ("fact-1" in names(project)) == (expected == 0)


def test_the_sessions_of_the_folder_sync_and_other_actors_do_not_count(project: Path) -> None:
    with MemoryStore(database(project), actor="test") as store:
        for i in range(MIN_SESSIONS):
            # chat's extraction carries its session too, and the sync's runs (actor
            # claude-code) none: neither is a Claude Code session learned.
            with store.transaction(actor="chat", session_id=f"chat-{i}") as tx:
                tx.create(f"chat-fact-{i}", "project", "From chat", "Chat.")
            with store.transaction(actor=ACTOR) as tx:
                tx.create(f"synced-{i}", "project", "From the folder", "Synced.")
        assert due(store, ACTOR) is None
        with store.transaction(actor=ACTOR, session_id="one-session") as tx:
            tx.create("learned", "project", "Learned", "Learned.")
        for i in range(MIN_SESSIONS - 1):
            with store.transaction(actor=ACTOR, session_id=f"session-{i}") as tx:
                tx.create(f"learned-{i}", "project", "Learned", "Learned.")
        assert due(store, ACTOR) is not None
        # A day after a consolidation run, with no session since: not due.
        later = datetime.now(UTC) + timedelta(days=2)
        consolidated_before(project, 0)
        assert due(store, ACTOR, now=later) is None


def test_two_workers_one_consolidation(
    project: Path, home: Path, anthropic_server: AnthropicServer
) -> None:
    # The plan takes its time: the second worker starts while the first holds the store.
    anthropic_server.script(
        *record_sessions(project, home, MIN_SESSIONS), slow_reply(2, json.dumps(MERGE))
    )
    env = environment(home, anthropic_server)
    workers = [
        subprocess.Popen(LEARN, env=env, cwd=project, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [worker.communicate(timeout=120)[1] for worker in workers]
    assert all(worker.returncode == 0 for worker in workers), outputs
    assert len(consolidations(project)) == 1
    assert len([r for r in anthropic_server.requests if asks_for_a_plan(r)]) == 1
    assert len(anthropic_server.requests) == MIN_SESSIONS + 1


def test_another_consolidation_running_makes_the_worker_skip_in_one_line(
    project: Path, home: Path, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.script(*record_sessions(project, home, MIN_SESSIONS))
    # `memctl consolidate` or a chat consolidating the store meanwhile.
    with MemoryStore(database(project), actor="test") as store, run_alone(store, CONSOLIDATION):
        done = learn(project, environment(home, anthropic_server))
    skipped = [line for line in done.stderr.splitlines() if "another consolidation" in line]
    assert len(skipped) == 1, done.stderr
    assert consolidations(project) == []
    assert len(anthropic_server.requests) == MIN_SESSIONS
    assert "fact-4" in names(project)


def test_no_model_key_skips_learning_and_consolidation_in_one_line(
    project: Path, home: Path
) -> None:
    record_sessions(project, home, MIN_SESSIONS)
    done = learn(project, environment(home, None))
    assert done.stderr.count("\n") == 1 and "nothing is consolidated" in done.stderr
    assert consolidations(project) == []
    assert not (project / ".memory" / "sessions" / LOG_FILE).exists()


def test_due_on_a_server_store_one_consolidation(
    tmp_path: Path, home: Path, anthropic_server: AnthropicServer, postgres_url: str
) -> None:
    project = tmp_path / "server-project"
    (project / ".memory").mkdir(parents=True)  # where the queue and the log are kept
    with MemoryStore(postgres_url, actor="test") as store:
        for i in range(10):
            store.create(f"note-{i}", "project", f"Note {i} on the release", f"Release note {i}.")
    anthropic_server.script(
        *record_sessions(project, home, MIN_SESSIONS), text_reply(json.dumps(MERGE))
    )
    env = {**environment(home, anthropic_server), "MEMSTORE_DB": postgres_url}
    done = learn(project, env)
    assert "consolidated 15 → 14 memories" in done.stderr, done.stderr
    with MemoryStore(postgres_url, actor="test") as store:
        runs = [run for run in store.history.runs() if run["actor"] == CONSOLIDATION]
        assert len(runs) == 1 and store.find("fact-1") is None
