"""Each score against a truth, for every protocol (issue 51: v1/v2's scoring lived in v1's
runner, ``evaluate``, and v3 and the GPT-2 adapter imported it from there): AUC, Spearman and
precision with their paired-bootstrap intervals and the verdict (:func:`score_entry`), the
frequency-aware score and ``top[j]`` with the neurons-permuted rho (:func:`both_scores`) and
the controls on the same model (:func:`weight_controls`)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

import context_neurons.verdict.statistics as st
from context_neurons.discovery import top_of_read_vectors
from context_neurons.verdict.comparison import resampled_aucs
from context_neurons.verdict.protocol import VerdictRule
from context_neurons.verdict.results import Controls, RandomDirections, ScoreResult


def score_entry(score: np.ndarray, truth: st.Truth, boot_truth: st.Truth, rho: float,
                rho_boot: np.ndarray, neuron_draws: np.ndarray, permutation_rho: float,
                rule: VerdictRule, level: float) -> ScoreResult:
    """One score against the truth: AUC and Spearman with their intervals at ``level``, precision
    at |T| against the base rate, the criteria and the verdict (protocols v1, v2 and v3)."""
    n_truth = int(truth.mask.sum())
    auc_point = float(st.auc(score, truth.mask))
    auc_boot = resampled_aucs(score, boot_truth.mask, neuron_draws)
    auc_ci = st.percentile_interval(auc_boot, level)
    rho_ci = st.percentile_interval(rho_boot, level)
    precision = st.precision_at_truth_size(score, truth.mask)
    base = n_truth / len(score)
    verdict = st.verdict(n_truth, auc_ci, precision, base, rho_ci, permutation_rho, rule)
    criteria = st.criteria(auc_ci, precision, base, rho_ci, permutation_rho, rule)
    undecided = verdict == st.Verdict.INCONCLUSIVE and criteria["precision_reachable"]
    deciding = st.deciding_size(n_truth, auc_point, auc_ci, rule) if undecided else None
    return ScoreResult(auc_point, auc_ci, float(rho), rho_ci, precision, base, n_truth, verdict,
                       criteria, deciding)


def frequency_rho(predicted: np.ndarray, truth: st.Truth) -> np.ndarray | np.floating:
    """Median over domains of the Spearman correlation across neurons of ``predicted`` and the
    truth's context shifts (``[..., domain, neuron]``; the truth's ranks are computed once): a
    scalar for ``[domain, neuron]``."""
    rho = st.rank_correlation(st.ranks(predicted), truth.context_shift_ranks)
    return np.nanmedian(rho, axis=-1)


def top_rho(top: np.ndarray, truth: st.Truth, sd: np.ndarray) -> np.ndarray:
    """Spearman of ``top[j]`` with the measured |context shift| / sd at each neuron's domain
    (``top`` ranked once, whatever the truth's leading resample axes)."""
    best = np.take_along_axis(truth.context_shift, truth.best[..., None, :], axis=-2)[..., 0, :]
    return st.rank_correlation(st.ranks(top), st.ranks(np.abs(best) / np.maximum(sd, 1e-30)))


def both_scores(prediction, top: np.ndarray, truth: st.Truth, boot: st.Truth,
                sd: tuple[np.ndarray, np.ndarray], neuron_draws: np.ndarray,
                permutation: np.ndarray, rule: VerdictRule,
                level: float) -> dict[str, ScoreResult]:
    """The frequency-aware score (``prediction``, the head set's split of the predicted paths)
    and ``top[j]`` against one truth, each with its rho, the rho with the neurons permuted, and
    (the frequency-aware score) the rho partial on the other paths' predicted shifts; ``sd``:
    the pooled spread of the point estimate and of the bootstrap (protocols v1, v2, v3)."""
    predicted = prediction.shift_context.double().numpy()
    measured = truth.context_shift
    frequency = prediction.score().double().numpy()
    perm_f = float(frequency_rho(predicted[:, permutation], truth))
    perm_t = float(top_rho(top[permutation], truth, sd[0]))
    partial = float(np.nanmedian(st.partial_spearman(
        predicted, measured, prediction.shift_other.double().numpy())))
    frequency_entry = score_entry(
        frequency, truth, boot, float(frequency_rho(predicted, truth)),
        frequency_rho(predicted[None], boot), neuron_draws, perm_f, rule, level)
    top_entry = score_entry(top, truth, boot, float(top_rho(top, truth, sd[0])),
                            top_rho(top, boot, sd[1]), neuron_draws, perm_t, rule, level)
    return {"frequency_aware": replace(frequency_entry, spearman_partial=partial,
                                       permutation_spearman=perm_f),
            "top": replace(top_entry, permutation_spearman=perm_t)}


def weight_controls(circuit, shuffled, random, random_prediction, truth, boot, neuron_draws,
                    frequency, top, vocabulary, rule: VerdictRule, level: float) -> Controls:
    """The protocol's controls that live on the same model (step 0 and planted: elsewhere)."""
    shuffled_context = shuffled.shift_context.double().numpy()
    rho = float(frequency_rho(shuffled_context, truth))
    rho_boot = frequency_rho(shuffled_context[None], boot)
    vocabulary_permuted = score_entry(shuffled.score().double().numpy(), truth, boot, rho,
                                      rho_boot, neuron_draws, 0.0, rule, level)
    random_frequency = random_prediction.score().double().numpy()
    random_top = top_of_read_vectors(circuit, random, vocabulary).double().cpu().numpy()
    random_directions = {}
    for name, real, null in (("frequency_aware", frequency, random_frequency),
                             ("top", top, random_top)):
        cut = float(np.percentile(null, 99))
        random_directions[name] = RandomDirections(cut, int((real > cut).sum()),
                                                   float((real > cut).mean()))
    return Controls(vocabulary_permuted, random_directions)


__all__ = ["both_scores", "frequency_rho", "score_entry", "top_rho", "weight_controls"]
