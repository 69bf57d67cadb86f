"""Semantic recall: how near each memory of a store is to a text in meaning, by a local
sentence encoder (the model of recall/model_files.py).

Each memory's vector (from its description and body) is computed the first time a recall
needs it and kept in the memory_vector table with the memory's version, so it is computed
again only when the memory changes. A SemanticIndex keeps one store's vectors in one matrix
while the store is open, rebuilt when the store's memories change. Whoever opens the store
makes one and hands it to recall; without one, recall is the keyword path alone. A long-lived
process (memctl chat, the MCP server) makes it with background=True: the model is loaded and
missing vectors are computed by a thread with its own connection, never on the user's prompt;
until they are there, recall compares the memories that have one and finds the others by
their words.

The model reads English and Chinese alike (see encoder.py): a question in one language finds
memories written in the other.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memstore.errors import SemanticUnavailable, StoreUnavailable
from memstore.recall.centring import Centre
from memstore.recall.model_files import MODEL_NAME, missing_reason, model_folder
from memstore.settings import SEMANTIC_VARIABLE, Settings
from memstore.storage.dbapi import BUSY_TIMEOUT_MS

if TYPE_CHECKING:
    import numpy as np

    from memstore.recall.encoder import SentenceEncoder
    from memstore.storage.store import MemoryStore

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
Saved = Callable[[list[tuple[int, int, bytes]]], None]

# A memory's text for its vector: what it says, not its file name.
MEMORY_TEXT = "{description}\n{body}"
# Vectors computed per batch while indexing, and stored per transaction.
INDEX_BATCH = 64
# A recall computes at most this many missing vectors, so that the first recall after a
# large import does not stall; `memctl semantic index` computes the rest at once.
VECTORS_PER_RECALL = 64
# How long a recall waits for another writer to save vectors: it never waits long.
RECALL_SAVE_WAIT_MS = 100
# After vectors could not be saved, recalls do not try again for this long (nor start the
# background indexer again after it failed).
SAVE_RETRY_AFTER_S = 60.0
# How long closing an index waits for its background indexer to finish its batch.
INDEXER_STOP_WAIT_S = 10.0


def unavailable_reason(folder: Path | None = None) -> str | None:
    """Why semantic recall is off (the user's switch, numpy, the model's files), or None
    when it can be on. Imports nothing heavy."""
    if not Settings.from_environment().semantic:
        return f"turned off by {SEMANTIC_VARIABLE}"
    return missing_reason(folder or model_folder())


def available() -> bool:
    return unavailable_reason() is None


def vectors_to_index(store: MemoryStore) -> int:
    """How many memories have no vector, when that is more than recalls compute at once
    (then `memctl semantic index` is worth suggesting); else 0, as when semantic recall is
    off."""
    if not available():
        return 0
    present, live = store.vector_counts(MODEL_NAME)
    return live - present if live - present > VECTORS_PER_RECALL else 0


class SemanticModel:
    """The sentence encoder of the model's files, checked and loaded when first needed
    (which takes a while). Stores that share one load it once."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or model_folder()
        self._encoder: SentenceEncoder | None = None
        # Why the files did not load: semantic recall is off for this model from then on.
        self._broken: str | None = None
        # Loaded once, by whichever thread (a recall, a background indexer) asks first.
        self._loading = threading.Lock()

    def loaded(self) -> bool:
        return self._encoder is not None

    def unavailable_reason(self) -> str | None:
        if self._encoder is not None:  # loaded, its files checked: only the switch is read
            return None if Settings.from_environment().semantic else unavailable_reason()
        return unavailable_reason(self.folder) or self._broken

    def encoder(self) -> SentenceEncoder:
        """SemanticUnavailable when the model's files do not load."""
        from memstore.recall.encoder import SentenceEncoder

        with self._loading:
            if self._broken is not None:
                raise SemanticUnavailable(self._broken)
            if self._encoder is None:
                try:
                    self._encoder = SentenceEncoder(self.folder)
                except SemanticUnavailable as error:  # not the pinned files: said as it is
                    self._broken = str(error)
                    raise
                except (OSError, ValueError, KeyError, TypeError, IndexError) as error:
                    kind = type(error).__name__
                    self._broken = f"the model in {self.folder} does not load ({kind}: {error})"
                    raise SemanticUnavailable(self._broken) from error
            return self._encoder


