"""Pictures the notebooks show: digit grids and bar charts (matplotlib imported inside each function)."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def setup_style() -> None:
    """Plot defaults used by every notebook (the Setup cell calls this)."""
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "figure.dpi": 90,
            "axes.titlesize": 10,
            "axes.labelsize": 9,
            "xtick.labelsize": 8,
            "ytick.labelsize": 8,
            "figure.autolayout": True,
        }
    )


def show_digits(
    images: np.ndarray,
    labels: Sequence,
    predictions: Sequence,
    ncols: int = 10,
    title: str | None = None,
):
    """Grid of 28x28 digits titled label→prediction (red if wrong)."""
    import matplotlib.pyplot as plt

    images = np.asarray(images).reshape(-1, 28, 28)
    n = len(images)
    nrows = max(1, int(np.ceil(n / ncols)))
    fig, axes = plt.subplots(nrows, ncols, figsize=(1.1 * ncols, 1.3 * nrows), squeeze=False)
    for i, ax in enumerate(axes.flat):
        ax.axis("off")
        if i < n:
            ax.imshow(images[i], cmap="gray_r", vmin=0, vmax=images.max() or 1)
            wrong = int(labels[i]) != int(predictions[i])
            ax.set_title(
                f"{int(labels[i])}→{int(predictions[i])}", color="red" if wrong else "black"
            )
    if title:
        fig.suptitle(title)
    plt.show()
    return fig


def bar_chart(
    names: Sequence[str], values: Sequence[float], ylabel: str, title: str = "", log: bool = False
):
    """A bar chart with each value written on its bar; ``log`` for a logarithmic y axis."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(4.0, 0.8 * len(names) + 1.5), 3.2))
    bars = ax.bar(range(len(names)), values, color="tab:blue")
    ax.bar_label(bars, labels=[f"{v:.3g}" for v in values], fontsize=7)
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
    ax.set(ylabel=ylabel, title=title)
    if log:
        ax.set_yscale("log")
    plt.show()
    return fig


def scatter_chart(points: dict, xlabel: str, ylabel: str, title: str = ""):
    """One dot per ``(series, label): (x, y)`` of ``points``, a colour per series, each dot labelled."""
    import matplotlib.pyplot as plt

    if not points or not all(isinstance(k, tuple) and len(k) == 2 for k in points):
        raise ValueError(
            f"expected a non-empty dict {{(series, label): (x, y)}}, got keys {list(points)[:3]!r}"
        )
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for series in dict.fromkeys(s for s, _ in points):
        mine = {label: xy for (s, label), xy in points.items() if s == series}
        ax.scatter(*zip(*mine.values()), label=series)
        for label, xy in mine.items():
            ax.annotate(label, xy, fontsize=7, xytext=(4, 3), textcoords="offset points")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.legend(fontsize=7)
    plt.show()
    return fig
