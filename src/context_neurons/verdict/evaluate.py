"""Run the pre-registered evaluation (``assets/protocol/discovery-verdict.json``) on a model.

:func:`measure` does the forward passes (window means, with and without ablations) once;
:func:`evaluate` turns them and the two scores into statistics, bootstrap intervals, controls and
verdicts. Both scores are computed from the weights, the calibration text and (the
frequency-aware score) CAL unigram counts; the truth only from EVAL activations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

import context_neurons.verdict.statistics as st
from context_neurons.activations import PREVIOUS_TOKEN_MIN, mean_head_z, previous_token_attention
from context_neurons.activations import LayerZeroPasses, donor_windows
from context_neurons.discovery import read_vectors, scoring_vocabulary
from context_neurons.domain_shift import PathShifts, path_pieces, permuted_vocabulary
from context_neurons.domain_shift import predict_path_shifts
from context_neurons.method import MethodValues
from context_neurons.printing import fixed, show_table
from context_neurons.verdict.formatting import interval_text
from context_neurons.stability import denominator_study
from context_neurons.stability.bounds import coefficient_of_variation
from context_neurons.training.summary import TrainingRun
from context_neurons.verdict.data import eval_arrays, protocol_data
from context_neurons.verdict.data import unigram_distributions
from context_neurons.verdict.draws import paired_draws, random_read_directions
from context_neurons.verdict.protocol import ProtocolV1, load_protocol
from context_neurons.verdict.results import Evaluation, HeadSetResult
from context_neurons.verdict.results import ScoreResult, StableBroadHeads
from context_neurons.verdict.options import RunOptions
from context_neurons.verdict.scores import both_scores, weight_controls
from context_neurons.verdict.results import TruthThreshold


@dataclass
class Measurements:
    """EVAL window means of every neuron: unablated, and with each head set ablated."""

    domains: list[str]
    domain_index: np.ndarray
    documents: list[str]
    full: np.ndarray
    ablated: dict[str, np.ndarray]  # head-set name -> [window, neuron]
    resampled: dict[str, np.ndarray] = field(default_factory=dict)
    full_squares: np.ndarray | None = None  # each window's mean of squared values (protocol v2)


#: EVAL windows per domain for the previous-token measure (a cheap, fixed subset).
PREVIOUS_WINDOWS = 8


def previous_token_heads(model: TransformerBridge, data, start: int) -> tuple[Tensor, list[int]]:
    """Each layer-0 head's mean attention to the previous token on the first
    :data:`PREVIOUS_WINDOWS` EVAL windows of every domain, and the heads at or above
    :data:`~context_neurons.activations.PREVIOUS_TOKEN_MIN`."""
    subset = [w for item in data.values() for w in item.eval_windows[:PREVIOUS_WINDOWS]]
    previous = previous_token_attention(model, subset, start)
    return previous, [h for h in range(len(previous)) if previous[h] >= PREVIOUS_TOKEN_MIN]


def head_sets(method: MethodValues, protocol: ProtocolV1 | None = None,
              data: dict | None = None) -> tuple[dict[str, list[int]], StableBroadHeads | None]:
    """The protocol's head sets: the taxonomy's contextual heads (primary) and every non-local
    head (secondary). Under protocol v2 (``head_sets.add_stable_broad_heads``) the primary set
    adds the non-local heads whose denominators are as stable as the contextual heads'
    (:func:`stable_broad_heads` on the CAL windows of ``data``).

    Returns:
        ``(sets, stability)``; ``stability`` is None unless the rule applies.
    """
    taxonomy = method.taxonomy(previous_token_rule=False)  # the rules v1 and v2 registered
    contextual = list(taxonomy.groups["contextual"])
    sets = {
        "primary": contextual,
        "secondary": [h for h in taxonomy.heads if taxonomy.shapes[h] != "local"],
    }
    if protocol is None or not protocol.add_stable_broad_heads or not contextual:
        return sets, None
    cal = [w for item in data.values() for w in item.cal_windows]
    stability = stable_broad_heads(method.model, cal, contextual, sets["secondary"])
    sets["primary"] = sorted(contextual + stability.added)
    return sets, stability


def stable_broad_heads(model: TransformerBridge, windows: list[Tensor], contextual: list[int],
                       candidates: list[int]) -> StableBroadHeads:
    """Chapter 3's "CV texts" of every head (destination ``n_ctx // 2``, token ``' the'``) and the
    ``candidates`` outside ``contextual`` whose CV is at most the largest among ``contextual``."""
    study = denominator_study(model, windows, n=model.cfg.n_ctx // 2)
    cv = {h: coefficient_of_variation(study.measured(h)) for h in study.heads}
    bar = max(cv[h] for h in contextual)
    added = [h for h in candidates if h not in contextual and cv[h] <= bar]
    return StableBroadHeads(cv, bar, added, len(study.labels), study.n)


@torch.no_grad()
def measure(model: TransformerBridge, data, sets: dict[str, list[int]], start: int,
            progress: bool = False, resample: bool = True,
            batch_size: int = 32, cache: dict | None = None) -> Measurements:
    """The window means of the evaluation (EVAL windows are all ``n_ctx`` long): one forward
    pass over the windows (:class:`~context_neurons.activations.LayerZeroPasses`) gives the
    unablated means and every head set's ablation; ``resample``: also the primary set's resample
    ablation. ``cache``: a dict kept between calls on the same model and data (two protocols
    share the pass and every ablation of the same head set)."""
    cache = {} if cache is None else cache  # kept for this call at least
    windows, labels, documents = eval_arrays(data)
    domains = list(data)

    once = lambda key, compute: _once(cache, key, compute)  # noqa: E731
    cal = [w for item in data.values() for w in item.cal_windows]
    mean_z = once(("mean_z",), lambda: mean_head_z(model, cal, batch_size))
    passes = once(("passes", start), lambda: LayerZeroPasses.run(model, windows, start,
                                                                 batch_size, progress))
    full, squares = once(("full",), lambda: tuple(x.double().numpy() for x in passes.moments()))
    ablated, resampled = {}, {}
    for name, heads in sets.items():
        if heads:
            ablated[name] = once(("ablated", tuple(heads)), lambda: passes.ablated(
                heads, mean_z).double().numpy())
            if name == "primary" and resample:  # the sensitivity check of the protocol's truth
                resampled[name] = once(("resampled", tuple(heads)), lambda: passes.resampled(
                    heads, donor_windows(labels)).double().numpy())
    index = np.array([domains.index(label) for label in labels])
    return Measurements(domains, index, documents, full, ablated, resampled, squares)


@dataclass(frozen=True)
class PredictedPaths:
    """The frequency-aware algebra of every path on the protocol's domains, and its controls'."""

    paths: PathShifts  # each path's predicted shift, with the domains' p_D
    shuffled: PathShifts  # the same with token ids permuted in p_D (the vocabulary control)
    random: Tensor  # [d_model, d_mlp] random read directions with the read vectors' norms
    random_paths: PathShifts  # the shifts read along them (the random-direction control)


def predicted_paths(model: TransformerBridge, circuit, distributions: dict, start: int,
                    seed: int) -> PredictedPaths:
    """:class:`PredictedPaths` from the calibration text of ``circuit`` (the read vectors and
    path pieces depend on it only, not on the circuit's heads)."""
    pieces = path_pieces(model, circuit.calibration.tokens[1:])
    read = read_vectors(circuit, model)
    paths = predict_path_shifts(pieces, read, distributions, start)
    shuffled = predict_path_shifts(pieces, read, permuted_vocabulary(distributions, seed), start)
    random = random_read_directions(read, seed)
    return PredictedPaths(paths, shuffled, random,
                          predict_path_shifts(pieces, random, distributions, start))


def _once(cache: dict | None, key: tuple, compute):
    """``cache[key]``, computed on first use (``cache`` None: computed every time)."""
    if cache is None:
        return compute()
    if key not in cache:
        cache[key] = compute()
    return cache[key]


def evaluate(
    model: TransformerBridge,
    run: TrainingRun,
    protocol: ProtocolV1 | None = None,
    corpora_dir=None,
    options: RunOptions = RunOptions(),
    data: dict | None = None,
    cache: dict | None = None,
    method: MethodValues | None = None,
) -> Evaluation:
    """The whole pre-registered evaluation on one model. ``options``: resamples (fewer for a quick
    look), the controls, progress (:class:`~.options.RunOptions`; v1 and v2 have no
    sensitivities or label-free arm); ``data``: the protocol's documents
    (:func:`~context_neurons.verdict.data.protocol_data`), when already read; ``cache``: forward
    passes and predictions kept between protocols on the same model and data (:func:`measure`,
    :func:`predicted_paths`); ``method``: the run's taxonomy, circuits and scores
    (:class:`~context_neurons.method.MethodValues`), when made."""
    method = method or MethodValues(model)
    protocol = protocol or load_protocol()
    start, truth_rules = protocol.data.window_mean_start, protocol.truth
    n_resamples = options.resamples(protocol.bootstrap.resamples)
    seed, level = protocol.bootstrap.seed, protocol.bootstrap.level
    if data is None:
        data = protocol_data(model.tokenizer, run, protocol, corpora_dir)
    sets, stability = head_sets(method, protocol, data)
    basics = dict(protocol=protocol.name, head_sets=sets, domains=list(data),
               eval_windows={d: len(v.eval_windows) for d, v in data.items()},
               eval_documents={d: len(set(v.eval_documents)) for d, v in data.items()},
               n_resamples=n_resamples)
    if not sets["primary"]:
        return Evaluation(**basics, stopped="the taxonomy finds no contextual head: the method stops")
    measured = measure(model, data, sets, start, options.progress, cache=cache)
    squares = measured.full_squares if truth_rules.single_position else None
    distributions = unigram_distributions(data, model.cfg.d_vocab)
    n_dom = len(data)
    d_mlp = model.cfg.d_mlp
    draws = paired_draws(measured.domain_index, measured.documents, n_resamples, d_mlp,
                         seed, seed, seed + 1)
    weights, neuron_draws, permutation = draws.weights, draws.neurons, draws.permutation
    full = st.domain_shifts(measured.full, measured.domain_index, n_dom, squares=squares)
    full_boot = st.domain_shifts(measured.full, measured.domain_index, n_dom, weights, squares)
    min_d, min_part = truth_rules.min_cohens_d, truth_rules.min_context_part
    threshold = None
    if truth_rules.has_ladder:  # protocol v2: the threshold reads the primary set's truth size
        ablated = st.domain_shifts(measured.ablated["primary"], measured.domain_index, n_dom)
        min_d, tried = st.ladder_threshold(
            lambda d: st.additive_truth(full, ablated, d, min_part).mask.sum(), min_d,
            truth_rules.ladder_down, truth_rules.ladder_up, protocol.verdict.min_truth,
            d_mlp / 3)
        threshold = TruthThreshold(min_d, tried)
    vocabulary = scoring_vocabulary(model)
    circuits = {name: method.circuit(heads) for name, heads in sets.items() if heads}
    predicted = _once(cache, ("predicted", start, seed), lambda: predicted_paths(
        model, circuits["primary"], distributions, start, seed))
    results = {}
    for set_name, circuit in circuits.items():
        heads = sets[set_name]
        ablated = st.domain_shifts(measured.ablated[set_name], measured.domain_index, n_dom)
        ablated_boot = st.domain_shifts(measured.ablated[set_name], measured.domain_index, n_dom,
                                        weights)
        truth = st.additive_truth(full, ablated, min_d, min_part)
        boot = st.additive_truth(full_boot, ablated_boot, min_d, min_part)
        resampled = None
        if set_name in measured.resampled:
            resampled = st.additive_truth(
                full, st.domain_shifts(measured.resampled[set_name], measured.domain_index,
                                       n_dom), min_d, min_part)
        prediction = predicted.paths.split(heads)
        top = method.scores(heads).top.double().cpu().numpy()
        scores = both_scores(prediction, top, truth, boot, (full.sd, full_boot.sd),
                             neuron_draws, permutation, protocol.verdict, level)
        results[set_name] = HeadSetResult(
            heads=heads, truth_neurons=np.flatnonzero(truth.mask).tolist(),
            truth_domains={int(j): measured.domains[int(truth.best[j])]
                           for j in np.flatnonzero(truth.mask)},
            truth_count_resample_ablation=(None if resampled is None
                                           else int(resampled.mask.sum())),
            truth_count_ci95=st.percentile_interval(boot.mask.sum(-1), level),
            scores=scores, frequency_aware_highest=highest_scoring(prediction, n=5),
            controls=weight_controls(
                circuit, predicted.shuffled.split(heads), predicted.random,
                predicted.random_paths.split(heads), truth, boot, neuron_draws,
                prediction.score().double().numpy(), top, vocabulary, protocol.verdict, level)
            if options.controls else None)
    return Evaluation(**basics, denominator_stability=stability, truth_threshold=threshold,
                      results=results)


def highest_scoring(prediction, n: int = 5) -> list[dict]:
    """The ``n`` highest frequency-aware scores: neuron, score, predicted domain and the
    contextual heads' predicted share of the shift there."""
    score, best, share = prediction.score(), prediction.best_domain(), prediction.context_share()
    return [{"neuron": j, "score": float(score[j]), "domain": prediction.domains[int(best[j])],
             "share": float(share[best[j], j])}
            for j in score.argsort(descending=True)[:n].tolist()]


#: Short names of the scores and controls in :func:`score_table`.
SHORT_NAMES = {"frequency_aware": "frequency-aware", "top": "top[j] (paper)",
               "frequency_aware_vocabulary_permuted": "freq.-aware, p_D permuted"}


def with_interval(entry: ScoreResult, key: str) -> str:
    """``entry.<key>`` and its 95% interval, ``0.90 [0.86, 0.92]`` (two decimals; the one
    formatter, :func:`~context_neurons.verdict.formatting.interval_text`)."""
    return interval_text(getattr(entry, key), list(getattr(entry, f"{key}_ci95")), 2)


def score_table(result: Evaluation, set_name: str = "primary") -> list[dict]:
    """One row per score and control with an AUC for one head set: the verdict, AUC and Spearman
    with their 95% intervals, and precision against the base rate (two decimals)."""
    return [{"score": SHORT_NAMES.get(name, name), "verdict": e.verdict,
             "AUC [95%]": with_interval(e, "auc"), "rho [95%]": with_interval(e, "spearman"),
             "prec./base": f"{fixed(e.precision, 2)}/{fixed(e.base_rate, 2)}"}
            for name, e in result.results[set_name].scored().items()]


#: What the columns of :func:`score_table` are, for its caption.
SCORE_TABLE = ("each score and control against the truth: AUC and Spearman rho with 95% "
               "intervals; prec./base: precision among the |T| highest against the base rate")


def show_scores(result: Evaluation, protocol_name: str, model: str,
                set_name: str = "primary") -> None:
    """Show :func:`score_table` of one protocol's head set, captioned with its heads and the
    model (``loaded.title``)."""
    heads = result.results[set_name].heads
    show_table(pd.DataFrame(score_table(result, set_name)),
               f"protocol {protocol_name}, {set_name} heads {heads}, {SCORE_TABLE}",
               model=model, index=False)


def truth_summary(result: Evaluation, set_name: str = "primary") -> str:
    """One sentence: how many context neurons by activation, and where."""
    entry = result.results.get(set_name)
    if entry is None:
        return result.stopped or "not computed"
    domains = list(entry.truth_domains.values())
    counts = {d: domains.count(d) for d in sorted(set(domains))}
    listed = ", ".join(f"{d} {n}" for d, n in sorted(counts.items(), key=lambda x: -x[1]))
    return f"{len(entry.truth_neurons)} context neurons by activation ({listed or 'none'})"


__all__ = ["Measurements", "PREVIOUS_WINDOWS", "PredictedPaths", "evaluate", "head_sets",
           "highest_scoring", "measure", "predicted_paths", "previous_token_heads",
           "score_readings", "score_sentence", "score_table", "show_scores",
           "stable_broad_heads", "truth_summary", "verdict_sentences", "with_interval"]


def score_sentence(name: str, entry: ScoreResult) -> str:
    """One score's verdict and numbers in words (two decimals: stable across machines)."""
    text = (f"{name}: {entry.verdict.upper()}: AUC {with_interval(entry, 'auc')}, Spearman "
            f"{with_interval(entry, 'spearman')}, precision {fixed(entry.precision, 2)} at "
            f"|T| = {entry.n_truth} (base rate {fixed(entry.base_rate, 2)})")
    if entry.verdict == st.Verdict.INCONCLUSIVE and not entry.criteria.get("precision_reachable",
                                                                            True):
        text += (f"; 'positive' is out of reach: precision cannot be 3x a base rate of "
                 f"{entry.base_rate:.2f}")
    elif entry.deciding_truth_size:
        size, d_mlp = entry.deciding_truth_size, entry.d_mlp
        text += (f"; about {size} truth neurons would decide it" if size <= d_mlp else
                 f"; deciding it would take about {size} truth neurons, more than the model's "
                 f"{d_mlp}")
    return text


def verdict_sentences(result: Evaluation) -> list[str]:
    """The verdicts of the primary head set, the paper's score after the frequency-aware one."""
    if result.primary is None:
        return [f"not testable: {result.stopped or 'not computed'}"]
    scores = result.primary.scores
    return [score_sentence("frequency-aware score (primary)", scores["frequency_aware"]),
            score_sentence("the paper's top[j]", scores["top"])]


def score_readings(result: Evaluation) -> list[str]:
    """What a v1- or v2-style result says about both scores (chapter 8.10): each verdict, its
    AUC against chance, its rho, and precision against the base rate."""
    above = lambda e: e.auc_ci95[0] > 0.5  # noqa: E731
    fa, tp = result.primary.scores["frequency_aware"], result.primary.scores["top"]
    return [
        f"- The frequency-aware score: {fa.verdict}. Its AUC {with_interval(fa, 'auc')} "
        f"lies {'above' if above(fa) else 'not above'} chance; its predicted context shifts "
        f"correlate with the measured ones at rho {with_interval(fa, 'spearman')}; precision "
        f"{fixed(fa.precision, 2)} against a base rate of {fixed(fa.base_rate, 2)}.",
        f"- The paper's top[j]: {tp.verdict}. AUC {with_interval(tp, 'auc')}, "
        f"rho {with_interval(tp, 'spearman')}: the shape of a neuron's "
        "contributions over a uniformly weighted vocabulary "
        f"{'ranks' if above(tp) else 'does not rank'} the neurons the heads move.",
    ]
