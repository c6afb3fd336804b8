"""A drawing made into the 28x28 input MNIST models expect (notebook 04): the Python twin of web/preprocess.js.

The same steps in the same order and arithmetic as ``web/preprocess.js``, the page's preprocessing (tests/test_web.py
checks that both give the same 28x28 images, within one grey level): *ink* from a gray drawing of any size, *crop* to
the inked pixels' bounding box, *scale* its longest side to 20 pixels (area averaging), *centre* its centre of mass
in a 28x28 field, as MNIST itself was made (LeCun et al.). Both modules also hold the softmax that turns a row of
logits into the probabilities the page shows; the exercises' checkers use it from here.

numpy only, no import from the repository. ``helpers/classify_drawing.py`` is the command-line program that puts
these steps in front of ``helpers/predict.py``; notebook 04 calls them directly.
"""

from __future__ import annotations

import numpy as np

# pixels with at least this much ink define the bounding box
INK_THRESHOLD = 0.1
# the longest side of the digit after scaling, and the side of the field it is placed in
BOX_SIDE, FIELD_SIDE = 20, 28
# a drawing's paper (the median of its border pixels) at most DARK is black, at least LIGHT white
DARK, LIGHT = 0.25, 0.75


class DrawingError(ValueError):
    """A drawing the steps cannot read: no ink, or paper neither dark nor light."""


def find_ink(gray: np.ndarray, name="image") -> np.ndarray:
    """Ink in 0..1 from a gray drawing in 0..1: ``1 - gray`` on light paper, ``gray`` on dark paper.

    The paper is the median of the border pixels; mid-gray paper is a ``DrawingError`` (ink and paper cannot be
    told apart). web/preprocess.js's ``inkFromRGBA`` is this step for the page's canvas (dark strokes, always)."""
    gray = np.asarray(gray)
    border = [gray[0, :], gray[-1, :], gray[:, 0], gray[:, -1]]
    paper = float(np.median(np.concatenate(border)))
    if DARK < paper < LIGHT:
        raise DrawingError(
            f"{name}: the border is mid-gray (median {paper:.2f}), so ink and background cannot "
            f"be told apart; expected dark strokes on a light or transparent background"
        )
    return 1.0 - gray if paper >= LIGHT else gray


def _area_weights(n_in: int, n_out: int) -> np.ndarray:
    """[n_out, n_in] weights of area resampling: output pixel i averages the input it covers."""
    edges = np.arange(n_out + 1)[:, None] * (n_in / n_out)
    overlap = np.minimum(edges[1:], np.arange(1, n_in + 1)) - np.maximum(
        edges[:-1], np.arange(n_in)
    )
    return np.clip(overlap, 0, None) / (n_in / n_out)


def mnist_preprocess(ink: np.ndarray, centre: str = "mass", name="image") -> np.ndarray:
    """Ink [H, W] -> float32 [28, 28]: crop, longest side 20 px, centred by ``"mass"``, ``"box"`` or ``"none"``.

    ``"mass"`` is MNIST's centre of mass, ``"box"`` the bounding box's centre, ``"none"`` no crop and no centring
    (the whole drawing resized, what a naive program does). No ink at all is a ``DrawingError``."""
    ink = np.asarray(ink, dtype=np.float64)
    if centre not in ("mass", "box", "none"):
        raise ValueError(f"centre must be 'mass', 'box' or 'none', got {centre!r}")
    rows, cols = np.nonzero(ink >= INK_THRESHOLD)
    if len(rows) == 0:
        raise DrawingError(
            f"{name}: no ink found (no pixel reaches {INK_THRESHOLD:.0%} ink): the drawing is empty"
        )
    if centre == "none":
        whole = (
            _area_weights(ink.shape[0], FIELD_SIDE)
            @ ink
            @ _area_weights(ink.shape[1], FIELD_SIDE).T
        )
        return np.clip(whole, 0, 1).astype(np.float32)
    # 1. crop to the bounding box of the inked pixels
    crop = ink[rows.min() : rows.max() + 1, cols.min() : cols.max() + 1]
    height, width = crop.shape
    # 2. scale so that the longest side is BOX_SIDE pixels, keeping the aspect ratio
    new_h, new_w = (
        max(1, int(np.floor(side * BOX_SIDE / max(height, width) + 0.5)))
        for side in (height, width)
    )
    small = _area_weights(height, new_h) @ crop @ _area_weights(width, new_w).T
    # 3. place it in the field with its centre (of mass, or of the box) at the field's centre
    centre_y, centre_x = (new_h - 1) / 2, (new_w - 1) / 2
    if centre == "mass":
        centre_y = (small.sum(axis=1) * np.arange(new_h)).sum() / small.sum()
        centre_x = (small.sum(axis=0) * np.arange(new_w)).sum() / small.sum()
    # 13.5: the field's centre in pixel-index coordinates
    middle = (FIELD_SIDE - 1) / 2
    top = min(max(int(np.floor(middle - centre_y + 0.5)), 0), FIELD_SIDE - new_h)
    left = min(max(int(np.floor(middle - centre_x + 0.5)), 0), FIELD_SIDE - new_w)
    field = np.zeros((FIELD_SIDE, FIELD_SIDE))
    field[top : top + new_h, left : left + new_w] = small
    return np.clip(field, 0, 1).astype(np.float32)


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax of logits [N, classes], stable for large logits (web/preprocess.js's ``softmax``)."""
    exp = np.exp(logits - logits.max(axis=1, keepdims=True))
    return exp / exp.sum(axis=1, keepdims=True)
