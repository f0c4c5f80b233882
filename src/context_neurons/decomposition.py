"""Decomposition of layer-0 attention. This module implements chapter 1 (``book/notation.md`` §2).

The key of a token ``t`` at position ``i`` is ``k = LN1(W_E[t] + W_pos[i]) W_K + b_K``. LayerNorm
mixes token and position, so we split it exactly into a token part, a position part and a scale:
with ``e~, p~`` the mean-centred embeddings, ``gamma, beta`` LN1's affine map (ones and zeros when
TransformerLens folded them into the weights) and ``sigma(t, i) = sqrt(|e~_t + p~_i|^2/d + eps)``,

    k(t, i) = [K_E[t] + K_P[i]] / sigma(t, i) + K_b,
    K_E[t] = (gamma * e~_t) W_K,  K_P[i] = (gamma * p~_i) W_K,  K_b = beta W_K + b_K.

This makes exact scores for all query/key pairs a few small matrix products (no ``pos x pos x
d_model`` tensor). Gibson's decomposition then approximates the key of ``t_i`` seen from the
destination ``n`` by

    k(t_i, i) ~ E[n, t_i] + P[n, i],   E[n, t] = k(t, n)  (content term: the token placed at n),
    P[n, i] = M[i] - M[n],             M[i] = mean over a token distribution of k(t, i),

which is exact at ``i = n`` and accurate near ``n``, where the local heads put their mass. The
positional pattern ``pos_n(i) = softmax_{i<=n} q_n . P[n, i] / sqrt(d_head)`` is the attention if
every token were identical; the content weight is ``c_n(t) = exp(q_n . E[n, t] / sqrt(d_head))``;
and ``A_{n,i} = pos_n(i) c_n(t_i) / D_n`` with ``D_n = sum_{j<=n} pos_n(j) c_n(t_j)``.

Content weights are returned as logarithms (``log c``): they overflow float32 otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from context_neurons.checks import InputError, check_heads, check_position, check_sequence
from context_neurons.checks import token_id
from context_neurons.models.weights import Model, as_weights

#: The destination token the method fixes (a stop word), looked up in each model's tokenizer.
DEFAULT_DESTINATION = " the"


# ----------------------------------------------------------------------------------------------
# LayerNorm-decoupled parts
# ----------------------------------------------------------------------------------------------


def centred(x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
    return x - x.mean(-1, keepdim=True)


def layer_norm(
    x: Float[Tensor, "... d_model"],
    gamma: Float[Tensor, " d_model"],
    beta: Float[Tensor, " d_model"],
    eps: float,
) -> Float[Tensor, "... d_model"]:
    """LayerNorm with affine map ``(gamma, beta)``, exactly as GPT-2 computes it."""
    x = centred(x)
    return gamma * x * torch.rsqrt((x**2).mean(-1, keepdim=True) + eps) + beta


def ln1_apply(model: Model, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
    """Layer 0's LN1 applied exactly to residual vectors, through the model's own affine map."""
    w = as_weights(model)
    return layer_norm(x, w.ln1_w, w.ln1_b, w.cfg.eps)


@dataclass
class LNParts:
    """Token and position parts of one of the layer-0 projections (Q, K or V), through LN1."""

    token_part: Float[Tensor, "n_tokens head_index d_head"]
    position_part: Float[Tensor, "pos head_index d_head"]
    bias: Float[Tensor, "head_index d_head"]


@torch.no_grad()
def ln1_inverse_scale(
    model: Model, token_ids: Int[Tensor, " n_tokens"], positions: Int[Tensor, " pos"]
) -> Float[Tensor, "n_tokens pos"]:
    """``1 / sigma(t, i)``: LN1's exact scale for every (token, position) pair."""
    w = as_weights(model)
    e = centred(w.W_E[token_ids])
    p = centred(w.W_pos[positions])
    sq = (e**2).sum(-1)[:, None] + 2 * e @ p.T + (p**2).sum(-1)[None, :]
    return torch.rsqrt(sq / w.cfg.d_model + w.cfg.eps)


@torch.no_grad()
def ln1_parts(
    model: Model,
    which: str,
    token_ids: Int[Tensor, " n_tokens"],
    positions: Int[Tensor, " pos"],
    heads: list[int] | None = None,
) -> LNParts:
    """Split ``LN1(W_E[t] + W_pos[i]) W + b`` into token part, position part and bias.

    Args:
        model: a GPT-2-architecture model or its :class:`ModelWeights`.
        which: ``"Q"``, ``"K"`` or ``"V"``: the layer-0 projection ``W``.
        token_ids: the tokens whose parts are wanted.
        positions: the positions whose parts are wanted.
        heads: the heads to project onto (default all; fewer heads, less work).

    Returns:
        :class:`LNParts` with the ``head_index`` axis running over ``heads``.
    """
    w = as_weights(model)
    weight, bias = w.projection(which)  # [head, d_model, d_head], [head, d_head]
    if heads is not None:
        weight, bias = weight[heads], bias[heads]
    gamma, beta = w.ln1_w, w.ln1_b
    token_part = torch.einsum("td,hde->the", gamma * centred(w.W_E[token_ids]), weight)
    position_part = torch.einsum("pd,hde->phe", gamma * centred(w.W_pos[positions]), weight)
    return LNParts(token_part, position_part, torch.einsum("d,hde->he", beta, weight) + bias)


@torch.no_grad()
def project_exact(
    model: Model, which: str, tokens: Int[Tensor, " pos"]
) -> Float[Tensor, "pos head_index d_head"]:
    """Exact layer-0 queries, keys or values of a sequence (tokens at positions 0..len-1).

    Args:
        model: a GPT-2-architecture model or its :class:`ModelWeights`.
        which: ``"Q"``, ``"K"`` or ``"V"``.
        tokens: the sequence, BOS first.

    Returns:
        ``LN1(x_i) W + b`` for every position, equal to TransformerLens's ``hook_q/k/v``.
    """
    positions = torch.arange(len(tokens), device=tokens.device)
    unique, inverse = torch.unique(tokens, return_inverse=True)
    parts = ln1_parts(model, which, unique, positions)
    inv = ln1_inverse_scale(model, unique, positions)[inverse, positions]  # [pos]
    return (parts.token_part[inverse] + parts.position_part) * inv[:, None, None] + parts.bias


@torch.no_grad()
def mean_positional_keys(
    model: Model,
    reference_tokens: Int[Tensor, " n_ref"],
    n_positions: int | None = None,
    which: str = "K",
) -> Float[Tensor, "pos head_index d_head"]:
    """``M[i]``: the key (or value) at position ``i`` averaged over a reference token distribution.

    Args:
        model: a GPT-2-architecture model or its :class:`ModelWeights`.
        reference_tokens: token ids whose empirical distribution defines the average.
        n_positions: positions ``0..n_positions-1`` (default the whole context).
        which: ``"K"`` (keys, for ``P[n, i] = M[i] - M[n]``) or ``"V"`` (values).

    Returns:
        ``M``, with each token's exact LayerNorm scale at each position.
    """
    n_positions = n_positions or model.cfg.n_ctx
    positions = torch.arange(n_positions, device=model.cfg.device)
    reference_tokens = reference_tokens.to(model.cfg.device)
    unique, counts = torch.unique(reference_tokens, return_counts=True)
    weights = counts.float() / counts.sum()
    parts = ln1_parts(model, which, unique, positions)
    inv = ln1_inverse_scale(model, unique, positions)  # [n_unique, pos]
    token_avg = torch.einsum("tp,t,the->phe", inv, weights, parts.token_part)
    pos_avg = parts.position_part * (weights @ inv)[:, None, None]
    return token_avg + pos_avg + parts.bias


def default_reference_tokens(model: Model) -> Int[Tensor, " n_ref"]:
    """The token distribution of the mean keys ``M``: the calibration text's tokens, BOS left out
    (read once per model: :attr:`~context_neurons.models.weights.ModelWeights.reference_tokens`)."""
    return as_weights(model).reference_tokens


def default_mean_keys(
    model: Model, n_positions: int | None = None, which: str = "K"
) -> Float[Tensor, "pos head_index d_head"]:
    """``M`` (or the mean values, ``which="V"``) over :func:`default_reference_tokens`, for
    positions ``0..n_positions-1`` (default the whole context). Computed once per model, for the
    whole context, and kept on its :class:`ModelWeights` until the weights are edited (``M[i]``
    does not depend on how many positions are computed, up to float rounding)."""
    w = as_weights(model)
    full = w.derived(
        f"mean_positional_keys_{which}",
        lambda: mean_positional_keys(w, w.reference_tokens, None, which),
    )
    return full if n_positions is None else full[:n_positions]


# ----------------------------------------------------------------------------------------------
# Scores, patterns and their decomposition
# ----------------------------------------------------------------------------------------------


def causal_mask(n: int, device=None) -> Bool[Tensor, "query_pos key_pos"]:
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def masked_softmax(
    scores: Float[Tensor, "... query_pos key_pos"], mask: Bool[Tensor, "query_pos key_pos"]
) -> Float[Tensor, "... query_pos key_pos"]:
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)


@dataclass
class AttentionDecomposition:
    """Exact and decomposed layer-0 attention scores of one sequence (scores already / sqrt(d))."""

    tokens: Int[Tensor, " pos"]
    heads: list[int]
    exact_scores: Float[Tensor, "selected_head query_pos key_pos"]
    positional_scores: Float[Tensor, "selected_head query_pos key_pos"]  # q_n . P[n, i]
    content_scores: Float[Tensor, "selected_head query_pos key_pos"]  # log c_n(t_i) = q_n . E[n, t_i]

    @property
    def mask(self) -> Bool[Tensor, "query_pos key_pos"]:
        return causal_mask(len(self.tokens), self.tokens.device)

    def exact_pattern(self) -> Float[Tensor, "selected_head query_pos key_pos"]:
        return masked_softmax(self.exact_scores, self.mask)

    def reconstructed_pattern(self) -> Float[Tensor, "selected_head query_pos key_pos"]:
        return masked_softmax(self.positional_scores + self.content_scores, self.mask)

    def positional_pattern(self) -> Float[Tensor, "selected_head query_pos key_pos"]:
        """``pos_n(i)`` with each row's actual destination query."""
        return masked_softmax(self.positional_scores, self.mask)

    def log_denominator(self) -> Float[Tensor, "selected_head query_pos"]:
        """``log D_n = log sum_{j<=n} pos_n(j) c_n(t_j)``."""
        log_pos = torch.log_softmax(self.positional_scores.masked_fill(~self.mask, float("-inf")), -1)
        return torch.logsumexp(log_pos + self.content_scores.masked_fill(~self.mask, float("-inf")), -1)

    def tv_distance(self) -> Float[Tensor, "selected_head query_pos"]:
        return tv_distance(self.exact_pattern(), self.reconstructed_pattern())


def tv_distance(
    p: Float[Tensor, "... key_pos"], q: Float[Tensor, "... key_pos"]
) -> Float[Tensor, "..."]:
    """Total variation ``1/2 sum_i |p_i - q_i|``."""
    return 0.5 * (p - q).abs().sum(-1)


def content_scores(
    model: Model,
    queries: Float[Tensor, "query_pos head_index d_head"],
    query_positions: Int[Tensor, " query_pos"],
    key_tokens: Int[Tensor, " key_pos"],
    heads: list[int],
) -> Float[Tensor, "selected_head query_pos key_pos"]:
    """``q_n . E[n, t_i] / sqrt(d)``: each key token placed at its destination's position."""
    unique, inverse = torch.unique(key_tokens, return_inverse=True)
    parts = ln1_parts(model, "K", unique, query_positions, heads)
    inv = ln1_inverse_scale(model, unique, query_positions)[inverse].T  # [query, key]
    q = queries[:, heads]  # [query, head, d_head]
    token_term = torch.einsum("qhe,khe->hqk", q, parts.token_part[inverse])
    position_term = torch.einsum("qhe,qhe->hq", q, parts.position_part)
    bias_term = torch.einsum("qhe,he->hq", q, parts.bias)
    scores = (token_term + position_term[:, :, None]) * inv[None] + bias_term[:, :, None]
    return scores / model.cfg.d_head**0.5


