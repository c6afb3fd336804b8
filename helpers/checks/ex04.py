"""Checks for the exercises of notebook 04 (the same file anywhere: Node.js, the browser, the ORT format).

04.1 gives the learner's ``ink(rgb)`` function drawings on coloured paper that this module paints itself, so it
knows the true ink of every pixel; 04.2 checks an ``.ort`` file by running it and by reading its operators back
in a separate process (ONNX Runtime's ORT-format tools configure the root logger when imported: a check must
leave the learner's kernel as it found it).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from helpers.checks._common import as_model_path, require_callable, require_keys, session as _session, test_images
from helpers.checks._common import Wrong

PAPER = (235, 215, 140)  # yellowish paper: its own gray is about 0.83, i.e. 17 % "ink" for a naive 1 - gray
INK = (30, 60, 160)      # a blue ballpoint
N_DRAWINGS = 40


def coloured_drawings(n: int = N_DRAWINGS, seed: int = 404) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(uint8 RGB drawings [n, 196, 196, 3], their true ink [n, 196, 196] in 0..1, labels): test digits written
    in blue on yellowish paper, scaled 6x, shifted at random, with a little paper grain."""
    from helpers.mnist import load_mnist

    data = load_mnist()
    rng = np.random.default_rng(seed)
    picked = rng.choice(len(data.x_test), n, replace=False)
    size = 196
    truths = np.zeros((n, size, size))
    for k, index in enumerate(picked):
        digit = np.kron(data.x_test[index] / 255.0, np.ones((6, 6)))  # 168 x 168
        top, left = rng.integers(0, size - 168 + 1, size=2)
        truths[k, top:top + 168, left:left + 168] = digit
    paper = np.array(PAPER, float) + rng.normal(0, 3, size=(n, size, size, 3))  # grain
    rgb = paper * (1 - truths[..., None]) + np.array(INK, float) * truths[..., None]
    return np.clip(np.round(rgb), 0, 255).astype(np.uint8), truths, data.y_test[picked]


def _check_ink(answer):
    """04.1: ``ink(rgb uint8 [H, W, 3]) -> float [H, W] in 0..1`` works on blue ink on yellowish paper."""
    from helpers import predict as P
    from helpers.notebooks import require_artifact

    ink = require_callable(answer, "ink(rgb) -> float array [H, W] in 0..1")
    drawings, truths, labels = coloured_drawings()
    found = []
    for rgb in drawings:
        try:
            result = np.asarray(ink(rgb.copy()), dtype=np.float64)
        except Exception as err:  # the learner's code: report what it raised
            raise Wrong(f"expected ink(rgb) to return an array, it raised {type(err).__name__}: {err}") from err
        if result.shape != rgb.shape[:2]:
            raise Wrong(f"expected one ink value per pixel, shape {rgb.shape[:2]}, got {result.shape}")
        if not np.isfinite(result).all() or result.min() < 0 or result.max() > 1:
            raise Wrong(f"expected ink values in 0..1 (finite), got {result.min():g}..{result.max():g}; "
                        f"uint8 0..255 must be divided by 255")
        found.append(result)
    found = np.stack(found)
    paper, strokes = found[truths == 0], found[truths >= 0.9]
    if np.median(paper) > np.median(strokes):
        raise Wrong(f"expected more ink on the strokes than on the paper; yours is inverted (median ink: paper "
                    f"{np.median(paper):.2f}, strokes {np.median(strokes):.2f})")
    paper_inked = (paper >= P.INK_THRESHOLD).mean()
    if paper_inked > 0.01:
        raise Wrong(f"expected the bare paper to have (almost) no ink, but {paper_inked:.0%} of its pixels reach "
                    f"the {P.INK_THRESHOLD} threshold (median {np.median(paper):.2f}), so the bounding box is the "
                    f"whole page; measure the ink relative to the paper's colour, not to white")
    if np.median(strokes) < 0.8:
        raise Wrong(f"expected the strokes to be full ink (about 1, as in MNIST), their median is "
                    f"{np.median(strokes):.2f}: the darkest ink should map to 1, not to its gray value")
    session = _session(require_artifact("mnist_mlp_pytorch.onnx"))
    name = session.get_inputs()[0].name

    def accuracy(inks):
        batch = np.stack([P.mnist_preprocess(i) for i in inks])[:, None]
        return float((session.run(None, {name: batch})[0].argmax(1) == labels).mean())

    yours, true_ink = accuracy(found), accuracy(truths)
    if yours < true_ink - 0.05:
        raise Wrong(f"expected about the accuracy the true ink gives ({true_ink:.0%}), got {yours:.0%} on "
                    f"{len(labels)} coloured drawings")
    correlation = float(np.corrcoef(found.ravel(), truths.ravel())[0, 1])
    return [f"{len(labels)} blue-on-yellow drawings: {yours:.0%} recognised (true ink: {true_ink:.0%}), "
            f"correlation with the true ink {correlation:.3f}"]


