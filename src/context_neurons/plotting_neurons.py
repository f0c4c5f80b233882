"""Plotting for chapters 4 to 6. This module holds the wrappers behind circuit and neuron figures.

Each function takes results computed elsewhere (:mod:`context_neurons.circuit`,
:mod:`context_neurons.neurons`, :mod:`context_neurons.evaluation`), draws one figure and returns
it; chapters add the caption. Heads keep the colours of
:func:`context_neurons.plotting.head_colour`. Tensors are moved to the CPU before plotting.
"""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import pandas as pd
import torch

from context_neurons.plotting import head_colour

TRUE_COLOUR, APPROX_COLOUR = "black", "tab:orange"
#: Colours of what pushes a neuron up (positive contributions, up-tokens) and down.
UP_COLOUR, DOWN_COLOUR = "tab:red", "tab:blue"


def sign_colours(values) -> list[str]:
    """:data:`UP_COLOUR` for each positive value, :data:`DOWN_COLOUR` for the others."""
    return [UP_COLOUR if float(v) > 0 else DOWN_COLOUR for v in values]


def _smooth(values: torch.Tensor, width: int) -> tuple[np.ndarray, np.ndarray]:
    values = torch.as_tensor(values, dtype=torch.float32).cpu()
    if width <= 1:
        return np.arange(len(values)), values.numpy()
    kernel = torch.ones(width) / width
    out = torch.nn.functional.conv1d(values[None, None], kernel[None, None])[0, 0]
    return np.arange(len(out)) + (width - 1) / 2, out.numpy()


