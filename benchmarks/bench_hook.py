"""`memctl hook` as Claude Code runs it: a whole process per prompt, wall time from start to
exit, with its hook JSON on stdin, beside a bare `python -c pass` (the venv's interpreter) and
`memctl list` in the same run (interleaved, so that a noisy moment hits all alike).

Not a test: it prints figures, and never fails on time. Byte code is written and used, as an
installed package has it (pip compiles it on install), even where PYTHONDONTWRITEBYTECODE
is set: without it every process compiles memstore's modules again.

    .venv/bin/python benchmarks/bench_hook.py            # 1,000 memories, 30 runs of each
    .venv/bin/python benchmarks/bench_hook.py --runs 10

An editable install (`pip install -e`) adds its import finder to every start of Python in
its venv, memctl's and `python3 -c pass`'s alike; a venv with the package installed as users
install it (`pip install .`) shows what they get.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Last: the memstore under test is the installed one (a wheel's, in a venv of its own).
sys.path.append(str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_store import make_queries, memctl_command, write_corpus
from memstore.files.importer import import_memories
from memstore.storage.store import MemoryStore

TARGET_P50_S = 0.20  # UserPromptSubmit, as a whole process (issue 14)


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


def hook_json(event: str, cwd: Path, **fields: str) -> bytes:
    payload = {
        "session_id": "bench",
        "transcript_path": str(cwd / "transcript.jsonl"),
        "cwd": str(cwd),
        "hook_event_name": event,
        **fields,
    }
    return json.dumps(payload).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, "
        f"load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    work = Path(tempfile.mkdtemp(prefix="memstore-bench-hook-"))
    try:
        workspace = work / "project"
        corpus = write_corpus(work / "corpus", args.memories, seed=14)
        with MemoryStore(workspace / ".memory" / "memstore.db", actor="bench") as store:
            import_memories(store, work / "corpus")
        prompts = [f"how do we handle the {q} here?" for q in make_queries(corpus, args.runs, 15)]
        # Stop records the session; with no model key it starts no learning worker.
        line = {"type": "user", "message": {"role": "user", "content": "hello"}}
        (workspace / "transcript.jsonl").write_text(json.dumps(line) + "\n")
        unset = ("MEMSTORE_DB", "MEMCTL_DB", "PYTHONDONTWRITEBYTECODE")
        env = {
            k: v for k, v in os.environ.items() if k not in unset and not k.startswith("ANTHROPIC_")
        }
        env["MEMSTORE_SEMANTIC"] = "off"
        memctl = memctl_command()
        commands: dict[str, tuple[list[str], list[bytes]]] = {
            # The venv's own interpreter: a python3 found on PATH may be a shim script.
            "python -c pass": ([sys.executable, "-c", "pass"], [b""]),
            "memctl hook UserPromptSubmit": (
                [*memctl, "hook"],
                [hook_json("UserPromptSubmit", workspace, prompt=p) for p in prompts],
            ),
            "memctl hook SessionStart": (
                [*memctl, "hook"],
                [hook_json("SessionStart", workspace, source="startup")],
            ),
            "memctl hook Stop": (
                [*memctl, "hook"],
                [hook_json("Stop", workspace, stop_hook_active="false")],
            ),
            "memctl list": ([*memctl, "list"], [b""]),
        }
        for command, stdins in commands.values():  # warm the file cache and the .pyc files
            run(command, stdins[0], workspace, env)
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
            if label.endswith("UserPromptSubmit"):
                verdict = "ok" if p50 <= TARGET_P50_S else "MISSED"
                line += f"  (target p50 <= {TARGET_P50_S} s: {verdict})"
            print(line, flush=True)
        print(f"  prompts that got memories: {answered} of {args.runs}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
