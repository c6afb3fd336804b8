"""Drawings made from real MNIST test digits, to test preprocessing the way a person's drawing arrives.

A drawing here is what a canvas or a paint program gives: an RGBA image (uint8 [H, W, 4]) much larger than
28x28, the digit anywhere in it, at any size, with thick or thin strokes, dark ink on a light or a transparent
background. Notebook 04 and ``tests/test_web.py`` feed such drawings to ``helpers.predict --preprocess mnist``
and to ``web/preprocess.js`` and compare both with the un-drawn digits. Plumbing, not the lesson.
"""
from __future__ import annotations

import numpy as np

STYLES = ("dark-on-light", "dark-on-transparent", "light-on-dark")


def _grow(ink: np.ndarray, pixels: int) -> np.ndarray:
    """Thicken (pixels > 0: maximum over a square) or thin (pixels < 0: minimum) the strokes."""
    out = ink.copy()
    pad = abs(pixels)
    padded = np.pad(ink, pad)
    pick = np.maximum if pixels > 0 else np.minimum
    for dy in range(-pad, pad + 1):
        for dx in range(-pad, pad + 1):
            out = pick(out, padded[pad + dy:pad + dy + ink.shape[0], pad + dx:pad + dx + ink.shape[1]])
    return out


def draw(digit: np.ndarray, canvas: int = 280, scale: int = 8, shift: tuple[int, int] = (0, 0), stroke: int = 0,
         style: str = "dark-on-light") -> np.ndarray:
    """An MNIST digit (uint8 [28, 28], white on black) as a drawing: uint8 RGBA [canvas, canvas, 4].

    ``scale``: each digit pixel becomes scale x scale pixels; ``shift``: (down, right) offset of the digit from
    the canvas centre in canvas pixels (clamped so the strokes stay on it); ``stroke``: pixels added to (or, negative, removed from) each stroke.
    """
    if style not in STYLES:
        raise ValueError(f"style must be one of {STYLES}, got {style!r}")
    ink = np.kron(np.asarray(digit, np.uint8), np.ones((scale, scale), np.uint8))
    if stroke:
        ink = _grow(np.pad(ink, max(stroke, 0)), stroke)
    rows, cols = np.nonzero(ink)
    if len(rows) == 0:
        raise ValueError("the digit is blank")
    ink = ink[rows.min():rows.max() + 1, cols.min():cols.max() + 1]  # the strokes only, placed below
    height, width = ink.shape
    if height > canvas or width > canvas:
        raise ValueError(f"a {width}x{height}-pixel digit does not fit the {canvas}-pixel canvas")
    # the shift is clamped so that every stroke stays on the canvas
    top = min(max((canvas - height) // 2 + shift[0], 0), canvas - height)
    left = min(max((canvas - width) // 2 + shift[1], 0), canvas - width)
    full = np.zeros((canvas, canvas), np.uint8)
    full[top:top + height, left:left + width] = ink
    rgba = np.empty((canvas, canvas, 4), np.uint8)
    if style == "dark-on-light":
        rgba[..., :3], rgba[..., 3] = (255 - full)[..., None], 255
    elif style == "dark-on-transparent":
        rgba[..., :3], rgba[..., 3] = 0, full
    else:
        rgba[..., :3], rgba[..., 3] = full[..., None], 255
    return rgba


def variants(rng: np.random.Generator) -> dict[str, dict]:
    """Named ways of drawing a digit (keyword arguments for ``draw``), the shift drawn at random per call."""
    shift = tuple(int(v) for v in rng.integers(-60, 61, size=2))
    return {
        "centred, dark on light": {},
        "shifted": {"shift": shift},
        "small (scale 4)": {"scale": 4, "shift": shift},
        "large (scale 9)": {"scale": 9},
        "thick strokes": {"stroke": 6},
        "thin strokes": {"stroke": -2},
        "dark on transparent": {"style": "dark-on-transparent", "shift": shift},
        "light on dark": {"style": "light-on-dark"},
    }