def positional_scores(
    model: Model,
    queries: Float[Tensor, "query_pos head_index d_head"],
    query_positions: Int[Tensor, " query_pos"],
    n_keys: int,
    mean_keys: Float[Tensor, "mean_pos head_index d_head"],
    heads: list[int],
) -> Float[Tensor, "selected_head query_pos key_pos"]:
    """``q_n . (M[i] - M[n]) / sqrt(d)``."""
    q = queries[:, heads]
    m = mean_keys[:, heads]
    to_keys = torch.einsum("qhe,khe->hqk", q, m[:n_keys])
    at_dest = torch.einsum("qhe,qhe->hq", q, m[query_positions])
    return (to_keys - at_dest[:, :, None]) / model.cfg.d_head**0.5


def _sequence_inputs(model, tokens, heads, reference_tokens, mean_keys):
    """The checked sequence and heads, its positions, and the mean keys ``M`` (computed from
    ``reference_tokens``, by default the calibration text, unless given)."""
    tokens = check_sequence(model, tokens)
    heads = check_heads(model, heads)
    positions = torch.arange(len(tokens), device=tokens.device)
    if mean_keys is None:
        mean_keys = (
            default_mean_keys(model, len(tokens)) if reference_tokens is None
            else mean_positional_keys(model, reference_tokens, len(tokens))
        )
    return tokens, heads, positions, mean_keys


@torch.no_grad()
def decompose_attention(
    model: Model,
    tokens: Int[Tensor, " pos"],
    heads=None,
    reference_tokens: Int[Tensor, " n_ref"] | None = None,
    mean_keys: Float[Tensor, "mean_pos head_index d_head"] | None = None,
) -> AttentionDecomposition:
    """Exact, positional and content scores of layer-0 attention on one sequence.

    Args:
        model: a GPT-2-architecture model or its :class:`ModelWeights`.
        tokens: one sequence (BOS first, as ``model.to_tokens`` gives), at most ``n_ctx`` long.
        heads: layer-0 heads to keep (default all).
        reference_tokens: token distribution defining ``M`` (default: the calibration text).
        mean_keys: precomputed ``M`` (from :func:`mean_positional_keys`), to reuse across texts.
    """
    tokens, heads, positions, mean_keys = _sequence_inputs(
        model, tokens, heads, reference_tokens, mean_keys
    )
    n = len(tokens)
    queries = project_exact(model, "Q", tokens)
    keys = project_exact(model, "K", tokens)
    exact = torch.einsum("qhe,khe->hqk", queries[:, heads], keys[:, heads]) / model.cfg.d_head**0.5
    return AttentionDecomposition(
        tokens=tokens,
        heads=heads,
        exact_scores=exact,
        positional_scores=positional_scores(model, queries, positions, n, mean_keys, heads),
        content_scores=content_scores(model, queries, positions, tokens, heads),
    )


@torch.no_grad()
def destination_queries(
    model: Model, dest_token: int, positions: Int[Tensor, " pos"]
) -> Float[Tensor, "pos head_index d_head"]:
    """Queries of ``dest_token`` placed at each of ``positions``."""
    parts = ln1_parts(model, "Q", torch.tensor([dest_token], device=positions.device), positions)
    inv = ln1_inverse_scale(model, torch.tensor([dest_token], device=positions.device), positions)[0]
    return (parts.token_part[0][None] + parts.position_part) * inv[:, None, None] + parts.bias


