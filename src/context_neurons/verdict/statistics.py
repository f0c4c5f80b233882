"""The protocol's statistics: the additive truth, rank statistics, the cluster bootstrap and the
verdict rule. Pure functions of arrays (numpy, float64); SciPy's ranks are the reference.

Window means arrive as ``[window, neuron]`` arrays with each window's domain and document; a
bootstrap resample is a vector of window *weights* (how many times its document was drawn), so
every domain mean and pooled variance of all resamples is a few matrix products.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import torch

from context_neurons.checks import InputError
from context_neurons.verdict.protocol import VerdictRule


# ----------------------------------------------------------------------------------------------
# Domain shifts and the truth
# ----------------------------------------------------------------------------------------------


@dataclass
class Shifts:
    """Measured shifts of every neuron on every domain (for one or many resamples).

    Attributes:
        shift: domain mean minus the equal-weight mean of the other domains' means,
            ``[..., domain, neuron]``.
        sd: the within-domain standard deviation pooled over domains, ``[..., neuron]``.
    """

    shift: np.ndarray
    sd: np.ndarray


def domain_shifts(values: np.ndarray, domain_index: np.ndarray, n_domains: int,
                  weights: np.ndarray | None = None,
                  squares: np.ndarray | None = None) -> Shifts:
    """Shifts and pooled spread from window means ``values [window, neuron]``.

    ``weights [resample, window]`` (default: one resample, every window once) weights each window;
    the pooled variance is ``sum_D sum_w weight (x - mean_D)^2 / (sum weight - n_domains)``.

    ``squares [window, neuron]``, each window's mean of squared single-position values (windows of
    equal length), makes the spread that of single positions (protocol v2):
    ``sum_D n_D (mean_D(x^2) - mean_D(x)^2) / sum_D n_D``, ``n_D`` the domain's weighted window count.
    """
    values = np.asarray(values, dtype=np.float64)
    single = weights is None
    weights = np.ones((1, len(values))) if single else np.asarray(weights, dtype=np.float64)
    second_of = values**2 if squares is None else np.asarray(squares, dtype=np.float64)
    means, within, total = [], 0.0, 0.0
    for d in range(n_domains):
        inside = domain_index == d
        w = weights[:, inside]  # [resample, the domain's windows]
        n = w.sum(1, keepdims=True)
        if np.any(n == 0):
            raise InputError(f"Domain {d} has no window in some resample.")
        m = (w @ values[inside]) / n
        second = (w @ second_of[inside]) / n
        within = within + (second - m**2) * n
        total = total + n
        means.append(m)
    mean = np.stack(means, axis=1)  # [resample, domain, neuron]
    dof = total - (n_domains if squares is None else 0)
    pooled = np.sqrt(np.maximum(within / dof, 0.0))
    rest = (mean.sum(1, keepdims=True) - mean) / (n_domains - 1)
    out = Shifts(mean - rest, pooled)
    return Shifts(out.shift[0], out.sd[0]) if single else out


@dataclass
class Truth:
    """The additive truth (protocol ``truth``) and what it is made of.

    Attributes:
        mask: context neurons by activation, ``[..., neuron]``.
        best: each neuron's best domain (largest ``|d|``).
        d: Cohen's d at the best domain.
        context_part: the heads' share of the shift at the best domain.
        context_shift: shift minus the ablated shift, every domain, ``[..., domain, neuron]``.
    """

    mask: np.ndarray
    best: np.ndarray
    d: np.ndarray
    context_part: np.ndarray
    context_shift: np.ndarray

    @functools.cached_property
    def context_shift_ranks(self) -> np.ndarray:
        """:func:`ranks` of ``context_shift``, computed once: every score's rho reads them."""
        return ranks(self.context_shift)


def additive_truth(full: Shifts, ablated: Shifts, min_d: float, min_part: float) -> Truth:
    """``|d(D*)| >= min_d`` and ``(shift - ablated shift) / shift >= min_part`` at ``D*``."""
    d_all = full.shift / np.maximum(full.sd, 1e-30)[..., None, :]
    best = np.abs(d_all).argmax(-2)
    take = lambda x: np.take_along_axis(x, best[..., None, :], axis=-2)[..., 0, :]  # noqa: E731
    d = take(d_all)
    context_shift = full.shift - ablated.shift
    shift_best = take(full.shift)
    safe = np.where(shift_best == 0, 1.0, shift_best)
    part = np.where(shift_best == 0, 0.0, take(context_shift) / safe)
    mask = (np.abs(d) >= min_d) & (part >= min_part)
    return Truth(mask, best, d, part, context_shift)


