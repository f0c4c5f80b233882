"""Plotting for chapters 2 and 3. This module holds the figures of the head taxonomy and the theory.

Thin matplotlib wrappers in the style of :mod:`context_neurons.plotting` (same colours per head):
each takes tensors or tables computed in :mod:`context_neurons.taxonomy` or
:mod:`context_neurons.stability`, draws one figure and returns it.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import matplotlib.ticker as ticker
import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor

from context_neurons.plotting import head_colour
from context_neurons.stability import DenominatorStudy

GROUP_COLOURS = {
    "contextual": "tab:blue",
    "detokenization": "tab:red",
    "duplicate": "tab:green",
    "miscellaneous": "tab:gray",
}
#: How far back each kernel shape is drawn (tokens before the destination).
SHAPE_RANGE = {"slowly decaying": 200, "local": 30, "uniform": None}


def _grid(n_panels: int, n_cols: int = 3, size: tuple[float, float] = (3.3, 2.6)):
    n_rows = math.ceil(n_panels / n_cols)
    fig, axes = plt.subplots(
        n_rows, n_cols, figsize=(size[0] * n_cols, size[1] * n_rows), squeeze=False
    )
    for ax in axes.flat[n_panels:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n_panels])


def _column(heads: list[int], head: int) -> int:
    if head not in heads:
        raise ValueError(f"Head {head} is not among the heads given ({heads}); show only those.")
    return heads.index(head)


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
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    ax.legend(unique.values(), unique.keys(), fontsize=8, loc="upper left")
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
        k = _column(heads, head)
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


def plot_relative_denominators(
    relative: Float[Tensor, "text selected_head pos"],
    heads: list[int],
    show: list[int],
    labels: list[str] | None = None,
    positions: Int[Tensor, "query_pos"] | None = None,
    start: int = 1,
):
    """Figure 3: ``D_{h,i} / c_{h,i}`` against position ``i`` for a few texts, one panel per head.

    Args:
        relative: denominators divided by their mean over texts (see
            :func:`context_neurons.stability.relative_denominators`).
        heads: the head of each column of ``relative``.
        show: indices of the texts to draw.
        labels: text labels for the legend.
        positions: the position of each column (default ``0, 1, 2, ...``).
        start: first column drawn.
    """
    fig, axes = _grid(len(heads))
    if positions is None:
        positions = torch.arange(relative.shape[-1])
    for k, (ax, head) in enumerate(zip(axes, heads)):
        for j, text in enumerate(show):
            values = relative[text, k, start:].cpu()
            ax.plot(
                positions[start:].cpu(),
                values,
                lw=0.7,
                label=labels[text] if labels else f"text {text}",
                color=f"C{j}",
            )
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_title(f"head {head}")
        ax.set_xlabel("position i")
    for ax in axes[::3]:
        ax.set_ylabel("D_{h,i} / c_{h,i}")
    axes[-1].legend(fontsize=6, loc="upper right")
    low = min(ax.get_ylim()[0] for ax in axes)
    high = max(ax.get_ylim()[1] for ax in axes)
    for ax in axes:
        ax.set_ylim(low, high)
    fig.tight_layout()
    return fig


def plot_denominator_histograms(
    study: DenominatorStudy, heads: list[int], n_samples: int = 4000, bins: int = 40
):
    """Figure 4: ``D_h / mu`` at ``n`` across texts, beside i.i.d. texts and the model's normal."""
    fig, axes = _grid(len(heads))
    for ax, head in zip(axes, heads):
        measured = study.measured(head)
        simulated = study.simulate(head, n_samples)
        mean, sd = study.predicted_mean(head), study.predicted_sd(head)
        low = min(float(measured.min()), mean - 4 * sd)
        high = max(float(measured.max()), mean + 4 * sd)
        edges = torch.linspace(low, high, bins + 1)
        ax.hist(
            measured,
            bins=edges,
            density=True,
            color=head_colour(head),
            alpha=0.75,
            label=f"{len(measured)} texts",
        )
        ax.hist(
            simulated,
            bins=edges,
            density=True,
            histtype="step",
            color="k",
            lw=1,
            label="i.i.d. texts",
        )
        x = torch.linspace(low, high, 200)
        normal = torch.exp(-0.5 * ((x - mean) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))
        ax.plot(x, normal, "--", color="tab:orange", lw=1.2, label="mean ± model sd (normal)")
        ax.set_title(f"head {head}: CV {float(measured.std() / measured.mean()):.3f}")
        ax.set_xlabel(f"D / mu at n = {study.n}")
    axes[0].legend(fontsize=6)
    fig.tight_layout()
    return fig


