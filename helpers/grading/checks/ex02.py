"""Notebook 02's exercises: the learner's tf2onnx exports, run by ONNX Runtime on digits they never tried.

An outcome is what the exported file declares (inputs, outputs) and what it returns on the case's digits, beside
the learner's own Keras model called on the same digits: the expected values are the learner's model's, so the
references (a training, a TensorFlow export) are not run during a check (``judged_alone``). Every known mistake
is told from those outcomes (``spots``): making its file would cost a TensorFlow export, or a training, per check.

TensorFlow is imported inside functions only: the main pytest process never loads it (conftest.py), and
every exercise is marked "tensorflow" (its tests run in pytest-isolated's child).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
from pathlib import Path

import numpy as np

from helpers.grading.checks._common import (
    Exported,
    as_model_path,
    exported_once,
    known_folder,
    load_model,
)
from helpers.grading.checks._common import session as _session
from helpers.grading.examiner import (
    Case,
    Exercise,
    Mistake,
    Requirement,
    fresh_folder,
    judge_says_it,
)
from helpers.preprocess import softmax

# float32 sums in another order; a wrong export differs far more
TOLERANCE = dict(rtol=1e-3, atol=1e-3)
ACCURACY = 0.9  # 02.1's text: "at least 90 %"; for 02.2 and 02.3, the floor of a trained model
TRAINING_DIGITS = 60_000  # 02.1: all the training digits, in another order and relabelled
HELD_OUT = 2000  # test digits each accuracy is measured on
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081  # notebook 01's #@save constants (02.3: normalised twice)
SETUP = "from helpers.grading.checks.ex02 import trained_model"


def _tf():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # read when TensorFlow's C++ library loads
    import keras
    import tensorflow as tf
    import tf2onnx

    return tf, keras, tf2onnx


def trained_model():
    """Notebook 02's trained `model` (the MLP of section 1, saved as artifacts/mnist_mlp_keras.keras).

    In the notebook ``model`` is already there; a solution file loads it."""
    from helpers.pipeline.artifacts import existing_artifact

    _, keras, _ = _tf()
    return keras.saving.load_model(existing_artifact("mnist_mlp_keras.keras"))


# --- what a file declares and returns, as the requirements read it -------------------------------------------


def _declared(path) -> dict:
    """The file's inputs and outputs (name, type, shape), and a session to run it. A missing or unreadable file
    stays a ``Wrong`` from ``as_model_path``/``session``: there is nothing to run, only the path to fix."""
    session = _session(as_model_path(path))
    return {
        "session": session,
        "inputs": [(i.name, i.type, list(i.shape)) for i in session.get_inputs()],
        "outputs": [(o.name, o.type, list(o.shape)) for o in session.get_outputs()],
    }


def _run(outcome: dict, feeds: dict) -> dict:
    """``outcome`` with the file's outputs by name on ``feeds`` (``error``: what ONNX Runtime says instead)."""
    session = outcome.pop("session")
    try:
        names = [o.name for o in session.get_outputs()]
        return {**outcome, "result": dict(zip(names, session.run(None, feeds))), "error": None}
    except Exception as err:  # InvalidArgument, Fail, ... from onnxruntime
        return {**outcome, "result": None, "error": str(err).splitlines()[0][:200]}


def _keras(model, x):
    """The learner's Keras model on ``x``, or what calling it raised (a message)."""
    try:
        return np.asarray(model(x), dtype=np.float32)
    except Exception as err:  # whatever the learner's model raises
        return (
            f"calling your Keras model on a {x.dtype} batch of shape {list(x.shape)} failed "
            f"({type(err).__name__}): pass the model you exported"
        )


SHAPE = "expected the input {!r} of shape {}, got {}"
TYPE = "expected the input {!r} of type {}, got {}"
FIXED = (
    "the input {!r} has a fixed batch of {}: use None as the first dimension of its TensorSpec, so that any "
    "batch size runs"
)
OUTPUTS = "expected the output(s) {}, got {}: return a dict from your tf.function, its keys name the outputs"
# what tf2onnx names the outputs of a function returning a tensor, or a tuple of them
UNNAMED = ["Identity:0"], ["Identity:0", "Identity_1:0"]


def _shape(shape) -> str:
    return (
        "[" + ", ".join("batch" if isinstance(d, str) or d is None else str(d) for d in shape) + "]"
    )


def _inputs(wanted: list):
    """Exactly these inputs (names; ``[None]``: one input of any name)."""

    def judge(case, got, want):
        found = [name for name, _, _ in got["inputs"]]
        if len(found) == len(wanted) and all(w in (None, f) for w, f in zip(wanted, sorted(found))):
            return None
        return f"expected {len(wanted)} input(s) {[w for w in wanted if w]}, got {found}"

    return judge


def _spec(got, kind: str, name):
    return next(spec for spec in got[kind] if name in (None, spec[0]))


def _input_shape(name, dims: list[int]):
    def judge(case, got, want):
        found, _, shape = _spec(got, "inputs", name)
        if shape[1:] == dims and len(shape) == 1 + len(dims):
            return None
        return SHAPE.format(found, _shape(["batch", *dims]), _shape(shape))

    return judge


def _input_type(name, kind: str):
    def judge(case, got, want):
        found, element, _ = _spec(got, "inputs", name)
        return None if element == kind else TYPE.format(found, kind, element)

    return judge


def _any_batch(name):
    def judge(case, got, want):
        found, _, shape = _spec(got, "inputs", name)
        return None if isinstance(shape[0], str) else FIXED.format(found, shape[0])

    return judge


def _outputs(wanted: list[str]):
    def judge(case, got, want):
        names = [name for name, _, _ in got["outputs"]]
        if sorted(names) != sorted(wanted):
            return OUTPUTS.format(wanted, names)
        kinds = {name: kind for name, kind, _ in got["outputs"] if kind != "tensor(float)"}
        return None if not kinds else f"expected float32 outputs (tensor(float)), got {kinds}"

    return judge


def _result(got, name: str = "logits"):
    """The file's output ``name`` on the case; a message when the file did not run."""
    if got.get("error") is not None:
        return None, f"ONNX Runtime cannot run the file: {got['error']}"
    if got.get("result") is None:
        return None, "the file was not run: its inputs are not those asked for"
    if name not in got["result"]:
        return None, f"the file has no output {name!r}"
    return got["result"][name], None


