"""Similarity with the store's centre taken out (memstore/recall/centring.py): computed from
the plain cosines, it is the cosine of the centred vectors."""

from __future__ import annotations

import pytest

np = pytest.importorskip("numpy")

from memstore.recall.centring import Centre  # noqa: E402


def unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=-1, keepdims=True)


def test_centred_similarity_is_the_cosine_of_the_centred_vectors() -> None:
    rng = np.random.default_rng(7)
    shared = rng.normal(size=16)  # what every memory of the store has in common
    matrix = unit(shared + 0.5 * rng.normal(size=(40, 16))).astype(np.float32)
    query = unit(shared + 0.5 * rng.normal(size=16)).astype(np.float32)
    centre = Centre.of(matrix)
    got = centre.similarities(matrix @ query, query)
    mean = matrix.mean(axis=0)
    expected = unit(matrix - mean) @ unit(query - mean)
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_what_the_whole_store_shares_no_longer_counts() -> None:
    # Two memories share the store's topic; only one of them says what the query asks.
    topic, asked, other = np.eye(3, dtype=np.float32)
    matrix = unit(np.array([3 * topic + asked, 3 * topic + other, 3 * topic - asked - other]))
    query = unit(topic + asked)
    plain = matrix @ query
    centred = Centre.of(matrix).similarities(plain, query)
    assert plain[1] > 0.6  # the topic alone makes the other memory look near
    assert centred[0] > 0.9 and centred[1] < 0


def test_an_empty_store_or_a_single_memory_gives_zero_not_nan() -> None:
    empty = np.zeros((0, 4), dtype=np.float32)
    assert Centre.of(empty).similarities(np.zeros(0), np.ones(4) / 2).shape == (0,)
    one = np.array([[1.0, 0.0, 0.0, 0.0]], dtype=np.float32)
    query = np.array([0.0, 1.0, 0.0, 0.0], dtype=np.float32)
    got = Centre.of(one).similarities(one @ query, query)
    assert got.tolist() == [0.0]
