"""The paper's claim in its own terms (``paper_claim`` of ``discovery-verdict-gpt2.json``).

Gibson (2025, sections 5 and 6) claims that the neurons whose score passes the threshold,
``F = {j : top[j] >= theta}``, are context neurons. The literal test is precision: of ``F``, the
share in the truth ``T`` (context neurons by activation), against the base rate ``|T| / d_mlp``;
the enrichment ``E = precision / base rate`` and the recall ``|F ∩ T| / |T|`` come with 95%
percentile intervals over the primary comparison's paired resamples (the same unit draws, so the
same resampled truths, and the same neuron draws; ``F`` is a function of the weights and does not
vary). Labels: *finds context neurons* (lower bound of E above 1, point E at least 3), *weakly
enriched* (lower bound above 1), *depleted* (upper bound below 1), *no enrichment shown*
(otherwise); the threshold *separates nothing* when ``|F| >= 0.9 d_mlp`` and *finds nothing* when
``F`` is empty, and then the count-matched set (the 100 highest ``top[j]``, the paper's count)
answers, labelled so. Pure functions of arrays.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum

import numpy as np
from jaxtyping import Bool, Float, Int

import context_neurons.verdict.statistics as st
from context_neurons.verdict.gpt2_protocol import PaperClaimRules
from context_neurons.verdict.formatting import interval_text, read_json_fields


class ClaimLabel(StrEnum):
    """The paper claim's labels, as the protocol registers them (``paper_claim.verdict``)."""

    FINDS_CONTEXT_NEURONS = "finds_context_neurons"
    WEAKLY_ENRICHED = "weakly_enriched"
    NO_ENRICHMENT_SHOWN = "no_enrichment_shown"
    DEPLETED = "depleted"
    SEPARATES_NOTHING = "separates_nothing"
    FINDS_NOTHING = "finds_nothing"
    NOT_TESTABLE = "not_testable"

    @property
    def words(self) -> str:
        return self.value.replace("_", " ")


@dataclass(frozen=True)
class SetPrecision:
    """One selected set against the truth: its size, precision, base rate, enrichment and
    recall, each with its interval, and the resamples left out (empty truth or empty set)."""

    n_selected: int
    precision: float
    precision_ci95: list[float]
    base_rate: float
    base_rate_ci95: list[float]
    enrichment: float
    enrichment_ci95: list[float]
    recall: float
    recall_ci95: list[float]
    undefined_resamples: int
    label: ClaimLabel | None

    def words(self) -> str:
        return (f"{self.n_selected} neurons: precision {interval_text(self.precision, self.precision_ci95)}"
                f" against a base rate of {interval_text(self.base_rate, self.base_rate_ci95)}, "
                f"enrichment {interval_text(self.enrichment, self.enrichment_ci95, 2)}, recall "
                f"{interval_text(self.recall, self.recall_ci95)}")

    def to_json(self) -> dict:
        return {**asdict(self), "label": None if self.label is None else str(self.label)}

    @classmethod
    def from_json(cls, data: dict) -> "SetPrecision":
        label = None if data["label"] is None else ClaimLabel(data["label"])
        return cls(**{**read_json_fields(cls, data), "label": label})


def _ratio(num: np.ndarray | np.generic | float,
           den: np.ndarray | np.generic | float) -> np.ndarray:
    """``num / den``, NaN where ``den`` is 0."""
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    return np.divide(num, den, out=np.full(num.shape, np.nan), where=den > 0)


def enrichment_label(point: float, interval: list[float], bar: float) -> ClaimLabel:
    """The registered label of an enrichment and its interval (``bar``: the point E needed)."""
    low, high = interval
    if low > 1 and point >= bar:
        return ClaimLabel.FINDS_CONTEXT_NEURONS
    if low > 1:
        return ClaimLabel.WEAKLY_ENRICHED
    if high < 1:
        return ClaimLabel.DEPLETED
    return ClaimLabel.NO_ENRICHMENT_SHOWN


def set_precision(selected: Bool[np.ndarray, " d_mlp"], truth: Bool[np.ndarray, " d_mlp"],
                  boot_truth: Bool[np.ndarray, "resample d_mlp"],
                  neuron_draws: Int[np.ndarray, "resample d_mlp"], level: float,
                  bar: float | None) -> SetPrecision:
    """Precision, base rate, enrichment and recall of ``selected`` at the point and over the
    resamples (each resample: its truth on its drawn neurons); ``bar`` None: no label."""
    hit = selected & truth
    precision, base = _ratio(hit.sum(), selected.sum()), truth.mean()
    enrichment, recall = _ratio(precision, base), _ratio(hit.sum(), truth.sum())
    f = selected[neuron_draws]
    t = np.take_along_axis(boot_truth, neuron_draws, 1)
    hits = (f & t).sum(1)
    b_precision, b_base = _ratio(hits, f.sum(1)), t.mean(1)
    b_enrichment, b_recall = _ratio(b_precision, b_base), _ratio(hits, t.sum(1))
    defined = np.isfinite(b_enrichment) & np.isfinite(b_recall)
    interval = lambda x: st.percentile_interval(x[defined], level)  # noqa: E731
    e_ci = interval(b_enrichment)
    label = None if bar is None or not np.isfinite(enrichment) else enrichment_label(
        float(enrichment), e_ci, bar)
    return SetPrecision(int(selected.sum()), float(precision), interval(b_precision), float(base),
                        interval(b_base), float(enrichment), e_ci, float(recall),
                        interval(b_recall), int((~defined).sum()), label)


