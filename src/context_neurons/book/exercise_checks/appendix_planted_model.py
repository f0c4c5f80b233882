"""Checks of the appendix's exercises (the planted model)."""

from __future__ import annotations

from context_neurons import circuit as circ
from context_neurons import discovery as disc
from context_neurons.book.exercise_checks.registry import PROPERTY, VALUE, holds, number
from context_neurons.book.exercise_checks.registry import register

NEURON, TOP = 1621, 50


@register("ex-appendix-labels", VALUE,
          {"planting_hits": "planting-half war tokens among neuron 1621's 50 top tokens",
           "label_hits": "label-half war tokens among them"},
          "both counts against disc.top_tokens of neuron 1621 and the planted truth's lists")
def labels(ns: dict) -> str:
    model, truth = ns["model"], ns["truth"]
    top_ids, _ = disc.top_tokens(circ.get_circuit(model), model, NEURON, k=TOP)
    top_ids = set(top_ids.tolist())
    for name, lists in (("planting_hits", truth.planting_token_ids),
                        ("label_hits", truth.label_token_ids)):
        reference = len(top_ids & set(lists["war"]))
        value = number(name, ns[name])
        holds(value == reference, f"`{name}` is {value:g}, not the count the package gives: "
              f"count neuron {NEURON}'s {TOP} top tokens that are in the war list's half.")
    return f"{ns['planting_hits']} planting-half, {ns['label_hits']} label-half tokens."


@register("ex-appendix-seed", PROPERTY,
          {"other": "recovery.recover(model.tokenizer, 3, [])"},
          "`other` is the recovery of seed 3 and recovers the planted contextual heads",
          website="Which numbers change with the seed, and why, only the solution on the website "
                  "can judge.")
def seed(ns: dict) -> str:
    other = ns["other"]
    holds(getattr(other, "seed", None) == 3, "`other` should be the recovery run of seed 3.")
    holds(bool(other.contextual_recovered), "seed 3's run did not recover the contextual heads.")
    return f"seed 3: contextual heads {other.contextual_heads}."
