"""Recall quality and speed of the keyword path, with the seed's substring method side by side.

Not a test: it prints figures. The evaluation sets are read from ../shared/eval (recall_dev, and
locomo_dev, whose licence keeps it out of this repository); each is imported through the real
import path into a fresh store.

    .venv/bin/python benchmarks/bench_recall.py            # quality, and latency up to 100,000
    .venv/bin/python benchmarks/bench_recall.py --quick    # latency up to 10,000 only
    .venv/bin/python benchmarks/bench_recall.py --per-query recall_dev   # each query's picks

With semantic recall available (numpy and `memctl semantic fetch`), the offline path with it
("keyword+semantic") is scored beside the keyword path alone, and its latency measured too.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memstore.files.importer import import_memories
from memstore.llm.messages import recent_user_text
from memstore.recall import vectors
from memstore.recall.fusion import offline_recall
from memstore.recall.keyword import keyword_recall
from memstore.recall.model_files import MODEL_NAME
from memstore.recall.vectors import SemanticIndex, SemanticModel
from memstore.storage.store import MemoryStore

EVAL = Path(__file__).resolve().parents[2] / "shared" / "eval"
K = 5

Method = Callable[[MemoryStore, list[dict[str, str]]], list[str]]


def memstore_keyword(store: MemoryStore, messages: list[dict[str, str]]) -> list[str]:
    return [hit.memory.name for hit in keyword_recall(store, recent_user_text(messages), K)]


# One model for every store here: it is loaded once.
MODEL = SemanticModel()
# Each open store's vectors, as the agent keeps them while its store is open.
INDEXES: dict[MemoryStore, SemanticIndex] = {}


def semantic_index(store: MemoryStore) -> SemanticIndex:
    if store not in INDEXES:
        INDEXES[store] = SemanticIndex(store, MODEL)
    return INDEXES[store]


def memstore_offline(store: MemoryStore, messages: list[dict[str, str]]) -> list[str]:
    """The offline path as recall takes it: keywords, with semantic recall when available."""
    hits, _ = offline_recall(
        store,
        recent_user_text(messages),
        K,
        newest=recent_user_text(messages, turns=1),
        semantic=semantic_index(store),
    )
    return [hit.memory.name for hit in hits]


def seed_substring(store: MemoryStore, messages: list[dict[str, str]]) -> list[str]:
    """The seed's fallback: words longer than 3 characters, split on spaces, as substrings of
    name + description, memories in file-name order, the first 5 that match."""
    words = [w.lower() for w in " ".join(m["content"] for m in messages).split() if len(w) > 3]
    picked = []
    for memory in store.memories():
        text = f"{memory.name} {memory.description}".lower()
        if any(word in text for word in words):
            picked.append(memory.name)
            if len(picked) == K:
                break
    return picked


METHODS: dict[str, Method] = {"memstore": memstore_keyword, "seed": seed_substring}
if vectors.available():
    METHODS = {"memstore": memstore_keyword, "+semantic": memstore_offline, "seed": seed_substring}
SHOWN = "+semantic" if "+semantic" in METHODS else "memstore"  # by --per-query


def load_queries(path: Path) -> list[dict]:
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def scores(picked: list[str], relevant: list[str]) -> dict[str, float]:
    gold = set(relevant)
    hits = [name in gold for name in picked[:K]]
    first = next((i for i, hit in enumerate(hits, 1) if hit), None)
    return {
        "P@5": sum(hits) / K,
        "R@5": sum(hits) / len(gold),
        "MRR": 1 / first if first else 0.0,
        "hit@5": 1.0 if first else 0.0,
    }


def summary(rows: list[tuple[dict, list[str]]]) -> str:
    answerable = [(q, p) for q, p in rows if q["relevant"]]
    unanswerable = [p for q, p in rows if not q["relevant"]]
    parts = [f"n={len(rows):<4}"]
    if answerable:
        per_query = [scores(p, q["relevant"]) for q, p in answerable]
        for metric in ("P@5", "R@5", "MRR", "hit@5"):
            parts.append(f"{metric} {statistics.mean(s[metric] for s in per_query):.3f}")
    if unanswerable:
        empty = sum(1 for p in unanswerable if not p) / len(unanswerable)
        parts.append(f"empty on no-answer {empty:.0%} of {len(unanswerable)}")
    returned = statistics.mean(len(p) for _, p in rows)
    parts.append(f"avg returned {returned:.1f}")
    return "  ".join(parts)


def run_set(label: str, stores: list[tuple[Path, Path]], per_query: bool) -> None:
    """`stores`: (memories folder, queries.jsonl) pairs, each imported into its own store."""
    results: dict[str, list[tuple[dict, list[str]]]] = {m: [] for m in METHODS}
    with tempfile.TemporaryDirectory() as work:
        for i, (memories, queries_path) in enumerate(stores):
            with MemoryStore(Path(work) / f"{i}.db") as store:
                import_memories(store, memories)
                if "+semantic" in METHODS:  # scored with every vector in place
                    semantic_index(store).index_all()
                for query in load_queries(queries_path):
                    messages = [{"role": "user", "content": m} for m in query["messages"]]
                    for name, method in METHODS.items():
                        picked = method(store, messages)
                        results[name].append((query, picked))
                        if per_query and name == SHOWN:
                            mark = "ok " if set(picked) & set(query["relevant"]) else "-- "
                            if not query["relevant"]:
                                mark = "ok " if not picked else "!! "
                            turn = query["messages"][-1][:70]
                            print(f"{mark}{query['id']} [{query['kind']}] {turn!r}")
                            print(f"      got {picked}\n     gold {query['relevant']}")
                INDEXES.pop(store, None)
    print(f"\n== {label}")
    for name, rows in results.items():
        print(f"  {name:9} all       {summary(rows)}")
        for key in ("lang", "kind"):
            for value in sorted({q[key] for q, _ in rows}):
                subset = [(q, p) for q, p in rows if q[key] == value]
                print(f"  {name:9} {value:9} {summary(subset)}")


def random_word_store(path: Path, count: int, vocabulary: list[str]) -> MemoryStore:
    """Memories of 40 words drawn uniformly from a vocabulary: every word is mid-frequency,
    the worst case for an OR query."""
    rng = random.Random(count)
    store = MemoryStore(path)
    with store.transaction() as tx:
        for i in range(count):
            words = rng.choices(vocabulary, k=40)
            tx.create(f"memory-{i}", rng.choice(["user", "feedback", "project", "reference"]),
                      " ".join(words[:10]), " ".join(words[10:]))  # fmt: skip
    return store


def real_text_store(path: Path, count: int, texts: list[tuple[str, str]]) -> MemoryStore:
    """Memories whose descriptions and bodies are the evaluation sets' own, repeated as
    often as needed: real word frequencies."""
    store = MemoryStore(path)
    with store.transaction() as tx:
        for i in range(count):
            description, body = texts[i % len(texts)]
            tx.create(f"memory-{i}", "project", description, body)
    return store


def eval_texts(root: Path = EVAL) -> list[tuple[str, str]]:
    """(description, body) of the memories of the evaluation sets, or of one folder of them."""
    from memstore.files.format import parse_memory_text

    texts = []
    for path in sorted(root.glob("**/memories/*.md")):
        parsed = parse_memory_text(path.read_text(encoding="utf-8"))
        texts.append((str(parsed.metadata["description"]), parsed.body))
    return texts


def bench_latency(sizes: list[int]) -> None:
    recall_dev = EVAL / "recall_dev"
    queries = load_queries(recall_dev / "queries.jsonl")
    texts = [
        recent_user_text([{"role": "user", "content": m} for m in q["messages"]]) for q in queries
    ]
    vocabulary = sorted(
        {w for p in (recall_dev / "memories").glob("*.md") for w in p.read_text().split()}
    )
    corpora = {
        "real texts": lambda path, size: real_text_store(path, size, eval_texts()),
        "random words": lambda path, size: random_word_store(path, size, vocabulary),
    }
    print("\n== keyword recall latency (recall_dev queries)")
    with tempfile.TemporaryDirectory() as work:
        for label, make_store in corpora.items():
            for size in sizes:
                with make_store(Path(work) / f"{label}-{size}.db", size) as store:
                    p50, p95 = percentiles(lambda text: keyword_recall(store, text), texts)
                print(f"  {label:12} {size:>7,} memories: p50 {p50:.2f} ms  p95 {p95:.2f} ms")


def percentiles(call: Callable[[Any], object], inputs: list[Any]) -> tuple[float, float]:
    """p50 and p95 in ms of `call` over the inputs, three rounds, after ten to warm up."""
    for item in inputs[:10]:
        call(item)
    timings = []
    for _ in range(3):
        for item in inputs:
            start = time.perf_counter()
            call(item)
            timings.append((time.perf_counter() - start) * 1000)
    timings.sort()
    return timings[len(timings) // 2], timings[int(len(timings) * 0.95)]


def bench_semantic_latency(sizes: list[int]) -> None:
    """The offline path with semantic recall, on stores of real texts whose vectors are
    already stored (computed once per distinct text here: computing them is measured on
    its own, as memories per second)."""
    if not vectors.available():
        print(f"\n== semantic recall: not measured ({vectors.unavailable_reason()})")
        return
    # The questions of one LoCoMo conversation over stores of its memories (repeated): in
    # English, and all about the memories, so that each one runs the encoder.
    conversation = EVAL / "locomo_dev" / "conv-26"
    turns = [
        [{"role": "user", "content": m} for m in q["messages"]]
        for q in load_queries(conversation / "queries.jsonl")
    ]
    texts = eval_texts(conversation)
    encoder = MODEL.encoder()
    print(f"\n== keyword+semantic recall latency ({conversation.name}'s questions and memories)")
    with tempfile.TemporaryDirectory() as work:
        with real_text_store(Path(work) / "index.db", len(texts), texts) as store:
            start = time.perf_counter()
            SemanticIndex(store, MODEL).index_all()
            rate = len(texts) / (time.perf_counter() - start)
            # Memory ids are 1, 2, ... in the order of creation, in each of these stores.
            stored = {i: v for i, _, v in store.live_vectors(MODEL_NAME) if v}
        print(f"  computing vectors: {rate:.0f} memories/s ({len(texts)} memories)")
        for size in sizes:
            with real_text_store(Path(work) / f"semantic-{size}.db", size, texts) as store:
                rows = [(i + 1, 1, stored[(i % len(texts)) + 1]) for i in range(size)]
                store.save_vectors(MODEL_NAME, rows, wait_ms=0)
                p50, p95 = percentiles(lambda turn: memstore_offline(store, turn), turns)
                INDEXES.pop(store, None)
            print(f"  real texts   {size:>7,} memories: p50 {p50:.2f} ms  p95 {p95:.2f} ms")
    for words in (10, 50, 200):
        text = " ".join(["deploy"] * words)
        encoder.encode([text])
        start = time.perf_counter()
        for _ in range(10):
            encoder.encode([text])
        elapsed = (time.perf_counter() - start) * 100
        print(f"  encoding a {words}-word text: {elapsed:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="latency up to 10,000 memories")
    parser.add_argument("--per-query", metavar="SET", help="print each query of this set")
    parser.add_argument("--no-latency", action="store_true")
    args = parser.parse_args()
    run_set(
        "recall_dev",
        [(EVAL / "recall_dev" / "memories", EVAL / "recall_dev" / "queries.jsonl")],
        args.per_query == "recall_dev",
    )
    conversations = sorted(p for p in (EVAL / "locomo_dev").glob("conv-*") if p.is_dir())
    run_set(
        "locomo_dev",
        [(c / "memories", c / "queries.jsonl") for c in conversations],
        args.per_query == "locomo_dev",
    )
    if not args.no_latency:
        bench_latency([1_000, 10_000] if args.quick else [1_000, 10_000, 100_000])
        bench_semantic_latency([1_000, 10_000] if args.quick else [1_000, 10_000, 100_000])


if __name__ == "__main__":
    main()
