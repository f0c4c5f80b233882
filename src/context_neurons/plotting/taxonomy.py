"""Figures of chapter 2: kernel shapes, the head map and destination dependence."""

from __future__ import annotations

import matplotlib.pyplot as plt
import matplotlib.ticker as ticker
import torch
from jaxtyping import Float
from torch import Tensor

from context_neurons.plotting.style import GROUP_COLOURS, head_colour, head_column, unique_legend

SHAPE_RANGE = {"slowly decaying": 200, "local": 30, "uniform": None}


def plot_kernel_shapes(
    patterns: Float[Tensor, "selected_head key_pos"], heads: list[int], shapes: dict[int, str]
):
    """Figure 2: positional patterns of all heads, one panel per computed kernel shape.

    Args:
        patterns: ``pos_n(i)`` for ``i = 0..n`` (one row per head).
        heads: the head of each row.
        shapes: the computed kernel shape of each head.
    """
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.3))
    n = patterns.shape[-1] - 1
    for ax, shape in zip(axes, ("slowly decaying", "local", "uniform")):
        back = min(SHAPE_RANGE[shape] or n, n)  # never further back than position 0
        members = [(row, head) for row, head in zip(patterns.cpu(), heads) if shapes[head] == shape]
        for row, head in members:
            ax.plot(
                torch.arange(back + 1),
                row.flip(0)[: back + 1],
                lw=1.4,
                color=head_colour(head),
                label=f"head {head}",
            )
        ax.set_title(shape)
        ax.set_xlabel("tokens back from the destination, n - i")
        if members:
            ax.set_ylim(bottom=0)
            ax.legend(fontsize=7)
        else:
            ax.text(
                0.5,
                0.5,
                "no head of this shape",
                ha="center",
                va="center",
                transform=ax.transAxes,
                fontsize=9,
                color="0.4",
            )
    axes[0].set_ylabel(f"positional pattern pos_n(i), n={n}")
    fig.tight_layout()
    return fig


def plot_head_map(
    n_eff: Float[Tensor, "selected_head"],
    self_z: Float[Tensor, "selected_head"],
    heads: list[int],
    groups: dict[str, list[int]],
    local_max: float,
    duplicate_min: float,
    uniform_min: float,
):
    """Every head at its kernel width (x, log) and self-preference (y), coloured by group.

    Dotted: the local threshold; dash-dotted: the uniform threshold; dashed: the duplicate one.
    """
    fig, ax = plt.subplots(figsize=(7, 3.8))
    group_of = {h: g for g, members in groups.items() for h in members}
    for k, head in enumerate(heads):
        group = group_of[head]
        ax.scatter(
            float(n_eff[k]),
            float(self_z[k]),
            s=60,
            color=GROUP_COLOURS[group],
            label=group,
            zorder=3,
        )
        ax.annotate(
            str(head),
            (float(n_eff[k]), float(self_z[k])),
            textcoords="offset points",
            xytext=(5, 4),
            fontsize=9,
        )
    ax.axvline(local_max, color="k", ls=":", lw=1, label=f"local below n_eff {local_max:g}")
    ax.axvline(uniform_min, color="k", ls="-.", lw=1, label=f"uniform above n_eff {uniform_min:g}")
    ax.axhline(duplicate_min, color="k", ls="--", lw=1, label=f"duplicate from z {duplicate_min:g}")
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    ax.set_xlabel("kernel width n_eff (tokens, log scale)")
    ax.set_ylabel("self-preference z of the destination token")
    unique_legend(ax, fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


def plot_destination_dependence(
    patterns: Float[Tensor, "dest selected_head key_pos"],
    destinations: list[str],
    heads: list[int],
    show: list[int],
    back: int = 150,
):
    """Positional patterns of a few heads for several destination tokens (overlaid)."""
    fig, axes = plt.subplots(1, len(show), figsize=(3.7 * len(show), 3.0), squeeze=False)
    for ax, head in zip(axes[0], show):
        k = head_column(heads, head)
        for d, name in enumerate(destinations):
            row = patterns[d, k].cpu().flip(0)[: back + 1]
            ax.plot(torch.arange(len(row)), row, lw=1.0, label=repr(name))
        ax.set_title(f"head {head}")
        ax.set_xlabel("n - i")
        ax.set_ylim(bottom=0)
    axes[0, 0].set_ylabel("pos_n(i)")
    axes[0, -1].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig
