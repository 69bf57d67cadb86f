"""`memctl mcp` as a client sees it: start-up, and round trips of its tools over stdio with
1,000 memories (target: `recall` and `search` p50 at most 10 ms).

Not a test: it prints figures. The real `memctl mcp` of this environment runs in a workspace
whose store holds the evaluation sets' real texts (as bench_chat's), and the `mcp` SDK's own
stdio client calls it: each figure is a whole round trip (the client's request, the JSON-RPC
line on the pipe, the tool, its structured result back). Recall texts are recall_dev's
questions; search queries are two words of a memory's description, as someone looking for
it would type. `remember` (a write, its run in history, and `.memory/` exported again) is
measured on its own.

    .venv/bin/python benchmarks/bench_mcp.py
    .venv/bin/python benchmarks/bench_mcp.py --memories 10000
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import Implementation

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_recall import EVAL, eval_texts, load_queries, real_text_store
from memstore.files.exporter import export_memories
from memstore.llm.messages import recent_user_text
from memstore.recall import vectors

MEMCTL = str(Path(sys.executable).with_name("memctl"))
STARTS = 5
ROUNDS = 3
TARGET_MS = 10.0


def server(workspace: Path) -> StdioServerParameters:
    environment = {k: v for k, v in os.environ.items() if k not in ("MEMSTORE_DB", "MEMCTL_DB")}
    return StdioServerParameters(command=MEMCTL, args=["mcp"], cwd=workspace, env=environment)


async def start_up(workspace: Path) -> float:
    """Seconds from starting the process to the answer of its initialize handshake."""
    with open(os.devnull, "w") as errlog:
        started = time.perf_counter()
        async with (
            stdio_client(server(workspace), errlog=errlog) as (read, write),
            ClientSession(
                read, write, client_info=Implementation(name="bench", version="1")
            ) as session,
        ):
            await session.initialize()
            return time.perf_counter() - started


async def round_trips(
    session: ClientSession,
    tool: str,
    arguments: list[dict[str, Any]],
    rounds: int = ROUNDS,
    warm: int = 10,
) -> tuple[float, float]:
    """p50 and p95 in ms of calling `tool` with each of `arguments`, after `warm` calls."""

    def call(item: dict[str, Any]) -> Awaitable[Any]:
        return session.call_tool(tool, item)

    for item in arguments[:warm]:
        await call(item)
    timings = []
    for _ in range(rounds):
        for item in arguments:
            start = time.perf_counter()
            result = await call(item)
            timings.append((time.perf_counter() - start) * 1000)
            assert not result.is_error, result.content
    timings.sort()
    return timings[len(timings) // 2], timings[int(len(timings) * 0.95)]


def report(label: str, p50: float, p95: float, target: float | None = None) -> None:
    verdict = "" if target is None else f"  (target p50 <= {target:.0f} ms: "
    verdict += "" if target is None else ("ok)" if p50 <= target else "MISSED)")
    print(f"{label:28} p50 {p50:6.2f} ms  p95 {p95:6.2f} ms{verdict}")


async def bench(workspace: Path, memories: int) -> None:
    texts = [
        recent_user_text([{"role": "user", "content": m} for m in q["messages"]])
        for q in load_queries(EVAL / "recall_dev" / "queries.jsonl")
    ]
    rng = random.Random(memories)
    descriptions = [d.split() for d, _ in eval_texts()]
    queries = [" ".join(rng.sample(words, min(2, len(words)))) for words in descriptions]

    starts = [await start_up(workspace) for _ in range(STARTS)]
    print(f"{'start-up (to initialize)':28} median {statistics.median(starts):.2f} s  "
          f"min {min(starts):.2f} s  ({STARTS} starts)")  # fmt: skip
    async with (
        stdio_client(server(workspace), errlog=sys.stderr) as (read, write),
        ClientSession(
            read, write, client_info=Implementation(name="bench", version="1")
        ) as session,
    ):
        await session.initialize()
        recalls = [{"text": text} for text in texts]
        report("recall", *await round_trips(session, "recall", recalls), TARGET_MS)
        searches = [{"query": query} for query in queries]
        report("search", *await round_trips(session, "search", searches), TARGET_MS)
        report("list", *await round_trips(session, "list", [{}], rounds=50))
        shows = [{"name": f"memory-{i}"} for i in range(200)]
        report("show", *await round_trips(session, "show", shows))
        fresh = [
            {"type": "project", "description": f"Benchmark note {i}", "body": f"Note {i}."}
            for i in range(40)
        ]
        writes = await round_trips(session, "remember", fresh, rounds=1, warm=0)
        report("remember (write + export)", *writes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=1_000)
    arguments = parser.parse_args()
    print(f"semantic recall: {vectors.unavailable_reason() or 'on'}")
    with tempfile.TemporaryDirectory() as work:
        workspace = Path(work)
        folder = workspace / ".memory"
        folder.mkdir()
        with real_text_store(folder / "memstore.db", arguments.memories, eval_texts()) as store:
            export_memories(store, folder)  # as a workspace has it: a write exports one file
            if vectors.available():
                vectors.SemanticIndex(store).index_all()
        print(f"{arguments.memories:,} memories, {MEMCTL} mcp")
        anyio.run(bench, workspace, arguments.memories)


if __name__ == "__main__":
    main()
