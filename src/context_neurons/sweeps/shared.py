"""What the studies share. This module holds the helpers of chapter 9 that several studies use:
token counts of texts and word tokens (the destination classes and the sweep), a circuit's mean
keys (the destination sweep, the actual-destination terms, and :mod:`.calibration_clusters`), a
fixed random share of the scoring vocabulary and the Jaccard index of two sets of neurons."""

from __future__ import annotations

import re

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from context_neurons import circuit as cc
from context_neurons import decomposition as dec
from context_neurons import discovery as disc
from context_neurons.checks import InputError, TokenError, token_id


#: A word token: a space followed by letters only (``' church'``).
WORD = re.compile(r"^ [A-Za-z]+$")


def token_counts(windows: list[Int[Tensor, " _pos"]], d_vocab: int) -> Int[Tensor, " d_vocab"]:
    """How often each token occurs in the windows (position 0, the BOS, left out)."""
    counts = torch.zeros(d_vocab, dtype=torch.long)
    for window in windows:
        counts += torch.bincount(torch.as_tensor(window)[1:].cpu(), minlength=d_vocab)
    return counts


def word_token(model: TransformerBridge, token: int, min_letters: int = 1) -> str | None:
    """The token's text when it is a word token (:data:`WORD`) that is one token of the model's
    tokenizer (checked with :func:`~context_neurons.checks.token_id`), else ``None``."""
    text = model.tokenizer.decode([int(token)])
    if not WORD.match(text) or len(text) - 1 < min_letters:
        return None
    try:
        return text if token_id(model, text) == int(token) else None
    except TokenError:
        return None


@torch.no_grad()
def circuit_mean_keys(
    circuit: cc.ContextualCircuit, model: TransformerBridge
) -> Float[Tensor, "n_ctx head_index d_head"]:
    """The mean keys ``M`` of a circuit, recomputed from its calibration text's tokens (BOS left
    out), as :func:`~context_neurons.circuit.build.build_circuit` takes them by default.

    Raises:
        InputError: when the circuit's mean values were not taken from those tokens (a circuit
            built with other ``reference_tokens``), so that its mean keys cannot be recomputed.
    """
    reference = circuit.calibration.tokens[1:]
    values = dec.mean_positional_keys(model, reference, model.cfg.n_ctx, which="V")[
        :, circuit.heads
    ]
    scale = circuit.mean_values.abs().max().clamp(min=1e-12)
    if float((values - circuit.mean_values).abs().max() / scale) > 1e-4:
        raise InputError(
            "This circuit's mean values were not computed from its calibration text's tokens "
            "(built with other reference_tokens?): build it with the default reference tokens."
        )
    return dec.mean_positional_keys(model, reference, model.cfg.n_ctx, which="K")


def sample_vocabulary(
    model: TransformerBridge, fraction: float, seed: int = 0
) -> Bool[Tensor, " d_vocab"]:
    """A fixed random share of the scoring vocabulary (:func:`~context_neurons.discovery.
    scoring_vocabulary`), to score many circuits quickly."""
    if not 0 < fraction <= 1:
        raise InputError(f"fraction must be in (0, 1], got {fraction}.")
    keep = disc.scoring_vocabulary(model).cpu()
    draw = torch.rand(len(keep), generator=torch.Generator().manual_seed(seed)) < fraction
    return (keep & draw).to(model.cfg.device)


def jaccard(a, b) -> float:
    """``|a & b| / |a | b|`` of two sets of neurons (1 when both are empty)."""
    a, b = {int(x) for x in a}, {int(x) for x in b}
    return len(a & b) / len(a | b) if a | b else 1.0
