"""Figures of chapter 9: the open questions (destination tokens, an added head, clustered
calibration texts, rotary and ALiBi attention). Each function draws one figure from tensors and
tables computed by :mod:`context_neurons.sweeps` and :mod:`context_neurons.position_schemes`;
``title`` names the model."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor

from context_neurons.plotting.style import APPROX_COLOUR, head_colour

#: One colour per class of destination token.
CLASS_COLOURS = {
    "reference": "black",
    "stop word": "tab:blue",
    "keyword": "tab:green",
    "topic word": "tab:purple",
}
CALIBRATION_COLOURS = {"default": "tab:gray", "own cluster": "tab:blue", "other cluster": "tab:red"}


def _class_colours(classes: pd.Series) -> list[str]:
    return [CLASS_COLOURS.get(c, "tab:gray") for c in classes]


def plot_destination_cosines(cosines: pd.DataFrame, classes: pd.Series, title: str = ""):
    """Mean cosine of the extended embeddings ``e_d(t)``, ``e_d'(t)`` of every pair of
    destinations (tick labels coloured by class)."""
    fig, ax = plt.subplots(figsize=(5.6, 4.6))
    image = ax.imshow(cosines.to_numpy(), cmap="viridis")
    names = [repr(t) for t in cosines.index]
    ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(len(names)), names, fontsize=8)
    for labels in (ax.get_xticklabels(), ax.get_yticklabels()):
        for label, colour in zip(labels, _class_colours(classes[cosines.index])):
            label.set_color(colour)
    ax.grid(False)
    fig.colorbar(image, ax=ax, label="mean cosine of e_d(t) and e_d'(t)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


def plot_destination_sweep(table: pd.DataFrame, title: str = ""):
    """Per destination: cosine of ``e_d`` to the reference's, Jaccard of the found neurons with
    the reference's, and the median FVU of the fixed neurons (bars coloured by class)."""
    columns = [c for c in table.columns if c.startswith("cosine to")] + ["Jaccard", "median FVU"]
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.3))
    names = [repr(t) for t in table.index]
    colours = _class_colours(table["class"])
    for ax, column in zip(axes, columns):
        values = table[column].astype(float).to_numpy()
        ax.bar(range(len(values)), values, color=colours)
        ax.axhline(values[0], color="black", lw=0.8, ls="--")
        ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=8)
        ax.set_title(column, fontsize=9)
        low, high = values.min(), values.max()
        pad = max(0.05 * (high - low), 1e-3 * max(abs(high), 1e-12))
        ax.set_ylim(max(0.0, low - 4 * pad) if low >= 0 else low - 4 * pad, high + pad)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in CLASS_COLOURS.values()]
    axes[-1].legend(handles, CLASS_COLOURS, fontsize=7, loc="lower right")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def plot_destination_rules(
    fixed: Float[Tensor, "n_texts n_neurons"],
    actual: Float[Tensor, "n_texts n_neurons"],
    title: str = "",
):
    """FVU of every neuron-text pair with the fixed destination (horizontal) and with each
    position's own destination (vertical), log axes; below the diagonal the latter is better."""
    x, y = fixed.flatten().cpu().numpy(), actual.flatten().cpu().numpy()
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    x, y = x[keep], y[keep]
    fig, ax = plt.subplots(figsize=(4.4, 4.2))
    ax.scatter(x, y, s=10, alpha=0.6, color=APPROX_COLOUR)
    lo, hi = min(x.min(), y.min()) / 1.3, max(x.max(), y.max()) * 1.3
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("FVU, destination fixed to ' the'")
    ax.set_ylabel("FVU, each position's own token")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


def plot_added_head(
    tv: dict[str, dict[int, float]],
    kernels: dict[str, Float[Tensor, " key_pos"]],
    added: int,
    window: int = 150,
    title: str = "",
):
    """Left: the median attention TV of each head in each circuit (``tv``: circuit -> head ->
    TV). Right: kernels at one destination over its last ``window`` positions (``kernels``:
    name -> ``[n + 1]`` row)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.4), gridspec_kw={"width_ratios": [2, 3]})
    heads = sorted({h for values in tv.values() for h in values})
    width = 0.8 / len(tv)
    for k, (name, values) in enumerate(tv.items()):
        x = np.array([heads.index(h) for h in values]) + (k - (len(tv) - 1) / 2) * width
        left.bar(x, list(values.values()), width=width, label=name)
    left.set_xticks(range(len(heads)), [f"{h}*" if h == added else str(h) for h in heads])
    left.set_xlabel(f"head (* added: head {added})")
    left.set_ylabel("median TV of the circuit's weights")
    left.legend(fontsize=8)
    for name, row in kernels.items():
        n = len(row) - 1
        lo = max(0, n - window + 1)
        style = {"ls": "--"} if "median" in name else {"color": head_colour(added)}
        right.plot(np.arange(lo, n + 1), row[lo:].cpu(), lw=1.4, label=name, **style)
    right.set_xlabel("source position i")
    right.set_ylabel("kernel weight")
    right.legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def plot_profile_clusters(
    profiles: Float[Tensor, "n_texts d"],
    labels: Int[Tensor, " n_texts"],
    domains: list[str],
    calibration: dict[int, int],
    title: str = "",
):
    """The texts' denominator profiles on their first two principal components: colour = cluster,
    marker = domain, a star on each cluster's calibration text."""
    x = profiles.double() - profiles.double().mean(0)
    _, _, v = torch.linalg.svd(x, full_matrices=False)
    xy = (x @ v[:2].T).numpy()
    markers = dict(zip(dict.fromkeys(domains), "osD^vP<>Xh"))
    cmap = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for i, (point, domain) in enumerate(zip(xy, domains)):
        ax.scatter(*point, marker=markers[domain], color=cmap(int(labels[i]) % 10), s=30, alpha=0.8)
    for c, i in calibration.items():
        ax.scatter(*xy[i], marker="*", s=260, facecolor="none", edgecolor="black", lw=1.2)
    handles = [
        plt.Line2D([], [], marker=m, ls="", color="gray", label=d) for d, m in markers.items()
    ]
    handles += [
        plt.Line2D(
            [], [], marker="*", ls="", mfc="none", mec="black", ms=12, label="calibration text"
        )
    ]
    ax.legend(handles=handles, fontsize=7, loc="best")
    ax.set_xlabel("first principal component of log D profiles (nats)")
    ax.set_ylabel("second principal component")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


