"""Figures of chapter 3: denominators across texts and positions, and the tail bounds."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import matplotlib.ticker as ticker
import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor

from context_neurons.plotting.style import (
    GROUP_COLOURS,
    head_colour,
    head_column,
    panel_grid,
    unique_legend,
)
from context_neurons.stability import DenominatorStudy


def plot_relative_denominators(
    relative: Float[Tensor, "text selected_head pos"],
    heads: list[int],
    show: list[int],
    labels: list[str] | None = None,
    positions: Int[Tensor, " query_pos"] | None = None,
    start: int = 1,
    title: str = "",
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
        title: the figure's title (name the model that produced it).
    """
    fig, axes = panel_grid(len(heads))
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
    _finish(fig, title)
    return fig


def plot_denominators_per_text(study: DenominatorStudy, heads: list[int], title: str = ""):
    """Figure 4: ``D_h / mu`` at ``n`` for every text, texts indexed along the horizontal axis.

    Drawn as in the paper (one point per text), with the independent-token model's mean and its
    mean plus or minus two standard deviations.
    """
    fig, axes = panel_grid(len(heads))
    for ax, head in zip(axes, heads):
        measured = study.measured(head)
        mean, sd = study.predicted_mean(head), study.predicted_sd(head)
        ax.scatter(torch.arange(len(measured)), measured, s=3, color=head_colour(head), alpha=0.7)
        ax.axhline(mean, color="k", lw=1.0, label="model mean")
        for sign in (-1, 1):
            ax.axhline(
                mean + sign * 2 * sd,
                color="k",
                ls="--",
                lw=0.8,
                label="model mean ± 2 sd" if sign > 0 else None,
            )
        ax.set_title(f"head {head}: CV {float(measured.std() / measured.mean()):.3f}")
        ax.set_xlabel("text index")
    for ax in axes[::3]:
        ax.set_ylabel(f"D / mu at n = {study.n}")
    axes[0].legend(fontsize=6)
    _finish(fig, title)
    return fig


def plot_denominator_histograms(
    study: DenominatorStudy,
    heads: list[int],
    n_samples: int = 4000,
    bins: int = 40,
    title: str = "",
):
    """``D_h / mu`` at ``n`` across texts, beside i.i.d. texts and the model's normal."""
    fig, axes = panel_grid(len(heads))
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
    _finish(fig, title)
    return fig


def plot_tail_bounds(tails: dict[int, pd.DataFrame], n_cols: int = 3, title: str = ""):
    """Tail probabilities of ``|D/mu - E|`` against ``t``: measured, i.i.d., Chebyshev, Hoeffding.

    Args:
        tails: per head, the DataFrame of :meth:`~context_neurons.stability.DenominatorStudy.tails`.
        n_cols: panels per row.
    """
    fig, axes = panel_grid(len(tails), n_cols=n_cols)
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
    _finish(fig, title)
    return fig


def plot_concentration(table: pd.DataFrame, groups: dict[str, list[int]], title: str = ""):
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
    unique_legend(ax, fontsize=8)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_density_effect(
    density: Float[Tensor, "text selected_head"],
    ratio: Float[Tensor, "text selected_head"],
    corpus: list[str],
    heads: list[int],
    show: list[int],
    titles: dict[int, str] | None = None,
    title: str = "",
    xlabel: str = "share of the kernel on stop words",
):
    """``D / mu`` against the kernel-weighted share of stop words, texts coloured by corpus.

    Args:
        density: the share of each head's kernel on stop words, per text.
        ratio: ``D / mu`` per text and head.
        corpus: the corpus name of each text.
        heads: the head of each column.
        show: the heads to draw.
        titles: an optional panel title per head.
        title: the figure's title (name the model that produced it).
        xlabel: the horizontal axis' label (say how stop words were defined).
    """
    fig, axes = plt.subplots(1, len(show), figsize=(4.2 * len(show), 3.4), squeeze=False)
    names = sorted(set(corpus))
    for ax, head in zip(axes[0], show):
        k = head_column(heads, head)
        for j, name in enumerate(names):
            keep = torch.tensor([c == name for c in corpus])
            ax.scatter(density[keep, k], ratio[keep, k], s=8, alpha=0.6, color=f"C{j}", label=name)
        ax.set_title((titles or {}).get(head, f"head {head}"), fontsize=9)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("D / mu")
    axes[0, 0].legend(fontsize=7, markerscale=2)
    _finish(fig, title)
    return fig


def _finish(fig, title: str) -> None:
    """A figure-wide title (the model's name) above the panels, then a tight layout."""
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