@torch.no_grad()
def positional_pattern(
    model: Model,
    n: int,
    dest_token: str | int = DEFAULT_DESTINATION,
    heads=None,
    reference_tokens: Int[Tensor, " n_ref"] | None = None,
    mean_keys: Float[Tensor, "mean_pos head_index d_head"] | None = None,
) -> Float[Tensor, "selected_head key_pos"]:
    """``pos_n(i)`` for ``i = 0..n`` with ``dest_token`` at position ``n`` (Figure 2).

    Args:
        model: a GPT-2-architecture model or its :class:`ModelWeights`.
        n: the destination position.
        dest_token: the destination token (string of one token, or id).
        heads: layer-0 heads (default all).
        reference_tokens: token distribution defining ``M`` (default: the calibration text).
        mean_keys: precomputed ``M`` covering positions ``0..n``.

    Returns:
        The attention each head would pay to positions ``0..n`` if every token were identical;
        each row sums to 1.
    """
    n = check_position(model, n)
    heads = check_heads(model, heads)
    dest = token_id(model, dest_token)
    if mean_keys is None:
        mean_keys = (
            default_mean_keys(model, n + 1) if reference_tokens is None
            else mean_positional_keys(model, reference_tokens, n + 1)
        )
    positions = torch.tensor([n], device=model.cfg.device)
    q = destination_queries(model, dest, positions)
    scores = positional_scores(model, q, positions, n + 1, mean_keys, heads)[:, 0]
    return torch.softmax(scores, dim=-1)


@torch.no_grad()
def content_log_weights(
    model: Model,
    n: int,
    dest_token: str | int = DEFAULT_DESTINATION,
    token_ids: Int[Tensor, " n_tokens"] | None = None,
    heads=None,
) -> Float[Tensor, "selected_head n_tokens"]:
    """``log c_n(t) = q_n . E[n, t] / sqrt(d)`` for ``dest_token`` at ``n``.

    Args:
        model: a GPT-2-architecture model or its :class:`ModelWeights`.
        n: the destination position (the source token is placed there too).
        dest_token: the destination token (string of one token, or id).
        token_ids: source tokens (default the whole vocabulary).
        heads: layer-0 heads (default all).

    Returns:
        Log content weights, one row per head (logarithms: the weights overflow float32).
    """
    n = check_position(model, n)
    heads = check_heads(model, heads)
    dest = token_id(model, dest_token)
    if token_ids is None:
        token_ids = torch.arange(model.cfg.d_vocab, device=model.cfg.device)
    positions = torch.tensor([n], device=model.cfg.device)
    q = destination_queries(model, dest, positions)
    return content_scores(model, q, positions, token_ids.to(model.cfg.device), heads)[:, 0]


# ----------------------------------------------------------------------------------------------
# Where the reconstruction's error comes from
# ----------------------------------------------------------------------------------------------


@torch.no_grad()
def scale_change(
    model: Model, token_ids: Int[Tensor, " n_tokens"], n: int
) -> Float[Tensor, "n_tokens key_pos"]:
    """``|1 - sigma(t, n) / sigma(t, i)|`` for each token and each source position ``i = 0..n``.

    The content term ``E[n, t]`` divides a token's key by its LayerNorm scale at the destination,
    ``sigma(t, n)``; the exact key divides by ``sigma(t, i)``. This is the relative change of that
    division for one token moved from ``n`` to ``i`` (zero at ``i = n``).

    Args:
        model: a GPT-2-architecture model or its :class:`ModelWeights`.
        token_ids: the tokens (with repetitions, so frequent tokens count more).
        n: the destination position.
    """
    n = check_position(model, n)
    positions = torch.arange(n + 1, device=model.cfg.device)
    inverse = ln1_inverse_scale(model, token_ids.to(model.cfg.device), positions).double()
    return (1 - inverse / inverse[:, n : n + 1]).abs()  # sigma(t, n) / sigma(t, i) = inv_i / inv_n


