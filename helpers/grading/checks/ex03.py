"""Notebook 03's exercises: classifying with whatever a session declares, a shift curve, batches of a fixed size.

03.1 and 03.3 hand an answer copies of the PyTorch file that differ from the contract (names, element type,
layout, a fixed batch), each with weights of its own, built per seed by another process (the kernel never loads
``onnx``). The session an answer gets notes each feed it is given (:class:`Watched`), so a requirement judges
what the answer fed (names, element type, layout, scale, batch sizes) as well as the labels it returned.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Real
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from helpers.data.mnist import load_mnist
from helpers.grading.checks._common import contract_input
from helpers.grading.checks._common import session as _session
from helpers.grading.examiner import (
    Case,
    Exercise,
    Mistake,
    Raised,
    Requirement,
    fresh_folder,
    judge_says_it,
)
from helpers.pipeline.artifacts import ensure_artifact, existing_artifact

# float16 may flip a rare borderline digit; a wrong scale or layout flips many
AGREEMENT = 0.995
NOISE = 0.8  # each copy's weights move by 0.8 x their own spread: another classifier (a few % of labels differ)
TYPES = {"float16": "tensor(float16)", "float64": "tensor(double)", "float32": "tensor(float)"}
# the element types an image input may have (the mistakes'; the reference holds its own)
ORT_TO_NUMPY = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
}
SCALE_WORDS = "the file takes pixels in 0..1: scale them (uint8 / 255)"


@functools.cache
def _test_digits() -> np.ndarray:
    return load_mnist().x_test


# --- the copies, built by another process --------------------------------------------------------------------


def build_copies(source: Path, folder: Path, copies: list) -> None:
    """Write each copy ``[filename, input, output, dtype, shape, seed]`` of ``source`` into ``folder`` (needs
    ``onnx``): its weights moved (``varied_model``), a Cast and a Reshape or Transpose to the contract before."""
    import onnx
    from onnx import TensorProto, helper

    from helpers.grading.checks._common import varied_model

    types = {
        "float16": TensorProto.FLOAT16,
        "float64": TensorProto.DOUBLE,
        "float32": TensorProto.FLOAT,
    }
    for filename, name_in, name_out, dtype, shape, seed in copies:
        model = varied_model(onnx.load(source), seed, relative_noise=NOISE)
        graph = model.graph
        if shape[-1] == 1:
            to_image = helper.make_node("Transpose", ["as_float"], ["image"], perm=[0, 3, 1, 2])
        else:
            graph.initializer.append(
                helper.make_tensor("chw", TensorProto.INT64, [4], [-1, 1, 28, 28])
            )
            to_image = helper.make_node("Reshape", ["as_float", "chw"], ["image"])
        body = list(graph.node)
        del graph.node[:], graph.input[:], graph.output[:]
        graph.node.extend(
            [
                helper.make_node("Cast", [name_in], ["as_float"], to=TensorProto.FLOAT),
                to_image,
                *body,
                helper.make_node("Cast", ["logits"], [name_out], to=types[dtype]),
            ]
        )
        graph.input.append(helper.make_tensor_value_info(name_in, types[dtype], shape))
        graph.output.append(helper.make_tensor_value_info(name_out, types[dtype], [shape[0], 10]))
        onnx.checker.check_model(model)
        onnx.save(model, folder / filename)


@functools.lru_cache(maxsize=4)  # a check's seed repeated: the same copies, built once per kernel
def _built(copies: str) -> tuple[bytes, ...]:
    """The copies (JSON of ``build_copies``' list), built by another process into a fresh folder, as bytes."""
    folder = fresh_folder("copies-")
    source = existing_artifact("mnist_mlp_pytorch.onnx")
    result = subprocess.run(
        [sys.executable, "-m", "helpers.grading.checks.ex03", str(source), str(folder), copies],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:  # a checker bug
        raise RuntimeError(f"could not build the exercise's model copies:\n{result.stderr}")
    return tuple((folder / filename).read_bytes() for filename, *_ in json.loads(copies))


def _cases(rng, copies: list, counts: list[int]) -> list[Case]:
    """The PyTorch file, then each copy ``(description, input, output, dtype, shape)``, each on ``counts``
    fresh test digits."""
    key = int(rng.integers(2**31))
    spec = [[f"{k}.onnx", i, o, d, s, key * 16 + k] for k, (_, i, o, d, s) in enumerate(copies)]
    sessions = [_session(existing_artifact("mnist_mlp_pytorch.onnx"))]
    sessions += [_session(model) for model in _built(json.dumps(spec))]
    names = ["the PyTorch file"] + [description for description, *_ in copies]
    cases = []
    for name, session, n in zip(names, sessions, counts):
        digits = _test_digits()[rng.choice(10_000, n, replace=False)]
        cases.append(Case(f"{name}, {n} images", (session, digits), Declared.of(session, n)))
    return cases


# --- what a session declares, and what an answer fed it --------------------------------------------------------


@dataclass(frozen=True)
class Declared:
    """What a case's session declares, and its number of images."""

    input: str
    type: str
    shape: tuple
    output: str
    count: int

    @classmethod
    def of(cls, session, count: int) -> Declared:
        spec = session.get_inputs()[0]
        return cls(spec.name, spec.type, tuple(spec.shape), session.get_outputs()[0].name, count)

    @property
    def batch(self) -> int | None:
        """The fixed batch size, or None for a dynamic batch (a str)."""
        return self.shape[0] if isinstance(self.shape[0], int) else None


@dataclass(frozen=True)
class Feed:
    """One run of the session an answer was given: what it fed and asked for, and whether it was refused."""

    names: tuple
    outputs: tuple | None
    # asks for an output the session does not declare
    asks_other: bool
    dtype: str
    shape: tuple
    low: float
    high: float
    refused: str | None


@dataclass(frozen=True)
class Labelled:
    """An answer's outcome: its runs of the session, and what it returned (None: a run was refused and the
    answer raised ONNX Runtime's error)."""

    feeds: tuple
    labels: Any


class Watched:
    """The session handed to an answer: the case's own, which notes each feed it gets."""

    def __init__(self, session):
        self._session, self.feeds = session, []

    def __getattr__(self, name):
        return getattr(self._session, name)

    def run(self, output_names, input_feed, run_options=None):
        value = (
            np.asarray(next(iter(input_feed.values())))
            if isinstance(input_feed, dict)
            else np.zeros(0)
        )
        number = value.size and value.dtype.kind in "biuf"
        noted = dict(
            names=tuple(input_feed) if isinstance(input_feed, dict) else (),
            outputs=None if output_names is None else tuple(output_names),
            asks_other=output_names is not None
            and not set(output_names) <= {o.name for o in self._session.get_outputs()},
            dtype=str(value.dtype),
            shape=value.shape,
            low=float(value.min()) if number else 0.0,
            high=float(value.max()) if number else 0.0,
        )
        try:
            result = self._session.run(output_names, input_feed, run_options)
        # ONNX Runtime's refusal, noted, then raised to the answer as it is
        except Exception as err:
            self.feeds.append(Feed(**noted, refused=_refusal(err)))
            raise
        self.feeds.append(Feed(**noted, refused=None))
        return result


def _refusal(err: Exception) -> str:
    """ONNX Runtime's refusal as the learner needs it: its first line and the lines it announces ("...for the
    following indices" then "index: 0 Got: 5 Expected: 16"), never cut in the middle."""
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    kept = lines[:1] + [line for line in lines[1:] if line.startswith("index")]
    return " ".join(kept)


def run_watched(answer, case: Case) -> Labelled:
    """The answer on the case's images with the case's session, watched. An error of the answer's own stays
    raised (the examiner reports it); one the session raised on a refused feed is judged by that feed."""
    session, digits = case.args
    watched = Watched(session)
    try:
        labels = answer(watched, digits.copy())
    except Exception:
        if watched.feeds and watched.feeds[-1].refused:
            return Labelled(tuple(watched.feeds), None)
        raise
    # refusals the answer caught itself do not count
    return Labelled(tuple(f for f in watched.feeds if not f.refused), labels)


def _each_feed(test, words):
    """A judge: ``words`` for the first feed failing ``test(feed, declared)``."""

    def judge(case, got, want):
        bad = next((f for f in got.feeds if not test(f, case.data)), None)
        return None if bad is None else words(bad, case.data)

    return judge


def _ran(case, got, want):
    if got.feeds:
        return None
    return "your function never ran the session passed in (each copy has weights of its own): classify with it"


_input_name = _each_feed(
    lambda f, d: f.names == (d.input,),
    lambda f, d: (
        f"a run fed {list(f.names)}: read the input name from session.get_inputs()[0].name"
    ),
)
_output_name = _each_feed(
    lambda f, d: not f.asks_other,
    lambda f, d: (
        f"a run asked for {list(f.outputs)}: read the output name from session.get_outputs()[0].name "
        "(or pass None)"
    ),
)
_element_type = _each_feed(
    lambda f, d: TYPES.get(f.dtype) == d.type,
    lambda f, d: (
        f"a run fed {f.dtype} to an input of type {d.type}: read the element type from "
        "session.get_inputs()[0].type"
    ),
)
_layout = _each_feed(
    lambda f, d: f.shape[1:] == d.shape[1:],
    lambda f, d: (
        f"a run fed the shape {list(f.shape)} to an input declared {list(d.shape)}: reshape the images "
        "to the input's layout, session.get_inputs()[0].shape (its first dimension, the batch, aside)"
    ),
)


def _names_type_layout(case, got, want):
    for judge in (_input_name, _output_name, _element_type, _layout):
        differs = judge(case, got, want)
        if differs:
            return differs
    return None


_scaled = _each_feed(
    lambda f, d: f.low >= 0 and f.high <= 1,
    lambda f, d: f"a run fed values from {f.low:g} to {f.high:g}: {SCALE_WORDS}",
)


def _refused(got) -> str | None:
    if got.labels is None:
        return f"ONNX Runtime refused a run: {got.feeds[-1].refused}"
    return None


def _one_label_each(case, got, want):
    if _refused(got):
        return _refused(got)
    result = got.labels
    if isinstance(result, (list, tuple)) and any(np.ndim(part) > 0 for part in result):
        lengths = " or ".join(map(str, sorted({len(np.atleast_1d(part)) for part in result})))
        arrays = f"{len(result)} array{'' if len(result) == 1 else 's'}"
        return (
            f"your function returns a {type(result).__name__} of {arrays} (of {lengths} labels); expected one "
            "array with one integer label per image, all runs joined"
        )
    try:
        labels = np.asarray(result)
    except (TypeError, ValueError):
        return f"expected an array of integer labels, got {type(result).__name__}"
    if labels.size == 0 and case.data.count:
        # an empty result is no labels, whatever numpy's dtype for it: [][:-0] and labels[:-pad] with pad 0
        exact = case.data.batch and case.data.count % case.data.batch == 0
        return f"expected one label for each of the {case.data.count} images, got none" + (
            ": here the images fill the last batch exactly, so there is no padding to cut off"
            if exact
            else ""
        )
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        return (
            f"expected one integer label per image, got {labels.dtype} {list(labels.shape)}: argmax over the "
            "classes gives them"
        )
    if len(labels) != case.data.count:
        extra = (
            "labels of the padding are left in"
            if len(labels) > case.data.count
            else "some images got no label"
        )
        return f"expected one label for each of the {case.data.count} images, got {len(labels)}: {extra}"
    return None


def _own_labels(case, got, want):
    if _refused(
        got
    ):  # no labels to compare: the refusal is the cause, as the labels' requirement says
        return _refused(got)
    labels = np.asarray(got.labels)
    differ = labels != np.asarray(want.labels)
    if differ.mean() <= 1 - AGREEMENT:
        return None
    return (
        f"your labels differ from the model's own on {differ.mean():.0%} of the images (first at image "
        f"{int(np.flatnonzero(differ)[0])}): your feeds follow what the session declares, so look at the "
        "pixels' order and values, and at the labels' order"
    )


def _labels_alike(a, b) -> bool:
    if a is None or b is None:
        return a is b
    try:
        x, y = np.asarray(a), np.asarray(b)
    except (TypeError, ValueError):
        x = y = np.zeros(0, object)
    # lists of arrays: alike when their parts' shapes are
    if x.dtype == object or y.dtype == object:
        return (
            type(a) is type(b)
            and len(a) == len(b)
            and all(np.shape(p) == np.shape(q) for p, q in zip(a, b))
        )
    if x.shape != y.shape or x.dtype.kind not in "biuf" or y.dtype.kind not in "biuf":
        return False
    return x.dtype.kind == y.dtype.kind and bool(
        np.isclose(x, y, rtol=1e-3, atol=1e-3).mean() >= AGREEMENT
    )


def _alike(sizes: bool):
    """Two outcomes behave alike: the same kinds of feeds (names, type, layout, scale; ``sizes``: batch sizes in
    order) and labels agreeing like the reference's on another build."""

    def did(outcome: Labelled) -> tuple:
        kinds = {
            (f.names, f.asks_other, f.dtype, f.shape[1:], f.low < 0, f.high > 1)
            for f in outcome.feeds
        }
        return (kinds, tuple(f.shape[:1] for f in outcome.feeds) if sizes else None)

    def alike(a, b) -> bool:
        if isinstance(a, Raised) or isinstance(b, Raised):
            return isinstance(a, Raised) and isinstance(b, Raised) and a.type == b.type
        return did(a) == did(b) and _labels_alike(a.labels, b.labels)

    return alike


def _label_secrets(outcomes) -> list[str]:
    """How the reference's labels could be printed: their first few, as a list or as numpy prints them."""
    heads = [np.asarray(o.labels)[:5].tolist() for o in outcomes if isinstance(o, Labelled)]
    return [text for head in heads for text in (str(head)[1:-1], " ".join(map(str, head)))]


# --- 03.1 Classify with whatever the session declares ---------------------------------------------------------


def classify(session, images_uint8: np.ndarray) -> np.ndarray:
    """Predicted class per uint8 [N, 28, 28] image; every name, dtype and layout comes from the session."""
    # ONNX Runtime's element type names -> numpy dtypes (the ones an image input may have)
    ort_to_numpy = {
        "tensor(float)": np.float32,
        "tensor(double)": np.float64,
        "tensor(float16)": np.float16,
    }
    image_input = session.get_inputs()[0]
    output_name = session.get_outputs()[0].name
    # [1, 28, 28], [28, 28, 1] or [784]: the same pixels in another order
    layout = image_input.shape[1:]
    pixels = (images_uint8 / 255.0).reshape(len(images_uint8), *layout)
    feed = pixels.astype(ort_to_numpy[image_input.type])
    logits = session.run([output_name], {image_input.name: feed})[0]
    return logits.argmax(axis=1)


INPUTS = ("pixel", "pixels", "digits", "x", "input", "input_1", "img", "images")
OUTPUTS = ("scores", "probs", "y", "output", "output_0", "class_scores")


def layout_plan(rng):
    """The PyTorch file, then copies each differing from the contract in one more way: float16 with its own
    names, float64, flat float32, channels last, flat float64; names, batch names and image counts per seed."""
    ins, outs = (
        [str(n) for n in rng.permutation(INPUTS)],
        [str(n) for n in rng.permutation(OUTPUTS)],
    )
    batch = str(rng.choice(["batch", "N", "batch_size", f"unk__{rng.integers(100, 1000)}"]))
    layouts = [
        ("float16", [batch, 1, 28, 28], f"a float16 copy whose input is {ins[0]!r}"),
        ("float64", [batch, 1, 28, 28], f"a float64 copy [{batch}, 1, 28, 28]"),
        ("float32", [batch, 784], f"a float32 copy with a flat input [{batch}, 784]"),
        ("float32", [batch, 28, 28, 1], f"a channels-last copy [{batch}, 28, 28, 1]"),
        ("float64", [batch, 784], f"a copy with a flat float64 input [{batch}, 784]"),
    ]
    copies = [(text, i, o, dtype, shape) for (dtype, shape, text), i, o in zip(layouts, ins, outs)]
    return copies, [int(n) for n in rng.integers(300, 700, 6)]


def _feed_as_declared(session, images, pixels=None, outputs=None):
    """The logits of ``pixels`` (default: the images in 0..1) fed as the session declares."""
    spec = session.get_inputs()[0]
    pixels = images / 255.0 if pixels is None else pixels
    dtype = ORT_TO_NUMPY[spec.type]
    feed = pixels.reshape(len(pixels), *spec.shape[1:]).astype(dtype)
    return session.run(outputs, {spec.name: feed})[0]


def notebook_01_file(session, images):  # the session is ignored: notebook 01's file, opened again
    original = _session(existing_artifact("mnist_mlp_pytorch.onnx"))
    return original.run(None, {"image": contract_input(images)})[0].argmax(1)


def hard_coded_contract(session, images):  # notebook 03's section 1, names and all, in a function
    return session.run(None, {"image": contract_input(images)})[0].argmax(1)


def output_name_hard_coded(session, images):
    return _feed_as_declared(session, images, outputs=["logits"]).argmax(1)


def float32_always(session, images):  # the names read, the element type not
    return session.run(None, {session.get_inputs()[0].name: contract_input(images)})[0].argmax(1)


def float32_or_float16(session, images):  # float64 not handled
    spec = session.get_inputs()[0]
    dtype = np.float16 if spec.type == "tensor(float16)" else np.float32
    feed = (images / 255.0).reshape(len(images), *spec.shape[1:]).astype(dtype)
    return session.run(None, {spec.name: feed})[0].argmax(1)


def no_float16_entry(session, images):  # a type table without float16: KeyError
    spec = session.get_inputs()[0]
    dtype = {"tensor(float)": np.float32, "tensor(double)": np.float64}[spec.type]
    feed = (images / 255.0).reshape(len(images), *spec.shape[1:]).astype(dtype)
    return session.run(None, {spec.name: feed})[0].argmax(1)


def four_dimensional_only(session, images):  # NCHW or NHWC, never flat
    spec = session.get_inputs()[0]
    pixels = (images / 255.0)[..., None] if spec.shape[-1] == 1 else (images / 255.0)[:, None]
    return session.run(None, {spec.name: pixels.astype(ORT_TO_NUMPY[spec.type])})[0].argmax(1)


def nchw_or_flat(session, images):  # a rank-4 input is always [N, 1, 28, 28]
    spec = session.get_inputs()[0]
    shape = (len(images), 1, 28, 28) if len(spec.shape) == 4 else (len(images), 784)
    pixels = (images / 255.0).reshape(shape).astype(ORT_TO_NUMPY[spec.type])
    return session.run(None, {spec.name: pixels})[0].argmax(1)


def whole_shape(session, images):  # the declared shape, its dynamic batch's name included
    spec = session.get_inputs()[0]
    feed = (images / 255.0).reshape(spec.shape).astype(ORT_TO_NUMPY[spec.type])
    return session.run(None, {spec.name: feed})[0].argmax(1)


def unscaled(session, images):
    return _feed_as_declared(session, images, images.astype(np.float64)).argmax(1)


def mean_std(session, images):  # notebook 01's normalization, though the file does it inside
    return _feed_as_declared(session, images, (images / 255.0 - 0.1307) / 0.3081).argmax(1)


def inverted(session, images):  # black digits on white
    return _feed_as_declared(session, images, 1 - images / 255.0).argmax(1)


# channels last by swapping height and width instead of adding an axis
def swapped_axes(session, images):
    spec = session.get_inputs()[0]
    pixels = images / 255.0
    return _feed_as_declared(
        session, images, pixels.transpose(0, 2, 1) if spec.shape[-1] == 1 else pixels
    ).argmax(1)


def labels_per_run(session, images):  # runs of 100 images, their labels left in a list
    return [classify(session, images[s : s + 100]) for s in range(0, len(images), 100)]


# element type parsed from its name, layout by axis moves
def classify_by_type_name(session, images):
    spec = session.get_inputs()[0]
    dtype = {"float": "float32", "float16": "float16", "double": "float64"}[
        spec.type[len("tensor(") : -1]
    ]
    pixels = images.astype(dtype) / np.array(255, dtype)
    if spec.shape[1:] == [28, 28, 1]:
        pixels = pixels[..., np.newaxis]
    elif len(spec.shape) == 2:
        pixels = pixels.reshape(len(images), -1)
    else:
        pixels = pixels[:, np.newaxis]
    return np.argmax(session.run(None, {spec.name: pixels})[0], axis=-1)


# one image per run; the output name read, not None
def classify_one_at_a_time(session, images):
    spec, out = session.get_inputs()[0], session.get_outputs()[0]
    dtype = np.dtype(
        {"tensor(float)": "f4", "tensor(float16)": "f2", "tensor(double)": "f8"}[spec.type]
    )
    feeds = (np.reshape(image / 255, (1, *spec.shape[1:])).astype(dtype) for image in images)
    return np.array(
        [int(session.run([out.name], {spec.name: feed})[0][0].argmax()) for feed in feeds]
    )


R1 = {
    "ran": "the session passed in, run",
    "input": "the input name read from the session",
    "output": "the output name read from the session",
    "type": "the element type read from the session",
    "layout": "the layout read from the session",
    "scaled": "pixels scaled to 0..1",
    "labels": "one integer label per image",
    "own": "each model's own labels",
}

CLASSIFY = Exercise(
    id="03.1",
    expects="your function classify(session, images_uint8)",
    reference=classify,
    cases=lambda rng: _cases(rng, *layout_plan(rng)),
    run=run_watched,
    requirements=[
        Requirement(R1["ran"], _ran),
        Requirement(R1["input"], _input_name),
        Requirement(R1["output"], _output_name),
        Requirement(R1["type"], _element_type),
        Requirement(R1["layout"], _layout),
        Requirement(R1["scaled"], _scaled),
        Requirement(R1["labels"], _one_label_each),
        Requirement(R1["own"], _own_labels),
    ],
    mistakes=[
        Mistake(
            "notebook 01's file instead of the session",
            notebook_01_file,
            "these are the labels of notebook 01's file, and each copy has weights of its own: classify with "
            "the session passed in",
            R1["ran"],
        ),
        Mistake(
            "the contract's names hard-coded",
            hard_coded_contract,
            "a copy's input is not 'image': read the input name from session.get_inputs()[0].name",
            R1["input"],
        ),
        Mistake(
            "the output name hard-coded",
            output_name_hard_coded,
            "a copy's output is not 'logits': read the output name from session.get_outputs()[0].name (or pass "
            "None)",
            R1["output"],
        ),
        Mistake(
            "float32 always",
            float32_always,
            "a copy's input is not float32: read the element type from session.get_inputs()[0].type",
            R1["type"],
        ),
        Mistake(
            "float64 not handled",
            float32_or_float16,
            "tensor(double) is float64: map each element type the session may declare to its numpy dtype",
            R1["type"],
        ),
        Mistake(
            "no float16 in the type table",
            no_float16_entry,
            "your table of element types has no tensor(float16) (numpy's float16)",
            R1["type"],
        ),
        Mistake(
            "never flat",
            four_dimensional_only,
            "a flat input takes each image as one row of 784: reshape to session.get_inputs()[0].shape's layout",
            R1["layout"],
        ),
        Mistake(
            "channels first for any rank 4",
            nchw_or_flat,
            "a channels-last input [N, 28, 28, 1] holds the channel at the end: reshape to the declared layout",
            R1["layout"],
        ),
        Mistake(
            "the declared shape with its batch's name",
            whole_shape,
            "the first dimension of a declared shape is the batch, a str when it is dynamic: reshape to "
            "(len(images), *shape[1:])",
            R1["layout"],
        ),
        Mistake("pixels left in 0..255", unscaled, SCALE_WORDS, R1["scaled"]),
        Mistake(
            "normalized with MNIST's mean and std",
            mean_std,
            "the file normalizes inside: feed the pixels in 0..1 (uint8 / 255), no mean or std",
            R1["scaled"],
        ),
        Mistake(
            "logits, not labels",
            lambda session, images: _feed_as_declared(session, images),
            "yours are the scores of each class: argmax over the classes gives one label per image",
            R1["labels"],
        ),
        Mistake(
            "labels of each run left in a list",
            labels_per_run,
            "one array of labels, all runs joined (np.concatenate), not a list of them",
            R1["labels"],
        ),
        Mistake(
            "labels as a column [N, 1]",
            lambda session, images: classify(session, images)[:, None],
            "one label per image, a 1-D array [N], not a column",
            R1["labels"],
        ),
        Mistake(
            "float labels",
            lambda session, images: classify(session, images).astype(np.float32),
            "labels are integers (argmax gives them): yours are floats",
            R1["labels"],
        ),
        Mistake(
            "argmax over the images",
            lambda session, images: _feed_as_declared(session, images).argmax(0),
            "argmax over the classes (axis 1), not over the images (axis 0)",
            R1["labels"],
        ),
        Mistake(
            "the last image left out",
            lambda session, images: classify(session, images)[:-1],
            "one label for each image: yours leaves the last one out",
            R1["labels"],
        ),
        Mistake(
            "inverted pixels",
            inverted,
            "yours inverts the pixels: MNIST digits are white (255) on black (0), as the file takes them",
            R1["own"],
        ),
        Mistake(
            "height and width swapped for channels last",
            swapped_axes,
            "channels last takes the channel axis at the end (images[..., None]); swapping height and width "
            "transposes each digit",
            R1["own"],
        ),
    ],
    alternatives=[classify_by_type_name, classify_one_at_a_time],
    alike=_alike(sizes=False),
    secrets=_label_secrets,
    explain=lambda raised, case: (
        f"this session's input: {case.data.input!r}, {case.data.type}, {list(case.data.shape)}"
    ),
    praise=lambda cases: [
        f"each model's own labels on {', '.join(c.name for c in cases)}",
        "names, element type, layout and weights all come from the session: nothing about the file is hard-coded",
    ],
    marks=("slow",),
    setup="import numpy as np",
)


# --- 03.2 The shift curve ------------------------------------------------------------------------------------

SHIFTS = range(7)
# a curve rounded to 3 decimals is right: each accuracy within 0.0005 (5 digits of the 10,000)
TOLERANCE = 5e-4 + 1e-9


def shift_curve():
    """The PyTorch file's accuracy on the 10,000 test digits moved k = 0..6 pixels right, black from the left."""
    mnist = load_mnist()
    session = ort.InferenceSession(ensure_artifact("mnist_mlp_pytorch.onnx"))
    accuracy = {}
    for k in range(7):
        moved = np.zeros_like(mnist.x_test)
        moved[:, :, k:] = mnist.x_test[:, :, : 28 - k]
        accuracy[k] = float((classify(session, moved) == mnist.y_test).mean())
    return accuracy


_truth = functools.cache(shift_curve)


def shifted(digits: np.ndarray, k: int, axis: int = 2, roll: bool = False) -> np.ndarray:
    """Digits moved k pixels along ``axis`` (2 = right, 1 = down), the gap filled with black (or wrapped)."""
    if roll:
        return np.roll(digits, k, axis=axis)
    return np.pad(digits, [(0, 0)] + [(k, 0) if a == axis else (0, 0) for a in (1, 2)])[:, :28, :28]


@functools.cache
def _curve(
    file="mnist_mlp_pytorch.onnx", train=False, n=10_000, move="right", scale=255.0, agreement=False
):
    """The 03.2 curve measured some other way (a known answer's)."""
    moves = {
        "right": lambda x, k: shifted(x, k),
        "down": lambda x, k: shifted(x, k, axis=1),
        "roll": lambda x, k: shifted(x, k, roll=True),
        "left": lambda x, k: np.pad(x, ((0, 0), (0, 0), (0, k)))[:, :, k:],
        "right and down": lambda x, k: shifted(shifted(x, k), k, axis=1),
    }
    data = load_mnist()
    session = _session(existing_artifact(file))
    x, y = (data.x_train[:n], data.y_train[:n]) if train else (data.x_test[:n], data.y_test[:n])
    if agreement:  # compared with the unshifted digits' predictions instead of the labels
        y = session.run(None, {"image": contract_input(x)})[0].argmax(1)
    curve = {}
    for k in SHIFTS:
        pixels = moves[move](x, k)[:, None].astype(np.float32) / scale
        curve[k] = float((session.run(None, {"image": pixels})[0].argmax(1) == y).mean())
    return curve


class Curve(Mapping):
    """A known answer to 03.2, a dict computed the first time it is read (a curve takes a second)."""

    def __init__(self, name: str, make):
        self.__name__, self._make = name, make

    @functools.cached_property
    def _values(self) -> dict:
        return self._make()

    def __getitem__(self, key):
        return self._values[key]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


def _keys(case, got, want):
    missing = [k for k in SHIFTS if k not in got]
    return None if not missing else f"missing {missing} (got the keys {list(got)})"


def _numbers(case, got, want):
    wrong = [
        f"{k}: {type(got[k]).__name__}"
        for k in SHIFTS
        if not isinstance(got[k], Real) or isinstance(got[k], bool)
    ]
    return None if not wrong else f"expected a number for each shift, got {', '.join(wrong)}"


def _fractions(case, got, want):
    if all(0 <= got[k] <= 1 for k in SHIFTS):
        return None
    return "expected accuracies as fractions between 0 and 1 (not percentages)"


def _unshifted(case, got, want):
    if abs(got[0] - want[0]) <= TOLERANCE:
        return None
    return (
        "yours is not the PyTorch file's accuracy on the unshifted test digits: all 10,000 of them, scaled "
        "to 0..1, each prediction compared with its label"
    )


def _shifted(case, got, want):
    # which shifts are off, never which way nor by how much: a direction would let a guess converge
    wrong = [f"{k} px" for k in SHIFTS if abs(got[k] - want[k]) > TOLERANCE]
    if not wrong:
        return None
    return (
        f"your accuracies at {', '.join(wrong)} are not the PyTorch file's ({len(SHIFTS) - len(wrong)} of "
        f"{len(SHIFTS)} right): move each of the 10,000 test digits k pixels to the right, the gap black, and "
        "compare each prediction with its label"
    )


def _curves_alike(a, b) -> bool:
    if not isinstance(a, Mapping) or not isinstance(b, Mapping) or set(a) != set(b):
        return False
    if not all(isinstance(v, Real) for v in [*a.values(), *b.values()]):
        return {k: type(v) for k, v in a.items()} == {k: type(v) for k, v in b.items()}
    return all(abs(a[k] - b[k]) <= TOLERANCE for k in a)


def _off_at(one: float, five: float):
    """The right curve but at 1 px (``one`` added) and 5 px (times ``five``)."""
    return lambda: {**_truth(), 1: _truth()[1] + one, 5: _truth()[5] * five}


# a window sliding left over digits padded on the left; numpy float32 values
def _windows():
    data, session = load_mnist(), _session(existing_artifact("mnist_mlp_pytorch.onnx"))
    padded = np.pad(data.x_test, ((0, 0), (0, 0), (6, 0)))
    return {
        k: np.float32((classify(session, padded[:, :, 6 - k : 34 - k]) == data.y_test).mean())
        for k in SHIFTS
    }


R2 = {
    "keys": "a dict {k: accuracy} for k = 0, 1, ..., 6",
    "numbers": "a number for each shift",
    "fractions": "accuracies as fractions between 0 and 1",
    "unshifted": "at 0 px, the PyTorch file's accuracy on the 10,000 test digits",
    "shifted": "at 1..6 px, the digits shifted right, black from the left",
}

SHIFT_CURVE = Exercise(
    id="03.2",
    expects="a dict {shift in pixels: accuracy}",
    reference=_truth,
    answer="answer = shift_curve()",
    cases=lambda rng: [Case("the 10,000 test digits shifted 0..6 px")],
    run=lambda answer, case: dict(answer),
    accepts=lambda answer: isinstance(answer, Mapping),
    requirements=[
        Requirement(R2["keys"], _keys),
        Requirement(R2["numbers"], _numbers),
        Requirement(R2["fractions"], _fractions),
        Requirement(R2["unshifted"], _unshifted),
        Requirement(R2["shifted"], _shifted),
    ],
    mistakes=[
        Mistake(
            "shifts 1..7",
            Curve("shifts 1..7", lambda: {k + 1: v for k, v in _truth().items()}),
            "the shifts are k = 0, 1, ..., 6 (0: the digits as they are)",
            R2["keys"],
        ),
        Mistake(
            "6 px left out",
            Curve("6 px left out", lambda: {k: v for k, v in _truth().items() if k < 6}),
            "the shifts are k = 0, 1, ..., 6, 6 included",
            R2["keys"],
        ),
        Mistake(
            "formatted strings",
            Curve("formatted strings", lambda: {k: f"{v:.4f}" for k, v in _truth().items()}),
            "yours are strings: give the numbers themselves (float(...)), not formatted",
            R2["numbers"],
        ),
        Mistake(
            "percentages",
            Curve("percentages", lambda: {k: 100 * v for k, v in _truth().items()}),
            "yours look like percentages: give fractions between 0 and 1",
            R2["fractions"],
        ),
        Mistake(
            "the first 1,000 test digits",
            Curve("first 1000", lambda: _curve(n=1000)),
            "yours are measured on the first 1,000 test digits: use all 10,000",
            R2["unshifted"],
        ),
        Mistake(
            "training digits",
            Curve("training digits", lambda: _curve(train=True)),
            "yours are measured on training digits: use the 10,000 test digits",
            R2["unshifted"],
        ),
        Mistake(
            "the Keras file",
            Curve("Keras", lambda: _curve(file="mnist_mlp_keras.onnx")),
            "yours are the Keras file's accuracies: measure the PyTorch file's",
            R2["unshifted"],
        ),
        Mistake(
            "pixels left in 0..255",
            Curve("unscaled", lambda: _curve(scale=1.0)),
            f"yours are measured on pixels in 0..255; {SCALE_WORDS}",
            R2["unshifted"],
        ),
        Mistake(
            "agreement with the unshifted predictions",
            Curve("agreement", lambda: _curve(agreement=True)),
            "yours compare each prediction with the unshifted digit's: compare it with the digit's label",
            R2["unshifted"],
        ),
        Mistake(
            "error rates",
            Curve("error rates", lambda: {k: 1 - v for k, v in _truth().items()}),
            "yours are error rates (1 - accuracy): give the accuracies",
            R2["unshifted"],
        ),
        Mistake(
            "wrapped around with np.roll",
            Curve("roll", lambda: _curve(move="roll")),
            "yours are the accuracies of digits wrapped around with np.roll: black comes in from the left",
            R2["shifted"],
        ),
        Mistake(
            "shifted down",
            Curve("down", lambda: _curve(move="down")),
            "yours are the accuracies of digits shifted down (axis 1): shift them right, along axis 2 of "
            "[N, 28, 28]",
            R2["shifted"],
        ),
        Mistake(
            "shifted left",
            Curve("left", lambda: _curve(move="left")),
            "yours are the accuracies of digits shifted left: black comes in from the left, the digit moves right",
            R2["shifted"],
        ),
        Mistake(
            "shifted right and down",
            Curve("right and down", lambda: _curve(move="right and down")),
            "yours are the accuracies of digits shifted right and down: shift them right only",
            R2["shifted"],
        ),
        # a slip and a large error; the same words whichever way they go (never which way nor how far)
        Mistake(
            "off at 1 px and 5 px",
            Curve("off up", _off_at(0.002, 0.5)),
            "your accuracies at 1 px, 5 px are not the PyTorch file's (5 of 7 right): move each of the 10,000 "
            "test digits k pixels to the right, the gap black, and compare each prediction with its label",
            R2["shifted"],
            judge_says_it,
        ),
        Mistake(
            "off the other way at 1 px and 5 px",
            Curve("off down", _off_at(-0.002, 0.9)),
            "your accuracies at 1 px, 5 px are not the PyTorch file's (5 of 7 right): move each of the 10,000 "
            "test digits k pixels to the right, the gap black, and compare each prediction with its label",
            R2["shifted"],
            judge_says_it,
        ),
    ],
    alternatives=[
        Curve("rounded to 3 decimals", lambda: {k: round(v, 3) for k, v in _truth().items()}),
        Curve("numpy float32 from a sliding window", _windows),
        Curve(
            "numpy int keys, counts divided",
            lambda: {np.int64(k): int(round(v * 10_000)) / 10_000 for k, v in _truth().items()},
        ),
    ],
    alike=_curves_alike,
    marks=("slow",),
    setup="import numpy as np\nimport onnxruntime as ort\nfrom helpers.data.mnist import load_mnist\n"
    "from helpers.pipeline.artifacts import ensure_artifact",
)


# --- 03.3 Batches of a fixed size -----------------------------------------------------------------------------


def classify_in_batches(session, images_uint8: np.ndarray) -> np.ndarray:
    """Like ``classify``, in runs of exactly the model's batch size when that size is fixed (an int)."""
    size = session.get_inputs()[0].shape[0]
    if not isinstance(size, int):  # a named dynamic dimension such as 'batch': any number at once
        return classify(session, images_uint8)
    labels = []
    for start in range(0, len(images_uint8), size):
        chunk = images_uint8[start : start + size]
        # black images fill the last run
        padding = np.zeros((size - len(chunk), *chunk.shape[1:]), chunk.dtype)
        labels.append(classify(session, np.concatenate([chunk, padding]))[: len(chunk)])
    return np.concatenate(labels)


def batch_plan(rng):
    """The PyTorch file, copies with a batch fixed to a large and a small size (one of them, drawn, takes a
    multiple of its size, a full last batch; the other a short last batch), and a copy whose dynamic batch is
    named unk__N; sizes, names and image counts per seed. The last count, under the large size, is for the
    large copy again: fewer images than one batch (a short first batch that is also the last)."""
    large, small = int(rng.choice([16, 32, 64])), int(rng.integers(3, 10))
    full = int(rng.integers(2))  # which fixed copy gets a multiple of its size
    counts = [int(rng.integers(200, 700))]
    for k, size in enumerate((large, small)):
        batches = int(rng.integers(4, 11)) if size > 10 else int(rng.integers(30, 90))
        counts.append(size * batches + (0 if k == full else int(rng.integers(1, size))))
    counts.append(int(rng.integers(200, 700)))
    counts.append(int(rng.integers(1, large // 2)))
    ins, outs = (
        [str(n) for n in rng.permutation(INPUTS)],
        [str(n) for n in rng.permutation(OUTPUTS)],
    )
    dynamic = f"unk__{rng.integers(100, 1000)}"  # a dynamic batch is a str whatever its name: tf2onnx writes unk__N
    copies = [
        (f"a copy whose batch is fixed to {large} (input {ins[0]!r})", [large, 1, 28, 28]),
        (f"a copy whose batch is fixed to {small} (input {ins[1]!r})", [small, 1, 28, 28]),
        (
            f"a copy whose batch is dynamic and named {dynamic!r} (input {ins[2]!r})",
            [dynamic, 1, 28, 28],
        ),
    ]
    copies = [(text, i, o, "float32", shape) for (text, shape), i, o in zip(copies, ins, outs)]
    return copies, counts


def _batch_cases(rng, copies: list, counts: list[int]) -> list[Case]:
    """``_cases``, then the first fixed copy again on fewer images than its batch (the text's edge: one short
    batch, padded like any short last one)."""
    cases = _cases(rng, copies, counts)
    session, _ = cases[1].args
    few = counts[len(cases)]
    digits = _test_digits()[rng.choice(10_000, few, replace=False)]
    name = f"{copies[0][0]}, {few} images (fewer than one batch)"
    return [*cases, Case(name, (session, digits), Declared.of(session, few))]


FIRST_RUN = (
    "your first run already holds another number of images than the batch size the session declares, an int "
    "in session.get_inputs()[0].shape[0]: run batches of exactly that size"
)
SHORT_LAST = "every batch but the last has the declared size: pad the last one (e.g. with black images) to that size"
LONG_LAST = "your last run holds more images than the declared batch size: a full last batch needs no padding"


def _few(case, feed) -> bool:
    """A run of all the case's images, fewer than one batch: a short batch left unpadded, not a size misread."""
    return feed.shape[0] == case.data.count < case.data.batch


def _first_run(case, got, want):
    size = case.data.batch
    if size is None or not got.feeds or got.feeds[0].shape[0] == size or _few(case, got.feeds[0]):
        return None
    return FIRST_RUN


def _every_run(case, got, want):
    """Every run of exactly the declared size; the hint chosen by which run is not (a short last one: pad it)."""
    size, done = case.data.batch, 0
    for k, feed in enumerate(got.feeds if size is not None else ()):
        done += feed.shape[0]
        if feed.shape[0] == size:
            continue
        if k == 0 and _few(case, feed):
            return (
                f"your one run holds all {case.data.count} images, fewer than the declared batch size: a "
                "short first batch is also the last one, pad it to that size"
            )
        if k == 0:
            return FIRST_RUN
        if done < case.data.count:
            return f"run {k + 1} holds another number of images than the declared batch size"
        return SHORT_LAST if feed.shape[0] < size else LONG_LAST
    return None


def _padded(images, size):
    """``images`` padded with black images to a multiple of ``size``, in batches of ``size``."""
    padded = np.concatenate([images, np.zeros((-len(images) % size, 28, 28), np.uint8)])
    return np.split(padded, len(padded) // size)


def _size(session, images):
    """The input's batch size, or all the images where it is dynamic (a str)."""
    size = session.get_inputs()[0].shape[0]
    return size if isinstance(size, int) else len(images)


def _batched(name: str, size_of=_size, run=None):
    """An answer running ``run`` (default: ``classify``) on the images padded to batches of
    ``size_of(session, images)``, the labels joined and cut to the images."""

    def answer(session, images):
        parts = _padded(images, size_of(session, images))
        return np.concatenate([(run or classify)(session, b) for b in parts])[: len(images)]

    answer.__name__ = name
    return answer


def _named_batch(session, images):  # only a batch named 'batch' taken as dynamic
    size = session.get_inputs()[0].shape[0]
    return len(images) if size == "batch" else size


def padded_all_at_once(session, images):  # pads to a multiple of the size, then one run
    return classify(session, np.concatenate(_padded(images, _size(session, images))))[: len(images)]


def no_padding(session, images):
    size = _size(session, images)
    return np.concatenate(
        [classify(session, images[s : s + size]) for s in range(0, len(images), size)]
    )


# size - len % size: a whole batch more when the last is full
def pads_a_full_last_batch(session, images):
    size = session.get_inputs()[0].shape[0]
    if not isinstance(size, int):
        return classify(session, images)
    labels = []
    for start in range(0, len(images), size):
        chunk = images[start : start + size]
        if start + size >= len(images):  # the last batch
            chunk = np.concatenate([chunk, np.zeros((size - len(chunk) % size, 28, 28), np.uint8)])
        labels.append(classify(session, chunk)[: len(images) - start])
    return np.concatenate(labels)


def keeps_padding_labels(session, images):
    return np.concatenate([classify(session, b) for b in _padded(images, _size(session, images))])


def drops_last_batch(session, images):
    size = _size(session, images)
    return np.concatenate(
        [classify(session, b) for b in _padded(images, size)[: len(images) // size]]
    )


def labels_per_batch(session, images):  # each batch's labels, left in a list
    return [classify(session, b) for b in _padded(images, _size(session, images))]


def last_batch_only(session, images):  # the result overwritten in the loop
    for batch in _padded(images, _size(session, images)):
        labels = classify(session, batch)
    return labels


def reversed_batches(session, images):
    runs = [classify(session, batch) for batch in _padded(images, _size(session, images))]
    return np.concatenate(runs[::-1])[: len(images)]


def pad_with_last_image(session, images):
    size = session.get_inputs()[0].shape[0]
    if isinstance(size, str):
        return classify(session, images)
    missing = -len(images) % size
    padded = np.concatenate([images, np.repeat(images[-1:], missing, axis=0)])
    return np.concatenate(
        [classify(session, part) for part in np.split(padded, len(padded) // size)]
    )[: len(images)]


# one reusable zero buffer of the model's batch size
def fill_a_fixed_buffer(session, images):
    spec = session.get_inputs()[0]
    size = spec.shape[0] if isinstance(spec.shape[0], int) else len(images)
    buffer, labels = np.zeros((size, 1, 28, 28), np.float32), []
    for start in range(0, len(images), size):
        chunk = images[start : start + size]
        buffer[:] = 0
        buffer[: len(chunk), 0] = chunk / 255
        labels += list(session.run(None, {spec.name: buffer})[0].argmax(1)[: len(chunk)])
    return np.array(labels)


# batches of 32 where the batch is dynamic too
fixed_size_for_dynamic_too = _batched(
    "fixed_size_for_dynamic_too", lambda session, images: _size(session, images[:32])
)


R3 = {
    "ran": "the session passed in, run",
    "like classify": "names, element type and layout read from the session, like classify",
    "scaled": "pixels scaled to 0..1, like classify",
    "size": "the batch size read from the session (an int: fixed; a str: dynamic)",
    "exact": "runs of exactly that size, the last batch padded",
    "labels": "one integer label per image",
    "own": "each model's own labels",
}

BATCHES = Exercise(
    id="03.3",
    expects="your function classify_in_batches(session, images_uint8)",
    reference=classify_in_batches,
    cases=lambda rng: _batch_cases(rng, *batch_plan(rng)),
    run=run_watched,
    requirements=[
        Requirement(R3["ran"], _ran),
        Requirement(R3["like classify"], _names_type_layout),
        Requirement(R3["scaled"], _scaled),
        Requirement(R3["size"], _first_run),
        Requirement(R3["exact"], _every_run),
        Requirement(R3["labels"], _one_label_each),
        Requirement(R3["own"], _own_labels),
    ],
    mistakes=[
        Mistake(
            "notebook 01's file instead of the session",
            notebook_01_file,
            "these are the labels of notebook 01's file, and each copy has weights of its own: classify with "
            "the session passed in",
            R3["ran"],
        ),
        Mistake(
            "the contract's input name in batches",
            _batched("names hard-coded", run=hard_coded_contract),
            "a copy's input is not 'image': read the input name from session.get_inputs()[0].name, as your "
            "classify does",
            R3["like classify"],
        ),
        Mistake(
            "classify without its scaling, in batches",
            _batched("unscaled", run=unscaled),
            SCALE_WORDS,
            R3["scaled"],
        ),
        Mistake(
            "classify unbatched",
            classify,
            "classify runs all the images at once: a copy with a fixed batch takes exactly its size per run",
            R3["size"],
        ),
        Mistake(
            "batches of 32 whatever the session declares",
            _batched("chunks of 32", lambda session, images: 32),
            "yours runs batches of 32 whatever the session declares: read the size from "
            "session.get_inputs()[0].shape[0]",
            R3["size"],
        ),
        Mistake(
            "int() of a dynamic batch",
            _batched("int()", lambda session, images: int(session.get_inputs()[0].shape[0])),
            "a dynamic batch is a str, its name (e.g. 'batch'): int() of it fails; run all the images at once",
            R3["size"],
        ),
        Mistake(
            "a dynamic batch known by its name",
            _batched("by its name", _named_batch),
            "a dynamic batch is a str whatever its name ('batch', 'N', 'unk__12'): test isinstance(size, int)",
            R3["size"],
        ),
        Mistake(
            "shape[1] read as the batch size",
            _batched("shape[1]", lambda session, images: session.get_inputs()[0].shape[1]),
            FIRST_RUN,
            R3["size"],
            judge_says_it,
        ),
        Mistake(
            "everything padded, then one run",
            padded_all_at_once,
            "yours pads, then runs all the images at once: run batches of exactly the declared size",
            R3["size"],
        ),
        Mistake("the last batch not padded", no_padding, SHORT_LAST, R3["exact"], judge_says_it),
        Mistake(
            "a full last batch padded too",
            pads_a_full_last_batch,
            "your last batch, already full, gets a whole batch of padding: pad only a short last batch",
            R3["exact"],
        ),
        Mistake(
            "the padding's labels kept",
            keeps_padding_labels,
            "the labels of the padding are left in: keep one label per image you were given",
            R3["labels"],
        ),
        Mistake(
            "the last batch dropped",
            drops_last_batch,
            "the images of the last, short batch got no label: pad it and run it too",
            R3["labels"],
        ),
        Mistake(
            "each batch's labels left in a list",
            labels_per_batch,
            "one array of labels, all batches joined (np.concatenate), not a list of them",
            R3["labels"],
        ),
        Mistake(
            "only the last batch's labels kept",
            last_batch_only,
            "yours keeps the last batch's labels only: collect each batch's and join them",
            R3["labels"],
        ),
        Mistake(
            "batches joined in reverse",
            reversed_batches,
            "your labels are in another order than the images: join the batches' labels in their order",
            R3["own"],
        ),
    ],
    alternatives=[pad_with_last_image, fill_a_fixed_buffer, fixed_size_for_dynamic_too],
    alike=_alike(sizes=True),
    secrets=_label_secrets,
    explain=lambda raised, case: (
        f"this session's batch is fixed: shape[0] is the int {case.data.batch}"
        if case.data.batch
        else f"this session's batch is dynamic: shape[0] is the str {case.data.shape[0]!r}"
    ),
    praise=lambda cases: [
        "each copy's own labels, every image labelled once: "
        + ", ".join(c.name for c in cases if isinstance(c.data.shape[0], int)),
        "a dynamic batch (a str, whatever its name) in any number of runs",
    ],
    marks=("slow",),
    setup="import numpy as np",
)

EXERCISES = [CLASSIFY, SHIFT_CURVE, BATCHES]


# python -m helpers.grading.checks.ex03 SOURCE.onnx FOLDER COPIES: see _built
if __name__ == "__main__":
    build_copies(Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3]))