def ladder_threshold(truth_size, start: float, down: list[float], up: list[float],
                     min_size: int, max_size: float) -> tuple[float, list[tuple[float, int]]]:
    """Protocol v2's threshold on Cohen's d, read from the truth's size only.

    Start at ``start``; while the truth holds fewer than ``min_size`` neurons step through
    ``down``, while it holds more than ``max_size`` step through ``up``; the first threshold
    with ``min_size <= |T| <= max_size`` is used, else the last one tried.

    Args:
        truth_size: ``threshold -> |T|``.

    Returns:
        ``(threshold, [(threshold tried, |T|), ...])``.
    """
    tried = [(start, int(truth_size(start)))]
    too_few = tried[0][1] < min_size
    steps = iter(down if too_few else up)
    # Step only in the first direction, and only while the truth stays on the same wrong side.
    while tried[-1][1] < min_size if too_few else tried[-1][1] > max_size:
        threshold = next(steps, None)
        if threshold is None:
            break
        tried.append((threshold, int(truth_size(threshold))))
    return tried[-1][0], tried


# ----------------------------------------------------------------------------------------------
# Rank statistics
# ----------------------------------------------------------------------------------------------


def auc(scores: np.ndarray | None, positive: np.ndarray,
        ranked: np.ndarray | None = None) -> np.ndarray:
    """Rank-based AUC along the last axis (ties one half), NaN without positives or negatives;
    ``ranked``: the scores' average ranks (:func:`ranks`) when already counted (then
    ``scores`` is not read).

    The same number as ``sklearn.metrics.roc_auc_score(positive, scores)`` (tested)."""
    positive = np.asarray(positive, dtype=bool)
    if ranked is None:
        ranked = ranks(np.asarray(scores, dtype=np.float64))
    n1 = positive.sum(-1)
    n0 = positive.shape[-1] - n1
    rank_sum = (ranked * positive).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((n1 > 0) & (n0 > 0), (rank_sum - n1 * (n1 + 1) / 2) / (n1 * n0), np.nan)


def ranks(x: np.ndarray) -> np.ndarray:
    """Ranks along the last axis, ties given their average rank: ``scipy.stats.rankdata(x,
    axis=-1, method="average")``'s numbers exactly (tested; a row with NaN is all NaN, as
    there), sorted by torch on every thread (about 2x on the bootstrap's arrays). In a run of
    equal sorted values from position ``i`` to ``j`` each gets ``(i + j) / 2 + 1``."""
    values = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64))
    if values.numel() == 0:
        return values.numpy().copy()
    ordered, order = torch.sort(values, dim=-1, stable=True)
    n = values.shape[-1]
    position = torch.arange(n, dtype=torch.float64).expand_as(ordered)
    starts = torch.ones_like(ordered, dtype=torch.bool)  # a run of equal values starts here
    starts[..., 1:] = ordered[..., 1:] != ordered[..., :-1]
    ends = torch.ones_like(starts)
    ends[..., :-1] = starts[..., 1:]
    first = torch.where(starts, position, 0.0).cummax(-1).values
    last = torch.where(ends, position, float(n - 1)).flip(-1).cummin(-1).values.flip(-1)
    ranked = torch.empty_like(first).scatter_(-1, order, (first + last) / 2 + 1)
    return ranked.masked_fill_(values.isnan().any(-1, keepdim=True), float("nan")).numpy()