def scale_change_by_distance(
    model: Model,
    token_ids: Int[Tensor, " n_tokens"],
    n: int,
    distances: tuple[int, ...] = (1, 2, 5, 10, 20, 50, 100, 200, 500),
    probs: tuple[float, ...] = (0.5, 0.9),
) -> pd.DataFrame:
    """Quantiles over tokens of :func:`scale_change` at chosen distances ``n - i``.

    Distances beyond ``n`` are left out. Returns one row per distance, one column per quantile
    (``"median"`` for 0.5, ``"90th percentile"`` for 0.9, else ``"q<p>"``).
    """
    change = scale_change(model, token_ids, n)
    kept = [d for d in distances if 0 < d <= n]
    quantiles = torch.tensor(probs, dtype=torch.float64, device=change.device)
    names = {0.5: "median", 0.9: "90th percentile"}
    rows = {d: torch.quantile(change[:, n - d], quantiles).tolist() for d in kept}
    return pd.DataFrame.from_dict(
        rows, orient="index", columns=[names.get(p, f"q{p:g}") for p in probs]
    ).rename_axis("distance n - i")


@dataclass
class ScoreErrorParts:
    """The reconstruction's score error ``q_n . (E[n, t_i] + P[n, i] - k(t_i, i)) / sqrt(d)``,
    split in two (``book/notation.md`` section 2), ``[selected_head, query_pos, key_pos]``.

    Attributes:
        token_scale: ``q_n . K_E[t_i] (1/sigma(t_i, n) - 1/sigma(t_i, i)) / sqrt(d)``: the token's
            own key divided by its scale at ``n`` instead of at ``i``. Zero when a token's
            LayerNorm scale is the same at every position.
        position: the rest, ``q_n . (K_P[n]/sigma(t_i, n) - K_P[i]/sigma(t_i, i) + M[i] - M[n])
            / sqrt(d)``: the positional key scaled by this token's ``1/sigma`` where ``M`` uses the
            average token's. Zero when every token has the same scale at each position.
    """

    heads: list[int]
    token_scale: Float[Tensor, "selected_head query_pos key_pos"]
    position: Float[Tensor, "selected_head query_pos key_pos"]

    def total(self) -> Float[Tensor, "selected_head query_pos key_pos"]:
        """Reconstructed minus exact score (equal to ``positional + content - exact`` scores)."""
        return self.token_scale + self.position


@torch.no_grad()
def score_error_parts(
    model: Model,
    tokens: Int[Tensor, " pos"],
    heads=None,
    reference_tokens: Int[Tensor, " n_ref"] | None = None,
    mean_keys: Float[Tensor, "mean_pos head_index d_head"] | None = None,
) -> ScoreErrorParts:
    """The two parts of the reconstruction's score error on one sequence (:class:`ScoreErrorParts`).

    Computed from the LayerNorm-decoupled key parts directly (not as a difference of the scores of
    :func:`decompose_attention`), so the two can be checked against each other.

    Args:
        model: a GPT-2-architecture model or its :class:`ModelWeights`.
        tokens: one sequence, BOS first.
        heads: layer-0 heads (default all).
        reference_tokens: token distribution defining ``M`` (default: the calibration text).
        mean_keys: precomputed ``M``.
    """
    tokens, heads, positions, mean_keys = _sequence_inputs(
        model, tokens, heads, reference_tokens, mean_keys
    )
    n = len(tokens)
    unique, inverse = torch.unique(tokens, return_inverse=True)
    parts = ln1_parts(model, "K", unique, positions, heads)
    inv = ln1_inverse_scale(model, unique, positions)[inverse]  # [key i, pos p]: 1/sigma(t_i, p)
    inv_source = inv[positions, positions]  # 1/sigma(t_i, i)
    inv_dest = inv.T  # [query n, key i]: 1/sigma(t_i, n)
    q = project_exact(model, "Q", tokens)[:, heads]  # [query, head, d_head]
    scale = model.cfg.d_head**0.5
    token_dot = torch.einsum("qhe,khe->hqk", q, parts.token_part[inverse])  # q_n . K_E[t_i]
    token_scale = token_dot * (inv_dest - inv_source[None, :])[None] / scale
    pos_dest = torch.einsum("qhe,qhe->hq", q, parts.position_part)  # q_n . K_P[n]
    pos_source = torch.einsum("qhe,khe->hqk", q, parts.position_part)  # q_n . K_P[i]
    m = mean_keys[:n, heads]
    mean_diff = torch.einsum("qhe,khe->hqk", q, m) - torch.einsum("qhe,qhe->hq", q, m)[:, :, None]
    position = (
        pos_dest[:, :, None] * inv_dest[None] - pos_source * inv_source[None, None, :] + mean_diff
    ) / scale
    mask = causal_mask(n, tokens.device)
    return ScoreErrorParts(heads, token_scale * mask, position * mask)


