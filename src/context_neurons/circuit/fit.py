"""How well the contextual circuit stands for the heads (chapter 4, sections 4.2, 4.3 and 4.5):
each approximation of :mod:`.build` on its own (how far the calibration text's ``D_h(n)`` spread
around ``Dhat_h``, :func:`denominator_table`; how far each head's kernel is from the shared one,
:func:`kernel_spread`, and how many tokens a kernel row averages over, :func:`effective_tokens`),
and the whole circuit against the model: :func:`circuit_error` compares the approximation with the
true combined output of the six heads, ``sum_h z_h W_O^h`` (hook ``blocks.0.attn.hook_z``), and
:func:`variant_fits` does so with each approximation removed in turn.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor

from context_neurons import decomposition as dec
from context_neurons.checks import check_heads, check_tokens
from context_neurons.circuit.build import Calibration, ContextualCircuit
from context_neurons.hooks import run_until
from context_neurons.models.weights import TransformerBridge, as_weights


@torch.no_grad()
def true_head_output(
    model: TransformerBridge, tokens: Int[Tensor, "*batch pos"], heads
) -> Float[Tensor, "batch pos d_model"]:
    """The true combined output ``sum_h z_h W_O^h`` of ``heads`` (hook ``blocks.0.attn.hook_z``)."""
    tokens = check_tokens(model, tokens)
    heads = check_heads(model, heads)
    z = run_until(model, tokens, "blocks.0.attn.hook_z")["blocks.0.attn.hook_z"][:, :, heads]
    return torch.einsum("bphe,hed->bpd", z, as_weights(model).W_O[heads])  # z: [batch pos head e]


@dataclass
class CircuitFit:
    """True and approximate combined output of the contextual heads along one batch of texts.

    All error measures are per position, ``[batch, pos]``.

    Attributes:
        cosine: cosine similarity of true and approximate outputs.
        relative_error: ``|true - approx| / |true|``.
        bag_cosine: cosine similarity of the text-dependent parts, ``true - positional part``
            against the bag ``sum_i K[n,i] e(t_i)``: the positional part is the same for every
            text, so this isolates what the bag must explain.
        bag_relative_error: ``|(true - positional) - bag| / |true - positional|``.
    """

    true: Float[Tensor, "batch pos d_model"]
    approx: Float[Tensor, "batch pos d_model"]
    positional: Float[Tensor, "pos d_model"]
    cosine: Float[Tensor, "batch pos"]
    relative_error: Float[Tensor, "batch pos"]
    bag_cosine: Float[Tensor, "batch pos"]
    bag_relative_error: Float[Tensor, "batch pos"]


@torch.no_grad()
def circuit_error(
    circuit: ContextualCircuit,
    model: TransformerBridge,
    tokens: Int[Tensor, "*batch pos"],
    denominators: str = "median",
    true: Float[Tensor, "batch pos d_model"] | None = None,
    kernel: str = "shared",
) -> CircuitFit:
    """Compare the approximation with the true combined output of the contextual heads.

    Args:
        circuit: the circuit.
        model: the model.
        tokens: a batch of texts (``<|endoftext|>`` first).
        denominators: ``"median"`` (``Dhat_h``) or ``"per_position"`` (``D_h(n)`` of the
            calibration text).
        true: the true output, when already computed by :func:`true_head_output`.
        kernel: ``"shared"`` (the median kernel) or ``"per_head"`` (each head's own).
    """
    tokens = check_tokens(model, tokens)
    if true is None:
        true = true_head_output(model, tokens, circuit.heads)
    approx = circuit.approximate_output(tokens, denominators, kernel)
    positional = circuit.positional_part[: tokens.shape[1]]
    cos = torch.nn.functional.cosine_similarity
    true_ctx, bag = true - positional, approx - positional
    return CircuitFit(
        true=true,
        approx=approx,
        positional=positional,
        cosine=cos(true, approx, dim=-1),
        relative_error=(true - approx).norm(dim=-1) / true.norm(dim=-1),
        bag_cosine=cos(true_ctx, bag, dim=-1),
        bag_relative_error=(true_ctx - bag).norm(dim=-1) / true_ctx.norm(dim=-1),
    )


#: The approximations of chapter 4's section 4.5, each a variant of :func:`circuit_error`'s
#: options: the circuit as the paper defines it, then each approximation removed in turn.
FIT_VARIANTS: dict[str, dict[str, str]] = {
    "the circuit (Dhat_h, shared kernel)": dict(denominators="median", kernel="shared"),
    "per-position D_h(n), shared kernel": dict(denominators="per_position", kernel="shared"),
    "Dhat_h, each head's own kernel": dict(denominators="median", kernel="per_head"),
    "per-position D_h(n), own kernels": dict(denominators="per_position", kernel="per_head"),
}


@torch.no_grad()
def variant_fits(
    circuit: ContextualCircuit,
    model: TransformerBridge,
    tokens: Int[Tensor, "*batch pos"],
    true: Float[Tensor, "batch pos d_model"] | None = None,
) -> dict[str, CircuitFit]:
    """:func:`circuit_error` of each of :data:`FIT_VARIANTS` on the same texts (``true``: their
    :func:`true_head_output`, when already computed)."""
    return {
        name: circuit_error(circuit, model, tokens, true=true, **options)
        for name, options in FIT_VARIANTS.items()
    }


def fit_table(fits: dict[str, CircuitFit]) -> pd.DataFrame:
    """One row per fit (:func:`variant_fits`): the median cosine over positions ``n >= 1``, the
    median relative error before and from position 100, and the bag's median cosine from 100."""
    rows = {}
    for name, fit in fits.items():
        rows[name] = {
            "cosine": float(fit.cosine[:, 1:].median()),
            "rel. error, n < 100": float(fit.relative_error[:, 1:100].median()),
            "rel. error, n >= 100": float(fit.relative_error[:, 100:].median()),
            "bag cosine, n >= 100": float(fit.bag_cosine[:, 100:].median()),
        }
    return pd.DataFrame(rows).T


def denominator_table(calib: Calibration, heads: list[int]) -> pd.DataFrame:
    """The calibrated denominators (chapter 4, section 4.2): one row per contextual head of
    ``heads`` (index ``head``, the rows of ``calib``) with ``Dhat_h``, the ``spread of log
    D_h(n), n >= 100`` (the standard deviation of ``log D_h(n)`` along the calibration text from
    ``calib.n_min`` on) and ``D_h(10) / Dhat_h``, how large the denominator is near the text's
    start."""
    spread = calib.log_denominators[:, calib.n_min:].std(-1)
    return pd.DataFrame(
        {
            "Dhat_h": calib.log_dhat.exp().tolist(),
            "spread of log D_h(n), n >= 100": spread.tolist(),
            "D_h(10) / Dhat_h": (calib.log_denominators[:, 10] - calib.log_dhat).exp().tolist(),
        },
        index=pd.Index(heads, name="head"),
    )


def kernel_spread(circuit: ContextualCircuit, n) -> dict[str, float]:
    """How far each head's kernel at destination ``n`` is from the median kernel (TV distance)."""
    n = int(n)
    rows = circuit.head_kernels[:, n, : n + 1]
    tv = dec.tv_distance(rows, circuit.kernel[n, : n + 1][None])
    return {f"head {h}": float(v) for h, v in zip(circuit.heads, tv)}


def effective_tokens(kernel_row: Float[Tensor, " key_pos"]) -> float:
    """``n_eff = 1 / sum_i K[n,i]^2``: how many tokens a kernel row averages over."""
    return float(1.0 / (kernel_row**2).sum())
