"""The forward passes and the truth (``truth``) of every protocol from v3 on (v3 and the GPT-2
family, each with its own seeds and thresholds).

The truth is v2's statistic on CONFIRM windows of the pooled domains: each neuron's
single-position Cohen's d at its best pooled domain, ``|d| >= 1.0``, and a context part of at
least 0.5 when **only the context set** is mean-ablated (its ``hook_z`` replaced by the mean over
the CAL windows; every other head intact). :func:`measure_v3` runs the passes once;
:func:`truth_summary_v3` reports ``n_effect``, ``n_truth`` and ``removed``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
from jaxtyping import Float
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

import context_neurons.verdict.statistics as st
from context_neurons.activations import LayerZeroPasses, donor_windows
from context_neurons.verdict.protocol import TruthRulesV3
from context_neurons.verdict.formatting import read_json_fields
from context_neurons.verdict.v3_data import V3Data


@dataclass(frozen=True)
class ConfirmMeasurements:
    """Window means of every neuron on the CONFIRM windows.

    Attributes:
        domains: the pooled domains (the order of ``domain_index``).
        domain_index: each pooled window's domain.
        units: each pooled window's unit key (its resampling cluster).
        full: window means, ``[window, neuron]``; ``squares`` window means of squares.
        ablated: the same with a head set mean-ablated, by set name (``context``, ``non_local``).
        resampled: the context set's resample ablation (donor windows of another domain).
        others: per non-pooled domain, ``(full, context-ablated)`` window means.
    """

    domains: list[str]
    domain_index: np.ndarray
    units: list[str]
    full: np.ndarray
    squares: np.ndarray
    ablated: dict[str, np.ndarray]
    resampled: np.ndarray | None
    others: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


def _np(x: Tensor) -> np.ndarray:
    return x.double().cpu().numpy()


def measure_v3(model: TransformerBridge, data: V3Data, sets: dict[str, list[int]],
               mean_z: Float[Tensor, "head d_head"], start: int, batch_size: int = 8,
               resample: bool = True, progress: bool = False) -> ConfirmMeasurements:
    """Every window mean of the truth: the pooled domains' CONFIRM windows unablated (means and
    means of squares), with each head set of ``sets`` mean-ablated, and with the ``context``
    set's resample ablation; the non-pooled domains' windows unablated and context-ablated. One
    forward pass per group of windows (:class:`~context_neurons.activations.LayerZeroPasses`)."""
    pooled = data.pooled
    windows = [w for d in pooled for w in data.confirm[d].windows]
    labels = [d for d in pooled for _ in data.confirm[d].windows]
    units = [u for d in pooled for u in data.confirm[d].window_units]
    passes = LayerZeroPasses.run(model, windows, start, batch_size, progress)
    full, squares = passes.moments()
    ablated = {name: _np(passes.ablated(heads, mean_z)) for name, heads in sets.items() if heads}
    resampled = None
    if resample and sets.get("context"):
        resampled = _np(passes.resampled(sets["context"], donor_windows(labels)))
    others = {}
    for name in data.by_status("not pooled"):
        own = LayerZeroPasses.run(model, list(data.confirm[name].windows), start, batch_size)
        others[name] = (_np(own.means()), _np(own.ablated(sets["context"], mean_z)))
    index = np.array([pooled.index(label) for label in labels])
    return ConfirmMeasurements(pooled, index, units, _np(full), _np(squares), ablated,
                               resampled, others)


@dataclass(frozen=True)
class TruthPair:
    """The point truth and the truths of every resample, with the unablated shifts."""

    point: st.Truth
    boot: st.Truth
    full: st.Shifts
    full_boot: st.Shifts


@dataclass(frozen=True)
class SetShifts:
    """Unablated and head-set-ablated shifts, at the point and on every resample: the truth at
    any threshold is then cheap (:meth:`truth`)."""

    full: st.Shifts
    full_boot: st.Shifts
    ablated: st.Shifts
    ablated_boot: st.Shifts

    def truth(self, min_d: float, min_part: float) -> TruthPair:
        return TruthPair(st.additive_truth(self.full, self.ablated, min_d, min_part),
                         st.additive_truth(self.full_boot, self.ablated_boot, min_d, min_part),
                         self.full, self.full_boot)


def point_truth(measured: ConfirmMeasurements, set_name: str, min_d: float,
                min_part: float) -> st.Truth:
    """The truth with the head set ``set_name`` mean-ablated, at the point only (no resamples):
    what :meth:`SetShifts.truth` gives as ``point``, for a view that needs no interval."""
    n_dom, index = len(measured.domains), measured.domain_index
    full = st.domain_shifts(measured.full, index, n_dom, squares=measured.squares)
    return st.additive_truth(full, st.domain_shifts(measured.ablated[set_name], index, n_dom),
                             min_d, min_part)


def full_shifts(measured: ConfirmMeasurements,
                weights: np.ndarray) -> tuple[st.Shifts, st.Shifts]:
    """Unablated shifts with v2's single-position spread, at the point and on every resample
    (``weights [resample, window]``)."""
    n_dom, index = len(measured.domains), measured.domain_index
    return (st.domain_shifts(measured.full, index, n_dom, squares=measured.squares),
            st.domain_shifts(measured.full, index, n_dom, weights, measured.squares))


def set_shifts(measured: ConfirmMeasurements, set_name: str, weights: np.ndarray,
               full: tuple[st.Shifts, st.Shifts]) -> SetShifts:
    """:class:`SetShifts` of the head set ``set_name`` (``full``: :func:`full_shifts`)."""
    n_dom, index = len(measured.domains), measured.domain_index
    ablated = measured.ablated[set_name]
    return SetShifts(full[0], full[1], st.domain_shifts(ablated, index, n_dom),
                     st.domain_shifts(ablated, index, n_dom, weights))


@dataclass(frozen=True)
class TruthSummary:
    """What the protocol reports of the truth (``truth.reported``).

    Attributes:
        min_cohens_d, min_context_part: the thresholds.
        n_effect: neurons with ``|d| >= min_cohens_d``.
        n_truth: context neurons by activation.
        removed: ``n_effect - n_truth``; ``removed_share`` over ``n_effect``.
        removes_almost_none: ``removed_share < 0.1`` (a reporting label, not a verdict).
        domains: truth neurons per best domain.
        n_truth_ci95: the truth size's bootstrap interval.
        resample_ablation_n_truth: the truth size with the resample ablation (sensitivity).
        neurons: the truth neurons.
    """

    min_cohens_d: float
    min_context_part: float
    n_effect: int
    n_truth: int
    removed: int
    removed_share: float
    removes_almost_none: bool
    domains: dict[str, int]
    n_truth_ci95: list[float]
    resample_ablation_n_truth: int | None
    neurons: list[int]

    def sentence(self) -> str:
        text = (f"{self.n_truth} context neurons by activation of {self.n_effect} with |d| >= "
                f"{self.min_cohens_d:g}: the context criterion removes {self.removed} "
                f"({self.removed_share:.1%})")
        if self.removes_almost_none:
            text += ("; the context criterion removes almost none of the neurons the effect "
                     "size selects (under 10%), and the verdicts stand with this sentence beside "
                     "them")
        return text

    def to_json(self) -> dict:
        return {**asdict(self), "sentence": self.sentence()}

    @classmethod
    def from_json(cls, data: dict) -> "TruthSummary":
        """The value :meth:`to_json` wrote (its sentence is derived, not read)."""
        return cls(**read_json_fields(cls, {k: v for k, v in data.items() if k != "sentence"}))


def truth_summary_v3(pair: TruthPair, domains: list[str], spec: TruthRulesV3, min_d: float,
                     level: float, resampled: st.Truth | None = None) -> TruthSummary:
    """The report of one truth (``spec``: the protocol's ``truth`` section; ``level``: its
    bootstrap's)."""
    truth = pair.point
    n_effect = int((np.abs(truth.d) >= min_d).sum())
    n_truth = int(truth.mask.sum())
    removed = n_effect - n_truth
    share = removed / n_effect if n_effect else float("nan")
    best = [domains[int(truth.best[j])] for j in np.flatnonzero(truth.mask)]
    return TruthSummary(
        min_cohens_d=min_d, min_context_part=spec.min_context_part, n_effect=n_effect,
        n_truth=n_truth, removed=removed, removed_share=share,
        removes_almost_none=bool(n_effect and share < spec.removes_almost_none_below),
        domains={d: best.count(d) for d in domains if d in best},
        n_truth_ci95=st.percentile_interval(pair.boot.mask.sum(-1), level),
        resample_ablation_n_truth=None if resampled is None else int(resampled.mask.sum()),
        neurons=np.flatnonzero(truth.mask).tolist())


def resample_truth(measured: ConfirmMeasurements, pair: TruthPair, min_d: float,
                   min_part: float) -> st.Truth | None:
    """The truth with the context set's resample ablation (sensitivity), or None."""
    if measured.resampled is None:
        return None
    shifts = st.domain_shifts(measured.resampled, measured.domain_index, len(measured.domains))
    return st.additive_truth(pair.full, shifts, min_d, min_part)


def against_pooled(full: np.ndarray, ablated: np.ndarray, measured: ConfirmMeasurements,
                   pooled_sd: np.ndarray, min_d: float, min_part: float) -> dict:
    """A non-pooled domain's measured shift and context shift against the equal-weight mean of
    the pooled domains' means, in units of the pooled single-position sd (descriptive)."""
    n_dom = len(measured.domains)

    def shift(values: np.ndarray, own: np.ndarray) -> np.ndarray:
        means = np.stack([values[measured.domain_index == d].mean(0) for d in range(n_dom)])
        return own.mean(0) - means.mean(0)

    full_shift = shift(measured.full, full)
    context_shift = full_shift - shift(measured.ablated["context"], ablated)
    sd = np.maximum(pooled_sd, 1e-30)
    safe = np.where(full_shift == 0, 1.0, full_shift)
    part = np.where(full_shift == 0, 0.0, context_shift / safe)
    d = full_shift / sd
    return {"shift_over_sd": d, "context_shift_over_sd": context_shift / sd,
            "context_shift": context_shift,
            "n_effect_and_context": int(((np.abs(d) >= min_d) & (part >= min_part)).sum())}


__all__ = ["ConfirmMeasurements", "SetShifts", "TruthPair", "TruthSummary", "against_pooled",
           "full_shifts", "measure_v3", "point_truth", "resample_truth", "set_shifts",
           "truth_summary_v3"]