@dataclass(frozen=True)
class ErrorPartSizes:
    """How large each part of the score error is where a head looks (chapter 1, section 1.5).

    Attributes:
        table: one row per head (index ``head``): ``token scale (nats)`` and ``positional key
            (nats)``, the attention-weighted mean of the part's absolute value over the sources,
            median over the destinations ``n >= 1``; ``median TV``, the median over destinations
            of the reconstruction's TV distance.
        mismatch: ``max |token scale + position - (reconstructed - exact score)|`` over
            ``max |exact score|``: float rounding when the two parts add up to the error.
    """

    table: pd.DataFrame
    mismatch: float

    def finding(self, model: str) -> str:
        """Which part is the larger one for how many heads of ``model`` (its title), in one
        sentence."""
        heads = len(self.table)
        larger = int((self.table["token scale (nats)"] > self.table["positional key (nats)"]).sum())
        if 2 * larger == heads:
            dominant = "neither part dominates"
        else:
            part = "token-scale" if 2 * larger > heads else "positional-key"
            dominant = f"the {part} part dominates"
        return (f"the token-scale part is the larger one for {larger} of {heads} heads, "
                f"the positional-key part for {heads - larger}: on {model}, {dominant}")


def _weighted_size(
    attention: Float[Tensor, "selected_head query_pos key_pos"],
    part: Float[Tensor, "selected_head query_pos key_pos"],
) -> Float[Tensor, " selected_head"]:
    """Attention-weighted mean ``|part|`` over the sources; median over destinations ``n >= 1``."""
    return (attention * part.abs()).sum(-1)[:, 1:].median(-1).values.cpu()


@torch.no_grad()
def error_part_sizes(
    decomposition: AttentionDecomposition,
    parts: ScoreErrorParts,
    tv: Float[Tensor, "selected_head query_pos"] | None = None,
) -> ErrorPartSizes:
    """:class:`ErrorPartSizes` of one sequence's decomposition and its :func:`score_error_parts`
    (the same heads, in the same order).

    Args:
        decomposition: :func:`decompose_attention` of the sequence.
        parts: :func:`score_error_parts` of the same sequence and heads.
        tv: the decomposition's :meth:`~AttentionDecomposition.tv_distance`, when already computed.
    """
    if list(parts.heads) != list(decomposition.heads):
        raise InputError(f"The error parts are of heads {parts.heads}, the decomposition of "
                         f"{decomposition.heads}: compute both for the same heads.")
    scores = decomposition
    error = (scores.positional_scores + scores.content_scores - scores.exact_scores) * scores.mask
    mismatch = (parts.total() - error).abs().max() / scores.exact_scores.abs().max()
    attention = scores.exact_pattern()
    tv = scores.tv_distance() if tv is None else tv
    table = pd.DataFrame(
        {
            "token scale (nats)": _weighted_size(attention, parts.token_scale),
            "positional key (nats)": _weighted_size(attention, parts.position),
            "median TV": tv.cpu().median(dim=-1).values,
        },
        index=pd.Index(decomposition.heads, name="head"),
    )
    return ErrorPartSizes(table, float(mismatch))