@dataclass
class _Vectors:
    # The store's change mark they are of, and whether every live memory has its vector.
    mark: tuple[Any, ...]
    complete: bool
    # The live memories that have a vector, and their vectors, one row each.
    ids: list[int]
    matrix: np.ndarray
    # Each memory's vector and the version it is of: what the table had, or what this
    # index computed (kept even when it could not be saved).
    known: dict[int, tuple[int, bytes]]
    # Each live memory's version.
    versions: dict[int, int] = field(default_factory=dict)
    row_of: dict[int, int] = field(default_factory=dict)
    # Their centre, computed once per matrix, not per recall.
    centre: Centre = field(init=False)

    def __post_init__(self) -> None:
        self.row_of = {memory_id: row for row, memory_id in enumerate(self.ids)}
        self.centre = Centre.of(self.matrix)

    def with_rows(self, rows: list[tuple[int, int, bytes]]) -> _Vectors:
        """These vectors and those of `rows` (id, version, vector) that are of a live
        memory's current version and not compared yet: appended, nothing read again."""
        import numpy as np

        new = [
            (i, version, vector)
            for i, version, vector in rows
            if self.versions.get(i) == version and i not in self.row_of
        ]
        if not new:
            return self
        added = np.frombuffer(b"".join(v for _, _, v in new), dtype="<f4")
        matrix = np.vstack([self.matrix, added.reshape(len(new), self.matrix.shape[1])])
        known = {**self.known, **{i: (version, vector) for i, version, vector in new}}
        ids = self.ids + [i for i, _, _ in new]
        complete = len(ids) == len(self.versions)
        return _Vectors(self.mark, complete, ids, matrix, known, self.versions)


@dataclass(frozen=True)
class Nearness:
    """How near each live memory is to a text: cosine similarity, -1 to 1, plain
    (`scores`) and with the store's centre taken out (`centred`, centring.py); None for a
    memory without a vector yet (or not live), which is not known to be unrelated."""

    vectors: _Vectors
    scores: np.ndarray
    centred: np.ndarray

    def of(self, memory_id: int) -> float | None:
        row = self.vectors.row_of.get(memory_id)
        return None if row is None else float(self.scores[row])

    def centred_of(self, memory_id: int) -> float | None:
        row = self.vectors.row_of.get(memory_id)
        return None if row is None else float(self.centred[row])

    def nearest(self, count: int, *, centred: bool = False) -> list[int]:
        """The ids of the `count` nearest memories, nearest first (ties: lower id first),
        by plain or centred similarity."""
        import numpy as np

        if count <= 0 or not self.vectors.ids:
            return []
        scores = self.centred if centred else self.scores
        rows = np.arange(len(scores))
        if count < len(rows):  # a partial sort: only the best need ordering
            rows = np.argpartition(-scores, count - 1)[:count]
        ids = self.vectors.ids
        return [ids[row] for row in sorted(rows, key=lambda row: (-scores[row], ids[row]))]

    def by_id(self) -> dict[int, float]:
        """Each memory that has a vector, and its similarity."""
        return dict(zip(self.vectors.ids, self.scores.tolist(), strict=True))


