"""Checks for notebook 04's exercises, on inputs the learner was not handed (other colours and sizes, other
digits, a model with other tensor names); the drawings are painted here, so the true ink of each pixel is known."""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from helpers.checks._common import Wrong, renamed_copy, require_callable, session, test_images


def coloured_drawings(n: int = 40, seed: int = 404, any_colour: bool = False):
    """(RGB drawings, true ink 0..1, labels, descriptions): test digits, blue on yellowish paper, 196 px square."""
    from helpers.mnist import load_mnist

    data, rng = load_mnist(), np.random.default_rng(seed)
    picked = rng.choice(len(data.x_test), n, replace=False)
    drawings, truths, described = [], [], []
    for index in picked:
        paper, ink, (height, width) = np.array([235, 215, 140]), np.array([30, 60, 160]), (196, 196)
        # fresh cases: two colours far enough apart, and any size but the handed-out one
        while any_colour and (np.abs(paper - ink).sum() < 240 or (height, width) == (196, 196)):
            paper, ink, (height, width) = rng.integers(0, 256, 3), rng.integers(0, 256, 3), rng.integers(100, 300, 2)
        scale = min(height, width) // 28 - 1
        truth = np.zeros((height, width))
        top, left = rng.integers(0, height - 28 * scale + 1), rng.integers(0, width - 28 * scale + 1)
        truth[top:top + 28 * scale, left:left + 28 * scale] = np.kron(data.x_test[index] / 255, np.ones((scale,) * 2))
        rgb = paper * (1 - truth[..., None]) + ink * truth[..., None] + rng.normal(0, 3, (height, width, 3))
        drawings.append(np.clip(np.round(rgb), 0, 255).astype(np.uint8))
        truths.append(truth)
        shade = "light ink on dark paper" if ink.sum() > paper.sum() else "dark ink on light paper"
        described.append(f"a {width}x{height} drawing, {shade}, RGB ink {ink.tolist()} on paper {paper.tolist()}")
    return drawings, truths, data.y_test[picked], described


def _check_ink(answer):
    """04.1: ``ink(rgb uint8 [H, W, 3]) -> float [H, W] in 0..1``, 0 on bare paper, about 1 on strokes."""
    from helpers.predict import INK_THRESHOLD

    ink = require_callable(answer, "ink(rgb) -> float array [H, W] in 0..1")
    drawings, truths, _, described = coloured_drawings(24, seed=4041, any_colour=True)
    for rgb, truth, what in zip(drawings, truths, described):
        try:
            result = np.asarray(ink(rgb.copy()), dtype=np.float64)
        except Exception as err:  # the learner's code: report what it raised, and on which input
            raise Wrong(f"on {what}, ink(rgb) raised {type(err).__name__}: {err}") from err
        if result.shape != rgb.shape[:2] or not np.isfinite(result).all() or result.min() < 0 or result.max() > 1:
            raise Wrong(f"expected one finite ink value in 0..1 per pixel, shape {rgb.shape[:2]}; got shape "
                        f"{result.shape}, values {result.min():g}..{result.max():g} on {what}")
        paper, strokes = np.median(result[truth == 0]), np.median(result[truth >= 0.9])
        if paper > strokes:
            raise Wrong(f"on {what}: more ink on the paper than on the strokes; yours is inverted")
        if (result[truth == 0] >= INK_THRESHOLD).mean() > 0.01:
            raise Wrong(f"on {what}: more than 1 % of the bare paper reaches the ink threshold {INK_THRESHOLD}, so "
                        f"the bounding box is the whole page; measure ink from this drawing's own paper colour")
        if strokes < 0.8:
            raise Wrong(f"on {what}: the strokes' median ink is {strokes:.2f}; a full stroke should be about 1")
        if np.abs(result - truth).mean() > 0.06:
            raise Wrong(f"on {what}: your ink differs from the ink painted there by more than 0.06 on average")
    return [f"{len(drawings)} drawings in other colours and sizes: your ink matches the painted ink"]


