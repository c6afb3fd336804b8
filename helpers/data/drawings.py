"""Drawings (RGBA, any size, either polarity) made from real MNIST test digits, for notebook 04 and the tests."""

from __future__ import annotations

import numpy as np


def draw(
    digit: np.ndarray,
    canvas: int = 280,
    scale: int = 8,
    shift: tuple[int, int] = (0, 0),
    stroke: int = 0,
    style: str = "dark-on-light",
) -> np.ndarray:
    """An MNIST digit as an RGBA drawing [canvas, canvas, 4] in ``style``, scaled, shifted and stroked."""
    ink = np.kron(np.asarray(digit, np.uint8), np.ones((scale, scale), np.uint8))
    if stroke:  # thicken (maximum over a square) or thin (minimum) the strokes
        pad, pick = abs(stroke), np.maximum if stroke > 0 else np.minimum
        ink = np.pad(ink, max(stroke, 0))
        padded, out = np.pad(ink, pad), ink.copy()
        for dy in range(2 * pad + 1):
            for dx in range(2 * pad + 1):
                out = pick(out, padded[dy : dy + ink.shape[0], dx : dx + ink.shape[1]])
        ink = out
    rows, cols = np.nonzero(ink)
    # the strokes only, placed below
    ink = ink[rows.min() : rows.max() + 1, cols.min() : cols.max() + 1]
    height, width = ink.shape
    if height > canvas or width > canvas:
        raise ValueError(f"a {width}x{height}-pixel digit does not fit the {canvas}-pixel canvas")
    top = min(max((canvas - height) // 2 + shift[0], 0), canvas - height)
    left = min(max((canvas - width) // 2 + shift[1], 0), canvas - width)
    full = np.zeros((canvas, canvas), np.uint8)
    full[top : top + height, left : left + width] = ink
    grey, alpha = {
        "dark-on-light": (255 - full, 255),
        "dark-on-transparent": (0, full),
        "light-on-dark": (full, 255),
    }[style]
    return np.dstack(np.broadcast_arrays(grey, grey, grey, alpha)).astype(np.uint8)


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
