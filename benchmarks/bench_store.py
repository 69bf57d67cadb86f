"""Benchmarks for memstore on real SQLite and real files: import, export, search, verify,
start-up.

Not a test: it prints one line per figure, with its target, and never fails on time.

    .venv/bin/python benchmarks/bench_store.py           # full sizes (10,000 memories)
    .venv/bin/python benchmarks/bench_store.py --quick   # smaller sizes, for a quick look
    .venv/bin/python benchmarks/bench_store.py --startup # memctl's start-up only (1,000)

`memctl history --verify` is timed over the 10,000 imported memories (target: 2 s).

Every phase opens its database with MemoryStore before the clock starts, so migrations are
never part of a timed figure.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memstore.files.exporter import export_memories
from memstore.files.importer import import_memories
from memstore.storage.search_terms import query_terms
from memstore.storage.sqlite.search import match_expression
from memstore.storage.store import MemoryStore

TYPES = ("user", "feedback", "project", "reference")

# Content words: what memories are about, and what searches ask for.
WORDS = sorted(
    set(
        """
always never prefer avoid use run check keep write read test tests pytest fixture mock
database sqlite migration schema index query search export import file files folder path
config setting environment variable secret token branch commit merge rebase review pull
request deploy release version tag build cache docker image container kubernetes cluster
service endpoint api client server response timeout retry error exception log
logging trace debug profile benchmark latency memory thread async await queue worker job
schedule cron backup restore delete update create rename history audit event command
shell script python typer click argparse module package dependency lock poetry pip venv
virtualenv ruff mypy lint format style naming convention docstring comment readme docs
user team owner reviewer maintainer customer feedback project reference design decision
architecture layer boundary interface contract model field column table view trigger
transaction rollback process signal frontend backend react vue
css html template render markdown yaml json toml csv parser tokenizer unicode encoding
utf windows linux macos terminal editor vim emacs vscode keyboard shortcut alias prompt
agent claude assistant context window summary note remember forget important urgent
small large fast slow simple clear explicit implicit stable flaky brittle robust safe
staging production local remote upstream origin main develop feature hotfix bugfix
ticket issue sprint deadline meeting standup monday friday morning weekly monthly
account address alert allocation analytics annotation archive argument array assertion
attachment attribute authentication authorization automation availability badge batch
billing binary bitmap blob bookmark boolean bootstrap bottleneck browser buffer bundle
button calendar callback canary capacity certificate changelog channel character chart
checkout checksum chunk class cleanup clipboard clone closure codec collection compiler
component compression concurrency connection console constant constraint controller
cookie coverage credential cursor dashboard dataset date deadlock decorator default
deprecation diff directory dispatch domain download driver duration email embedding
encryption entry enum escape experiment expiry extension failover fallback filter
firewall flag float font fork fragment framework function gateway generator gradle
graph grpc handler hash header heap helper hook host http identifier incident
inheritance input installer instance integer integration invoice iterator java kafka
kernel key label lambda language latch layout leak library license limit link listener
literal loader locale lookup loop macro manifest mapping metric middleware migration
mirror mobile monitor monorepo mutex namespace network nginx node notebook notification
null object offset onboarding operator optimizer order outage output overflow pagination
palette parameter partition password patch payload payment permission pipeline platform
plugin pointer policy pool port postgres preview primary printer priority privacy
protocol proxy publisher quota race rate reader record redis redirect refactor regex
region registry regression replica repository resolver resource rest router runtime
sandbox scaling scanner scope screenshot sdk selector semaphore sentry serializer
session shard sidebar signature snapshot socket sort source spreadsheet sql stack
statement storage stream string struct subscription suite swift symbol sync syntax
tab target telemetry tenant terraform thumbnail tokenizer tooltip topic tracing
traffic transform tree tuple typescript typo upload uri validation vector vendor
webhook widget wiki workflow workspace wrapper zone
""".split()  # noqa: SIM905
    )
)
# Glue between content words, so that bodies read (and tokenize) like English text.
STOP_WORDS = """
the a an to of in on for with and or but when before after if not is are be it this that
we you they our your by from as at so then only also all any every
""".split()  # noqa: SIM905

CHINESE_PHRASES = [
    "数据库迁移",
    "测试覆盖率",
    "代码审查",
    "部署流程",
    "用户偏好",
    "项目截止日期",
    "性能优化",
    "日志格式",
    "错误处理",
    "配置文件",
    "备份策略",
    "命名规范",
    "接口文档",
    "团队约定",
    "发布版本",
    "缓存失效",
]


# -- corpus --------------------------------------------------------------------------------


def sentence(rng: random.Random, low: int = 8, high: int = 16) -> str:
    """About half content words, half stop words, like English prose."""
    words = [
        rng.choice(STOP_WORDS) if rng.random() < 0.45 else rng.choice(WORDS)
        for _ in range(rng.randint(low, high))
    ]
    return " ".join(words).capitalize() + "."


def chinese_sentence(rng: random.Random) -> str:
    return "，".join(rng.sample(CHINESE_PHRASES, rng.randint(2, 4))) + "。"


def make_name(rng: random.Random, taken: set[str]) -> str:
    words = rng.sample(WORDS, rng.randint(2, 4))
    name = "-".join(words)
    while name in taken or len(name) > 60:
        words = [*rng.sample(WORDS, 2), rng.choice(WORDS)]
        name = "-".join(words)
        if name in taken:
            name = f"{name}-{len(taken)}"
    taken.add(name)
    return name


def make_description(rng: random.Random, chinese: bool) -> str:
    if chinese and rng.random() < 0.5:
        return chinese_sentence(rng) + " " + " ".join(rng.choices(WORDS, k=4))
    words: list[str] = []
    while len(" ".join(words)) < 55:
        words.append(rng.choice(WORDS))
    return " ".join(words).capitalize()


def make_body(rng: random.Random, chinese: bool) -> str:
    paragraphs = [" ".join(sentence(rng) for _ in range(rng.randint(2, 4)))]
    if chinese:
        paragraphs.append(" ".join(chinese_sentence(rng) for _ in range(rng.randint(2, 4))))
    paragraphs.append(f"**Why:** {sentence(rng)}")
    paragraphs.append(f"**How to apply:** {sentence(rng)}")
    return "\n\n".join(paragraphs)


def write_corpus(directory: Path, count: int, seed: int) -> list[list[str]]:
    """`count` canonical memory files (about 10% with Chinese text); their content words."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()
    vocabulary = set(WORDS)
    content_words = []
    for _ in range(count):
        chinese = rng.random() < 0.10
        name = make_name(rng, taken)
        description = make_description(rng, chinese)
        body = make_body(rng, chinese)
        text = f"---\nname: {name}\ndescription: {description}\ntype: {rng.choice(TYPES)}\n---\n\n"
        (directory / f"{name}.md").write_text(f"{text}{body}\n", encoding="utf-8")
        words = f"{description} {body}".lower().replace(".", " ").replace("*", " ").split()
        content_words.append(sorted({w for w in words if w in vocabulary}))
    return content_words


