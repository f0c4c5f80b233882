"""Figures of chapter 7: token-predicting neurons, truncation, head attribution and explanations."""

from __future__ import annotations

from typing import Sequence

import matplotlib.figure
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from context_neurons.lookups import HeadActivity, NeuronLookup, head_name


def _layer_colour(layer: int, n_layers: int):
    """Distinct colours for a few layers (tab10), a sequential map for many (viridis)."""
    if n_layers <= 10:
        return plt.get_cmap("tab10")(layer)
    return plt.get_cmap("viridis")(layer / (n_layers - 1))


def plot_token_scores(
    scores: pd.DataFrame, marked: Sequence[tuple[int, int]] = (), bins: int = 80, title: str = ""
):
    """Distribution of token-prediction scores per layer, with some neurons marked by their token.

    Args:
        scores: a :func:`~context_neurons.lookups.token_prediction_scores` table.
        marked: ``(layer, neuron)`` pairs to annotate.
        title: the figure's title (name the model, e.g. ``loaded.title``).
    """
    fig, ax = plt.subplots(figsize=(8, 3.4))
    layers = sorted(scores.layer.unique())
    n_layers = max(layers) + 1
    edges = np.linspace(scores.score.min(), scores.score.max() * 1.05, bins)
    for layer in layers:
        ax.hist(
            scores.score[scores.layer == layer],
            bins=edges,
            histtype="step",
            lw=1.2,
            color=_layer_colour(layer, n_layers),
            label=f"layer {layer}",
        )
    ax.set_yscale("log")
    rows = [
        scores[(scores.layer == layer) & (scores.neuron == neuron)].iloc[0]
        for layer, neuron in marked
    ]
    for i, row in enumerate(sorted(rows, key=lambda r: r.score)):
        ax.annotate(
            f"{row.layer}.{row.neuron} {row.token!r}",
            (row.score, 1),
            xytext=(-10, 14 + 16 * i),
            textcoords="offset points",
            ha="right",
            va="center",
            fontsize=8,
            arrowprops={"arrowstyle": "-", "lw": 0.6},
        )
    ax.set_xlabel("score: (top logit effect - mean) / std over the vocabulary")
    ax.set_ylabel("neurons")
    ax.set_title(title, fontsize=10)
    if len(layers) <= 12:
        ax.legend(fontsize=7, ncol=2 if len(layers) > 6 else 1)
    fig.tight_layout()
    return fig


def plot_truncation(
    suffix_acts: torch.Tensor,
    full: float,
    kept_length: int,
    keep: float = 0.8,
    title: str = "",
    start_token: str = "",
):
    """Activation at the final token for every suffix length, the ``keep`` line and the cut.

    Args:
        suffix_acts: :func:`~context_neurons.lookups.suffix_activations` (longest suffix first).
        full: the whole prompt's activation.
        kept_length: tokens after BOS in the truncated prompt.
        keep: the kept fraction (the horizontal line).
        title: the axes title.
        start_token: the kept suffix's first token, written at the cut.
    """
    acts = suffix_acts.detach().cpu().flip(0)  # index k: suffix of k + 1 tokens
    lengths = np.arange(1, len(acts) + 1)
    fig, ax = plt.subplots(figsize=(8, 3.0))
    ax.plot(lengths, acts, lw=1.2, color="tab:blue", label="pre-activation at the final token")
    ax.axhline(keep * full, color="tab:red", ls="--", lw=1, label=f"{keep:.0%} of the full prompt")
    ax.axvline(kept_length, color="black", ls=":", lw=1, label=f"kept: {kept_length} tokens")
    if start_token:
        ax.annotate(
            f"starts at {start_token!r}",
            (kept_length, keep * full),
            xytext=(-6, 8),
            textcoords="offset points",
            ha="right",
            fontsize=8,
        )
    ax.set_xlim(0, len(acts) + 1)
    ax.set_xlabel("suffix length (tokens after <|endoftext|>)")
    ax.set_ylabel("pre-activation")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


