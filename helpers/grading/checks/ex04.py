"""Notebook 04's exercises: ink on paper of any colour (04.1), and a Node script's own top 3 (04.2).

04.1's answers are functions, run on drawings of other sizes and colours, some in thin strokes on a large page;
04.2's are the paths of Node scripts, run on fresh digits with notebook 01's model and with a renamed copy whose
weights differ. The expected top 3 are the models' own (ONNX Runtime, in Python).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from helpers.data.mnist import load_mnist
from helpers.data.paths import REPO_ROOT
from helpers.grading.checks._common import (
    Wrong,
    known_folder,
    reference_logits,
    session,
    test_images,
    write_varied_copy,
)
from helpers.grading.examiner import Case, Exercise, Mistake, Requirement, judge_says_it, numbers_in
from helpers.pipeline.artifacts import existing_artifact
from helpers.preprocess import INK_THRESHOLD, softmax

# read once per process: each check draws from it three times, the 400-seed test 1200 times
_mnist = functools.cache(load_mnist)

GREY = np.array([0.299, 0.587, 0.114])  # ITU-R 601 luma: the brightness of an RGB colour

# --- 04.1 Ink on any paper -----------------------------------------------------------------------------------


def ink(rgb: np.ndarray) -> np.ndarray:
    """Ink 0..1 of a drawing in one ink colour on paper of any other colour: how far each pixel's colour is from
    the paper's (the median of the border), relative to the full strokes' distance (the 25th farthest pixel: a
    count, not a share of the page, so a small digit on a large page still sets it)."""
    pixels = rgb.astype(np.float64)
    border = np.concatenate([pixels[0], pixels[-1], pixels[:, 0], pixels[:, -1]])
    distance = np.linalg.norm(pixels - np.median(border, axis=0), axis=-1)
    full_stroke = np.partition(distance.ravel(), -25)[-25]
    return np.clip(distance / max(full_stroke, 1e-6), 0, 1)


def _paint(draw, digit, paper, ink, size, scale):
    """(RGB drawing uint8, true ink 0..1): ``digit`` scaled by ``scale`` at a random place, noise on top."""
    height, width = size
    rows, columns = digit.shape[0] * scale, digit.shape[1] * scale
    truth = np.zeros((height, width))
    top = draw.integers(0, height - rows + 1)
    left = draw.integers(0, width - columns + 1)
    truth[top : top + rows, left : left + columns] = np.kron(digit / 255, np.ones((scale,) * 2))
    rgb = (
        paper * (1 - truth[..., None])
        + ink * truth[..., None]
        + draw.normal(0, 3, (height, width, 3))
    )
    return np.clip(np.round(rgb), 0, 255).astype(np.uint8), truth


def _described(paper, ink, size) -> str:
    shade = "light ink on dark paper" if ink @ GREY > paper @ GREY else "dark ink on light paper"
    return (
        f"a {size[1]}x{size[0]} drawing, {shade}, RGB ink {ink.tolist()} on paper {paper.tolist()}"
    )


def _unfit(k: int, paper, ink, size) -> bool:
    """Fresh case ``k`` must have two colours far enough apart and any size but the handed-out one; the
    first is dark ink on light paper and the second light on dark, clearly, then anything goes."""
    darker_by = (paper - ink) @ GREY
    wanted = {0: darker_by > 100, 1: darker_by < -100}.get(k, True)
    return np.abs(paper - ink).sum() < 240 or tuple(size) == (196, 196) or not wanted


def coloured_drawings(n: int = 40, seed: int = 404, any_colour: bool = False):
    """(RGB drawings, true ink 0..1, labels, descriptions): test digits, blue on yellowish paper, 196 px square."""
    data, draw = _mnist(), np.random.default_rng(seed)
    picked = draw.choice(len(data.x_test), n, replace=False)
    drawings, truths, described = [], [], []
    for k, index in enumerate(picked):
        paper, ink, size = np.array([235, 215, 140]), np.array([30, 60, 160]), (196, 196)
        while any_colour and _unfit(k, paper, ink, size):
            paper, ink, size = (
                draw.integers(0, 256, 3),
                draw.integers(0, 256, 3),
                draw.integers(100, 300, 2),
            )
        rgb, truth = _paint(draw, data.x_test[index], paper, ink, size, min(size) // 28 - 1)
        drawings.append(rgb)
        truths.append(truth)
        described.append(_described(paper, ink, size))
    return drawings, truths, data.y_test[picked], described


def thin_drawings(n: int, seed: int):
    """(RGB drawings, true ink, descriptions): digits at their own 28 px, strokes a few pixels wide, on pages so
    large that ink covers 0.04 % to 1.5 % of them (the first under 0.1 %): a share of the page no longer
    holds a full stroke."""
    data, draw = _mnist(), np.random.default_rng(seed)
    drawings, truths, described = [], [], []
    # digits with 40 full-stroke pixels at least, so that a full stroke is there to find
    whole = np.flatnonzero((data.x_test >= 230).sum(axis=(1, 2)) >= 40)
    for k, index in enumerate(draw.choice(whole, n, replace=False)):
        digit = data.x_test[index]
        share = draw.uniform(0.0004, 0.0009) if k == 0 else draw.uniform(0.001, 0.014)
        side = np.sqrt((digit > 0).sum() / share)
        stretch = draw.uniform(0.7, 1.4)
        size = tuple(
            np.clip(np.round(side * np.array([stretch, 1 / stretch])), 60, 900).astype(int)
        )
        paper, ink = draw.integers(0, 256, 3), draw.integers(0, 256, 3)
        while np.abs(paper - ink).sum() < 240:
            paper, ink = draw.integers(0, 256, 3), draw.integers(0, 256, 3)
        rgb, truth = _paint(draw, digit, paper, ink, size, 1)
        drawings.append(rgb)
        truths.append(truth)
        covered = (truth > 0).mean()
        described.append(
            f"{_described(paper, ink, size)}, thin strokes on {covered:.2%} of the page"
        )
    return drawings, truths, described


def _blurred(image, width):
    """``image`` through a box filter ``width`` pixels wide along each axis (a soft edge, no new peak)."""
    for axis in (0, 1):
        edges = [(0, 0), (0, 0)]
        edges[axis] = (width // 2, width - 1 - width // 2)
        windows = np.lib.stride_tricks.sliding_window_view(np.pad(image, edges), width, axis=axis)
        image = windows.mean(axis=-1)
    return np.clip(image, 0, 1)


def soft_drawing(seed: int):
    """(RGB drawing, true ink, description): a digit in soft strokes, its edges blurred over several pixels, so
    that a large share of its ink is faint (painted under half a full stroke): the text's "faint pixels at a
    stroke's edges" at their widest. The digit keeps full strokes (10 of its pixels' worth at least)."""
    data, draw = _mnist(), np.random.default_rng(seed)
    scale = int(draw.integers(4, 8))
    soft = np.zeros((1, 1))
    while (soft >= 0.95).sum() < 10 * scale**2:
        digit = data.x_test[draw.integers(len(data.x_test))]
        soft = _blurred(np.kron(digit / 255, np.ones((scale, scale))), scale)
    size = tuple(int(28 * scale + extra) for extra in draw.integers(20, 80, 2))
    paper, ink = draw.integers(0, 256, 3), draw.integers(0, 256, 3)
    while np.abs(paper - ink).sum() < 240:
        paper, ink = draw.integers(0, 256, 3), draw.integers(0, 256, 3)
    rgb, truth = _paint(draw, soft * 255, paper, ink, size, 1)
    return rgb, truth, f"{_described(paper, ink, size)}, soft strokes (wide faint edges)"


def drawing_cases(rng):
    """20 drawings of other sizes and colours (dark ink on light paper first, then light on dark), 3 in thin
    strokes covering under 1.5 % of a large page, and one in soft strokes: new with each seed."""
    drawings, truths, _, described = coloured_drawings(
        20, int(rng.integers(2**31)), any_colour=True
    )
    thin, thin_truths, thin_described = thin_drawings(3, int(rng.integers(2**31)))
    soft, soft_truth, soft_described = soft_drawing(int(rng.integers(2**31)))
    return [
        Case(what, (rgb,), truth)
        for rgb, truth, what in zip(
            drawings + thin + [soft],
            truths + thin_truths + [soft_truth],
            described + thin_described + [soft_described],
        )
    ]


def _run_ink(answer, case):
    """The answer's ink on a copy of the drawing (an answer that writes into it spoils no other's), as floats."""
    result = answer(case.args[0].copy())
    try:
        return np.asarray(result, dtype=np.float64)
    except (TypeError, ValueError):
        return result  # judged as what it is


def _per_pixel(case, got, want):
    shape = case.args[0].shape[:2]
    found = getattr(got, "shape", None)
    if found == shape:
        return None
    return f"expected one ink value per pixel, shape [H, W] = {list(shape)}; got " + (
        f"shape {list(found)}" if found is not None else type(got).__name__
    )


def _in_range(case, got, want):
    if np.isfinite(got).all() and got.min() >= 0 and got.max() <= 1:
        return None
    return f"expected finite values in 0..1, got values from {got.min():g} to {got.max():g}"


def _strokes_inked(case, got, want):
    paper, strokes = np.median(got[case.data == 0]), np.median(got[case.data >= 0.9])
    return (
        None
        if paper <= strokes
        else "more ink on the paper than on the strokes (the median of each)"
    )


def _bare_paper(case, got, want):
    paper_ink = got[case.data == 0]
    share = (paper_ink >= INK_THRESHOLD).mean()
    if share <= 0.01:
        return None
    level = np.median(paper_ink)
    why = (
        "the paper itself reads as ink: measure from this drawing's own paper colour"
        if level >= INK_THRESHOLD
        else "its noise (a few levels per channel) is scaled up past the threshold"
    )
    return (
        f"{share:.0%} of the bare paper reaches the ink threshold {INK_THRESHOLD} (its median: "
        f"{level:.2f}), so the bounding box is the whole page; {why}"
    )


def _full_strokes(case, got, want):
    strokes = np.median(got[case.data >= 0.9])
    if strokes >= 0.8:
        return None
    return f"the strokes' median ink is {strokes:.2f}; a full stroke should be about 1"


def _distance_to_border(rgb):
    pixels = rgb.astype(float)
    border = np.concatenate([pixels[0], pixels[-1], pixels[:, 0], pixels[:, -1]])
    return np.linalg.norm(pixels - np.median(border, axis=0), axis=-1)


def _found(case, got, want):
    # where ink is painted: on a page in thin strokes, a mean over the whole page would hide the strokes
    found = np.minimum(got, case.data)
    # the faint pixels at the strokes' edges, painted under half a full stroke: the text names them
    faint = (case.data > 0.05) & (case.data < 0.5)
    found_faint = found[faint].sum() / case.data[faint].sum()
    if found_faint < 0.5:
        return (
            f"yours finds {found_faint:.0%} of the faint ink at the strokes' edges (pixels painted under half "
            "a full stroke) on this drawing"
        )
    share = found.sum() / case.data.sum()
    if share >= 0.65:
        return None
    return f"yours finds {share:.0%} of the ink painted on this drawing"


# the page's formula: darkness against white paper
def _against_white(rgb):
    return 1 - (rgb.astype(float) @ GREY) / 255


# the right idea, for the paper the exercise handed out only
def _handed_out_paper(rgb):
    return np.clip(np.linalg.norm(rgb.astype(float) - [235, 215, 140], axis=-1) / 200, 0, 1)


# the distance to the paper over a fixed 60 levels: the paper's noise passes 0.1
def _fixed_scale(rgb):
    return np.clip(_distance_to_border(rgb) / 60, 0, 1)


# full strokes as a share of the page (the 99.5th percentile): on a page in thin strokes, the share holds paper
def _percentile_scale(rgb):
    distance = _distance_to_border(rgb)
    return np.clip(distance / max(np.percentile(distance, 99.5), 1e-6), 0, 1)


# the paper is most of the page: its median; per pixel the channel that changes most, over its 99.8th percentile
def _channel_percentile(rgb):
    pixels = rgb.astype(float)
    change = np.abs(pixels - np.median(pixels.reshape(-1, 3), axis=0)).max(axis=-1)
    return np.minimum(change / np.percentile(change, 99.8), 1.0)


# relative to the paper's grey, but only where the pixel is darker than the paper
def _darker_only(rgb):
    grey = rgb.astype(float) @ GREY
    paper = np.median(np.concatenate([grey[0], grey[-1], grey[:, 0], grey[:, -1]]))
    return ink(rgb) * (grey <= paper + 8)


# distance to the paper over the largest possible distance, not this drawing's
def _absolute_distance(rgb):
    return _distance_to_border(rgb) / np.sqrt(3 * 255**2)


# one channel: blind where ink and paper share their red
def _red_only(rgb):
    red = rgb[..., 0].astype(float)
    change = np.abs(red - np.median(np.concatenate([red[0], red[-1], red[:, 0], red[:, -1]])))
    return np.clip(change / max(change.max(), 1e-6), 0, 1)


# |grey - paper's grey|: blind where ink and paper are about as bright
def _grey_difference(rgb):
    grey = rgb.astype(float) @ GREY
    change = np.abs(grey - np.median(np.concatenate([grey[0], grey[-1], grey[:, 0], grey[:, -1]])))
    return np.clip(change / max(np.percentile(change, 99.5), 1e-6), 0, 1)


# the page's mean colour as paper (the strokes pull it)
def _mean_colour_paper(rgb):
    pixels = rgb.astype(float)
    distance = np.linalg.norm(pixels - pixels.reshape(-1, 3).mean(0), axis=-1)
    return np.clip(distance / np.percentile(distance, 99.5), 0, 1)


# the centre pixel as paper: it is often a stroke
def _centre_as_paper(rgb):
    pixels = rgb.astype(float)
    distance = np.linalg.norm(pixels - pixels[len(pixels) // 2, pixels.shape[1] // 2], axis=-1)
    return np.clip(distance / max(distance.max(), 1e-6), 0, 1)


# paper from the corners, the ink colour from the farthest pixel, each pixel's position along that line
def ink_by_projection(rgb):
    pixels = rgb.astype(float)
    corners = [pixels[:5, :5], pixels[:5, -5:], pixels[-5:, :5], pixels[-5:, -5:]]
    paper = np.concatenate(corners).reshape(-1, 3).mean(0)
    away = pixels - paper
    ink_colour = away.reshape(-1, 3)[np.argmax(np.linalg.norm(away, axis=-1))]
    return np.clip(away @ ink_colour / (ink_colour @ ink_colour), 0, 1)


# ink or no ink: 0 on paper, 1 on strokes and their faint edges, nothing between (what the text asks, too)
def ink_binarized(rgb):
    return (ink(rgb) > 0.15).astype(float)


INK = Exercise(
    id="04.1",
    expects="your function ink(rgb) -> float array [H, W] in 0..1",
    reference=ink,
    cases=drawing_cases,
    run=_run_ink,
    requirements=[
        Requirement("one ink value per pixel, [H, W]", _per_pixel),
        Requirement("values in 0..1", _in_range),
        Requirement("ink, not paper, is 1", _strokes_inked),
        Requirement("0 on bare paper of any colour", _bare_paper),
        Requirement("about 1 on a full stroke", _full_strokes),
        Requirement("the ink painted there, faint edges too", _found),
    ],
    mistakes=[
        Mistake(
            "an extra axis",
            lambda rgb: ink(rgb)[:, :, None],
            "yours is [H, W, 1]: one value per pixel, no channel axis",
            "one ink value per pixel, [H, W]",
        ),
        Mistake(
            "[W, H]",
            lambda rgb: ink(rgb).T,
            "yours is [W, H], transposed: keep the drawing's rows first",
            "one ink value per pixel, [H, W]",
        ),
        Mistake(
            "the handed-out size only",
            lambda rgb: ink(rgb.reshape(196, 196, 3)),
            "yours assumes 196 x 196 drawings: take H and W from rgb.shape",
            "one ink value per pixel, [H, W]",
        ),
        Mistake(
            "0..255",
            lambda rgb: (255 * ink(rgb)).astype(np.uint8),
            "yours is in 0..255 like the pixels; ink is a fraction, a float in 0..1",
            "values in 0..1",
        ),
        Mistake(
            "the grey as ink",
            lambda rgb: (rgb.astype(float) @ GREY) / 255,
            "yours is the brightness: ink is where the colour differs from the paper's",
            "ink, not paper, is 1",
        ),
        Mistake(
            "against white paper",
            _against_white,
            "yours is the page's formula, darkness against white paper: this paper is not white, "
            "measure from its own colour",
            "ink, not paper, is 1",
        ),
        Mistake(
            "the handed-out paper colour",
            _handed_out_paper,
            "yours measures from the handed-out yellowish paper: measure from this drawing's own "
            "paper colour",
            "ink, not paper, is 1",
        ),
        Mistake(
            "a fixed scale",
            _fixed_scale,
            "yours divides the distance to the paper by a fixed number of levels: on drawings of little "
            "contrast the paper's noise (a few levels) reaches 0.1; scale by this drawing's full strokes",
            "0 on bare paper of any colour",
        ),
        Mistake(
            "full strokes as a percentile",
            _percentile_scale,
            "yours takes the full strokes' distance from a percentile, a share of the page: where thin "
            "strokes cover less of the page than that share, the percentile is paper and its noise "
            "becomes ink; take it from a count of the farthest pixels",
            "0 on bare paper of any colour",
        ),
        Mistake(
            "full strokes as a percentile, channel by channel",
            _channel_percentile,
            "yours scales by a percentile of the changes, a share of the page: where thin strokes cover "
            "less of the page than that share, the percentile is paper and its noise becomes ink; take "
            "the full strokes from a count of the farthest pixels",
            "0 on bare paper of any colour",
        ),
        Mistake(
            "the centre pixel as paper",
            _centre_as_paper,
            "yours takes the centre pixel's colour as the paper's: it is often a stroke; take the "
            "paper's colour from the border",
            "ink, not paper, is 1",
        ),
        Mistake(
            "the red channel only",
            _red_only,
            "yours reads the red channel only: where ink and paper have about the same red, its noise "
            "is scaled up to ink; measure the distance over all three channels",
            "0 on bare paper of any colour",
        ),
        Mistake(
            "greys only",
            _grey_difference,
            "yours compares greys only: where ink and paper are about as bright, the noise is scaled "
            "up to ink; measure the distance between colours, all three channels",
            "0 on bare paper of any colour",
        ),
        Mistake(
            "the mean colour as paper",
            _mean_colour_paper,
            "yours takes the page's mean colour as the paper's: the strokes pull it away from the "
            "paper; take the median of the border",
            "0 on bare paper of any colour",
        ),
        Mistake(
            "faint",
            lambda rgb: 0.6 * ink(rgb),
            "yours is 0 on paper but well under 1 on full strokes: scale so that they reach 1",
            "about 1 on a full stroke",
        ),
        Mistake(
            "the largest possible distance",
            _absolute_distance,
            "yours divides by the largest distance any two colours can have: scale by this drawing's "
            "full strokes",
            "about 1 on a full stroke",
        ),
        Mistake(
            "dark ink only",
            _darker_only,
            "yours finds ink only where it is darker than the paper: chalk on a blackboard is lighter",
            "ink, not paper, is 1",
        ),
        Mistake(
            "only the full strokes",
            lambda rgb: (ink(rgb) >= 0.9).astype(float),
            "yours keeps the full strokes only: the faint pixels at a stroke's edges, most of a thin "
            "stroke, are ink too",
            "the ink painted there, faint edges too",
        ),
    ],
    alternatives=[ink_by_projection, ink_binarized],
    setup="import numpy as np",
    marks=("slow",),
)


# --- 04.2 Your own top 3, in JavaScript ----------------------------------------------------------------------


def write_top3(path="top3.mjs"):
    """A Node script next to classify_digits.mjs: ``node top3.mjs MODEL.onnx PIXELS.f32`` prints each image's three
    most probable digits and their probabilities (the softmax of that image's logits), as JSON."""
    script = Path(path)
    script.write_text(
        """\
import { readFileSync } from "node:fs";
import * as ort from "onnxruntime-web";

const [modelPath, pixelsPath] = process.argv.slice(2);
const bytes = readFileSync(pixelsPath);
const data = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
const n = data.length / (28 * 28);

const session = await ort.InferenceSession.create(modelPath);
const results = await session.run({ [session.inputNames[0]]: new ort.Tensor("float32", data, [n, 1, 28, 28]) });
const logits = results[session.outputNames[0]].data;
const top3 = [];
for (let i = 0; i < n; i++) {
  const row = Array.from(logits.subarray(i * 10, (i + 1) * 10));
  const exps = row.map((v) => Math.exp(v - Math.max(...row)));  // softmax of this image's logits
  const total = exps.reduce((a, b) => a + b, 0);
  const digits = [...row.keys()].sort((a, b) => row[b] - row[a]).slice(0, 3);
  top3.push({ digits, probabilities: digits.map((d) => exps[d] / total) });
}
console.log(JSON.stringify(top3));
"""
    )
    return script


def _folder() -> Path:
    return known_folder("ex04")


def _in_its_folder(reference):
    """The reference, writing its script once per process into a folder of its own, not the working directory
    (the examiner evaluates its answer line on every row of the generic test). Its name and source stay the
    reference's (the teacher's notebook prints them)."""

    @functools.wraps(reference)
    def written():
        return reference(_folder() / "top3.mjs")

    return written


@functools.cache
def reference_script() -> str:
    return Path(_in_its_folder(write_top3)()).read_text()


class Script(os.PathLike):
    """A known script: the reference's text changed by ``edit``, written the first time its path is read."""

    def __init__(self, name: str, edit):
        self.__name__, self._edit = name, edit

    @functools.cached_property
    def _path(self) -> Path:
        path = _folder() / (re.sub(r"\W+", "_", self.__name__) + ".mjs")
        path.write_text(self._edit(reference_script()))
        return path

    def __fspath__(self) -> str:
        return str(self._path)

    def __repr__(self) -> str:
        return f"Script({self.__name__!r})"


def _replacing(*pairs):
    """An edit of the reference's text: each (old, new) replaced, every old one present."""

    def edit(text):
        for old, new in pairs:
            assert old in text, old
            text = text.replace(old, new)
        return text

    return edit


def _is_path(answer) -> bool:
    return isinstance(answer, os.PathLike) or (isinstance(answer, str) and "\n" not in answer)


# tensor names a renamed copy may have
NAMES = (
    ("pixel_batch", "class_scores"),
    ("pixels_in", "logits_out"),
    ("digits", "scores"),
    ("input_1", "dense_2"),
)


@functools.lru_cache(maxsize=4)
def _varied_copy(seed: int, name_in: str, name_out: str) -> Path:
    """The renamed copy of notebook 01's model a seed draws, built once per process (another Python process,
    seconds): the generic test checks many answers on the same seeds."""
    original = existing_artifact("mnist_mlp_pytorch.onnx")
    target = _folder() / f"copy-{seed}-{name_in}.onnx"
    return write_varied_copy(original, target, seed, name_in, name_out, 0.8)


def model_cases(rng):
    """Notebook 01's model, then a copy with other tensor names and other weights (moved without training, so
    only the model given counts), each on a batch of fresh test digits of a size new with each seed."""
    images = test_images(10_000)[0]
    picked = images[rng.choice(len(images), 60, replace=False)]
    original = existing_artifact("mnist_mlp_pytorch.onnx")
    name_in, name_out = NAMES[rng.integers(len(NAMES))]
    copy = _varied_copy(int(rng.integers(2**31)), name_in, name_out)
    first, second = int(rng.integers(8, 25)), int(rng.integers(15, 30))
    cases = []
    for which, model, batch, name in (
        ("notebook 01's model", original, picked[:first], "image"),
        (
            "a copy with other tensor names and other weights",
            copy,
            picked[first : first + second],
            name_in,
        ),
    ):
        logits = session(model).run(None, {name: batch})[0].astype(np.float64)
        mine = reference_logits("mnist_mlp_pytorch.onnx", batch).astype(np.float64)
        cases.append(
            Case(
                f"{which}, {len(batch)} digits",
                (model, batch),
                {"logits": logits, "notebook 01": mine},
            )
        )
    return cases


def run_script(answer, case: Case) -> dict:
    """``node SCRIPT MODEL PIXELS`` in a scratch folder under the repository (where Node finds onnxruntime-web):
    its exit code, the error Node reports, and its standard output. No file at the path, or no Node, stays a
    ``Wrong``: there is nothing to run, only the path or the set-up to fix."""
    script = Path(answer)
    if not script.is_file():
        raise Wrong(f"expected the path of your script, found no file at {str(answer)[:120]!r}")
    if shutil.which("node") is None:
        raise Wrong("node is not on PATH: install Node.js 18 or newer (make setup does)")
    model, images = case.args
    return _node_run(script.name, script.read_text(), str(model), images.tobytes())


@functools.lru_cache(maxsize=16)
def _node_run(name: str, text: str, model: str, pixels: bytes) -> dict:
    """One run of a script's text (the same text on the same files gives the same outcome: the generic test's
    rows run the reference on the same cases again and again)."""
    with tempfile.TemporaryDirectory(prefix=".check-04.2-", dir=REPO_ROOT) as scratch:
        (Path(scratch) / "given_model.onnx").write_bytes(Path(model).read_bytes())
        (Path(scratch) / name).write_text(text)
        (Path(scratch) / "given_digits.f32").write_bytes(pixels)
        run = subprocess.run(
            ["node", name, "given_model.onnx", "given_digits.f32"],
            cwd=scratch,
            capture_output=True,
            text=True,
            timeout=300,
        )
    error = _node_error(run.stderr, name) if run.returncode else ""
    return {"exit": run.returncode, "error": error, "stdout": run.stdout}


def _node_error(stderr: str, script_name: str) -> str:
    """The error Node reports, and the line of the learner's script it came through.

    Node prints the source line that threw (in a library, a whole minified bundle), a caret, then the error
    ("TypeError: ...") and its stack; the error line is the one that starts with the error's name.
    """
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    error = next(
        (
            line
            for line in lines
            if re.match(r"\[?[A-Za-z_.]*(Error|Exception|Rejection)(:|\]|$)", line)
        ),
        next(
            (line for line in reversed(lines) if not line.startswith(("at ", "Node.js", "(Use"))),
            "(nothing on standard error)",
        ),
    )
    where = next((line for line in lines if line.startswith("at ") and script_name in line), "")
    place = re.search(re.escape(script_name) + r":\d+(:\d+)?", where)
    return error[:300] + (f" (through {place.group(0)})" if place else "")


def _printed(got):
    """The script's JSON, or None (the requirements before say why)."""
    try:
        return json.loads(got["stdout"])
    except ValueError:
        return None


def _entries(got) -> tuple:
    """(digits, probabilities) as arrays, from entries the requirements before have shaped."""
    entries = _printed(got)
    return np.array([e["digits"] for e in entries]), np.array([e["probabilities"] for e in entries])


def _top3(logits):
    return np.argsort(-logits, axis=1, kind="stable")[:, :3]


def _runs(case, got, want):
    if got["exit"] == 0:
        return None
    return f"node exited with {got['exit']}: {got['error']}"


def _json(case, got, want):
    try:
        json.loads(got["stdout"])
    except ValueError as err:
        return f"expected JSON on standard output; {err}"
    return None


def _one_per_image(case, got, want):
    entries, n = _printed(got), len(case.args[1])
    if isinstance(entries, list) and len(entries) == n:
        return None
    found = f"a list of {len(entries)}" if isinstance(entries, list) else type(entries).__name__
    return f"expected a JSON list with one entry per image ({n}), got {found}"


def _keys(case, got, want):
    first = _printed(got)[0]
    if all(isinstance(e, dict) and {"digits", "probabilities"} <= set(e) for e in _printed(got)):
        return None
    found = (
        f"has the keys {sorted(first)}"
        if isinstance(first, dict)
        else f"is a {type(first).__name__}"
    )
    return f'expected entries {{"digits": [...], "probabilities": [...]}}; the first {found}'


def _three_each(case, got, want):
    for k, entry in enumerate(_printed(got)):
        counts = [
            len(x) if isinstance(x, list) else f"a {type(x).__name__}"
            for x in (entry["digits"], entry["probabilities"])
        ]
        if counts != [3, 3]:
            return (
                "expected three digits and three probabilities per image, got "
                f"{counts[0]} and {counts[1]} for image {k + 1}"
            )
    return None


def _numbers(case, got, want):
    entries = _printed(got)
    digits = {type(d).__name__ for e in entries for d in e["digits"]}
    probabilities = {type(p).__name__ for e in entries for p in e["probabilities"]}
    if digits == {"int"} and probabilities <= {"int", "float"}:
        return None
    return (
        "expected digits as JSON integers and probabilities as numbers, got "
        f"{' and '.join(sorted(digits))} digits, {' and '.join(sorted(probabilities))} probabilities"
    )


def _given_model(case, got, want):
    digits, _ = _entries(got)
    order = _top3(case.data["logits"])
    if (digits != order).any() and (digits == _top3(case.data["notebook 01"])).all():
        return (
            "your digits are the top 3 of notebook 01's file, not of the model given as the first argument "
            "(this one has other weights)"
        )
    return None


def _most_probable(case, got, want):
    digits, _ = _entries(got)
    order = _top3(case.data["logits"])
    wrong = np.flatnonzero((np.sort(digits, 1) != np.sort(order, 1)).any(1))
    if wrong.size == 0:
        return None
    n = len(digits)
    return (
        f"image {wrong[0] + 1} of {n}: other digits than its three most probable ({len(wrong)} of "
        f"{n} images differ)"
    )


def _first_first(case, got, want):
    digits, _ = _entries(got)
    if (digits == _top3(case.data["logits"])).all():
        return None
    return "the right three digits, in another order: expected the most probable first"


def _fractions(case, got, want):
    _, probabilities = _entries(got)
    if probabilities.min() >= 0 and probabilities.max() <= 1:
        return None
    low, high = probabilities.min(), probabilities.max()
    return f"your probabilities go from {low:.4g} to {high:.4g}, outside 0..1"


def _softmax_of_each(case, got, want):
    digits, probabilities = _entries(got)
    if (
        np.abs(probabilities - np.take_along_axis(softmax(case.data["logits"]), digits, 1)).max()
        <= 1e-4
    ):
        return None
    decreasing = "" if (np.diff(probabilities, axis=1) <= 0).all() else " (and not decreasing)"
    return (
        "the right digits, but probabilities differing from each image's softmax by more than "
        f"1e-4{decreasing}"
    )


def _outcomes(cases, got):
    """The cases and outcomes of a script that ran and printed one well-formed entry per image on each."""
    for case, outcome in zip(cases, got):
        if not isinstance(outcome, dict) or outcome["exit"] != 0:
            return []
        entries = _printed(outcome)
        if not isinstance(entries, list) or len(entries) != len(case.args[1]):
            return []
    return list(zip(cases, got))


# Spotting a known script from the outcomes: running each known script is a Node process (about half a second),
# and a wrong answer would run every one of them on each case.


def _names_typed(cases, got) -> bool:
    """It runs with notebook 01's file (whose tensor names it typed) and fails with the renamed copy."""
    return all(
        isinstance(g, dict)
        and (g["exit"] == 0) == str(c.args[0]).endswith("mnist_mlp_pytorch.onnx")
        for c, g in zip(cases, got)
    )


def _node_objects(cases, got) -> bool:
    """console.log of the objects themselves: JavaScript's notation, keys unquoted."""
    return all(
        isinstance(g, dict) and _printed(g) is None and re.search(r"\{\s*digits:", g["stdout"])
        for g in got
    )


def _entries_count(count):
    def spot(cases, got):
        return all(
            isinstance(g, dict) and isinstance(_printed(g), list) and len(_printed(g)) == count(c)
            for c, g in zip(cases, got)
        )

    return spot


def _values(expected):
    """Every image's digits are its three most probable, and its probabilities ``expected(logits, digits)``."""

    def spot(cases, got):
        done = _outcomes(cases, got)
        try:
            return bool(done) and all(
                np.allclose(_entries(g)[1], expected(c.data["logits"], _entries(g)[0]), atol=1e-5)
                and (_entries(g)[0] == _top3(c.data["logits"])).all()
                for c, g in done
            )
        except (KeyError, TypeError, ValueError, IndexError):
            return False

    return spot


def _shifted_top3(cases, got) -> bool:
    """Each image's top 3 of the ten logits one place further on (its last reads the nine left)."""
    done = _outcomes(cases, got)
    try:
        return bool(done) and all(
            (
                _entries(g)[0]
                == [
                    _top3(c.data["logits"].ravel()[10 * i + 1 : 10 * i + 11][None])[0]
                    for i in range(len(c.data["logits"]))
                ]
            ).all()
            for c, g in done
        )
    except (KeyError, TypeError, ValueError, IndexError):
        return False


def _secret_top3(outcomes):
    """Each image's top 3 and its probabilities, as feedback could print them."""
    shown = []
    for outcome in outcomes:
        for entry in _printed(outcome):
            shown.append(str(entry["digits"]))
            shown += numbers_in([p for p in entry["probabilities"] if p >= 0.01])
    return shown


def _take(probabilities, digits):
    return np.take_along_axis(probabilities, digits, 1)


def _notebook_pixels(text):
    """Notebook 04's own file of the 10,000 test digits, read at its fixed path instead of the second argument."""
    pixels = _folder() / "test_pixels.f32"
    if not pixels.exists():
        test_images(10_000)[0].tofile(pixels)
    return text.replace("readFileSync(pixelsPath)", f"readFileSync({str(pixels)!r})")


_NAMES_TYPED = (("session.inputNames[0]", '"image"'), ("session.outputNames[0]", '"logits"'))
_HEAD = """import { readFileSync } from "node:fs";
import * as ort from "onnxruntime-web";
const [modelPath, pixelsPath] = process.argv.slice(2);
const bytes = readFileSync(pixelsPath);
const n = bytes.length / (4 * 784);
const session = await ort.InferenceSession.create(modelPath);
"""

# the bytes copied, the result read by position, a repeated argmax, the softmax by log-sum-exp
BY_ARGMAX = Script(
    "by_argmax",
    lambda _: (
        _HEAD
        + """const data = new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length));
const feeds = {};
feeds[session.inputNames[0]] = new ort.Tensor("float32", data, [n, 1, 28, 28]);
const output = Object.values(await session.run(feeds))[0];
const classes = output.dims[1];
const answer = [];
for (let i = 0; i < n; i++) {
  const row = Array.from(output.data.slice(i * classes, (i + 1) * classes));
  const top = Math.max(...row);
  const logSum = top + Math.log(row.reduce((s, v) => s + Math.exp(v - top), 0));
  const digits = [], probabilities = [];
  const left = row.slice();
  for (let k = 0; k < 3; k++) {
    const best = left.indexOf(Math.max(...left));
    digits.push(best);
    probabilities.push(Math.exp(row[best] - logSum));
    left[best] = -Infinity;
  }
  answer.push({ digits, probabilities });
}
process.stdout.write(JSON.stringify(answer) + "\\n");
"""
    ),
)

# pairs [probability, digit] sorted, the softmax without subtracting the largest logit
BY_PAIRS = Script(
    "by_pairs",
    lambda _: (
        _HEAD
        + """const data = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
const results = await session.run({ [session.inputNames[0]]: new ort.Tensor("float32", data, [n, 1, 28, 28]) });
const logits = results[session.outputNames[0]].data;
const out = [];
for (let i = 0; i < n; i++) {
  const e = [];
  for (let d = 0; d < 10; d++) e.push(Math.exp(logits[i * 10 + d]));
  const z = e.reduce((a, b) => a + b);
  const pairs = e.map((v, d) => [v / z, d]).sort((a, b) => b[0] - a[0]).slice(0, 3);
  out.push({ probabilities: pairs.map((p) => p[0]), digits: pairs.map((p) => p[1]) });
}
console.log(JSON.stringify(out));
"""
    ),
)


def _mistake(name, pairs, words, breaks, spots=judge_says_it):
    """A known script: the reference with ``pairs`` replaced (an edit function: any change)."""
    edit = pairs if callable(pairs) else _replacing(*pairs)
    return Mistake(name, Script(name, edit), words, breaks, spots)


RUNS = "runs without error (exit 0)"

TOP3 = Exercise(
    id="04.2",
    expects="the path of your script (a str or Path)",
    reference=_in_its_folder(write_top3),
    answer="answer = write_top3()",
    cases=model_cases,
    run=run_script,
    accepts=_is_path,
    # the expected top 3 are the models' own (ONNX Runtime in Python): no Node run of the reference
    judged_alone=True,
    requirements=[
        Requirement(RUNS, _runs),
        Requirement("prints JSON", _json),
        Requirement("one entry per image of the pixels given", _one_per_image),
        Requirement('entries {"digits": [...], "probabilities": [...]}', _keys),
        Requirement("three digits and three probabilities each", _three_each),
        Requirement("digits as JSON integers", _numbers),
        Requirement("the model given as first argument", _given_model),
        Requirement("the three most probable digits", _most_probable),
        Requirement("the most probable first", _first_first),
        Requirement("probabilities in 0..1", _fractions),
        Requirement("the softmax of that image's logits, within 1e-4", _softmax_of_each),
    ],
    mistakes=[
        _mistake(
            "a syntax error",
            [("const top3 = [];", "const top3 = [;")],
            "node exited with 1: SyntaxError: Unexpected token ';'",
            RUNS,
        ),
        _mistake(
            "a flat tensor",
            [("[n, 1, 28, 28]", "[n, 784]")],
            "node exited with 1: Error: failed to call OrtRun(). ERROR_CODE: 2, ERROR_MESSAGE: Invalid rank "
            "for input: image Got: 2 Expected: 4 Please fix either the inputs/outputs or the model. (through "
            "a_flat_tensor.mjs:10:17)",
            RUNS,
        ),
        _mistake(
            "the tensor names typed",
            _NAMES_TYPED,
            "it runs with notebook 01's model only: with the copy, whose input and output have other "
            "names, it fails; read both names from the session (inputNames, outputNames)",
            RUNS,
            _names_typed,
        ),
        _mistake(
            "the objects printed",
            [("console.log(JSON.stringify(top3));", "console.log(top3);")],
            "yours prints JavaScript's own view of the objects (keys unquoted): print "
            "JSON.stringify(top3)",
            "prints JSON",
            _node_objects,
        ),
        _mistake(
            "the first image only",
            [("for (let i = 0; i < n; i++)", "for (let i = 0; i < 1; i++)")],
            "yours has one entry, whatever the batch: one per image, n = the floats in the file / 784",
            "one entry per image of the pixels given",
            _entries_count(lambda case: 1),
        ),
        _mistake(
            "notebook 04's pixels",
            _notebook_pixels,
            "yours has 10,000 entries, notebook 04's test digits: read the pixels of the file given as the "
            "second argument",
            "one entry per image of the pixels given",
            _entries_count(lambda case: 10_000),
        ),
        _mistake(
            "labels, not digits",
            [("top3.push({ digits,", "top3.push({ labels: digits,")],
            'expected entries {"digits": [...], "probabilities": [...]}; the first has the keys '
            "['labels', 'probabilities']",
            'entries {"digits": [...], "probabilities": [...]}',
        ),
        _mistake(
            "the top 2",
            [(".slice(0, 3)", ".slice(0, 2)")],
            "expected three digits and three probabilities per image, got 2 and 2 for image 1",
            "three digits and three probabilities each",
        ),
        _mistake(
            "digits as text",
            [("top3.push({ digits,", "top3.push({ digits: digits.map(String),")],
            "expected digits as JSON integers and probabilities as numbers, got str digits, float "
            "probabilities",
            "digits as JSON integers",
        ),
        _mistake(
            "notebook 01's file",
            [
                *_NAMES_TYPED,
                (
                    "create(modelPath)",
                    f"create({str(REPO_ROOT / 'artifacts' / 'mnist_mlp_pytorch.onnx')!r})",
                ),
            ],
            "your digits are the top 3 of notebook 01's file, not of the model given as the first argument "
            "(this one has other weights)",
            "the model given as first argument",
        ),
        _mistake(
            "logits one place off",
            [
                (
                    "logits.subarray(i * 10, (i + 1) * 10)",
                    "logits.subarray(i * 10 + 1, (i + 1) * 10 + 1)",
                )
            ],
            "yours reads each image's logits one place off: image i's ten are logits[10 i] to "
            "logits[10 i + 9]",
            "the three most probable digits",
            _shifted_top3,
        ),
        _mistake(
            "least probable first",
            [(".slice(0, 3);", ".slice(0, 3).reverse();")],
            "the right three digits, in another order: expected the most probable first",
            "the most probable first",
        ),
        _mistake(
            "logits as probabilities",
            [("exps[d] / total", "row[d]")],
            "yours are the logits of those digits: a probability is the softmax of the image's logits, in "
            "0..1",
            "probabilities in 0..1",
            _values(_take),
        ),
        _mistake(
            "percent",
            [("exps[d] / total", "100 * exps[d] / total")],
            "yours are in percent: expected fractions in 0..1",
            "probabilities in 0..1",
            _values(lambda logits, digits: 100 * _take(softmax(logits), digits)),
        ),
        _mistake(
            "a softmax over the batch",
            [
                ("Math.max(...row)", "Math.max(...logits)"),
                (
                    "exps.reduce((a, b) => a + b, 0)",
                    "logits.reduce((a, v) => a + Math.exp(v - Math.max(...logits)), 0)",
                ),
            ],
            "yours are a softmax over the whole batch: expected one over each image's 10 logits",
            "the softmax of that image's logits, within 1e-4",
            _values(
                lambda logits, digits: _take(
                    softmax(logits.reshape(1, -1)).reshape(logits.shape), digits
                )
            ),
        ),
        _mistake(
            "rounded",
            [("exps[d] / total", "Number((exps[d] / total).toFixed(2))")],
            "the right digits, but probabilities differing from each image's softmax by more than 1e-4",
            "the softmax of that image's logits, within 1e-4",
        ),
    ],
    alternatives=[BY_ARGMAX, BY_PAIRS],
    secrets=_secret_top3,
    setup="from pathlib import Path",
    marks=("slow",),
)

EXERCISES = [INK, TOP3]
