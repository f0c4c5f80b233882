"""Figures of the appendix: the GPT-2 difficulties planted in the ground-truth model, and what the
method recovers of it over thresholds."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor

from context_neurons.plotting.style import head_colour


def plot_planted_difficulties(
    position_norms: Float[Tensor, " n_ctx"],
    patterns: Float[Tensor, "head key_pos"],
    heads: list[int],
    exponentials: Float[Tensor, "head key_pos"],
    title: str = "",
):
    """Two panels: ``|W_pos[i]|`` against ``i``, and each contextual head's positional kernel at
    ``n = len - 1`` (log scale) beside the exponential kernel with the same mean distance.

    Args:
        position_norms: the norm of every position's embedding.
        patterns: positional patterns ``pos_n(i)``, one row per head of ``heads``.
        heads: the heads of the rows.
        exponentials: for each row, the exponential kernel with the same mean distance.
        title: the figure's title (name the model in it).
    """
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4))
    left.plot(position_norms.cpu().numpy(), color="black", lw=1)
    left.set_xlabel("position i")
    left.set_ylabel("|W_pos[i]|")
    left.set_title("position norms", fontsize=9)
    n = patterns.shape[-1] - 1
    distance = torch.arange(n, -1, -1)
    shown = distance <= min(n, 300)
    for row, head in enumerate(heads):
        colour = head_colour(head)
        right.semilogy(distance[shown], patterns[row, shown].cpu(), color=colour, lw=1.4,
                       label=f"head {head}")
        right.semilogy(distance[shown], exponentials[row, shown].cpu(), color=colour, lw=0.8,
                       ls="--")
    right.set_xlabel("distance n - i")
    right.set_ylabel("pos_n(i)")
    right.set_title(f"contextual kernels at n = {n} (dashed: exponential, same mean distance)",
                    fontsize=9)
    right.legend(fontsize=7, ncol=2)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_recovery_curve(sweep: pd.DataFrame, theta: float, title: str = ""):
    """Precision and recall of discovery against the planted neurons, over the threshold.

    Args:
        sweep: rows indexed by theta with columns ``precision`` and ``recall``.
        theta: the chapters' threshold (a vertical line).
        title: the axes' title (name the model in it).
    """
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    ax.plot(sweep.index, sweep["precision"], "o-", label="precision")
    ax.plot(sweep.index, sweep["recall"], "s-", label="recall")
    ax.axvline(theta, color="grey", ls=":", label=f"theta = {theta:g}")
    ax.set_xlabel("theta")
    ax.set_ylim(-0.03, 1.03)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
