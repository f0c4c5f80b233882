"""Shared fixtures: the planted model (built once per session) and small seeded models."""

from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("CONTEXT_NEURONS_MODEL", "planted")
torch.set_grad_enabled(False)


@pytest.fixture(scope="session")
def planted():
    """The planted ground-truth model (GPT-2 Small shapes, 2 layers); about 10 s to build."""
    from context_neurons.models import load_model

    return load_model("planted")


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


@pytest.fixture(scope="session")
def small_model():
    return make_small_model()[0]