def count_matched(top: Float[np.ndarray, " d_mlp"], n: int) -> Bool[np.ndarray, " d_mlp"]:
    """The ``n`` neurons of highest ``top[j]``, ties by neuron index."""
    order = np.lexsort((np.arange(len(top)), -np.asarray(top, dtype=np.float64)))
    mask = np.zeros(len(top), dtype=bool)
    mask[order[:n]] = True
    return mask


@dataclass(frozen=True)
class SweepPoint:
    """One theta of the sweep, at the point estimate (no verdict)."""

    theta: float
    n_found: int
    precision: float
    recall: float


@dataclass(frozen=True)
class PaperClaim:
    """The paper's claim on one model.

    Attributes:
        theta: the threshold; ``d_mlp`` the layer's width.
        at_theta: ``F``'s precision, enrichment and recall (its label None when theta separates
            or finds nothing).
        count_matched: the count-matched set's.
        label: the answer's label: at theta, or ``separates_nothing`` / ``finds_nothing`` /
            ``not_testable``.
        answer: the label that answers the claim (count-matched's when theta's cannot).
        answer_at_count: whether the answer is the count-matched set's.
        sweep: the theta sweep.
    """

    theta: float
    d_mlp: int
    at_theta: SetPrecision
    count_matched: SetPrecision
    count_n: int
    label: ClaimLabel
    answer: ClaimLabel
    answer_at_count: bool
    sweep: tuple[SweepPoint, ...]

    def sentence(self) -> str:
        n = self.at_theta.n_selected
        if self.label == ClaimLabel.NOT_TESTABLE:
            return "the paper's claim: not testable (the truth holds too few neurons or the " \
                   "context set is empty)"
        if self.label == ClaimLabel.SEPARATES_NOTHING:
            head = (f"the threshold separates nothing: theta finds {n} of {self.d_mlp} neurons, "
                    "so its precision equals the base rate by construction (and its recall is "
                    "near 1 by construction)")
        elif self.label == ClaimLabel.FINDS_NOTHING:
            head = "theta finds no neuron"
        else:
            head = f"at theta {self.theta:g}: {self.label.words.upper()} ({self.at_theta.words()})"
        if not self.answer_at_count:
            return f"the paper's claim {head}; at its count of {self.count_n}: " \
                   f"{self.count_matched.label.words} ({self.count_matched.words()})"
        return (f"the paper's claim: {head}; at the paper's count, not at its threshold: "
                f"{self.answer.words.upper()} ({self.count_matched.words()})")

    def to_json(self) -> dict:
        return {"theta": self.theta, "d_mlp": self.d_mlp, "at_theta": self.at_theta.to_json(),
                "count_matched": self.count_matched.to_json(), "count_n": self.count_n,
                "label": str(self.label), "answer": str(self.answer),
                "answer_at_count": self.answer_at_count,
                "sweep": [asdict(p) for p in self.sweep], "sentence": self.sentence()}

    @classmethod
    def from_json(cls, data: dict) -> "PaperClaim":
        return cls(data["theta"], data["d_mlp"], SetPrecision.from_json(data["at_theta"]),
                   SetPrecision.from_json(data["count_matched"]), data["count_n"],
                   ClaimLabel(data["label"]), ClaimLabel(data["answer"]), data["answer_at_count"],
                   tuple(SweepPoint(**read_json_fields(SweepPoint, p)) for p in data["sweep"]))


def paper_claim(top: Float[np.ndarray, " d_mlp"], truth: Bool[np.ndarray, " d_mlp"],
                boot_truth: Bool[np.ndarray, "resample d_mlp"],
                neuron_draws: Int[np.ndarray, "resample d_mlp"], rules: PaperClaimRules,
                level: float, testable: bool) -> PaperClaim:
    """The paper's claim (module docstring); ``testable``: the truth holds at least
    ``min_truth`` neurons and the context set is not empty."""
    top = np.asarray(top, dtype=np.float64)
    d_mlp, found = len(top), top >= rules.theta
    n_found = int(found.sum())
    bar = rules.precision_over_base_at_least
    if not testable:
        label = ClaimLabel.NOT_TESTABLE
    elif n_found == 0:
        label = ClaimLabel.FINDS_NOTHING
    elif n_found >= rules.separates_nothing_fraction * d_mlp:
        label = ClaimLabel.SEPARATES_NOTHING
    else:
        label = None
    at_theta = set_precision(found, truth, boot_truth, neuron_draws, level,
                             bar if label is None else None)
    matched = set_precision(count_matched(top, rules.count_matched_n), truth, boot_truth,
                            neuron_draws, level, bar if testable else None)
    label = label or at_theta.label
    at_count = label in (ClaimLabel.SEPARATES_NOTHING, ClaimLabel.FINDS_NOTHING)
    answer = matched.label if at_count else label
    sweep = tuple(SweepPoint(float(t), int((top >= t).sum()),
                             float(_ratio(((top >= t) & truth).sum(), (top >= t).sum())),
                             float(_ratio(((top >= t) & truth).sum(), truth.sum())))
                  for t in rules.thetas)
    return PaperClaim(rules.theta, d_mlp, at_theta, matched, rules.count_matched_n, label,
                      answer, at_count, sweep)


__all__ = ["ClaimLabel", "PaperClaim", "SetPrecision", "SweepPoint", "count_matched",
           "enrichment_label", "paper_claim", "set_precision"]
