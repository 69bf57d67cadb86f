"""The non-model overhead of one `memctl chat` turn at 1,000 memories (target: 20 ms).

Not a test: it prints figures. The real Agent runs 40 turns against the scripted local server
of tests/anthropic_server.py, over a store of 1,000 memories with the evaluation sets' real
texts. Recall takes the keyword path (no selection model: the fallback's cost is what is
measured), extraction and consolidation are not asked (they are model calls). Every turn
does what a real one does besides: recall and the injected block, the system prompt with the
MEMORY.md index, the compression pipeline over a growing history (tool calls included), the
injected copy and cache marks, and the transcript written (and fsynced) as it grows.

With semantic recall available (see README), the keyword path is fused with it, over
vectors computed before the turns (their one-time cost is bench_recall's); MEMSTORE_SEMANTIC=off
measures the keyword path alone.

Overhead = a turn's wall time minus the time inside the model call (SDK + localhost + the
scripted server) and inside tools (bash runs real processes; that is the work, not overhead).

    .venv/bin/python benchmarks/bench_chat.py
    .venv/bin/python benchmarks/bench_chat.py --memories 10000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_recall import eval_texts, real_text_store
from memstore.agent.loop import Agent
from memstore.agent.memory import AgentMemory
from memstore.agent.sessions import SessionFiles
from memstore.agent.tools import Workspace
from memstore.llm.client import make_client
from memstore.recall import vectors
from memstore.recall.vectors import SemanticIndex
from tests.anthropic_server import serve, text_reply, tool_reply

TURNS = 40
QUESTIONS = [
    "how do we deploy the service to staging?",
    "run the unit tests and tell me what fails",
    "which database migrations are pending?",
    "format the code the way I like it",
    "部署流程是什么?",
    "what did we decide about the release checklist",
]


class Timers:
    """Seconds spent in each wrapped step, per turn."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = defaultdict(float)

    def wrap(self, owner: Any, name: str, label: str) -> None:
        original: Callable[..., Any] = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.spent[label] += time.perf_counter() - start

        setattr(owner, name, timed)


@contextmanager
def scripted_server() -> Iterator[Any]:
    server_iterator = serve()
    server = next(server_iterator)
    try:
        yield server
    finally:
        server_iterator.close()  # shuts the server down now, not at interpreter exit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=1_000)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as work, scripted_server() as server:
        root = Path(work)
        store = real_text_store(root / "memstore.db", arguments.memories, eval_texts())
        semantic = SemanticIndex(store) if vectors.available() else None
        if semantic is not None:
            semantic.index_all()
        print(f"semantic recall: {vectors.unavailable_reason() or 'on'}")
        client = make_client(api_key="bench", base_url=server.url)
        assert client is not None
        (root / "workspace").mkdir()
        (root / "workspace" / "notes.txt").write_text("line\n" * 200)
        memory = AgentMemory(store, None, session_id="bench", export_dir=None, semantic=semantic)
        agent = Agent(
            client,
            model="scripted",
            workspace=Workspace(root / "workspace"),
            session=SessionFiles(root / "session"),
            memory=memory,
        )
        timers = Timers()
        timers.wrap(agent, "_call", "model call")
        timers.wrap(agent.workspace, "run", "tools")
        timers.wrap(memory, "before_turn", "recall + block")
        timers.wrap(agent, "system_prompt", "system prompt + index")
        timers.wrap(agent, "_compress", "compression")
        timers.wrap(agent.session, "append", "transcript")
        timers.wrap(memory, "after_turn", "after turn")
        overheads: list[float] = []
        parts: dict[str, list[float]] = defaultdict(list)
        for turn in range(TURNS):
            if turn % 3 == 0:  # a turn with two rounds of tool calls
                server.script(
                    tool_reply(("read_file", {"path": "notes.txt", "limit": 50})),
                    tool_reply(("glob", {"pattern": "*.txt"})),
                )
            server.script(text_reply(f"answer {turn} " + "words " * 80))
            timers.spent.clear()
            start = time.perf_counter()
            agent.turn(QUESTIONS[turn % len(QUESTIONS)])
            wall = time.perf_counter() - start
            overheads.append(wall - timers.spent["model call"] - timers.spent["tools"])
            for label, seconds in timers.spent.items():
                parts[label].append(seconds)
        print(
            f"{arguments.memories:,} memories, {TURNS} turns, history {len(agent.history)} "
            f"messages at the end, {store.count():,} in the index"
        )
        print(
            f"non-model overhead per turn: p50 {statistics.median(overheads) * 1e3:.1f} ms, "
            f"p95 {sorted(overheads)[int(len(overheads) * 0.95) - 1] * 1e3:.1f} ms, "
            f"max {max(overheads) * 1e3:.1f} ms (target p50 <= 20 ms)"
        )
        for label, values in parts.items():
            values += [0.0] * (TURNS - len(values))
            print(f"  {label:24} p50 {statistics.median(values) * 1e3:7.2f} ms")
        store.close()


if __name__ == "__main__":
    main()
