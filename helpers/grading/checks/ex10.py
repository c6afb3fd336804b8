"""Checks for notebook 10's exercises: pooling token vectors and finding the nearest documents (numpy only)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from helpers.grading.checks._common import Wrong, require_callable, rng


def _as_array(value, what: str, shape: tuple) -> np.ndarray:
    """``value`` as a numpy array of ``shape``, else a Wrong naming ``what`` was expected and what came."""
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as err:
        raise Wrong(
            f"expected {what} as an array of shape {shape}, got {type(value).__name__}"
        ) from err
    if array.shape != shape:
        raise Wrong(f"expected {what} of shape {shape}, got shape {array.shape}")
    return array


def _padded_batch(generator, size: int, length: int, dim: int):
    """Random vectors [size, length, dim] and a mask whose rows hold 1..length real positions, then padding."""
    hidden = generator.normal(size=(size, length, dim)).astype(np.float32)
    real = generator.integers(1, length + 1, size=size)
    # one row without padding
    real[0] = length
    mask = (np.arange(length)[None, :] < real[:, None]).astype(np.int64)
    return hidden, mask


def check_masked_mean(answer):
    require_callable(answer, "masked_mean(hidden, mask)")
    generator = rng(1)
    cases = [
        (int(generator.integers(2, 6)), int(generator.integers(5, 12)), dim) for dim in (8, 384)
    ]
    for size, length, dim in cases:
        hidden, mask = _padded_batch(generator, size, length, dim)
        got = _as_array(
            answer(hidden.copy(), mask.copy()), f"[batch, dim] vectors for {size} rows", (size, dim)
        )
        if not np.isfinite(got).all():
            raise Wrong("expected finite vectors, got NaN or infinity")
        norms = np.linalg.norm(got, axis=1)
        if not np.allclose(norms, 1, atol=1e-4):
            raise Wrong(
                f"expected vectors of length 1, got lengths from {norms.min():.3f} to {norms.max():.3f}"
            )
        summed = (hidden * mask[:, :, None]).sum(axis=1)
        want = summed / np.linalg.norm(summed, axis=1, keepdims=True)
        if not np.allclose(got, want, atol=1e-4):
            everything = hidden.mean(axis=1)
            everything /= np.linalg.norm(everything, axis=1, keepdims=True)
            if np.allclose(got[1:], everything[1:], atol=1e-4):
                raise Wrong(
                    "expected the mean over the positions where mask is 1; yours also averages the padding"
                )
            rows = [int(i) for i in np.flatnonzero(~np.isclose(got, want, atol=1e-4).all(axis=1))]
            raise Wrong(
                f"expected the masked mean of each row; rows {rows} of a [{size}, {length}, {dim}] batch differ"
            )
    return [
        f"batches {[c[:2] for c in cases]} (rows, positions) with padding, dimensions 8 and 384"
    ]


def check_nearest(answer):
    require_callable(answer, "nearest(queries, documents, k)")
    generator = rng(2)
    cases = []
    for n, dim, k in ((30, 16, 3), (200, 384, 5), (12, 8, 1)):
        q = int(generator.integers(2, 6))
        docs = generator.normal(size=(n, dim)).astype(np.float32)
        docs /= np.linalg.norm(docs, axis=1, keepdims=True)
        queries = generator.normal(size=(q, dim)).astype(np.float32)
        queries /= np.linalg.norm(queries, axis=1, keepdims=True)
        got = _as_array(answer(queries.copy(), docs.copy(), k), f"[{q}, {k}] indices", (q, k))
        if not np.issubdtype(got.dtype, np.integer):
            raise Wrong(f"expected integer indices, got dtype {got.dtype}")
        scores = queries @ docs.T
        want = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        if (got == want).all():
            cases.append((n, k))
            continue
        if k > 1 and (got == np.argsort(scores, axis=1, kind="stable")[:, :k]).all():
            raise Wrong("expected the most similar documents; yours are the least similar")
        if k > 1 and (np.sort(got, axis=1) == np.sort(want, axis=1)).all():
            raise Wrong(
                "expected the most similar document first; yours holds the right ones in another order"
            )
        raise Wrong(f"expected the {k} most similar of {n} documents for each query; yours differ")
    return [f"{n} documents, k={k}" for n, k in cases]


# exercise id -> checker (helpers.grading.exercises.check looks answers up here)
CHECKS = {"10.1": check_masked_mean, "10.2": check_nearest}


# Reference answers (a teacher's; the nbgrader source cells are generated from them)


def masked_mean(hidden, mask):
    """The mean over the positions where ``mask`` is 1, scaled to length 1: [batch, seq, dim] -> [batch, dim]."""
    weights = mask[:, :, None].astype(hidden.dtype)
    mean = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
    return mean / np.linalg.norm(mean, axis=1, keepdims=True)


def nearest(queries, documents, k):
    """Indices [q, k] of the k documents with the highest cosine similarity to each query, highest first."""
    # unit vectors: the dot product is the cosine
    scores = queries @ documents.T
    return np.argsort(-scores, axis=1)[:, :k]


def solve_1(workdir: Path):
    return masked_mean


def solve_2(workdir: Path):
    return nearest
