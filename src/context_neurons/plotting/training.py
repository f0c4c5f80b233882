"""Figures of chapter 8: the trained model's training, development and discovery-versus-truth."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from jaxtyping import Bool, Float
from torch import Tensor

from context_neurons.plotting.style import head_colour
from context_neurons.verdict.protocol import VerdictRule
from context_neurons.verdict.results import ScoreResult
from context_neurons.verdict.comparison import PrimaryComparison


def plot_loss(loss: pd.DataFrame, heldout: pd.DataFrame, title: str = ""):
    """Training loss per step (thin) with a moving average, and the held-out mean at checkpoints.

    Args:
        loss: ``loss.csv`` of a run (columns ``tokens``, ``loss``).
        heldout: ``heldout.csv`` rows of corpus ``mean`` (columns ``tokens``, ``loss``).
        title: the axes' title (name the model in it).
    """
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.plot(loss["tokens"] / 1e6, loss["loss"], color="tab:blue", lw=0.5, alpha=0.4,
            label="training batch")
    smooth = loss["loss"].rolling(25, min_periods=1).mean()
    ax.plot(loss["tokens"] / 1e6, smooth, color="tab:blue", lw=1.5, label="moving average (25)")
    ax.plot(heldout["tokens"] / 1e6, heldout["loss"], "o-", color="tab:orange", ms=4,
            label="held-out documents (mean over corpora)")
    ax.set_xlabel("training tokens (millions)")
    ax.set_ylabel("cross-entropy (nats / token)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_development(development: dict, title: str = ""):
    """Each layer-0 head's kernel width and content spread over training, and the neuron counts.

    Args:
        development: ``development.json`` (:func:`context_neurons.training.development.summarize_run`).
        title: the figure's title (name the model in it).
    """
    rows = [r for r in development["checkpoints"] if r["tokens"] > 0]  # log axis: step 0 left out
    tokens = np.array([r["tokens"] for r in rows]) / 1e6
    heads = [h["head"] for h in rows[0]["heads"]]
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2), sharex=True)
    for k, head in enumerate(heads):
        colour = head_colour(head)
        axes[0].plot(tokens, [r["heads"][k]["n_eff"] for r in rows], "o-", ms=3, color=colour,
                     label=f"head {head}")
        axes[1].plot(tokens, [r["heads"][k]["content_sd"] for r in rows], "o-", ms=3,
                     color=colour)
        contextual = [r["heads"][k]["group"] == "contextual" for r in rows]
        axes[0].plot(tokens[contextual], np.array([r["heads"][k]["n_eff"] for r in rows])[
            contextual], "s", ms=8, mfc="none", color=colour)
    axes[0].set_ylabel("kernel width n_eff (tokens)")
    axes[0].set_title("positional kernels (squares: contextual)", fontsize=9)
    axes[1].set_ylabel("content spread sd log c (nats)")
    axes[1].set_title("content dependence", fontsize=9)
    for key, label in (("separating_neurons", "separate a domain (AUC)"),
                       ("context_neurons_by_activation", "... through the contextual heads"),
                       ("neurons_found", "found from the weights (top >= theta)")):
        values = [np.nan if r[key] is None else r[key] for r in rows]
        axes[2].plot(tokens, values, "o-", ms=3, label=label)
    axes[2].set_ylabel("layer-0 neurons")
    axes[2].set_title("neurons (blank: no contextual head)", fontsize=9)
    axes[2].legend(fontsize=7)
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("training tokens (millions)")
    axes[0].legend(fontsize=6, ncol=2)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_discovery_vs_activation(
    top: Float[Tensor, " d_mlp"],
    separation: Float[Tensor, " d_mlp"],
    truth: Bool[Tensor, " d_mlp"],
    theta: float,
    min_separation: float,
    title: str = "",
):
    """Discovery score from the weights (x) against separation measured from activations (y).

    Args:
        top: ``top[j]`` of every neuron (chapter 5).
        separation: ``|AUC - 0.5|`` at each neuron's best domain (activations).
        truth: the context neurons by activation (separation through the contextual heads).
        theta: the discovery threshold (vertical line).
        min_separation: the separation threshold of the truth (horizontal line).
        title: the axes' title (name the model in it).
    """
    top, separation, truth = (torch.as_tensor(x).cpu() for x in (top, separation, truth))
    fig, ax = plt.subplots(figsize=(6.5, 4))
    ax.scatter(top[~truth], separation[~truth], s=6, color="tab:blue", alpha=0.5,
               label="other neurons")
    ax.scatter(top[truth], separation[truth], s=14, color="tab:red",
               label="context neurons by activation")
    ax.axvline(theta, color="k", ls="--", lw=1, label=f"theta = {theta:g}")
    ax.axhline(min_separation, color="grey", ls=":", lw=1,
               label=f"|AUC - 0.5| = {min_separation:g}")
    ax.set_xscale("log")
    ax.set_xlabel("top[j] (from the weights)")
    ax.set_ylabel("|AUC - 0.5| (from activations)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_verdict(scores: dict[str, ScoreResult], rule: VerdictRule, title: str = ""):
    """Each score's AUC and Spearman correlation with their 95% intervals (chapter 8's verdict).

    Args:
        scores: name -> the score against the truth.
        rule: the protocol's verdict rule (the decision lines drawn).
        title: the figure's title (name the model in it).
    """
    names = list(scores)
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.55 * len(names) + 1.6), sharey=True)
    y = np.arange(len(names))[::-1]
    for ax, key, lines in (
        (axes[0], "auc", [0.5, rule.auc_lower_at_least, *rule.negative_auc]),
        (axes[1], "spearman", [0.0, rule.rho_lower_at_least, *rule.negative_rho]),
    ):
        point = np.array([getattr(scores[n], key) for n in names], dtype=float)
        ci = np.array([getattr(scores[n], f"{key}_ci95") for n in names], dtype=float)
        ax.errorbar(point, y, xerr=[point - ci[:, 0], ci[:, 1] - point], fmt="o", color="k",
                    ecolor="tab:blue", capsize=3)
        for x in lines:
            ax.axvline(x, color="grey", ls=":", lw=1)
        ax.set_xlabel({"auc": "AUC against the truth", "spearman": "Spearman rho"}[key])
    axes[0].set_yticks(y)
    axes[0].set_yticklabels([f"{n}\n({scores[n].verdict})" for n in names], fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def plot_baselines(primary: PrimaryComparison, margin: float, title: str = ""):
    """Protocol v3's primary comparison: the score's and each baseline's AUC (left) and the
    score's AUC minus each baseline's (right), with paired 95% intervals.

    Args:
        primary: the primary comparison (the score, its AUC and each baseline's AUC and
            difference, with their intervals).
        margin: the protocol's equivalence margin (drawn at +-margin on the right).
        title: the figure's title (name the model in it).
    """
    baselines = primary.baselines
    names = [primary.score, *(b.name for b in baselines)]
    auc = np.array([primary.score_auc] + [b.auc for b in baselines], dtype=float)
    auc_ci = np.array([primary.score_auc_ci95] + [b.auc_ci95 for b in baselines], dtype=float)
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.5 * len(names) + 1.6))
    y = np.arange(len(names))[::-1]
    axes[0].errorbar(auc, y, xerr=[auc - auc_ci[:, 0], auc_ci[:, 1] - auc], fmt="o", color="k",
                     ecolor="tab:blue", capsize=3)
    axes[0].axvline(0.5, color="grey", ls=":", lw=1)
    axes[0].set_yticks(y)
    axes[0].set_yticklabels([n.replace("_", " ") for n in names], fontsize=8)
    axes[0].set_xlabel("AUC against the truth (0.5: chance)")
    diff = np.array([b.difference for b in baselines], dtype=float)
    diff_ci = np.array([b.difference_ci95 for b in baselines], dtype=float)
    yb = y[1:]
    axes[1].errorbar(diff, yb, xerr=[diff - diff_ci[:, 0], diff_ci[:, 1] - diff], fmt="s",
                     color="k", ecolor="tab:orange", capsize=3)
    for x, style in ((0.0, "-"), (-margin, ":"), (margin, ":")):
        axes[1].axvline(x, color="grey", ls=style, lw=1)
    axes[1].set_yticks(yb)
    axes[1].set_yticklabels([f"minus {b.name.replace('_', ' ')}" for b in baselines], fontsize=8)
    axes[1].set_ylim(axes[0].get_ylim())
    axes[1].set_xlabel(f"AUC({primary.score.replace('_', ' ')}) minus the baseline's")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig
