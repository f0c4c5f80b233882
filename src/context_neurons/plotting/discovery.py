"""Figures of chapter 5: scores, the theta sweep, token contributions and neurons along texts."""

from __future__ import annotations

import matplotlib
import matplotlib.figure
import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import pandas as pd
import torch

from context_neurons.plotting.style import (
    APPROX_COLOUR,
    TRUE_COLOUR,
    DOWN_COLOUR,
    UP_COLOUR,
    sign_colours,
)

CURVE_STYLES: dict[str, dict] = {
    "true": dict(color=TRUE_COLOUR, lw=1.0),
    "approximation": dict(color=APPROX_COLOUR, lw=1.0, ls="--"),
    "bag only": dict(color="tab:blue", lw=0.8, ls=":"),
    "local terms": dict(color="0.7", lw=0.8, zorder=1),
    "true minus local": dict(color=TRUE_COLOUR, lw=1.0),
    "bag + positional": dict(color=APPROX_COLOUR, lw=1.0, ls="--"),
}
MARK_COLOURS = {1: (UP_COLOUR, "up-token"), -1: (DOWN_COLOUR, "down-token")}


def plot_scores(scores, theta, planted=None, null=None, title: str = ""):
    """Histogram of the discovery score ``top[j]`` of all neurons (log scale), threshold marked.

    Args:
        scores: the :class:`~context_neurons.discovery.NeuronScores`.
        theta: the threshold (dashed line).
        planted: planted context neurons (planted model only), drawn in red as "planted truth".
        null: the Gaussian null score (dotted line).
        title: the axes' title (name the model in it).
    """
    top = scores.top.cpu().numpy()
    fig, ax = plt.subplots(figsize=(8, 3.4))
    bins = np.logspace(np.log10(max(top.min(), 1e-2)), np.log10(top.max() * 1.05), 60)
    if planted is not None:
        mask = np.zeros(len(top), dtype=bool)
        mask[list(planted)] = True
        ax.hist(top[~mask], bins=bins, color="tab:blue", label="other neurons")
        ax.hist(top[mask], bins=bins, color="tab:red", label="planted truth: context neurons")
    else:
        ax.hist(top, bins=bins, color="tab:blue", label="all neurons")
    ax.axvline(theta, color="k", ls="--", lw=1.2, label=f"theta = {theta:g}")
    if null is not None:
        ax.axvline(null, color="grey", ls=":", lw=1.2, label=f"Gaussian null = {null:.2f}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"top[j]: mean of the {scores.k} largest robust |z| of the token contributions")
    ax.set_ylabel("neurons")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_loudness(norms, shares, fraction: float, title: str = ""):
    """Two panels: the extended embeddings' norms over the vocabulary (log scale) with the loudest
    ``fraction`` marked, and each neuron's share of extreme-token slots held by those tokens.

    Args:
        norms: ``|e(t)|`` of the scored tokens.
        shares: :func:`~context_neurons.discovery.loud_slot_shares`, one value per neuron.
        fraction: the share of the vocabulary called loud.
        title: the figure's title (name the model in it).
    """
    norms = np.asarray(torch.as_tensor(norms).double().cpu())
    shares = np.asarray(torch.as_tensor(shares).double().cpu())
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.2))
    positive = norms[norms > 0]
    bins = np.logspace(np.log10(positive.min()), np.log10(positive.max() * 1.05), 60)
    left.hist(positive, bins=bins, color="tab:blue")
    cut = np.quantile(norms, 1 - fraction)
    left.axvline(cut, color="k", ls="--", lw=1.2, label=f"loudest {fraction:.0%} of tokens")
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("|e(t)|, extended embedding norm")
    left.set_ylabel("tokens")
    left.legend(fontsize=8)
    right.hist(shares, bins=np.linspace(0, 1, 21), color="tab:orange")
    right.axvline(fraction, color="grey", ls=":", lw=1.2, label="if loudness played no part")
    right.set_xlabel("share of a neuron's extreme tokens that are loudest tokens")
    right.set_ylabel("neurons")
    right.legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def plot_sweep(sweep: pd.DataFrame, theta, title: str = ""):
    """Neurons found against the threshold (and precision/recall when the sweep has them)."""
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.plot(sweep.index, sweep["neurons found"], "o-", label="neurons found")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("theta")
    ax.set_ylabel("neurons found")
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xticks([t for t in sweep.index if float(t).is_integer()])
    ax.axvline(theta, color="k", ls="--", lw=1.0)
    ax.set_title(title, fontsize=9)
    if "precision" in sweep:
        ax2 = ax.twinx()
        ax2.plot(sweep.index, sweep["precision"], "s--", color="tab:green", label="precision")
        ax2.plot(sweep.index, sweep["recall"], "^--", color="tab:red", label="recall")
        ax2.set_ylim(-0.05, 1.05)
        ax2.set_ylabel("precision, recall (planted truth)")
        ax2.legend(fontsize=8, loc="center right")
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    return fig