def _differs(got, want, reference: str):
    """None when ``got`` is ``want``; else where they differ (and the shapes), not why."""
    if isinstance(want, str):  # the learner's Keras model raised
        return want
    if got.shape != want.shape:
        return f"expected shape {list(want.shape)} from {reference}, got {list(got.shape)}"
    if np.allclose(got, want, **TOLERANCE):
        return None
    image, column = np.argwhere(~np.isclose(got, want, **TOLERANCE))[0]
    return (
        f"the file differs from {reference} (first at image {image}, column {column}, by more than "
        f"{TOLERANCE['atol']})"
    )


def _close(a, b) -> bool:
    return (
        isinstance(a, np.ndarray)
        and isinstance(b, np.ndarray)
        and a.shape == b.shape
        and np.allclose(a, b, **TOLERANCE)
    )


PROBABILITIES = "the file's 'logits' are probabilities (each row is in 0..1 and sums to 1): the output is the raw scores, with no softmax"


def _probabilities(logits) -> bool:
    return bool(np.allclose(logits.sum(axis=1), 1, atol=1e-4) and (logits >= 0).all())


def _accuracy(logits, labels) -> float:
    return float((logits.argmax(1) == labels).mean())


def _trained(labels_of, advice: str):
    """At least 90 % of the held-out test digits right (by ``labels_of(case)``), on the case holding them."""

    def judge(case, got, want):
        if case.data.get("labels") is None:
            return None
        logits, problem = _result(got)
        if problem:
            return problem
        accuracy = _accuracy(logits, labels_of(case))
        if accuracy >= ACCURACY:
            return None
        return (
            f"the file classifies {accuracy:.1%} of {len(logits)} held-out test digits right, below "
            f"{ACCURACY:.0%}: {advice}"
        )

    return judge


def _at_chance(cases, got) -> bool:
    """About one held-out digit in ten right: the accuracy of a model that never trained."""
    for case, outcome in zip(cases, got):
        if case.data.get("labels") is not None and isinstance(outcome, dict):
            logits, problem = _result(outcome)
            # by the labels given and by the usual ones (02.1: a CNN trained on the notebook's labels knows those)
            labels = case.data["labels"], case.data.get("given", case.data["labels"])
            return (
                not problem and logits.ndim == 2 and max(_accuracy(logits, y) for y in labels) < 0.2
            )
    return False


def _each_case(seen):
    """Spotted when, on every case it ran, the file returns what ``seen(case, outcome)`` computes."""

    def spots(cases, got):
        results = [_result(g)[0] if isinstance(g, dict) else None for g in got]
        return all(r is not None for r in results) and all(
            _close(r, seen(c, g)) for c, g, r in zip(cases, got, results)
        )

    return spots


def _test_digits(rng, n: int):
    """``n`` MNIST test digits picked with the check's seed (uint8 [n, 28, 28]) and their labels."""
    from helpers.data.mnist import load_mnist

    data = load_mnist()
    picked = rng.permutation(len(data.x_test))[:n]
    return data.x_test[picked], data.y_test[picked].astype(np.int64)


def _sizes(rng) -> list[int]:
    """A batch of one, a small one and a larger one, their sizes new with each seed."""
    return [1, int(rng.integers(2, 10)), int(rng.integers(50, 150))]


# --- the known answers' files and models, made on first use (the generic test's rows; never during a check) --


class Built:
    """A known answer's Keras model, made by ``build()`` the first time it is called (TensorFlow loads then)."""

    def __init__(self, build):
        self._build = build

    def __call__(self, *args, **kwargs):
        return self._build()(*args, **kwargs)


def export(function, signature, path):
    """tf2onnx's export of ``function`` traced for ``signature`` (TensorSpecs) to ``path``."""
    tf, _, tf2onnx = _tf()
    tf2onnx.convert.from_function(
        tf.function(function), input_signature=signature, opset=18, output_path=str(path)
    )
    return path


def spec(shape, dtype="float32", name="image"):
    tf, _, _ = _tf()
    return tf.TensorSpec(shape, getattr(tf, dtype), name=name)


@functools.cache
def _model():
    return trained_model()


@functools.cache
def untrained_model():
    """A Keras model with the contract's input, never trained."""
    _, keras, _ = _tf()
    keras.utils.set_random_seed(2)
    return keras.Sequential(
        [keras.Input((1, 28, 28)), keras.layers.Flatten(), keras.layers.Dense(10)]
    )


# --- 02.1 Another model, another layout -----------------------------------------------------------------------