def spearman(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's correlation along the last axis (average ranks; ``scipy.stats.spearmanr``)."""
    return rank_correlation(ranks(x), ranks(y))


def rank_correlation(rx: np.ndarray, ry: np.ndarray) -> np.ndarray:
    """Pearson's correlation of two arrays of :func:`ranks` along the last axis (broadcast):
    Spearman's, for ranks already computed."""
    rx = rx - rx.mean(-1, keepdims=True)
    ry = ry - ry.mean(-1, keepdims=True)
    denominator = np.sqrt((rx**2).sum(-1) * (ry**2).sum(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, (rx * ry).sum(-1) / denominator, np.nan)


def partial_spearman(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Spearman correlation of ``x`` and ``y`` partial on ``z``: the partial correlation of ranks."""
    rxy, rxz, ryz = spearman(x, y), spearman(x, z), spearman(y, z)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray((rxy - rxz * ryz) / np.sqrt((1 - rxz**2) * (1 - ryz**2)))


def precision_at_truth_size(scores: np.ndarray, truth: np.ndarray) -> float:
    """Share of truth neurons among the ``|T|`` highest-scoring (NaN when ``T`` is empty)."""
    truth = np.asarray(truth, dtype=bool)
    k = int(truth.sum())
    if k == 0:
        return float("nan")
    top = np.argsort(-np.asarray(scores), kind="stable")[:k]
    return float(truth[top].mean())


# ----------------------------------------------------------------------------------------------
# The cluster bootstrap
# ----------------------------------------------------------------------------------------------


def cluster_weights(domain_index: np.ndarray, documents: list[str], n_resamples: int,
                    seed: int) -> np.ndarray:
    """``[resample, window]`` weights: documents drawn with replacement within each domain, a
    window weighted by how often its document was drawn."""
    rng = np.random.Generator(np.random.PCG64(seed))
    documents = np.asarray(documents)
    weights = np.zeros((n_resamples, len(documents)))
    for d in np.unique(domain_index):
        inside = np.flatnonzero(domain_index == d)
        names, which = np.unique(documents[inside], return_inverse=True)
        draws = rng.integers(0, len(names), size=(n_resamples, len(names)))
        counts = np.stack([np.bincount(row, minlength=len(names)) for row in draws])
        weights[:, inside] = counts[:, which]
    return weights


def percentile_interval(samples: np.ndarray, level: float) -> list[float]:
    """The percentile interval of the finite bootstrap samples (NaNs when none is finite)."""
    samples = np.asarray(samples, dtype=np.float64)
    samples = samples[np.isfinite(samples)]
    if len(samples) == 0:
        return [float("nan"), float("nan")]
    tail = (1 - level) / 2 * 100
    return [float(np.percentile(samples, tail)), float(np.percentile(samples, 100 - tail))]


# ----------------------------------------------------------------------------------------------
# The verdict
# ----------------------------------------------------------------------------------------------


class Verdict(StrEnum):
    """A score's verdict under the registered rule (v1's and v2's, v3's secondary verdicts), in
    the words the reports print."""

    POSITIVE = "positive"
    NEGATIVE = "negative"
    ANTI_RANKING = "anti-ranking"
    INCONCLUSIVE = "inconclusive"
    NOT_TESTABLE = "not testable"


def verdict(n_truth: int, auc_ci: list[float], precision: float, base_rate: float,
            rho_ci: list[float], permutation_rho: float, rule: VerdictRule) -> Verdict:
    """The protocol's verdict for one score."""
    if n_truth < rule.min_truth:
        return Verdict.NOT_TESTABLE
    if (auc_ci[0] >= rule.auc_lower_at_least
            and precision >= rule.precision_over_base_at_least * base_rate
            and rho_ci[0] >= rule.rho_lower_at_least
            and abs(permutation_rho) <= rule.permutation_control_abs_at_most):
        return Verdict.POSITIVE
    (lo, hi), (rlo, rhi) = rule.negative_auc, rule.negative_rho
    if lo <= auc_ci[0] and auc_ci[1] <= hi and rlo <= rho_ci[0] and rho_ci[1] <= rhi:
        return Verdict.NEGATIVE
    if auc_ci[1] < rule.anti_auc_upper_below:
        return Verdict.ANTI_RANKING
    return Verdict.INCONCLUSIVE


def criteria(auc_ci: list[float], precision: float, base_rate: float, rho_ci: list[float],
             permutation_rho: float, rule: VerdictRule) -> dict[str, bool]:
    """Each condition of the positive and negative verdicts, met or not (for the report)."""
    (lo, hi), (rlo, rhi) = rule.negative_auc, rule.negative_rho
    return {
        "auc_lower_at_least": auc_ci[0] >= rule.auc_lower_at_least,
        "precision_over_base_at_least":
            precision >= rule.precision_over_base_at_least * base_rate,
        "precision_reachable": rule.precision_over_base_at_least * base_rate <= 1.0,
        "rho_lower_at_least": rho_ci[0] >= rule.rho_lower_at_least,
        "permutation_control": abs(permutation_rho) <= rule.permutation_control_abs_at_most,
        "auc_interval_inside_negative": lo <= auc_ci[0] and auc_ci[1] <= hi,
        "rho_interval_inside_negative": rlo <= rho_ci[0] and rho_ci[1] <= rhi,
    }


def deciding_size(n_truth: int, auc_point: float, auc_ci: list[float],
                  rule: VerdictRule) -> int | None:
    """For an inconclusive AUC: the truth-set size at which the interval (shrinking like
    ``1 / sqrt(n)``) would clear the nearest decision boundary (None when it cannot)."""
    half = (auc_ci[1] - auc_ci[0]) / 2
    bounds = [rule.auc_lower_at_least, rule.anti_auc_upper_below, *rule.negative_auc]
    gap = min(abs(auc_point - b) for b in bounds)
    if not np.isfinite(half) or gap <= 0 or n_truth <= 0:
        return None
    return int(np.ceil(n_truth * (half / gap) ** 2))
