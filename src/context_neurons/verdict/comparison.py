"""The primary comparison (``primary_comparison``) of every protocol from v3 on (v3 and the
GPT-2 family): the paired bootstrap of ``delta = AUC(score) - max_b AUC(b)`` over the four
registered baselines.

Every AUC of a resample uses the same unit draws (the resample's truth) and the same neuron
draws; the best baseline is taken inside each resample. A resample whose AUC is undefined (no
truth neuron, or nothing else, among the drawn neurons) is left out of every interval and
counted. Pure functions of arrays.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum

import numpy as np

import context_neurons.verdict.statistics as st
from context_neurons.checks import InputError
from context_neurons.verdict.formatting import bounds_text, interval_text, number_text
from context_neurons.verdict.formatting import read_json_fields
from context_neurons.verdict.protocol import ConfirmatoryProtocol


class PrimaryVerdict(StrEnum):
    """The primary comparison's verdicts (``primary_comparison.verdict``), in the protocol's
    words."""

    ADDS_SOMETHING = "adds something"
    BASELINE_BETTER = "baseline better"
    NO_DIFFERENCE = "no difference shown"
    NOT_TESTABLE = "not testable"


def resampled_aucs(score: np.ndarray, boot_mask: np.ndarray,
                   neuron_draws: np.ndarray) -> np.ndarray:
    """``[resample]`` AUCs of ``score`` against each resample's truth on its neuron draws:
    :func:`~.statistics.auc` of ``score[neuron_draws]``, its ranks counted from one sort of
    ``score`` (:func:`drawn_ranks`), not sorted again in every resample. The same numbers."""
    score = np.asarray(score, dtype=np.float64)
    positive = np.take_along_axis(np.asarray(boot_mask, dtype=bool), neuron_draws, 1)
    if np.isnan(score).any():  # rankdata's NaN rule: the generic path
        return st.auc(score[neuron_draws], positive)
    return st.auc(None, positive, ranked=drawn_ranks(score, neuron_draws))


def drawn_ranks(values: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """:func:`~.statistics.ranks` of ``values[draws]`` (average ranks along each row of
    draws; ``values`` without NaN): each row's count of every distinct value, cumulated, gives
    how many drawn values lie below, so one sort of ``values`` serves every row."""
    distinct, code = np.unique(values, return_inverse=True)
    codes = code[draws]  # [row, n]
    rows, n_distinct = draws.shape[0], len(distinct)
    offsets = (n_distinct * np.arange(rows))[:, None]
    counts = np.bincount((codes + offsets).ravel(), minlength=rows * n_distinct).reshape(
        rows, n_distinct)
    below = np.cumsum(counts, axis=1) - counts
    tied = np.take_along_axis(counts, codes, 1)
    return np.take_along_axis(below, codes, 1) + (tied + 1) / 2


def paired_delta(score: np.ndarray | float,
                 baselines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``delta = score - max_b baselines[b]`` per resample and the index of the best baseline
    (``-1`` where some AUC is undefined; ``delta`` is NaN there).

    Args:
        score: ``[resample]`` AUCs of the score (or a scalar: the point estimate).
        baselines: ``[baseline, resample]`` AUCs (or ``[baseline]``).
    """
    score = np.asarray(score, dtype=np.float64)
    baselines = np.asarray(baselines, dtype=np.float64)
    defined = np.isfinite(score) & np.isfinite(baselines).all(0)
    filled = np.where(np.isfinite(baselines), baselines, -np.inf)
    best = np.where(defined, filled.argmax(0), -1)
    delta = np.where(defined, score - filled.max(0), np.nan)
    return delta, best


def primary_verdict(delta_ci: list[float], n_truth: int, has_context: bool,
                    margin: float, min_truth: int) -> tuple[PrimaryVerdict, bool]:
    """The registered label and whether the interval lies inside ``[-margin, margin]`` (the
    protocol's ``primary_comparison.verdict``); ``not testable`` when the truth holds fewer than
    ``min_truth`` neurons or the context set is empty."""
    low, high = delta_ci
    equivalent = bool(-margin <= low and high <= margin)
    if n_truth < min_truth or not has_context:
        return PrimaryVerdict.NOT_TESTABLE, equivalent
    if low > 0:
        return PrimaryVerdict.ADDS_SOMETHING, equivalent
    if high < 0:
        return PrimaryVerdict.BASELINE_BETTER, equivalent
    return PrimaryVerdict.NO_DIFFERENCE, equivalent


