"""What a neuron reads: its top and bottom tokens by contribution, as tables (chapter 5, sections
5.1 and 5.3, and the gallery)."""

from __future__ import annotations

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor

from context_neurons.checks import InputError, check_neuron, check_neurons
from context_neurons.circuit.build import ContextualCircuit
from context_neurons.discovery.scores import (
    NeuronScores,
    contributions,
    robust_location_scale,
    scoring_vocabulary,
)
from context_neurons.models.weights import Model


def token_str(model: Model, token: int | Tensor) -> str:
    """A token as a quoted string (``repr`` of its text), so spaces and newlines show."""
    return repr(model.tokenizer.decode([int(token)]))


@torch.no_grad()
def token_tables(
    circuit: ContextualCircuit,
    model: Model,
    neurons,
    k: int = 12,
    scores: NeuronScores | None = None,
    chunk: int = 256,
) -> dict[int, pd.DataFrame]:
    """The ``k`` top (positive) and bottom (negative) token contributions of each neuron.

    One contribution GEMM per ``chunk`` neurons, then ``topk`` on each side (no full sort).

    Args:
        circuit: the contextual circuit.
        model: the model.
        neurons: layer-0 neuron indices.
        k: tokens on each side.
        scores: the scores whose vocabulary to use (default :func:`scoring_vocabulary`).
        chunk: neurons per GEMM (bounds memory at ``chunk * d_vocab`` floats).

    Returns:
        neuron -> DataFrame indexed by ``rank`` with columns ``top id``, ``top token``, ``top
        contribution``, ``top z`` and the same for ``bottom`` (z: robust z-score over the
        vocabulary, as in the score). A contribution is in pre-activation units: what the token
        would add if the kernel put all its weight on it (a token at kernel weight ``K[n, i]``
        adds ``K[n, i]`` times this).
    """
    neurons = check_neurons(model, neurons)
    vocab = scoring_vocabulary(model) if scores is None else scores.vocabulary
    ids = vocab.nonzero().flatten()
    if not 1 <= k <= len(ids):
        raise InputError(f"k must be in 1..{len(ids)}, got {k}.")
    tables = {}
    for start in range(0, len(neurons), chunk):
        block = neurons[start : start + chunk]
        c = contributions(circuit, model, block, ids)  # [chunk, n_tokens]
        med, spread = robust_location_scale(c)
        sides = {"top": c.topk(k, dim=-1), "bottom": c.topk(k, dim=-1, largest=False)}
        for row, j in enumerate(block):
            frame = {}
            for side, extreme in sides.items():
                values = extreme.values[row]
                side_ids = ids[extreme.indices[row]].tolist()
                frame[f"{side} id"] = side_ids
                frame[f"{side} token"] = [token_str(model, t) for t in side_ids]
                frame[f"{side} contribution"] = values.tolist()
                frame[f"{side} z"] = ((values - med[row]) / spread[row]).tolist()
            tables[j] = pd.DataFrame(frame, index=pd.RangeIndex(1, k + 1, name="rank"))
    return tables


def token_table(
    circuit: ContextualCircuit,
    model: Model,
    neuron,
    k: int = 12,
    scores: NeuronScores | None = None,
) -> pd.DataFrame:
    """The ``k`` top and bottom token contributions of one neuron (see :func:`token_tables`)."""
    j = check_neuron(model, neuron)
    return token_tables(circuit, model, [j], k, scores)[j]


@torch.no_grad()
def top_tokens(
    circuit: ContextualCircuit,
    model: Model,
    neuron,
    k: int = 20,
    side: str = "top",
) -> tuple[Int[Tensor, " k"], Float[Tensor, " k"]]:
    """Token ids and contributions of the ``k`` largest (``side='top'``) or smallest ones."""
    if side not in ("top", "bottom"):
        raise InputError(f"side must be 'top' or 'bottom', got {side!r}.")
    j = check_neuron(model, neuron)
    ids = scoring_vocabulary(model).nonzero().flatten()
    c = contributions(circuit, model, [j], ids)[0]
    values, idx = c.topk(k, largest=(side == "top"))
    return ids[idx], values
