"""Figures of chapter 6: accuracy of the approximation, typical pairs and the calibration."""

from __future__ import annotations

import matplotlib.figure
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from jaxtyping import Float

from context_neurons.circuit import ContextualCircuit
from context_neurons.evaluation import ExamplePair, activation_curves
from context_neurons.plotting.discovery import plot_activation_curves
from context_neurons.plotting.style import APPROX_COLOUR, TRUE_COLOUR


def plot_accuracy(evaluations: dict, bins: int = 40, title: str = ""):
    """Distributions of Pearson r and FVU over neuron-text pairs, one histogram per evaluation
    (``title``: the figure's title; name the model in it)."""
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
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def draw_pair(row, circuit: ContextualCircuit, model, example: ExamplePair,
              legend: bool = False):
    """The whole pre-activation (``row[0]``: true, approximate and the local terms) and its context
    part (``row[1]``: true minus the local terms against bag plus positional part) of one pair."""
    curves = activation_curves(circuit, model, example.tokens, example.neuron, parts=True)
    panels = (
        (row[0], example.title, ("local terms", "true", "approximation")),
        (row[1], "context part", ("true minus local", "bag + positional")),
    )
    for ax, name, keys in panels:
        plot_activation_curves({k: curves[k] for k in keys}, title=name, ax=ax, legend=False)
        if legend:
            ax.legend(fontsize=7, ncol=3)


def plot_example_pairs(circuit: ContextualCircuit, model, examples: list[ExamplePair],
                       title: str = "", height: float = 7.2):
    """One row per pair (:func:`draw_pair`; the legends in the first row), the whole
    pre-activation on the left and its context part on the right (``title``: the figure's
    title; name the model in it; ``height``: the figure's, in inches)."""
    fig, axes = plt.subplots(len(examples), 2, figsize=(11, height), squeeze=False,
                             gridspec_kw={"width_ratios": [3, 2]})
    for i, example in enumerate(examples):
        draw_pair(axes[i], circuit, model, example, legend=i == 0)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_calibration_sensitivity(
    table: pd.DataFrame, measure: str = "median r", title: str = ""
):
    """Median r (or FVU) for each calibration text (rows) and set of evaluation texts (groups);
    ``title`` names the model."""
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
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


def plot_activations(
    tokens: list[str],
    true: Float[np.ndarray, "pos"],
    approx: Float[np.ndarray, "pos"],
    neuron: int,
    max_labels: int = 60,
    model_title: str = "",
) -> matplotlib.figure.Figure:
    """True and approximate pre-activation of a neuron along a text (its tokens as tick labels
    when there are at most ``max_labels``; ``model_title`` is added to the title)."""
    figure, ax = plt.subplots(figsize=(8, 2.8))
    x = np.arange(len(tokens))
    ax.plot(x, true, label="true", color=TRUE_COLOUR)
    ax.plot(x, approx, label="approximate", color=APPROX_COLOUR, linestyle="--")
    ax.axhline(0, color="grey", linewidth=0.5)
    if len(tokens) <= max_labels:
        ax.set_xticks(x, [repr(t)[1:-1] for t in tokens], rotation=90, fontsize=7)
    else:
        ax.set_xlabel("position")
    ax.set_ylabel("pre-activation")
    ax.set_title(f"layer-0 neuron {neuron}" + (f" ({model_title})" if model_title else ""))
    ax.legend(loc="upper left", fontsize=8)
    figure.tight_layout()
    return figure


def plot_band(
    true: Float[np.ndarray, "pos"],
    lower: Float[np.ndarray, "pos"],
    upper: Float[np.ndarray, "pos"],
    approx: Float[np.ndarray, "pos"],
    neuron: int,
    delta: float,
    model_title: str = "",
) -> matplotlib.figure.Figure:
    """One neuron's true pre-activation along a text inside its certified band
    (:mod:`context_neurons.evaluation.band`), the approximation beside it; positions where the
    true value leaves the band are marked."""
    figure, ax = plt.subplots(figsize=(8, 2.8))
    x = np.arange(len(true))
    finite = np.isfinite(lower) & np.isfinite(upper)
    ax.fill_between(x, np.where(finite, lower, np.nan), np.where(finite, upper, np.nan),
                    color=APPROX_COLOUR, alpha=0.25, linewidth=0,
                    label=f"band (level {1 - delta:g} per position)")
    ax.plot(x, approx, color=APPROX_COLOUR, linestyle="--", linewidth=0.8, label="approximate")
    ax.plot(x, true, color=TRUE_COLOUR, linewidth=0.9, label="true")
    outside = (true < lower) | (true > upper)
    ax.scatter(x[outside], true[outside], color="red", s=8, zorder=3, label="outside the band")
    ax.set_xlabel("position")
    ax.set_ylabel("pre-activation")
    ax.set_title(f"layer-0 neuron {neuron} and its band" + (f" ({model_title})" if model_title
                                                             else ""))
    ax.legend(loc="upper left", fontsize=7, ncol=2)
    figure.tight_layout()
    return figure
