"""EXPLORATORY: the label-free arm (``exploratory_label_free``), for any protocol that registers
it (v3; the GPT-2 family's does not): no verdict, never pooled with the primary result.

Domains found without labels: CAL units (labels discarded) as tf-idf vectors of their token
counts, projected on 50 singular vectors, clustered by k-means (k = 8, ten seeded restarts, the
least within-cluster sum of squares kept, clusters under 5 units left out). Each cluster's token
distribution ``p_C`` replaces ``p_D`` in the same frequency-aware score, which is scored against
the same truth with the same bootstrap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import torch
from jaxtyping import Float, Int
from scipy.cluster.vq import kmeans2
from torch import Tensor

import context_neurons.verdict.statistics as st
from context_neurons.verdict.comparison import resampled_aucs

LABEL = "EXPLORATORY: the paper's claim (discovery without labels); no verdict"


@dataclass(frozen=True)
class LabelFreePool:
    """One pool of the label-free arm (EXPLORATORY, no verdict): its units and clusters (the
    adjusted Rand index against the domains where the pool has domains), each kept cluster's
    distinctive tokens, and the score's AUC against the truth and its paired difference with the
    labelled frequency-aware score; or, in ``score``, why the score was not computed."""

    units: int
    within_cluster_ss: float
    cluster_sizes: dict
    kept_clusters: list[str]
    distinctive_tokens: dict[str, list[str]]
    adjusted_rand_index: float | None = None
    score: str | None = None
    auc: float | None = None
    auc_ci95: list[float] | None = None
    difference_vs_frequency_aware: float | None = None
    difference_ci95: list[float] | None = None

    #: The JSON's keys in their written order (a key whose value is None is not written).
    ORDER = ("units", "within_cluster_ss", "cluster_sizes", "kept_clusters",
             "adjusted_rand_index", "distinctive_tokens", "score", "auc", "auc_ci95",
             "difference_vs_frequency_aware", "difference_ci95")

    def to_json(self) -> dict:
        return {key: getattr(self, key) for key in self.ORDER if getattr(self, key) is not None}

    @classmethod
    def from_json(cls, data: dict) -> "LabelFreePool":
        """The pool as written; a number written as null (undefined) is NaN again."""
        numbers = ("adjusted_rand_index", "auc", "difference_vs_frequency_aware")
        return cls(**{k: math.nan if k in numbers and v is None else v for k, v in data.items()})


def tf_idf_features(units: list[Int[np.ndarray, " _n"]], d_vocab: int, eot_id: int,
                    n_components: int = 50) -> Float[np.ndarray, "unit component"]:
    """The registered features: tf = count / unit length (separators left out), idf = ln(N /
    df) over tokens with df >= 2, rows L2-normalised, centred by column, projected on the first
    ``n_components`` right singular vectors (``U * S``), rows L2-normalised again."""
    counts = np.zeros((len(units), d_vocab))
    for i, tokens in enumerate(units):
        kept = tokens[tokens != eot_id]
        counts[i] = np.bincount(kept, minlength=d_vocab)
    tf = counts / np.maximum(counts.sum(1, keepdims=True), 1)
    df = (counts > 0).sum(0)
    columns = df >= 2
    x = tf[:, columns] * np.log(len(units) / df[columns])
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-300)
    x = x - x.mean(0, keepdims=True)
    u, s, _ = np.linalg.svd(x, full_matrices=False)
    scores = (u * s)[:, :n_components]
    return scores / np.maximum(np.linalg.norm(scores, axis=1, keepdims=True), 1e-300)


def cluster(x: Float[np.ndarray, "unit component"], k: int = 8, restarts: int = 10,
            seed: int = 40, iterations: int = 100) -> tuple[np.ndarray, float]:
    """k-means through ``scipy.cluster.vq.kmeans2`` with seeds ``seed .. seed + restarts - 1``;
    the labels of the run with the least within-cluster sum of squares, and that sum."""
    best, best_inertia = None, np.inf
    for i in range(restarts):
        centroids, labels = kmeans2(x, k, iter=iterations, minit="++",
                                    seed=np.random.default_rng(seed + i))
        inertia = float(((x - centroids[labels]) ** 2).sum())
        if inertia < best_inertia:
            best, best_inertia = labels, inertia
    return best, best_inertia


def adjusted_rand_index(a: np.ndarray, b: np.ndarray) -> float:
    """Hubert and Arabie's adjusted Rand index of two labellings (scikit-learn's value)."""
    _, ia = np.unique(a, return_inverse=True)
    _, ib = np.unique(b, return_inverse=True)
    table = np.zeros((ia.max() + 1, ib.max() + 1))
    np.add.at(table, (ia, ib), 1)
    pairs = lambda x: (x * (x - 1) / 2).sum()  # noqa: E731
    index, rows, cols = pairs(table), pairs(table.sum(1)), pairs(table.sum(0))
    expected = rows * cols / pairs(np.array([len(a)]))
    top = (rows + cols) / 2
    return float((index - expected) / (top - expected)) if top != expected else 1.0


def cluster_distributions(units: list[Int[np.ndarray, " _n"]], labels: np.ndarray,
                          d_vocab: int, min_units: int = 5) -> dict[str, Float[Tensor, " d_vocab"]]:
    """``p_C`` of every cluster of at least ``min_units`` units: its units' token frequencies
    (each unit without its first separator, as ``p_D``)."""
    out = {}
    for c in np.unique(labels):
        members = [units[i] for i in np.flatnonzero(labels == c)]
        if len(members) < min_units:
            continue
        counts = np.bincount(np.concatenate([m[1:] for m in members]), minlength=d_vocab)
        out[f"cluster {int(c)}"] = torch.from_numpy(counts / counts.sum())
    return out


def distinctive_tokens(p: Float[Tensor, " d_vocab"], pool: Float[Tensor, " d_vocab"],
                       decode, n: int = 10) -> list[str]:
    """The ``n`` tokens of highest ``p_C / p_pool``."""
    ratio = torch.where(pool > 0, p / pool.clamp(min=1e-300), torch.zeros_like(p))
    return [decode([int(t)]) for t in ratio.argsort(descending=True)[:n]]


def label_free_pool(units: list[Int[np.ndarray, " _n"]], domain_labels: list[str] | None,
                    score_of, truth_mask: np.ndarray, boot_mask: np.ndarray,
                    neuron_draws: np.ndarray, reference_boot: np.ndarray,
                    reference_point: float, d_vocab: int, eot_id: int, decode,
                    level: float) -> LabelFreePool:
    """One pool: clusters, ``p_C``, the score (``score_of(distributions) -> array``) against the
    truth, and the paired difference with the labelled score (``reference_*``)."""
    x = tf_idf_features(units, d_vocab, eot_id)
    labels, inertia = cluster(x)
    distributions = cluster_distributions(units, labels, d_vocab)
    pool = torch.from_numpy(np.bincount(np.concatenate([u[1:] for u in units]),
                                        minlength=d_vocab).astype(np.float64))
    pool = pool / pool.sum()
    described = LabelFreePool(
        units=len(units), within_cluster_ss=inertia,
        cluster_sizes={int(c): int((labels == c).sum()) for c in np.unique(labels)},
        kept_clusters=list(distributions),
        distinctive_tokens={name: distinctive_tokens(p, pool, decode)
                            for name, p in distributions.items()},
        adjusted_rand_index=(None if domain_labels is None
                             else adjusted_rand_index(labels, np.array(domain_labels))))
    if len(distributions) < 2:
        return replace(described, score="not computed: fewer than two kept clusters")
    score = score_of(distributions)
    boot = resampled_aucs(score, boot_mask, neuron_draws)
    defined = np.isfinite(boot) & np.isfinite(reference_boot)
    auc = float(st.auc(score, truth_mask))
    return replace(described, auc=auc,
                   auc_ci95=st.percentile_interval(boot[defined], level),
                   difference_vs_frequency_aware=auc - reference_point,
                   difference_ci95=st.percentile_interval((boot - reference_boot)[defined],
                                                          level))


__all__ = ["LABEL", "LabelFreePool", "adjusted_rand_index", "cluster", "cluster_distributions",
           "distinctive_tokens", "label_free_pool", "tf_idf_features"]