def train_cnn(x_train, y_train, path):
    """A channels-last CNN trained one epoch on the digits given ([N, 1, 28, 28] in 0..1, transposed to channels
    last), exported with a channels-last TensorSpec (the dict key names the output)."""
    import keras
    import tensorflow as tf
    import tf2onnx

    keras.utils.set_random_seed(0)
    cnn = keras.Sequential(
        [
            keras.Input(shape=(28, 28, 1), name="image"),
            keras.layers.Conv2D(8, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(10),
        ]
    )
    cnn.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    cnn.fit(x_train.transpose(0, 2, 3, 1), y_train, epochs=1, verbose=0)
    tf2onnx.convert.from_function(
        tf.function(lambda image: {"logits": cnn(image)}),
        input_signature=[tf.TensorSpec((None, 28, 28, 1), tf.float32, name="image")],
        opset=18,
        output_path=str(path),
    )
    return cnn


def _digest(*arrays) -> str:
    return hashlib.sha256(
        b"".join(np.ascontiguousarray(a[::97]).tobytes() for a in arrays)
    ).hexdigest()


def _remembered(reference):
    """The reference, training once per process on the same digits (the generic test runs it on each row's
    cases): the file it wrote is copied to the path asked for. Its name and source stay the reference's."""
    trained: dict = {}

    @functools.wraps(reference)
    def remembered(x_train, y_train, path):
        key = _digest(x_train, y_train)
        if key not in trained:
            kept = known_folder("ex02") / f"reference-{key[:12]}.onnx"
            trained[key] = reference(x_train, y_train, kept), kept
        model, kept = trained[key]
        shutil.copy(kept, path)
        return model

    return remembered


def relabelling(rng) -> np.ndarray:
    """A permutation of the ten classes moving every one (digit d is given the label relabelling[d])."""
    while True:
        order = rng.permutation(10)
        if (order != np.arange(10)).all():
            return order


def cnn_cases(rng):
    """One call: all the training digits in a new order, their classes relabelled, a path of a new name; then
    batches of held-out test digits (sizes new with each seed) and 2000 more for the accuracy."""
    from helpers.data.mnist import load_mnist

    data = load_mnist()
    order, picked = relabelling(rng), rng.permutation(len(data.x_train))[:TRAINING_DIGITS]
    x_train = (data.x_train[picked] / 255).astype(np.float32)[:, None]
    y_train = order[data.y_train[picked]].astype(data.y_train.dtype)
    sizes = _sizes(rng)
    digits, labels = _test_digits(rng, sum(sizes) + HELD_OUT)
    nhwc = (digits / 255).astype(np.float32)[..., None]
    cuts = np.cumsum([0, *sizes])
    batches = [nhwc[a:b] for a, b in zip(cuts, cuts[1:])]
    name = f"cnn_{rng.integers(10**6)}.onnx"  # a name it cannot guess
    held_out = dict(
        images=nhwc[cuts[-1] :], labels=labels[cuts[-1] :], given=order[labels[cuts[-1] :]]
    )
    sizes_text = ", ".join(map(str, sizes[:-1])) + f" and {sizes[-1]}"
    return [
        Case(
            f"train_cnn given {TRAINING_DIGITS} training digits, their classes relabelled; batches of {sizes_text} "
            f"held-out digits and {HELD_OUT} more",
            (x_train, y_train, name),
            dict(batches=batches, **held_out),
        )
    ]


def run_cnn(answer, case: Case) -> dict:
    """Calls ``train_cnn`` once; then the file's and the returned model's logits on the case's batches, and the
    file's on the held-out digits (when the file's input is the one asked for)."""
    x_train, y_train, name = case.args
    path = fresh_folder() / name
    returned = answer(x_train, y_train, path)
    outcome = {
        "file": path.is_file(),
        "returned": type(returned).__name__,
        "callable": callable(returned),
    }
    if not outcome["file"]:
        return outcome
    declared = _declared(path)
    outcome |= {k: v for k, v in declared.items() if k != "session"}
    outcome["ops"] = sorted({node.op_type for node in load_model(path).graph.node})
    if [i[:2] for i in declared["inputs"]] != [("image", "tensor(float)")]:
        return {**outcome, "result": None, "error": None}
    batches = [*case.data["batches"], case.data["images"]]
    try:
        logits = [declared["session"].run(["logits"], {"image": batch})[0] for batch in batches]
    except Exception as err:  # onnxruntime's own types (a missing 'logits' output is judged before)
        return {**outcome, "result": None, "error": str(err).splitlines()[0][:200]}
    keras = [_keras(returned, b) for b in case.data["batches"]] if outcome["callable"] else []
    return {
        **outcome,
        "result": {"logits": logits[-1]},
        "error": None,
        "batches": logits[:-1],
        "keras": keras,
    }


def _wrote_the_file(case, got, want):
    return (
        None
        if got["file"]
        else "train_cnn wrote no file at the path it was given: export to `path`"
    )


def _returns_the_model(case, got, want):
    if got["callable"]:
        return None
    return f"expected train_cnn to return the trained Keras model, got {got['returned']}"


def _batches_not_probabilities(case, got, want):
    problem = _result(got)[1]
    return problem or next((PROBABILITIES for x in got["batches"] if _probabilities(x)), None)


def _has_conv(case, got, want):
    if "Conv" in got["ops"]:
        return None
    return "the graph has no Conv operator: the exercise asks for a CNN (a Conv2D layer)"


def _file_is_the_model(case, got, want):
    for size, logits, keras in zip(map(len, case.data["batches"]), got["batches"], got["keras"]):
        differs = _differs(
            logits, keras, "the Keras model your function returned, on the same images"
        )
        if differs:
            return f"on the batch of {size}: {differs}"
    return None


OTHER_MODEL = (
    "the file is not the model your function returned (their logits differ on every image): export the model you "
    "return, once it is trained"
)


def _another_model(cases, got) -> bool:
    """The file's logits differ from the returned model's on most numbers of every batch: another model."""
    outcome = got[0]
    if not isinstance(outcome, dict) or not outcome.get("keras") or outcome.get("result") is None:
        return False
    pairs = list(zip(outcome["batches"], outcome["keras"]))
    return all(
        isinstance(k, np.ndarray)
        and r.shape == k.shape
        and (~np.isclose(r, k, **TOLERANCE)).mean() > 0.5
        for r, k in pairs
    )


USUAL_LABELS = (
    "most of the CNN's predictions on held-out test digits are their usual labels, not the labels your function "
    "was given (the check relabels the classes): train on the x_train and y_train passed to it, and on nothing else"
)
TEST_DIGITS = (
    "the CNN gives held-out test digits' usual labels far more probability than the other wrong labels: the digits "
    "your function was given carry other labels (the check relabels the classes), so it also learned from digits "
    "it was not given: train on x_train and y_train only (no test digits)"
)


def _given_labels(case, got, want):
    logits, problem = _result(got)
    if problem:
        return problem
    return USUAL_LABELS if _accuracy(logits, case.data["labels"]) >= 0.25 else None


def _no_test_digits(case, got, want):
    logits = _result(got)[0]
    probabilities, rows = softmax(logits), np.arange(len(logits))
    usual = probabilities[rows, case.data["labels"]].mean()
    others = probabilities.copy()
    others[rows, case.data["labels"]] = others[rows, case.data["given"]] = np.nan
    other = np.nanmean(others)  # what each of the 8 other wrong labels gets, on average
    return TEST_DIGITS if usual > 0.05 and usual > 4 * other else None


def _fitted_cnn(kind: str, x_train, y_train):
    """A CNN (``kind``: "cnn", "functional", "dense") trained one epoch on these digits, once per process."""
    return _fit(kind, _digest(x_train, y_train), x_train, y_train)


_FITTED: dict = {}


def _fit(kind, key, x_train, y_train):
    if (kind, key) not in _FITTED:
        _, keras, _ = _tf()
        keras.utils.set_random_seed(0)
        layers = {
            "cnn": [keras.layers.Conv2D(8, 3, activation="relu"), keras.layers.MaxPooling2D()],
            "functional": [
                keras.layers.Conv2D(12, 5, padding="same", activation="relu"),
                keras.layers.AveragePooling2D(2),
            ],
            "dense": [],
        }[kind]
        model = keras.Sequential(
            [keras.Input((28, 28, 1)), *layers, keras.layers.Flatten(), keras.layers.Dense(10)]
        )
        model.compile(
            optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        )
        model.fit(np.moveaxis(x_train, 1, -1), y_train, epochs=1, verbose=0)
        _FITTED[kind, key] = model
    return _FITTED[kind, key]


def _untrained_cnn():
    _, keras, _ = _tf()
    keras.utils.set_random_seed(1)
    return keras.Sequential(
        [
            keras.Input((28, 28, 1)),
            keras.layers.Conv2D(8, 3),
            keras.layers.Flatten(),
            keras.layers.Dense(10),
        ]
    )


def trainer(mistake: str):
    """A learner's train_cnn(x_train, y_train, path), right but for ``mistake``."""

    def train_cnn(x_train, y_train, path):
        tf, keras, _ = _tf()
        if mistake == "trains on the notebook's digits":
            from helpers.data.mnist import load_mnist

            mnist = load_mnist()
            x_train, y_train = (mnist.x_train / 255).astype(np.float32)[:, None], mnist.y_train
        elif mistake == "adds the test digits":
            from helpers.data.mnist import load_mnist

            mnist = load_mnist()
            x_train = np.concatenate([x_train, (mnist.x_test / 255).astype(np.float32)[:, None]])
            y_train = np.concatenate([y_train, mnist.y_test])
        model = _fitted_cnn("dense" if mistake == "no convolution" else "cnn", x_train, y_train)
        if mistake == "softmax":
            model = keras.Sequential([model, keras.layers.Softmax()])
        elif mistake == "untrained":
            model = _untrained_cnn()
        exported, signature, target = model, [spec((None, 28, 28, 1))], path
        function = lambda image: {"logits": exported(image)}  # noqa: E731
        if mistake == "exports before training":
            exported = _untrained_cnn()
        elif mistake == "writes its own file":
            target = Path(path).parent / "cnn_channels_last.onnx"
        elif mistake == "channels first":
            signature = [spec((None, 1, 28, 28))]
            function = lambda image: {"logits": exported(tf.transpose(image, [0, 2, 3, 1]))}  # noqa: E731
        elif mistake == "float64 input":
            signature = [spec((None, 28, 28, 1), "float64")]
            function = lambda image: {"logits": exported(tf.cast(image, tf.float32))}  # noqa: E731
        elif mistake == "fixed batch":
            signature = [spec((32, 28, 28, 1))]
        elif mistake == "tensor output":
            function = lambda image: exported(image)  # noqa: E731
        export(function, signature, target)
        return Path(path) if mistake == "returns the path" else model

    train_cnn.__name__ = re.sub(r"\W+", "_", mistake)
    return train_cnn


# another architecture (the functional API), the function decorated, the file written by output_path
def train_functional_with_a_decorated_function(x_train, y_train, path):
    tf, _, tf2onnx = _tf()
    model = _fitted_cnn("functional", x_train, y_train)

    @tf.function(input_signature=[spec((None, 28, 28, 1))])
    def serve(image):
        return dict(logits=model(image, training=False))

    tf2onnx.convert.from_function(
        serve, input_signature=[spec((None, 28, 28, 1))], output_path=str(path)
    )
    return model


# Keras's own export, its output renamed with onnx, checked as the notebook does
def train_then_keras_export_renamed_and_checked(x_train, y_train, path):
    import onnx
    from onnx import helper

    model = _fitted_cnn("cnn", x_train, y_train)
    keras_file = Path(path).with_suffix(".keras.onnx")
    model.export(
        keras_file, format="onnx", input_signature=[spec((None, 28, 28, 1))], verbose=False
    )
    proto = onnx.load(keras_file)
    proto.graph.node.append(helper.make_node("Identity", [proto.graph.output[0].name], ["logits"]))
    proto.graph.output[0].name = "logits"
    onnx.checker.check_model(proto, full_check=True)
    onnx.save(proto, path)
    return model


def _cnn_is_the_answer(answer) -> bool:
    """A function, not the Keras model (which is callable too)."""
    return callable(answer) and not hasattr(answer, "layers")


def _explain_raise(raised, case) -> str:
    """What train_cnn is given (the error's words, not the cases, say it was called as the exercise says)."""
    x_train, y_train, _ = case.args
    return (
        f"train_cnn(x_train, y_train, path) gets x_train float32 {list(x_train.shape)} in 0..1, y_train "
        f"{y_train.dtype} {list(y_train.shape)}, path a pathlib.Path"
    )


R1 = dict(
    file="the file written to path",
    returns="returns the trained Keras model",
    image="input image [batch, 28, 28, 1]",
    float32="input float32",
    batch="any batch size",
    logits="output logits",
    raw="logits, not probabilities",
    conv="a CNN (Conv2D)",
    same="the file is the model trained",
    given="trained on the digits given",
    alone="no test digits in its training data",
    accuracy="at least 90 % test accuracy",
)


def _cnn_mistake(name: str, words: str, requirement: str, spots=judge_says_it):
    # each a training: never run during a check (its words are its judge's, or ``spots`` tells it)
    return Mistake(name, trainer(name), words, R1[requirement], spots)


CNN = Exercise(
    id="02.1",
    expects=(
        "your function train_cnn(x_train, y_train, path), which trains the CNN on the digits it is given and "
        "exports it to path"
    ),
    reference=_remembered(train_cnn),
    cases=cnn_cases,
    run=run_cnn,
    accepts=_cnn_is_the_answer,
    # the expected logits are the returned model's own: the reference (a training) is never run during a check
    judged_alone=True,
    requirements=[
        Requirement(R1["file"], _wrote_the_file),
        Requirement(R1["returns"], _returns_the_model),
        Requirement(
            R1["image"],
            lambda c, g, w: (
                _inputs(["image"])(c, g, w) or _input_shape("image", [28, 28, 1])(c, g, w)
            ),
        ),
        Requirement(R1["float32"], _input_type("image", "tensor(float)")),
        Requirement(R1["batch"], _any_batch("image")),
        Requirement(R1["logits"], _outputs(["logits"])),
        Requirement(R1["raw"], _batches_not_probabilities),
        Requirement(R1["conv"], _has_conv),
        Requirement(R1["same"], _file_is_the_model),
        Requirement(R1["given"], _given_labels),
        Requirement(R1["alone"], _no_test_digits),
        Requirement(
            R1["accuracy"],
            _trained(
                lambda case: case.data["given"],
                "train it on x_train, y_train, in the layout the CNN takes",
            ),
        ),
    ],
    mistakes=[
        _cnn_mistake(
            "writes its own file",
            "train_cnn wrote no file at the path it was given: export to `path`",
            "file",
        ),
        _cnn_mistake(
            "returns the path",
            "expected train_cnn to return the trained Keras model, got PosixPath",
            "returns",
        ),
        _cnn_mistake(
            "channels first",
            SHAPE.format("image", "[batch, 28, 28, 1]", "[batch, 1, 28, 28]"),
            "image",
        ),
        _cnn_mistake(
            "float64 input", TYPE.format("image", "tensor(float)", "tensor(double)"), "float32"
        ),
        _cnn_mistake("fixed batch", FIXED.format("image", 32), "batch"),
        _cnn_mistake("tensor output", OUTPUTS.format(["logits"], UNNAMED[0]), "logits"),
        _cnn_mistake("softmax", PROBABILITIES, "raw"),
        _cnn_mistake(
            "no convolution",
            "the graph has no Conv operator: the exercise asks for a CNN (a Conv2D layer)",
            "conv",
        ),
        _cnn_mistake("exports before training", OTHER_MODEL, "same", _another_model),
        _cnn_mistake("trains on the notebook's digits", USUAL_LABELS, "given"),
        _cnn_mistake("adds the test digits", TEST_DIGITS, "alone"),
        _cnn_mistake(
            "untrained",
            "the CNN gets about one held-out digit in ten right, as a model that never trained does: fit it on x_train, "
            "y_train before you export it",
            "accuracy",
            _at_chance,
        ),
    ],
    alternatives=[
        train_functional_with_a_decorated_function,
        train_then_keras_export_renamed_and_checked,
    ],
    explain=_explain_raise,
    praise=lambda cases: [
        cases[0].name,
        "input 'image' [batch, 28, 28, 1], output 'logits', at least 90 % right on digits it never saw",
        "trained on the digits it was given, and only on them (their labels were relabelled by the check)",
        "tf2onnx wraps the Conv in Transposes: ONNX's Conv is channels-first, Keras's usually channels-last",
    ],
    marks=("tensorflow", "slow"),
)


# --- 02.2 Two inputs, two outputs -----------------------------------------------------------------------------


def export_temperature(path="mlp_temperature.onnx"):
    """Two TensorSpecs, two inputs; a dict of two tensors, two named outputs."""
    import tensorflow as tf
    import tf2onnx

    model = trained_model()

    def serve(image, temperature):
        logits = model(image)
        return {"logits": logits, "probabilities": tf.nn.softmax(logits / temperature)}

    tf2onnx.convert.from_function(
        tf.function(serve),
        input_signature=[
            tf.TensorSpec((None, 1, 28, 28), tf.float32, name="image"),
            tf.TensorSpec((), tf.float32, name="temperature"),
        ],
        opset=18,
        output_path=str(path),
    )
    return model, path


def _is_pair(answer) -> bool:
    return isinstance(answer, tuple) and len(answer) == 2 and callable(answer[0])


def temperature_cases(rng):
    """Batches of fresh test digits (sizes new with each seed) at temperatures below 1, a little above and far
    above (new with each seed, none of those the text names), then 2000 more at temperature 1 for the accuracy."""
    sizes = _sizes(rng)
    digits, labels = _test_digits(rng, sum(sizes) + HELD_OUT)
    images = (digits / 255).astype(np.float32)[:, None]
    cuts = np.cumsum([0, *sizes])
    temperatures = [
        round(float(rng.uniform(*bounds)), 2) for bounds in ((0.2, 0.45), (1.6, 2.8), (4, 9))
    ]
    cases = [
        Case(f"a batch of {b - a} at temperature {t}", (images[a:b], t), dict(labels=None, t=t))
        for a, b, t in zip(cuts, cuts[1:], temperatures)
    ]
    held_out = images[cuts[-1] :]
    return [
        *cases,
        Case(
            f"{HELD_OUT} test digits at temperature 1",
            (held_out, 1.0),
            dict(labels=labels[cuts[-1] :], t=1.0),
        ),
    ]


def run_temperature(answer, case: Case) -> dict:
    model, path = answer
    images, t = case.args
    outcome = _declared(path)
    outcome["keras"] = _keras(model, images)
    if sorted(i[0] for i in outcome["inputs"]) != ["image", "temperature"]:
        outcome.pop("session")
        return {**outcome, "result": None, "error": None}
    return _run(outcome, {"image": images, "temperature": np.array(t, np.float32)})


def _logits_are_the_model(case, got, want):
    logits, problem = _result(got)
    return problem or _differs(logits, got["keras"], "your Keras model on the same images")


NOT_SUMMING = "the probabilities of an image do not sum to 1: take the softmax over the 10 classes (the last axis)"


def _softmax_over_classes(case, got, want):
    if _probabilities(_result(got, "probabilities")[0]):
        return None
    return NOT_SUMMING


IGNORED = "your probabilities are softmax(logits): the temperature changes nothing; divide the logits by it before the softmax"


def _temperature_used(case, got, want):
    logits, probabilities = got["result"]["logits"], got["result"]["probabilities"]
    plain = softmax(logits)
    # a sure prediction's probabilities are the same at some temperatures: those rows tell nothing
    if _close(plain, softmax(logits / case.data["t"])) or not _close(probabilities, plain):
        return None
    return IGNORED


def _divided(case, got, want):
    result = got["result"]
    wanted = softmax(result["logits"] / case.data["t"])
    if np.allclose(result["probabilities"], wanted, atol=1e-5):
        return None
    return _differs(result["probabilities"], wanted, "softmax(logits / temperature)")


def _outputs_seen(name: str, seen):
    """Spotted when, on every case, the file's ``name`` output is ``seen(your model's logits, temperature)``."""

    def spots(cases, got):
        return all(
            isinstance(g, dict)
            and isinstance(g["keras"], np.ndarray)
            and _close(_result(g, name)[0], seen(g["keras"], c.data["t"]))
            for c, g in zip(cases, got)
        )

    return spots


def temperature_answer(mistake: str, model=_model):
    """02.2's answer, right but for ``mistake``: (the Keras model, its file)."""

    def build(path):
        tf, _, _ = _tf()
        m = model()
        probabilities = {
            "multiply": lambda z, t: tf.nn.softmax(z * t),
            "temperature ignored": lambda z, t: tf.nn.softmax(z),
            "softmax over the batch": lambda z, t: tf.nn.softmax(z / t, axis=0),
            "log_softmax": lambda z, t: tf.nn.log_softmax(z / t),
        }.get(mistake, lambda z, t: tf.nn.softmax(z / t))
        logits = {
            "softmax as logits": lambda z, t: tf.nn.softmax(z),
            "scaled logits": lambda z, t: z / t,
        }.get(mistake, lambda z, t: z)

        def outputs(image, t):
            return {"logits": logits(m(image), t), "probabilities": probabilities(m(image), t)}

        signature, function = [spec((None, 1, 28, 28)), spec((), name="temperature")], outputs
        if mistake == "no temperature input":
            signature = [spec((None, 1, 28, 28))]
            function = lambda image: {"logits": m(image), "probabilities": tf.nn.softmax(m(image))}  # noqa: E731
        elif mistake == "channels-last image":
            signature = [spec((None, 28, 28, 1)), spec((), name="temperature")]
            function = lambda image, t: outputs(tf.transpose(image, [0, 3, 1, 2]), t)  # noqa: E731
        elif mistake == "fixed batch":
            signature = [spec((1, 1, 28, 28)), spec((), name="temperature")]
        elif mistake == "temperature of shape [1]":
            signature = [spec((None, 1, 28, 28)), spec((1,), name="temperature")]
        elif mistake == "float64 temperature":
            signature = [spec((None, 1, 28, 28)), spec((), "float64", "temperature")]
            function = lambda image, t: outputs(image, tf.cast(t, tf.float32))  # noqa: E731
        elif mistake == "tuple":
            function = lambda image, t: (m(image), tf.nn.softmax(m(image) / t))  # noqa: E731
        return export(function, signature, path)

    return Built(model), Exported(f"temperature {mistake}", build)


def _logsumexp_softmax(path):
    """The softmax written with logsumexp, the outputs in another order, the function decorated."""
    tf, _, tf2onnx = _tf()
    model, signature = _model(), [spec((None, 1, 28, 28)), spec((), name="temperature")]

    @tf.function(input_signature=signature)
    def serve(image, temperature):
        logits = model(image)
        scaled = tf.math.divide(logits, temperature)
        return {
            "probabilities": tf.exp(scaled - tf.reduce_logsumexp(scaled, axis=-1, keepdims=True)),
            "logits": logits,
        }

    tf2onnx.convert.from_function(serve, input_signature=signature, output_path=str(path))
    return path


def _inverse_checked(path):
    """Multiplied by the inverse with keras.ops, the batch renamed and the file checked as the notebook does."""
    import onnx

    tf, keras, tf2onnx = _tf()
    model = _model()
    onnx_model, _ = tf2onnx.convert.from_function(
        tf.function(
            lambda image, temperature: {
                "logits": model(image),
                "probabilities": keras.ops.softmax(model(image) * (1.0 / temperature)),
            }
        ),
        input_signature=[spec((None, 1, 28, 28)), spec((), name="temperature")],
        opset=18,
    )
    for value in (onnx_model.graph.input[0], *onnx_model.graph.output):
        value.type.tensor_type.shape.dim[0].dim_param = "batch"
    onnx.checker.check_model(onnx_model, full_check=True)
    onnx.save(onnx_model, path)
    return path


R2 = dict(
    inputs="inputs image and temperature",
    image="image as in the contract, [batch, 1, 28, 28]",
    batch="image of any batch size",
    scalar="temperature one number, shape []",
    float32="temperature float32",
    outputs="outputs logits and probabilities (a dict)",
    logits="logits: the model's output",
    classes="softmax over the 10 classes",
    used="the temperature used",
    divided="probabilities divide by the temperature",
    trained="the trained model",
)
UNTRAINED = (
    "the file gets about one test digit in ten right, as a model that never trained does: export the trained "
    "`model` of section 1"
)


def _temperature_mistake(name, words, requirement, spots=judge_says_it, model=_model):
    # a TensorFlow export each: never made during a check (its words are its judge's, or ``spots`` tells it)
    return Mistake(name, temperature_answer(name, model), words, R2[requirement], spots)


def _scalar(case, got, want):
    shape = _spec(got, "inputs", "temperature")[2]
    if shape == []:
        return None
    return f"expected 'temperature' to be one number, shape [] (tf.TensorSpec(())), got {_shape(shape)}"


TEMPERATURE = Exercise(
    id="02.2",
    expects="a pair (keras_model, path_of_your_onnx_file)",
    reference=exported_once(export_temperature),
    answer="answer = export_temperature()",
    cases=temperature_cases,
    run=run_temperature,
    accepts=_is_pair,
    judged_alone=True,  # the expected logits are the learner's Keras model's; the reference exports the notebook's
    requirements=[
        Requirement(R2["inputs"], _inputs(["image", "temperature"])),
        Requirement(
            R2["image"],
            lambda c, g, w: (
                _input_type("image", "tensor(float)")(c, g, w)
                or _input_shape("image", [1, 28, 28])(c, g, w)
            ),
        ),
        Requirement(R2["batch"], _any_batch("image")),
        Requirement(R2["scalar"], _scalar),
        Requirement(R2["float32"], _input_type("temperature", "tensor(float)")),
        Requirement(R2["outputs"], _outputs(["logits", "probabilities"])),
        Requirement(R2["logits"], _logits_are_the_model),
        Requirement(R2["classes"], _softmax_over_classes),
        Requirement(R2["used"], _temperature_used),
        Requirement(R2["divided"], _divided),
        Requirement(
            R2["trained"],
            _trained(lambda case: case.data["labels"], "export the trained `model` of section 1"),
        ),
    ],
    mistakes=[
        _temperature_mistake(
            "no temperature input",
            "expected 2 input(s) ['image', 'temperature'], got ['image']",
            "inputs",
        ),
        _temperature_mistake(
            "channels-last image",
            SHAPE.format("image", "[batch, 1, 28, 28]", "[batch, 28, 28, 1]"),
            "image",
        ),
        _temperature_mistake("fixed batch", FIXED.format("image", 1), "batch"),
        _temperature_mistake(
            "temperature of shape [1]",
            "expected 'temperature' to be one number, shape [] (tf.TensorSpec(())), got [1]",
            "scalar",
        ),
        _temperature_mistake(
            "float64 temperature",
            TYPE.format("temperature", "tensor(float)", "tensor(double)"),
            "float32",
        ),
        _temperature_mistake(
            "tuple", OUTPUTS.format(["logits", "probabilities"], UNNAMED[1]), "outputs"
        ),
        _temperature_mistake(
            "scaled logits",
            "the file's 'logits' are your model's output divided by the temperature: 'logits' is your model's output "
            "as it is",
            "logits",
            _outputs_seen("logits", lambda z, t: z / t),
        ),
        _temperature_mistake(
            "softmax as logits",
            "the file's 'logits' are probabilities (the softmax of your model's output): 'logits' is your model's "
            "output as it is",
            "logits",
            _outputs_seen("logits", lambda z, t: softmax(z)),
        ),
        _temperature_mistake("softmax over the batch", NOT_SUMMING, "classes"),
        _temperature_mistake("log_softmax", NOT_SUMMING, "classes"),
        _temperature_mistake("temperature ignored", IGNORED, "used"),
        _temperature_mistake(
            "multiply",
            "your probabilities are softmax(logits * temperature): divide by the temperature instead",
            "divided",
            _outputs_seen("probabilities", lambda z, t: softmax(z * t)),
        ),
        _temperature_mistake("untrained", UNTRAINED, "trained", _at_chance, untrained_model),
    ],
    alternatives=[
        (Built(_model), Exported("a logsumexp softmax", _logsumexp_softmax)),
        (Built(_model), Exported("the inverse multiplied, checked", _inverse_checked)),
    ],
    praise=lambda cases: [
        "two inputs ('image', a scalar 'temperature') and two named outputs: one signature, one dict",
        f"'probabilities' equals softmax(logits / temperature) at temperatures you did not try ({', '.join(c.name for c in cases[:-1])})",
        "a trained model: at least 90 % of 2000 test digits right",
        "dividing by a positive number keeps the order of the logits: the predicted digit never changes",
    ],
    setup=SETUP,
    marks=("tensorflow",),
)


# --- 02.3 Preprocessing in the graph --------------------------------------------------------------------------


def export_uint8(path="mlp_uint8.onnx"):
    """Any TensorFlow code in the traced function ends up in the graph, preprocessing included."""
    import tensorflow as tf
    import tf2onnx

    model = trained_model()

    def serve(digits):  # uint8 [N, 28, 28] -> float32 [N, 1, 28, 28] in 0..1 -> the model
        return {"logits": model(tf.expand_dims(tf.cast(digits, tf.float32) / 255.0, axis=1))}

    tf2onnx.convert.from_function(
        tf.function(serve),
        input_signature=[tf.TensorSpec((None, 28, 28), tf.uint8, name="digits")],
        opset=18,
        output_path=str(path),
    )
    return model, path


def uint8_cases(rng):
    """Batches of raw uint8 test digits (sizes new with each seed), then 2000 more for the accuracy."""
    sizes = _sizes(rng)
    digits, labels = _test_digits(rng, sum(sizes) + HELD_OUT)
    cuts = np.cumsum([0, *sizes])
    cases = [
        Case(f"a batch of {b - a} raw uint8 digits", (digits[a:b],), dict(labels=None))
        for a, b in zip(cuts, cuts[1:])
    ]
    return [
        *cases,
        Case(f"{HELD_OUT} raw test digits", (digits[cuts[-1] :],), dict(labels=labels[cuts[-1] :])),
    ]


# what a file may feed the model instead of digits / 255 (then a channel axis): the known mistakes' pixels
SLIPS = {
    "right": lambda d: d / 255,
    "no division": lambda d: d,
    "divided by 256": lambda d: d / 256,
    "transposed": lambda d: d.transpose(0, 2, 1) / 255,
    "inverted": lambda d: (255 - d) / 255,
    "normalised twice": lambda d: (d / 255 - MNIST_MEAN) / MNIST_STD,
    "integer division": lambda d: d // 255,
}


def run_uint8(answer, case: Case) -> dict:
    """The file on the raw digits (when its one input is uint8), and the learner's Keras model on what each known
    slip feeds it (its ``right`` entry: each digit / 255 with a channel axis)."""
    model, path = answer
    (digits,) = case.args
    outcome = _declared(path)
    outcome["keras"] = {
        slip: _keras(model, feed(digits).astype(np.float32)[:, None])
        for slip, feed in SLIPS.items()
    }
    if len(outcome["inputs"]) != 1 or outcome["inputs"][0][1] != "tensor(uint8)":
        outcome.pop("session")
        return {**outcome, "result": None, "error": None}
    return _run(outcome, {outcome["inputs"][0][0]: digits})


def _not_probabilities(case, got, want):
    logits, problem = _result(got)
    return problem or (PROBABILITIES if _probabilities(logits) else None)


def _preprocessed(case, got, want):
    logits, problem = _result(got)
    return problem or _differs(
        logits,
        got["keras"]["right"],
        "your Keras model given the same digits / 255 with a channel axis",
    )


def _fed(slip: str):
    return _each_case(lambda case, outcome: outcome["keras"][slip])


def uint8_answer(mistake: str, model=_model):
    """02.3's answer, right but for ``mistake``: (the Keras model, its file)."""

    def build(path):
        tf, _, _ = _tf()
        m = model()
        pixels = {
            "no division": lambda d: tf.cast(d, tf.float32),
            "divided by 256": lambda d: tf.cast(d, tf.float32) / 256,
            "transposed": lambda d: tf.transpose(tf.cast(d, tf.float32), [0, 2, 1]) / 255,
            "inverted": lambda d: (255 - tf.cast(d, tf.float32)) / 255,
            "normalised twice": lambda d: (tf.cast(d, tf.float32) / 255 - MNIST_MEAN) / MNIST_STD,
            "integer division": lambda d: tf.cast(d // 255, tf.float32),
        }.get(mistake, lambda d: tf.cast(d, tf.float32) / 255)
        signature, function = (
            [spec((None, 28, 28), "uint8", "digits")],
            lambda d: {"logits": m(pixels(d)[:, None])},
        )
        if mistake == "float input":
            signature, function = (
                [spec((None, 28, 28), name=None)],
                lambda d: {"logits": m(d[:, None] / 255)},
            )
        elif mistake == "channel axis in the input":
            signature = [spec((None, 1, 28, 28), "uint8", "digits")]
            function = lambda d: {"logits": m(tf.cast(d, tf.float32) / 255)}  # noqa: E731
        elif mistake == "fixed batch":
            signature = [spec((8, 28, 28), "uint8", "digits")]
        elif mistake == "tensor output":
            function = lambda d: m(pixels(d)[:, None])  # noqa: E731
        elif mistake == "softmax":
            function = lambda d: {"logits": tf.nn.softmax(m(pixels(d)[:, None]))}  # noqa: E731
        return export(function, signature, path)

    return Built(model), Exported(f"uint8 {mistake}", build)


# a reshape and a multiplication, the input named otherwise
def _reshaped(path):
    tf, _, _ = _tf()
    model = _model()
    return export(
        lambda pixels: {
            "logits": model(tf.reshape(tf.cast(pixels, tf.float32) * (1 / 255), [-1, 1, 28, 28]))
        },
        [spec((None, 28, 28), "uint8", "pixels")],
        path,
    )


# tf.image.convert_image_dtype scales uint8 to 0..1 itself
def _convert_image_dtype(path):
    tf, _, _ = _tf()
    model = _model()
    return export(
        lambda raw: {"logits": model(tf.image.convert_image_dtype(raw, tf.float32)[:, tf.newaxis])},
        [spec((None, 28, 28), "uint8", "raw")],
        path,
    )


R3 = dict(
    uint8="one input, uint8",
    raw="raw pixels [batch, 28, 28]",
    batch="any batch size",
    logits="output logits (a dict)",
    not_probabilities="logits, not probabilities",
    preprocessed="your model's logits on each digit / 255, with a channel axis",
    trained="the trained model",
)
SLIP_WORDS = "the file gives your model's logits for {}; the model takes each digit / 255 with a channel axis, [batch, 1, 28, 28]"


def _uint8_mistake(name, words, requirement, spots=judge_says_it, model=_model):
    # a TensorFlow export each: never made during a check (its words are its judge's, or ``spots`` tells it)
    return Mistake(name, uint8_answer(name, model), words, R3[requirement], spots)


def _slip(name: str, seen: str):
    return _uint8_mistake(name, SLIP_WORDS.format(seen), "preprocessed", _fed(name))


def _one_uint8(case, got, want):
    inputs = got["inputs"]
    if len(inputs) != 1:
        return f"expected 1 input, got {[name for name, _, _ in inputs]}"
    return (
        None
        if inputs[0][1] == "tensor(uint8)"
        else f"expected one input of type tensor(uint8), got {inputs[0][1]}"
    )


UINT8 = Exercise(
    id="02.3",
    expects="a pair (keras_model, path_of_your_onnx_file)",
    reference=exported_once(export_uint8),
    answer="answer = export_uint8()",
    cases=uint8_cases,
    run=run_uint8,
    accepts=_is_pair,
    judged_alone=True,  # the expected logits are the learner's Keras model's; the reference exports the notebook's
    requirements=[
        Requirement(R3["uint8"], _one_uint8),
        Requirement(R3["raw"], _input_shape(None, [28, 28])),
        Requirement(R3["batch"], _any_batch(None)),
        Requirement(R3["logits"], _outputs(["logits"])),
        Requirement(R3["not_probabilities"], _not_probabilities),
        Requirement(R3["preprocessed"], _preprocessed),
        Requirement(
            R3["trained"],
            _trained(lambda case: case.data["labels"], "export the trained `model` of section 1"),
        ),
    ],
    mistakes=[
        _uint8_mistake(
            "float input", "expected one input of type tensor(uint8), got tensor(float)", "uint8"
        ),
        _uint8_mistake(
            "channel axis in the input",
            SHAPE.format("digits", "[batch, 28, 28]", "[batch, 1, 28, 28]"),
            "raw",
        ),
        _uint8_mistake("fixed batch", FIXED.format("digits", 8), "batch"),
        _uint8_mistake("tensor output", OUTPUTS.format(["logits"], UNNAMED[0]), "logits"),
        _uint8_mistake("softmax", PROBABILITIES, "not_probabilities"),
        _slip("divided by 256", "the pixels divided by 256, not by 255"),
        _slip("no division", "the pixels 0..255 as they are, not divided by 255"),
        _slip("transposed", "the digits transposed (rows and columns swapped)"),
        _slip("inverted", "the digits inverted (255 - pixel: dark digits on white)"),
        _slip(
            "normalised twice",
            "the pixels already normalised with the training mean and std ((x / 255 - mean) / std), which your model "
            "then normalises again",
        ),
        _uint8_mistake("untrained", UNTRAINED, "trained", _at_chance, untrained_model),
        _slip(
            "integer division",
            "the pixels divided with // (integer division: 0 but for the pixels of 255)",
        ),
    ],
    alternatives=[
        (Built(_model), Exported("a reshape", _reshaped)),
        (Built(_model), Exported("convert_image_dtype", _convert_image_dtype)),
    ],
    praise=lambda cases: [
        f"your model's logits on unseen raw digits ({', '.join(c.name for c in cases)})",
        "the Cast and the division are now part of the graph: callers no longer scale pixels",
        "but the file no longer follows the series' contract: a trade-off",
    ],
    setup=SETUP,
    marks=("tensorflow",),
)

EXERCISES = [CNN, TEMPERATURE, UINT8]
