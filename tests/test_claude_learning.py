"""Learning from Claude Code's sessions: the installed `memctl hook` fed Claude Code's own Stop
JSON, a transcript of its JSONL lines in a fake HOME, the detached worker (`memctl claude
learn`) asking the loopback model server, and the store it writes."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from memstore.integrations.claude_sessions import (
    LOG_FILE,
    QUEUE_FILE,
    record_session,
    recorded_sessions,
    save_offset,
)
from memstore.integrations.claude_transcript import MAX_LINE_BYTES, read_transcript
from memstore.storage.store import MemoryStore
from tests.anthropic_server import AnthropicServer, slow_reply, text_reply
from tests.conftest import stored_text

MEMCTL = Path(sys.executable).with_name("memctl")
SESSION = "5b7e0c1a-2f3d-4e8a-9c61-0d4f7a2b9e13"
PREFERENCE = {
    "name": "user-indentation",
    "type": "user",
    "description": "Always 4 spaces, never tabs",
    "body": "The user wants Python indented with 4 spaces and never tab characters.",
}
SECRET = "sk-ant-api03-" + "Q7w8E9r0T1" * 8


class Transcript:
    """A Claude Code transcript as Claude Code writes it: one JSON object a line, each entry
    linked to the one before by parentUuid."""

    def __init__(self, path: Path, cwd: Path) -> None:
        self.path, self.cwd, self.parent = path, cwd, None
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    def entry(self, kind: str, message: dict[str, Any], **extra: Any) -> None:
        uid = str(uuid.uuid4())
        line = {
            "parentUuid": self.parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": str(self.cwd),
            "sessionId": SESSION,
            "version": "2.0.14",
            "gitBranch": "main",
            "type": kind,
            "message": message,
            "uuid": uid,
            "timestamp": "2026-12-03T10:15:42.118Z",
            **extra,
        }
        self.parent = uid
        self.write(json.dumps(line) + "\n")

    def write(self, text: str | bytes) -> None:
        with self.path.open("ab") as file:
            file.write(text.encode() if isinstance(text, str) else text)

    def user(self, text: str) -> None:
        self.entry("user", {"role": "user", "content": text})

    def assistant(self, *blocks: dict[str, Any]) -> None:
        # Claude Code writes each block of a reply on a line of its own, with the reply's id.
        for block in blocks:
            message = {
                "id": "msg_01XkR7u3Vq9a2BcDeFgHiJkL",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5-20250929",
                "content": [block],
                "stop_reason": None,
                "usage": {"input_tokens": 4, "output_tokens": 12},
            }
            self.entry("assistant", message, requestId="req_011CTpQ8wY1n")

    def tool_result(self, tool_use_id: str, text: str) -> None:
        content = [{"tool_use_id": tool_use_id, "type": "tool_result", "content": text}]
        self.entry(
            "user",
            {"role": "user", "content": content},
            toolUseResult={"stdout": text, "stderr": "", "interrupted": False},
        )

    def session_with_a_preference(self) -> None:
        self.write(
            json.dumps(
                {"type": "summary", "summary": "Parser indentation", "leafUuid": str(uuid.uuid4())}
            )
            + "\n"
        )
        self.user("From now on, always indent Python with 4 spaces, never tabs. Fix parser.py.")
        self.assistant(
            {"type": "thinking", "thinking": "PRIVATE-THOUGHT the user wants", "signature": "x"},
            {"type": "text", "text": "I'll look at the parser first."},
            {
                "type": "tool_use",
                "id": "toolu_01A2b3C4d5",
                "name": "Bash",
                "input": {"command": "grep -Pn '\\t' src/parser.py", "description": "Tabs"},
            },
        )
        self.tool_result("toolu_01A2b3C4d5", "3:\tTOOL-OUTPUT-LINE return x\n" * 40)
        self.assistant({"type": "text", "text": "Done: parser.py now uses 4 spaces."})
        self.write(
            json.dumps(
                {
                    "type": "file-history-snapshot",
                    "messageId": str(uuid.uuid4()),
                    "snapshot": {"trackedFileBackups": {}},
                    "isSnapshotUpdate": False,
                }
            )
            + "\n"
        )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    with MemoryStore(root / ".memory" / "memstore.db", actor="test") as store:
        store.create(
            "deploy-staging",
            "project",
            "How to deploy to staging",
            "Run `make deploy ENV=staging`.",
        )
    return root


@pytest.fixture
def transcript(home: Path, project: Path) -> Transcript:
    folder = home / ".claude" / "projects" / str(project).replace("/", "-")
    return Transcript(folder / f"{SESSION}.jsonl", project)


def environment(home: Path, server: AnthropicServer | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSTORE_", "ANTHROPIC_"))}
    env.update(HOME=str(home), MEMSTORE_SETTINGS=os.devnull)
    if server is not None:
        env.update(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=server.url)
    return env


def stop_event(transcript: Transcript, event: str = "Stop") -> str:
    """The JSON Claude Code writes on a Stop (or SessionEnd) hook's stdin."""
    fields: dict[str, Any] = {"stop_hook_active": False} if event == "Stop" else {"reason": "exit"}
    return json.dumps(
        {
            "session_id": SESSION,
            "transcript_path": str(transcript.path),
            "cwd": str(transcript.cwd),
            "permission_mode": "default",
            "hook_event_name": event,
            **fields,
        }
    )


