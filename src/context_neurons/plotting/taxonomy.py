"""Figures of chapter 2: kernel shapes, the head map and destination dependence."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import matplotlib.ticker as ticker
import torch
from jaxtyping import Float
from torch import Tensor

from context_neurons.plotting.style import GROUP_COLOURS, head_colour, head_column, unique_legend

#: A panel of Figure 2 shows each member kernel up to the distance holding this much of its mass.
PANEL_MASS = 0.99
#: The shortest panel range, in tokens (a kernel on one or two tokens still shows its neighbours).
MIN_PANEL_RANGE = 10


def panel_range(patterns: Float[Tensor, "selected_head key_pos"], mass: float = PANEL_MASS) -> int:
    """How many tokens back a panel must reach: the largest distance ``n - i`` needed to hold
    ``mass`` of any row's kernel, with a fifth more room, at least :data:`MIN_PANEL_RANGE` and
    never past position 0."""
    n = patterns.shape[-1] - 1
    if len(patterns) == 0:
        return n
    from_n = patterns.double().flip(-1).cumsum(-1)  # mass of positions n-k..n, per row
    reach = int((from_n < mass).sum(-1).max())  # the largest k still short of the mass
    return min(n, max(MIN_PANEL_RANGE, math.ceil(1.2 * (reach + 1))))


def plot_kernel_shapes(
    patterns: Float[Tensor, "selected_head key_pos"],
    heads: list[int],
    shapes: dict[int, str],
    title: str = "",
):
    """Figure 2: positional patterns of all heads, one panel per computed kernel shape.

    Each panel's range comes from its kernels (:func:`panel_range`): wide enough for the widest
    member; uniform kernels are drawn over the whole context.

    Args:
        patterns: ``pos_n(i)`` for ``i = 0..n`` (one row per head).
        heads: the head of each row.
        shapes: the computed kernel shape of each head.
        title: the figure's title (name the model that produced it).
    """
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.5))
    n = patterns.shape[-1] - 1
    for ax, shape in zip(axes, ("slowly decaying", "local", "uniform")):
        rows = [k for k, head in enumerate(heads) if shapes[head] == shape]
        members = patterns.cpu()[rows]
        back = n if shape == "uniform" else panel_range(members)
        for row, k in zip(members, rows):
            ax.plot(
                torch.arange(back + 1),
                row.flip(0)[: back + 1],
                lw=1.4,
                color=head_colour(heads[k]),
                label=f"head {heads[k]}",
            )
        ax.set_title(shape)
        ax.set_xlabel("tokens back from the destination, n - i")
        if rows:
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
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_head_map(
    n_eff: Float[Tensor, " selected_head"],
    self_z: Float[Tensor, " selected_head"],
    heads: list[int],
    groups: dict[str, list[int]],
    local_max: float,
    duplicate_min: float,
    uniform_min: float,
    title: str = "",
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
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_destination_dependence(
    patterns: Float[Tensor, "dest selected_head key_pos"],
    destinations: list[str],
    heads: list[int],
    show: list[int],
    back: int | None = None,
    title: str = "",
):
    """Positional patterns of a few heads for several destination tokens (overlaid).

    ``back``: how many tokens back each panel reaches (default: from the kernels drawn,
    :func:`panel_range`).
    """
    fig, axes = plt.subplots(1, len(show), figsize=(3.7 * len(show), 3.0), squeeze=False)
    for ax, head in zip(axes[0], show):
        k = head_column(heads, head)
        reach = panel_range(patterns[:, k]) if back is None else back
        for d, name in enumerate(destinations):
            row = patterns[d, k].cpu().flip(0)[: reach + 1]
            ax.plot(torch.arange(len(row)), row, lw=1.0, label=repr(name))
        ax.set_title(f"head {head}")
        ax.set_xlabel("n - i")
        ax.set_ylim(bottom=0)
    axes[0, 0].set_ylabel("pos_n(i)")
    axes[0, -1].legend(fontsize=7, ncol=2)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
