"""Notebook 02's checks: what the generic test (tests/test_grading.py) cannot see from answers' verdicts. None of
these loads TensorFlow: they run in the main pytest process."""

from __future__ import annotations

import numpy as np

from helpers.grading.checks import ex02
from helpers.grading.examiner import Case
from helpers.grading.exercises import check


def test_a_keras_model_is_not_taken_for_train_cnn():
    """A Keras model is callable too: 02.1 wants the training function (an answer a data row would need
    TensorFlow to build)."""

    class Model:
        layers: list = []

        def __call__(self, x):
            return x

    feedback = check("02.1", Model())
    assert feedback.message == f"expected {ex02.CNN.expects}, got Model", feedback.message


def test_the_accuracy_bound_is_checked_at_the_bound():
    """At least 90 %: 1800 of 2000 held-out digits right passes, 1799 does not (no trained model lands there)."""
    labels = np.arange(2000) % 10
    judge = ex02.CNN.requirements[-1].judge
    for right, verdict in ((1800, None), (1799, "below 90%")):
        predicted = np.where(np.arange(2000) < right, labels, (labels + 1) % 10)
        case = Case("held out", data=dict(labels=labels, given=labels))
        said = judge(case, {"result": {"logits": np.eye(10)[predicted]}, "error": None}, None)
        assert (said is None) if verdict is None else verdict in said, said


def test_the_training_digits_are_relabelled_and_change_between_checks():
    """02.1 hands train_cnn every training digit as the notebook scales them, each class relabelled to another,
    new with each seed (so no answer trained on the notebook's labels passes)."""
    first, second = (ex02.cnn_cases(np.random.default_rng(seed))[0] for seed in (1, 2))
    x_train, y_train, name = first.args
    assert x_train.dtype == np.float32 and x_train.shape == (ex02.TRAINING_DIGITS, 1, 28, 28)
    assert 0 <= x_train.min() <= x_train.max() <= 1 and sorted(np.unique(y_train)) == list(
        range(10)
    )
    order = ex02.relabelling(np.random.default_rng(3))
    assert sorted(order) == list(range(10)) and (order != np.arange(10)).all()
    assert (first.data["given"] != first.data["labels"]).all()
    assert name != second.args[2] and not np.array_equal(y_train[:100], second.args[1][:100])
