"""Notebook 09's checkers: right answers written in other ways pass; each stated requirement, broken once, is
refused with feedback naming it, never showing the expected values."""

from __future__ import annotations

import re

import numpy as np
import pytest
from tables import accepted, refused, right, rows

from helpers.grading.checks.ex09 import Top2, audit


def _pixels(batch):
    return np.asarray(batch.column("pixels").to_pylist(), np.float32).reshape(-1, 1, 28, 28) / 255


class Top2WithPartition:  # argpartition + a float64 softmax, InferenceSession imported by name
    def __init__(self, model_path):
        from pathlib import Path

        from onnxruntime import InferenceSession

        self.session = InferenceSession(Path(model_path).read_bytes())  # the file read, then parsed
        self.output = self.session.get_outputs()[0].name

    def __call__(self, batch):
        logits = self.session.run(
            [self.output], {self.session.get_inputs()[0].name: _pixels(batch)}
        )[0]
        logits = logits.astype(np.float64)
        p = np.exp(logits) / np.exp(logits).sum(axis=-1, keepdims=True)
        two = np.argpartition(-p, 1, axis=1)[:, :2]
        first = np.where(
            p[np.arange(len(p)), two[:, 0]] >= p[np.arange(len(p)), two[:, 1]], two[:, 0], two[:, 1]
        )
        second = np.where(first == two[:, 0], two[:, 1], two[:, 0])
        return {
            "id": np.array(batch.column("id").to_pylist()),
            "top1": first,
            "top2": second,
            "p1": p[np.arange(len(p)), first],
            "p2": p[np.arange(len(p)), second],
            "extra": np.zeros(len(p)),
        }


class Top2RowByRow:  # a Python loop over the rows, lists instead of arrays
    def __init__(self, model_path):
        import onnxruntime

        self.session = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])

    def __call__(self, batch):
        logits = self.session.run(None, {"image": _pixels(batch)})[0]
        out = {"id": [], "top1": [], "top2": [], "p1": [], "p2": []}
        for row_id, row in zip(batch.column("id").to_pylist(), logits):
            p = np.exp(row - row.max())
            p /= p.sum()
            a, b = np.argsort(p)[-1], np.argsort(p)[-2]
            for key, value in zip(out, (row_id, a, b, p[a], p[b])):
                out[key].append(value)
        return out


def broken(change, init=Top2.__init__):
    """The solution with one requirement broken by ``change(out, batch, self)``."""

    def call(self, batch):
        return change(dict(Top2.__call__(self, batch)), batch, self)

    return type("BrokenTop2", (Top2,), {"__init__": init, "__call__": call})


def _softmax_over_batch(out, batch, self):
    logits = self.session.run(["logits"], {"image": _pixels(batch)})[0]
    p = np.exp(logits - logits.max(0)) / np.exp(logits - logits.max(0)).sum(0)
    rows = np.arange(len(p))
    return {**out, "p1": p[rows, out["top1"]], "p2": p[rows, out["top2"]]}


def _new_session_per_batch(out, batch, self):
    import onnxruntime as ort

    ort.InferenceSession(self.model_path)
    return out


def _keep_path(self, model_path):
    Top2.__init__(self, model_path)
    self.model_path = model_path


def _wants_bytes(self, model_bytes):  # the model expected as bytes, not as a path
    import onnxruntime as ort

    self.session = ort.InferenceSession(bytes(model_bytes))


REQUIREMENTS = [  # (requirement broken, answer, words the feedback must hold)
    ("a class, not an instance", Top2.__new__(Top2), ["the class itself"]),
    (
        "ids kept",
        broken(lambda o, b, s: {k: v for k, v in o.items() if k != "id"}),
        ["keep the id column"],
    ),
    (
        "ids in the batch's order",
        broken(lambda o, b, s: {**o, "id": o["id"][::-1]}),
        ["another order"],
    ),
    (
        "ids are the batch's",
        broken(lambda o, b, s: {**o, "id": np.arange(len(o["id"]))}),
        ["not the batch's ids"],
    ),
    ("one value per row", broken(lambda o, b, s: {**o, "p1": o["p1"][:1]}), ["one value per row"]),
    ("softmax over each row", broken(_softmax_over_batch), ["softmax over the batch"]),
    (
        "probabilities, not logits",
        broken(lambda o, b, s: {**o, "p1": o["p1"] * 40 - 3}),
        ["between 0 and 1"],
    ),
    (
        "p2 goes with top2",
        broken(lambda o, b, s: {**o, "p2": o["p1"]}),
        ["p2 holds the probability of the other"],
    ),
    (
        "p1 goes with top1",
        broken(lambda o, b, s: {**o, "p1": o["p2"]}),
        ["p1 holds the probability of the other"],
    ),
    (
        "top1 the most probable",
        broken(lambda o, b, s: {**o, "top1": o["top2"], "top2": o["top1"]}),
        ["top1 holds the second most probable"],
    ),
    ("top2 another digit", broken(lambda o, b, s: {**o, "top2": o["top1"]}), ["top2 equals top1"]),
    (
        "top2 the second most probable",
        broken(lambda o, b, s: {**o, "top2": (o["top1"] + 1) % 10}),
        ["top2 is not the second most probable"],
    ),
    (
        "one session per actor",
        broken(_new_session_per_batch, _keep_path),
        ["new InferenceSession", "__init__"],
    ),
    ("a dict returned", broken(lambda o, b, s: list(o.values())), ["dict"]),
    (
        "the model given as a path",
        broken(lambda o, b, s: o, _wants_bytes),
        ["Top2(model_path)", "a path to an .onnx file"],
    ),
]


