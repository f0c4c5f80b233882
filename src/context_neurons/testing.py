"""Small seeded models. This module builds tiny GPT-2-architecture models for tests and exercises."""

from __future__ import annotations

import torch


def make_small_model(seed: int = 0, fold_ln: bool = False, d_vocab: int = 500, n_ctx: int = 64,
                     n_layers: int = 1):
    """A small seeded GPT-2-architecture HookedTransformer with non-trivial LayerNorm weights."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from context_neurons.models import WeightProcessing, hooked_from_hf

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
    processing = WeightProcessing(fold_ln=fold_ln, center_writing_weights=fold_ln,
                                  center_unembed=fold_ln, fold_value_biases=fold_ln)
    return hooked_from_hf(hf_model, None, "small", processing), hf_model
