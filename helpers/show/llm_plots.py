"""Notebook 07's picture of one generation: what ``max_length`` holds, and what its KV cache costs.

The notebook computes every number (token counts, the KV cache's bytes per token); this module only draws them.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np


def draw_generation_budget(
    prompt_tokens: int,
    answer_tokens: int,
    max_length: int,
    kv_bytes_per_token: int,
    context_length: int,
):
    """Two panels, returned as a figure: ``max_length`` split into prompt | answer | unused, the prefill and
    the decode steps marked (one model run over the prompt, one per answer token after the first); the KV
    cache's MB against ``max_length`` up to ``context_length``, with ``max_length`` and the default marked."""
    sizes = (prompt_tokens, answer_tokens, max_length, kv_bytes_per_token, context_length)
    if any(not isinstance(n, (int, np.integer)) for n in sizes) or not (
        prompt_tokens > 0
        and answer_tokens > 0
        and kv_bytes_per_token > 0
        and prompt_tokens + answer_tokens <= max_length <= context_length
    ):
        raise ValueError(
            "expected whole numbers with prompt > 0, answer > 0, prompt + answer <= max_length <= "
            f"context_length and kv_bytes_per_token > 0, got prompt={prompt_tokens}, answer={answer_tokens}, "
            f"max_length={max_length}, context_length={context_length}, "
            f"kv_bytes_per_token={kv_bytes_per_token}"
        )
    unused = max_length - prompt_tokens - answer_tokens
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(11, 3.4), gridspec_kw={"width_ratios": [1.5, 1]}
    )
    start = 0
    for label, width, color in [
        ("prompt", prompt_tokens, "tab:blue"),
        ("answer", answer_tokens, "tab:orange"),
        ("unused", unused, "lightgray"),
    ]:
        left.barh(0, width, left=start, height=0.5, color=color, label=f"{label}: {width} tokens")
        start += width
    # (where the arrow points, where its text sits), in data coordinates
    marks = [
        (prompt_tokens / 2, (0.02, 0.95), f"prefill: 1 model run over {prompt_tokens} tokens"),
        (
            prompt_tokens + answer_tokens / 2,
            (0.3, 0.45),
            f"decode: {answer_tokens - 1} model runs of 1 token\n(the first answer token needs none)",
        ),
    ]
    for x, (text_x, text_y), text in marks:
        left.annotate(
            text,
            xy=(x, 0.25),
            xytext=(max_length * text_x, text_y),
            fontsize=8,
            va="bottom",
            arrowprops={"arrowstyle": "->", "color": "black", "lw": 0.8},
        )
    left.set(
        xlim=(0, max_length),
        ylim=(-0.35, 1.35),
        yticks=[],
        xlabel="tokens",
        title=f"One generation within max_length = {max_length}",
    )
    left.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncols=3, frameon=False)

    lengths = np.linspace(0, context_length, 200)
    top = context_length * kv_bytes_per_token / 1e6
    right.plot(lengths, lengths * kv_bytes_per_token / 1e6, color="tab:purple")
    for n, label, offset, align in [
        (max_length, "max_length here", (10, 4), "left"),
        (context_length, "the default", (-10, -4), "right"),
    ]:
        mb = n * kv_bytes_per_token / 1e6
        right.plot([n], [mb], "o", color="black")
        right.annotate(
            f"{label}: {n} tokens, {mb:.1f} MB",
            (n, mb),
            textcoords="offset points",
            xytext=offset,
            ha=align,
            va="top" if align == "right" else "bottom",
            fontsize=8,
        )
    right.set(
        xlabel="max_length (tokens)",
        ylabel="KV cache (MB)",
        xlim=(0, context_length * 1.03),
        ylim=(0, top * 1.1),
        title="KV cache allocated for max_length",
    )
    fig.tight_layout()
    return fig