def make_queries(corpus: list[list[str]], count: int, seed: int) -> list[str]:
    """1-3 words that occur together in one memory, as someone looking for it would type.

    A few are prefix searches (`migr*`) or Chinese phrases.
    """
    rng = random.Random(seed)
    queries = []
    for _ in range(count):
        words = rng.choice(corpus)
        roll = rng.random()
        if roll < 0.05:
            queries.append(rng.choice(CHINESE_PHRASES))
        elif roll < 0.15:
            queries.append(rng.choice(words)[:4] + "*")
        else:
            queries.append(" ".join(rng.sample(words, rng.randint(1, 3))))
    return queries


# -- reporting -----------------------------------------------------------------------------


def report(label: str, value: float, unit: str, target: float | None, extra: str = "") -> None:
    shown = f"{value:.2f} {unit}" if unit == "s" else f"{value:.3f} {unit}"
    line = f"{label}: {shown}"
    if target is not None:
        verdict = "ok" if value <= target else "MISSED"
        line += f" (target <= {target:g} {unit}: {verdict})"
    if extra:
        line += f"  [{extra}]"
    print(line, flush=True)


def fresh_store(path: Path) -> MemoryStore:
    """Create (and migrate) a new database, outside any timing."""
    if path.exists():
        raise SystemExit(f"{path} already exists; each phase wants a fresh database")
    return MemoryStore(path, actor="bench", command="bench_store")


# -- phases --------------------------------------------------------------------------------