def plot_token_bars(table: pd.DataFrame, neuron, k: int = 10, ax=None, title: str | None = None):
    """Top and bottom token contributions of one neuron as horizontal bars (a ``token_table``)."""
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(5, 0.28 * 2 * k + 0.8))
    top, bottom = table.iloc[:k], table.iloc[:k]
    labels = list(top["top token"]) + list(bottom["bottom token"])[::-1]
    values = list(top["top contribution"]) + list(bottom["bottom contribution"])[::-1]
    y = np.arange(len(values))
    ax.barh(y, values, color=sign_colours(values))
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
    ax.axvline(0, color="k", lw=0.6)
    ax.set_title(title if title is not None else f"neuron {neuron}", fontsize=9)
    ax.tick_params(axis="x", labelsize=7)
    if own:
        ax.set_xlabel("contribution to the pre-activation")
        ax.figure.tight_layout()
        return ax.figure
    return ax


def plot_activation_curves(
    curves: dict[str, torch.Tensor],
    title: str = "",
    start: int = 1,
    ax=None,
    legend: bool = True,
    marks: torch.Tensor | None = None,
    baseline: float | None = None,
    figsize: tuple[float, float] = (8, 3.0),
    mark_names: dict[int, str] | None = None,
    baseline_label: str = "median over texts",
    ylabel: str = "pre-activation",
):
    """True and approximate pre-activation of one neuron along one text.

    Args:
        curves: name -> ``[pos]`` values (``"true"``, ``"approximation"``, ``"bag only"``).
        title: the axes' title.
        start: first position drawn.
        ax: draw into these axes (default: a new figure of ``figsize``).
        legend: draw a legend.
        marks: ``[pos]`` of +1 / -1 / 0: ticks at the bottom where the neuron's up-tokens (red)
            and down-tokens (blue) occur.
        baseline: a dotted horizontal line (e.g. the neuron's median over many texts).
        figsize: the size of a new figure.
        mark_names: legend names of the marks by sign (default ``up-token``, ``down-token``).
        baseline_label: the legend name of the baseline.
        ylabel: the y axis' label.
    """
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=figsize)
    for name, values in curves.items():
        values = torch.as_tensor(values).detach().cpu()
        x = np.arange(start, len(values))
        ax.plot(x, values[start:].numpy(), label=name, **CURVE_STYLES.get(name, {}))
    if baseline is not None:
        ax.axhline(baseline, color="grey", ls=":", lw=1.0, label=baseline_label)
    if marks is not None:
        _draw_marks(ax, torch.as_tensor(marks).detach().cpu(), start, mark_names)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("position n")
    ax.set_ylabel(ylabel)
    if legend:
        ax.legend(fontsize=7, ncol=2)
    if own:
        ax.figure.tight_layout()
        return ax.figure
    return ax


def _draw_marks(ax, marks: torch.Tensor, start: int, names: dict[int, str] | None = None) -> None:
    """Ticks along the bottom of ``ax`` where ``marks`` is +1 (red) or -1 (blue).

    ``names`` (sign -> legend name) replaces the default names and draws only those signs.
    """
    for sign, (colour, name) in MARK_COLOURS.items():
        if names is not None and sign not in names:
            continue
        name = name if names is None else names[sign]
        x = (marks == sign).nonzero().flatten().numpy()
        x = x[x >= start]
        transform = ax.get_xaxis_transform()  # x in data units, y in axes units
        ax.vlines(x, 0, 0.08, transform=transform, color=colour, lw=0.9, label=name)


def plot_activation_grid(
    panels: list[dict], columns: int = 2, height: float = 2.1, title: str = ""
):
    """Several :func:`plot_activation_curves` panels in a grid (legend on the first only).

    Args:
        panels: dicts with ``curves`` and optionally ``marks``, ``baseline``, ``title`` and the
            other keyword arguments of :func:`plot_activation_curves` (``mark_names``,
            ``baseline_label``, ``ylabel``).
        columns: panels per row.
        height: inches per row.
        title: the figure's title (name the model in it).
    """
    if not panels:
        raise ValueError("plot_activation_grid needs at least one panel.")
    rows = (len(panels) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(5.0 * columns, height * rows), squeeze=False)
    for k, (ax, panel) in enumerate(zip(axes.flat, panels)):
        plot_activation_curves(
            panel["curves"],
            title=panel.get("title", ""),
            ax=ax,
            legend=k == 0,
            marks=panel.get("marks"),
            baseline=panel.get("baseline"),
            **{
                key: panel[key]
                for key in ("mark_names", "baseline_label", "ylabel")
                if key in panel
            },
        )
        if k < len(panels) - columns:  # a panel below shares the x axis' meaning
            ax.set_xlabel("")
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def robust_limit(values, quantile: float = 0.95) -> float:
    """A symmetric colour limit: the ``quantile`` of ``|values|`` (NaN ignored; 1 if all zero).

    A single extreme cell then saturates instead of washing out every other cell.
    """
    finite = np.abs(np.asarray(values, dtype=float))
    finite = finite[np.isfinite(finite)]
    limit = float(np.quantile(finite, quantile)) if finite.size else 0.0
    return limit if limit > 0 else 1.0


