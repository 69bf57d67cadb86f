"""Similarity in meaning with the store's centre taken out.

The encoder's vectors of one store share a large common part (the store's topic, its
people, its way of writing), so every memory is somewhat near every question and a memory
that says little in general ("Caroline values her friends") comes near the top of many.
Comparing the vectors less their mean (the store's centre), renormalised, compares what each
memory says beyond what the whole store says; it helped on held-out conversations too
(benchmarks/recall-notes.md).

Computed from the plain cosine similarities and three numbers per memory kept with the
store's vectors, so a recall adds no second pass over the matrix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

# A memory (or text) this near the centre has no direction of its own: similarity 0.
TINY = 1e-3


@dataclass(frozen=True)
class Centre:
    """The mean of a store's vectors, each vector's product with it, and each vector's
    distance from it."""

    mean: np.ndarray
    mean_dot: np.ndarray
    norms: np.ndarray

    @classmethod
    def of(cls, matrix: np.ndarray) -> Centre:
        import numpy as np

        if len(matrix) == 0:
            mean = np.zeros(matrix.shape[1], dtype=np.float32)
        else:
            mean = matrix.mean(axis=0)
        # |m - mean|² = m.m - 2 m.mean + mean.mean: no copy of the matrix; einsum, not `@`,
        # keeps it to one thread (vectors.py says why).
        mean_dot = np.einsum("ij,j->i", matrix, mean)
        squares = np.einsum("ij,ij->i", matrix, matrix) - 2 * mean_dot + float(mean @ mean)
        return cls(mean, mean_dot, np.sqrt(np.maximum(squares, 0.0)))

    def similarities(self, cosines: np.ndarray, query: np.ndarray) -> np.ndarray:
        """The cosine similarity of (memory - mean) and (query - mean) for each memory,
        from its plain cosine with the query: (m.q - m.mean - q.mean + mean.mean) over
        both lengths."""
        import numpy as np

        query_dot = float(query @ self.mean)
        query_norm = float(np.linalg.norm(query - self.mean))
        numerator = cosines - self.mean_dot - query_dot + float(self.mean @ self.mean)
        lengths = self.norms * query_norm
        return np.where(lengths > TINY, numerator / np.maximum(lengths, TINY), 0.0)
