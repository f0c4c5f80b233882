"""Denominators of the model. This module computes ``log D_n`` of layer-0 heads on texts, with a
fixed destination token at every position, from the decomposition of chapter 1 (in float64 where
the local heads' large scores cancel)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from context_neurons.checks import (
    OutOfRangeError,
    check_heads,
    check_position,
    check_sequence,
    token_id,
)
from context_neurons.decomposition import (
    DEFAULT_DESTINATION,
    centred,
    default_mean_keys,
    layer_norm,
    positional_scores,
)
from context_neurons.models.weights import Model, as_weights


@torch.no_grad()
def destination_queries_double(
    model: Model,
    dest_token: str | int,
    positions: Int[Tensor, " pos"],
    heads: Sequence[int] | None = None,
) -> Float[Tensor, "pos selected_head d_head"]:
    """Layer-0 queries of ``dest_token`` at each position, in float64.

    The local heads' queries are large, so the float32 rounding of a query changes scores by
    ~1e-3; computing them once in float64 keeps positional and content scores consistent and
    independent of how many positions are computed together.
    """
    heads = check_heads(model, heads)
    w = as_weights(model)
    residual = (w.W_E[token_id(model, dest_token)].double()[None]
                + w.W_pos[positions.to(w.cfg.device)].double())
    normed = layer_norm(residual, w.ln1_w.double(), w.ln1_b.double(), w.cfg.eps)
    return torch.einsum("pd,hde->phe", normed, w.W_Q[heads].double()) + w.b_Q[heads].double()


@torch.no_grad()
def log_kernels(
    model: Model,
    n_positions: int,
    dest_token: str | int = DEFAULT_DESTINATION,
    heads: Sequence[int] | None = None,
    mean_keys: Float[Tensor, "mean_pos head_index d_head"] | None = None,
) -> Float[Tensor, "selected_head query_pos key_pos"]:
    """``log pos_n(i)`` for ``dest_token`` at every ``n < n_positions`` (``-inf`` for ``i > n``)."""
    heads = check_heads(model, heads)
    check_position(model, n_positions - 1)
    if mean_keys is None:
        mean_keys = default_mean_keys(model, n_positions)
    positions = torch.arange(n_positions, device=model.cfg.device)
    queries = torch.zeros(
        n_positions,
        model.cfg.n_heads,
        model.cfg.d_head,
        dtype=torch.float64,
        device=model.cfg.device,
    )
    queries[:, heads] = destination_queries_double(model, dest_token, positions, heads)
    # Float64: local heads have large scores q.M[i] - q.M[n] that cancel near i = n.
    scores = positional_scores(model, queries, positions, n_positions, mean_keys.double(), heads)
    mask = torch.ones(n_positions, n_positions, dtype=torch.bool, device=scores.device).tril()
    return torch.log_softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)


@dataclass
class DestinationTerms:
    """The text-independent parts of ``log c_n(t)`` for one destination token at many positions.

    ``log c_n(t) = [(q_n . K_E[t] + q_n . K_P[n]) / sigma(t, n) + q_n . K_b] / sqrt(d_head)``
    (see :mod:`context_neurons.decomposition`); only ``K_E[t]`` and ``sigma(t, n)`` depend on the
    token, so everything else is computed once and reused for every text.
    """

    heads: list[int]
    positions: Int[Tensor, " query_pos"]
    queries: Float[Tensor, "query_pos selected_head d_head"]
    position_term: Float[Tensor, "selected_head query_pos"]  # q_n . K_P[n]
    bias_term: Float[Tensor, "selected_head query_pos"]  # q_n . K_b
    centred_positions: Float[Tensor, "query_pos d_model"]  # mean-centred W_pos[n]
    position_sq: Float[Tensor, " query_pos"]


@torch.no_grad()
def destination_terms(
    model: Model,
    positions: Int[Tensor, " query_pos"],
    dest_token: str | int = DEFAULT_DESTINATION,
    heads: Sequence[int] | None = None,
) -> DestinationTerms:
    """Precompute :class:`DestinationTerms` for ``dest_token`` at ``positions``."""
    heads = check_heads(model, heads)
    positions = positions.to(model.cfg.device)
    dest = token_id(model, dest_token)
    queries = destination_queries_double(model, dest, positions, heads)
    w = as_weights(model)
    w_k = w.W_K[heads].double()
    gamma, beta = w.ln1_w.double(), w.ln1_b.double()
    p = centred(w.W_pos[positions].double())
    position_keys = torch.einsum("qd,hde->qhe", gamma * p, w_k)  # K_P[n]
    key_bias = torch.einsum("d,hde->he", beta, w_k) + w.b_K[heads].double()  # K_b
    return DestinationTerms(
        heads=heads,
        positions=positions,
        queries=queries,
        position_term=torch.einsum("qhe,qhe->hq", queries, position_keys),
        bias_term=torch.einsum("qhe,he->hq", queries, key_bias),
        centred_positions=p,
        position_sq=(p**2).sum(-1),
    )


@torch.no_grad()
def log_content_table(
    model: Model,
    positions: Int[Tensor, " query_pos"],
    token_ids: Int[Tensor, " n_tokens"],
    dest_token: str | int = DEFAULT_DESTINATION,
    heads: Sequence[int] | None = None,
    terms: DestinationTerms | None = None,
) -> Float[Tensor, "selected_head query_pos n_tokens"]:
    """``log c_n(t)`` for ``dest_token`` at each position ``n`` and each token ``t``.

    The same arithmetic as :func:`context_neurons.decomposition.content_log_weights`, for many
    destination positions at once.

    Args:
        model: a GPT-2-architecture model or its
            :class:`~context_neurons.models.weights.ModelWeights`.
        positions: destination positions.
        token_ids: source tokens.
        dest_token: the destination token.
        heads: heads to keep (default all).
        terms: precomputed :func:`destination_terms` (then ``positions``, ``dest_token`` and
            ``heads`` are taken from it).
    """
    if terms is None:
        terms = destination_terms(model, positions, dest_token, heads)
    token_ids = token_ids.to(model.cfg.device)
    w = as_weights(model)
    # Float64: the local heads' large query and key parts cancel in the score.
    e = centred(w.W_E[token_ids].double())  # [token, d_model]
    token_keys = torch.einsum("td,hde->the", w.ln1_w.double() * e, w.W_K[terms.heads].double())
    sq = (e**2).sum(-1)[None, :] + 2 * terms.centred_positions @ e.T + terms.position_sq[:, None]
    inv = torch.rsqrt(sq / model.cfg.d_model + model.cfg.eps)  # [query, token]
    token_term = torch.einsum("qhe,the->hqt", terms.queries, token_keys)
    scores = (token_term + terms.position_term[..., None]) * inv[None] + terms.bias_term[..., None]
    return scores / model.cfg.d_head**0.5


@torch.no_grad()
def log_denominators(
    model: Model,
    tokens: Int[Tensor, " pos"],
    dest_token: str | int = DEFAULT_DESTINATION,
    heads: Sequence[int] | None = None,
    kernels: Float[Tensor, "selected_head query_pos key_pos"] | None = None,
    terms: DestinationTerms | None = None,
    positions: Int[Tensor, " query_pos"] | None = None,
) -> Float[Tensor, "selected_head query_pos"]:
    """``log D_n`` at positions of a text, with ``dest_token`` placed at ``n``.

    ``D_n = sum_{j<n} pos_n(j) c_n(t_j) + pos_n(n) c_n(dest)``.

    Args:
        model: a GPT-2-architecture model or its
            :class:`~context_neurons.models.weights.ModelWeights`.
        tokens: one text, BOS first.
        dest_token: the destination token placed at every position.
        heads: heads to keep (default all).
        kernels: precomputed :func:`log_kernels` for these heads (at least ``len(tokens)`` long).
        terms: precomputed :func:`destination_terms` for these heads at ``positions``.
        positions: destination positions (default: every position of the text).
    """
    tokens = check_sequence(model, tokens)
    heads = check_heads(model, heads)
    n = len(tokens)
    if positions is None:
        positions = torch.arange(n, device=tokens.device)
    positions = positions.to(tokens.device)
    if int(positions.max()) >= n or int(positions.min()) < 0:
        raise OutOfRangeError(f"Positions must be in 0..{n - 1} for a text of {n} tokens.")
    if kernels is None:
        kernels = log_kernels(model, n, dest_token, heads)
    if terms is None or not torch.equal(terms.positions.to(tokens.device), positions):
        terms = destination_terms(model, positions, dest_token, heads)
    dest = token_id(model, dest_token)
    unique, inverse = torch.unique(
        torch.cat([tokens, tokens.new_tensor([dest])]), return_inverse=True
    )
    table = log_content_table(model, positions, unique, terms=terms)  # [head, query, unique]
    return _from_table(table, inverse[:-1], inverse[-1], kernels[:, positions, :n], positions)


def _from_table(
    table: Float[Tensor, "selected_head query_pos n_tokens"],
    key_index: Int[Tensor, " key_pos"],
    dest_index: Tensor,
    kernels: Float[Tensor, "selected_head query_pos key_pos"],
    positions: Int[Tensor, " query_pos"],
) -> Float[Tensor, "selected_head query_pos"]:
    """``log D_n`` from a table of ``log c_n(t)``: ``key_index`` says which column of ``table``
    holds each source token, ``dest_index`` the destination token's column, and ``kernels`` holds
    ``log pos_n(i)`` for the rows ``positions`` (``-inf`` beyond ``n``)."""
    content, content_top = _linear(table)
    kernel, kernel_top = _linear(kernels)
    return _from_linear(
        content, content_top, key_index, dest_index, kernel, kernel_top, positions
    )


def _linear(log_values: Float[Tensor, "selected_head query_pos last"]) -> tuple[Tensor, Tensor]:
    """``(exp(x - m), m)`` in float64, ``m`` the maximum over the last axis, laid out
    ``[last, head, query]`` so that rows of it can be gathered whole: weights that neither
    overflow nor, over the range of one row of log-weights, underflow."""
    log_values = log_values.double()
    top = log_values.max(dim=-1, keepdim=True).values
    return torch.exp(log_values - top).permute(2, 0, 1).contiguous(), top[..., 0]


def _from_linear(
    content: Float[Tensor, "n_tokens selected_head query_pos"],
    content_top: Float[Tensor, "selected_head query_pos"],
    key_index: Int[Tensor, " key_pos"],
    dest_index: Tensor,
    kernel: Float[Tensor, "n_kernel selected_head query_pos"],
    kernel_top: Float[Tensor, "selected_head query_pos"],
    positions: Int[Tensor, " query_pos"],
) -> Float[Tensor, "selected_head query_pos"]:
    """``log D_n = log sum_i pos_n(i) c_n(t_i)`` from scaled weights (:func:`_linear`)."""
    n = len(key_index)
    weights = content.index_select(0, key_index)  # [key, head, query]: c_n(t_i), scaled
    rows = torch.arange(len(positions), device=content.device)
    weights[positions, :, rows] = content[dest_index][:, rows].T  # the destination at i = n
    total = (kernel[:n] * weights).sum(0)
    return total.log() + content_top + kernel_top


#: Largest table of content weights (heads x positions x tokens) built at once.
TABLE_BUDGET = 1 << 24


@torch.no_grad()
def denominators_over_positions(
    model: Model,
    windows: list[Int[Tensor, " pos"]],
    dest_token: str | int = DEFAULT_DESTINATION,
    heads: Sequence[int] | None = None,
    stride: int = 1,
    progress: bool = False,
    chunk: int | None = None,
) -> tuple[Int[Tensor, " query_pos"], Float[Tensor, "text selected_head query_pos"]]:
    """``log D_n`` at every ``stride``-th position of every text (cut to the shortest length).

    ``chunk`` texts at a time share one table of content weights over their tokens (the same
    arithmetic as :func:`log_denominators`, text by text, in a fraction of the time: texts share
    most of their tokens). By default, as many texts as keep the table within
    :data:`TABLE_BUDGET` entries.

    Returns:
        The positions, and ``log D_n`` per text, head and position.
    """
    heads = check_heads(model, heads)
    if not windows:
        raise OutOfRangeError("Give at least one window.")
    length = min(len(w) for w in windows)
    texts = torch.stack([check_sequence(model, w[:length]) for w in windows])  # [text, length]
    positions = torch.arange(0, length, stride, device=model.cfg.device)
    kernels = log_kernels(model, length, dest_token, heads)
    terms = destination_terms(model, positions, dest_token, heads)
    dest = token_id(model, dest_token)
    if chunk is None:
        entries = len(heads) * len(positions) * len(torch.unique(texts))
        chunk = math.ceil(len(texts) / max(1, math.ceil(entries / TABLE_BUDGET)))
    kernel, kernel_top = _linear(kernels[:, positions, :length])  # pos_n(i), scaled per row
    out = []
    # A few texts at a time share one table of log c over their tokens (texts share most tokens).
    starts = range(0, len(texts), chunk)
    for start in tqdm(starts, desc="denominators", disable=not progress):
        block = texts[start : start + chunk]
        unique, inverse = torch.unique(
            torch.cat([block.reshape(-1), block.new_tensor([dest])]), return_inverse=True
        )
        content, top = _linear(log_content_table(model, positions, unique, terms=terms))
        keys = inverse[:-1].view(block.shape)
        out += [
            _from_linear(content, top, row, inverse[-1], kernel, kernel_top, positions).cpu()
            for row in keys
        ]
    return positions.cpu(), torch.stack(out)


def relative_denominators(
    log_d: Float[Tensor, "text selected_head pos"],
) -> Float[Tensor, "text selected_head pos"]:
    """``D_{h,i} / c_{h,i}`` with ``c_{h,i}`` the mean of ``D`` over the texts (Figure 3)."""
    log_mean = torch.logsumexp(log_d, dim=0) - math.log(log_d.shape[0])
    return torch.exp(log_d - log_mean[None])