def plot_tail_bounds(tails: dict[int, pd.DataFrame], n_cols: int = 3):
    """Tail probabilities of ``|D/mu - E|`` against ``t``: measured, i.i.d., Chebyshev, Hoeffding.

    Args:
        tails: per head, the DataFrame of :meth:`~context_neurons.stability.DenominatorStudy.tails`.
        n_cols: panels per row.
    """
    fig, axes = _grid(len(tails), n_cols=n_cols)
    styles = {
        "texts": dict(lw=2.0),
        "i.i.d. texts": dict(color="k", lw=1.0),
        "Chebyshev": dict(color="tab:orange", ls="--"),
        "Hoeffding": dict(color="tab:purple", ls="-."),
    }
    for ax, (head, frame) in zip(axes, tails.items()):
        for column, style in styles.items():
            values = frame[column].clip(lower=1e-4)
            extra = {"color": head_colour(head)} if column == "texts" else {}
            ax.plot(frame["t"], values, label=column, **style, **extra)
        ax.set_yscale("log")
        ax.set_ylim(1e-3, 1.5)
        ax.set_title(f"head {head}")
        ax.set_xlabel("t (units of mu)")
    for ax in axes[::n_cols]:
        ax.set_ylabel("P(|D/mu - E| >= t)")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_concentration(table: pd.DataFrame, groups: dict[str, list[int]]):
    """Measured coefficient of variation against the number of random tokens averaged over.

    The horizontal axis is ``n_eff random`` (the width over the random positions ``0 < i < n``),
    the open circles the prediction ``rho (sigma/mu) / sqrt(n_eff random)`` of
    :meth:`~context_neurons.stability.DenominatorStudy.predicted_cv`.

    Args:
        table: :meth:`~context_neurons.stability.DenominatorStudy.table` (index: head).
        groups: the computed head groups (for colours).
    """
    fig, ax = plt.subplots(figsize=(7, 3.8))
    group_of = {h: g for g, members in groups.items() for h in members}
    for head, row in table.iterrows():
        colour = GROUP_COLOURS[group_of.get(head, "miscellaneous")]
        x = row["n_eff random"]
        ax.errorbar(
            x,
            row["CV texts"],
            yerr=row["CV texts se"],
            fmt="o",
            ms=7,
            color=colour,
            zorder=3,
            label=group_of.get(head, "miscellaneous"),
        )
        ax.scatter(
            x,
            row["CV predicted"],
            s=60,
            facecolors="none",
            edgecolors="k",
            zorder=4,
            label="predicted rho sigma / (mu sqrt(n_eff random))",
        )
        ax.annotate(
            str(head), (x, row["CV texts"]), textcoords="offset points", xytext=(5, 4), fontsize=9
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(ticker.FixedLocator([0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]))
    ax.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    ax.xaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    ax.set_xlabel("n_eff random: tokens averaged over at 0 < i < n")
    ax.set_ylabel("CV of D across texts")
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    ax.legend(unique.values(), unique.keys(), fontsize=8)
    fig.tight_layout()
    return fig


def plot_density_effect(
    density: Float[Tensor, "text selected_head"],
    ratio: Float[Tensor, "text selected_head"],
    corpus: list[str],
    heads: list[int],
    show: list[int],
    titles: dict[int, str] | None = None,
):
    """``D / mu`` against the kernel-weighted share of stop words, texts coloured by corpus.

    Args:
        density: the share of each head's kernel on stop words, per text.
        ratio: ``D / mu`` per text and head.
        corpus: the corpus name of each text.
        heads: the head of each column.
        show: the heads to draw.
        titles: an optional panel title per head.
    """
    fig, axes = plt.subplots(1, len(show), figsize=(4.2 * len(show), 3.4), squeeze=False)
    names = sorted(set(corpus))
    for ax, head in zip(axes[0], show):
        k = _column(heads, head)
        for j, name in enumerate(names):
            keep = torch.tensor([c == name for c in corpus])
            ax.scatter(density[keep, k], ratio[keep, k], s=8, alpha=0.6, color=f"C{j}", label=name)
        ax.set_title((titles or {}).get(head, f"head {head}"), fontsize=9)
        ax.set_xlabel("share of the kernel on stop words")
        ax.set_ylabel("D / mu")
    axes[0, 0].legend(fontsize=7, markerscale=2)
    fig.tight_layout()
    return fig
