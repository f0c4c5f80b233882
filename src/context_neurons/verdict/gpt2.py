"""Run protocol discovery-verdict-gpt2 (``assets/protocol/discovery-verdict-gpt2.json``,
registered before any GPT-2 number) on a model of the GPT-2 family: an adapter on v3's machinery.

:func:`evaluate_gpt2` reads the data (:mod:`.gpt2_data`: UNIGRAM in v3's CAL place), finds the
context set with v3's rule on the model's own taxonomy (:func:`~.v3_heads.context_set`, the
previous-token check on the UNIGRAM windows), runs v3's forward passes and truth
(:mod:`.v3_truth`), scores and baselines (:mod:`.v3_scores`), the primary paired-bootstrap
comparison (:mod:`.v3_compare`), the secondary verdicts, controls and sensitivities (:mod:`.v3`),
every one with this protocol's seeds and thresholds (:attr:`ProtocolGPT2.v3`), and adds the
paper's claim (:mod:`.paper_claim`) and the comparison with the paper's six heads.
:func:`gpt2_entry` is what the main job calls: the result, or the protocol's one line when the
corpora are absent.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import torch
from transformer_lens.model_bridge import TransformerBridge

from context_neurons import config
from context_neurons.activations import head_statistics
from context_neurons.discovery import score_summary
from context_neurons.files import write_text_whole
from context_neurons.method import MethodValues
from context_neurons.models import load_model
from context_neurons.verdict.bag_closed_form import checked_bag_responses
from context_neurons.verdict.data import unigram_distributions
from context_neurons.verdict.gpt2_data import CorporaAbsent, GPT2Data, corpora_absent, gpt2_data
from context_neurons.verdict.gpt2_protocol import ProtocolGPT2, load_protocol_gpt2
from context_neurons.verdict.gpt2_result import GPT2Evaluation, ModelIdentity, model_identity
from context_neurons.verdict.gpt2_result import paper_heads
from context_neurons.verdict.paper_claim import paper_claim, set_precision
from context_neurons.verdict.planted import planted_control
from context_neurons.progress import Phases
from context_neurons.verdict.v3 import STOP_NO_CONTEXT, data_summary, registered_draws
from context_neurons.verdict.v3 import controls_and_sensitivities, truth_and_verdicts
from context_neurons.verdict.v3_heads import ContextSet, context_set
from context_neurons.verdict.v3_result import V3Controls, V3Evaluation
from context_neurons.verdict.v3_scores import bag_of_tokens_score, weight_scores
from context_neurons.verdict.v3_truth import measure_v3

STOP_FEW_DOMAINS = "not testable: fewer than two domains pool"


def _stop(data: GPT2Data, heads: tuple[int, ...], protocol: ProtocolGPT2) -> str | None:
    if len(data.pooled) < protocol.data.min_pooled_domains:
        return STOP_FEW_DOMAINS
    return None if heads else STOP_NO_CONTEXT


def _head_sets(cs: ContextSet, sensitivities: bool) -> dict[str, list[int]]:
    """The head sets ablated: the context set, and (a sensitivity) the non-local set when it
    differs (v3's sets)."""
    sets = {"context": list(cs.heads)}
    if sensitivities and cs.non_local and list(cs.non_local) != list(cs.heads):
        sets["non_local"] = list(cs.non_local)
    return sets


def _paper_heads_top(method: MethodValues, protocol: ProtocolGPT2, truth: np.ndarray,
                     boot: np.ndarray, draws: np.ndarray):
    """``top[j]`` on the paper's six heads' circuit at theta: |F| and E with interval, no label
    (gpt2 only; a sensitivity)."""
    top = method.scores(list(protocol.paper_claim.paper_heads)).top.double().cpu().numpy()
    return set_precision(top >= protocol.paper_claim.theta, truth, boot, draws,
                         protocol.v3.level, None)


def evaluate_gpt2(model: TransformerBridge, identity: ModelIdentity,
                  protocol: ProtocolGPT2 | None = None, data: GPT2Data | None = None,
                  n_resamples: int | None = None, controls: bool = True,
                  sensitivities: bool = True, batch_size: int = 8, progress: bool = False,
                  method: MethodValues | None = None, apart: bool = True) -> GPT2Evaluation:
    """The protocol on one model (module docstring). ``data``: :func:`gpt2_data` when already
    read; ``n_resamples``: fewer resamples for a quick look (the protocol's 2000 otherwise);
    ``method``: the run's taxonomy, circuits and scores, when made; ``apart``: the planted
    control, timed apart (the protocol's ``controls.planted``; left out only for a quick look,
    and then the result says it was not run)."""
    protocol = protocol or load_protocol_gpt2()
    timer = Phases(protocol.name, announce=progress)
    v3, method = protocol.v3, method or MethodValues(model)
    if data is None:
        with timer("data"):
            data = gpt2_data(model.tokenizer, protocol.data)
    start = protocol.data.window_mean_start
    with timer("context set"):
        cal = head_statistics(model, data.pooled_cal_windows, start, batch_size)
        cs = context_set(method, cal.previous_share, start, v3.previous_token_threshold)
    heads = paper_heads(cs.heads, protocol.paper_claim.paper_heads)
    base = {"protocol": protocol.name, "model": identity.label, "comparable": None,
            "data": data_summary(data), "context_set": cs}
    stopped = _stop(data, cs.heads, protocol)
    if stopped:
        core = V3Evaluation(**base, stopped=stopped, runtime=timer.seconds)
        return GPT2Evaluation(core, identity, heads)
    with timer("forward passes: UNIGRAM means and CONFIRM windows"):
        measured = measure_v3(model, data, _head_sets(cs, sensitivities), cal.mean_z, start,
                              batch_size, sensitivities, progress)
    distributions = unigram_distributions({d: data.cal[d] for d in data.pooled},
                                          model.cfg.d_vocab)
    with timer("forward passes: bag of tokens"):
        bag = bag_of_tokens_score(model, distributions, start, v3.bag_length,
                                  responses_of=checked_bag_responses)
    with timer("scores and baselines"):
        ws = weight_scores(method, list(cs.heads), distributions, start)
        scores = ws.scores(bag)
    with timer("truth, bootstrap, primary and secondary"):
        draws = registered_draws(measured, n_resamples or v3.resamples, model.cfg.d_mlp,
                                 v3.seeds)
        shifts, pair, verdicts = truth_and_verdicts(measured, ws, scores, draws, v3)
    with timer("paper's claim"):
        testable = verdicts["truth"].n_truth >= v3.verdict.min_truth
        claim = paper_claim(scores["top"], pair.point.mask, pair.boot.mask, draws.neurons,
                            protocol.paper_claim, v3.level, testable)
        summary = score_summary(method.scores(list(cs.heads)), protocol.paper_claim.theta)
        if identity.requested == protocol.primary_model:
            heads = replace(heads, top_with_paper_heads=_paper_heads_top(
                method, protocol, pair.point.mask, pair.boot.mask, draws.neurons))
    result = {**base, **verdicts}
    result.update(controls_and_sensitivities(
        timer, controls, sensitivities, model, method, cs, measured, shifts, draws, scores, bag,
        distributions, ws, pair, verdicts, start, v3))
    runtime = {**timer.seconds, "total_s": sum(timer.seconds.values()),
               "target_cpu_2_cores_s": v3.budget_s, "torch_threads": torch.get_num_threads()}
    if apart:
        with timer("planted"):
            planted = planted_control(load_model("planted")).to_json()
        result["controls"] = replace(result.get("controls") or V3Controls(),
                                     apart={"planted": planted})
        runtime["planted (timed apart)"] = timer.seconds["planted"]
    return GPT2Evaluation(V3Evaluation(**result, runtime=runtime), identity, heads, claim,
                          score_summary=summary)


def gpt2_entry(model: TransformerBridge | None, identity: ModelIdentity,
               method: MethodValues | None = None, progress: bool = False,
               n_resamples: int | None = None) -> GPT2Evaluation | CorporaAbsent:
    """The model's result, or the protocol's one line when the corpora are absent (checked
    first: ``model`` may be None only then)."""
    protocol = load_protocol_gpt2()
    absent = corpora_absent(identity.requested, protocol.data)
    if absent is not None:
        return absent
    return evaluate_gpt2(model, identity, protocol, n_resamples=n_resamples, progress=progress,
                         method=method)


def verdict_lines(model_name: str = "gpt2", device: str = "auto") -> list[str]:
    """The verdicts of ``model_name`` in words, or the protocol's line without the corpora;
    also written to ``$CONTEXT_NEURONS_VERDICT_RECORD`` when it is set (chapter 8 on the
    website, whose job summary prints them: :func:`recorded_lines`)."""
    protocol = load_protocol_gpt2()
    absent = corpora_absent(model_name, protocol.data)
    if absent is not None:
        lines = [absent.line()]
    else:
        loaded = load_model(model_name, device=device)
        identity = model_identity(loaded.name, loaded.source, protocol)
        lines = evaluate_gpt2(loaded.model, identity, protocol).sentences()
    record = config.verdict_record()
    if record is not None:
        write_text_whole(record, json.dumps({"model": model_name, "lines": lines}, indent=1))
    return lines


def recorded_lines(model_name: str = "gpt2") -> list[str]:
    """The lines :func:`verdict_lines` wrote for ``model_name`` in this build
    (``$CONTEXT_NEURONS_VERDICT_RECORD``), else computed now (the chapter did not run, or ran
    on another model): the website build's job summary, ``.github/workflows/book.yml``."""
    record = config.verdict_record()
    if record is not None and record.is_file():
        stored = json.loads(record.read_text())
        if stored.get("model") == model_name:
            return list(stored["lines"])
    return verdict_lines(model_name)


__all__ = ["STOP_FEW_DOMAINS", "evaluate_gpt2", "gpt2_entry", "recorded_lines", "verdict_lines"]