@dataclass(frozen=True)
class BaselineResult:
    """One baseline against the truth, paired with the score.

    Attributes:
        name: the baseline.
        auc: its AUC; ``auc_ci95`` its interval.
        difference: ``AUC(score) - AUC(baseline)``; ``difference_ci95`` its interval.
        best_in_resamples: how many resamples it was the best baseline in.
        best_at_point: whether it has the highest point AUC.
    """

    name: str
    auc: float
    auc_ci95: list[float]
    difference: float
    difference_ci95: list[float]
    best_in_resamples: int
    best_at_point: bool

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class PrimaryComparison:
    """``delta`` with its interval and verdict, and every baseline (``primary_comparison``).

    ``verdict`` is None for a sensitivity (reported without a verdict).
    ``equivalence_margin`` is the protocol's (``primary_comparison.verdict``), which the words
    say; it is not written into the JSON (the protocol's file holds it), so :meth:`from_json`
    is given it."""

    score: str
    score_auc: float
    score_auc_ci95: list[float]
    delta: float
    delta_ci95: list[float]
    best_baseline: str
    baselines: tuple[BaselineResult, ...]
    n_truth: int
    n_resamples: int
    undefined_resamples: int
    verdict: PrimaryVerdict | None
    equivalent_within_margin: bool
    equivalence_margin: float

    def label(self, upper: bool = False) -> str:
        """The verdict (in capitals with ``upper``), with "(equivalent within" the margin ")"
        beside "no difference shown" when the whole interval lies inside the margin (never
        beside another verdict); "no verdict (sensitivity)" for a sensitivity."""
        if not self.verdict:
            return "no verdict (sensitivity)"
        label = self.verdict.upper() if upper else self.verdict
        if self.verdict == PrimaryVerdict.NO_DIFFERENCE and self.equivalent_within_margin:
            return f"{label} (equivalent within {self.equivalence_margin:g})"
        return label

    def words(self, decimals: int = 3) -> str:
        """The verdict and its statistic in one sentence, as the report says it."""
        name = self.score.replace("_", "-")
        return (f"{self.label(upper=True)}: AUC({name}) minus the best baseline's AUC = "
                f"{interval_text(self.delta, self.delta_ci95, decimals)} (best baseline: "
                f"{self.best_baseline.replace('_', ' ')}; AUC({name}) = "
                f"{interval_text(self.score_auc, self.score_auc_ci95, decimals)})")

    def to_json(self) -> dict:
        out = asdict(self)
        del out["equivalence_margin"]  # the protocol's, not the result's
        out["baselines"] = {b.name: b.to_json() for b in self.baselines}
        out["words"] = self.words()
        return out

    @classmethod
    def from_json(cls, data: dict, margin: float) -> "PrimaryComparison":
        """The value :meth:`to_json` wrote (its words are derived, not read; its verdict's word
        is read back as the member), under a protocol of equivalence margin ``margin``."""
        fields = {k: v for k, v in data.items() if k not in ("baselines", "words")}
        verdict = None if data["verdict"] is None else PrimaryVerdict(data["verdict"])
        return cls(**{**read_json_fields(cls, fields), "verdict": verdict},
                   equivalence_margin=margin, baselines=tuple(
            BaselineResult(**read_json_fields(BaselineResult, b))
            for b in data["baselines"].values()))


def primary_comparison(scores: dict[str, np.ndarray], truth_mask: np.ndarray,
                       boot_mask: np.ndarray, neuron_draws: np.ndarray,
                       protocol: ConfirmatoryProtocol, has_context: bool = True,
                       with_verdict: bool = True) -> PrimaryComparison:
    """The primary comparison: the protocol's registered score (``protocol.primary_score``)
    against every other entry of ``scores``, the baselines, in their order (``boot_mask
    [resample, neuron]``, ``neuron_draws [resample, neuron]``)."""
    score_name = protocol.primary_score
    if score_name not in scores:
        raise InputError(f"The primary comparison needs the registered score {score_name!r}; "
                         f"got {sorted(scores)}.")
    baseline_names = [name for name in scores if name != score_name]
    names = [score_name, *baseline_names]
    level = protocol.bootstrap.level
    point = np.array([float(st.auc(scores[n], truth_mask)) for n in names])
    boot = np.stack([resampled_aucs(scores[n], boot_mask, neuron_draws) for n in names])
    delta_point, best_point = paired_delta(point[0], point[1:])
    delta, best = paired_delta(boot[0], boot[1:])
    defined = best >= 0
    interval = lambda x: st.percentile_interval(x[defined], level)  # noqa: E731
    baselines = tuple(
        BaselineResult(name=name, auc=float(point[k + 1]), auc_ci95=interval(boot[k + 1]),
                       difference=float(point[0] - point[k + 1]),
                       difference_ci95=interval(boot[0] - boot[k + 1]),
                       best_in_resamples=int((best == k).sum()),
                       best_at_point=bool(best_point == k))
        for k, name in enumerate(baseline_names))
    delta_ci = interval(delta)
    n_truth = int(np.asarray(truth_mask).sum())
    verdict, equivalent = primary_verdict(
        delta_ci, n_truth, has_context, protocol.primary.equivalence_margin,
        protocol.verdict.min_truth)
    return PrimaryComparison(
        score=score_name, score_auc=float(point[0]), score_auc_ci95=interval(boot[0]),
        delta=float(delta_point), delta_ci95=delta_ci,
        best_baseline=baseline_names[int(best_point)] if best_point >= 0 else "undefined",
        baselines=baselines, n_truth=n_truth, n_resamples=len(delta),
        undefined_resamples=int((~defined).sum()),
        verdict=verdict if with_verdict else None, equivalent_within_margin=equivalent,
        equivalence_margin=protocol.primary.equivalence_margin)


__all__ = ["BaselineResult", "PrimaryComparison", "PrimaryVerdict", "bounds_text", "interval_text",
           "number_text", "paired_delta",
           "drawn_ranks", "primary_comparison", "primary_verdict", "resampled_aucs"]
