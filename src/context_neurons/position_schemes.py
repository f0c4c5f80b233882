"""Positional schemes. This module carries the decomposition of layer-0 attention over to rotary
(RoPE) and ALiBi attention (chapter 9, section 4; ``book/notation.md``, section 2).

With learned absolute positions (GPT-2) the position is added to the residual stream, and
chapter 1 splits a key into a token and a position part through LayerNorm. Rotary and ALiBi models
add nothing to the residual stream: at layer 0 the (unrotated) query and key of a token depend on
the token only, ``q(t)`` and ``k(t)``, and the position enters the score itself.

* **ALiBi** (Press, Smith and Lewis, 2022): ``s(n, i) = q(t_n) . k(t_i) / sqrt(d_head) - m_h (n - i)``.
  The positional pattern is exactly ``pos_n(i) ~ exp(-m_h (n - i))``, a geometric kernel of width
  ``n_eff = (1 + r) / (1 - r)``, ``r = exp(-m_h)``, for a long context, and the content weight is
  exactly ``c(t) = exp(q . k(t) / sqrt(d_head))``: ``A = pos c / D`` holds with no approximation.
* **RoPE** (Su et al., 2021): ``s(n, i) = (R_n q) . (R_i k) / sqrt(d_head) = q . R_{i-n} k /
  sqrt(d_head)``, where ``R_j`` rotates each rotated pair ``p`` of dimensions by the angle
  ``j omega_p``. Chapter 1's recipe (mean key over a token distribution, content term = the key
  placed at the destination) gives, with ``kbar = E_t k(t)``,

      positional score  q . (R_{i-n} - I) kbar / sqrt(d),     content score  q . k(t_i) / sqrt(d),

  and the factorisation's error is ``q . (R_{i-n} - I)(k(t_i) - kbar) / sqrt(d)``: zero at
  ``i = n``, zero on dimensions that are not rotated, and on a rotated pair at most
  ``|q_p| |k_p(t_i) - kbar_p| 2 |sin(omega_p (n - i) / 2)| / sqrt(d)`` (:func:`rotary_error_bound`;
  :func:`check_rotary_bound` checks it at every pair of positions).
  Content in slowly rotating pairs (``omega_p (n - i)`` small over the distances the kernel
  reaches) factorises almost exactly, as in a learned-position contextual head; content in fast
  pairs does not.

:func:`factorise_attention` takes a TransformerLens 4 ``TransformerBridge``. It reads the unrotated
queries and keys from the hooks ``hook_q`` and ``hook_k`` and rebuilds the exact scores itself:
with the model's own rotary tables (the ``cos``/``sin`` buffers of TransformerLens's native
model, or the bridge's ``rotary_emb`` component for Hugging Face models) or with the ALiBi slopes.
It does not read ``hook_attn_scores``: TransformerLens 4 fires that hook with the post-softmax
pattern on bridges that delegate attention to the wrapped module (the native models among them).
Every rebuilt pattern is checked against the model's own ``hook_pattern``, and a model whose
scores are not rebuilt (another rotary variant, a soft cap, other slopes) is refused. Tested on
:func:`rotary_toy_model` (TransformerLens's native rotary model), :func:`alibi_toy_model` (Hugging
Face's Bloom through TransformerLens's Bloom bridge) and small random GPT-NeoX (Pythia) and Llama
(grouped-query) models booted with ``TransformerBridge.boot_transformers``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge
from transformer_lens.model_bridge.generalized_components.alibi_utils import build_alibi_slopes
from transformer_lens.model_bridge.sources.native import NativeAttention
from transformers import BloomConfig, BloomForCausalLM

from context_neurons.checks import InputError, as_token_batch
from context_neurons.decomposition import causal_mask, masked_softmax, tv_distance
from context_neurons.hooks import run_until
from context_neurons.models.loading import placeholder_tokenizer, quiet_bridge
from context_neurons.printing import Format, below, frame, significant
from context_neurons.taxonomy import assign_group, classify_kernel, kernel_width

#: Position schemes :func:`factorise_attention` handles (``cfg.positional_embedding_type``).
SCHEMES = ("rotary", "alibi")
_HOOKS = ("blocks.0.attn.hook_q", "blocks.0.attn.hook_k")
_PATTERN = "blocks.0.attn.hook_pattern"


@dataclass
class AttentionFactorisation:
    """Exact, positional and content scores of layer-0 attention (already divided by the scale).

    Attributes:
        scheme: ``"rotary"`` or ``"alibi"``.
        tokens: the texts.
        exact_scores: the model's scores, ``(R_n q) . (R_i k) / sqrt(d)`` with the model's own
            rotation (RoPE) or ``q . k / sqrt(d) - m_h (n - i)`` (ALiBi), 0 above the diagonal;
            their softmax is checked against the model's ``hook_pattern``. (Bloom adds
            ``m_h i``, which differs by a constant per destination that the softmax removes.)
        positional_scores: ``q . (R_{i-n} - I) kbar`` (RoPE) or ``-m_h (n - i)`` (ALiBi).
        content_scores: ``q(t_n) . k(t_i)``, the key placed at the destination.
        queries, keys: the unrotated layer-0 queries and keys (hooks ``hook_q``, ``hook_k``).
        mean_key: ``kbar``, the key averaged over the reference tokens.
        pattern_gap: the largest difference between :meth:`exact_pattern` and the model's own
            ``hook_pattern`` (:func:`factorise_attention` refuses more than 1e-3 in float32).
    """

    scheme: str
    tokens: Int[Tensor, "batch pos"]
    exact_scores: Float[Tensor, "batch head_index query_pos key_pos"]
    positional_scores: Float[Tensor, "batch head_index query_pos key_pos"]
    content_scores: Float[Tensor, "batch head_index query_pos key_pos"]
    queries: Float[Tensor, "batch pos head_index d_head"]
    keys: Float[Tensor, "batch pos head_index d_head"]
    mean_key: Float[Tensor, "head_index d_head"]
    pattern_gap: float = float("nan")

    @property
    def mask(self) -> Bool[Tensor, "query_pos key_pos"]:
        return causal_mask(self.tokens.shape[1], self.tokens.device)

    def exact_pattern(self) -> Float[Tensor, "batch head_index query_pos key_pos"]:
        return masked_softmax(self.exact_scores, self.mask)

    def positional_pattern(self) -> Float[Tensor, "batch head_index query_pos key_pos"]:
        """``pos_n(i)``: the attention if every key were the mean key."""
        return masked_softmax(self.positional_scores, self.mask)

    def reconstructed_pattern(self) -> Float[Tensor, "batch head_index query_pos key_pos"]:
        """``pos_n(i) c_n(t_i) / D_n``."""
        return masked_softmax(self.positional_scores + self.content_scores, self.mask)

    def tv(self) -> Float[Tensor, "batch head_index query_pos"]:
        """Total variation between the exact and the reconstructed pattern at each destination."""
        return tv_distance(self.exact_pattern(), self.reconstructed_pattern())

    def score_error(self) -> Float[Tensor, "batch head_index query_pos key_pos"]:
        """Exact minus factorised score (zero above the diagonal)."""
        error = self.exact_scores - self.positional_scores - self.content_scores
        return error.masked_fill(~self.mask, 0.0)


class _Rotation(NamedTuple):
    """A model's rotary embedding: the pairs of dimensions it rotates, and each pair's cosine and
    sine at each position."""

    pairs: Int[Tensor, "n_pairs 2"]
    cos: Float[Tensor, "pos n_pairs"]
    sin: Float[Tensor, "pos n_pairs"]

    def apply(
        self, x: Float[Tensor, "*batch pos head d_head"]
    ) -> Float[Tensor, "*batch pos head d_head"]:
        """``R_j x`` at each position ``j``, in the arithmetic of the model's
        ``x cos + rot(x) sin``."""
        a, b = self.pairs[:, 0], self.pairs[:, 1]
        cos, sin = (t.to(x.dtype)[:, None, :] for t in (self.cos, self.sin))  # [pos, 1, pair]
        out = x.clone()
        out[..., a] = x[..., a] * cos - x[..., b] * sin
        out[..., b] = x[..., b] * cos + x[..., a] * sin
        return out


def _rotation(model: TransformerBridge, n: int) -> _Rotation:
    """Layer 0's rotary tables for positions ``0..n-1``, read from the model.

    TransformerLens's native model keeps ``cos``/``sin`` buffers with each angle twice and rotates
    adjacent pairs ``(2p, 2p + 1)``. A Hugging Face model's bridge has a ``rotary_emb`` component
    returning tables ``[cos(j omega), cos(j omega)]`` for ``rotate_half`` (pairs ``(p, p + r/2)``,
    GPT-NeoX layout) unless its config says adjacent pairs (``rotary_adjacent_pairs``, tables as
    Hugging Face gives them; ``rotary_interleaved_cos_sin``, each angle twice): those two layouts
    are untested here, and like any other the pattern check of :func:`factorise_attention` guards
    them.
    """
    if model.cfg.positional_embedding_type != "rotary":
        raise InputError("The model has no rotary embeddings.")
    attn = model.blocks[0].attn.original_component
    native = getattr(attn, "rotary", None) if isinstance(attn, NativeAttention) else None
    if native is not None:
        cos, sin, interleaved, adjacent = native.cos_cached[:n], native.sin_cached[:n], True, True
    elif hasattr(model, "rotary_emb"):
        dtype = next(model.parameters()).dtype
        device = model.cfg.device
        positions = torch.arange(n, device=device)[None]
        cos, sin = model.rotary_emb(torch.zeros(1, n, 1, dtype=dtype, device=device), positions)
        cos, sin = cos.reshape(n, -1), sin.reshape(n, -1)
        interleaved = bool(getattr(model.cfg, "rotary_interleaved_cos_sin", False))
        adjacent = interleaved or bool(getattr(model.cfg, "rotary_adjacent_pairs", False))
    else:
        raise InputError(
            "No rotary tables found: factorise_attention reads them from TransformerLens's native "
            "models and from the rotary_emb component of Hugging Face models' bridges."
        )
    r = cos.shape[-1]
    p = torch.arange(r // 2, device=cos.device)
    pairs = torch.stack([2 * p, 2 * p + 1] if adjacent else [p, p + r // 2], dim=1)
    columns = 2 * p if interleaved else p
    return _Rotation(pairs, cos[:, columns], sin[:, columns])


def _attn_scale(model: TransformerBridge) -> float:
    """What layer 0 divides ``q . k`` by: the native model's ``scale``, the Hugging Face module's
    ``1 / scaling`` (``1 / inv_norm_factor`` for Bloom), else ``sqrt(d_head)``."""
    attn = model.blocks[0].attn.original_component
    if isinstance(attn, NativeAttention):
        return float(attn.scale)
    for name in ("scaling", "inv_norm_factor"):
        value = getattr(attn, name, None)
        if isinstance(value, (int, float)) and value > 0:
            return 1.0 / float(value)
    return math.sqrt(model.cfg.d_head)


def _check_scheme(model: TransformerBridge) -> str:
    cfg = model.cfg
    scheme = cfg.positional_embedding_type
    if scheme not in SCHEMES:
        raise InputError(
            f"This model's positions are {scheme!r}; factorise_attention handles {SCHEMES}. For "
            "learned absolute positions use context_neurons.decomposition.decompose_attention."
        )
    attn = model.blocks[0].attn.original_component
    if (
        getattr(cfg, "attn_scores_soft_cap", -1.0) > 0
        or getattr(attn, "attn_logit_softcapping", None) is not None
        or getattr(cfg, "use_attention_sinks", False)
        or getattr(cfg, "use_logn_attn", False)
    ):
        raise InputError("Soft-capped, sink or log-n scaled attention scores are not factorised.")
    return scheme


def _expand_kv(model: TransformerBridge, x: Tensor) -> Tensor:
    """Grouped-query keys repeated to one per query head."""
    groups = model.cfg.n_heads // x.shape[2]
    return x.repeat_interleave(groups, dim=2) if groups > 1 else x


def _check_pattern(scheme: str, exact: Tensor, pattern: Tensor, mask: Tensor) -> float:
    """The largest difference between the softmax of ``exact`` and the model's own pattern
    (``hook_pattern``); scores that do not give that pattern are refused."""
    tolerance = 1e-3 if exact.dtype in (torch.float32, torch.float64) else 3e-2
    gap = float((masked_softmax(exact.float(), mask) - pattern.float()).abs().max())
    if not gap <= tolerance:
        raise InputError(
            f"The {scheme} scores rebuilt from hook_q, hook_k and the model's "
            f"{'rotary tables' if scheme == 'rotary' else 'ALiBi slopes'} do not give the model's "
            f"own hook_pattern (largest difference {gap:.2g}): this variant of {scheme} attention "
            "(other tables or slopes, another scale, per-layer rotations) is not factorised."
        )
    return gap


@torch.no_grad()
def factorise_attention(
    model: TransformerBridge,
    tokens: Int[Tensor, "*batch pos"],
    reference_tokens: Int[Tensor, "*ref_batch ref_pos"] | None = None,
) -> AttentionFactorisation:
    """Layer-0 attention of a rotary or ALiBi model split into positional and content scores.

    Args:
        model: a TransformerLens 4 ``TransformerBridge`` with ``positional_embedding_type``
            ``"rotary"`` or ``"alibi"`` (nothing positional in its residual stream), from
            ``boot_native`` or ``boot_transformers`` (module docstring: what is tested).
        tokens: texts (no padding: position ``j`` is the ``j``-th token).
        reference_tokens: texts whose keys define the mean key ``kbar`` (default ``tokens``).

    Returns:
        An :class:`AttentionFactorisation` (module docstring).

    Raises:
        InputError: for other position schemes, and when the rebuilt scores do not reproduce the
            model's own attention pattern.
    """
    scheme = _check_scheme(model)
    tokens = as_token_batch(tokens).to(model.cfg.device)
    store = run_until(model, tokens, _PATTERN, names=_HOOKS)
    q, k = store[_HOOKS[0]], _expand_kv(model, store[_HOOKS[1]])
    n = tokens.shape[1]
    mask = causal_mask(n, tokens.device)
    if reference_tokens is None:
        reference_keys = k
    else:
        reference = as_token_batch(reference_tokens).to(model.cfg.device)
        reference_keys = _expand_kv(model, run_until(model, reference, _HOOKS[1])[_HOOKS[1]])
    mean_key = reference_keys.mean((0, 1))  # [head, d_head]
    scale = _attn_scale(model)
    content = torch.einsum("bnhe,bihe->bhni", q, k) / scale
    if scheme == "rotary":
        rotation = _rotation(model, n)  # the model's own tables
        rq = rotation.apply(q)  # R_n q
        exact = torch.einsum("bnhe,bihe->bhni", rq, rotation.apply(k)) / scale
        rotated_mean = rotation.apply(mean_key.expand(n, -1, -1))  # R_i kbar
        to_mean = torch.einsum("bnhe,ihe->bhni", rq, rotated_mean)
        at_zero = torch.einsum("bnhe,he->bhn", q, mean_key)[..., None]  # q . kbar (i = n)
        positional = (to_mean - at_zero) / scale
    else:
        positional = alibi_bias(model, n).to(content.dtype).expand(len(tokens), -1, -1, -1)
        exact = content + positional
    exact = exact.masked_fill(~mask, 0.0)
    gap = _check_pattern(scheme, exact, store[_PATTERN], mask)
    return AttentionFactorisation(scheme, tokens, exact, positional, content, q, k, mean_key, gap)


def alibi_slopes(model: TransformerBridge) -> Float[Tensor, " head_index"]:
    """``m_h``, the slope of each head's ALiBi bias: TransformerLens's ``build_alibi_slopes`` (its
    Bloom and Falcon bridges; Hugging Face's slopes), ``2^{-8h/H}``, ``h = 1..H``, for a power of
    two heads ``H``."""
    return build_alibi_slopes(model.cfg.n_heads, torch.device(model.cfg.device))


def alibi_bias(
    model: TransformerBridge, n: int
) -> Float[Tensor, "head_index query_pos key_pos"]:
    """``-m_h (n - i)`` for ``i <= n`` (zero above the diagonal, which the causal mask removes)."""
    positions = torch.arange(n, device=model.cfg.device)
    distance = (positions[:, None] - positions[None, :]).clamp(min=0).float()
    return -alibi_slopes(model)[:, None, None] * distance


def rotary_pairs(model: TransformerBridge) -> Int[Tensor, "n_pairs 2"]:
    """The dimensions each rotation acts on: ``(2p, 2p + 1)`` (adjacent pairs: TransformerLens's
    native models, Hugging Face models flagged ``rotary_adjacent_pairs``) or ``(p, p + r/2)``
    (GPT-NeoX layout, ``rotate_half``: Pythia, Llama), ``r`` the rotary dimension."""
    return _rotation(model, 1).pairs.cpu()


def rotary_frequencies(model: TransformerBridge) -> Float[Tensor, " n_pairs"]:
    """``omega_p``, each pair's rotation angle per position, read from the model's own sine and
    cosine tables (layer 0, all ``n_ctx`` positions).

    Raises:
        InputError: when the tables are not rotations by ``j omega_p`` (a scaled variant).
    """
    rotation = _rotation(model, model.cfg.n_ctx)
    sin, cos = rotation.sin.double(), rotation.cos.double()
    omega = torch.atan2(sin[1], cos[1])
    positions = torch.arange(len(sin), dtype=torch.float64, device=sin.device)[:, None]
    # float32 tables: angles j * omega are rounded by about j * 1e-7
    tolerance = 1e-4 + 2e-7 * len(sin)
    if not torch.allclose(torch.cos(positions * omega), cos, atol=tolerance) or not torch.allclose(
        sin**2 + cos**2, torch.ones_like(cos), atol=tolerance
    ):
        raise InputError("The rotary tables are not plain rotations by j * omega (scaled RoPE?).")
    return omega.float().cpu()


@torch.no_grad()
def rotary_error_bound(
    model: TransformerBridge, factorisation: AttentionFactorisation
) -> Float[Tensor, "batch head_index query_pos key_pos"]:
    """``sum_p |q_p(n)| |k_p(t_i) - kbar_p| 2 |sin(omega_p (n - i) / 2)| / sqrt(d)``: a bound on
    the factorisation's score error at every pair of positions (module docstring)."""
    if factorisation.scheme != "rotary":
        raise InputError("The bound is for rotary attention; ALiBi's factorisation is exact.")
    pairs = rotary_pairs(model).to(factorisation.queries.device)
    # in the factorisation's precision (float64 for a float64 model)
    omega = rotary_frequencies(model).to(factorisation.queries.device, factorisation.queries.dtype)
    q_norm = factorisation.queries[..., pairs].norm(dim=-1)  # [batch, pos, head, pair]
    deviation = (factorisation.keys - factorisation.mean_key)[..., pairs].norm(dim=-1)
    n = factorisation.tokens.shape[1]
    positions = torch.arange(n, device=omega.device)
    distance = (positions[:, None] - positions[None, :]).clamp(min=0).to(omega.dtype)
    chord = 2 * torch.sin(distance[..., None] * omega / 2).abs()  # [pos, pos, pair]
    bound = torch.einsum("bnhp,bihp,nip->bhni", q_norm, deviation, chord)
    return bound.masked_fill(~factorisation.mask, 0.0) / _attn_scale(model)


#: Below this the excess of the score error over its bound is float rounding.
BOUND_TOLERANCE = 1e-3


@dataclass(frozen=True)
class BoundCheck:
    """The factorisation's score error against :func:`rotary_error_bound`
    (:func:`check_rotary_bound`).

    Attributes:
        excess: the largest ``|error| - bound`` over all heads and pairs of positions.
        tolerance: below it the excess is float rounding (:data:`BOUND_TOLERANCE`).
    """

    excess: float
    tolerance: float = BOUND_TOLERANCE

    @property
    def holds(self) -> bool:
        """Whether the bound holds everywhere, up to float rounding."""
        return self.excess < self.tolerance

    def findings(self) -> list[str]:
        """The largest excess, and whether it is float rounding."""
        verdict = "at most float rounding" if self.holds else "the bound fails"
        return [
            "largest |error| minus bound over all heads and pairs of positions: "
            f"{below(self.excess, self.tolerance)} ({verdict})"
        ]


@torch.no_grad()
def check_rotary_bound(
    model: TransformerBridge, factorisation: AttentionFactorisation
) -> BoundCheck:
    """The factorisation's score error against :func:`rotary_error_bound` at every pair of
    positions of every head (:class:`BoundCheck`)."""
    bound = rotary_error_bound(model, factorisation)
    return BoundCheck(float((factorisation.score_error().abs() - bound).max()))


def by_distance(
    values: Float[Tensor, "batch head_index query_pos key_pos"],
) -> Float[Tensor, "head_index distance"]:
    """The mean of ``|values|`` over all pairs ``(n, i)`` at each distance ``n - i``, per head."""
    n = values.shape[-1]
    positions = torch.arange(n, device=values.device)
    distance = positions[:, None] - positions[None, :]
    lower = distance >= 0
    index = distance[lower]  # [n_pairs]
    summed = values.abs()[..., lower].sum(0)  # [head, n_pairs]
    totals = torch.zeros(values.shape[1], n, device=values.device).index_add_(1, index, summed)
    counts = torch.bincount(index, minlength=n) * values.shape[0]
    return totals / counts


def head_table(factorisation: AttentionFactorisation, n: int | None = None) -> pd.DataFrame:
    """Each head classified by chapter 2's rules on the factorisation, with its accuracy.

    Columns: ``n_eff`` of the positional pattern at destination ``n`` (default the last position),
    its ``kernel`` shape, the ``content sd`` (standard deviation of the content scores over the
    sources ``i < n``) and ``self z`` (the destination's own content score against them), medians
    over the texts, the ``group`` the taxonomy's kernel and content rules give these (its
    previous-token rule reads the real pattern, not a factorisation, and is left out here), and
    the ``median TV`` of the
    factorisation over the texts and the destinations from ``n / 4`` on.
    """
    length = factorisation.tokens.shape[1]
    n = length - 1 if n is None else int(n)
    if not 1 <= n < length:
        raise InputError(f"n must be in 1..{length - 1}, got {n}.")
    width = kernel_width(factorisation.positional_pattern()[:, :, n, : n + 1]).median(0).values
    content = factorisation.content_scores[:, :, n, : n + 1].double()
    others = content[..., :-1]
    sd = others.std(-1)
    self_z = ((content[..., -1] - others.mean(-1)) / sd).median(0).values
    sd = sd.median(0).values
    tv = factorisation.tv()[:, :, length // 4 :]
    rows = []
    for h in range(factorisation.exact_scores.shape[1]):
        shape = classify_kernel(float(width[h]), n + 1)
        rows.append(
            {
                "head": h,
                "n_eff": float(width[h]),
                "kernel": shape,
                "content sd": float(sd[h]),
                "self z": float(self_z[h]),
                "group": assign_group(shape, float(sd[h]), float(self_z[h])),
                "median TV": float(tv[:, h].median()),
            }
        )
    return pd.DataFrame(rows).set_index("head")


def _set_by_hand(value: float) -> str:
    return significant(value, 4)  # a constant (a pair, a frequency, a slope): never near zero


#: Printed precision of :func:`head_table`'s columns, and of the toy models' columns joined to it:
#: fixed decimals for what is computed, since a TV, a z-score or a spread can be near zero (an
#: exact factorisation's TV is float rounding, 1e-8 in float32, 1e-17 in float64); significant
#: digits only for constants set by hand.
HEAD_TABLE_FORMATS: dict[str, Format] = {
    "n_eff": 2, "exponential width": 2, "content sd": 3, "self z": 3, "median TV": 4,
    "carrier pair": _set_by_hand, "omega": _set_by_hand, "slope m": _set_by_hand,
}


def format_head_table(table: pd.DataFrame, formats: dict[str, Format] | None = None) -> str:
    """:func:`head_table` (with any columns joined to it) as text that every machine prints alike.

    Columns use :data:`HEAD_TABLE_FORMATS`; ``formats`` adds or overrides columns (a number of
    decimals, or a function of the value); other float columns get 3 decimals. A chapter shows the
    table with ``printing.show_table(table, caption, model=..., formats=HEAD_TABLE_FORMATS)``,
    whose text form is this one and whose HTML uses the same formats.
    """
    return frame(table, 3, {**HEAD_TABLE_FORMATS, **(formats or {})})


# ----------------------------------------------------------------------------------------------
# Small models set up by hand
# ----------------------------------------------------------------------------------------------


def _unit_directions(n: int, d: int, gen: torch.Generator) -> Tensor:
    return torch.nn.functional.normalize(torch.randn(n, d, generator=gen), dim=-1)


@torch.no_grad()
def rotary_toy_model(
    seed: int = 0,
    n_ctx: int = 256,
    d_vocab: int = 512,
    amplitude: float = 6.0,
    content_sd: float = 1.0,
) -> tuple[TransformerBridge, pd.DataFrame]:
    """A one-layer rotary model whose heads each use one rotation frequency (set by hand).

    TransformerLens's native model (``TransformerBridge.boot_native``: attention only, LayerNorm,
    d_model 64, 8 heads of 16 dimensions; on the CPU), which rotates adjacent pairs of
    dimensions. Twelve of the sixteen dimensions of each head rotate (six pairs ``(2p, 2p + 1)``,
    ``omega_p = 10000^{-p/6}``, from 1 down to about 5e-4 per position); four do not (12 to 15).
    Queries are constant (``b_Q``: the destination token does not matter). Head ``p < 6`` puts a
    constant key ``b_K`` (the carrier of its positional pattern, ``amplitude * cos(omega_p d)`` in
    score units) and the token content of its keys (standard deviation ``content_sd`` in score
    units) in pair ``p``. Head 6 has its carrier in pair 2 but its content in an unrotated
    dimension; head 7 has no rotated component at all (a uniform kernel). For both the
    factorisation is exact.

    Returns:
        The model and a table: each head's pair, ``omega``, and where its content lives.
    """
    cfg = dict(
        n_layers=1, d_model=64, n_ctx=n_ctx, d_head=16, n_heads=8, d_vocab=d_vocab,
        attn_only=True, normalization_type="LN", positional_embedding_type="rotary",
        rotary_dim=12, seed=seed, default_prepend_bos=False,
    )
    with quiet_bridge():  # tiny: the CPU is fastest
        model = TransformerBridge.boot_native(cfg, tokenizer=placeholder_tokenizer(d_vocab),
                                              device="cpu", model_name="rotary-toy")
        model.enable_compatibility_mode(disable_warnings=True, no_processing=True)
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    model.W_E.copy_(torch.randn(d_vocab, 64, generator=gen))
    attn, half = model.blocks[0].attn, 6
    for param in (attn.W_Q, attn.b_Q, attn.W_K, attn.b_K):  # views: writes reach the model
        param.zero_()
    attn.W_V.copy_(0.3 * torch.randn(attn.W_V.shape, generator=gen))
    attn.W_O.copy_(0.3 * torch.randn(attn.W_O.shape, generator=gen))
    # Scores are q . k / 4 (d_head 16): a query of 4 and a carrier of `amplitude` give
    # amplitude * cos(omega d); a unit-variance LN output read along a unit direction, times
    # content_sd, gives content scores of standard deviation content_sd.
    read = _unit_directions(16, 64, gen).T  # [d_model, 16]: unit directions to read content
    pairs, omega = rotary_pairs(model).tolist(), rotary_frequencies(model)
    rows = []
    for h in range(8):
        carrier = h if h < half else (2 if h == 6 else None)
        # content: both dimensions of the head's own pair (read along directions h and h + 6),
        # or one unrotated dimension (12, 13)
        if h < half:
            content_dims, directions = pairs[h], [h, h + half]
        else:
            content_dims = directions = [12 + (h - half)]
        if carrier is not None:
            attn.b_Q[h, pairs[carrier][0]] = 4.0
            attn.b_K[h, pairs[carrier][0]] = amplitude
        if h >= half:
            attn.b_Q[h, content_dims[0]] = 4.0  # the query reads the unrotated content
        for dim, direction in zip(content_dims, directions):
            attn.W_K[h, :, dim] = content_sd * read[:, direction]
        rows.append(
            {
                "head": h,
                "carrier pair": carrier,
                "omega": float(omega[carrier]) if carrier is not None else 0.0,
                "content in": "rotated pair" if h < half else "unrotated dimension",
            }
        )
    return model, pd.DataFrame(rows).set_index("head")


@torch.no_grad()
def alibi_toy_model(
    seed: int = 0, n_ctx: int = 256, d_vocab: int = 512, content_sd: float = 1.0
) -> TransformerBridge:
    """A one-layer ALiBi model with random queries and keys (content scores of standard deviation
    about ``content_sd``); its eight heads have the slopes ``2^{-1}..2^{-8}``.

    Hugging Face's Bloom (d_model 64, 8 heads of 8 dimensions, one layer; on the CPU) through
    TransformerLens's Bloom bridge (``boot_transformers``): TransformerLens 4 builds no ALiBi model
    of its own. Bloom normalises the embeddings (``embed_ln``) before the block's LayerNorm; with
    unit gains and zero biases the second LayerNorm changes them only through its epsilon.
    Embeddings, ``W_Q`` and ``W_K`` are drawn from ``seed`` (``b_Q = b_K = 0``); the values and
    the MLP (Bloom has no attention-only form) keep Hugging Face's initialisation under ``seed``
    and play no part in layer-0 attention.
    """
    d_model, n_heads, d_head = 64, 8, 8
    with torch.random.fork_rng(devices=[]):  # Hugging Face initialises from the global generator
        torch.manual_seed(seed)
        hf_config = BloomConfig(vocab_size=d_vocab, hidden_size=d_model, n_layer=1,
                                n_head=n_heads, seq_length=n_ctx)
        hf_model = BloomForCausalLM(hf_config).float().eval()
    gen = torch.Generator().manual_seed(seed)
    hf_model.transformer.word_embeddings.weight.copy_(torch.randn(d_vocab, d_model, generator=gen))
    w_q = torch.randn(n_heads, d_model, d_head, generator=gen) / 8
    w_k = content_sd * torch.randn(n_heads, d_model, d_head, generator=gen) / 8
    # Bloom's fused projection: rows ordered (head, query/key/value, d_head). Written before the
    # bridge splits it, so the Hugging Face module and the bridge hold the same weights.
    qkv = hf_model.transformer.h[0].self_attention.query_key_value
    qkv.weight.view(n_heads, 3, d_head, d_model)[:, 0] = w_q.transpose(1, 2)
    qkv.weight.view(n_heads, 3, d_head, d_model)[:, 1] = w_k.transpose(1, 2)
    qkv.bias.view(n_heads, 3, d_head)[:, :2] = 0.0
    with quiet_bridge():
        model = TransformerBridge.boot_transformers(
            "alibi-toy", hf_model=hf_model, tokenizer=placeholder_tokenizer(d_vocab), device="cpu"
        )
        model.enable_compatibility_mode(disable_warnings=True, no_processing=True)
    model.eval()
    return model


def random_texts(
    model: TransformerBridge, n_texts: int, seed: int = 0, length: int | None = None
) -> Int[Tensor, "n_texts pos"]:
    """Texts of uniformly random tokens (the toy models are only fed token ids)."""
    length = model.cfg.n_ctx if length is None else length
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, model.cfg.d_vocab, (n_texts, length), generator=gen)
