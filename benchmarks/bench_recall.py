"""Recall quality and speed of the keyword path, beside a plain FTS5 query and the seed's
substring method, on the sets recall is tuned on and on held-out ones, side by side.

Not a test: it prints figures. recall_dev and locomo_dev (whose licence keeps it out of this
repository) are read from ../shared/eval, the others from benchmarks/eval; which are tuned on
and which are held out is in TUNING_SETS and HELD_OUT_SETS (benchmarks/eval/README.md says why).
Each set is imported through the real import path into a fresh store.

    .venv/bin/python benchmarks/bench_recall.py            # quality, and latency up to 100,000
    .venv/bin/python benchmarks/bench_recall.py --quick    # latency up to 10,000 only
    .venv/bin/python benchmarks/bench_recall.py --per-query recall_dev   # each query's picks
    .venv/bin/python benchmarks/bench_recall.py --ablation # each rule and word list on and off
    .venv/bin/python benchmarks/bench_recall.py --tuning-only   # never reads the held-out sets

With semantic recall available (the `semantic` extra), the offline path with it
("+semantic") is scored beside the keyword path alone, and its latency measured too.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from memstore.files.importer import import_memories
from memstore.llm.messages import recent_user_text
from memstore.recall import keyword, lexicon, terms, tokens, vectors
from memstore.recall.fusion import offline_recall
from memstore.recall.keyword import keyword_recall
from memstore.recall.model_files import MODEL_NAME
from memstore.recall.vectors import SemanticIndex, SemanticModel
from memstore.storage import search_terms as search
from memstore.storage.search_terms import is_content_term, search_terms
from memstore.storage.sqlite import search as fts_search
from memstore.storage.store import MemoryStore

# The sets beside the checkout (../shared/eval) and those of this repository (benchmarks/eval).
EVAL = Path(__file__).resolve().parents[2] / "shared" / "eval"
HELD_OUT = Path(__file__).resolve().parent / "eval"
K = 5
LANGUAGES = ("en", "zh", "mixed")

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


def plain_fts5(store: MemoryStore, messages: list[dict[str, str]]) -> list[str]:
    """The baseline any FTS5 user would write: the text's words without stopwords (English
    porter-stemmed, Han text as bigrams, as the index holds them) in one OR query, by bm25;
    no lexicon, no re-ordering, no floor."""
    # search_terms less lone letters and digits, as the figures in recall-notes.md had it
    words = [t for t in search_terms(recent_user_text(messages)) if is_content_term(t)]
    ranked = store.rank_ids(words, K) if words else {}
    best = sorted(ranked, key=lambda i: (-ranked[i], i))
    records = store.by_ids(best)
    return [records[i].name for i in best if i in records]


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


METHODS: dict[str, Method] = {"memstore": memstore_keyword}
if vectors.available():
    METHODS["+semantic"] = memstore_offline
METHODS.update({"fts5": plain_fts5, "seed": seed_substring})
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


Rows = list[tuple[dict, list[str]]]  # each query, and the memories a method picked


def mean_score(rows: Rows, metric: str) -> float | None:
    """The mean of `metric` over the rows' answerable queries; None when there are none."""
    per_query = [scores(p, q["relevant"])[metric] for q, p in rows if q["relevant"]]
    return statistics.mean(per_query) if per_query else None


def empty_share(rows: Rows) -> tuple[float, int] | None:
    """The share of no-answer turns left empty, and how many there are; None without any."""
    unanswerable = [p for q, p in rows if not q["relevant"]]
    if not unanswerable:
        return None
    return sum(1 for p in unanswerable if not p) / len(unanswerable), len(unanswerable)


def summary(rows: Rows) -> str:
    parts = [f"n={len(rows):<4}"]
    for metric in ("P@5", "R@5", "MRR", "hit@5"):
        value = mean_score(rows, metric)
        if value is not None:
            parts.append(f"{metric} {value:.3f}")
    empty = empty_share(rows)
    if empty is not None:
        parts.append(f"empty on no-answer {empty[0]:.0%} of {empty[1]}")
    returned = statistics.mean(len(p) for _, p in rows)
    parts.append(f"avg returned {returned:.1f}")
    return "  ".join(parts)


def set_stores(root: Path) -> list[tuple[Path, Path]]:
    """(memories folder, queries.jsonl) of an evaluation set: one store, or one per
    conversation folder (LoCoMo)."""
    if (root / "queries.jsonl").exists():
        return [(root / "memories", root / "queries.jsonl")]
    return [
        (c / "memories", c / "queries.jsonl") for c in sorted(root.glob("conv-*")) if c.is_dir()
    ]


def score_set(
    stores: list[tuple[Path, Path]], methods: dict[str, Method], per_query: bool = False
) -> dict[str, Rows]:
    """Each method's picks for each query of the set; `stores`: (memories folder,
    queries.jsonl) pairs, each imported into its own store."""
    results: dict[str, Rows] = {m: [] for m in methods}
    with tempfile.TemporaryDirectory() as work:
        for i, (memories, queries_path) in enumerate(stores):
            with MemoryStore(Path(work) / f"{i}.db") as store:
                import_memories(store, memories)
                if "+semantic" in methods:  # scored with every vector in place
                    semantic_index(store).index_all()
                for query in load_queries(queries_path):
                    messages = [{"role": "user", "content": m} for m in query["messages"]]
                    for name, method in methods.items():
                        picked = method(store, messages)
                        results[name].append((query, picked))
                        if per_query and name == SHOWN:
                            print_query(query, picked)
                INDEXES.pop(store, None)
    return results


def print_query(query: dict, picked: list[str]) -> None:
    mark = "ok " if set(picked) & set(query["relevant"]) else "-- "
    if not query["relevant"]:
        mark = "ok " if not picked else "!! "
    turn = query["messages"][-1][:70]
    print(f"{mark}{query['id']} [{query['kind']}] {turn!r}")
    print(f"      got {picked}\n     gold {query['relevant']}")


def run_set(label: str, stores: list[tuple[Path, Path]], per_query: bool) -> dict[str, Rows]:
    """Score the set with every method and print its figures, overall, by language and kind."""
    results = score_set(stores, METHODS, per_query)
    print(f"\n== {label}")
    for name, rows in results.items():
        print(f"  {name:9} all       {summary(rows)}")
        for key in ("lang", "kind"):
            for value in sorted({q[key] for q, _ in rows}):
                subset = [(q, p) for q, p in rows if q[key] == value]
                print(f"  {name:9} {value:9} {summary(subset)}")
    return results


def by_language(rows: Rows) -> dict[str, Rows]:
    """The rows overall, per language, and Chinese and mixed together."""
    slices = {"all": rows}
    slices.update({lang: [(q, p) for q, p in rows if q["lang"] == lang] for lang in LANGUAGES})
    slices["zh+mixed"] = slices["zh"] + slices["mixed"]
    return slices


def cell(value: float | None) -> str:
    return "   - " if value is None else f"{value:.3f}"[1:] if value < 1 else "1.00"


def print_side_by_side(
    tuning: dict[str, Rows], held_out: dict[str, Rows] | None, labels: str
) -> None:
    """R@5 per language of each method on a tuning set and a held-out set, side by side,
    and the share of no-answer turns each leaves empty; the tuning side alone without one."""
    shown = "tuning | held out" if held_out is not None else "tuning only"
    print(f"\n== side by side, R@5 ({shown}): {labels}")
    languages = ("all", *LANGUAGES, "zh+mixed")
    print("  " + " " * 9 + "".join(f"  {lang:>11}" for lang in languages) + "   empty on no-answer")
    for name in tuning if held_out is None else held_out:
        sides = [tuning.get(name, [])] + ([] if held_out is None else [held_out[name]])
        slices = [by_language(rows) for rows in sides]
        cells = [" | ".join(cell(mean_score(s[lang], "R@5")) for s in slices) for lang in languages]
        empties = [empty_share(rows) for rows in sides]
        empty = " | ".join("  - " if e is None else f"{e[0]:>4.0%}" for e in empties)
        print(f"  {name:9}" + "".join(f"  {c:>11}" for c in cells) + f"   {empty}")


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
    bench_background_indexing(max(sizes[:2]), texts, turns)
    for words in (10, 50, 200):
        text = " ".join(["deploy"] * words)
        encoder.encode([text])
        start = time.perf_counter()
        for _ in range(10):
            encoder.encode([text])
        elapsed = (time.perf_counter() - start) * 100
        print(f"  encoding a {words}-word text: {elapsed:.1f} ms")


def bench_background_indexing(
    size: int, texts: list[tuple[str, str]], turns: list[list[dict[str, str]]]
) -> None:
    """A chat's case: a store of `size` memories without vectors, computed by the background
    indexer (its own thread and connection) while recalls go on; how long they take then,
    and how long computing all of them takes."""
    with (
        tempfile.TemporaryDirectory() as work,
        real_text_store(Path(work) / "background.db", size, texts) as store,
    ):
        index = SemanticIndex(store, MODEL, background=True)
        start = time.perf_counter()
        index.start()
        timings = []
        while index._indexer is not None and index._indexer.is_alive():
            turn = turns[len(timings) % len(turns)]
            began = time.perf_counter()
            offline_recall(store, recent_user_text(turn), K,
                           newest=recent_user_text(turn, turns=1), semantic=index)  # fmt: skip
            timings.append((time.perf_counter() - began) * 1000)
            time.sleep(0.05)  # a user's pace is slower still
        elapsed = time.perf_counter() - start
        present, live = store.vector_counts(MODEL_NAME)
        index.close()
    timings.sort()
    p50, p95 = timings[len(timings) // 2], timings[int(len(timings) * 0.95)]
    print(
        f"  background indexing of {size:,} memories: {elapsed:.0f} s ({present:,} of {live:,},"
        f" {present / elapsed:.0f}/s); recall meanwhile p50 {p50:.2f} ms  p95 {p95:.2f} ms"
    )


# -- ablation: each rule and word list of keyword recall off (or changed), for this run only -

# A held-out set moves to the tuning side once its figures have chosen something
# (benchmarks/eval/README.md): recall_holdout and _b chose what the keyword path kept,
# _c and _d chose fusion values and had their misses read on 2 December 2026. recall_holdout_e
# and _f, each written blind before any recall ran on it, are held out; f is the freshest.
TUNING_SETS = (
    "recall_dev",
    "recall_holdout",
    "recall_holdout_b",
    "recall_holdout_c",
    "recall_holdout_d",
    "locomo_dev",
)
BILINGUAL_TUNING_SETS = TUNING_SETS[:-1]
HELD_OUT_SETS = ("recall_holdout_e", "recall_holdout_f")


# locomo_dev split by conversation: rules are tuned on the first (their per-query picks may
# be read), and kept only when they help the second too (aggregates only: recall-notes.md).
LOCOMO_TUNING = ("conv-26", "conv-30", "conv-41")
LOCOMO_HELD_OUT = ("conv-42", "conv-43")


def print_locomo_split(results: dict[str, Rows]) -> None:
    print("\n== locomo_dev by conversation: tuned on | held out, R@5 / hit@5 / MRR")
    for name, rows in results.items():
        cells = []
        for group in (LOCOMO_TUNING, LOCOMO_HELD_OUT):
            part = [(q, p) for q, p in rows if q["id"].split("#")[0] in group]
            cells.append(" / ".join(cell(mean_score(part, m)) for m in ("R@5", "hit@5", "MRR")))
        print(f"  {name:9} {cells[0]}  |  {cells[1]}")
    print(f"  ({', '.join(LOCOMO_TUNING)} | {', '.join(LOCOMO_HELD_OUT)})")


def set_root(name: str) -> Path:
    """A set of this repository (benchmarks/eval), else one beside the checkout."""
    return HELD_OUT / name if (HELD_OUT / name).exists() else EVAL / name


@contextlib.contextmanager
def patched(*changes: tuple[Any, str, Any]) -> Iterator[None]:
    """Each (module, attribute, value) set for the block, and the caches that hold what the
    old values made (the lexicon, the tokens of texts) emptied before and after it."""
    for module, name, _ in changes:
        if not hasattr(module, name):  # moved in memstore: this variant would change nothing
            raise AttributeError(f"{module.__name__}.{name} is gone: update VARIANTS")
    old = [(module, name, getattr(module, name)) for module, name, _ in changes]
    for module, name, value in changes:
        setattr(module, name, value)
    forget_caches()
    try:
        yield
    finally:
        for module, name, value in old:
            setattr(module, name, value)
        forget_caches()


def forget_caches() -> None:
    lexicon._loaded = None
    tokens.index_tokens.cache_clear()
    terms._stop_tokens.cache_clear()


def built_lexicon(*changes: tuple[Any, str, Any]) -> contextlib.AbstractContextManager[None]:
    """The lexicon built from the lists with `changes`, not read from data/lexicon.json (which
    holds it as built from the lists as they are)."""
    return patched((lexicon, "_stored", lambda: None), *changes)


def without_list(name: str) -> contextlib.AbstractContextManager[None]:
    """The lexicon built without one of its word lists."""
    read = lexicon._data_lines
    return built_lexicon((lexicon, "_data_lines", lambda file: [] if file == name else read(file)))


def han_segmentation(split: Callable[[str], str]) -> contextlib.AbstractContextManager[None]:
    """Han runs segmented by `split` instead of bigrams, in the index, the queries and the
    lexicon alike (in each module that took `segment` by name, the one registering it in
    SQLite too)."""

    def segment(text: str) -> str:
        return text if text.isascii() else search._han_run().sub(lambda m: split(m.group()), text)

    holders = [
        module
        for name, module in sys.modules.items()
        if name.startswith("memstore.") and getattr(module, "segment", None) is search.segment
    ]
    return built_lexicon(*((module, "segment", segment) for module in holders))


def bm25_weights(weights: tuple[float, ...]) -> contextlib.AbstractContextManager[None]:
    ranked = fts_search._RANKED.replace(", ".join(str(w) for w in search.BM25_WEIGHTS),
                                    ", ".join(str(w) for w in weights))  # fmt: skip
    return patched((fts_search, "_RANKED", ranked))


def no_equivalents(text: str, wanted: list[terms.Term]) -> tuple[list[terms.Term], list[str]]:
    return wanted, []


VARIANTS: dict[str, Callable[[], contextlib.AbstractContextManager[None]]] = {
    "as shipped": contextlib.nullcontext,
    "no lexicon at all": lambda: patched((keyword, "with_equivalents", no_equivalents)),
    "no zh-en glossary": lambda: without_list("glossary_zh_en.tsv"),
    "no English synonyms": lambda: without_list("synonyms_en.txt"),
    "phrase weighs 1 term": lambda: patched((terms, "_weight", lambda *args: 1)),
    "no number phrases": lambda: patched((keyword, "number_phrases", lambda text: [])),
    "no coordination": lambda: patched((keyword, "coordination", lambda shared, total: 1.0)),
    "coordination ** .5": lambda: patched(
        (keyword, "coordination", lambda shared, total: (shared / total) ** 0.5)
    ),
    # (A floor of one term is no floor: the best memory shares at least one.)
    "no relevance floor": lambda: patched((keyword, "MIN_SHARED_TERMS", 0)),
    "floor of 3 terms": lambda: patched((keyword, "MIN_SHARED_TERMS", 3)),
    "floor on the best only": lambda: patched((keyword, "FLOOR_CANDIDATES", 1)),
    "no English stopwords": lambda: patched(
        (search, "ENGLISH_STOPWORDS", frozenset()), (terms, "ENGLISH_STOPWORDS", frozenset())
    ),
    "no Chinese stop chars": lambda: patched((search, "CHINESE_STOP_CHARACTERS", frozenset())),
    "Han as characters": lambda: han_segmentation(lambda run: " " + " ".join(run) + " "),
    "Han runs unsplit": lambda: han_segmentation(lambda run: f" {run} "),
    "bm25 columns 1,1,1": lambda: bm25_weights((1.0, 1.0, 1.0)),
}


def bench_ablation(names: list[str], metric: str) -> None:
    """`metric` (R@5, MRR...) of the keyword path on each set with each variant: per language
    on recall_dev and on the held-out sets pooled, with the no-answer turns left empty; each
    held-out set alone; and hit@5 on LoCoMo."""
    sets = [name for name in names if set_root(name).exists()]
    held = [name for name in sets if name in HELD_OUT_SETS]
    print(f"\n== ablation, keyword path (tuning: {', '.join(TUNING_SETS)}; held out: "
          f"{', '.join(held)}, pooled and alone)")  # fmt: skip
    header = [f"  {'locomo_dev ' + metric:>14} hit@5"] if "locomo_dev" in sets else []
    header = [bilingual_header("recall_dev", metric)] * ("recall_dev" in sets) + header
    header += [bilingual_header("held out", metric)] + [f"  {name:>16}" for name in held]
    print(f"  {'variant':22}" + "".join(header))
    for label, variant in VARIANTS.items():
        with variant():
            rows = {name: keyword_rows(name) for name in sets}
        cells = [bilingual_cells(rows["recall_dev"], metric)] if "recall_dev" in rows else []
        if "locomo_dev" in rows:
            locomo = rows["locomo_dev"]
            cells.append(
                f"  {cell(mean_score(locomo, metric)):>14} {cell(mean_score(locomo, 'hit@5'))}"
            )
        cells.append(bilingual_cells([row for name in held for row in rows[name]], metric))
        cells += [f"  {cell(mean_score(rows[name], metric)):>16}" for name in held]
        print(f"  {label:22}" + "".join(cells), flush=True)


def keyword_rows(name: str) -> Rows:
    return score_set(set_stores(set_root(name)), {"memstore": memstore_keyword})["memstore"]


def bilingual_header(name: str, metric: str) -> str:
    return f"  {name + f' {metric} all/en/zh+mix':>29}  empty"


def bilingual_cells(rows: Rows, metric: str) -> str:
    slices = by_language(rows)
    figures = "/".join(cell(mean_score(slices[lang], metric)) for lang in ("all", "en", "zh+mixed"))
    empty = empty_share(rows)
    return f"  {figures:>29}  {'-' if empty is None else f'{empty[0]:.0%}':>5}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="latency up to 10,000 memories")
    parser.add_argument("--per-query", metavar="SET", help="print each query of this set")
    parser.add_argument(
        "--per-query-heldout",
        action="store_true",
        help="allow --per-query on a held-out set (it stops being held out once read)",
    )
    parser.add_argument("--no-latency", action="store_true")
    parser.add_argument(
        "--tuning-only",
        action="store_true",
        help="skip the held-out sets entirely: nothing of theirs is read or printed",
    )
    parser.add_argument(
        "--ablation", action="store_true", help="only: each rule and word list on and off"
    )
    parser.add_argument("--metric", default="R@5", choices=["R@5", "MRR", "hit@5", "P@5"],
                        help="what --ablation reports")  # fmt: skip
    args = parser.parse_args()
    if args.per_query in HELD_OUT_SETS and not args.per_query_heldout:
        parser.error(f"{args.per_query} is held out: tune on {' or '.join(TUNING_SETS)}")
    held_out = () if args.tuning_only else HELD_OUT_SETS
    if args.ablation:
        bench_ablation([*TUNING_SETS, *held_out], args.metric)
        return
    results: dict[str, dict[str, Rows]] = {}
    for name in (*TUNING_SETS, *held_out):
        label = f"{name} (held out)" if name in HELD_OUT_SETS else name
        if not set_root(name).exists():
            print(f"\n== {label}: not found at {set_root(name)}")
            continue
        results[name] = run_set(label, set_stores(set_root(name)), args.per_query == name)
    tuned = [name for name in BILINGUAL_TUNING_SETS if name in results]
    pooled = {m: [row for name in tuned for row in results[name][m]] for m in METHODS}
    held = [name for name in held_out if name in results]
    for name in held:
        print_side_by_side(pooled, results[name], f"{' + '.join(tuned)} | {name}")
    if len(held) > 1:  # the targets are on the held-out sets: pooled too
        pooled_held = {m: [row for name in held for row in results[name][m]] for m in METHODS}
        print_side_by_side(pooled, pooled_held, f"{' + '.join(tuned)} | {' + '.join(held)}")
    if args.tuning_only:
        print_side_by_side(pooled, None, " + ".join(tuned))
    if "locomo_dev" in results:
        print_locomo_split(results["locomo_dev"])
        print("  locomo_dev: tuning only here (its other five conversations are held out")
        print("  by the issue's authors, not in this repository)")
    if not args.no_latency and (EVAL / "recall_dev").exists():
        bench_latency([1_000, 10_000] if args.quick else [1_000, 10_000, 100_000])
        bench_semantic_latency([1_000, 10_000] if args.quick else [1_000, 10_000, 100_000])


if __name__ == "__main__":
    main()
