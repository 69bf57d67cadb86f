"""`memctl hook` as Claude Code runs it, for every event the plugin wires, and the learning
worker's model calls and request bytes per 100 transcript lines.

The hook: a whole process per event, wall time from start to exit, with its hook JSON on
stdin, beside a bare `python -c pass` (the venv's interpreter) and `memctl list` in the same
run (interleaved, so that a noisy moment hits all alike), at 1,000 memories. HOME is a fake
one holding Claude Code's memory folder of the workspace, synced once (every memory written
there), so that SessionStart does what it does at every start: compare the folder and the
store with the last sync's record (they are unchanged: no sync is started). Stop, SessionEnd
and PreCompact record the session; no model key is passed, so no learning worker is started
(that costs the detached process's start, not the hook's answer).

The worker: a synthetic transcript written as Claude Code writes one (a user's prompts, a
reply's thinking, text and tool calls each on a line of its own, the tools' results, file
snapshots), learned by the real `memctl claude learn` against the loopback scripted model
server of the tests (tests/anthropic_server.py: an answer with one memory for every other
call, [] for the rest), counting the requests and their bytes at the server: once as a
backlog read by one worker, once with a Stop, and so a worker, after every turn.

Not a test: it prints figures, and never fails on time. Byte code is written and used, as an
installed package has it (pip compiles it on install), even where PYTHONDONTWRITEBYTECODE
is set: without it every process compiles memstore's modules again.

    .venv/bin/python benchmarks/bench_hook.py            # 1,000 memories, 30 runs of each
    .venv/bin/python benchmarks/bench_hook.py --runs 10 --turns 20

An editable install (`pip install -e`) adds its import finder to every start of Python in
its venv, memctl's and `python3 -c pass`'s alike; a venv with the package installed as users
install it (`pip install .`) shows what they get.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# Last: the memstore under test is the installed one (a wheel's, in a venv of its own).
sys.path.append(str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_store import WORDS, make_queries, memctl_command, write_corpus
from memstore.files.importer import import_memories
from memstore.integrations.claude_folder import find_folder
from memstore.integrations.claude_sessions import record_session
from memstore.integrations.claude_sync import STATE_FILE
from memstore.storage.store import MemoryStore
from tests.anthropic_server import AnthropicServer, serve, text_reply

TARGET_P50_S = 0.20  # every hook event, as a whole process (issues 14 and 27)
EVENTS = ("UserPromptSubmit", "SessionStart", "Stop", "SessionEnd", "PreCompact")
SESSION = "3f0c9a52-8d1e-4b7a-a6c2-5e9d01b4f7a3"


def run(
    command: list[str], stdin: bytes, cwd: Path, env: dict[str, str]
) -> tuple[float, float, bytes]:
    """Wall time, CPU time (user + system: less moved by other work on the machine) and
    stdout of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, input=stdin, capture_output=True, cwd=cwd, env=env, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, done.stdout


def hook_json(event: str, cwd: Path, transcript: Path, **fields: Any) -> bytes:
    payload = {
        "session_id": SESSION,
        "transcript_path": str(transcript),
        "cwd": str(cwd),
        "permission_mode": "default",
        "hook_event_name": event,
        **fields,
    }
    return json.dumps(payload).encode()


