"""Figures of chapter 1: attention patterns and the reconstruction's total variation distance."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import torch

from context_neurons.plotting.style import head_colour


def plot_tv_over_positions(tv: torch.Tensor, heads: list[int], title: str = "", smooth: int = 1):
    """Figure 1: TV distance between true and reconstructed patterns across destination positions.

    Args:
        tv: ``[head, query_pos]`` TV distances.
        heads: the head index of each row.
        smooth: width of a moving average (1: none).
    """
    fig, ax = plt.subplots(figsize=(8, 3.6))
    for row, head in zip(tv.cpu(), heads):
        values = row
        if smooth > 1:
            kernel = torch.ones(smooth) / smooth
            values = torch.nn.functional.conv1d(
                row[None, None], kernel[None, None], padding="valid"
            )[0, 0]
        ax.plot(
            torch.arange(len(values)) + (smooth - 1) / 2,
            values,
            lw=1.0,
            color=head_colour(head),
            label=f"head {head}",
        )
    ax.set_xlabel("destination position n")
    ax.set_ylabel("TV distance")
    ax.set_title(title, fontsize=10)
    ax.legend(ncol=6, fontsize=8, loc="upper right")
    ax.set_ylim(bottom=0)
    fig.tight_layout()
    return fig


def plot_patterns(
    patterns: dict[str, torch.Tensor], n: int, head: int, window: int = 60, title: str = ""
):
    """Exact, reconstructed and positional patterns of one head at destination ``n``.

    Only the last ``window`` source positions are drawn. ``title`` is prefixed to the head's name
    (name the model that produced the figure).
    """
    fig, ax = plt.subplots(figsize=(8, 3.2))
    lo = max(0, n - window + 1)
    x = torch.arange(lo, n + 1)
    for (name, pattern), style in zip(patterns.items(), ["-", "--", ":"]):
        ax.plot(x, pattern[lo : n + 1].cpu(), style, lw=1.4, label=name)
    ax.set_xlabel("source position i")
    ax.set_ylabel(f"attention from n={n}")
    ax.set_title(f"{title}, head {head}" if title else f"head {head}", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_kernel(frame: pd.DataFrame, head: int, n: int, dest_token: str | int, ax=None):
    """Bar chart of a positional kernel (from :func:`kernel_frame`); returns the figure.

    ``dest_token`` names the destination in the title: a token string, or a token id.
    """
    if ax is None:
        figure, ax = plt.subplots(figsize=(7, 2.6))
    else:
        figure = ax.figure
    ax.bar(frame["source position"], frame["weight"], width=0.9, color="C0")
    ax.set_xlabel("source position i")
    ax.set_ylabel(f"pos_{n}(i)")
    token = f"token id {dest_token}" if isinstance(dest_token, int) else repr(dest_token)
    ax.set_title(f"layer-0 head {head}: positional kernel, {token} at n = {n}")
    ax.grid(alpha=0.3)
    figure.tight_layout()
    return figure
