"""The approximation. This module predicts the pre-activations of layer-0 neurons from the circuit.

Gibson's paper, section "Evaluating the approximation": for the discovered neurons, compare the
pre-activation the model computes (hook ``blocks.0.mlp.hook_pre``) with the one the contextual
circuit predicts from the weights, text by text. The approximate residual stream entering LN2 at
position ``n`` of tokens ``t_0..t_n`` is

    x(n) = sum_i K[n, i] e(t_i)                                  the bag (chapter 4)
         + sum_{h contextual} sum_i pos_{h,n}(i) M_V^h[i] W_O^h  positional part, own kernels
         + W_E[t_n] + W_pos[n]                                   direct path
         + sum_{h not contextual} v_h(t_n, n) W_O^h              other heads, as if attending
                                                                 only to the current token
         + b_O                                                   attention output bias

with the bag's denominators taken per position from the calibration text by default (the
``<|endoftext|>`` sink, :mod:`context_neurons.circuit.build`; ``denominators="median"`` gives the
constant-denominator version), and LN2 is linearised with the calibration text's scale ``s2``:
``pre_j(n) ~ s2 (gamma2 * centred(x(n))) . W_in[:, j] + beta2 . W_in[:, j] + b_in[j]``.
Every term is linear in ``x``, so we project each onto the neurons' read vectors *first* and the
whole prediction becomes table look-ups plus, per text, the kernel ``[pos, pos]`` applied to each
contextual head's ``[pos, neurons]`` contributions (their per-position denominators differ): for
``J`` neurons, ``B`` texts of ``P`` tokens and ``H_ctx`` contextual heads the bag costs
``B P^2 H_ctx J`` multiply-adds (``B P^2 J`` with the constant median denominators, which let the
heads be summed first). The only non-linear piece, the other heads' exact LN1 scale
``1 / sigma(t_n, n)``, is one norm per position.

Accuracy per neuron and text, over positions ``1..len-1`` (position 0 is ``<|endoftext|>``, the
same in every text): the Pearson correlation ``r`` of true and approximate pre-activations, and the
fraction of variance unexplained ``FVU = sum_n (y_n - yhat_n)^2 / sum_n (y_n - mean y)^2`` (the
approximation used as is, no regression fitted; FVU > 1 is possible). The paper reports, on GPT-2
Small and 1000 OpenWebText texts, median ``r = 0.9485`` and median ``FVU = 0.1426``.

Much of a neuron's pre-activation is *local*: the direct path, the other heads at the current
token and the constant depend on ``(t_n, n)`` only. To measure the context part on its own,
:func:`evaluate` also compares ``y - local`` (the true pre-activation minus the local terms) with
``bag + positional`` (the contextual heads' predicted share): ``context_pearson`` and
``context_fvu``, and ``context_share``, the fraction of the true variance that ``y - local``
carries. The residual ``y - yhat`` is the same in both comparisons; only the variance it is
measured against differs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from context_neurons import decomposition as dec
from context_neurons.checks import InputError, check_neurons, check_tokens
from context_neurons.circuit import ContextualCircuit
from context_neurons.discovery import read_vectors
from context_neurons.hooks import run_until
from context_neurons.models.weights import Model, as_weights

#: First position evaluated (position 0 holds BOS in every text).
START = 1
#: Default denominators of the bag (see :mod:`context_neurons.circuit.build`).
DENOMINATORS = "per_position"
#: Terms of :meth:`NeuronApproximator.terms` that depend on the current token and position only.
LOCAL_TERMS = ("direct", "other heads", "constant")
#: Terms that carry the contextual heads' output: the bag and their positional part.
CONTEXT_TERMS = ("bag", "positional")


class EvaluationError(InputError):
    """Texts or neurons that cannot be evaluated; the message says why."""


@dataclass
class NeuronApproximator:
    """Pre-activation predictor of a set of neurons, every term projected onto their read vectors.

    Attributes (all ``[..., n_neurons]``):
        denominators: ``"per_position"`` or ``"median"`` (see :mod:`context_neurons.circuit.build`).
        contribution: ``e(t) . w_j`` for every token (the bag's summands, median denominators).
        head_contribution: each head's ``c_h(t) v_h(t) W_O^h . w_j`` before its denominator
            (for per-position denominators).
        positional: the contextual heads' positional part at each position.
        direct_token, direct_position: ``W_E[t] . w_j`` and ``W_pos[n] . w_j``.
        other_token, other_position: the non-contextual heads' ``(gamma1 * centred(W_E[t]))
            W_V W_O . w_j`` and the same for ``W_pos[n]``; multiplied by ``1 / sigma(t_n, n)``.
        constant: ``(beta1 W_V + b_V) W_O . w_j`` of the other heads, ``b_O . w_j``, LN2's
            ``beta2 . W_in[:, j]`` and ``b_in[j]``.
    """

    circuit: ContextualCircuit
    neurons: list[int]
    other_heads: list[int]
    denominators: str
    contribution: Float[Tensor, "d_vocab n_neurons"]
    head_contribution: Float[Tensor, "d_vocab ctx_head n_neurons"] | None
    positional: Float[Tensor, "pos n_neurons"]
    direct_token: Float[Tensor, "d_vocab n_neurons"]
    direct_position: Float[Tensor, "pos n_neurons"]
    other_token: Float[Tensor, "d_vocab n_neurons"]
    other_position: Float[Tensor, "pos n_neurons"]
    constant: Float[Tensor, " n_neurons"]
    eps: float
    w_e: Float[Tensor, "d_vocab d_model"] = field(repr=False)
    w_pos: Float[Tensor, "pos d_model"] = field(repr=False)

    @torch.no_grad()
    def terms(
        self, tokens: Int[Tensor, "batch pos"]
    ) -> dict[str, Float[Tensor, "batch pos n_neurons"]]:
        """Each term of the approximate pre-activation, separately (keys: :data:`LOCAL_TERMS`
        and :data:`CONTEXT_TERMS`)."""
        tokens = torch.as_tensor(tokens).to(self.w_e.device)
        n = tokens.shape[1]
        kernel = self.circuit.kernel[:n, :n]
        x = dec.centred(self.w_e[tokens] + self.w_pos[:n])
        inv_sigma = torch.rsqrt((x**2).mean(-1) + self.eps)  # LN1 scale of (t_n, n)
        if self.denominators == "median":
            bag = torch.einsum("ni,bij->bnj", kernel, self.contribution[tokens])
        else:
            inv_d = self.circuit.inverse_denominators(n, self.denominators)
            bag = torch.einsum("ni,bihj,hn->bnj", kernel, self.head_contribution[tokens], inv_d)
        return {
            "bag": bag,
            "positional": self.positional[:n].expand(len(tokens), -1, -1),
            "direct": self.direct_token[tokens] + self.direct_position[:n],
            "other heads": inv_sigma[..., None]
            * (self.other_token[tokens] + self.other_position[:n]),
            "constant": self.constant.expand(len(tokens), n, -1),
        }

    @torch.no_grad()
    def __call__(self, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos n_neurons"]:
        """The approximate pre-activations of ``self.neurons`` along each text of the batch."""
        return sum(self.terms(tokens).values())


@torch.no_grad()
def approximator(
    circuit: ContextualCircuit,
    model: Model,
    neurons,
    denominators: str = DENOMINATORS,
) -> NeuronApproximator:
    """Project every term of the approximation (module docstring) onto the neurons' read vectors.

    Args:
        circuit: the contextual circuit.
        model: the model.
        neurons: layer-0 neuron indices.
        denominators: ``"per_position"`` (default: ``D_h(n)`` of the calibration text, which
            follows the ``<|endoftext|>`` sink over the first ~100 positions) or ``"median"``
            (the constant ``Dhat_h`` of the extended embeddings).
    """
    neurons = check_neurons(model, neurons)
    circuit.inverse_denominators(1, denominators)  # validates the name
    weights = as_weights(model)
    n_heads = weights.cfg.n_heads
    w = read_vectors(circuit, weights, neurons)  # [d_model, J], LN2 scale and gamma2 included
    other = [h for h in range(n_heads) if h not in circuit.heads]
    gamma1, beta1 = weights.ln1_w, weights.ln1_b
    if other:
        w_vo = torch.einsum("hde,hef->df", weights.W_V[other], weights.W_O[other])  # [d, d]
        read_other = w_vo @ w  # [d_model, J]
        other_token = (gamma1 * dec.centred(weights.W_E)) @ read_other
        other_position = (gamma1 * dec.centred(weights.W_pos)) @ read_other
        value_bias = torch.einsum("d,hde->he", beta1, weights.W_V[other]) + weights.b_V[other]
        other_constant = torch.einsum("he,hef->f", value_bias, weights.W_O[other]) @ w
    else:
        zeros = torch.zeros(len(neurons), device=w.device)
        other_token = torch.zeros(model.cfg.d_vocab, len(neurons), device=w.device)
        other_position = torch.zeros(model.cfg.n_ctx, len(neurons), device=w.device)
        other_constant = zeros
    constant = (
        other_constant + weights.b_O @ w + weights.ln2_b @ weights.W_in[:, neurons]
        + weights.b_in[neurons]
    )
    return NeuronApproximator(
        circuit=circuit,
        neurons=neurons,
        other_heads=other,
        denominators=denominators,
        contribution=circuit.extended @ w,
        head_contribution=(
            None if denominators == "median" else circuit.head_contributions(w, circuit.w_o)
        ),
        positional=circuit.positional_part @ w,
        direct_token=weights.W_E @ w,
        direct_position=weights.W_pos @ w,
        other_token=other_token,
        other_position=other_position,
        constant=constant,
        eps=weights.cfg.eps,
        w_e=weights.W_E,
        w_pos=weights.W_pos,
    )


@torch.no_grad()
def true_pre_activations(
    model: TransformerBridge, tokens: Int[Tensor, "batch pos"], neurons
) -> Float[Tensor, "batch pos n_neurons"]:
    """The model's layer-0 MLP pre-activations of ``neurons``, running layer 0 only.

    Computes the MLP's input ``blocks.0.hook_resid_mid`` (:func:`layer0_resid_mid`), which the
    model's own ``ln2`` and ``W_in[:, neurons]``, ``b_in[neurons]`` then map to the
    pre-activations: the computation of hook ``blocks.0.mlp.hook_pre`` restricted to the chosen
    neurons (tested equal), without the MLP's other neurons, its output and the later layers.
    """
    tokens = check_tokens(model, tokens)
    neurons = check_neurons(model, neurons)
    w = as_weights(model)
    ln2 = dec.layer_norm(layer0_resid_mid(model, tokens), w.ln2_w, w.ln2_b, w.cfg.eps)
    return ln2 @ w.W_in[:, neurons] + w.b_in[neurons]


def _fused_attention_applies(model: TransformerBridge) -> bool:
    """Whether layer 0 is plain GPT-2 attention with no hooks attached (see layer0_resid_mid)."""
    cfg = model.cfg
    plain = (
        getattr(cfg, "architecture", None) == "GPT2LMHeadModel"
        and cfg.positional_embedding_type == "standard"
        and cfg.attention_dir == "causal"
        and cfg.attn_scores_soft_cap <= 0
        and not (cfg.use_split_qkv_input or cfg.use_attn_in or getattr(cfg, "use_logn_attn", False))
        and cfg.n_key_value_heads is None
        and cfg.attn_types is None
    )
    hooked = any(
        point.fwd_hooks for name, point in model.hook_dict.items()
        if name.startswith(("hook_", "blocks.0.attn.", "blocks.0.ln1.", "blocks.0.hook_"))
    )
    return plain and not hooked


@torch.no_grad()
def layer0_resid_mid(
    model: TransformerBridge, tokens: Int[Tensor, "batch pos"]
) -> Float[Tensor, "batch pos d_model"]:
    """The residual stream after layer 0's attention (hook ``blocks.0.hook_resid_mid``).

    For GPT-2-architecture models this uses the model's own embeddings, ``ln1`` and attention
    weights with PyTorch's fused causal attention (``scaled_dot_product_attention``), which never
    materialises the ``[batch, head, pos, pos]`` pattern TransformerLens builds for its hooks; it
    is tested equal to the hooked forward pass. For other architectures, or when hooks are
    attached to layer 0, it runs the model's forward pass and stops it at that hook.
    """
    if not _fused_attention_applies(model):
        return _resid_mid_through_hooks(model, tokens)
    w = as_weights(model)
    resid_pre = w.W_E[tokens] + w.W_pos[: tokens.shape[-1]]
    x = dec.ln1_apply(w, resid_pre)
    w_qkv = torch.stack([w.W_Q, w.W_K, w.W_V])  # [3, head, d_model, d_head], one GEMM
    b_qkv = torch.stack([w.b_Q, w.b_K, w.b_V])  # [3, head, d_head]
    q, k, v = torch.einsum("bpd,shde->sbhpe", x, w_qkv) + b_qkv[:, None, :, None]
    z = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0 / w.cfg.attn_scale)
    return resid_pre + torch.einsum("bhpe,hef->bpf", z, w.W_O) + w.b_O


def _resid_mid_through_hooks(
    model: TransformerBridge, tokens: Int[Tensor, "batch pos"]
) -> Float[Tensor, "batch pos d_model"]:
    return run_until(model, tokens, "blocks.0.hook_resid_mid")["blocks.0.hook_resid_mid"]
