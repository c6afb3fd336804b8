"""The checks of notebook 04 accept every correct answer, name realistic mistakes, and never show the answer."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from tables import SEED, check, refused, rows

from helpers.data.mnist import load_mnist
from helpers.data.paths import REPO_ROOT
from helpers.grading.checks import ex04 as checks
from helpers.grading.checks._common import (
    reference_logits,
    rng,
    seeded,
    session,
    write_varied_copy,
)
from helpers.pipeline.artifacts import built_artifact

GRAY = np.array([0.299, 0.587, 0.114])


# ------------------------------------------------------------------------------ 04.1 ink on any paper
def ink_by_projection(
    rgb,
):  # paper from the corners, ink colour = the farthest pixel, position along that line
    pixels = rgb.astype(float)
    paper = (
        np.concatenate([pixels[:5, :5], pixels[:5, -5:], pixels[-5:, :5], pixels[-5:, -5:]])
        .reshape(-1, 3)
        .mean(0)
    )
    away = pixels - paper
    ink_colour = away.reshape(-1, 3)[np.argmax(np.linalg.norm(away, axis=-1))]
    return np.clip(away @ ink_colour / (ink_colour @ ink_colour), 0, 1)


def ink_by_channel(
    rgb,
):  # the paper is most of the page: its median; the channel that changes most, per pixel
    pixels = rgb.astype(float)
    change = np.abs(pixels - np.median(pixels.reshape(-1, 3), axis=0)).max(axis=-1)
    return np.minimum(change / np.percentile(change, 99.8), 1.0)


def against_white(rgb):  # the page's formula: darkness against white paper
    return 1 - (rgb.astype(float) @ GRAY) / 255


def yellow_paper_hard_coded(rgb):  # right idea, but only for the paper the exercise handed out
    return np.clip(np.linalg.norm(rgb.astype(float) - [235, 215, 140], axis=-1) / 200, 0, 1)


def dark_ink_only(
    rgb,
):  # relative to the paper's grey: fails where ink and paper differ in hue, not grey
    gray = rgb.astype(float) @ GRAY
    paper = np.median(np.concatenate([gray[0], gray[-1], gray[:, 0], gray[:, -1]]))
    return np.clip((paper - gray) / max(paper - np.percentile(gray, 1), 1e-6), 0, 1)


def grey_as_ink(rgb):  # forgot that ink is where the colour differs: MNIST is white on black
    return (rgb.astype(float) @ GRAY) / 255


def faint(rgb):  # relative to the paper, but not scaled: a full stroke is far below 1
    return checks.ink(rgb) * 0.6


def binarized(
    rgb,
):  # ink or no ink: right too (the text asks 0 on paper, about 1 on strokes, nothing between)
    return (checks.ink(rgb) > 0.5).astype(float)


def square_only(rgb):  # assumes the handed-out 196 x 196 drawings
    return checks.ink(rgb.reshape(196, 196, 3))


@pytest.mark.parametrize(
    "answer",
    [checks.ink, ink_by_projection, ink_by_channel, binarized],
    ids=["solution", "projection", "per-channel", "binarized"],
)
def test_04_1_correct_answers_pass(answer):
    feedback = check("04.1", answer)
    assert feedback.ok, feedback.message


def fixed_scale(rgb):  # the distance to the paper over a fixed 60 levels: the noise passes 0.1
    pixels = rgb.astype(float)
    border = np.concatenate([pixels[0], pixels[-1], pixels[:, 0], pixels[:, -1]])
    return np.clip(np.linalg.norm(pixels - np.median(border, axis=0), axis=-1) / 60, 0, 1)


WRONG_04_1 = [  # the other mistakes are rows of REQUIREMENTS_04_1
    (
        "dark-ink-only",
        dark_ink_only,
        ["light ink on dark paper", "more ink on the paper than on the strokes"],
    ),  # the checker's second drawing is light ink on dark paper
    (
        "noise scaled up",
        fixed_scale,
        ["of the bare paper reaches the ink threshold", "the paper's noise", "scaled up"],
    ),
    ("uint8", lambda rgb: (255 * checks.ink(rgb)).astype(np.uint8), "finite ink value in 0..1"),
]


def test_04_1_judges_on_drawings_it_did_not_hand_out():
    handed, _, _, described = checks.coloured_drawings(3)
    assert {d.shape for d in handed} == {(196, 196, 3)} and all(
        "[30, 60, 160]" in d for d in described
    )
    fresh, truths, _, described = checks.coloured_drawings(24, seed=4041, any_colour=True)
    assert len({d.shape for d in fresh}) == 24 and (196, 196, 3) not in {d.shape for d in fresh}
    assert any("light ink on dark paper" in d for d in described)
    assert all(t.max() > 0.9 and t.shape == d.shape[:2] for d, t in zip(fresh, truths))


def darker_only(rgb):  # the colour distance, but only where the pixel is darker than the paper
    gray = rgb.astype(float) @ GRAY
    paper = np.median(np.concatenate([gray[0], gray[-1], gray[:, 0], gray[:, -1]]))
    return checks.ink(rgb) * (gray <= paper + 8)


REQUIREMENTS_04_1 = [
    ("a function ink(rgb)", "ink.py", "expected your function"),
    ("one value per pixel, [H, W]", lambda rgb: checks.ink(rgb)[:, :, None], "per pixel"),
    ("values in 0..1", lambda rgb: 255 * checks.ink(rgb), "finite ink value in 0..1"),
    (
        "0 on bare paper",
        against_white,
        ["the bounding box is the whole page", "the paper itself reads as ink (median"],
    ),
    (
        "paper of any colour",
        yellow_paper_hard_coded,
        ["the paper itself reads as ink", "measure ink from this drawing's own paper colour"],
    ),
    ("about 1 on a full stroke", faint, "a full stroke should be about 1"),
    ("ink, not paper, is 1", grey_as_ink, "more ink on the paper than on the strokes"),
    ("light ink on dark paper too", darker_only, "light ink on dark paper"),
    ("any size", square_only, "raised ValueError"),
]


def red_only(rgb):  # one channel: blind where ink and paper share their red
    red = rgb[..., 0].astype(float)
    paper = np.median(np.concatenate([red[0], red[-1], red[:, 0], red[:, -1]]))
    change = np.abs(red - paper)
    return np.clip(change / max(change.max(), 1e-6), 0, 1)


def paper_from_the_centre(rgb):  # the centre pixel as paper: it is often a stroke
    pixels = rgb.astype(float)
    distance = np.linalg.norm(pixels - pixels[len(pixels) // 2, pixels.shape[1] // 2], axis=-1)
    return np.clip(distance / max(distance.max(), 1e-6), 0, 1)


def absolute_distance(
    rgb,
):  # distance to the paper over the largest possible distance, not this drawing's
    pixels = rgb.astype(float)
    border = np.concatenate([pixels[0], pixels[-1], pixels[:, 0], pixels[:, -1]])
    return np.linalg.norm(pixels - np.median(border, axis=0), axis=-1) / np.sqrt(3 * 255**2)


def transposed(rgb):  # [W, H]
    return checks.ink(rgb).T


def mean_colour_paper(rgb):  # the mean colour of the whole drawing as paper (strokes pull it)
    pixels = rgb.astype(float)
    distance = np.linalg.norm(pixels - pixels.reshape(-1, 3).mean(0), axis=-1)
    return np.clip(distance / np.percentile(distance, 99.5), 0, 1)


def absolute_grey_difference(
    rgb,
):  # |grey - paper grey|: blind where ink and paper have similar greys
    gray = rgb.astype(float) @ GRAY
    change = np.abs(gray - np.median(np.concatenate([gray[0], gray[-1], gray[:, 0], gray[:, -1]])))
    return np.clip(change / max(np.percentile(change, 99.5), 1e-6), 0, 1)


OWN_ROUND_04_1 = [
    ("the red channel only", red_only, "on a "),
    ("the centre pixel as paper", paper_from_the_centre, "on a "),
    (
        "distance over the largest possible distance",
        absolute_distance,
        "a full stroke should be about 1",
    ),
    ("[W, H] instead of [H, W]", transposed, "per pixel"),
    ("the mean colour as paper", mean_colour_paper, ["on a ", "(its median), not 0"]),
    ("absolute grey difference", absolute_grey_difference, "on a "),
]


@pytest.mark.parametrize(
    "answer, message",
    [
        *rows("requirement", REQUIREMENTS_04_1),
        *rows("own round", OWN_ROUND_04_1),
        *rows("mistake", WRONG_04_1),
    ],
)
def test_04_1_wrong_answers_are_named(answer, message):
    refused("04.1", answer, *([message] if isinstance(message, str) else message))


# --------------------------------------------------------------------------- 04.2 top 3 in JavaScript
HEAD = """import { readFileSync } from "node:fs";
import * as ort from "onnxruntime-web";
const [modelPath, pixelsPath] = process.argv.slice(2);
const bytes = readFileSync(pixelsPath);
const data = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
const n = data.length / 784;
const session = await ort.InferenceSession.create(modelPath);
"""

# another way: copy the bytes, read the result by position, repeated argmax, softmax by log-sum-exp
BY_ARGMAX = (
    HEAD.replace(
        "(bytes.buffer, bytes.byteOffset, bytes.length / 4)",
        "(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length))",
    )
    + """
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
)

