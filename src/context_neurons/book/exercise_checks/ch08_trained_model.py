"""Checks of chapter 8's exercises (the trained model)."""

from __future__ import annotations

import math

import torch

from context_neurons import activations as act
from context_neurons.book.exercise_checks.registry import PROPERTY, VALUE, close, holds, number
from context_neurons.book.exercise_checks.registry import register, tensor


@register("ex-ch08-all-heads", VALUE,
          {"broad": "every layer-0 head whose kernel is not local",
           "truth_broad": "act.activation_truth with those heads ablated (None without windows)"},
          "broad against the taxonomy's non-local heads; truth_broad ablated exactly them, and "
          "its first test equals the old truth's")
def all_heads(ns: dict) -> str:
    taxonomy = ns["taxonomy"]
    reference = [h for h in taxonomy.heads if taxonomy.shapes[h] != "local"]
    broad = sorted(int(h) for h in ns["broad"])
    holds(broad == sorted(reference), f"`broad` holds {len(broad)} heads, the non-local heads "
          f"are {len(reference)}: read each head's shape in taxonomy.shapes.")
    truth_broad, truth = ns["truth_broad"], ns["truth"]
    if truth_broad is None:
        return "the non-local heads are right (no held-out windows to measure the truth)."
    holds(sorted(truth_broad.heads) == broad, "`truth_broad` ablated other heads than `broad`.")
    if truth is not None:
        holds(torch.equal(truth_broad.auc, truth.auc), "the separation test (auc) should not "
              "depend on the heads ablated: measure on the same windows and labels.")
    return (f"{len(broad)} non-local heads, {len(truth_broad.context_neurons())} context neurons "
            "by activation.")


@register("ex-ch08-rank", PROPERTY,
          {"seen_score": "your weights-only score, one number per neuron",
           "seen_auc": "its AUC against the broad truth's context neurons"},
          "one finite score per neuron, and seen_auc equals act.score_auc recomputed (a rank "
          "statistic: the reversed score gives 1 - AUC)",
          website="Whether your score is a better ranking, and that the truth stayed out of its "
                  "construction, only the solution on the website (and the rubric) can judge.")
def rank(ns: dict) -> str:
    model, truth_broad = ns["model"], ns["truth_broad"]
    score = tensor("seen_score", ns["seen_score"], (model.cfg.d_mlp,))
    holds(bool(score.isfinite().all()), "`seen_score` should be finite for every neuron.")
    if truth_broad is None:
        return "one finite score per neuron (no held-out windows to measure its AUC)."
    neurons = truth_broad.context_neurons()
    auc = act.score_auc(score, neurons)
    close("seen_auc", number("seen_auc", ns["seen_auc"]), auc, rtol=0.0, atol=1e-6,
          hint="act.score_auc(score, truth_broad.context_neurons()).")
    holds(math.isnan(auc) or abs(auc + act.score_auc(-score, neurons) - 1) < 1e-6,
          "the AUC of the reversed score should be 1 - AUC.")
    return f"AUC {auc:.3f} over {len(neurons)} context neurons."