def content_spread(
    model: Model, n: int, groups: list[str], dest_token: str | int = DEFAULT_DESTINATION
) -> pd.DataFrame:
    """How much each head's content weights vary (chapter 1, section 1.3): one row per layer-0
    head (index ``head``) with its ``group`` (``groups[head]``, from the taxonomy) and ``std of
    log c``, the standard deviation of :func:`content_log_weights` over the vocabulary with
    ``dest_token`` at ``n``."""
    spread = content_log_weights(model, n=n, dest_token=dest_token).std(dim=-1).cpu()
    return pd.DataFrame(
        {"group": list(groups), "std of log c": spread},
        index=pd.Index(range(len(spread)), name="head"),
    )


@dataclass(frozen=True)
class TVSummary:
    """The reconstruction's TV distance over one text's destinations (chapter 1, section 1.4).

    Attributes:
        table: one row per head (index ``head``): the ``median``, ``90th percentile`` and ``max``
            of the TV distance over the destinations, and its medians over the first half
            (``median, first half``, destinations ``1 <= n < N/2``) and the second half
            (``median, second half``, ``n >= N/2``) of the text of ``N`` tokens.
        median: the median over heads and destinations.
    """

    table: pd.DataFrame
    median: float

    def finding(self, paper: float) -> str:
        """The median over heads and positions beside the ``paper``'s TV for GPT-2 Small."""
        return (f"median over heads and positions: {self.median:.3f}   "
                f"(paper, GPT-2 Small: ~{paper})")


def tv_summary(tv: Float[Tensor, "selected_head query_pos"], heads: list[int]) -> TVSummary:
    """:class:`TVSummary` of :meth:`AttentionDecomposition.tv_distance` for ``heads`` (its rows)."""
    tv = tv.cpu()  # pandas reads host memory
    middle = tv.shape[-1] // 2
    table = pd.DataFrame(
        {
            "median": tv.median(dim=-1).values,
            "90th percentile": tv.quantile(0.9, dim=-1),
            "max": tv.max(dim=-1).values,
            "median, first half": tv[:, 1:middle].median(dim=-1).values,
            "median, second half": tv[:, middle:].median(dim=-1).values,
        },
        index=pd.Index(heads, name="head"),
    )
    return TVSummary(table, float(tv.median()))


@dataclass(frozen=True)
class ScaleRange:
    """The spread of LN1's scale ``1/sigma`` over the vocabulary at one position (chapter 1,
    section 1.5), the blog's measure on GPT-2 Small.

    Attributes:
        n: the position.
        low: the 5th percentile of ``1/sigma(t, n)`` over the vocabulary's tokens ``t``.
        high: its 95th percentile.
    """

    n: int
    low: float
    high: float

    def findings(self, paper: tuple[float, float]) -> list[str]:
        """The range and its relative width ``(high - low) / high``, then the blog's range
        ``paper`` (GPT-2 Small) and its relative width."""
        paper_low, paper_high = paper
        return [
            f"LN1 scale 1/sigma over the vocabulary at n = {self.n}: 5%-95% range "
            f"{self.low:.3f} to {self.high:.3f} "
            f"(relative width {(self.high - self.low) / self.high:.2f})",
            f"the blog's comparison (GPT-2 Small): {paper_low} to {paper_high} "
            f"(relative width {(paper_high - paper_low) / paper_high:.2f})",
        ]


def ln1_scale_range(model: Model, n: int) -> ScaleRange:
    """:class:`ScaleRange` of :func:`ln1_inverse_scale` over the whole vocabulary at ``n``."""
    w = as_weights(model)
    vocabulary = torch.arange(w.cfg.d_vocab, device=w.W_E.device)
    position = torch.tensor([n], device=w.W_E.device)
    inverse_scale = ln1_inverse_scale(model, vocabulary, position).flatten().double().cpu()
    low, high = torch.quantile(inverse_scale, torch.tensor([0.05, 0.95], dtype=torch.float64))
    return ScaleRange(n, float(low), float(high))
