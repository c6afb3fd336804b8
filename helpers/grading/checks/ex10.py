"""Notebook 10's exercises: pooling token vectors and finding the nearest documents (numpy only)."""

from __future__ import annotations

import numpy as np

from helpers.grading.examiner import Case, Exercise, Mistake, Requirement

# --- 10.1 Pool the tokens ------------------------------------------------------------------------------------


def masked_mean(hidden, mask):
    """The mean over the positions where ``mask`` is 1, scaled to length 1: [batch, seq, dim] -> [batch, dim]."""
    weights = mask[:, :, None].astype(hidden.dtype)
    mean = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
    return mean / np.linalg.norm(mean, axis=1, keepdims=True)


def pooling_cases(rng):
    """Padded batches of random vectors, dimensions 8 and 384, each row holding 1..length real positions, one
    row without padding; then a batch padded on the left (the first positions are padding), a row of one real
    position (the last) among its rows: "the positions where mask is 1" wherever they are."""
    cases = []
    for dim in (8, 384):
        size, length = int(rng.integers(2, 6)), int(rng.integers(5, 12))
        hidden = rng.normal(size=(size, length, dim)).astype(np.float32)
        real = rng.integers(1, length + 1, size=size)
        # one row without padding
        real[0] = length
        mask = (np.arange(length)[None, :] < real[:, None]).astype(np.int64)
        cases.append(Case(f"a padded batch [{size}, {length}, {dim}]", (hidden, mask)))
    size, length = int(rng.integers(3, 6)), int(rng.integers(5, 12))
    hidden = rng.normal(size=(size, length, 8)).astype(np.float32)
    real = rng.integers(2, length, size=size)
    real[0], real[1] = length, 1
    mask = (np.arange(length)[None, :] >= (length - real)[:, None]).astype(np.int64)
    cases.append(Case(f"a batch padded on the left [{size}, {length}, 8]", (hidden, mask)))
    return cases


def _vectors(case, got, want):
    shape = np.shape(want)
    try:
        array = np.asarray(got, dtype=float)
    except (TypeError, ValueError):
        return f"expected an array of shape {shape}, got {type(got).__name__}"
    if array.shape != shape:
        return f"expected {shape[0]} vectors of {shape[1]} numbers, shape {shape}; got shape {array.shape}"
    return None


def _finite(case, got, want):
    return None if np.isfinite(np.asarray(got, dtype=float)).all() else "got NaN or infinity"


def _unit_length(case, got, want):
    norms = np.linalg.norm(np.asarray(got, dtype=float), axis=1)
    if np.allclose(norms, 1, atol=1e-4):
        return None
    return f"got lengths from {norms.min():.3f} to {norms.max():.3f}"


def _rows_agree(case, got, want):
    # directions compared, so that a mean not scaled to length 1 loses that requirement's point only
    got = np.asarray(got, dtype=float)
    got = got / np.linalg.norm(got, axis=1, keepdims=True)
    rows = np.flatnonzero(~np.isclose(got, want, atol=1e-4).all(axis=1))
    if rows.size == 0:
        return None
    mask = np.asarray(case.args[1])
    if (mask[rows, 0] == 0).all():
        return (
            f"rows {rows.tolist()} differ, each padded on the left (its mask starts with 0): the real "
            "positions are where mask is 1, wherever they are"
        )
    return f"rows {rows.tolist()} differ"


def _plain_mean(hidden, mask):
    mean = hidden.mean(axis=1)
    return mean / np.linalg.norm(mean, axis=1, keepdims=True)


def _first_token(hidden, mask):
    return hidden[:, 0] / np.linalg.norm(hidden[:, 0], axis=1, keepdims=True)


def _not_normalised(hidden, mask):
    return (hidden * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)


# einsum in float64, as the notebook's search program pools
def masked_mean_with_einsum(hidden, mask):
    weights = np.asarray(mask, dtype=np.float64)
    mean = np.einsum("bsd,bs->bd", hidden.astype(np.float64), weights) / weights.sum(1)[:, None]
    return (mean / np.sqrt((mean**2).sum(axis=1, keepdims=True))).astype(np.float32)


# a Python loop over the rows, lists of vectors
def masked_mean_row_by_row(hidden, mask):
    out = []
    for vectors, row_mask in zip(hidden, mask):
        mean = vectors[row_mask.astype(bool)].mean(axis=0)
        out.append(list(mean / np.linalg.norm(mean)))
    return out


