"""Solutions for notebook 04's exercises."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def ink(rgb: np.ndarray) -> np.ndarray:
    """Ink 0..1 of a drawing in one ink colour on paper of any other colour: how far each pixel's colour is from
    the paper's (the median of the border), relative to the farthest colours in the drawing (the full strokes)."""
    pixels = rgb.astype(np.float64)
    border = np.concatenate([pixels[0], pixels[-1], pixels[:, 0], pixels[:, -1]])
    distance = np.linalg.norm(pixels - np.median(border, axis=0), axis=-1)
    return np.clip(distance / max(np.percentile(distance, 99.5), 1e-6), 0, 1)


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
