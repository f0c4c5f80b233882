"""Run protocol discovery-verdict-gpt2 (``assets/protocol/discovery-verdict-gpt2.json``,
registered before any GPT-2 number) on a model of the GPT-2 family: an adapter on v3's machinery.

:func:`evaluate_gpt2` reads the data (:mod:`.gpt2_data`: UNIGRAM in v3's CAL place), finds the
context set with v3's rule on the model's own taxonomy (:func:`~.context_set.context_set`, the
previous-token check on the UNIGRAM windows), runs v3's forward passes and truth
(:mod:`.truth`), scores and baselines (:mod:`.baselines`), the primary paired-bootstrap
comparison (:mod:`.comparison`), the secondary verdicts, controls and sensitivities (:mod:`.v3`),
every one with this protocol's seeds and thresholds (the fields of any
:class:`~.protocol.ConfirmatoryProtocol`), and adds the paper's claim (:mod:`.paper_claim`) and
the comparison with the paper's six heads.
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
from context_neurons.verdict.bag_of_tokens import checked_bag_responses
from context_neurons.verdict.gpt2_data import CorporaAbsent, GPT2Data, corpora_absent, gpt2_data
from context_neurons.verdict.gpt2_protocol import ProtocolGPT2, load_protocol_gpt2
from context_neurons.verdict.gpt2_result import GPT2Evaluation, ModelIdentity, model_identity
from context_neurons.verdict.gpt2_result import paper_heads
from context_neurons.verdict.paper_claim import paper_claim, set_precision
from context_neurons.verdict.planted import planted_control
from context_neurons.progress import Phases
from context_neurons.verdict.options import RunOptions
from context_neurons.verdict.v3 import STOP_NO_CONTEXT, controls_and_sensitivities, data_summary
from context_neurons.verdict.v3 import score_context_set, verdicts_of
from context_neurons.verdict.context_set import context_set
from context_neurons.verdict.v3_result import V3Controls, V3Evaluation

STOP_FEW_DOMAINS = "not testable: fewer than two domains pool"


def _stop(data: GPT2Data, heads: tuple[int, ...], protocol: ProtocolGPT2) -> str | None:
    if len(data.pooled) < protocol.data.min_pooled_domains:
        return STOP_FEW_DOMAINS
    return None if heads else STOP_NO_CONTEXT


def _paper_heads_top(method: MethodValues, protocol: ProtocolGPT2, truth: np.ndarray,
                     boot: np.ndarray, draws: np.ndarray):
    """``top[j]`` on the paper's six heads' circuit at theta: |F| and E with interval, no label
    (gpt2 only; a sensitivity)."""
    top = method.scores(list(protocol.paper_claim.paper_heads)).top.double().cpu().numpy()
    return set_precision(top >= protocol.paper_claim.theta, truth, boot, draws,
                         protocol.bootstrap.level, None)


def evaluate_gpt2(model: TransformerBridge, identity: ModelIdentity,
                  protocol: ProtocolGPT2 | None = None, data: GPT2Data | None = None,
                  options: RunOptions = RunOptions(), method: MethodValues | None = None,
                  apart: bool = True) -> GPT2Evaluation:
    """The protocol on one model (module docstring). ``data``: :func:`gpt2_data` when already
    read; ``options``: resamples (fewer for a quick look), what is computed and how
    (:class:`~.options.RunOptions`; no label-free arm here); ``method``: the run's taxonomy,
    circuits and scores, when made; ``apart``: the planted control, timed apart (the protocol's
    ``controls.planted``; left out only for a quick look, and then the result says it was not
    run)."""
    protocol = protocol or load_protocol_gpt2()
    timer = Phases(protocol.name, announce=options.progress)
    method = method or MethodValues(model)
    if data is None:
        with timer("data"):
            data = gpt2_data(model.tokenizer, protocol.data)
    start = protocol.data.window_mean_start
    with timer("context set"):
        cal = head_statistics(model, data.pooled_cal_windows, start, options.batch_size)
        cs = context_set(method, cal.previous_share, start, protocol.previous_token_threshold)
    primary = identity.requested == protocol.primary_model  # the paper's heads are gpt2's
    heads = paper_heads(cs.heads, protocol.paper_claim.paper_heads) if primary else None
    base = {"protocol": protocol.name, "model": identity.label, "comparable": None,
            "data": data_summary(data), "context_set": cs}
    stopped = _stop(data, cs.heads, protocol)
    if stopped:
        core = V3Evaluation(**base, stopped=stopped, runtime=timer.seconds)
        return GPT2Evaluation(core, identity, heads)
    scored = score_context_set(model, method, data, cs, cal.mean_z, protocol, options, timer,
                               "UNIGRAM", checked_bag_responses)
    draws, shifts, pair, verdicts = verdicts_of(scored, options, timer)
    scores = scored.scores
    with timer("paper's claim"):
        testable = verdicts["truth"].n_truth >= protocol.verdict.min_truth
        claim = paper_claim(scores["top"], pair.point.mask, pair.boot.mask, draws.neurons,
                            protocol.paper_claim, protocol.bootstrap.level, testable)
        summary = score_summary(method.scores(list(cs.heads)), protocol.paper_claim.theta)
        if primary:
            heads = replace(heads, top_with_paper_heads=_paper_heads_top(
                method, protocol, pair.point.mask, pair.boot.mask, draws.neurons))
    result = {**base, **verdicts, **controls_and_sensitivities(scored, options, timer, shifts,
                                                                draws, pair, verdicts)}
    runtime = {**timer.seconds, "total_s": sum(timer.seconds.values()),
               "target_cpu_2_cores_s": protocol.budget_s, "torch_threads": torch.get_num_threads()}
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
    options = RunOptions(n_resamples, progress=progress)
    return evaluate_gpt2(model, identity, protocol, options=options, method=method)


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


def page_lines(page_model: str, device: str = "auto") -> list[str]:
    """Chapter 8's section on the protocol: on a GPT-2 model, its verdicts (or the protocol's
    line without the corpora) and every other registered model as not computed here
    (``models.not_run``); on any other model, that the page holds no GPT-2 number."""
    protocol = load_protocol_gpt2()
    if page_model not in protocol.models:
        return [f"This page was built on {page_model!r}, not a GPT-2 model: no GPT-2 number "
                "here. The published website computes GPT-2 Small's verdict; so does `python -m "
                "context_neurons reproduce --model gpt2` with the corpora."]
    others = [f"{model}: not computed here: this page computes {page_model} only (`python -m "
              f"context_neurons reproduce --model {model} --out {model}.json`; then `python -m "
              "context_neurons gpt2-verdicts` prints the models side by side, replications "
              "marked)" for model in protocol.models if model != page_model]
    return [f"discovery-verdict-gpt2 on {page_model}, this page's model:",
            *verdict_lines(page_model, device), *others]


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


__all__ = ["STOP_FEW_DOMAINS", "evaluate_gpt2", "gpt2_entry", "page_lines", "recorded_lines",
           "verdict_lines"]
