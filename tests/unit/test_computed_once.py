"""Computed once (issue 33): one main-job run classifies the heads, builds each head set's circuit,
scores its neurons and reads the model's weights once, and hands the values down; the verdicts
and the main job ask :class:`~context_neurons.method.MethodValues` instead of computing them
(the count over a whole planted run is in ``test_reproduce.py``)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest
import torch

from context_neurons import discovery, method, taxonomy
from context_neurons.models import weights

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "context_neurons"
#: What a run computes once (the main job's count: ``tests/unit/test_reproduce.py``).
ONCE = ("classify_heads", "build_circuit", "score_neurons")


@pytest.mark.slow
def test_method_values_computes_each_value_once_per_request(planted):
    values = method.MethodValues(planted.model)
    heads = values.contextual_heads()
    assert values.circuit(heads) is values.circuit(list(heads))
    assert values.scores(heads) is values.scores(heads)
    assert values.taxonomy() is values.taxonomy()
    values.taxonomy(previous_token_rule=False)
    assert values.computed == Counter(taxonomy=1, circuit=1, scores=1)
    assert values.weights is weights.read_weights(planted.model)
    # scored from the weights handed down: the scores the model itself gives, bit for bit
    from_model = discovery.score_neurons(values.circuit(heads), planted.model)
    assert torch.equal(values.scores(heads).top, from_model.top)
    assert torch.equal(values.scores(heads).extreme_tokens, from_model.extreme_tokens)


def test_the_taxonomy_without_the_rule_is_the_one_classify_heads_computes(planted):
    """Regrouped from the same measures, the groups equal a classification without the rule."""
    values = method.MethodValues(planted.model)
    with_rule, without = values.taxonomy(), values.taxonomy(previous_token_rule=False)
    assert without.groups == taxonomy.classify_heads(planted.model,
                                                     previous_token_rule=False).groups
    assert not without.previous_token_rule and with_rule.previous_token_rule
    assert without.with_rule(True).groups == with_rule.groups


def test_the_verdicts_and_the_main_job_ask_the_runs_values():
    """No module of the verdict or the main job calls the computations itself (statically: each
    value comes from the run's MethodValues, passed down)."""
    calls = []
    for folder in ("verdict", "reproduce"):
        for path in sorted((PACKAGE / folder).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call):
                    name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                    if name in ONCE:
                        calls.append(f"{folder}/{path.name}:{node.lineno} calls {name}")
    assert not calls, "ask the run's MethodValues instead:\n" + "\n".join(calls)