def test_top2_model_and_digits_change_between_checks():
    from helpers.grading.checks.ex09 import random_mlp_bytes, unseen_batches

    assert random_mlp_bytes(1) != random_mlp_bytes(2)
    first, second = unseen_batches(1), unseen_batches(2)
    assert first[0]["id"].to_pylist() != second[0]["id"].to_pylist()
    assert [b.num_rows for b in first] == [
        433,
        1,
        266,
        50,
    ]  # a one-row batch and a multi-chunk one included
    assert first[3]["pixels"].num_chunks > 1


def audit_with_counter(expected_ids, written_ids):  # collections.Counter, sets, plain ints
    from collections import Counter

    counts = Counter(int(i) for i in written_ids)
    expected = {int(i) for i in expected_ids}
    return {
        "missing": sorted(expected - counts.keys()),
        "duplicated": sorted(i for i, n in counts.items() if n > 1),
        "unexpected": sorted(counts.keys() - expected),
        "note": "extra keys are fine",
    }


def audit_numpy_arrays(expected_ids, written_ids):  # numpy arrays instead of lists
    expected, written = np.asarray(expected_ids), np.asarray(written_ids)
    ids, counts = np.unique(written, return_counts=True)
    return {
        "missing": np.setdiff1d(expected, ids),
        "duplicated": ids[counts >= 2],
        "unexpected": ids[~np.isin(ids, expected)],
    }


@pytest.mark.parametrize(
    "exercise, answer",
    [
        *right("09.1", Top2, Top2WithPartition, Top2RowByRow),
        *right("09.2", audit, audit_with_counter, audit_numpy_arrays),
    ],
)
def test_right_answers_pass(exercise, answer):
    accepted(exercise, answer)


def _dup_every_time(e, w):
    ids, counts = np.unique(np.asarray(w), return_counts=True)
    right = audit(e, w)
    return {
        **right,
        "duplicated": sorted(int(i) for i, n in zip(ids, counts) for _ in range(n - 1)),
    }


AUDIT_REQUIREMENTS = [
    ("missing ids", lambda e, w: {**audit(e, w), "missing": []}, ["'missing'"]),
    ("duplicated ids", lambda e, w: {**audit(e, w), "duplicated": []}, ["'duplicated'"]),
    ("duplicates listed once", _dup_every_time, ["'duplicated'", "more than once"]),
    ("unexpected ids", lambda e, w: {**audit(e, w), "unexpected": []}, ["'unexpected'"]),
    ("sorted", lambda e, w: {k: v[::-1] for k, v in audit(e, w).items()}, ["not sorted"]),
    ("lists", lambda e, w: {k: set(v) for k, v in audit(e, w).items()}, ["got a set", "no order"]),
    (
        "ints",
        lambda e, w: {k: [str(i) for i in v] for k, v in audit(e, w).items()},
        ["list of ints"],
    ),
    (
        "all three keys",
        lambda e, w: {"missing": audit(e, w)["missing"]},
        ["expected a dict with the keys"],
    ),
    (
        "missing and unexpected not swapped",
        lambda e, w: {
            **audit(e, w),
            "missing": audit(e, w)["unexpected"],
            "unexpected": audit(e, w)["missing"],
        },
        ["do not belong"],
    ),
]


@pytest.mark.parametrize(
    "exercise, answer, named",
    [
        *rows("09.1 requirement", REQUIREMENTS, "09.1"),
        *rows("09.2 requirement", AUDIT_REQUIREMENTS, "09.2"),
    ],
)
def test_each_broken_requirement_is_refused(exercise, answer, named):
    feedback = refused(exercise, answer, *named)
    if exercise == "09.1":  # no values listed
        assert not re.search(r"\d+[, ]+\d+[, ]+\d+[, ]+\d+", feedback.message), feedback.message
