"""The secret check (memstore.storage.secrets) beside detect-secrets, on one corpus.

The corpus is tests/secret_corpus.py: credentials the check must catch and look-alikes it must
let through, in three parts (the first tables; issue 28's shapes, tuned on; a held-out part,
never tuned on). For each tool: credentials caught, credentials missed, look-alikes flagged
(false positives), per part. Then the check's speed on 1 MB of text (code and docs of this
checkout), the size of text it reads at most, and a memory's write-time check.

detect-secrets is not a dependency of memstore: it runs as its own command, as a user would
run it (`detect-secrets scan --all-files`, default plugins and filters), on the corpus written
one case per .md file. Install it in a throwaway venv and give its command:

    python3 -m venv /tmp/ds && /tmp/ds/bin/pip install detect-secrets
    .venv/bin/python benchmarks/bench_secrets.py --detect-secrets /tmp/ds/bin/detect-secrets
    .venv/bin/python benchmarks/bench_secrets.py --cases   # each case where the two differ

Without it (none given, none on PATH) only memstore's figures are printed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memstore.storage import secrets  # noqa: E402
from memstore.storage.secrets import find_secrets, memory_secret  # noqa: E402
from tests import secret_corpus as corpus  # noqa: E402

PARTS = [
    ("first tables", corpus.CREDENTIALS, corpus.LOOK_ALIKES),
    ("shapes, tuned", corpus.SHAPES, corpus.SHAPE_LOOK_ALIKES),
    ("held out", corpus.HELD_OUT_SHAPES, corpus.HELD_OUT_LOOK_ALIKES),
]


def cases() -> list[tuple[str, str, str, bool]]:
    """(part, label, text, is a credential) for every case of the corpus."""
    found = []
    for part, credentials, look_alikes in PARTS:
        found += [(part, label, text, True) for label, text in credentials]
        found += [(part, text[:50], text, False) for text in look_alikes]
    return found


def memstore_flags(texts: list[str]) -> list[bool]:
    return [bool(find_secrets(text)) for text in texts]


def detect_secrets_flags(command: str, texts: list[str]) -> list[bool]:
    """Whether `detect-secrets scan` reports anything in each text, as a file of its own."""
    with tempfile.TemporaryDirectory() as folder:
        for index, text in enumerate(texts):
            (Path(folder) / f"case-{index:03}.md").write_text(text + "\n")
        done = subprocess.run(
            [command, "scan", "--all-files"], cwd=folder, capture_output=True, text=True, check=True
        )
    results = json.loads(done.stdout)["results"]
    return [f"case-{index:03}.md" in results for index in range(len(texts))]


def detect_secrets_version(command: str) -> str:
    done = subprocess.run([command, "--version"], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def report(name: str, all_cases: list[tuple[str, str, str, bool]], flags: list[bool]) -> None:
    print(f"\n{name}")
    print(f"  {'part':<16}{'caught':>10}{'missed':>8}{'false positives':>18}")
    totals = [0, 0, 0, 0, 0]
    for part, _, _ in PARTS:
        rows = [
            (case, flag) for case, flag in zip(all_cases, flags, strict=True) if case[0] == part
        ]
        credentials = [flag for case, flag in rows if case[3]]
        look_alikes = [flag for case, flag in rows if not case[3]]
        caught, flagged = sum(credentials), sum(look_alikes)
        print(
            f"  {part:<16}{f'{caught}/{len(credentials)}':>10}{len(credentials) - caught:>8}"
            f"{f'{flagged}/{len(look_alikes)}':>18}"
        )
        for index, value in enumerate(
            [caught, len(credentials), len(credentials) - caught, flagged, len(look_alikes)]
        ):
            totals[index] += value
    caught, count, missed, flagged, alikes = totals
    print(f"  {'all':<16}{f'{caught}/{count}':>10}{missed:>8}{f'{flagged}/{alikes}':>18}")


def sample_text(size: int) -> str:
    """`size` characters of this checkout's code and docs, repeated."""
    files = sorted([*ROOT.glob("memstore/**/*.py"), *ROOT.glob("docs/*.md")])
    text = "".join(path.read_text() for path in files)
    return (text * (size // len(text) + 1))[:size]


def best_of(runs: int, call: object, clock: object = time.process_time) -> float:
    """The least time of `runs` calls: CPU time by default, which the machine's other work
    disturbs less than wall time."""
    times = []
    for _ in range(runs):
        started = clock()  # type: ignore[operator]
        call()  # type: ignore[operator]
        times.append(clock() - started)  # type: ignore[operator]
    return min(times)


def speed(command: str | None) -> None:
    print("\nspeed (CPU time, best of 5)")
    text = sample_text(1_000_000)
    seconds = best_of(5, lambda: find_secrets(text))
    print(f"  {'find_secrets, 1 MB of code and docs (every rule runs)':<56}{seconds:.3f} s")
    body = sample_text(100_000)
    seconds = best_of(5, lambda: memory_secret("notes", "Notes", body))
    print(f"  {'memory_secret, a memory of the largest body (100 kB)':<56}{seconds:.3f} s")
    one = "Deploy with `make release`; the staging database resets every Sunday."
    seconds = best_of(5, lambda: memory_secret("deploy", "Deploy notes", one))
    print(f"  {'memory_secret, a one-line memory':<56}{seconds * 1000:.2f} ms")
    print(f"  {'the most it reads (more is refused)':<56}{secrets.SCAN_MAX_CHARS:,} characters")
    if command is not None:
        with tempfile.TemporaryDirectory() as folder:
            (Path(folder) / "text.md").write_text(text)
            seconds = best_of(
                3,
                lambda: subprocess.run(
                    [command, "scan", "--all-files"], cwd=folder, capture_output=True, check=True
                ),
                clock=time.perf_counter,
            )
        print(f"  {'detect-secrets scan, the same 1 MB (a process, wall)':<56}{seconds:.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--detect-secrets", help="the detect-secrets command (default: PATH)")
    parser.add_argument("--cases", action="store_true", help="each case where the tools differ")
    parser.add_argument("--no-speed", action="store_true")
    options = parser.parse_args()
    command = options.detect_secrets or shutil.which("detect-secrets")

    all_cases = cases()
    texts = [case[2] for case in all_cases]
    credentials = sum(case[3] for case in all_cases)
    print(
        f"corpus: {credentials} credentials and {len(all_cases) - credentials} look-alikes "
        "(tests/secret_corpus.py)"
    )
    ours = memstore_flags(texts)
    report("memstore", all_cases, ours)
    theirs: list[bool] | None = None
    if command is None:
        print("\ndetect-secrets: not found (--detect-secrets PATH; see this script's docstring)")
    else:
        theirs = detect_secrets_flags(command, texts)
        report(detect_secrets_version(command).join(("detect-secrets ", "")), all_cases, theirs)
    if options.cases:
        print("\ncases where a tool is wrong (memstore / detect-secrets):")
        for case, mine, other in zip(all_cases, ours, theirs or ours, strict=True):
            wrong = [name for name, flag in (("memstore", mine), ("ds", other)) if flag != case[3]]
            if wrong:
                what = "credential missed" if case[3] else "look-alike flagged"
                print(f"  [{case[0]}] {what} by {', '.join(wrong)}: {case[1]!r}")
    if not options.no_speed:
        speed(command)


if __name__ == "__main__":
    main()