ORT_MAGIC = b"ORTM"  # the ORT format's flatbuffer file identifier, at bytes 4..8


def ort_operators(path: Path) -> set[str]:
    """The op types an ``.ort`` file needs, read back by ONNX Runtime's own tool, in a separate process."""
    code = ("import pathlib, sys\n"
            "from onnxruntime.tools.ort_format_model.utils import _extract_ops_and_types_from_ort_models as f\n"
            "ops, _ = f([pathlib.Path(sys.argv[1])], False)\n"
            "print(sorted({op for d in ops.values() for s in d.values() for op in s}))")
    result = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise Wrong(f"expected an ORT-format file ONNX Runtime's tools can read; {path.name} fails: "
                    f"{result.stderr.strip().splitlines()[-1] if result.stderr.strip() else result.returncode}")
    import ast

    return set(ast.literal_eval(result.stdout.strip()))


def _check_ort(answer):
    """04.2: the CNN as an ``.ort`` file, and the operators a minimal build would need for it."""
    from helpers.notebooks import require_artifact

    answer = require_keys(answer, ["ort_file", "operators"], "{'ort_file': path of the .ort, 'operators': op types}")
    path = as_model_path(answer["ort_file"])
    head = path.read_bytes()[:8]
    if head[4:8] != ORT_MAGIC:
        raise Wrong(f"expected an ORT-format file (bytes 4-8 are {ORT_MAGIC!r}); {path.name} starts with "
                    f"{head!r}: is it the .onnx file, renamed or not converted?")
    onnx_path = require_artifact("mnist_cnn_pytorch.onnx")
    images = test_images(500)[0]
    converted, original = _session(path), _session(onnx_path)
    shape = converted.get_inputs()[0].shape
    if list(shape[1:]) != [1, 28, 28]:
        raise Wrong(f"expected the CNN's input [batch, 1, 28, 28], {path.name} takes {shape}")
    got = converted.run(None, {converted.get_inputs()[0].name: images})[0]
    want = original.run(None, {original.get_inputs()[0].name: images})[0]
    if got.shape != want.shape or not np.allclose(got, want, rtol=0, atol=1e-5):
        diff = np.abs(got - want).max() if got.shape == want.shape else f"shape {got.shape}"
        raise Wrong(f"expected the logits of mnist_cnn_pytorch.onnx (|diff| <= 1e-5), got {diff}: was another "
                    f"model converted?")
    operators = answer["operators"]
    if isinstance(operators, str) or not all(isinstance(op, str) for op in operators):
        raise Wrong(f"expected the operators as a collection of op type names like {{'Gemm', ...}}, got "
                    f"{operators!r}")
    yours, needed = set(operators), ort_operators(path)
    if yours != needed:
        note = ""
        if "Conv" in yours and "Conv" not in needed:
            note = ("; these look like the ops of the .onnx graph, but the .ort file holds the graph after the "
                    "converter's optimizations (fused ops): read them from required_operators.config")
        raise Wrong(f"expected the operators the .ort file needs, {sorted(needed)}; missing "
                    f"{sorted(needed - yours)}, not needed {sorted(yours - needed)}{note}")
    return [f"{path.name}: {path.stat().st_size:,} bytes, same logits as the .onnx on 500 test digits; "
            f"a minimal build needs {len(needed)} op types: {', '.join(sorted(needed))}"]


CHECKS = {"04.1": _check_ink, "04.2": _check_ort}
