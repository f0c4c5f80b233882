"""Weights. This module reads a model once into the plain value the method works on.

The method (chapters 1-6: decomposition, taxonomy, stability, circuit, discovery) reads only
layer 0 of a model: the embeddings, LN1 and LN2, the attention weights and the MLP's input
weights, plus the model's sizes and tokenizer. :func:`read_weights` reads them from a
TransformerLens model (a ``TransformerBridge`` in compatibility mode, whatever weight processing
was applied) into a :class:`ModelWeights`, once per model; the method's functions take either the
value or the model (:func:`as_weights`), so a reader who loaded GPT-2 with TransformerLens passes
the model; the weights-only functions never call TransformerLens's API themselves (the circuit's
measurement of LN2's scale on the calibration text runs the model through its hooks). Tensors are
the model's own (views, not copies): weights edited in place on the model are seen here too, and
a model moved, cast or given new weight tensors is read again.

Quantities derived from the weights that several functions need (the reference token
distribution, the mean keys over it) are computed once, lazily, and kept on the value until the
weights they read are edited (:meth:`ModelWeights.derived`).
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge
from transformers.activations import ACT2FN

from context_neurons.checks import InputError
from context_neurons.text.windows import calibration_tokens

LAYER = 0


@dataclass(frozen=True)
class ModelConfig:
    """The sizes the method reads (the same names as TransformerLens's ``cfg``)."""

    n_layers: int
    n_heads: int
    d_model: int
    d_head: int
    d_mlp: int
    d_vocab: int
    n_ctx: int
    eps: float
    act_fn: str
    attn_scale: float  # scores are q . k / attn_scale
    device: torch.device
    model_name: str = ""


@dataclass(frozen=True, eq=False)
class ModelWeights:
    """What the method reads of a model: its layer-0 weights, LayerNorm parameters and sizes.

    LayerNorm parameters are ones and zeros when TransformerLens folded them into the next
    matrices; every formula of the method uses them, so it is exact either way.
    """

    cfg: ModelConfig
    tokenizer: Any
    W_E: Float[Tensor, "d_vocab d_model"]
    W_pos: Float[Tensor, "n_ctx d_model"]
    ln1_w: Float[Tensor, " d_model"]
    ln1_b: Float[Tensor, " d_model"]
    W_Q: Float[Tensor, "head_index d_model d_head"]
    W_K: Float[Tensor, "head_index d_model d_head"]
    W_V: Float[Tensor, "head_index d_model d_head"]
    b_Q: Float[Tensor, "head_index d_head"]
    b_K: Float[Tensor, "head_index d_head"]
    b_V: Float[Tensor, "head_index d_head"]
    W_O: Float[Tensor, "head_index d_head d_model"]
    b_O: Float[Tensor, " d_model"]
    ln2_w: Float[Tensor, " d_model"]
    ln2_b: Float[Tensor, " d_model"]
    W_in: Float[Tensor, "d_model d_mlp"]
    b_in: Float[Tensor, " d_mlp"]
    _derived: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def projection(self, which: str) -> tuple[
        Float[Tensor, "head_index d_model d_head"], Float[Tensor, "head_index d_head"]
    ]:
        """``(W, b)`` of the layer-0 query, key or value projection (``which`` = Q, K or V)."""
        return {"Q": (self.W_Q, self.b_Q), "K": (self.W_K, self.b_K), "V": (self.W_V, self.b_V)}[
            which
        ]

    @property
    def activation(self) -> Callable[[Tensor], Tensor]:
        """The MLP's activation function (Hugging Face's implementation of ``cfg.act_fn``)."""
        return ACT2FN[self.cfg.act_fn]

    def fingerprint(self) -> tuple:
        """Where the weights live and how often they were edited in place: a derived quantity
        kept from before an edit (``W_K[h] *= 2`` on the model) is computed again."""
        return tuple(
            (t.data_ptr(), t._version, t.dtype)
            for t in (self.W_E, self.W_pos, self.ln1_w, self.ln1_b, self.W_Q, self.W_K, self.W_V,
                      self.b_Q, self.b_K, self.b_V)
        )

    def derived(self, key: str, compute: Callable[[], Any]) -> Any:
        """A quantity derived from the weights, computed on first use and kept until the weights
        change (``key`` names it, with whatever arguments it depends on)."""
        stamp = self.fingerprint()
        kept = self._derived.get(key)
        if kept is None or kept[0] != stamp:
            self._derived[key] = (stamp, compute())
        return self._derived[key][1]

    @property
    def reference_tokens(self) -> Int[Tensor, " n_ref"]:
        """The token distribution of the mean keys ``M``: the calibration text's tokens, BOS left
        out (:func:`~context_neurons.text.windows.calibration_tokens`, shared by every chapter)."""
        from_text = functools.partial(_calibration_reference, self.tokenizer, self.cfg)
        return self.derived("reference_tokens", from_text)


def _calibration_reference(tokenizer, cfg: ModelConfig) -> Int[Tensor, " n_ref"]:
    return calibration_tokens(tokenizer, n_ctx=cfg.n_ctx)[1:].to(cfg.device)


def layer_norm_affine(
    ln, d_model: int, device: torch.device
) -> tuple[Float[Tensor, " d_model"], Float[Tensor, " d_model"]]:
    """``(gamma, beta)`` of one of a TransformerLens model's LayerNorms (any layer, or
    ``ln_final``); ones and zeros, on ``device``, for a LayerNorm folded into the next weights."""
    gamma, beta = getattr(ln, "w", None), getattr(ln, "b", None)
    ones = torch.ones(d_model, device=device)
    gamma = ones if gamma is None else gamma.detach()
    return gamma, (ones * 0 if beta is None else beta.detach())


_READ: "weakref.WeakKeyDictionary[Any, ModelWeights]" = weakref.WeakKeyDictionary()


def read_weights(model: TransformerBridge) -> ModelWeights:
    """Read a TransformerLens model's layer-0 weights, LayerNorms and sizes, once per model.

    Args:
        model: a TransformerLens ``TransformerBridge`` (compatibility mode) of a GPT-2-architecture
            model, or a model with the same attribute names.
    """
    device = next(iter(model.parameters())).device
    kept = _READ.get(model)
    if kept is not None and _same_storage(kept.W_E, model.W_E) and _same_storage(
        kept.W_K, model.blocks[LAYER].attn.W_K
    ):
        return kept  # else the model was moved, cast or given new weights: read it again
    check_architecture(model.cfg)
    try:
        weights = _read(model, device)
    except AttributeError as error:  # a bridge without GPT-2's weight names
        raise InputError(f"read_weights reads GPT-2-architecture models; this one lacks a weight "
                         f"it needs ({error})") from error
    _READ[model] = weights
    return weights


#: What the decomposition assumes of a model's configuration: the values it accepts, and why.
ARCHITECTURE = {
    "positional_embedding_type": (("standard",), "learned absolute positions added to the tokens "
                                  "(W_pos); chapter 9 treats rotary and ALiBi positions"),
    "normalization_type": (("LN", "LNPre"), "LayerNorm, which centres and scales"),
    "gated_mlp": ((False,), "an MLP read through W_in alone (a gated MLP needs W_gate too)"),
}


def check_architecture(cfg: Any) -> None:
    """Refuse a model this package cannot decompose, naming each of its choices that differs from
    GPT-2's (:data:`ARCHITECTURE`); a configuration without one of these fields is not refused."""
    differs = [
        f"{name} = {getattr(cfg, name)!r} (the method needs {' or '.join(map(repr, accepted))}: "
        f"{why})"
        for name, (accepted, why) in ARCHITECTURE.items()
        if getattr(cfg, name, accepted[0]) not in accepted
    ]
    if differs:
        raise InputError(f"{getattr(cfg, 'model_name', 'this model')} is not a GPT-2-architecture "
                         "model: " + "; ".join(differs))


def _read(model: TransformerBridge, device: torch.device) -> ModelWeights:
    cfg, block = model.cfg, model.blocks[LAYER]
    attn = block.attn
    d_model = cfg.d_model
    ln1_w, ln1_b = layer_norm_affine(block.ln1, d_model, device)
    ln2_w, ln2_b = layer_norm_affine(block.ln2, d_model, device)
    use_scale = getattr(cfg, "use_attn_scale", True)
    return ModelWeights(
        cfg=ModelConfig(
            n_layers=cfg.n_layers, n_heads=cfg.n_heads, d_model=d_model, d_head=cfg.d_head,
            d_mlp=cfg.d_mlp, d_vocab=cfg.d_vocab, n_ctx=cfg.n_ctx, eps=cfg.eps,
            act_fn=cfg.act_fn, attn_scale=float(cfg.d_head**0.5) if use_scale else 1.0,
            device=device, model_name=str(getattr(cfg, "model_name", "")),
        ),
        tokenizer=model.tokenizer,
        W_E=model.W_E.detach(), W_pos=model.W_pos.detach(),
        ln1_w=ln1_w, ln1_b=ln1_b,
        W_Q=attn.W_Q.detach(), W_K=attn.W_K.detach(), W_V=attn.W_V.detach(),
        b_Q=attn.b_Q.detach(), b_K=attn.b_K.detach(), b_V=attn.b_V.detach(),
        W_O=attn.W_O.detach(), b_O=attn.b_O.detach(),
        ln2_w=ln2_w, ln2_b=ln2_b,
        W_in=block.mlp.W_in.detach(), b_in=block.mlp.b_in.detach(),
    )


def _same_storage(kept: Tensor, current: Tensor) -> bool:
    return (kept.data_ptr(), kept.device, kept.dtype) == (
        current.data_ptr(), current.device, current.dtype
    )


#: What the method's functions take: the plain value, or a model to read it from.
Model = ModelWeights | TransformerBridge


def as_weights(model_or_weights: Model) -> ModelWeights:
    """The :class:`ModelWeights` of a model (read once), or the value itself."""
    if isinstance(model_or_weights, ModelWeights):
        return model_or_weights
    return read_weights(model_or_weights)
