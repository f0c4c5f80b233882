"""The circuit's attention weights. This module answers how far the attention weights the circuit
implies for each of its heads are from the true ones (chapter 9, second open question):
:func:`circuit_attention_tv` is half the L1 distance (the total variation when the circuit's
weights sum to one) between them, position by position."""

from __future__ import annotations

import torch
from einops import rearrange
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from context_neurons import circuit as cc
from context_neurons import decomposition as dec
from context_neurons.checks import check_tokens
from context_neurons.hooks import run_until


@torch.no_grad()
def circuit_attention_tv(
    circuit: cc.ContextualCircuit,
    model: TransformerBridge,
    tokens: Int[Tensor, "batch pos"],
    denominators: str = "per_position",
) -> Float[Tensor, "ctx_head batch pos"]:
    """``1/2 sum_i |A^h_{n,i} - K[n,i] c_h(t_i) / D_h(n)|``: the circuit's attention weights of each
    head against the true pattern (hook ``blocks.0.attn.hook_pattern``).

    The circuit's weights are those its bag gives each token (``sum_i`` of them times ``v_h(t_i)
    W_O^h`` is the head's share of :meth:`ContextualCircuit.bag`); they need not sum to one, so
    this is half the L1 distance, the total variation when they do.
    """
    tokens = check_tokens(model, tokens).to(circuit.kernel.device)
    n = tokens.shape[1]
    pattern = run_until(model, tokens, "blocks.0.attn.hook_pattern")["blocks.0.attn.hook_pattern"]
    true = pattern[:, circuit.heads]  # [batch, head, pos, pos]
    inverse = circuit.inverse_denominators(n, denominators)  # [head, pos]
    content = circuit.log_content.exp()[:, tokens]  # [head, batch, pos]
    approx = torch.einsum("ni,hbi,hn->bhni", circuit.kernel[:n, :n], content, inverse)
    return rearrange(dec.tv_distance(true, approx), "b h n -> h b n")
