"""Neurons along a text. This module runs neurons on real texts of their domains (chapter 5): the
model's pre-activations and the circuit's approximation, position by position, and where each
neuron's strongest tokens occur.

Chapter 5 reads a context neuron from its token contributions; activations on real texts of the
domain test that reading. :func:`text_activations` runs the model's first layer and the circuit's
approximation (:func:`context_neurons.evaluation.approximator`) on texts of several domains
(:func:`context_neurons.text.windows.domain_texts`) at once, for all neurons at once, and marks
where each neuron's strongest tokens occur (:func:`token_marks`: robust z-score of the
contribution at least ``theta``, as in the score); :class:`TextActivations` holds them, with the
means over each text. :func:`term_spreads` says how much each term of the approximation varies
along one text (:func:`case_term_spreads`: for each case study, along the text
of its domain where it departs most). What the activations say about a domain is in
:mod:`context_neurons.casestudies.evidence`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from context_neurons.checks import DataError, InputError, check_neurons
from context_neurons.circuit import ContextualCircuit
from context_neurons.discovery import THETA, NeuronScores, contributions
from context_neurons.evaluation import (
    approximator,
    masked_mean,
    position_mask,
    true_pre_activations,
)
from context_neurons.text.windows import DomainTexts, pad_windows


#: First position of the means over a text: before it the bag of tokens is still filling up.
START = 100


@dataclass
class TextActivations:
    """Pre-activations of neurons along domain texts, true and approximate (on the CPU).

    Attributes:
        neurons: the neurons, in the order of the last axis.
        texts: the texts, in the order of the first axis.
        tokens: the texts right-padded with BOS.
        lengths: each text's length.
        true: the model's pre-activations (hook ``blocks.0.mlp.hook_pre``).
        approx: the circuit's approximation (chapter 6).
        marks: +1 where the token is one of the neuron's *up-tokens* (robust z of its
            contribution ``>= theta``), -1 for *down-tokens* (``<= -theta``), else 0.
        theta: the threshold of the marks.
        start: the first position of the means.
    """

    neurons: list[int]
    texts: DomainTexts
    tokens: Int[Tensor, "batch pos"]
    lengths: Int[Tensor, " batch"]
    true: Float[Tensor, "batch pos n_neurons"]
    approx: Float[Tensor, "batch pos n_neurons"]
    marks: Int[Tensor, "batch pos n_neurons"]
    theta: float
    start: int = START
    _means: dict[str, Tensor] = field(default_factory=dict, repr=False, compare=False)

    def column(self, neuron) -> int:
        """The position of ``neuron`` on the last axis."""
        j = int(neuron)
        if j not in self.neurons:
            raise InputError(f"Neuron {j} was not computed; these activations have {self.neurons}.")
        return self.neurons.index(j)

    def valid(self, start: int | None = None) -> Bool[Tensor, "batch pos"]:
        """Positions from ``start`` (default :attr:`start`) to each text's end."""
        return position_mask(self.tokens, self.lengths, self.start if start is None else start)

    def window_means(self, which: str = "true") -> Float[Tensor, "batch n_neurons"]:
        """Each neuron's mean pre-activation over each text (positions ``>= start``; computed
        once per ``which``: the gallery asks for it once per neuron)."""
        if which not in self._means:
            self._means[which] = masked_mean(self._values(which), self.valid())
        return self._means[which]

    def window_spreads(self) -> Float[Tensor, "batch n_neurons"]:
        """The standard deviation of the true pre-activation along each text."""
        mask = self.valid()[..., None]
        deviation = (self.true - self.window_means()[:, None]) * mask
        return ((deviation**2).sum(1) / (mask.sum(1) - 1)).sqrt()

    def marks_per_1000(self) -> tuple[Float[Tensor, "batch n_neurons"], ...]:
        """Up-tokens and down-tokens per 1000 tokens of each text (all positions but BOS)."""
        mask = self.valid(start=1)[..., None]
        count = mask.sum(1)
        up = ((self.marks > 0) & mask).sum(1) / count
        down = ((self.marks < 0) & mask).sum(1) / count
        return 1000 * up, 1000 * down

    def departures(self, which: str = "true") -> Float[Tensor, "batch n_neurons"]:
        """Each text's mean minus the neuron's median over all texts."""
        means = self.window_means(which)
        return means - means.median(0).values

    def best_window(self, neuron, domain: str | None = None) -> int:
        """The text (of ``domain``, if given) whose mean departs most from the neuron's median."""
        candidates = range(len(self.lengths)) if domain is None else self.texts.indices(domain)
        departure = self.departures()[:, self.column(neuron)]
        return max(candidates, key=lambda i: abs(float(departure[i])))

    def panel(self, neuron, window: int, title: str = "") -> dict:
        """What :func:`plotting_neurons.plot_activation_grid` draws for one neuron and text."""
        col, length = self.column(neuron), int(self.lengths[window])
        return {
            "curves": {
                "true": self.true[window, :length, col],
                "approximation": self.approx[window, :length, col],
            },
            "marks": self.marks[window, :length, col],
            "baseline": float(self.window_means().median(0).values[col]),
            "title": title,
        }

    def _values(self, which: str) -> Float[Tensor, "batch pos n_neurons"]:
        if which not in ("true", "approx"):
            raise InputError(f"which must be 'true' or 'approx', got {which!r}.")
        return self.true if which == "true" else self.approx