class SemanticIndex:
    """The vectors of one store's live memories, kept in memory while the store is open,
    with the model that computes them (a new one unless given)."""

    def __init__(
        self, store: MemoryStore, model: SemanticModel | None = None, *, background: bool = False
    ) -> None:
        self.store = store
        self.model = model or SemanticModel()
        # Whether the model is loaded and vectors computed by a thread, not by recalls.
        self.background = background
        self._indexer: BackgroundIndexer | None = None
        self._indexer_paused_until = 0.0
        # Vectors the background indexer saved, not yet added to the matrix.
        self._fresh: list[tuple[int, int, bytes]] = []
        self._fresh_lock = threading.Lock()
        self._vectors: _Vectors | None = None
        # Kinds of warning already logged: once each, not on every turn of a chat.
        self._warned: set[str] = set()
        # Vectors computed but not saved (the database was busy or read-only), saved with the
        # next ones that are; and until when (time.monotonic()) saving is not tried again.
        self._unsaved: list[tuple[int, int, bytes]] = []
        self._save_paused_until = 0.0

    def unavailable_reason(self) -> str | None:
        """Why recall cannot compare in meaning now, or None."""
        return self.model.unavailable_reason()

    def ready(self) -> bool:
        """Whether a recall can compare in meaning without waiting for the model to load.
        In the background, the first call starts loading it (and computing vectors)."""
        if not self.background or self.model.loaded():
            return True
        self._start_indexer()
        return False

    def start(self) -> None:
        """In the background: load the model and compute missing vectors now, before the
        first recall asks (a chat starts it as it opens)."""
        if self.background and self.unavailable_reason() is None:
            self._start_indexer()

    def close(self) -> None:
        """Stop the background indexer, after the batch it is computing (saved or not)."""
        if self._indexer is not None:
            self._indexer.stop(INDEXER_STOP_WAIT_S)

    def similarities(self, text: str) -> Nearness:
        """How near `text` is to each live memory. Computes and stores the vectors of
        memories that have none yet (or an outdated one), at most VECTORS_PER_RECALL of
        them (in the background: none, the indexer does); the others are not compared until
        then."""
        vectors = self._live_vectors(0 if self.background else VECTORS_PER_RECALL)
        import numpy as np

        query = self.model.encoder().encode([text])[0]
        # Not `@`: BLAS would split this product over threads that, on a busy machine, wait
        # for a core longer than one thread takes.
        scores = np.einsum("ij,j->i", vectors.matrix, query)
        return Nearness(vectors, scores, vectors.centre.similarities(scores, query))

    def index_all(
        self,
        progress: Progress | None = None,
        stop: threading.Event | None = None,
        saved: Saved | None = None,
    ) -> int:
        """Compute and save every missing vector, waiting for other writers as any write
        does; how many were computed. StoreUnavailable when they cannot be saved.
        `progress` is called with (done, total) after each batch, `saved` with the rows
        saved; once `stop` is set, no other batch is begun."""
        present, live = self.store.vector_counts(MODEL_NAME)
        self._live_vectors(None, must_save=True, progress=progress, stop=stop, saved=saved)
        return live - present

    def _live_vectors(
        self,
        budget: int | None,
        must_save: bool = False,
        progress: Progress | None = None,
        stop: threading.Event | None = None,
        saved: Saved | None = None,
    ) -> _Vectors:
        """The live memories' vectors, computing at most `budget` missing ones (None: all)."""
        import numpy as np

        mark = self.store.change_mark()
        cached = self._vectors
        if cached is not None and cached.mark == mark and not must_save:
            if cached.complete:
                return cached
            if self.background:  # what the indexer computed since, added; nothing read again
                self._vectors = cached = cached.with_rows(self._take_fresh())
                if not cached.complete:  # an indexer that stopped or failed starts again
                    self._start_indexer()
                return cached
        # A mark that went back is another database at the same path: nothing carries over.
        carried = cached is not None and not mark < cached.mark
        known = dict(cached.known) if cached is not None and carried else {}
        self._take_fresh()  # in the table by now: read there
        rows = self.store.live_vectors(MODEL_NAME)
        for memory_id, version, vector in rows:
            if vector is not None:
                known[memory_id] = (version, vector)

        def current(memory_id: int, version: int) -> bool:
            return memory_id in known and known[memory_id][0] == version

        missing = [
            (memory_id, version)
            for memory_id, version, _ in reversed(rows)  # the newest memories first
            if not current(memory_id, version)
        ]
        computed = self._compute(missing[:budget], must_save, progress, stop, saved)
        known.update(computed)
        left = [i for i, version in missing if not current(i, version)]
        if left and self.background:
            self._start_indexer()
        elif left:
            self._warn_once(
                "missing",
                f"{len(left)} memories have no vector yet; `memctl semantic index` computes them",
            )
        # Only memories with a vector of their current version are compared.
        ids = [memory_id for memory_id, version, _ in rows if current(memory_id, version)]
        matrix = np.zeros((len(ids), self.model.encoder().dimension), dtype=np.float32)
        for row, memory_id in enumerate(ids):
            matrix[row] = np.frombuffer(known[memory_id][1], dtype="<f4")
        live = {memory_id for memory_id, _, _ in rows}
        # The mark is read before the rows: a change in between is seen at the next recall.
        kept = {i: v for i, v in known.items() if i in live}
        versions = {memory_id: version for memory_id, version, _ in rows}
        self._vectors = _Vectors(mark, not left, ids, matrix, kept, versions)
        return self._vectors

    def _deliver(self, rows: list[tuple[int, int, bytes]]) -> None:
        """Called by the background indexer with each batch it saved."""
        with self._fresh_lock:
            self._fresh.extend(rows)

    def _take_fresh(self) -> list[tuple[int, int, bytes]]:
        with self._fresh_lock:
            fresh, self._fresh = self._fresh, []
        return fresh

    def _start_indexer(self) -> None:
        """Start the background indexer, unless it runs or failed a short while ago."""
        running = self._indexer is not None and self._indexer.is_alive()
        if running or time.monotonic() < self._indexer_paused_until:
            return
        if self._indexer is not None and self._indexer.failed:
            self._indexer_paused_until = time.monotonic() + SAVE_RETRY_AFTER_S
            self._indexer = None
            return
        database = self.store.url or self.store.path or ""
        self._indexer = BackgroundIndexer(database, self.model, self._deliver)
        self._indexer.start()

    def _compute(
        self,
        missing: list[tuple[int, int]],
        must_save: bool = False,
        progress: Progress | None = None,
        stop: threading.Event | None = None,
        saved: Saved | None = None,
    ) -> dict[int, tuple[int, bytes]]:
        """Vectors of these memories (id, version), by id, each with the version whose text
        it was computed from. Saved batch by batch when the database lets us without
        waiting; with `must_save`, waiting as any write does, and StoreUnavailable when it
        cannot."""
        computed: dict[int, tuple[int, bytes]] = {}
        for start in range(0, len(missing), INDEX_BATCH):
            if stop is not None and stop.is_set():
                break
            batch = missing[start : start + INDEX_BATCH]
            records = self.store.by_ids([memory_id for memory_id, _ in batch])
            live = [records[i] for i, _ in batch if i in records]
            texts = [MEMORY_TEXT.format(description=m.description, body=m.body) for m in live]
            encoded = self.model.encoder().encode(texts)
            rows = [
                (memory.id, memory.version, vector.astype("<f4").tobytes())
                for memory, vector in zip(live, encoded, strict=True)
            ]
            computed.update((memory_id, (version, vector)) for memory_id, version, vector in rows)
            self._save(rows, must_save)
            if saved is not None and must_save:  # with must_save, saved or raised
                saved(rows)
            if progress is not None:
                progress(min(start + INDEX_BATCH, len(missing)), len(missing))
        if must_save and self._unsaved:
            self._save([], must_save)
        return computed

    def _save(self, rows: list[tuple[int, int, bytes]], must_save: bool) -> None:
        """Save these rows and any left unsaved before; on a busy or read-only database keep
        them for later and do not try again for SAVE_RETRY_AFTER_S (unless `must_save`)."""
        pending, self._unsaved = self._unsaved + rows, []
        if not pending:
            return
        if time.monotonic() < self._save_paused_until and not must_save:
            self._unsaved = pending
            return
        try:
            wait_ms = BUSY_TIMEOUT_MS if must_save else RECALL_SAVE_WAIT_MS
            self.store.save_vectors(MODEL_NAME, pending, wait_ms=wait_ms)
        except StoreUnavailable as error:
            self._unsaved = pending
            self._save_paused_until = time.monotonic() + SAVE_RETRY_AFTER_S
            if must_save:
                raise
            self._warn_once("unsaved", f"vectors kept unsaved for now ({error})")

    def _warn_once(self, kind: str, message: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            log.warning("semantic recall: %s", message)


class BackgroundIndexer(threading.Thread):
    """Loads the model and computes a store's missing vectors in a thread of its own, with
    its own connection to the database: each batch is saved in its own transaction, waiting
    for other writers as any write does, so a crash loses at most the batch being computed
    (vectors are derived data: they are computed again). A failure is logged once."""

    def __init__(self, database: str | Path, model: SemanticModel, deliver: Saved) -> None:
        super().__init__(name="memstore-vectors", daemon=True)
        self.database = database
        self.model = model
        # Handed each batch once saved: the recall's index adds them to its matrix.
        self.deliver = deliver
        self.failed: str | None = None
        self._stop_asked = threading.Event()

    def run(self) -> None:
        from memstore.storage.store import MemoryStore

        try:
            self.model.encoder()  # loaded first: recalls compare as soon as it is there
            with MemoryStore(self.database, actor="semantic", create=False) as store:
                index = SemanticIndex(store, self.model)
                index.index_all(stop=self._stop_asked, saved=self.deliver)
        # Anything: the thread has no caller to tell, and recall goes on by keywords.
        except Exception as error:
            self.failed = str(error) or type(error).__name__
            log.warning("semantic recall: vectors not computed in the background: %s", error)

    def stop(self, wait_s: float) -> None:
        self._stop_asked.set()
        if self.is_alive():
            self.join(wait_s)