def bench_import(work: Path, count: int, db: Path) -> list[list[str]]:
    files = work / f"corpus-{count}"
    corpus = write_corpus(files, count, seed=1)
    with fresh_store(db) as store:
        start = time.perf_counter()
        result = import_memories(store, files)
        elapsed = time.perf_counter() - start
    assert len(result.created) == count, (len(result.created), result.problems[:3])
    report(f"import {count:,} files", elapsed, "s", 3.0, f"{len(result.notes)} notes")
    return corpus


def bench_export(work: Path, count: int, db: Path) -> None:
    out = work / "export"
    with MemoryStore(db, actor="bench") as store:  # opened (and checked) before timing
        start = time.perf_counter()
        first = export_memories(store, out)
        elapsed = time.perf_counter() - start
        assert len(first.written) == count + 1, len(first.written)  # + MEMORY.md
        report(f"export {count:,} memories to an empty directory", elapsed, "s", 3.0)

        start = time.perf_counter()
        again = export_memories(store, out)
        elapsed = time.perf_counter() - start
        assert not again.written and not again.removed, (again.written[:3], again.removed[:3])
        report(
            f"re-export {count:,} memories, nothing changed",
            elapsed,
            "s",
            0.5,
            f"{again.unchanged:,} unchanged",
        )


def matching_memories(store: MemoryStore, query: str) -> int:
    """How many memories a query matches (all words), to show how hard the queries are."""
    expression = match_expression(query_terms(query))
    with store.engine.connect() as connection:
        sql = "SELECT count(*) FROM memory_fts WHERE memory_fts MATCH ?"
        return int(connection.exec_driver_sql(sql, (expression,)).scalar_one())


def bench_search(db: Path, corpus: list[list[str]], queries: int) -> None:
    count = len(corpus)
    texts = make_queries(corpus, queries, seed=2)
    with MemoryStore(db, actor="bench") as store:
        assert store.count() == count
        for query in texts[:20]:  # warm the connection pool and SQLite's page cache
            store.search(query)
        timings = []
        for query in texts:
            start = time.perf_counter()
            store.search(query)
            timings.append(time.perf_counter() - start)
        matches = statistics.median(matching_memories(store, query) for query in texts)
    timings_ms = sorted(t * 1000 for t in timings)
    p50 = statistics.median(timings_ms)
    p95 = statistics.quantiles(timings_ms, n=20)[18]
    extra = f"{len(texts)} queries, each matching {matches:,.0f} memories at the median"
    report(f"search p50 at {count:,} memories", p50, "ms", 2.0, extra)
    report(f"search p95 at {count:,} memories", p95, "ms", None, f"max {timings_ms[-1]:.2f} ms")


def bench_verify(db: Path, count: int, runs: int) -> None:
    """`memctl history --verify` over the imported store, a tenth of its memories edited
    once more (their events replayed too): the chain, the runs' chain and every row."""
    with (
        MemoryStore(db, actor="bench", command="bench_store edit") as store,
        store.transaction() as tx,
    ):
        for memory in tx.memories()[: count // 10]:
            tx.update(memory, body=memory.body + " (edited)")
    with MemoryStore(db, actor="bench") as store:
        start = time.perf_counter()
        verified = store.history.verify()
        elapsed = time.perf_counter() - start
    report(
        f"verify {count:,} memories in-process",
        elapsed,
        "s",
        2.0,
        f"{verified.events:,} events, {verified.runs} runs",
    )
    env = {**os.environ, "MEMSTORE_DB": str(db)}
    command = [*memctl_command(), "history", "--verify"]
    times = [wall_time(command, env) for _ in range(runs)]
    report(f"memctl history --verify, {count:,} memories", statistics.median(times), "s", 2.0)


def memctl_command() -> list[str]:
    script = Path(sys.executable).parent / "memctl"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "memctl"]


def wall_time(command: list[str], env: dict[str, str]) -> float:
    """The wall time of running `command` as a process of its own."""
    return process_times(command, env)[0]


