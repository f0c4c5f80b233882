"""How far the loudest tokens fill the neurons' extreme-token slots (chapter 8, section 8.6).

Every contribution is ``e(t) . w_j``, so a token with a large ``|e(t)|`` (a *loud* token) stands
out for any read vector. :func:`loud_tokens` ranks the scored vocabulary by ``|e(t)|``;
:func:`loud_slot_shares` is each neuron's share of its extreme tokens among the loudest, and
:func:`loudness` both at once (:class:`Loudness`). When the loudest 1% fill most of every neuron's
extreme slots, the score of :mod:`.scores` measures a loudness all neurons share, not a neuron's
own set of tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from context_neurons.checks import InputError
from context_neurons.circuit.build import ContextualCircuit
from context_neurons.discovery.scores import NeuronScores


#: The loudest tokens: this fraction of the scored vocabulary, by extended-embedding norm.
LOUD_FRACTION = 0.01


def loud_tokens(
    circuit: ContextualCircuit,
    vocabulary: Bool[Tensor, " d_vocab"],
    fraction: float = LOUD_FRACTION,
) -> Int[Tensor, " n_loud"]:
    """The ``fraction`` of the scored vocabulary with the largest ``|e(t)|``, loudest first."""
    if not 0 < fraction < 1:
        raise InputError(f"fraction must be in (0, 1), got {fraction}.")
    ids = vocabulary.nonzero().flatten().to(circuit.extended.device)
    norms = circuit.extended[ids].norm(dim=-1)
    return ids[norms.topk(max(1, round(fraction * len(ids)))).indices]


def loud_slot_shares(
    scores: NeuronScores, circuit: ContextualCircuit, fraction: float = LOUD_FRACTION
) -> Float[Tensor, " d_mlp"]:
    """Each neuron's share of its ``k`` extreme tokens that are among the loudest tokens.

    Every contribution is ``e(t) . w_j``, so a token with a large ``|e(t)|`` stands out for *any*
    read vector. When the loudest 1% of tokens fill most of every neuron's extreme slots, the score
    measures a loudness all neurons share, not a neuron's own set of tokens; if loudness played no
    part, the shares would be about ``fraction``.

    Args:
        scores: the neurons' scores (their :attr:`NeuronScores.extreme_tokens`).
        circuit: the circuit the scores were computed from (its extended embeddings).
        fraction: the share of the vocabulary called loud (:func:`loud_tokens`), in (0, 1).
    """
    return _shares_among(scores, loud_tokens(circuit, scores.vocabulary, fraction))


def _shares_among(scores: NeuronScores, loud: Int[Tensor, " n_loud"]) -> Float[Tensor, " d_mlp"]:
    """Each neuron's share of its extreme tokens among ``loud``."""
    return torch.isin(scores.extreme_tokens.to(loud.device), loud).double().mean(-1)


def loud_token_share(
    scores: NeuronScores, circuit: ContextualCircuit, fraction: float = LOUD_FRACTION
) -> float:
    """The share of all neurons' extreme-token slots held by the loudest tokens
    (the mean of :func:`loud_slot_shares`)."""
    return float(loud_slot_shares(scores, circuit, fraction).mean())


@dataclass(frozen=True)
class Loudness:
    """How far the loudest tokens fill the neurons' extreme-token slots (chapter 8.6).

    Attributes:
        loud: the loudest ``fraction`` of the scored vocabulary (:func:`loud_tokens`), loudest
            first.
        shares: each neuron's share of its extreme tokens among them (:func:`loud_slot_shares`).
        fraction: the share of the vocabulary called loud.
    """

    loud: Int[Tensor, " n_loud"]
    shares: Float[Tensor, " d_mlp"]
    fraction: float

    def findings(self, tokenizer, shown: int = 12) -> list[str]:
        """The ``shown`` loudest tokens, and the share of the slots the loud tokens hold."""
        loudest = [tokenizer.decode([int(t)]) for t in self.loud[:shown]]
        return [f"the {shown} loudest tokens: {loudest}",
                f"the loudest {self.fraction:.0%} of tokens ({len(self.loud)}) hold "
                f"{float(self.shares.mean()):.0%} of all neurons' extreme-token slots "
                f"(median neuron: {float(self.shares.median()):.0%})"]

    def among(self, neurons: list[int], label: str) -> str:
        """The loud tokens' share of all slots against the median share of ``neurons``'s slots
        (``label``: what those neurons are)."""
        return (f"the loudest {self.fraction:.0%} hold {float(self.shares.mean()):.0%} of all "
                f"extreme slots, and a median {float(self.shares[neurons].median()):.0%} of "
                f"{label}' slots")


def loudness(
    scores: NeuronScores, circuit: ContextualCircuit, fraction: float = LOUD_FRACTION
) -> Loudness:
    """:class:`Loudness` of the neurons ``scores`` scored on ``circuit``."""
    loud = loud_tokens(circuit, scores.vocabulary, fraction)  # ranked once, for both
    return Loudness(loud, _shares_among(scores, loud), fraction)