def plot_cluster_calibration(table: pd.DataFrame, measure: str = "median FVU", title: str = ""):
    """``measure`` on each cluster's evaluation texts for each calibration (grouped bars)."""
    frame = table[measure].astype(float)
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    width = 0.8 / len(frame.columns)
    for k, column in enumerate(frame.columns):
        x = np.arange(len(frame)) + (k - (len(frame.columns) - 1) / 2) * width
        ax.bar(x, frame[column], width=width, label=column, color=CALIBRATION_COLOURS.get(column))
    ax.set_xticks(range(len(frame)), [f"cluster {c}" for c in frame.index])
    ax.set_ylabel(measure)
    ax.legend(fontsize=8, title="calibration text", title_fontsize=8)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


def plot_rotary_heads(
    kernels: Float[Tensor, "head_index key_pos"],
    heads: pd.DataFrame,
    title: str = "",
):
    """Left: each head's positional pattern at the last destination, against distance. Right: the
    factorisation's median TV against the head's rotation frequency (``heads``: columns
    ``omega``, ``content in``, ``median TV``)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.5))
    n = kernels.shape[-1] - 1
    distance = np.arange(n, -1, -1)
    for h in range(len(kernels)):
        left.plot(distance, kernels[h].cpu(), color=head_colour(h), lw=1.1, label=f"head {h}")
    left.set_xlabel("distance n - i")
    left.set_ylabel(f"pos_n(i), n = {n}")
    left.set_yscale("log")
    left.legend(fontsize=7, ncol=2)
    rotated = heads["content in"] == "rotated pair"
    right.plot(
        heads.loc[rotated, "omega"],
        heads.loc[rotated, "median TV"],
        "o-",
        color="black",
        label="content in the rotated pair",
    )
    floor = heads.loc[rotated, "omega"].min() / 3
    for h, row in heads[~rotated].iterrows():
        omega = row["omega"] if row["omega"] > 0 else floor
        right.scatter(
            omega,
            max(row["median TV"], 1e-7),
            marker="s",
            s=40,
            color=head_colour(h),
            label=f"head {h}: content unrotated"
            + ("" if row["omega"] > 0 else ", no rotated query"),
        )
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("rotation frequency omega of the head's pair (radians per token)")
    right.set_ylabel("median TV, exact vs factorised")
    right.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def plot_error_by_distance(
    error: Float[Tensor, "head_index distance"],
    bound: Float[Tensor, "head_index distance"],
    heads: list[int],
    omega: list[float],
    title: str = "",
):
    """Mean ``|score error|`` of the factorisation against distance (solid) and the mean bound
    (dashed), for the heads given; log axes."""
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    d = np.arange(1, error.shape[1])
    for h, w in zip(heads, omega):
        colour = head_colour(h)
        ax.plot(d, error[h, 1:].cpu(), color=colour, lw=1.3, label=f"head {h}, omega {w:.2g}")
        ax.plot(d, bound[h, 1:].cpu(), color=colour, lw=0.9, ls="--")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("distance n - i")
    ax.set_ylabel("mean |score error| (dashed: bound)")
    ax.legend(fontsize=7, ncol=2)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


def plot_alibi_kernels(
    kernels: Float[Tensor, "head_index key_pos"],
    slopes: Float[Tensor, " head_index"],
    title: str = "",
):
    """ALiBi positional patterns at the last destination against distance (log scale, solid) and
    the exponentials ``exp(-m_h d) / Z`` (markers): straight lines of slope ``-m_h``."""
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    n = kernels.shape[-1] - 1
    distance = torch.arange(n, -1, -1, dtype=torch.float64)
    for h in range(len(kernels)):
        exact = torch.exp(-float(slopes[h]) * distance)
        exact = exact / exact.sum()
        colour = head_colour(h)
        ax.plot(
            distance,
            kernels[h].cpu(),
            color=colour,
            lw=1.3,
            label=f"head {h}, m = 1/{1 / float(slopes[h]):.0f}",
        )
        ax.plot(distance[::16], exact[::16], "o", color=colour, ms=3)
    ax.set_yscale("log")
    ax.set_ylim(bottom=1e-12)
    ax.set_xlabel("distance n - i")
    ax.set_ylabel(f"pos_n(i), n = {n}")
    ax.legend(fontsize=7, ncol=2)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig
