"""Each position's own destination. This module answers how much error the fixed destination
itself causes (chapter 9, first open question): :func:`actual_destination_terms` gives the terms
of the approximate pre-activation when every position ``n`` queries with its own token ``t_n``
(its own kernel, content weights and calibrated denominator) instead of ``' the'``."""

from __future__ import annotations

import math

import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from context_neurons import circuit as cc
from context_neurons import decomposition as dec
from context_neurons import discovery as disc
from context_neurons import evaluation as ev
from context_neurons.checks import InputError, check_neurons, check_tokens
from context_neurons.sweeps.shared import circuit_mean_keys


@torch.no_grad()
def actual_destination_terms(
    circuit: cc.ContextualCircuit,
    model: TransformerBridge,
    tokens: Int[Tensor, "batch pos"],
    neurons,
    destinations: Int[Tensor, "batch pos"] | None = None,
    mean_keys: Float[Tensor, "n_ctx head_index d_head"] | None = None,
) -> dict[str, Float[Tensor, "batch pos n_neurons"]]:
    """The terms of the approximate pre-activation when position ``n`` queries with its own token.

    The terms of :meth:`~context_neurons.evaluation.NeuronApproximator.terms` (per-position
    denominators), with the bag and the positional part recomputed for destination
    ``d_n = destinations[b, n]`` (default: the token at ``n``) at every position: the kernels
    ``pos^{d_n}_{h,n}(i)`` and their median, the content weights ``c^{d_n}_h(t_i)`` at ``n_ref``,
    and the denominators ``D^{d_n}_h(n)`` of the calibration text with ``d_n`` placed at ``n``:

        bag(n) = sum_i K^{d_n}[n, i] sum_h c^{d_n}_h(t_i) / D^{d_n}_h(n) v_h(t_i) W_O^h . w_j .

    With ``destinations`` all equal to the circuit's destination this is the circuit's own
    approximation (tested). One text at a time: ``[head, pos, pos]`` tensors.

    Raises:
        InputError: texts longer than the calibration text (no calibrated denominator there).
    """
    tokens = check_tokens(model, tokens)
    neurons = check_neurons(model, neurons)
    destinations = tokens if destinations is None else check_tokens(model, destinations)
    if destinations.shape != tokens.shape:
        raise InputError("destinations must have the shape of tokens (one per position).")
    calibration = circuit.calibration.tokens
    n = tokens.shape[1]
    if n > len(calibration):
        raise InputError(
            f"The texts have {n} positions, the calibration text {len(calibration)}: cut them."
        )
    mean_keys = circuit_mean_keys(circuit, model) if mean_keys is None else mean_keys
    approx = ev.approximator(circuit, model, neurons, "per_position")
    terms = approx.terms(tokens)
    read = disc.read_vectors(circuit, model, neurons)
    token_read = torch.einsum("the,hej->thj", circuit.token_values, circuit.w_o @ read)
    value_read = torch.einsum("ihe,hej->ihj", circuit.mean_values[:n], circuit.w_o @ read)
    bags, positional = [], []
    for text, dest in zip(tokens, destinations):
        log_kernels, log_c, log_d = _destination_tables(circuit, model, text, dest, mean_keys)
        kernels = log_kernels.exp()
        shared = cc.median_kernel(kernels)
        weights = shared[None] * torch.exp(log_c - log_d[:, :, None])  # [head, pos, pos]
        bags.append(torch.einsum("hni,ihj->nj", weights, token_read[text]))
        positional.append(torch.einsum("hni,ihj->nj", kernels, value_read))
    terms["bag"], terms["positional"] = torch.stack(bags), torch.stack(positional)
    return terms


def _destination_tables(circuit, model, text, dest, mean_keys):
    """Log kernels, log content weights at ``n_ref`` and calibrated log denominators of one text
    whose position ``n`` holds destination ``dest[n]`` (``[head, pos, pos]``, ``[head, pos]``)."""
    heads, n = circuit.heads, len(text)
    positions = torch.arange(n, device=text.device)
    queries = _queries(model, dest, positions)  # [pos, head_index, d_head]
    scores = dec.positional_scores(model, queries, positions, n, mean_keys, heads)
    mask = dec.causal_mask(n, text.device)
    log_kernels = torch.log_softmax(scores.masked_fill(~mask, -math.inf), dim=-1)
    at_ref = torch.full_like(positions, circuit.n_ref)
    log_c = dec.content_scores(model, _queries(model, dest, at_ref), at_ref, text, heads)
    calib = circuit.calibration.tokens[:n]
    # the denominators in the circuit's frame (build_circuit): content weights at n_ref, as the
    # bag's, or at each destination n
    frame_q, frame_at = ((_queries(model, dest, at_ref), at_ref) if circuit.frame == "reference"
                         else (queries, positions))
    log_c_calib = dec.content_scores(model, frame_q, frame_at, calib, heads)
    own = dec.content_scores(model, frame_q, frame_at, dest, heads)  # d_n at its own n
    log_c_calib[:, positions[1:], positions[1:]] = own[:, positions[1:], positions[1:]]
    log_d = torch.logsumexp(log_kernels + log_c_calib.masked_fill(~mask, -math.inf), dim=-1)
    return log_kernels, log_c, log_d


def _queries(model, tokens, positions) -> Tensor:
    """Exact layer-0 queries of ``tokens[k]`` placed at ``positions[k]``, every head."""
    attn = model.blocks[0].attn
    x = dec.ln1_apply(model, model.W_E[tokens] + model.W_pos[positions])
    return torch.einsum("pd,hde->phe", x, attn.W_Q) + attn.b_Q