def run_hook(stdin: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [str(MEMCTL), "hook"], input=stdin.encode(), capture_output=True, env=env, cwd=cwd
    )


def sessions_folder(project: Path) -> Path:
    return project / ".memory" / "sessions"


def worker_reports(project: Path) -> list[str]:
    log = sessions_folder(project) / LOG_FILE
    lines = log.read_text().splitlines() if log.exists() else []
    report = re.compile(r"claude learn: \d+ sessions?,|no model")
    return [line for line in lines if report.search(line)]


def wait_for_reports(project: Path, count: int, timeout: float = 60) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reports = worker_reports(project)
        if len(reports) >= count:
            time.sleep(0.2)  # the worker exits just after its last line
            return reports
        time.sleep(0.05)
    log = sessions_folder(project) / LOG_FILE
    raise AssertionError(f"no worker report: {log.read_text() if log.exists() else 'no log'}")


def learned(project: Path) -> tuple[dict[str, str], list[Any]]:
    with MemoryStore(project / ".memory" / "memstore.db", actor="test") as store:
        bodies = {m.name: m.body for m in store.memories()}
        runs = [run for run in store.history.runs() if run["actor"] == "claude-code"]
    return bodies, runs


def test_a_stated_preference_is_learned_once_in_a_run_of_its_session(
    project: Path, home: Path, transcript: Transcript, anthropic_server: AnthropicServer
) -> None:
    transcript.session_with_a_preference()
    anthropic_server.script(text_reply(json.dumps([PREFERENCE])))
    env = environment(home, anthropic_server)
    done = run_hook(stop_event(transcript), env, project / "src")
    assert done.returncode == 0 and done.stdout == b"", done.stderr
    assert "0 session" not in wait_for_reports(project, 1)[0]

    bodies, runs = learned(project)
    assert bodies["user-indentation"] == PREFERENCE["body"]
    assert len(runs) == 1 and runs[0]["created"] == 1
    assert runs[0]["session_id"] == SESSION and SESSION in runs[0]["command"]
    (request,) = anthropic_server.requests
    conversation = request["messages"][0]["content"]
    conversation = conversation if isinstance(conversation, str) else conversation[0]["text"]
    # What was said, the call in one line, the result's size only, no thinking.
    assert "always indent Python with 4 spaces" in conversation
    assert "[tool Bash(grep -Pn '\\t' src/parser.py)]" in conversation
    assert "the tool returned" in conversation and "TOOL-OUTPUT-LINE" not in conversation
    assert "PRIVATE-THOUGHT" not in conversation and "Parser indentation" not in conversation
    # All of it is new: none of it is shown as context already reviewed.
    assert "[This turn" in conversation and "[Earlier in the conversation" not in conversation
    history = subprocess.run(
        [str(MEMCTL), "history", "--runs"], capture_output=True, text=True, env=env, cwd=project
    )
    assert SESSION in history.stdout and "claude-code" in history.stdout
    # The learned memory is in .memory/ as any other.
    assert (project / ".memory" / "user-indentation.md").exists()

    # A second Stop (and the SessionEnd) on the same transcript: no new line, no worker.
    run_hook(stop_event(transcript), env, project)
    run_hook(stop_event(transcript, "SessionEnd"), env, project)
    time.sleep(1)
    assert not memctl_processes(project, "claude", "learn") and len(worker_reports(project)) == 1
    # The session ended, read to its end: it leaves the queue.
    assert recorded_sessions(sessions_folder(project)) == []
    # A worker started all the same (by hand) finds nothing new and asks nothing.
    run_hook(stop_event(transcript), env, project)
    subprocess.run(
        [str(MEMCTL), "claude", "learn"], env=env, cwd=project, check=True, capture_output=True
    )
    assert len(anthropic_server.requests) == 1
    assert learned(project) == (bodies, runs)


