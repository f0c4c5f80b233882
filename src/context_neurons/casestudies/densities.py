"""Token densities. This module counts, without running the model, how often each text uses each
neuron's up-tokens and down-tokens (chapter 5).

A neuron's up-tokens (down-tokens) are the tokens whose contribution's robust z is at least
``theta`` above (below) the median, as in the score. :func:`token_densities` gives, per 1000
tokens of each text, how often the text uses them (:class:`TokenDensities`), from the texts'
token counts (:func:`token_counts`) and the weights only. A choice made from these numbers (a
neuron's own domain, :mod:`context_neurons.casestudies.naming`; the case-study neurons,
:mod:`context_neurons.casestudies.paper_neurons`) is therefore not a choice made on the
activations.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from context_neurons.checks import DataError, InputError, check_neurons
from context_neurons.circuit import ContextualCircuit
from context_neurons.discovery import THETA, NeuronScores, contributions
from context_neurons.text.windows import DomainTexts


def token_counts(
    windows: list[Int[Tensor, " _pos"]], d_vocab: int
) -> Float[Tensor, "batch d_vocab"]:
    """How often each token occurs in each window (all positions but the first, BOS)."""
    counts = torch.zeros(len(windows), d_vocab)
    for i, window in enumerate(windows):
        ids = torch.as_tensor(window).cpu()[1:]
        counts[i].index_add_(0, ids, torch.ones(len(ids)))
    return counts


@dataclass
class TokenDensities:
    """Up-tokens and down-tokens of neurons per 1000 tokens of each text (no model run).

    Attributes:
        neurons: the neurons, in the order of the last axis.
        texts: the texts, in the order of the first axis.
        up: per 1000 tokens of each text (BOS not counted), tokens whose robust z for the neuron
            is at least ``theta``
            (:func:`~context_neurons.casestudies.along_text.token_marks`).
        down: the same for z at most ``-theta``.
        n_up, n_down: how many vocabulary tokens are up-tokens / down-tokens of each neuron.
        theta: the threshold.
    """

    neurons: list[int]
    texts: DomainTexts
    up: Float[Tensor, "batch n_neurons"]
    down: Float[Tensor, "batch n_neurons"]
    n_up: Int[Tensor, " n_neurons"]
    n_down: Int[Tensor, " n_neurons"]
    theta: float

    def column(self, neuron) -> int:
        """The position of ``neuron`` on the last axis."""
        j = int(neuron)
        if j not in self.neurons:
            raise InputError(f"Neuron {j} was not counted; these densities have {self.neurons}.")
        return self.neurons.index(j)

    def domains(self) -> list[str]:
        """The domains of the texts, in order of first appearance."""
        return list(dict.fromkeys(self.texts.domains))

    def side(self, which: str) -> Float[Tensor, "batch n_neurons"]:
        if which not in ("up", "down"):
            raise InputError(f"which must be 'up' or 'down', got {which!r}.")
        return self.up if which == "up" else self.down

    def inside(self, domain: str, which: str = "up") -> Float[Tensor, " n_neurons"]:
        """Mean density over the domain's texts."""
        return self.side(which)[self.texts.indices(domain)].mean(0)

    def outside(self, domain: str, which: str = "up") -> Float[Tensor, " n_neurons"]:
        """Mean density over the other domains' texts (:meth:`DomainTexts.others`)."""
        others = self.texts.others(domain)
        if not others:
            raise InputError(f"No texts outside domain {domain!r}: add another domain's texts.")
        return self.side(which)[others].mean(0)

    def gap(self, domain: str, which: str = "up") -> Float[Tensor, " n_neurons"]:
        """Density in the domain's texts minus density in the other domains' texts."""
        return self.inside(domain, which) - self.outside(domain, which)

    def subset(self, indices: list[int]) -> "TokenDensities":
        """The same neurons on the texts at ``indices`` only (densities are per text)."""
        return replace(
            self, texts=self.texts.subset(indices), up=self.up[indices], down=self.down[indices]
        )


@torch.no_grad()
def token_densities(
    circuit: ContextualCircuit,
    model: TransformerBridge,
    neurons,
    texts: DomainTexts,
    scores: NeuronScores,
    theta: float = THETA,
    chunk: int = 256,
) -> TokenDensities:
    """How often each text uses each neuron's up-tokens and down-tokens, per 1000 tokens.

    Only the weights (the contributions) and the texts' token counts: the model is not run, so
    a choice made from these numbers is not a choice made on the activations. The marks are those
    of :func:`~context_neurons.casestudies.along_text.token_marks` (the score's z and
    vocabulary).
    """
    neurons = check_neurons(model, neurons)
    if not texts.windows:
        raise DataError("No texts: give at least one window.")
    counts = token_counts(texts.windows, model.cfg.d_vocab)  # [batch, d_vocab], CPU
    n_tokens = counts.sum(1, keepdim=True).clamp(min=1)
    vocabulary = scores.vocabulary.cpu()
    up, down, n_up, n_down = [], [], [], []
    for start in range(0, len(neurons), chunk):
        block = neurons[start : start + chunk]
        z = contributions(circuit, model, block).cpu()  # [chunk, d_vocab]
        z = (z - scores.median[block, None].cpu()) / scores.spread[block, None].cpu()
        is_up = ((z >= theta) & vocabulary).float()
        is_down = ((z <= -theta) & vocabulary).float()
        up.append(1000 * counts @ is_up.T / n_tokens)
        down.append(1000 * counts @ is_down.T / n_tokens)
        n_up.append(is_up.sum(1).long())
        n_down.append(is_down.sum(1).long())
    return TokenDensities(
        neurons=neurons,
        texts=texts,
        up=torch.cat(up, 1),
        down=torch.cat(down, 1),
        n_up=torch.cat(n_up),
        n_down=torch.cat(n_down),
        theta=float(theta),
    )
