"""The bag of tokens' responses in closed form: the decomposition's own case (issue 52).

In ``[BOS, t, ..., t]`` the residual stream entering layer 0 at position ``p >= 1`` is
``E_t + P_p``. LayerNorm 1 centres it (``c(E_t) + c(P_p)``) and divides by
``sigma_p(t) = sqrt((|c(E_t)|^2 + 2 c(E_t).c(P_p) + |c(P_p)|^2) / d_model + eps)``, one matrix
product ``c(E) c(P)^T`` for every token and position. The queries, keys and values are then
``(c(E_t) diag(w) W + c(P_p) diag(w) W) / sigma_p(t) + (b W + b_W)``: a per-token part (one
``d_model x 3 d_model`` product per token, not one per position) and a per-position part
(computed once), so the projections, the forward pass's largest cost, leave the loop over
positions. Position 0 (``BOS + P_0``) is the same for every token. Attention, the output
projection and LayerNorm 2 are then applied as the forward pass does, at the query positions
``start <= p < L`` only; the mean over positions comes before ``W_in`` (one product per token).
Equal to :func:`~context_neurons.verdict.baselines.bag_responses` (the forward pass) to float32
rounding: tested, and checked on a sample of tokens in every evaluation that uses it
(:func:`checked_bag_responses`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor

from transformer_lens.model_bridge import TransformerBridge

from context_neurons.checks import ModelLoadError
from context_neurons.models.weights import ModelWeights, as_weights
from context_neurons.verdict.baselines import bag_responses

#: The largest relative difference allowed between the closed form and the forward pass.
RELATIVE_TOLERANCE = 1e-4
#: Tokens of the sample checked against the forward pass in every evaluation.
CHECKED_TOKENS = 16


def _centred(x: Float[Tensor, "*batch d_model"]) -> Float[Tensor, "*batch d_model"]:
    return x - x.mean(-1, keepdim=True)


def _parts(weights: ModelWeights, which: str) -> tuple[
        Float[Tensor, "head_index d_model d_head"], Float[Tensor, "head_index d_head"]]:
    """LayerNorm 1's scale folded into the projection, and its bias's constant part."""
    w, b = weights.projection(which)
    return weights.ln1_w[None, :, None] * w, torch.einsum("d,hde->he", weights.ln1_b, w) + b


def _projected(token: Float[Tensor, "batch head_index d_head"],
               position: Float[Tensor, "head_index pos d_head"], sigma: Float[Tensor, "batch pos"],
               constant: Float[Tensor, "head_index d_head"]) -> Float[Tensor, "batch head_index pos d_head"]:
    """``(token part + position part) / sigma + constant`` at every position."""
    return torch.addcdiv(constant[None, :, None], token[:, :, None] + position[None],
                         sigma[:, None, :, None])


@torch.no_grad()
def closed_form_bag_responses(weights: ModelWeights, tokens: Int[Tensor, " n_tokens"],
                              length: int, start: int, bos: int,
                              batch_size: int = 64) -> Float[Tensor, "n_tokens d_mlp"]:
    """``r_j(t)`` for every token (module docstring), float64 as the forward pass gives it."""
    eps, d = weights.cfg.eps, weights.cfg.d_model
    P = _centred(weights.W_pos[:length])  # [pos, d_model]
    first = F.layer_norm(weights.W_E[bos] + weights.W_pos[0], (d,), weights.ln1_w,
                         weights.ln1_b, eps)
    parts = {w: _parts(weights, w) for w in "QKV"}
    by_position = {w: torch.einsum("pd,hde->hpe", P, a) for w, (a, _) in parts.items()}
    by_position["Q"] = by_position["Q"][:, start:]  # queries only where the mean is taken
    at_first = {w: torch.einsum("d,hde->he", first, weights.projection(w)[0])
                + weights.projection(w)[1] for w in "KV"}
    positions = torch.arange(length, device=P.device)
    keys_allowed = positions[None, :] <= positions[start:, None]  # [query, key]: causal
    W_O = weights.W_O.flatten(0, 1)
    at_queries = weights.W_pos[start:length] + weights.b_O  # [query, d_model]
    out = []
    for b in range(0, len(tokens), batch_size):
        E = weights.W_E[tokens[b: b + batch_size].long().to(P.device)]
        e = _centred(E)
        sigma = ((e.square().sum(-1, keepdim=True) + 2 * e @ P.T + P.square().sum(-1)) / d
                 + eps).sqrt()  # [batch, pos]
        q, k, v = (_projected(torch.einsum("bd,hde->bhe", e, parts[w][0]), by_position[w],
                              sigma[:, start:] if w == "Q" else sigma, parts[w][1])
                   for w in "QKV")
        for x, w in ((k, "K"), (v, "V")):
            x[:, :, 0] = at_first[w]  # position 0: BOS, the same for every token
        z = F.scaled_dot_product_attention(q, k, v, attn_mask=keys_allowed,
                                           scale=1 / weights.cfg.attn_scale)
        resid = (E[:, None] + at_queries).flatten(0, 1)  # the residual and b_O, [batch query, d]
        x = torch.addmm(resid, z.transpose(1, 2).flatten(-2).flatten(0, 1), W_O).view(
            len(E), -1, d)  # one pass: the product added to the residual as it is written
        normed = F.layer_norm(x, (d,), weights.ln2_w, weights.ln2_b, eps).double().mean(1)
        out.append((normed @ weights.W_in.double() + weights.b_in.double()).cpu())
    return torch.cat(out)


def check_against_forward(closed: Float[Tensor, "n d_mlp"],
                          forward: Float[Tensor, "n d_mlp"]) -> float:
    """The largest difference relative to the largest response; a
    :class:`~context_neurons.checks.ModelLoadError` above :data:`RELATIVE_TOLERANCE`."""
    error = float((closed - forward).abs().max() / forward.abs().max().clamp(min=1e-30))
    if error > RELATIVE_TOLERANCE:
        raise ModelLoadError(f"The bag of tokens' closed form is {error:.2g} (relative) from the "
                             "forward pass on a sample of tokens: its layer-0 weights are not "
                             "read right.")
    return error


def checked_bag_responses(model: TransformerBridge, tokens: Int[Tensor, " n_tokens"],
                          length: int, start: int, bos: int,
                          batch_size: int = 16) -> Float[Tensor, "n_tokens d_mlp"]:
    """:func:`closed_form_bag_responses` of every token, checked against the forward pass
    (:func:`~context_neurons.verdict.baselines.bag_responses`) on :data:`CHECKED_TOKENS`
    tokens spread evenly over ``tokens`` (a :class:`ModelLoadError` above the tolerance)."""
    closed = closed_form_bag_responses(as_weights(model), tokens.cpu(), length, start, bos)
    sample = torch.linspace(0, len(tokens) - 1, min(CHECKED_TOKENS, len(tokens))).long().unique()
    check_against_forward(closed[sample], bag_responses(model, tokens[sample], length, start,
                                                        bos, batch_size))
    return closed


__all__ = ["CHECKED_TOKENS", "RELATIVE_TOLERANCE", "check_against_forward",
           "checked_bag_responses", "closed_form_bag_responses"]