def test_a_new_turn_is_learned_from_its_own_lines_only(
    project: Path, home: Path, transcript: Transcript, anthropic_server: AnthropicServer
) -> None:
    transcript.session_with_a_preference()
    anthropic_server.script(text_reply(json.dumps([PREFERENCE])), text_reply("[]"))
    env = environment(home, anthropic_server)
    run_hook(stop_event(transcript), env, project)
    wait_for_reports(project, 1)
    transcript.user("The staging deploy is frozen until Friday.")
    transcript.assistant({"type": "text", "text": "Noted."})
    run_hook(stop_event(transcript, "SessionEnd"), env, project)
    wait_for_reports(project, 2)
    second = anthropic_server.requests[1]["messages"][0]["content"]
    second = second if isinstance(second, str) else second[0]["text"]
    assert "frozen until Friday" in second and "4 spaces, never tabs. Fix" not in second
    # The session ended and was read to its end: it leaves the queue.
    assert recorded_sessions(sessions_folder(project)) == []


def test_a_killed_worker_resumes_without_duplicates(
    project: Path, home: Path, transcript: Transcript, anthropic_server: AnthropicServer
) -> None:
    transcript.session_with_a_preference()
    folder = sessions_folder(project)
    session = record_session(folder, json.loads(stop_event(transcript)))
    env = environment(home, anthropic_server)
    learn = [sys.executable, "-m", "memctl", "claude", "learn"]
    # Killed while it waits for the model's answer: nothing was written, the offset stays.
    anthropic_server.script(slow_reply(20, json.dumps([PREFERENCE])))
    worker = subprocess.Popen(learn, env=env, cwd=project, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not anthropic_server.requests and time.monotonic() < deadline:
        time.sleep(0.02)
    assert anthropic_server.requests, "the worker never asked the model"
    worker.send_signal(signal.SIGKILL)
    worker.wait(10)
    assert learned(project) == ({"deploy-staging": "Run `make deploy ENV=staging`."}, [])
    assert recorded_sessions(folder)[0].offset == 0

    # The next worker learns the stretch, once.
    anthropic_server.script(text_reply(json.dumps([PREFERENCE])))
    subprocess.run(learn, env=env, cwd=project, check=True, capture_output=True)
    bodies, runs = learned(project)
    assert "user-indentation" in bodies and len(runs) == 1
    size = transcript.path.stat().st_size
    assert recorded_sessions(folder)[0].offset == size

    # Killed after its run committed and before its offset was saved: the run is found in
    # the history, and the model is not asked again.
    save_offset(folder, session, 0)
    calls = len(anthropic_server.requests)
    subprocess.run(learn, env=env, cwd=project, check=True, capture_output=True)
    assert len(anthropic_server.requests) == calls
    assert learned(project) == (bodies, runs)
    assert recorded_sessions(folder)[0].offset == size


def test_a_secret_in_the_session_is_never_stored(
    project: Path, home: Path, transcript: Transcript, anthropic_server: AnthropicServer
) -> None:
    transcript.user(f"Use this API key for the staging deploys: {SECRET}")
    transcript.assistant({"type": "text", "text": "Configured."})
    leaky = {**PREFERENCE, "name": "staging-api-key", "type": "project", "body": SECRET}
    anthropic_server.script(text_reply(json.dumps([leaky])))
    run_hook(stop_event(transcript), environment(home, anthropic_server), project)
    wait_for_reports(project, 1)
    bodies, runs = learned(project)
    assert list(bodies) == ["deploy-staging"] and runs == []
    with MemoryStore(project / ".memory" / "memstore.db", actor="test") as store:
        assert SECRET not in stored_text(store)
    for path in [*sessions_folder(project).iterdir(), *(project / ".memory").glob("*.md")]:
        assert SECRET not in path.read_text(errors="replace"), path


def test_the_stop_hook_returns_at_once_and_the_worker_runs_detached(
    project: Path, home: Path, transcript: Transcript, anthropic_server: AnthropicServer
) -> None:
    transcript.session_with_a_preference()
    # The model takes 4 s: the hook must not wait for it.
    anthropic_server.script(slow_reply(4, json.dumps([PREFERENCE])))
    started = time.monotonic()
    done = run_hook(stop_event(transcript), environment(home, anthropic_server), project)
    elapsed = time.monotonic() - started
    assert done.returncode == 0 and done.stdout == b"" and done.stderr == b""
    assert elapsed < 3, elapsed
    workers = memctl_processes(project, "claude", "learn")
    assert workers, "no worker was started"
    assert all(os.getsid(pid) == pid for pid in workers)  # a session of its own
    wait_for_reports(project, 1)
    assert "user-indentation" in learned(project)[0]


def test_no_model_key_skips_in_one_line_and_keeps_the_session(
    project: Path, home: Path, transcript: Transcript
) -> None:
    transcript.session_with_a_preference()
    # No worker is started for nothing: the hook says why in the log, once.
    for _ in range(3):
        done = run_hook(stop_event(transcript), environment(home, None), project)
        assert done.returncode == 0 and done.stdout == b"" and done.stderr == b""
    assert not memctl_processes(project, "claude", "learn")
    log = sessions_folder(project) / LOG_FILE
    assert log.read_text().count("\n") == 1 and "no model" in log.read_text()
    # The worker run by hand says the same in one line, and leaves the session unread.
    learn = subprocess.run(
        [str(MEMCTL), "claude", "learn"],
        env=environment(home, None),
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    )
    assert learn.stderr.count("\n") == 1 and "no model" in learn.stderr
    assert recorded_sessions(sessions_folder(project))[0].offset == 0


def test_no_database_records_nothing(tmp_path: Path, home: Path) -> None:
    empty = tmp_path / "elsewhere"
    (empty / ".git").mkdir(parents=True)
    transcript = Transcript(home / ".claude" / "projects" / "x" / f"{SESSION}.jsonl", empty)
    transcript.user("hello")
    done = run_hook(stop_event(transcript), environment(home, None), empty)
    assert done.returncode == 0 and done.stdout == b""
    assert not (empty / ".memory").exists()


def test_the_queue_is_a_file_beside_the_database(
    project: Path, home: Path, transcript: Transcript
) -> None:
    transcript.user("hello")
    run_hook(stop_event(transcript, "PreCompact"), environment(home, None), project)
    queue = json.loads((sessions_folder(project) / QUEUE_FILE).read_text())
    assert queue["sessions"][SESSION]["transcript"] == str(transcript.path)
    assert queue["sessions"][SESSION]["event"] == "PreCompact"


def test_untrusted_lines_are_skipped_and_a_line_being_written_waits(tmp_path: Path) -> None:
    transcript = Transcript(tmp_path / "t.jsonl", tmp_path)
    transcript.user("first")
    transcript.write(b"\x00\xff\xfe binary\n")
    transcript.write(b"{not json\n")
    transcript.write(b"[1, 2]\n")
    transcript.write(b'{"type": "user", "message": "' + b"x" * MAX_LINE_BYTES + b'"}\n')
    transcript.entry("user", {"role": "user", "content": "a subagent's"}, isSidechain=True)
    transcript.entry("user", {"role": "user", "content": "summary"}, isCompactSummary=True)
    transcript.entry("system", {"role": "system", "content": "x"}, subtype="compact_boundary")
    transcript.user("<local-command-stdout>Total cost: $0.42</local-command-stdout>")
    transcript.assistant({"type": "text", "text": "second"})
    whole = transcript.path.stat().st_size
    transcript.write(b'{"type": "user", "message": {"role": "user", "content": "thi')
    chunk = read_transcript(transcript.path, 0)
    texts = [json.dumps(entry.message["content"]) for entry in chunk.entries]
    assert len(texts) == 2 and "first" in texts[0] and "second" in texts[1]
    assert chunk.skipped == 4 and chunk.end == whole
    transcript.write(b'rd"}}\n')
    later = read_transcript(transcript.path, chunk.end)
    assert [entry.message["content"] for entry in later.entries] == ["third"]
    assert later.end == transcript.path.stat().st_size


def memctl_processes(cwd: Path, *words: str) -> list[int]:
    """The memctl processes running in `cwd` (not another test's) whose command line ends in
    `words` (`claude learn`: the worker the hook starts)."""
    tail = [word.encode() for word in words]
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            folder = Path(os.readlink(entry / "cwd"))
        except OSError:
            continue
        # The command line read from /proc ends in an empty word (its last NUL).
        if folder == cwd and tail in (command[-len(tail) :], command[-len(tail) - 1 : -1]):
            found.append(int(entry.name))
    return found


def test_a_transcript_ending_in_a_line_being_written_is_read_up_to_it(
    project: Path, home: Path, transcript: Transcript, anthropic_server: AnthropicServer
) -> None:
    transcript.session_with_a_preference()
    whole = transcript.path.stat().st_size
    transcript.write(b'{"type": "assistant", "message": {"role": "assistant", "content": [{"ty')
    folder = sessions_folder(project)
    record_session(folder, json.loads(stop_event(transcript)))
    anthropic_server.script(text_reply(json.dumps([PREFERENCE])))
    env = environment(home, anthropic_server)
    learn = [sys.executable, "-m", "memctl", "claude", "learn"]
    # The worker stops (no waiting for the line's end) and reads up to it.
    subprocess.run(learn, env=env, cwd=project, check=True, capture_output=True, timeout=60)
    assert recorded_sessions(folder)[0].offset == whole
    assert len(anthropic_server.requests) == 1


def test_the_stop_hook_imports_neither_typer_nor_the_orm(
    project: Path, home: Path, transcript: Transcript
) -> None:
    """A Stop is answered as a prompt is, before Typer and SQLAlchemy: the worker is the one
    that pays for them."""
    heavy = ("sqlalchemy", "typer", "click", "alembic", "anthropic", "numpy", "rich", "yaml")
    script = (
        "import json, sys\n"
        "sys.argv = ['memctl', 'hook']\n"
        "from memctl.entry import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "sys.stdout.write(json.dumps(sorted(sys.modules)))\n"
    )
    transcript.user("hello")
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=stop_event(transcript).encode(),
        capture_output=True,
        check=True,
        env=environment(home, None),
        cwd=project,
    )
    assert done.stderr == b""
    loaded = {m.split(".")[0] for m in json.loads(done.stdout)} & set(heavy)
    assert loaded == set()


