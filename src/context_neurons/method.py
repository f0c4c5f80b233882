"""The method's values for one model. This module computes each of them once per run.

The method's weight-derived objects (chapter 2's head taxonomy, chapter 4's contextual circuit of
a head set, chapter 5's neuron scores on it) are read by the main job, by each pre-registered
evaluation and by chapter 8. A :class:`MethodValues` is made once at the top of a run, from the
model, and handed down: whoever needs one of them asks it, and it computes each the first time,
keeping what it computed (:attr:`MethodValues.computed` counts the computations: a test pins each
to one per run). The calibration text is ``'prose'`` and every option the default, as in
:func:`~context_neurons.circuit.build.build_circuit` and
:func:`~context_neurons.discovery.scores.score_neurons`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from transformer_lens.model_bridge import TransformerBridge

from context_neurons.checks import InputError, check_heads
from context_neurons.circuit import N_MIN, ContextualCircuit, build_circuit
from context_neurons.discovery import NeuronScores, score_neurons
from context_neurons.models.weights import ModelWeights, read_weights
from context_neurons.taxonomy import HeadTaxonomy, classify_heads
from context_neurons.text.windows import LOOKUP_TOKENS

#: The calibration text of every circuit the method builds in a run.
CALIBRATION = "prose"
#: The shortest context the main job runs in: the circuit's median denominator reads the
#: calibration positions from ``N_MIN`` on (:func:`~context_neurons.circuit.build.build_circuit`
#: needs ``N_MIN + 2`` tokens), and chapter 7's look-up windows hold BOS and ``LOOKUP_TOKENS``
#: tokens.
MIN_CONTEXT = max(N_MIN + 2, LOOKUP_TOKENS + 1)


def check_run_context(n_ctx: int, source: str) -> None:
    """An :class:`InputError` when a model's context (``n_ctx`` positions) is shorter than
    :data:`MIN_CONTEXT`, raised before the main job starts rather than at its last step
    (``source``: where the model came from, as
    :attr:`~context_neurons.models.LoadedModel.source` says)."""
    if n_ctx < MIN_CONTEXT:
        raise InputError(
            f"The model ({source}) has a context of {n_ctx} tokens (n_positions), but the main "
            f"job needs at least {MIN_CONTEXT} (the circuit's calibration reads positions "
            f"{N_MIN} and after; chapter 7's look-up windows hold {LOOKUP_TOKENS + 1} tokens): "
            f"use a checkpoint with n_positions of {MIN_CONTEXT} or more."
        )


@dataclass(eq=False)
class MethodValues:
    """The taxonomy, and each head set's circuit and neuron scores, of one model, computed once.

    Attributes:
        model: the model (a GPT-2-architecture ``TransformerBridge``).
        weights: its layer-0 weights, read once
            (:func:`~context_neurons.models.weights.read_weights`) and handed to the taxonomy and
            the scores (the circuit's calibration runs the model itself).
        computed: how many times each value was computed (``"taxonomy"``, ``"circuit"``,
            ``"scores"``): one per distinct request.
    """

    model: TransformerBridge
    weights: ModelWeights = field(init=False)
    computed: Counter = field(default_factory=Counter, init=False)
    _taxonomy: HeadTaxonomy | None = field(default=None, init=False, repr=False)
    _circuits: dict = field(default_factory=dict, init=False, repr=False)
    _scores: dict = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.weights = read_weights(self.model)

    def taxonomy(self, previous_token_rule: bool = True) -> HeadTaxonomy:
        """Chapter 2's taxonomy, with or without the previous-token rule (protocols v1 and v2 read
        it without): classified once, regrouped for the other rule."""
        if self._taxonomy is None:
            self.computed["taxonomy"] += 1
            self._taxonomy = classify_heads(self.weights)
        return self._taxonomy.with_rule(previous_token_rule)

    def contextual_heads(self, previous_token_rule: bool = True) -> list[int]:
        """The taxonomy's contextual heads, sorted."""
        return sorted(self.taxonomy(previous_token_rule).groups["contextual"])

    def circuit(self, heads) -> ContextualCircuit:
        """The contextual circuit of ``heads`` on the calibration text (built once per set)."""
        key = tuple(check_heads(self.model, heads))
        if key not in self._circuits:
            self.computed["circuit"] += 1
            self._circuits[key] = build_circuit(self.model, CALIBRATION, list(heads))
        return self._circuits[key]

    def scores(self, heads) -> NeuronScores:
        """Every neuron's ``top[j]`` on the circuit of ``heads`` (scored once per set)."""
        key = tuple(check_heads(self.model, heads))
        if key not in self._scores:
            circuit = self.circuit(heads)
            self.computed["scores"] += 1
            self._scores[key] = score_neurons(circuit, self.weights)
        return self._scores[key]


__all__ = ["CALIBRATION", "MethodValues"]