def _check_top3(answer):
    """04.2: a Node script printing each image's three most probable digits and their softmax probabilities."""
    from helpers.notebooks import require_artifact
    from helpers.paths import REPO_ROOT
    from helpers.predict import softmax

    if not isinstance(answer, (str, Path)) or "\n" in str(answer) or not Path(answer).is_file():
        raise Wrong(f"expected the path of your script (a str or Path of an existing file), got {str(answer)[:80]!r}")
    if shutil.which("node") is None:
        raise Wrong("node is not on PATH: install Node.js 18 or newer (make setup does)")
    script, original = Path(answer), require_artifact("mnist_mlp_pytorch.onnx")
    images = test_images(2000)[0][np.random.default_rng(42).choice(2000, 17, replace=False)]
    models = {"notebook 01's model": original.read_bytes(),
              "a copy whose input and output have other names (read them from the session)": renamed_copy(original)}
    for which, model in models.items():
        with tempfile.TemporaryDirectory(prefix=".check-04.2-", dir=REPO_ROOT) as scratch:  # Node finds its packages
            (Path(scratch) / "model.onnx").write_bytes(model)
            shutil.copy(script, Path(scratch) / script.name)
            images.tofile(Path(scratch) / "pixels.f32")
            run = subprocess.run(["node", script.name, "model.onnx", "pixels.f32"], cwd=scratch,
                                 capture_output=True, text=True, timeout=300)
        if run.returncode != 0:  # the first line naming an error, else the end of what it printed
            reason = next((line for line in run.stderr.splitlines() if "Error" in line), run.stderr.strip()[-200:])
            raise Wrong(f"with {which}, `node {script.name} MODEL PIXELS` exited with {run.returncode}: {reason}")
        try:
            entries = json.loads(run.stdout)
            digits = np.array([e["digits"] for e in entries], dtype=np.int64).reshape(len(images), 3)
            probabilities = np.array([e["probabilities"] for e in entries], dtype=np.float64).reshape(len(images), 3)
        except (ValueError, TypeError, KeyError) as err:
            raise Wrong(f'expected JSON [{{"digits": [3 digits], "probabilities": [3 numbers]}}, ...], one per '
                        f"image ({len(images)}); {type(err).__name__}: {err}; it printed {run.stdout[:80]!r}") from err
        reference = session(model)
        logits = reference.run(None, {reference.get_inputs()[0].name: images})[0].astype(np.float64)
        whole = softmax(logits.reshape(1, -1)).reshape(logits.shape)  # one softmax over the whole batch: a mistake
        if np.allclose(probabilities, np.take_along_axis(whole, digits.clip(0, 9), 1), atol=1e-6):
            raise Wrong("your probabilities are a softmax over the whole batch: take it over each image's 10 logits")
        if probabilities.min() < 0 or probabilities.max() > 1:
            raise Wrong("your probabilities are outside 0..1: are they logits? Apply softmax to each image's logits")
        if (np.diff(probabilities, axis=1) > 0).any():
            raise Wrong("expected the most probable digit first; yours are not in decreasing probability")
        wrong = np.flatnonzero((digits != np.argsort(-logits, axis=1)[:, :3]).any(1))
        if wrong.size:
            raise Wrong(f"image {wrong[0] + 1} of {len(images)}: your digits {digits[wrong[0]].tolist()} are not its "
                        f"three most probable ({len(wrong)} differ)")
        if np.abs(probabilities - np.take_along_axis(softmax(logits), digits, 1)).max() > 1e-4:
            raise Wrong("the right digits, but probabilities differing from each image's softmax by more than 1e-4")
    return [f"{script.name}: the right top 3 and probabilities on {len(images)} new test digits, with two models"]


CHECKS = {"04.1": _check_ink, "04.2": _check_top3}