def plot_domain_profile(
    profile: pd.DataFrame,
    title: str = "",
    limit: float | None = None,
    colorbar_label: str = "",
    annotate: bool = True,
):
    """Heat map: rows neurons, columns text domains, values e.g. mean pre-activation.

    Args:
        profile: the values, rows neurons and columns domains.
        title: the axes' title (name the model in it).
        limit: the colour scale's symmetric limit; values beyond it saturate (the colour bar's
            arrows). Default :func:`robust_limit`, so that one neuron cannot wash out the rest.
        colorbar_label: what the colours measure.
        annotate: write each cell's value in it (one decimal).
    """
    fig, ax = plt.subplots(figsize=(0.75 * profile.shape[1] + 2.4, 0.32 * profile.shape[0] + 1.6))
    values = profile.to_numpy(dtype=float)
    lim = robust_limit(values) if limit is None else float(limit)
    image = ax.imshow(values, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto")
    if annotate:
        for (r, c), value in np.ndenumerate(values):
            if np.isfinite(value):
                colour = "white" if abs(value) > 0.6 * lim else "black"
                text = f"{value:.1f}".replace("-0.0", "0.0")
                ax.text(c, r, text, ha="center", va="center", fontsize=6, color=colour)
    ax.set_xticks(range(profile.shape[1]), profile.columns, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(profile.shape[0]), [str(i) for i in profile.index], fontsize=8)
    ax.set_ylabel("neuron")
    ax.grid(False)
    ax.set_title(title, fontsize=9)
    extend = "both" if np.nanmax(np.abs(values)) > lim else "neither"
    bar = fig.colorbar(image, ax=ax, shrink=0.8, extend=extend)
    if colorbar_label:
        bar.set_label(colorbar_label, fontsize=8)
    fig.tight_layout()
    return fig


def plot_gallery(
    tables: dict[int, pd.DataFrame],
    scores: dict[int, float],
    k: int = 5,
    columns: int = 4,
    title: str = "",
) -> matplotlib.figure.Figure:
    """A grid of small bar charts of top and bottom contributions, one per neuron (in order).

    Args:
        tables: neuron -> token table (:func:`context_neurons.discovery.token_tables`).
        scores: neuron -> its score ``top[j]`` (for the panel titles).
        k: tokens per side.
        columns: panels per row.
        title: the figure's title (name the model in it).
    """
    neurons = list(tables)
    rows = (len(neurons) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(3.1 * columns, 2.3 * rows), squeeze=False)
    for ax, j in zip(axes.flat, neurons):
        plot_token_bars(tables[j], j, k=k, ax=ax, title=f"neuron {j} (score {scores[j]:.0f})")
    for ax in list(axes.flat)[len(neurons) :]:
        ax.axis("off")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_contributions(
    frame: pd.DataFrame, neuron: int, model_title: str = ""
) -> matplotlib.figure.Figure:
    """Horizontal bars of the top and bottom contributions (from :func:`context_neurons.interactive.contribution_frame`).

    Bars are coloured as in the chapters' figures (:func:`plot_token_bars`): red for a
    contribution that pushes the neuron up (positive), blue for one that pushes it down.
    ``model_title`` (e.g. ``loaded.title``) is added to the title.
    """
    figure, (left, right) = plt.subplots(1, 2, figsize=(8, 0.25 * len(frame) + 1.2))
    for ax, side in ((left, "bottom"), (right, "top")):
        values = frame[f"{side} contribution"]
        ax.barh(range(len(frame)), values, color=sign_colours(values))
        ax.set_yticks(range(len(frame)), frame[f"{side} token"], fontsize=8)
        ax.invert_yaxis()
        ax.set_title(f"{side} tokens", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    right.yaxis.tick_right()
    suffix = f" ({model_title})" if model_title else ""
    figure.suptitle(f"layer-0 neuron {neuron}: contribution e(t) . w{suffix}", fontsize=10)
    figure.tight_layout()
    return figure
