"""Toy models. This module builds the small seeded models that tests and exercises use.

* :func:`make_small_model`: a small GPT-2-architecture model (through the same loader as GPT-2)
  with non-trivial LayerNorms and sharp scores, for checking exact identities against hooks.
* :func:`exact_toy_model`: a one-layer model on which every approximation of the contextual
  circuit holds exactly (chapter 4), for checking that the circuit's arithmetic is right.
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge
from transformers import GPT2Config, GPT2LMHeadModel

from context_neurons.models.loading import (
    WeightProcessing,
    quiet_bridge,
    bridge_from_hf,
    placeholder_tokenizer,
)


def make_small_model(seed: int = 0, fold_ln: bool = False, d_vocab: int = 500, n_ctx: int = 64,
                     n_layers: int = 1, gentle_heads: tuple[int, ...] = (),
                     gentle_gain: float = 0.05) -> tuple[TransformerBridge, GPT2LMHeadModel]:
    """A small seeded GPT-2-architecture TransformerBridge with non-trivial LayerNorm weights.

    ``gentle_heads``: layer-0 heads whose query weights and biases are multiplied by
    ``gentle_gain`` (weak content dependence and a slowly varying kernel: heads that chapter 3's
    independent-token model describes, for testing the band of
    :mod:`context_neurons.evaluation.band`).

    Returns:
        ``(model, hf_model)``: the TransformerBridge and the Hugging Face model it was made from.
    """
    torch.manual_seed(seed)
    config = GPT2Config(n_layer=n_layers, n_embd=64, n_head=4, n_positions=n_ctx, vocab_size=d_vocab)
    hf_model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():  # make LayerNorms and biases non-trivial, and scores sharp
        for name, param in hf_model.named_parameters():
            if "ln" in name and name.endswith("weight"):
                param.copy_(1 + 0.3 * torch.randn_like(param))
            elif name.endswith("bias"):
                param.copy_(0.1 * torch.randn_like(param))
            elif "c_attn.weight" in name:
                param.mul_(8.0)
        d_head = config.n_embd // config.n_head
        attn = hf_model.transformer.h[0].attn.c_attn
        for head in gentle_heads:  # the query block is the first n_embd columns
            columns = slice(head * d_head, (head + 1) * d_head)
            attn.weight[:, columns] *= gentle_gain
            attn.bias[columns] *= gentle_gain
    processing = WeightProcessing(fold_ln=fold_ln, center_writing_weights=fold_ln,
                                  center_unembed=fold_ln, fold_value_biases=fold_ln)
    return bridge_from_hf(copy.deepcopy(hf_model), None, "small", processing), hf_model


@torch.no_grad()
def exact_toy_model(
    seed: int = 0, d_vocab: int = 40, n_ctx: int = 24
) -> tuple[TransformerBridge, list[int]]:
    """A one-layer model on which the circuit's approximations are exact (tests, exercises).

    * Token embeddings live in the first half of the residual stream, position embeddings in the
      second, both mean-free with unit norm: LN1's scale is the same for every token and position,
      so a value splits exactly into a token part plus a position part.
    * Contextual heads 0 and 2 have ``W_Q = 0, b_Q = 0``: every score is 0, so content weights are
      1, every denominator is 1 and all kernels are the same uniform kernel.
    * Heads 1 and 3 read only positions with a large query gain and attend to the current token
      (their softmax is one-hot to float precision).
    LN2's scale is *not* constant; fix it with a hook on ``blocks.0.ln2.hook_scale`` to compare.
    The model lives on the CPU whatever accelerator is present.

    Returns:
        ``(model, contextual_heads)``.
    """
    d_model, half, d_head, n_heads = 32, 16, 16, 4
    # TransformerLens's own model built from a configuration (GPT-2's Hugging Face module cannot
    # hold 4 heads of 16 dimensions in a 32-dimensional residual stream).
    cfg = dict(
        n_layers=1,
        d_model=d_model,
        n_ctx=n_ctx,
        d_head=d_head,
        n_heads=n_heads,
        d_mlp=24,
        d_vocab=d_vocab,
        act_fn="gelu_new",
        normalization_type="LN",
        seed=seed,
        default_prepend_bos=False,
    )
    with quiet_bridge():  # tiny: the CPU is fastest, and the CPU tensors below fit it
        model = TransformerBridge.boot_native(cfg, tokenizer=placeholder_tokenizer(d_vocab),
                                              device="cpu", model_name="exact-toy")
        model.enable_compatibility_mode(disable_warnings=True, no_processing=True)
    model.tokenizer.bos_token = None  # ids only, as for every placeholder tokenizer
    model.eval()
    gen = torch.Generator().manual_seed(seed)

    def unit_mean_free(n: int) -> Tensor:
        x = torch.randn(n, half, generator=gen)
        x = x - x.mean(-1, keepdim=True)
        return x / x.norm(dim=-1, keepdim=True)

    w_e = torch.zeros(d_vocab, d_model)
    w_e[:, :half] = unit_mean_free(d_vocab)
    positions = unit_mean_free(n_ctx)
    w_pos = torch.zeros(n_ctx, d_model)
    w_pos[:, half:] = positions
    cosines = positions @ positions.T - 2 * torch.eye(n_ctx)
    assert cosines.max() < 0.95, "positions too similar for one-hot attention"
    model.W_E.copy_(w_e)
    model.W_pos.copy_(w_pos)
    ln1, ln2 = model.blocks[0].ln1, model.blocks[0].ln2
    ln1.w.copy_(torch.ones(d_model))
    ln1.w[:half] = 0.5 + torch.rand(half, generator=gen)  # token dims: any gain works
    ln1.b.zero_()
    ln1.b[:half] = 0.1 * torch.randn(half, generator=gen)
    ln2.w.copy_(0.5 + torch.rand(d_model, generator=gen))
    ln2.b.copy_(0.1 * torch.randn(d_model, generator=gen))
    attn = model.blocks[0].attn
    for param in (attn.W_V, attn.W_O, attn.W_K, attn.b_K, attn.b_V, attn.b_O):
        param.copy_(0.3 * torch.randn(param.shape, generator=gen))
    contextual, current = [0, 2], [1, 3]
    attn.W_Q.zero_()
    attn.b_Q.zero_()
    for h in current:
        attn.W_Q[h, half:] = 200.0 * torch.eye(half)
        attn.W_K[h].zero_()
        attn.W_K[h, half:] = torch.eye(half)
        attn.b_K[h].zero_()
    mlp = model.blocks[0].mlp
    mlp.W_in.copy_(torch.randn(mlp.W_in.shape, generator=gen) / d_model**0.5)
    mlp.b_in.copy_(0.1 * torch.randn(mlp.b_in.shape, generator=gen))
    return model, contextual
