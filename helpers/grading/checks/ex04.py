"""Checks for notebook 04's exercises on drawings, digits and models the learner was not handed."""

from __future__ import annotations

import json
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
    reference_logits,
    require_callable,
    rng,
    session,
    test_images,
    write_varied_copy,
)
from helpers.pipeline.artifacts import built_artifact
from helpers.preprocess import INK_THRESHOLD, softmax

GREY = np.array([0.299, 0.587, 0.114])  # ITU-R 601 luma: the brightness of an RGB colour


def _unfit(k: int, paper, ink, size) -> bool:
    """Fresh case ``k`` must have two colours far enough apart and any size but the handed-out one; the
    first is dark ink on light paper and the second light on dark, clearly, then anything goes."""
    darker_by = (paper - ink) @ GREY
    wanted = {0: darker_by > 100, 1: darker_by < -100}.get(k, True)
    return np.abs(paper - ink).sum() < 240 or tuple(size) == (196, 196) or not wanted


def coloured_drawings(n: int = 40, seed: int = 404, any_colour: bool = False):
    """(RGB drawings, true ink 0..1, labels, descriptions): test digits, blue on yellowish paper, 196 px square."""
    data, draw = load_mnist(), np.random.default_rng(seed)
    picked = draw.choice(len(data.x_test), n, replace=False)
    drawings, truths, described = [], [], []
    for k, index in enumerate(picked):
        paper, ink, (height, width) = np.array([235, 215, 140]), np.array([30, 60, 160]), (196, 196)
        while any_colour and _unfit(k, paper, ink, (height, width)):
            paper, ink, (height, width) = (
                draw.integers(0, 256, 3),
                draw.integers(0, 256, 3),
                draw.integers(100, 300, 2),
            )
        scale = min(height, width) // 28 - 1
        truth = np.zeros((height, width))
        top, left = (
            draw.integers(0, height - 28 * scale + 1),
            draw.integers(0, width - 28 * scale + 1),
        )
        truth[top : top + 28 * scale, left : left + 28 * scale] = np.kron(
            data.x_test[index] / 255, np.ones((scale,) * 2)
        )
        rgb = (
            paper * (1 - truth[..., None])
            + ink * truth[..., None]
            + draw.normal(0, 3, (height, width, 3))
        )
        drawings.append(np.clip(np.round(rgb), 0, 255).astype(np.uint8))
        truths.append(truth)
        shade = (
            "light ink on dark paper" if ink @ GREY > paper @ GREY else "dark ink on light paper"
        )
        described.append(
            f"a {width}x{height} drawing, {shade}, RGB ink {ink.tolist()} on paper {paper.tolist()}"
        )
    return drawings, truths, data.y_test[picked], described


def _inked_paper(result, rgb, truth, what: str) -> str:
    """Why more than 1 % of the bare paper reaches the ink threshold, as far as the drawing tells."""
    paper_ink = result[truth == 0]
    share = (paper_ink >= INK_THRESHOLD).mean()
    said = (
        f"on {what}: {share:.0%} of the bare paper reaches the ink threshold {INK_THRESHOLD}, so the "
        "bounding box is the whole page"
    )
    if np.median(paper_ink) >= INK_THRESHOLD:  # the paper as a whole is ink: a fixed paper colour
        return (
            f"{said}: the paper itself reads as ink (median {np.median(paper_ink):.2f}); measure ink "
            "from this drawing's own paper colour, not from a fixed one"
        )
    level, spread = np.median(paper_ink), paper_ink.std()
    if level >= INK_THRESHOLD / 2 and spread < 0.3 * level:  # off 0 as a whole, its noise on top
        return (
            f"{said}: the bare paper sits at {level:.2f} (its median), not 0, and its "
            "noise does the rest; measure from this drawing's own paper colour"
        )
    paper, ink = np.median(rgb[truth == 0], axis=0), np.median(rgb[truth >= 0.9], axis=0)
    hue = abs((ink - paper) @ GREY) < 0.2 * np.linalg.norm(ink - paper)
    return (
        f"{said}, though its median is {level:.2f}: the paper's noise (a few levels per channel) is "
        "scaled up until it reaches the threshold"
        + ("; here ink and paper differ in hue far more than in brightness" if hue else "")
    )


