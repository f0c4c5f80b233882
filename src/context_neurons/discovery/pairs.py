"""How alike two neurons are (chapter 5, section 5.3): :func:`neuron_pair` compares what they read
(their contributions' correlation) and what they write (their output weights' cosine)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from context_neurons.checks import check_neurons
from context_neurons.circuit.build import ContextualCircuit
from context_neurons.discovery.scores import contributions


@dataclass(frozen=True)
class NeuronPair:
    """Two neurons compared by what they read and what they write (chapter 5, section 5.3).

    Attributes:
        neurons: the two neurons.
        input_r: the correlation of their token contributions over the vocabulary (near 1: they
            read the same context).
        output_cosine: the cosine of their output weights, rows of layer 0's ``W_out`` (near -1:
            they write opposite outputs).
    """

    neurons: tuple[int, int]
    input_r: float
    output_cosine: float

    def findings(self) -> list[str]:
        """The two neurons, the correlation of their contributions and the cosine of their
        output weights, one line each."""
        a, b = self.neurons
        return [
            f"neurons {a} and {b}:",
            f"correlation of their token contributions: {self.input_r:.3f}",
            f"cosine of their output weights W_out[{a}], W_out[{b}]: {self.output_cosine:.3f}",
        ]


def pair_similarity(
    neurons: tuple[int, int],
    contributions: Float[Tensor, "2 n_tokens"],
    w_out: Float[Tensor, "2 d_model"],
) -> NeuronPair:
    """:class:`NeuronPair` of two neurons from their token contributions and output weights."""
    input_r = float(torch.corrcoef(contributions)[0, 1])
    output_cosine = float(w_out[0] @ w_out[1] / (w_out[0].norm() * w_out[1].norm()))
    return NeuronPair(neurons, input_r, output_cosine)


@torch.no_grad()
def neuron_pair(circuit: ContextualCircuit, model: TransformerBridge, a, b) -> NeuronPair:
    """Neurons ``a`` and ``b`` compared: the correlation of their :func:`contributions` and the
    cosine of their rows of layer 0's ``W_out`` (:class:`NeuronPair`)."""
    a, b = check_neurons(model, [a, b])
    w_out = model.blocks[0].mlp.W_out
    return pair_similarity((a, b), contributions(circuit, model, [a, b]), w_out[[a, b]])