# and another: pairs [probability, digit] sorted, softmax without the max trick
BY_PAIRS = (
    HEAD
    + """
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
)

LOGITS = checks.TOP3.replace("exps[d] / total", "row[d]")
ASCENDING = checks.TOP3.replace(".slice(0, 3);", ".slice(0, 3).reverse();")
ROUNDED = checks.TOP3.replace("exps[d] / total", "Number((exps[d] / total).toFixed(2))")
OFF_BY_ONE = checks.TOP3.replace(
    "logits.subarray(i * 10, (i + 1) * 10)", "logits.subarray(i * 10 + 1, (i + 1) * 10 + 1)"
)
WHOLE_BATCH = checks.TOP3.replace("Math.max(...row)", "Math.max(...logits)").replace(
    "exps.reduce((a, b) => a + b, 0)",
    "logits.reduce((a, v) => a + Math.exp(v - Math.max(...logits)), 0)",
)
NAMES_TYPED = checks.TOP3.replace("session.inputNames[0]", '"image"').replace(
    "session.outputNames[0]", '"logits"'
)
FIRST_ONLY = checks.TOP3.replace("for (let i = 0; i < n; i++)", "for (let i = 0; i < 1; i++)")
SYNTAX_ERROR = checks.TOP3.replace("const top3 = [];", "const top3 = [;")
FLAT_TENSOR = checks.TOP3.replace("[n, 1, 28, 28]", "[n, 784]")  # thrown inside the bundle


def script(tmp_path, text, name="top3.mjs"):
    path = tmp_path / name
    path.write_text(text)
    return path


NOTEBOOK_01_FILE = NAMES_TYPED.replace(
    "create(modelPath)", f"create({str(REPO_ROOT / 'artifacts' / 'mnist_mlp_pytorch.onnx')!r})"
)
FIXED_PIXELS = (
    Path(tempfile.mkdtemp(prefix="ex04_")) / "test_pixels.f32"
)  # notebook 04's file, at a fixed path
NOTEBOOK_PIXELS = checks.TOP3.replace(
    "readFileSync(pixelsPath)", f"readFileSync({str(FIXED_PIXELS)!r})"
)


@pytest.fixture(autouse=True, scope="module")
def fixed_pixels_file():
    """The 10,000 test digits where NOTEBOOK_PIXELS reads them, as notebook 04 writes them."""
    (load_mnist().x_test[:, None] / 255).astype(np.float32).tofile(FIXED_PIXELS)
    yield
    shutil.rmtree(FIXED_PIXELS.parent)


INPUT_TYPED = checks.TOP3.replace("session.inputNames[0]", '"image"')
OUTPUT_TYPED = checks.TOP3.replace("session.outputNames[0]", '"logits"')
NOT_JSON = checks.TOP3.replace("console.log(JSON.stringify(top3));", "console.log(top3);")
LABELS_KEY = checks.TOP3.replace("top3.push({ digits,", "top3.push({ labels: digits,")
TOP_TWO = checks.TOP3.replace(".slice(0, 3)", ".slice(0, 2)")
DIGITS_AS_STRINGS = checks.TOP3.replace(
    "top3.push({ digits,", "top3.push({ digits: digits.map(String),"
)
PERCENT = checks.TOP3.replace("exps[d] / total", "100 * exps[d] / total")

REQUIREMENTS_04_2 = [
    ("the path of a script", None, "expected the path of your script"),
    ("runs without error (exit 0)", SYNTAX_ERROR, "exited with 1: SyntaxError"),
    (
        "runs without error, an error inside onnxruntime-web",
        FLAT_TENSOR,
        "exited with 1: Error: failed to call OrtRun(). ERROR_CODE: 2, ERROR_MESSAGE: Invalid rank",
    ),
    (
        "the model given as first argument",
        NOTEBOOK_01_FILE,
        "top 3 of notebook 01's file, not of the model given",
    ),
    (
        "the pixels given as second argument",
        NOTEBOOK_PIXELS,
        "one entry per image (17), got a list of 10000",
    ),
    ("the input name read from the session", INPUT_TYPED, "with a copy with other tensor names"),
    ("the output name read from the session", OUTPUT_TYPED, "with a copy with other tensor names"),
    ("prints JSON", NOT_JSON, "expected JSON on standard output"),
    ("one entry per image", FIRST_ONLY, "one entry per image (17), got a list of 1"),
    (
        'entries {"digits", "probabilities"}',
        LABELS_KEY,
        'expected entries {"digits": [...], "probabilities"',
    ),
    ("three digits each", TOP_TWO, "expected three digits and three probabilities per image"),
    ("digits as numbers", DIGITS_AS_STRINGS, "expected digits as JSON integers"),
    ("the three most probable digits", OFF_BY_ONE, "are not its three most probable"),
    ("most probable first", ASCENDING, "in another order: expected the most probable first"),
    ("probabilities, not logits", LOGITS, "equal the logits of those digits"),
    ("probabilities in 0..1, not percent", PERCENT, "in percent"),
    ("the softmax of that image's logits", WHOLE_BATCH, "softmax over the whole batch"),
    ("each within 1e-4", ROUNDED, "differing from each image's softmax by more than 1e-4"),
]


@pytest.mark.parametrize(
    "text, message",
    [
        *rows("requirement", REQUIREMENTS_04_2),
        # the other mistakes are rows of REQUIREMENTS_04_2
        *rows(
            "mistake",
            [(NAMES_TYPED, "with a copy with other tensor names and other weights")],
            ids=["names-typed"],
        ),
    ],
)
def test_04_2_wrong_answers_are_named_without_the_answer(tmp_path, text, message):
    from helpers.grading.checks._common import (
        test_images,
    )  # imported here: pytest would collect it as a test

    feedback = refused("04.2", "top3.mjs" if text is None else script(tmp_path, text), message)
    assert len(feedback.message) < 500, feedback.message  # the error, not a minified bundle
    with seeded(feedback.seed):  # the digits the check picked
        images = test_images(10_000)[0][rng(2).choice(10_000, 40, replace=False)][:17]
    top3 = np.argsort(-reference_logits("mnist_mlp_pytorch.onnx", images), axis=1)[:, :3]
    assert not any(str(row.tolist()) in feedback.message for row in top3), feedback.message


def test_04_2_the_renamed_copy_has_other_weights(tmp_path):
    from helpers.grading.checks._common import test_images

    name_in, name_out, stream, _ = checks.TOP3_MODELS[
        "a copy with other tensor names and other weights"
    ]
    with seeded(SEED):
        seed = int(rng(stream).integers(2**31))
    copy = write_varied_copy(
        built_artifact("mnist_mlp_pytorch.onnx"),
        tmp_path / "copy.onnx",
        seed,
        name_in,
        name_out,
        0.8,
    )
    images = test_images(200)[0]
    a = reference_logits("mnist_mlp_pytorch.onnx", images)
    b = session(copy).run(None, {name_in: images})[0]
    assert (
        np.abs(a - b).max() > 0.1 and (np.argsort(-a, 1)[:, :3] != np.argsort(-b, 1)[:, :3]).any()
    )


@pytest.mark.parametrize(
    "text", [checks.TOP3, BY_ARGMAX, BY_PAIRS], ids=["solution", "argmax-loop", "sorted-pairs"]
)
def test_04_2_correct_answers_pass(tmp_path, text):
    feedback = check("04.2", script(tmp_path, text))
    assert feedback.ok, feedback.message


def test_04_2_the_answer_must_be_a_script(tmp_path):
    assert "expected the path of your script" in check("04.2", tmp_path / "missing.mjs").message
    assert "expected the path of your script" in check("04.2", checks.TOP3).message
