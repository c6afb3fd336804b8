"""Solutions for notebook 04's exercises."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np


def ink(rgb: np.ndarray) -> np.ndarray:
    """Ink 0..1 of a drawing on paper of any colour: how far each pixel is from the paper towards the ink.

    The paper's colour is the median of the border; the ink's is the darkest 1 % of pixels; in between, the
    position along that line (in gray values), so bare paper is 0 and a full stroke is 1.
    """
    gray = rgb.astype(np.float64) @ np.array([0.299, 0.587, 0.114])
    border = np.concatenate([gray[0], gray[-1], gray[:, 0], gray[:, -1]])
    paper, darkest = np.median(border), np.percentile(gray, 1)
    return np.clip((paper - gray) / max(paper - darkest, 1e-6), 0, 1)


def solve_1(tmp_path: Path):
    return ink


def solve_2(tmp_path: Path):
    from helpers.notebooks import require_artifact

    folder = Path(tmp_path) / "ort"
    folder.mkdir()
    shutil.copy(require_artifact("mnist_cnn_pytorch.onnx"), folder)
    subprocess.run([sys.executable, "-m", "onnxruntime.tools.convert_onnx_models_to_ort", str(folder)], check=True,
                   capture_output=True)
    operators = set()
    for line in (folder / "required_operators.config").read_text().splitlines():
        if line and not line.startswith("#"):
            operators |= set(line.split(";")[2].split(","))  # domain;opset;Op1,Op2
    return {"ort_file": folder / "mnist_cnn_pytorch.ort", "operators": operators}