class Transcript:
    """A Claude Code transcript as Claude Code writes it, of made-up but plausible turns."""

    def __init__(self, path: Path, cwd: Path, seed: int) -> None:
        self.path, self.cwd, self.parent = path, cwd, None
        self.rng = random.Random(seed)
        self.lines = 0
        path.parent.mkdir(parents=True, exist_ok=True)
        self.write({"type": "summary", "summary": "Parser work", "leafUuid": str(uuid.uuid4())})

    def write(self, line: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as file:
            file.write(json.dumps(line) + "\n")
        self.lines += 1

    def entry(self, kind: str, message: dict[str, Any], **extra: Any) -> None:
        uid = str(uuid.uuid4())
        self.write(
            {
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
        )
        self.parent = uid

    def words(self, low: int, high: int) -> str:
        return " ".join(self.rng.choices(WORDS, k=self.rng.randint(low, high)))

    def assistant(self, block: dict[str, Any]) -> None:
        message = {
            "id": f"msg_{self.rng.getrandbits(64):016x}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [block],
            "stop_reason": None,
            "usage": {"input_tokens": 4, "output_tokens": 120},
        }
        self.entry("assistant", message, requestId=f"req_{self.rng.getrandbits(48):012x}")

    def turn(self, number: int) -> None:
        """A prompt, the reply's thinking and text, 1-4 tool calls with their results, the
        closing text; now and then a file snapshot."""
        prompt = f"Turn {number}: {self.words(12, 60)}."
        if number % 4 == 0:
            prompt += " From now on always run the linters before committing."
        self.entry("user", {"role": "user", "content": prompt})
        self.assistant({"type": "thinking", "thinking": self.words(40, 300), "signature": "s"})
        self.assistant({"type": "text", "text": self.words(10, 40)})
        for call in range(self.rng.randint(1, 4)):
            tool_id = f"toolu_{number:03d}{call}{self.rng.getrandbits(32):08x}"
            name, arguments = self.rng.choice(
                [
                    ("Bash", {"command": "pytest -q tests/test_parser.py", "description": "Test"}),
                    ("Read", {"file_path": str(self.cwd / "src" / "parser.py")}),
                    ("Grep", {"pattern": "def parse", "path": "src"}),
                    ("Edit", {"file_path": "src/parser.py", "old_string": "a", "new_string": "b"}),
                ]
            )
            self.assistant({"type": "tool_use", "id": tool_id, "name": name, "input": arguments})
            output = "\n".join(self.words(4, 14) for _ in range(self.rng.randint(5, 150)))
            result = [{"tool_use_id": tool_id, "type": "tool_result", "content": output}]
            self.entry(
                "user",
                {"role": "user", "content": result},
                toolUseResult={"stdout": output, "stderr": "", "interrupted": False},
            )
        self.assistant({"type": "text", "text": self.words(30, 160)})
        if self.rng.random() < 0.3:
            self.write(
                {
                    "type": "file-history-snapshot",
                    "messageId": str(uuid.uuid4()),
                    "snapshot": {"trackedFileBackups": {}},
                    "isSnapshotUpdate": False,
                }
            )


def answers() -> Iterator[Any]:
    """The scripted extraction's answers: a memory for every other call, [] for the rest."""
    for call in range(10_000):
        item = {
            "name": f"learned-fact-{call}",
            "type": "project",
            "description": f"Learned fact {call} about the parser",
            "body": f"The parser handles case {call} by running the linters first.",
        }
        yield text_reply(json.dumps([item] if call % 2 == 0 else []))


def learn(
    server: AnthropicServer,
    workspace: Path,
    home: Path,
    env: dict[str, str],
    turns: int,
    *,
    per_turn: bool,
) -> tuple[int, int, int]:
    """A session of `turns` turns learned by `memctl claude learn`: after each turn (a Stop
    each), or once at its end. The lines written, model calls and request bytes."""
    session_folder = workspace / ".memory" / "sessions"
    transcript = Transcript(
        home / ".claude" / "projects" / "bench" / f"{uuid.uuid4()}.jsonl", workspace, seed=27
    )
    worker_env = {**env, "ANTHROPIC_API_KEY": "bench-key", "ANTHROPIC_BASE_URL": server.url}
    calls, sent = len(server.requests), len(server.headers)
    event = {
        "session_id": transcript.path.stem,
        "transcript_path": str(transcript.path),
        "cwd": str(workspace),
        "hook_event_name": "Stop",
    }
    for number in range(turns):
        transcript.turn(number)
        if per_turn or number == turns - 1:
            record_session(session_folder, event)
            subprocess.run(
                [*memctl_command(), "claude", "learn"],
                cwd=workspace,
                env=worker_env,
                check=True,
                capture_output=True,
            )
    requests = len(server.requests) - calls
    request_bytes = sum(int(h.get("content-length", 0)) for h in server.headers[sent:])
    return transcript.lines, requests, request_bytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--turns", type=int, default=30, help="turns of the learned session")
    args = parser.parse_args()
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, "
        f"load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    work = Path(tempfile.mkdtemp(prefix="memstore-bench-hook-"))
    try:
        workspace, home = work / "project", work / "home"
        corpus = write_corpus(work / "corpus", args.memories, seed=14)
        with MemoryStore(workspace / ".memory" / "memstore.db", actor="bench") as store:
            import_memories(store, work / "corpus")
        prompts = [f"how do we handle the {q} here?" for q in make_queries(corpus, args.runs, 15)]
        unset = ("MEMSTORE_DB", "MEMCTL_DB", "PYTHONDONTWRITEBYTECODE", "CLAUDE_CONFIG_DIR")
        env = {
            k: v for k, v in os.environ.items() if k not in unset and not k.startswith("ANTHROPIC_")
        }
        env.update(MEMSTORE_SEMANTIC="off", HOME=str(home))
        memctl = memctl_command()
        # Claude Code's memory folder, synced once: every SessionStart then finds it unchanged.
        find_folder(workspace, home / ".claude").path.mkdir(parents=True)
        subprocess.run(
            [*memctl, "claude", "sync"], cwd=workspace, env=env, check=True, capture_output=True
        )
        transcript = home / ".claude" / "projects" / "bench" / f"{SESSION}.jsonl"
        Transcript(transcript, workspace, seed=1).turn(0)
        fields: dict[str, dict[str, Any]] = {
            "SessionStart": {"source": "startup"},
            "Stop": {"stop_hook_active": False},
            "SessionEnd": {"reason": "exit"},
            "PreCompact": {"trigger": "auto", "custom_instructions": ""},
        }
        commands: dict[str, tuple[list[str], list[bytes]]] = {
            # The venv's own interpreter: a python3 found on PATH may be a shim script.
            "python -c pass": ([sys.executable, "-c", "pass"], [b""]),
            "memctl hook UserPromptSubmit": (
                [*memctl, "hook"],
                [hook_json("UserPromptSubmit", workspace, transcript, prompt=p) for p in prompts],
            ),
            **{
                f"memctl hook {event}": (
                    [*memctl, "hook"],
                    [hook_json(event, workspace, transcript, **fields[event])],
                )
                for event in EVENTS[1:]
            },
            "memctl list": ([*memctl, "list"], [b""]),
        }
        for command, stdins in commands.values():  # warm the file cache and the .pyc files
            run(command, stdins[0], workspace, env)
        synced = (workspace / ".memory" / "sessions" / STATE_FILE).stat().st_mtime_ns
        times: dict[str, list[float]] = {label: [] for label in commands}
        cpu: dict[str, list[float]] = {label: [] for label in commands}
        answered = 0
        for i in range(args.runs):
            for label, (command, stdins) in commands.items():
                wall, used, stdout = run(command, stdins[i % len(stdins)], workspace, env)
                times[label].append(wall)
                cpu[label].append(used)
                answered += label.endswith("UserPromptSubmit") and bool(stdout)
        print(f"{args.memories:,} memories, {args.runs} runs of each, the whole process:")
        for label, values in times.items():
            p50 = statistics.median(values)
            p95 = statistics.quantiles(values, n=20)[-1]
            line = (
                f"  {label:<30} wall p50 {p50:.3f} s  p95 {p95:.3f} s"
                f"  (cpu p50 {statistics.median(cpu[label]):.3f} s)"
            )
            if label.startswith("memctl hook"):
                verdict = "ok" if p50 <= TARGET_P50_S else "MISSED"
                line += f"  (target p50 <= {TARGET_P50_S} s: {verdict})"
            print(line, flush=True)
        print(f"  prompts that got memories: {answered} of {args.runs}")
        again = (workspace / ".memory" / "sessions" / STATE_FILE).stat().st_mtime_ns != synced
        print(
            f"  a SessionStart started a sync: {'yes (not the path measured)' if again else 'no'}"
        )
        print(f"the learning worker, a session of {args.turns} turns, {args.memories:,} memories:")
        with contextmanager(serve)() as server:
            server.script(*answers())
            for per_turn, label in ((False, "one worker at its end"), (True, "a Stop every turn")):
                lines, calls, sent = learn(
                    server, workspace, home, env, args.turns, per_turn=per_turn
                )
                per_100 = 100 / lines
                print(
                    f"  {label:<22} {lines} lines: {calls} model calls, {sent:,} request bytes;"
                    f" per 100 lines {calls * per_100:.1f} calls, {sent * per_100:,.0f} bytes"
                    f" ({sent / max(calls, 1):,.0f} bytes a call)",
                    flush=True,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