def _check_ink(answer):
    """04.1: ``ink(rgb uint8 [H, W, 3]) -> float [H, W] in 0..1``, 0 on bare paper, about 1 on strokes."""
    ink = require_callable(answer, "ink(rgb) -> float array [H, W] in 0..1")
    fresh = int(rng(1).integers(2**31))  # the check's seed: other drawings each call
    drawings, truths, _, described = coloured_drawings(24, seed=fresh, any_colour=True)
    for rgb, truth, what in zip(drawings, truths, described):
        try:
            result = np.asarray(ink(rgb.copy()), dtype=np.float64)
        except Exception as err:  # the learner's code: report what it raised, and on which input
            raise Wrong(f"on {what}, ink(rgb) raised {type(err).__name__}: {err}") from err
        if (
            result.shape != rgb.shape[:2]
            or not np.isfinite(result).all()
            or result.min() < 0
            or result.max() > 1
        ):
            raise Wrong(
                f"expected one finite ink value in 0..1 per pixel, shape {rgb.shape[:2]}; got shape "
                f"{result.shape}, values {result.min():g}..{result.max():g} on {what}"
            )
        paper, strokes = np.median(result[truth == 0]), np.median(result[truth >= 0.9])
        if paper > strokes:
            raise Wrong(
                f"on {what}: more ink on the paper than on the strokes (the median of each)"
            )
        if (result[truth == 0] >= INK_THRESHOLD).mean() > 0.01:
            raise Wrong(_inked_paper(result, rgb, truth, what))
        if strokes < 0.8:
            raise Wrong(
                f"on {what}: the strokes' median ink is {strokes:.2f}; a full stroke should be about 1"
            )
        if np.abs(result - truth).mean() > 0.06:
            raise Wrong(
                f"on {what}: your ink differs from the ink painted there by more than 0.06 on average"
            )
    return [
        f"{len(drawings)} drawings in other colours and sizes: your ink matches the painted ink"
    ]


# The models 04.2 runs a script with: description -> (copy's input, output, rng stream, number of images); None: the file
# itself. The copy has other names and other weights (moved without training), so only the model given counts.
TOP3_MODELS = {
    "notebook 01's model": (None, None, 0, 17),
    "a copy with other tensor names and other weights": ("pixel_batch", "class_scores", 3, 23),
}


def _run_script(script: Path, model: Path, images: np.ndarray, which: str) -> str:
    """Standard output of ``node SCRIPT MODEL PIXELS`` in a scratch folder under the repository."""
    with tempfile.TemporaryDirectory(prefix=".check-04.2-", dir=REPO_ROOT) as scratch:
        (Path(scratch) / "given_model.onnx").write_bytes(model.read_bytes())
        shutil.copy(script, Path(scratch) / script.name)
        images.tofile(Path(scratch) / "given_digits.f32")
        run = subprocess.run(
            ["node", script.name, "given_model.onnx", "given_digits.f32"],
            cwd=scratch,
            capture_output=True,
            text=True,
            timeout=300,
        )
    if run.returncode != 0:
        raise Wrong(
            f"with {which}, `node {script.name} MODEL PIXELS` exited with {run.returncode}: "
            f"{_node_error(run.stderr, script.name)}"
        )
    return run.stdout


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


def _parse_top3(stdout: str, n: int, which: str) -> tuple:
    """(digits [n, 3] int, probabilities [n, 3] float) from the script's JSON, or a Wrong saying what came."""
    try:
        entries = json.loads(stdout)
    except ValueError as err:
        raise Wrong(
            f"with {which}: expected JSON on standard output; {err}; it printed {stdout[:80]!r}"
        ) from err
    if not isinstance(entries, list) or len(entries) != n:
        got = f"a list of {len(entries)}" if isinstance(entries, list) else type(entries).__name__
        raise Wrong(f"with {which}: expected a JSON list with one entry per image ({n}), got {got}")
    try:
        digits = np.array([e["digits"] for e in entries])
        probabilities = np.array([e["probabilities"] for e in entries])
    except (TypeError, KeyError) as err:
        first = (
            f"has the keys {sorted(entries[0])}"
            if isinstance(entries[0], dict)
            else f"is a {type(entries[0]).__name__}"
        )
        raise Wrong(
            f'with {which}: expected entries {{"digits": [...], "probabilities": [...]}}; the first '
            f"{first}"
        ) from err
    if digits.shape != (n, 3) or probabilities.shape != (n, 3):
        raise Wrong(
            f"with {which}: expected three digits and three probabilities per image, got digits of shape "
            f"{list(digits.shape)} and probabilities of shape {list(probabilities.shape)}"
        )
    if digits.dtype.kind not in "iu" or probabilities.dtype.kind not in "iuf":
        raise Wrong(
            f"with {which}: expected digits as JSON integers and probabilities as numbers, got "
            f"{digits.dtype} and {probabilities.dtype} values"
        )
    return digits.astype(np.int64), probabilities.astype(np.float64)


