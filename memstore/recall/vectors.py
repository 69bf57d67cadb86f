"""Semantic recall: how near each memory of a store is to a text in meaning, by a local
sentence encoder (the model of recall/model_files.py).

Each memory's vector (from its description and body) is computed the first time a recall
needs it and kept in the memory_vector table with the memory's version, so it is computed
again only when the memory changes. A SemanticIndex keeps one store's vectors in one matrix
while the store is open, rebuilt when the store's memories change. Whoever opens the store
makes one and hands it to recall; without one, recall is the keyword path alone.

The model reads English and Chinese alike (see encoder.py): a question in one language finds
memories written in the other.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memstore.errors import SemanticUnavailable, StoreUnavailable
from memstore.recall.model_files import MODEL_NAME, missing_reason, model_folder
from memstore.settings import SEMANTIC_VARIABLE, Settings
from memstore.storage.engine import BUSY_TIMEOUT_MS

if TYPE_CHECKING:
    import numpy as np

    from memstore.recall.encoder import SentenceEncoder
    from memstore.storage.store import MemoryStore

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]

# A memory's text for its vector: what it says, not its file name.
MEMORY_TEXT = "{description}\n{body}"
# Vectors computed per batch while indexing, and stored per transaction.
INDEX_BATCH = 64
# A recall computes at most this many missing vectors, so that the first recall after a
# large import does not stall; `memctl semantic index` computes the rest at once.
VECTORS_PER_RECALL = 64
# How long a recall waits for another writer to save vectors: it never waits long.
RECALL_SAVE_WAIT_MS = 100
# After vectors could not be saved, recalls do not try again for this long.
SAVE_RETRY_AFTER_S = 60.0


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
    (about a second). Stores that share one load it once."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or model_folder()
        self._encoder: SentenceEncoder | None = None
        # Why the files did not load: semantic recall is off for this model from then on.
        self._broken: str | None = None

    def unavailable_reason(self) -> str | None:
        return unavailable_reason(self.folder) or self._broken

    def encoder(self) -> SentenceEncoder:
        """SemanticUnavailable when the model's files do not load."""
        from memstore.recall.encoder import SentenceEncoder

        if self._broken is not None:
            raise SemanticUnavailable(self._broken)
        if self._encoder is None:
            try:
                self._encoder = SentenceEncoder(self.folder)
            except SemanticUnavailable as error:  # not the pinned files: said as it is
                self._broken = str(error)
                raise
            except (OSError, ValueError, KeyError, TypeError, IndexError) as error:
                self._broken = (
                    f"the model in {self.folder} does not load ({type(error).__name__}: {error})"
                )
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
    row_of: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.row_of = {memory_id: row for row, memory_id in enumerate(self.ids)}


@dataclass(frozen=True)
class Nearness:
    """How near each live memory is to a text: cosine similarity, -1 to 1; None for a
    memory without a vector yet (or not live), which is not known to be unrelated."""

    vectors: _Vectors
    scores: np.ndarray

    def of(self, memory_id: int) -> float | None:
        row = self.vectors.row_of.get(memory_id)
        return None if row is None else float(self.scores[row])

    def nearest(self, count: int) -> list[int]:
        """The ids of the `count` nearest memories, nearest first (ties: lower id first)."""
        import numpy as np

        if count <= 0 or not self.vectors.ids:
            return []
        rows = np.arange(len(self.scores))
        if count < len(rows):  # a partial sort: only the best need ordering
            rows = np.argpartition(-self.scores, count - 1)[:count]
        ids, scores = self.vectors.ids, self.scores
        return [ids[row] for row in sorted(rows, key=lambda row: (-scores[row], ids[row]))]

    def by_id(self) -> dict[int, float]:
        """Each memory that has a vector, and its similarity."""
        return dict(zip(self.vectors.ids, self.scores.tolist(), strict=True))


class SemanticIndex:
    """The vectors of one store's live memories, kept in memory while the store is open,
    with the model that computes them (a new one unless given)."""

    def __init__(self, store: MemoryStore, model: SemanticModel | None = None) -> None:
        self.store = store
        self.model = model or SemanticModel()
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

    def similarities(self, text: str) -> Nearness:
        """How near `text` is to each live memory. Computes and stores the vectors of
        memories that have none yet (or an outdated one), at most VECTORS_PER_RECALL of
        them; the others are not compared until then."""
        vectors = self._live_vectors(VECTORS_PER_RECALL)
        query = self.model.encoder().encode([text])[0]
        return Nearness(vectors, vectors.matrix @ query)

    def index_all(self, progress: Progress | None = None) -> int:
        """Compute and save every missing vector, waiting for other writers as any write
        does; how many were computed. StoreUnavailable when they cannot be saved.
        `progress` is called with (done, total) after each batch."""
        present, live = self.store.vector_counts(MODEL_NAME)
        self._live_vectors(None, must_save=True, progress=progress)
        return live - present

    def _live_vectors(
        self, budget: int | None, must_save: bool = False, progress: Progress | None = None
    ) -> _Vectors:
        """The live memories' vectors, computing at most `budget` missing ones (None: all)."""
        import numpy as np

        mark = self.store.change_mark()
        cached = self._vectors
        if cached is not None and cached.complete and cached.mark == mark and not must_save:
            return cached
        # A mark that went back is another database at the same path: nothing carries over.
        carried = cached is not None and not mark < cached.mark
        known = dict(cached.known) if cached is not None and carried else {}
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
        known.update(self._compute(missing[:budget], must_save=must_save, progress=progress))
        left = [i for i, version in missing if not current(i, version)]
        if left:
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
        self._vectors = _Vectors(mark, not left, ids, matrix, kept)
        return self._vectors

    def _compute(
        self,
        missing: list[tuple[int, int]],
        must_save: bool = False,
        progress: Progress | None = None,
    ) -> dict[int, tuple[int, bytes]]:
        """Vectors of these memories (id, version), by id, each with the version whose text
        it was computed from. Saved batch by batch when the database lets us without
        waiting; with `must_save`, waiting as any write does, and StoreUnavailable when it
        cannot."""
        computed: dict[int, tuple[int, bytes]] = {}
        for start in range(0, len(missing), INDEX_BATCH):
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