def process_times(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """The wall time and the CPU time (user and system) of running `command`: on a busy
    machine the CPU time still says what the process itself costs."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        command,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


# The read commands' whole-process target, and --version's (issue 26: reads are instant).
READ_TARGET_S = 0.15
VERSION_TARGET_S = 0.12


def bench_startup(work: Path, count: int, runs: int) -> None:
    """Whole-process times of memctl's read commands (semantic recall off: with it, recall
    loads numpy and the model), beside Python's own start-up and Typer's import."""
    files = work / f"corpus-{count}"
    write_corpus(files, count, seed=3)
    db = work / f"startup-{count}.db"
    with fresh_store(db) as store:
        import_memories(store, files)
        memory = store.summaries()[count // 2]
        word = memory.description.split()[0]
        run_id = store.history.events(memory.name)[0].run_id
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "MEMSTORE_SEMANTIC": "off"}
    env.pop("MEMSTORE_DB", None)
    # As installed: the warm-up writes memstore's .pyc files, which an installed package has.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    memctl = memctl_command()
    on_db = [*memctl, "--db", str(db)]
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        'python -c "import typer"': [sys.executable, "-c", "import typer"],
        "memctl --version": [*memctl, "--version"],
        "memctl -h": [*memctl, "-h"],
        "memctl list": [*on_db, "list"],
        "memctl show": [*on_db, "show", memory.name],
        "memctl search": [*on_db, "search", word],
        "memctl recall --offline": [*on_db, "recall", "--offline", memory.description],
        "memctl index": [*on_db, "index"],
        "memctl path": [*on_db, "path"],
        "memctl history NAME": [*on_db, "history", memory.name],
        "memctl history --runs": [*on_db, "history", "--runs", "-n", "20"],
        "memctl history --run": [*on_db, "history", "--run", run_id[:8]],
    }
    for command in commands.values():  # warm the OS file cache and the .pyc files
        wall_time(command, env)
    times: dict[str, list[tuple[float, float]]] = {key: [] for key in commands}
    for _ in range(runs):  # interleaved, so that a noisy moment hits them all alike
        for key, command in commands.items():
            times[key].append(process_times(command, env))
    print(
        f"whole process, median of {runs} runs, {count:,} memories, semantic recall off"
        " (wall time; CPU time):"
    )
    for key, values in times.items():
        median = statistics.median(wall for wall, _ in values)
        cpu = statistics.median(cpu for _, cpu in values)
        target = VERSION_TARGET_S if key == "memctl --version" else READ_TARGET_S
        verdict = (
            ""
            if not key.startswith("memctl")
            else (f" (target <= {target:.2f} s: {'ok' if median <= target else 'MISSED'})")
        )
        print(f"  {key}: {median:.3f} s; {cpu:.3f} s{verdict}", flush=True)
    check_lazy_imports(db, env, memory.name)


LAZY_CHECK = """
import sys
sys.argv = ["memctl", "--db", *sys.argv[1:]]
from memctl.entry import main
try:
    main()
except SystemExit as exit:
    if exit.code not in (0, None):
        raise
heavy = ("sqlalchemy", "sqlmodel", "alembic", "anthropic")
loaded = [name for name in heavy if name in sys.modules]
sys.stderr.write("LOADED:" + ",".join(loaded) + "\\n")
"""


def check_lazy_imports(db: Path, env: dict[str, str], name: str) -> None:
    for args in (["list"], ["show", name], ["history", name]):
        done = subprocess.run(
            [sys.executable, "-c", LAZY_CHECK, str(db), *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=True,
        )
        line = next(x for x in done.stderr.splitlines() if x.startswith("LOADED:"))
        loaded = [module for module in line.removeprefix("LOADED:").split(",") if module]
        verdict = "ok" if not loaded else "MISSED: imports " + ", ".join(loaded)
        print(f"memctl {args[0]} imports sqlalchemy/sqlmodel/alembic/anthropic: {verdict}")


# -- main ----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer runs")
    parser.add_argument("--startup", action="store_true", help="memctl's start-up only")
    args = parser.parse_args()
    count, startup_count, queries, runs = (
        (1_000, 200, 100, 3) if args.quick else (10_000, 1_000, 200, 7)
    )
    if args.quick:
        print("--quick: reduced sizes; the targets are meant for the full sizes")
    start = time.perf_counter()
    sum(range(10_000_000))
    calibration = time.perf_counter() - start
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, {sys.platform}, "
        f"load average {os.getloadavg()[0]:.2f}, "
        f"sum(range(10**7)) in {calibration:.2f} s (to compare machines)",
        flush=True,
    )
    work = Path(tempfile.mkdtemp(prefix="memstore-bench-"))
    try:
        if not args.startup:
            db = work / "bench.db"
            corpus = bench_import(work, count, db)
            bench_export(work, count, db)
            bench_search(db, corpus, queries)
            bench_verify(db, count, min(runs, 3))
        bench_startup(work, startup_count, runs)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