@torch.no_grad()
def token_marks(
    circuit: ContextualCircuit,
    model: TransformerBridge,
    neurons,
    tokens: Int[Tensor, "batch pos"],
    scores: NeuronScores,
    theta: float = THETA,
) -> Int[Tensor, "batch pos n_neurons"]:
    """+1 / -1 where a token's robust z-score for a neuron is ``>= theta`` / ``<= -theta``.

    The z-score is the score's (:func:`neurons.score_neurons`); tokens outside its vocabulary
    (``<|endoftext|>``) are never marked.
    """
    neurons = check_neurons(model, neurons)
    unique, inverse = torch.unique(tokens.cpu(), return_inverse=True)
    unique = unique.to(circuit.extended.device)
    c = contributions(circuit, model, neurons, unique)  # [n_neurons, n_unique]
    z = (c - scores.median[neurons, None]) / scores.spread[neurons, None]
    sign = (z >= theta).to(torch.int64) - (z <= -theta).to(torch.int64)
    sign = sign * scores.vocabulary[unique].to(torch.int64)
    return sign.T.cpu()[inverse]


@torch.no_grad()
def text_activations(
    circuit: ContextualCircuit,
    model: TransformerBridge,
    neurons,
    texts: DomainTexts,
    scores: NeuronScores,
    theta: float = THETA,
    start: int = START,
    batch_size: int = 8,
) -> TextActivations:
    """True and approximate pre-activations of ``neurons`` on every text, in batches.

    The model runs its first layer only (:func:`evaluation.true_pre_activations`); the
    approximation is :func:`evaluation.approximator` with its default per-position denominators.
    """
    neurons = check_neurons(model, neurons)
    if not texts.windows:
        raise DataError("No texts: give at least one window.")
    tokens, lengths = pad_windows(texts.windows)
    if int(lengths.min()) <= start:
        raise DataError(f"Every text needs more than start = {start} tokens.")
    approx_fn = approximator(circuit, model, neurons)
    true, approx = [], []
    for b in range(0, len(tokens), batch_size):
        batch = tokens[b : b + batch_size].to(model.cfg.device)
        true.append(true_pre_activations(model, batch, neurons).cpu())
        approx.append(approx_fn(batch).cpu())
    return TextActivations(
        neurons=neurons,
        texts=texts,
        tokens=tokens,
        lengths=lengths,
        true=torch.cat(true),
        approx=torch.cat(approx),
        marks=token_marks(circuit, model, neurons, tokens, scores, theta),
        theta=float(theta),
        start=start,
    )


@torch.no_grad()
def term_spreads(
    circuit: ContextualCircuit,
    model: TransformerBridge,
    neuron,
    tokens: Int[Tensor, " pos"],
    start: int = START,
) -> dict[str, float]:
    """Standard deviation along one text of each term of a neuron's approximate pre-activation.

    The terms are those of :meth:`evaluation.NeuronApproximator.terms` (the bag of tokens, the
    direct path of the current token, the other heads, ...), over positions ``>= start``.
    """
    terms = approximator(circuit, model, [neuron]).terms(tokens[None].to(model.cfg.device))
    return {name: float(t[0, start:, 0].std()) for name, t in terms.items()}


def case_term_spreads(
    circuit: ContextualCircuit, model: TransformerBridge, activations: TextActivations, cases
) -> pd.DataFrame:
    """:func:`term_spreads` of each case, a ``(neuron, domain)`` pair, along the text of the
    domain where the neuron departs most from its median
    (:meth:`TextActivations.best_window` of ``activations``).

    Returns:
        One row per case (index ``neuron``, ``domain``), one column per term.
    """
    spreads = {}
    for neuron, domain in cases:
        tokens = activations.texts.windows[activations.best_window(neuron, domain)]
        spreads[(neuron, domain)] = term_spreads(circuit, model, neuron, tokens,
                                                 activations.start)
    return pd.DataFrame(spreads).T.rename_axis(["neuron", "domain"])