def plot_head_attribution(lookups: Sequence[NeuronLookup], title: str = ""):
    """Mean direct attribution of every upstream head (layer x head) for each examined neuron.

    Rows are layers ``0..layer`` of each neuron; ``title`` goes above the panels.
    """
    height = 2.6 + 0.12 * max(lk.layer for lk in lookups)
    fig, axes = plt.subplots(
        1, len(lookups), figsize=(2.6 * len(lookups) + 1.0, height), squeeze=False
    )
    vmax = max(float(lk.head_attribution.mean(0).abs().max()) for lk in lookups)
    for ax, lookup in zip(axes[0], lookups):
        mean = lookup.head_attribution.mean(0)
        image = ax.imshow(mean, cmap="RdBu_r", vmin=-vmax, vmax=vmax, aspect="auto")
        ax.set_title(f"neuron {lookup.layer}.{lookup.neuron}\n{lookup.token!r}", fontsize=9)
        ax.set_xlabel("head")
        ax.set_yticks(range(mean.shape[0]))
        ax.grid(False)
        layer, head, _ = lookup.top_heads[0]
        ax.add_patch(plt.Rectangle((head - 0.5, layer - 0.5), 1, 1, fill=False, lw=1.5))
    axes[0][0].set_ylabel("layer")
    fig.colorbar(image, ax=axes[0].tolist(), shrink=0.9, label="mean attribution")
    if title:
        fig.suptitle(title, fontsize=10, y=1.02)
    return fig


def plot_attribution_vs_ablation(
    lookups: Sequence[NeuronLookup], title: str = ""
) -> matplotlib.figure.Figure:
    """Direct attribution against the mean-ablation drop, every (prompt, ablated head), by layer.

    Only the heads each look-up ablated are drawn (those whose attribution mattered most:
    :func:`context_neurons.lookups.examine_neuron`); the others have no drop (``nan``).
    """
    fig, ax = plt.subplots(figsize=(5.2, 4.2))
    n_layers = max(lk.layer for lk in lookups) + 1
    for layer in range(n_layers):
        x = torch.cat(
            [lk.head_attribution[:, layer].flatten() for lk in lookups if lk.layer >= layer]
        )
        y = torch.cat([lk.ablation[:, layer].flatten() for lk in lookups if lk.layer >= layer])
        x, y = x[~y.isnan()], y[~y.isnan()]
        if not len(x):
            continue
        ax.scatter(
            x,
            y,
            s=8,
            alpha=0.6,
            color=_layer_colour(layer, n_layers),
            label=f"heads of layer {layer}",
        )
    lo = min(ax.get_xlim()[0], ax.get_ylim()[0])
    hi = max(ax.get_xlim()[1], ax.get_ylim()[1])
    ax.plot([lo, hi], [lo, hi], color="grey", lw=0.8, ls="--", label="y = x")
    ax.set_xlabel("direct attribution to the pre-activation")
    ax.set_ylabel("drop when the head is mean-ablated")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, ncol=2 if n_layers > 6 else 1)
    fig.tight_layout()
    return fig


def plot_head_activity(
    activities: Sequence[HeadActivity], names: Sequence[str] | None = None, title: str = ""
):
    """Histogram of a head's attribution over the prompt pool, with the "active" threshold."""
    fig, axes = plt.subplots(
        1, len(activities), figsize=(2.6 * len(activities) + 0.6, 2.6), squeeze=False, sharey=True
    )
    for i, (ax, activity) in enumerate(zip(axes[0], activities)):
        values = activity.attribution.detach().cpu().numpy()
        ax.hist(values, bins=40, color="tab:blue", alpha=0.8)
        ax.axvline(activity.threshold, color="tab:red", ls="--", lw=1)
        ax.set_yscale("log")
        label = names[i] if names else f"neuron {activity.layer}.{activity.neuron}"
        ax.set_title(
            f"{head_name(*activity.head)} -> {label}\n" f"{activity.base_rate:.1%} active",
            fontsize=9,
        )
        ax.set_xlabel("attribution")
    axes[0][0].set_ylabel("prompts")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_explanation_scores(table: pd.DataFrame, title: str = ""):
    """Held-out accuracy and balanced accuracy of each explanation, against their chance levels.

    Args:
        table: one row per explanation with ``name``, ``accuracy``, ``chance`` and
            ``balanced_accuracy`` columns.
        title: the axes title (name the model).
    """
    fig, ax = plt.subplots(figsize=(8, 3.0))
    x = np.arange(len(table))
    ax.bar(x - 0.2, table.accuracy, 0.4, color="tab:blue", label="accuracy")
    ax.bar(x + 0.2, table.balanced_accuracy, 0.4, color="tab:orange", label="balanced accuracy")
    ax.scatter(
        x - 0.2,
        table.chance,
        marker="_",
        s=400,
        color="black",
        zorder=3,
        label="chance (majority class)",
    )
    ax.axhline(0.5, color="black", ls=":", lw=0.8, label="chance (balanced)")
    ax.set_xticks(x, table.name, fontsize=8)
    values = table[["accuracy", "balanced_accuracy", "chance"]].to_numpy(dtype=float)
    low = float(np.nanmin(values)) if np.isfinite(values).any() else 0.4
    ax.set_ylim(min(0.4, low - 0.05), 1.02)
    ax.set_ylabel("held-out score")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig
