"""Run protocol v3 (``assets/protocol/discovery-verdict-v3.json``, registered in commit 871d5be
before any v3 number) on a model.

:func:`evaluate_v3` reads the CONFIRM and CAL data (:mod:`.v3_data`), finds the context set
(:mod:`.context_set`), runs the forward passes and builds the truth (:mod:`.truth`), computes
the frequency-aware score and the four baselines (:mod:`.baselines`), the primary comparison
(:mod:`.comparison`), v2's secondary verdicts, the same-model controls, the sensitivities, the
non-pooled domains' descriptions and, when asked, the EXPLORATORY label-free arm
(:mod:`.label_free`). From the command line::

    python -m context_neurons v3 [--model trained] [--out FILE.json] [--resamples N]

(:mod:`context_neurons.commands.v3`, which calls :func:`run`) writes every registered model (a
model not trained is ``pending: not trained``) and prints the report in the protocol's order.
v1 and v2 are untouched.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

import context_neurons.verdict.statistics as st
from context_neurons.activations import head_statistics
from context_neurons.discovery import scoring_vocabulary
from context_neurons.domain_shift import permuted_vocabulary, predict_path_shifts
from context_neurons.method import MethodValues
from context_neurons.progress import Phases
from context_neurons.models import load_model
from context_neurons.checks import InputError
from context_neurons.models.loading import TRAINED_DIR, bridge_from_hf
from context_neurons.training.config import EOT
from context_neurons.training.summary import TrainingRun, training_run
from context_neurons.training.loop import build_model
from context_neurons.verdict.data import unigram_distributions
from context_neurons.verdict.draws import Draws, paired_draws, random_read_directions
from context_neurons.verdict.entries import EntryStatus, NotComparable
from context_neurons.verdict.options import RunOptions
from context_neurons.verdict.scores import both_scores, weight_controls
from context_neurons.verdict.protocol import ConfirmatoryProtocol, ProtocolV3, Seeds
from context_neurons.verdict.protocol import load_protocol_v3
from context_neurons.verdict.results import ScoreResult
from context_neurons.verdict.planted import planted_control
from context_neurons.verdict.comparison import primary_comparison, resampled_aucs
from context_neurons.verdict.v3_data import NO_DATA, NOT_POOLED, V3Data
from context_neurons.verdict.v3_data import v3_data
from context_neurons.verdict.context_set import ContextSet, context_set
from context_neurons.verdict.label_free import LABEL, label_free_pool
from context_neurons.verdict.v3_result import NeuronsPermuted, NonPooledDomain, Sensitivity
from context_neurons.verdict.v3_result import DataSummary, DomainSummary, LabelFreeArm
from context_neurons.verdict.v3_result import V3Controls, V3Evaluation, jsonable
from context_neurons.verdict.v3_models import comparability, model_key, registered_model
from context_neurons.verdict.baselines import BagOfTokens, WeightScores, bag_of_tokens_score
from context_neurons.verdict.baselines import bag_responses, shifts_against
from context_neurons.verdict.v3_stored import device_label, model_entries, store_result
from context_neurons.verdict.baselines import weight_scores
from context_neurons.verdict.truth import (
    ConfirmMeasurements,
    SetShifts,
    TruthPair,
    against_pooled,
    full_shifts,
    measure_v3,
    resample_truth,
    set_shifts,
    truth_summary_v3,
)

STOP_NO_CONTEXT = "not testable: no non-local contextual head"


def data_summary(data: V3Data) -> DataSummary:
    """What the evaluation read: each domain's units and windows, and the domains by status."""
    domains = {d: DomainSummary(c.own_units, c.fallback, c.units_read, len(c.windows), c.status)
               for d, c in data.confirm.items()}
    return DataSummary(domains, data.pooled, data.by_status(NOT_POOLED), data.by_status(NO_DATA))


# ----------------------------------------------------------------------------------------------
# Secondary verdicts, controls, sensitivities
# ----------------------------------------------------------------------------------------------


def secondary_verdicts(ws: WeightScores, pair: TruthPair, neuron_draws: np.ndarray,
                       permutation: np.ndarray,
                       protocol: ConfirmatoryProtocol) -> dict[str, ScoreResult]:
    """v2's verdict for the frequency-aware score and ``top[j]``, each with its own rho and the
    neurons-permuted rho (v2's code: :func:`~.scores.both_scores`)."""
    scores = both_scores(ws.prediction, ws.top.double().cpu().numpy(), pair.point, pair.boot,
                         (pair.full.sd, pair.full_boot.sd), neuron_draws, permutation,
                         protocol.verdict, protocol.bootstrap.level)
    return scores


def same_model_controls(scored: Scored, pair: TruthPair, neuron_draws: np.ndarray,
                        secondary: dict[str, ScoreResult]) -> V3Controls:
    """Neurons permuted, random read directions and the vocabulary permuted: v2's code with
    the protocol's seeds (``protocol.seeds``)."""
    ws, protocol, start = scored.ws, scored.protocol, scored.start
    heads, seeds = ws.prediction.heads, protocol.seeds
    shuffled = predict_path_shifts(ws.pieces, ws.read, permuted_vocabulary(
        scored.distributions, seeds.vocabulary), start).split(heads)
    random = random_read_directions(ws.read, seeds.random_directions)
    random_paths = predict_path_shifts(ws.pieces, random, scored.distributions,
                                       start).split(heads)
    out = weight_controls(ws.circuit, shuffled, random, random_paths, pair.point, pair.boot,
                          neuron_draws, ws.prediction.score().double().numpy(),
                          ws.top.double().cpu().numpy(), scoring_vocabulary(scored.model),
                          protocol.verdict, protocol.bootstrap.level)
    bound = protocol.verdict.permutation_control_abs_at_most
    rho_f = secondary["frequency_aware"].permutation_spearman
    rho_t = secondary["top"].permutation_spearman
    return V3Controls(out, NeuronsPermuted(rho_f, rho_t, bound,
                                           bool(abs(rho_f) > bound or abs(rho_t) > bound)))


def _comparison_at(shifts: SetShifts, min_d: float, min_part: float, scores: dict,
                   neuron_draws: np.ndarray, protocol: ConfirmatoryProtocol,
                   heads: list[int] | None = None) -> Sensitivity:
    pair = shifts.truth(min_d, min_part)
    comparison = primary_comparison(scores, pair.point.mask, pair.boot.mask, neuron_draws,
                                    protocol, with_verdict=False)
    n_truth_ci95 = st.percentile_interval(pair.boot.mask.sum(-1), protocol.bootstrap.level)
    return Sensitivity(n_truth=int(pair.point.mask.sum()), n_truth_ci95=n_truth_ci95,
                       comparison=comparison, heads=heads)


def sensitivities_v3(scored: Scored, shifts: SetShifts,
                     draws: Draws) -> dict[str, Sensitivity]:
    """The registered sensitivities, reported without verdicts: Cohen's d at 0.5 and 2.0 and
    the non-local set in place of the context set (the resample ablation is in the truth)."""
    protocol, cs, neuron_draws = scored.protocol, scored.cs, draws.neurons
    min_d, min_part = protocol.truth.min_cohens_d, protocol.truth.min_context_part
    out = {f"cohens_d_{d:g}": _comparison_at(shifts, d, min_part, scored.scores, neuron_draws,
                                             protocol)
           for d in protocol.truth.sensitivity_cohens_d}
    heads = list(cs.non_local)
    if heads == list(cs.heads):
        out["non_local_set"] = Sensitivity(heads=heads, note="the same heads as the context "
                                           "set: its truth and comparison are the primary ones")
    elif not heads:
        out["non_local_set"] = Sensitivity(heads=heads, note="no non-local head")
    else:
        nl = weight_scores(scored.method, heads, scored.distributions, scored.start,
                           like=scored.ws)
        nl_shifts = set_shifts(scored.measured, "non_local", draws.weights,
                               (shifts.full, shifts.full_boot))
        out["non_local_set"] = _comparison_at(nl_shifts, min_d, min_part,
                                              nl.scores(scored.bag), neuron_draws, protocol,
                                              heads)
    return out


def non_pooled_report(data: V3Data, measured: ConfirmMeasurements, pair: TruthPair,
                      ws: WeightScores, distributions: dict, start: int,
                      protocol: ConfirmatoryProtocol, d_vocab: int) -> dict[str, NonPooledDomain]:
    """Descriptive only: each non-pooled domain against the pooled domains (``pooling``); the
    predicted context shift of a domain is its CAL ``p_D``'s against the pooled domains'."""
    min_d, min_part = protocol.truth.min_cohens_d, protocol.truth.min_context_part
    names = list(measured.others)
    if not names:
        return {}
    own = unigram_distributions({name: data.cal[name] for name in names}, d_vocab)
    paths = predict_path_shifts(ws.pieces, ws.read, {**distributions, **own}, start)
    predicted = shifts_against(paths.split(ws.prediction.heads).shift_context.double(),
                               list(range(len(distributions))))
    out = {}
    for k, name in enumerate(names):
        full, ablated = measured.others[name]
        described = against_pooled(full, ablated, measured, pair.full.sd, min_d, min_part)
        out[name] = NonPooledDomain(
            units=data.confirm[name].units_read, windows=len(data.confirm[name].windows),
            spearman_context_shift=float(st.spearman(
                described["context_shift"], predicted[len(distributions) + k].numpy())),
            n_effect_and_context=described["n_effect_and_context"],
            shift_over_sd=described["shift_over_sd"].tolist(),
            context_shift_over_sd=described["context_shift_over_sd"].tolist())
    return out


def label_free_arm(model: TransformerBridge, data: V3Data, ws: WeightScores, pair: TruthPair,
                   neuron_draws: np.ndarray, frequency: np.ndarray, start: int,
                   protocol: ConfirmatoryProtocol) -> LabelFreeArm:
    """EXPLORATORY: the label-free arm on its two pools (no verdict)."""
    reference_boot = resampled_aucs(frequency, pair.boot.mask, neuron_draws)
    reference = float(st.auc(frequency, pair.point.mask))
    eot_id = model.tokenizer.convert_tokens_to_ids(EOT)

    def score_of(distributions: dict) -> np.ndarray:
        paths = predict_path_shifts(ws.pieces, ws.read, distributions, start)
        return paths.split(ws.prediction.heads).score().double().numpy()

    pools = {"mixture": [(d, u.tokens) for d in data.pooled for u in data.cal_units[d]]}
    if "general" in data.pooled:
        pools["general"] = [("general", u.tokens) for u in data.cal_units["general"]]
    out = {}
    for name, members in pools.items():
        out[name] = label_free_pool(
            [t for _, t in members], [d for d, _ in members] if name == "mixture" else None,
            score_of, pair.point.mask, pair.boot.mask, neuron_draws, reference_boot, reference,
            model.cfg.d_vocab, eot_id, model.tokenizer.decode, protocol.bootstrap.level)
    return LabelFreeArm(LABEL, out)


# ----------------------------------------------------------------------------------------------
# The evaluation
# ----------------------------------------------------------------------------------------------


def registered_draws(measured: ConfirmMeasurements, n_resamples: int, d_mlp: int,
                     seeds: Seeds) -> Draws:
    """v3's :class:`~.draws.Draws` over its units, each from its registered seed
    (:class:`~.protocol.Seeds`)."""
    return paired_draws(measured.domain_index, measured.units, n_resamples, d_mlp, seeds.units,
                        seeds.neurons, seeds.permutation)


def truth_and_verdicts(measured: ConfirmMeasurements, ws: WeightScores, scores: dict,
                       draws: Draws, protocol: ConfirmatoryProtocol
                       ) -> tuple[SetShifts, TruthPair, dict]:
    """The truth, the primary comparison and the secondary verdicts."""
    spec = protocol.truth
    min_d, min_part = spec.min_cohens_d, spec.min_context_part
    shifts = set_shifts(measured, "context", draws.weights, full_shifts(measured, draws.weights))
    pair = shifts.truth(min_d, min_part)
    return shifts, pair, {
        "truth": truth_summary_v3(pair, measured.domains, spec, min_d, protocol.bootstrap.level,
                                  resample_truth(measured, pair, min_d, min_part)),
        "primary": primary_comparison(scores, pair.point.mask, pair.boot.mask, draws.neurons,
                                      protocol),
        "secondary": secondary_verdicts(ws, pair, draws.neurons, draws.permutation, protocol)}


def controls_and_sensitivities(scored: Scored, options: RunOptions, timer: Phases,
                               shifts: SetShifts, draws: Draws, pair: TruthPair,
                               verdicts: dict) -> dict:
    """The same-model controls and the sensitivities (each when ``options`` asks, timed), as
    the result's ``controls`` and ``sensitivities``: one piece for v3 and the GPT-2 adapter."""
    out = {}
    if options.controls:
        with timer("controls"):
            out["controls"] = same_model_controls(scored, pair, draws.neurons,
                                                  verdicts["secondary"])
    if options.sensitivities:
        with timer("sensitivities"):
            out["sensitivities"] = {
                "resample_ablation": Sensitivity(
                    n_truth=verdicts["truth"].resample_ablation_n_truth),
                **sensitivities_v3(scored, shifts, draws)}
    return out


def ablated_sets(cs: ContextSet, sensitivities: bool) -> dict[str, list[int]]:
    """The head sets ablated: the context set, and (a sensitivity) the non-local set when it
    differs."""
    sets = {"context": list(cs.heads)}
    if sensitivities and cs.non_local and list(cs.non_local) != list(cs.heads):
        sets["non_local"] = list(cs.non_local)
    return sets


@dataclass(frozen=True)
class Scored:
    """One model's context set scored: what the truth, the verdicts, the controls and the
    sensitivities read (the values that travelled together through five functions)."""

    model: TransformerBridge
    method: MethodValues
    protocol: ConfirmatoryProtocol
    start: int
    cs: ContextSet
    measured: ConfirmMeasurements
    distributions: dict[str, Float[Tensor, " d_vocab"]]
    bag: BagOfTokens
    ws: WeightScores
    scores: dict[str, Float[np.ndarray, " neuron"]]


def score_context_set(model: TransformerBridge, method: MethodValues, data: V3Data,
                      cs: ContextSet, mean_z: Float[Tensor, "head_index d_head"],
                      protocol: ConfirmatoryProtocol, options: RunOptions, timer: Phases,
                      means: str = "CAL", responses_of: Callable = bag_responses) -> Scored:
    """The forward passes on the CONFIRM windows (heads ablated to ``mean_z``, their mean on
    the pooled ``means`` windows, measured with the context set), the domains' ``p_D``, the bag
    of tokens, the score and its baselines, timed."""
    start = protocol.data.window_mean_start
    with timer(f"forward passes: {means} means and CONFIRM windows"):
        measured = measure_v3(model, data, ablated_sets(cs, options.sensitivities), mean_z, start,
                              options.batch_size, options.sensitivities, options.progress)
    distributions = unigram_distributions({d: data.cal[d] for d in data.pooled},
                                          model.cfg.d_vocab)
    with timer("forward passes: bag of tokens"):
        bag = bag_of_tokens_score(model, distributions, start, protocol.bag_length,
                                  responses_of=responses_of)
    with timer("scores and baselines"):
        ws = weight_scores(method, list(cs.heads), distributions, start)
        scores = ws.scores(bag)
    return Scored(model, method, protocol, start, cs, measured, distributions, bag, ws, scores)


def verdicts_of(scored: Scored, options: RunOptions,
                timer: Phases) -> tuple[Draws, SetShifts, TruthPair, dict]:
    """The registered draws, the truth, the primary comparison and the secondary verdicts."""
    with timer("truth, bootstrap, primary and secondary"):
        protocol = scored.protocol
        draws = registered_draws(scored.measured, options.resamples(protocol.bootstrap.resamples),
                                 scored.model.cfg.d_mlp, protocol.seeds)
        return draws, *truth_and_verdicts(scored.measured, scored.ws, scored.scores, draws,
                                          scored.protocol)


def evaluate_v3(model: TransformerBridge, run: TrainingRun, protocol: ProtocolV3 | None = None,
                data: V3Data | None = None, options: RunOptions = RunOptions(),
                name: str | None = None, method: MethodValues | None = None) -> V3Evaluation:
    """Protocol v3 on one model (module docstring). ``data``: :func:`v3_data`, when already
    read; ``options``: resamples, what is computed and how (:class:`~.options.RunOptions`);
    ``method``: the run's taxonomy, circuits and scores, when made."""
    protocol = protocol or load_protocol_v3()
    timer = Phases("protocol v3", announce=options.progress)
    method = method or MethodValues(model)
    if data is None:
        with timer("data"):
            data = v3_data(model.tokenizer, run, protocol)
    start = protocol.data.window_mean_start
    with timer("context set"):
        cal = head_statistics(model, data.pooled_cal_windows, start, options.batch_size)
        cs = context_set(method, cal.previous_share, start, protocol.previous_token_threshold)
    base = {"protocol": protocol.name, "model": name or model_key(run),
            "comparable": comparability(run), "data": data_summary(data), "context_set": cs}
    if not cs.heads:
        return V3Evaluation(**base, stopped=STOP_NO_CONTEXT, runtime=timer.seconds)
    scored = score_context_set(model, method, data, cs, cal.mean_z, protocol, options, timer)
    draws, shifts, pair, verdicts = verdicts_of(scored, options, timer)
    result = {**base, **verdicts, **controls_and_sensitivities(scored, options, timer, shifts,
                                                                draws, pair, verdicts)}
    with timer("non-pooled domains"):
        result["non_pooled"] = non_pooled_report(data, scored.measured, pair, scored.ws,
                                                 scored.distributions, scored.start, protocol,
                                                 model.cfg.d_vocab)
    total = sum(timer.seconds.values())
    if options.label_free:
        with timer("label-free arm (timed apart)"):
            result["label_free"] = label_free_arm(model, data, scored.ws, pair, draws.neurons,
                                                  scored.scores["frequency_aware"],
                                                  scored.start, protocol)
    return V3Evaluation(**result, runtime={
        **timer.seconds, "total_within_budget_s": total,
        "budget_s": protocol.budget_s, "torch_threads": torch.get_num_threads()})


def step0_model(run: TrainingRun, tokenizer) -> TransformerBridge:
    """The model at initialisation: ``build_model`` with the run's configuration and seed, and
    the vocabulary the run's model has (its tokenizer's, which a ``--tokenizer`` run does not
    write into the configuration)."""
    hf = build_model(run.config, run.vocab_size, run.eot_id)
    return bridge_from_hf(hf, tokenizer, "step-0", device="cpu")


def apart_controls(model: TransformerBridge, run: TrainingRun, data: V3Data,
                   options: RunOptions) -> tuple[dict, dict]:
    """Step 0 (the whole evaluation on the initialised model, or its stop) and the planted
    control (unchanged rule), timed apart, in their JSON form: they go into
    :attr:`V3Controls.apart` as the stored result holds them (step 0 without its ``data``,
    which :meth:`V3Evaluation.from_json` could not read back). Step 0: ``options``' resamples
    and batch size, with its controls, without sensitivities or the label-free arm."""
    timer = Phases("protocol v3", announce=options.progress)
    step0_options = RunOptions(options.n_resamples, sensitivities=False,
                               batch_size=options.batch_size)
    with timer("step 0"):
        step0 = evaluate_v3(step0_model(run, model.tokenizer), run, data=data,
                            options=step0_options, name="step 0").to_json()
        step0.pop("data", None)
    with timer("planted"):
        planted = planted_control(load_model("planted")).to_json()
    return {"step_0": step0, "planted": planted}, timer.seconds


# ----------------------------------------------------------------------------------------------
# The command
# ----------------------------------------------------------------------------------------------


def run_directory(model_name: str) -> Path:
    """A trained run's directory (its ``training.json``): ``trained``, a registered name such as
    ``trained-seed1``, or a directory."""
    if model_name == "trained":
        return TRAINED_DIR
    registered = registered_model(model_name)
    directory = registered.directory if registered else Path(model_name).expanduser()
    if not (directory / "training.json").is_file():
        raise InputError(f"Protocol v3 runs on a trained run (a directory with training.json): "
                         f"{model_name!r} is none; 'trained', 'trained-seed1' or a directory.")
    return directory


def run(model_name: str = "trained", n_resamples: int | None = None, label_free: bool = True,
        apart: bool = True, batch_size: int = 8, store: str | None = None,
        device: str = "cpu", progress: bool = False) -> dict:
    """Every registered model's entry, with ``model_name``'s result (the JSON of the command);
    ``store`` (the command line) writes that result beside the model's weights. ``device``
    other than the CPU is for a model whose weights cannot leave a GPU machine (the device jobs:
    the GPT-2-shaped model's stored result was computed on CUDA, and says so); CI, the main job
    and the seed-1 result use the CPU, the tested path. ``progress``: each phase's name on
    stderr when it starts."""
    directory = run_directory(model_name)
    training = training_run(directory)  # before the model: one it cannot compare is not loaded
    key = model_key(training)
    protocol = load_protocol_v3()
    why = comparability(training)
    if why is not None:  # models.comparable_when: the reason, and no number
        return {"protocol": protocol.name, "registered": protocol.registered,
                "models": model_entries({key: NotComparable(why)}),
                "primary_verdict": EntryStatus.NOT_COMPARABLE.value}
    timer = Phases("protocol v3", announce=progress)
    with timer("loading the model"):
        loaded = load_model(str(directory) if directory != TRAINED_DIR else "trained",
                            device=device)
    with timer("data (CONFIRM manifest and CAL)"):
        data = v3_data(loaded.model.tokenizer, training, protocol)
    options = RunOptions(n_resamples, label_free=label_free, batch_size=batch_size,
                         progress=progress)
    result = evaluate_v3(loaded.model, training, protocol, data, options)
    data_s = timer.seconds["data (CONFIRM manifest and CAL)"]
    runtime = {"data (CONFIRM manifest and CAL)": data_s, **result.runtime}
    runtime["total_within_budget_s"] += data_s
    controls = result.controls
    if apart and not result.stopped:
        extra, seconds = apart_controls(loaded.model, training, data, options)
        controls = replace(controls or V3Controls(), apart=jsonable(extra))
        runtime.update({f"{k} (timed apart)": v for k, v in seconds.items()})
    result = replace(result, runtime=runtime, controls=controls)
    if store:
        gpu = None if device == "cpu" else torch.cuda.get_device_name()
        stored = store_result(directory, key, result.to_json(), store,
                              torch.get_num_threads(), device=device_label(device, gpu))
        print(f"stored: {stored}", file=sys.stderr)
    return {"protocol": protocol.name, "registered": protocol.registered,
            "models": model_entries({key: result}), "primary_verdict": result.primary_verdict}


__all__ = ["STOP_NO_CONTEXT", "Scored", "V3Evaluation", "ablated_sets", "apart_controls",
           "controls_and_sensitivities", "data_summary", "evaluate_v3",
           "label_free_arm", "non_pooled_report", "registered_draws", "run", "run_directory",
           "same_model_controls", "score_context_set", "secondary_verdicts", "sensitivities_v3",
           "step0_model", "truth_and_verdicts", "verdicts_of"]
