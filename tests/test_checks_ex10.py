"""Notebook 10's checkers: right answers written in other ways pass; each stated requirement, broken once, is
refused with feedback naming it, never showing the expected values."""

from __future__ import annotations

import numpy as np
import pytest
from tables import accepted, refused, right, rows

from helpers.grading.checks.ex10 import masked_mean, nearest


# einsum, float64, the notebook's search program's way
def masked_mean_with_einsum(hidden, mask):
    weights = np.asarray(mask, dtype=np.float64)
    mean = np.einsum("bsd,bs->bd", hidden.astype(np.float64), weights) / weights.sum(1)[:, None]
    return (mean / np.sqrt((mean**2).sum(axis=1, keepdims=True))).astype(np.float32)


# a Python loop over the rows, lists of vectors
def masked_mean_row_by_row(hidden, mask):
    out = []
    for vectors, row_mask in zip(hidden, mask):
        real = vectors[row_mask.astype(bool)]
        mean = real.mean(axis=0)
        out.append(list(mean / np.linalg.norm(mean)))
    return out


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


@pytest.mark.parametrize(
    "exercise, answer",
    [
        *right("10.1", masked_mean, masked_mean_with_einsum, masked_mean_row_by_row),
        *right("10.2", nearest, nearest_with_argpartition, nearest_as_lists),
    ],
)
def test_right_answers_pass(exercise, answer):
    accepted(exercise, answer)


def _plain_mean(hidden, mask):
    mean = hidden.mean(axis=1)
    return mean / np.linalg.norm(mean, axis=1, keepdims=True)


MASKED_MEAN_REQUIREMENTS = [
    ("padding left out", _plain_mean, ["averages the padding"]),
    (
        "length 1",
        lambda h, m: (h * m[:, :, None]).sum(1) / m.sum(1, keepdims=True),
        ["vectors of length 1"],
    ),
    ("one vector per row", lambda h, m: masked_mean(h, m)[:1], ["of shape"]),
    (
        "the mean over positions",
        lambda h, m: masked_mean(h.transpose(0, 2, 1), m[:, :1]),
        ["of shape"],
    ),
    (
        "the first position is not the sentence",
        lambda h, m: h[:, 0] / np.linalg.norm(h[:, 0], axis=1, keepdims=True),
        ["masked mean of each row"],
    ),
    ("finite", lambda h, m: masked_mean(h, m) * np.nan, ["finite"]),
]


@pytest.mark.parametrize("answer, words", rows("10.1", MASKED_MEAN_REQUIREMENTS))
def test_masked_mean_requirements(answer, words):
    refused("10.1", answer, *words)


NEAREST_REQUIREMENTS = [
    (
        "most similar, not least",
        lambda q, d, k: np.argsort(q @ d.T, axis=1)[:, :k],
        ["least similar"],
    ),
    (
        "most similar first",
        lambda q, d, k: nearest(q, d, k)[:, ::-1],
        ["most similar document first"],
    ),
    ("k of them", lambda q, d, k: nearest(q, d, k + 1), ["of shape"]),
    (
        "indices, not scores",
        lambda q, d, k: np.sort(-(q @ d.T), axis=1)[:, :k],
        ["integer indices"],
    ),
    (
        "cosine, not distance to the origin",
        lambda q, d, k: np.tile(np.argsort(-d.sum(axis=1))[:k], (len(q), 1)),
        ["yours differ"],
    ),
]


@pytest.mark.parametrize("answer, words", rows("10.2", NEAREST_REQUIREMENTS))
def test_nearest_requirements(answer, words):
    refused("10.2", answer, *words)


def test_a_missing_answer_is_told_what_is_expected():
    refused("10.1", None, "expected your function masked_mean(hidden, mask)")
    refused("10.2", "nearest", "expected your function nearest(queries, documents, k)")