def plot_kernels(circuit, n=500, window=150):
    """Each contextual head's positional pattern at destination ``n`` and the median kernel."""
    fig, ax = plt.subplots(figsize=(8, 3.4))
    lo = max(0, n - window + 1)
    x = np.arange(lo, n + 1)
    for row, head in enumerate(circuit.heads):
        ax.plot(
            x,
            circuit.head_kernels[row, n, lo : n + 1].cpu(),
            lw=1.0,
            color=head_colour(head),
            label=f"head {head}",
        )
    ax.plot(x, circuit.kernel[n, lo : n + 1].cpu(), "k--", lw=2.0, label="median kernel K")
    ax.set_xlabel("source position i")
    ax.set_ylabel(f"pos_n(i), n = {n}")
    ax.set_title("positional patterns of the contextual heads, destination ' the'")
    ax.legend(ncol=4, fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


def plot_calibration_denominators(circuit, smooth: int = 1):
    """``log D_h(n)`` along the calibration text, with the median ``log Dhat_h`` as dashed lines."""
    calib = circuit.calibration
    fig, ax = plt.subplots(figsize=(8, 3.4))
    for row, head in enumerate(circuit.heads):
        x, y = _smooth(calib.log_denominators[row], smooth)
        ax.plot(x, y, lw=1.0, color=head_colour(head), label=f"head {head}")
        ax.axhline(float(calib.log_dhat[row]), color=head_colour(head), ls="--", lw=0.8)
    ax.axvline(calib.n_min, color="grey", ls=":", lw=1.0)
    ax.text(calib.n_min, ax.get_ylim()[1], f" n_min = {calib.n_min}", va="top", fontsize=8)
    ax.set_xlabel("destination position n (calibration text)")
    ax.set_ylabel("log D_h(n)")
    ax.set_title(f"denominators on the calibration text '{calib.name}', destination ' the'")
    ax.legend(ncol=6, fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig


def plot_circuit_fit(errors: dict[str, torch.Tensor], smooth: int = 15, ylabel: str = ""):
    """Error measures along the positions (median over texts), one line per approximation.

    Args:
        errors: name -> ``[batch, pos]`` error (e.g. ``CircuitFit.relative_error``).
        smooth: moving-average width.
    """
    fig, ax = plt.subplots(figsize=(8, 3.4))
    for name, err in errors.items():
        x, y = _smooth(err[:, 1:].median(0).values, smooth)
        ax.plot(x + 1, y, lw=1.3, label=name)
    ax.set_xlabel("destination position n")
    ax.set_ylabel(ylabel or "relative error")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_output_scatter(
    true: torch.Tensor, approx: torch.Tensor, n_points: int = 4000, seed: int = 0
):
    """Coordinates of the true against the approximate output (a random sample of entries)."""
    t, a = true.flatten().cpu(), approx.flatten().cpu()
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randperm(len(t), generator=gen)[:n_points]
    fig, ax = plt.subplots(figsize=(4.2, 4.0))
    ax.scatter(t[idx], a[idx], s=3, alpha=0.4)
    lim = float(max(t[idx].abs().max(), a[idx].abs().max()))
    ax.plot([-lim, lim], [-lim, lim], "k--", lw=0.8)
    ax.set_xlabel("true output coordinate")
    ax.set_ylabel("approximation")
    ax.set_aspect("equal")
    fig.tight_layout()
    return fig


def plot_scores(scores, theta, planted=None, null=None):
    """Histogram of the discovery score ``top[j]`` of all neurons (log scale), threshold marked."""
    top = scores.top.cpu().numpy()
    fig, ax = plt.subplots(figsize=(8, 3.4))
    bins = np.logspace(np.log10(max(top.min(), 1e-2)), np.log10(top.max() * 1.05), 60)
    if planted is not None:
        mask = np.zeros(len(top), dtype=bool)
        mask[list(planted)] = True
        ax.hist(top[~mask], bins=bins, color="tab:blue", label="other neurons")
        ax.hist(top[mask], bins=bins, color="tab:red", label="planted context neurons")
    else:
        ax.hist(top, bins=bins, color="tab:blue", label="all neurons")
    ax.axvline(theta, color="k", ls="--", lw=1.2, label=f"theta = {theta:g}")
    if null is not None:
        ax.axvline(null, color="grey", ls=":", lw=1.2, label=f"Gaussian null = {null:.2f}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("top[j]: mean of the 20 largest robust |z| of the token contributions")
    ax.set_ylabel("neurons")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_sweep(sweep: pd.DataFrame, theta):
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
    if "precision" in sweep:
        ax2 = ax.twinx()
        ax2.plot(sweep.index, sweep["precision"], "s--", color="tab:green", label="precision")
        ax2.plot(sweep.index, sweep["recall"], "^--", color="tab:red", label="recall")
        ax2.set_ylim(-0.05, 1.05)
        ax2.set_ylabel("precision, recall")
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


#: Line styles of the curves :func:`plot_activation_curves` knows (the keys of
#: ``evaluation.activation_curves``): the truth black, the approximation orange and dashed, and
#: for the split of chapter 6 the local terms grey behind the context part.
CURVE_STYLES: dict[str, dict] = {
    "true": dict(color=TRUE_COLOUR, lw=1.0),
    "approximation": dict(color=APPROX_COLOUR, lw=1.0, ls="--"),
    "bag only": dict(color="tab:blue", lw=0.8, ls=":"),
    "local terms": dict(color="0.7", lw=0.8, zorder=1),
    "true minus local": dict(color=TRUE_COLOUR, lw=1.0),
    "bag + positional": dict(color=APPROX_COLOUR, lw=1.0, ls="--"),
}


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


MARK_COLOURS = {1: (UP_COLOUR, "up-token"), -1: (DOWN_COLOUR, "down-token")}


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


def plot_activation_grid(panels: list[dict], columns: int = 2, height: float = 2.1):
    """Several :func:`plot_activation_curves` panels in a grid (legend on the first only).

    Args:
        panels: dicts with ``curves`` and optionally ``marks``, ``baseline``, ``title`` and the
            other keyword arguments of :func:`plot_activation_curves` (``mark_names``,
            ``baseline_label``, ``ylabel``).
        columns: panels per row.
        height: inches per row.
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
    fig.tight_layout()
    return fig


def plot_accuracy(evaluations: dict, bins: int = 40):
    """Distributions of Pearson r and FVU over neuron-text pairs, one histogram per evaluation."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    lowest = min(float(ev.pearson[~ev.pearson.isnan()].min()) for ev in evaluations.values())
    r_bins = np.linspace(max(-1.0, np.floor(lowest * 20) / 20), 1, bins)
    for name, ev in evaluations.items():
        r = ev.pearson.flatten()
        f = ev.fvu.flatten()
        r, f = r[~r.isnan()].cpu().numpy(), f[~f.isnan()].cpu().numpy()
        axes[0].hist(
            r,
            bins=r_bins,
            alpha=0.6,
            label=f"{name} (median {np.median(r):.3f})",
        )
        axes[1].hist(
            np.clip(f, 0, 2),
            bins=np.linspace(0, 2, bins),
            alpha=0.6,
            label=f"{name} (median {np.median(f):.3f})",
        )
    axes[0].set_xlabel("Pearson r")
    axes[1].set_xlabel("FVU (clipped at 2)")
    for ax in axes:
        ax.set_ylabel("neuron-text pairs")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_domain_profile(profile: pd.DataFrame, title: str = ""):
    """Heat map: rows neurons, columns text domains, values e.g. mean pre-activation."""
    fig, ax = plt.subplots(figsize=(0.7 * profile.shape[1] + 2, 0.32 * profile.shape[0] + 1.4))
    values = profile.to_numpy(dtype=float)
    lim = np.nanmax(np.abs(values))
    image = ax.imshow(values, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto")
    ax.set_xticks(range(profile.shape[1]), profile.columns, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(profile.shape[0]), [str(i) for i in profile.index], fontsize=8)
    ax.set_ylabel("neuron")
    ax.grid(False)
    ax.set_title(title, fontsize=9)
    fig.colorbar(image, ax=ax, shrink=0.8)
    fig.tight_layout()
    return fig


def plot_calibration_sensitivity(table: pd.DataFrame, measure: str = "median r"):
    """Median r (or FVU) for each calibration text (rows) and set of evaluation texts (groups)."""
    sub = table[measure]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    width = 0.8 / len(sub.index)
    x = np.arange(len(sub.columns))
    for k, calib in enumerate(sub.index):
        ax.bar(
            x + k * width,
            sub.loc[calib].to_numpy(dtype=float),
            width,
            label=f"calibrated on {calib}",
        )
    ax.set_xticks(x + 0.4 - width / 2, sub.columns)
    ax.set_xlabel("evaluation texts")
    ax.set_ylabel(measure)
    ax.set_ylim(0, float(np.nanmax(sub.to_numpy(dtype=float))) * 1.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    return fig