POOL = Exercise(
    id="10.1",
    expects="your function masked_mean(hidden, mask)",
    reference=masked_mean,
    cases=pooling_cases,
    requirements=[
        Requirement("one vector per row, [batch, dim]", _vectors),
        Requirement("finite vectors", _finite),
        Requirement("scaled to length 1", _unit_length),
        Requirement("the mean over the positions where mask is 1", _rows_agree),
    ],
    mistakes=[
        Mistake(
            "one row only",
            lambda h, m: masked_mean(h, m)[:1],
            "one vector per row of the batch",
            "one vector per row, [batch, dim]",
        ),
        Mistake(
            "the mean over the features",
            lambda h, m: masked_mean(h.transpose(0, 2, 1), m[:, :1]),
            "average over the positions (axis 1), not the features",
            "one vector per row, [batch, dim]",
        ),
        Mistake(
            "division by a zero norm",
            lambda h, m: masked_mean(h, m) * np.nan,
            "got NaN: is a norm or a count zero?",
            "finite vectors",
        ),
        Mistake(
            "not scaled",
            _not_normalised,
            "divide each mean by its length (np.linalg.norm over the last axis)",
            "scaled to length 1",
        ),
        Mistake(
            "padding averaged in",
            _plain_mean,
            "yours also averages the padding: weight each position by its mask",
            "the mean over the positions where mask is 1",
        ),
        Mistake(
            "the first position only",
            _first_token,
            "yours takes the first position alone; a sentence is the mean of all its real positions",
            "the mean over the positions where mask is 1",
        ),
    ],
    alternatives=[masked_mean_with_einsum, masked_mean_row_by_row],
    setup="import numpy as np",
)


# --- 10.2 The nearest documents ------------------------------------------------------------------------------


def nearest(queries, documents, k):
    """Indices [q, k] of the k documents with the highest cosine similarity to each query, highest first."""
    # unit vectors: the dot product is the cosine
    scores = queries @ documents.T
    return np.argsort(-scores, axis=1)[:, :k]


def _unit(rng, rows, dim):
    vectors = rng.normal(size=(rows, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def search_cases(rng):
    """Unit vectors: 30 documents of 16 numbers, 200 of 384 (k from 2 to 5), 12 of 8 (k = 1); then k at its
    limit, every document (9 of 8 numbers), and 1000 documents of 16 with k from 400 to 600, where a partition
    alone (``np.argpartition``) leaves the k unordered (on small arrays it often comes out sorted)."""
    cases = []
    # k of 2 or more where the order can differ, k of 1, k of every document, a large k of many documents
    for n, dim, ks in (
        (30, 16, (2, 6)),
        (200, 384, (2, 6)),
        (12, 8, (1, 2)),
        (9, 8, (9, 10)),
        (1000, 16, (400, 601)),
    ):
        q, k = int(rng.integers(2, 6)), int(rng.integers(*ks))
        cases.append(
            Case(f"{q} queries, {n} documents, k={k}", (_unit(rng, q, dim), _unit(rng, n, dim), k))
        )
    return cases


def _indices_shape(case, got, want):
    try:
        array = np.asarray(got)
    except (TypeError, ValueError):
        return f"expected an array of shape {np.shape(want)}, got {type(got).__name__}"
    if array.shape != np.shape(want):
        return f"expected [queries, k] = {list(np.shape(want))}, got shape {list(array.shape)}"
    return None


def _integers(case, got, want):
    dtype = np.asarray(got).dtype
    return None if np.issubdtype(dtype, np.integer) else f"got dtype {dtype}"


def _same_set(case, got, want):
    if (np.sort(np.asarray(got), axis=1) == np.sort(want, axis=1)).all():
        return None
    return "for some queries, yours are other documents"


def _same_order(case, got, want):
    return None if (np.asarray(got) == want).all() else "the right documents in another order"


# argpartition, then the k sorted
def nearest_with_argpartition(queries, documents, k):
    scores = queries @ documents.T
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1)
    return np.take_along_axis(top, order, axis=1)


# cosine written out, lists of ints
def nearest_as_lists(queries, documents, k):
    norms = np.linalg.norm(documents, axis=1) * np.linalg.norm(queries, axis=1)[:, None]
    cosine = (queries @ documents.T) / norms
    return [sorted(range(len(documents)), key=lambda i: -row[i])[:k] for row in cosine]


NEAREST = Exercise(
    id="10.2",
    expects="your function nearest(queries, documents, k)",
    reference=nearest,
    cases=search_cases,
    requirements=[
        Requirement("k indices per query, [q, k]", _indices_shape),
        Requirement("integer indices", _integers),
        Requirement("the k most similar documents", _same_set),
        Requirement("the most similar first", _same_order),
    ],
    mistakes=[
        Mistake(
            "one too many",
            lambda q, d, k: nearest(q, d, k + 1),
            "keep k of them",
            "k indices per query, [q, k]",
        ),
        Mistake(
            "scores, not indices",
            lambda q, d, k: np.sort(-(q @ d.T), axis=1)[:, :k],
            "yours are scores: argsort gives the indices",
            "integer indices",
        ),
        Mistake(
            "the least similar",
            lambda q, d, k: np.argsort(q @ d.T, axis=1)[:, :k],
            "yours are the least similar: sort the scores from the highest",
            "the k most similar documents",
        ),
        Mistake(
            "the largest documents",
            lambda q, d, k: np.tile(np.argsort(-d.sum(axis=1))[:k], (len(q), 1)),
            "yours are the same for every query: score each document against the query",
            "the k most similar documents",
        ),
        Mistake(
            "the least similar first",
            lambda q, d, k: nearest(q, d, k)[:, ::-1],
            "the right documents, the least similar first",
            "the most similar first",
        ),
    ],
    alternatives=[nearest_with_argpartition, nearest_as_lists],
    setup="import numpy as np",
)

EXERCISES = [POOL, NEAREST]