def _check_top3(answer):
    """04.2: a Node script printing each image's three most probable digits and their softmax probabilities."""
    if not isinstance(answer, (str, Path)) or "\n" in str(answer) or not Path(answer).is_file():
        raise Wrong(
            f"expected the path of your script (a str or Path of an existing file), got {str(answer)[:80]!r}"
        )
    if shutil.which("node") is None:
        raise Wrong("node is not on PATH: install Node.js 18 or newer (make setup does)")
    script, original = Path(answer), built_artifact("mnist_mlp_pytorch.onnx")
    pool = test_images(10_000)[0][rng(2).choice(10_000, 40, replace=False)]
    start = 0
    with tempfile.TemporaryDirectory(prefix="check-04.2-models-") as folder:
        for which, (name_in, name_out, stream, n) in TOP3_MODELS.items():
            model = (
                original
                if name_in is None
                else write_varied_copy(
                    original,
                    Path(folder) / "copy.onnx",
                    int(rng(stream).integers(2**31)),
                    name_in,
                    name_out,
                    0.8,
                )
            )
            images, start = pool[start : start + n], start + n
            digits, probabilities = _parse_top3(_run_script(script, model, images, which), n, which)
            logits = session(model).run(None, {name_in or "image": images})[0].astype(np.float64)
            _judge_top3(digits, probabilities, logits, images, which)
    return [
        f"{script.name}: the right top 3 and probabilities on new test digits, with notebook 01's model and "
        "with a copy that has other names and other weights"
    ]


def _judge_top3(digits, probabilities, logits, images, which: str) -> None:
    """What differs between the script's answer and the model's own top 3, without showing the latter."""
    n = len(images)
    order = np.argsort(-logits, axis=1)[:, :3]
    original_order = np.argsort(-reference_logits("mnist_mlp_pytorch.onnx", images), axis=1)[:, :3]
    if (digits != order).any() and (digits == original_order).all():
        raise Wrong(
            f"with {which}: your digits are the top 3 of notebook 01's file, not of the model given as "
            "the first argument (this one has other weights)"
        )
    if ((digits < 0) | (digits > 9)).any():
        raise Wrong(
            f"with {which}: expected digits 0..9, got values from {digits.min()} to {digits.max()}"
        )
    if (digits != order).any() and (np.sort(digits, 1) == np.sort(order, 1)).all():
        raise Wrong(
            f"with {which}: the right three digits, in another order: expected the most probable first"
        )
    wrong = np.flatnonzero((digits != order).any(1))
    if wrong.size:
        raise Wrong(
            f"with {which}: image {wrong[0] + 1} of {n}: your digits {digits[wrong[0]].tolist()} are not "
            f"its three most probable ({len(wrong)} of {n} images differ)"
        )
    right = np.take_along_axis(softmax(logits), digits, 1)
    whole = np.take_along_axis(softmax(logits.reshape(1, -1)).reshape(logits.shape), digits, 1)
    if np.abs(probabilities - right).max() <= 1e-4:
        return
    if np.allclose(probabilities, whole, atol=1e-6):
        raise Wrong(
            f"with {which}: your probabilities are a softmax over the whole batch; expected one over each "
            "image's 10 logits"
        )
    if np.allclose(probabilities, np.take_along_axis(logits, digits, 1), atol=1e-4):
        raise Wrong(
            f"with {which}: your probabilities equal the logits of those digits; expected each image's "
            "softmax, in 0..1"
        )
    if np.abs(probabilities - 100 * right).max() <= 1e-2:
        raise Wrong(
            f"with {which}: your probabilities are in percent (up to {probabilities.max():.4g}); "
            "expected fractions in 0..1"
        )
    if probabilities.min() < 0 or probabilities.max() > 1:
        raise Wrong(
            f"with {which}: your probabilities go from {probabilities.min():.4g} to "
            f"{probabilities.max():.4g}, outside 0..1; expected each image's softmax"
        )
    if (np.diff(probabilities, axis=1) > 0).any():
        raise Wrong(
            f"with {which}: your probabilities are not in decreasing order, while your digits are the "
            "most probable first"
        )
    raise Wrong(
        f"with {which}: the right digits, but probabilities differing from each image's softmax by more "
        "than 1e-4"
    )


CHECKS = {"04.1": _check_ink, "04.2": _check_top3}


# Reference answers (a teacher's; the nbgrader source cells are generated from them)


def ink(rgb: np.ndarray) -> np.ndarray:
    """Ink 0..1 of a drawing in one ink colour on paper of any other colour: how far each pixel's colour is from
    the paper's (the median of the border), relative to the full strokes' distance (the 25th farthest pixel: a
    count, not a share of the page, so a small digit on a large page still sets it)."""
    pixels = rgb.astype(np.float64)
    border = np.concatenate([pixels[0], pixels[-1], pixels[:, 0], pixels[:, -1]])
    distance = np.linalg.norm(pixels - np.median(border, axis=0), axis=-1)
    full_stroke = np.partition(distance.ravel(), -25)[-25]
    return np.clip(distance / max(full_stroke, 1e-6), 0, 1)


TOP3 = """\
// node top3.mjs MODEL.onnx PIXELS.f32: each image's three most probable digits and their probabilities, as JSON
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


def solve_1(tmp_path: Path):
    return ink


def solve_2(tmp_path: Path):
    path = Path(tmp_path) / "top3.mjs"
    path.write_text(TOP3)
    return path