def test_a_worker_killed_after_the_model_answered_and_before_its_commit_resumes(
    project: Path, home: Path, transcript: Transcript, anthropic_server: AnthropicServer
) -> None:
    transcript.session_with_a_preference()
    folder = sessions_folder(project)
    record_session(folder, json.loads(stop_event(transcript)))
    env = environment(home, anthropic_server)
    learn = [sys.executable, "-m", "memctl", "claude", "learn"]
    anthropic_server.script(text_reply(json.dumps([PREFERENCE])))
    # Another writer holds the database: the worker has its answer and waits to commit it.
    writer = sqlite3.connect(project / ".memory" / "memstore.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    worker = subprocess.Popen(learn, env=env, cwd=project, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not anthropic_server.requests and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(1.5)  # the answer is sent at once; the commit waits up to 15 s for the lock
        assert worker.poll() is None, "the worker did not wait for the database"
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert learned(project) == ({"deploy-staging": "Run `make deploy ENV=staging`."}, [])
    assert recorded_sessions(folder)[0].offset == 0

    anthropic_server.script(text_reply(json.dumps([PREFERENCE])))
    subprocess.run(learn, env=env, cwd=project, check=True, capture_output=True)
    bodies, runs = learned(project)
    assert "user-indentation" in bodies and len(runs) == 1 and runs[0]["created"] == 1
    assert recorded_sessions(folder)[0].offset == transcript.path.stat().st_size


def test_a_session_is_learned_into_a_server_store(
    tmp_path: Path, home: Path, anthropic_server: AnthropicServer, postgres_url: str
) -> None:
    project = tmp_path / "server-project"
    (project / ".memory").mkdir(parents=True)  # where the queue and the log are kept
    transcript = Transcript(home / ".claude" / "projects" / "p" / f"{SESSION}.jsonl", project)
    transcript.session_with_a_preference()
    anthropic_server.script(text_reply(json.dumps([PREFERENCE])))
    env = {**environment(home, anthropic_server), "MEMSTORE_DB": postgres_url}
    done = run_hook(stop_event(transcript), env, project)
    assert done.returncode == 0 and done.stderr == b""
    assert "1 created" in wait_for_reports(project, 1)[0]
    with MemoryStore(postgres_url, actor="test") as store:
        assert store.get("user-indentation").body == PREFERENCE["body"]
        runs = [run for run in store.history.runs() if run["actor"] == "claude-code"]
    assert len(runs) == 1 and runs[0]["session_id"] == SESSION


def test_a_model_down_keeps_the_stretch_and_unusable_answers_give_it_up_at_last(
    project: Path, home: Path, transcript: Transcript, anthropic_server: AnthropicServer
) -> None:
    transcript.session_with_a_preference()
    folder = sessions_folder(project)
    record_session(folder, json.loads(stop_event(transcript)))
    env = environment(home, anthropic_server)
    learn = [sys.executable, "-m", "memctl", "claude", "learn"]
    # The server fails (no reply scripted: a 500): the stretch waits for as long as it takes.
    for _ in range(4):
        subprocess.run(learn, env=env, cwd=project, check=True, capture_output=True)
    assert recorded_sessions(folder)[0].offset == 0
    # Answers that are no JSON array: asked again twice, then left out, so that the
    # session's later lines are not held back for ever.
    for attempt in range(3):
        anthropic_server.script(text_reply("Nothing here seems worth keeping."))
        subprocess.run(learn, env=env, cwd=project, check=True, capture_output=True)
        expected = transcript.path.stat().st_size if attempt == 2 else 0
        assert recorded_sessions(folder)[0].offset == expected
    assert learned(project)[1] == []


def test_a_long_backlog_is_learned_in_stretches_of_contiguous_bytes(
    project: Path, home: Path, transcript: Transcript, anthropic_server: AnthropicServer
) -> None:
    from memstore.learning.extract import TRANSCRIPT_MAX_CHARS

    for turn in range(30):
        transcript.user(f"Turn {turn}: " + "the parser handles nested brackets. " * 60)
        transcript.assistant({"type": "text", "text": f"Reply {turn}: " + "understood. " * 150})
    folder = sessions_folder(project)
    record_session(folder, json.loads(stop_event(transcript)))
    facts = [
        {**PREFERENCE, "name": f"parser-fact-{i}", "type": "project", "body": f"Fact {i}."}
        for i in range(12)
    ]
    anthropic_server.script(*(text_reply(json.dumps([fact])) for fact in facts))
    env = environment(home, anthropic_server)
    learn = [sys.executable, "-m", "memctl", "claude", "learn"]
    subprocess.run(learn, env=env, cwd=project, check=True, capture_output=True)
    calls = len(anthropic_server.requests)
    assert 3 <= calls < len(facts)
    for request in anthropic_server.requests:
        text = request["messages"][0]["content"]
        text = text if isinstance(text, str) else text[0]["text"]
        conversation = text.split("<conversation>\n", 1)[1]
        assert len(conversation) <= TRANSCRIPT_MAX_CHARS + len("\n</conversation>")
        assert "[This turn" in conversation  # nothing was cut from its start
    _, runs = learned(project)
    ranges = [run["command"].rsplit("bytes ", 1)[1].rstrip(")").split("-") for run in runs]
    assert len(runs) == calls and ranges[0][0] == "0"
    assert all(ranges[i][1] == ranges[i + 1][0] for i in range(len(ranges) - 1))
    size = transcript.path.stat().st_size
    assert int(ranges[-1][1]) == size == recorded_sessions(folder)[0].offset


def test_no_second_worker_while_one_holds_the_store(
    project: Path, home: Path, transcript: Transcript, anthropic_server: AnthropicServer
) -> None:
    from memstore.integrations.claude_sessions import LEARNING_RUN
    from memstore.storage.run_lock import run_alone

    transcript.session_with_a_preference()
    env = environment(home, anthropic_server)
    store = MemoryStore(project / ".memory" / "memstore.db", actor="test")
    with store, run_alone(store, LEARNING_RUN) as held:
        assert held
        done = run_hook(stop_event(transcript), env, project)
        assert done.returncode == 0 and done.stderr == b""
        # The session is recorded for the worker that holds the lock; none is started.
        assert recorded_sessions(sessions_folder(project))[0].session_id == SESSION
        assert not memctl_processes(project, "claude", "learn")
        # A worker started by hand finds the lock held and stops at once.
        learn = subprocess.run(
            [str(MEMCTL), "claude", "learn"], env=env, cwd=project, capture_output=True
        )
        assert learn.returncode == 0 and learn.stderr.count(b"\n") == 1
        assert b"another worker is learning" in learn.stderr
    assert anthropic_server.requests == []


@pytest.mark.parametrize(
    "fields",
    [
        {"session_id": "../../etc"},
        {"session_id": None},
        {"transcript_path": "relative/t.jsonl"},
        {"transcript_path": "/tmp/not-a-transcript.txt"},
        {"transcript_path": 7},
    ],
)
def test_a_stop_that_names_no_session_records_nothing(
    project: Path, home: Path, transcript: Transcript, fields: dict[str, Any]
) -> None:
    event = {**json.loads(stop_event(transcript)), **fields}
    done = run_hook(json.dumps(event), environment(home, None), project)
    assert done.returncode == 0 and done.stdout == b""
    assert done.stderr.startswith(b"memctl: hook: ") and done.stderr.count(b"\n") == 1
    assert recorded_sessions(sessions_folder(project)) == []
