"""Notebook 07's generation-budget figure: it draws exactly the numbers it is given, and refuses impossible ones."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from helpers.show.llm_plots import draw_generation_budget  # noqa: E402


def test_the_bars_and_the_line_are_the_numbers_given():
    fig = draw_generation_budget(27, 8, 256, 46080, 8192)
    try:
        left, right = fig.axes
        assert [p.get_width() for p in left.patches] == [27, 8, 221]
        assert [p.get_x() for p in left.patches] == [0, 27, 35]
        line = right.lines[0]
        assert np.isclose(line.get_ydata().max(), 8192 * 46080 / 1e6)
        texts = " ".join(t.get_text() for t in left.texts)
        assert "1 model run over 27 tokens" in texts and "7 model runs" in texts
    finally:
        plt.close(fig)


@pytest.mark.parametrize(
    "args",
    [
        (0, 8, 256, 46080, 8192),  # no prompt
        (27, 0, 256, 46080, 8192),  # no answer
        (200, 100, 256, 46080, 8192),  # more than max_length
        (27, 8, 9000, 46080, 8192),  # max_length beyond the context
        (27, 8, 256, 0, 8192),  # no cache
        (27.5, 8, 256, 46080, 8192),  # not a token count
    ],
)
def test_impossible_numbers_are_refused(args):
    with pytest.raises(ValueError, match="expected whole numbers"):
        draw_generation_budget(*args)
