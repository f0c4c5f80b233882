"""Stability of denominators. This module implements the theory of METHOD.md section 4 (chapter 3).

With the decomposition ``A_{n,i} = pos_n(i) c_n(t_i) / D_n``, a head's output is almost a fixed
kernel-weighted bag of tokens *if* the denominator ``D_n = sum_{j<=n} pos_n(j) c_n(t_j)`` hardly
depends on the text. Gibson's argument: model the source tokens as independent draws from a token
distribution whose content weights have mean ``mu`` and variance ``sigma^2``. Because the kernel
sums to one,

    E[D_n] = mu,        Var[D_n] = sigma^2 sum_i pos_n(i)^2 = sigma^2 / n_eff,

so the relative spread of ``D_n`` is ``(sigma / mu) / sqrt(n_eff)``: a head that averages over many
tokens (a contextual head, ``n_eff ~ 50-100``) has a nearly constant denominator; a head that looks
at one or two tokens (a detokenization head) does not. Two tail bounds make this quantitative:

    Hoeffding (c in [a, b]):  P(|D_n - mu| >= t) <= 2 exp(-2 t^2 / ((b - a)^2 sum_i pos_n(i)^2)),
    Chebyshev:                P(|D_n - mu| >= t) <= sigma^2 sum_i pos_n(i)^2 / t^2.

Conventions (stated in the chapter):

* the destination token is ``' the'`` at every position ``n`` (the text's own token at ``n`` is
  replaced), so ``D_n`` measures the *context*, not the current token;
* the token distribution of the model is the pooled unigram distribution of the texts studied
  (without ``<|endoftext|>``); the BOS at position 0 and the destination at ``n`` are fixed tokens,
  so exactly, ``E[D_n] = pos_n(0) c(BOS) + mu sum_{0<i<n} pos_n(i) + pos_n(n) c(dest)`` and the
  variance and bounds use ``sum_{0<i<n} pos_n(i)^2``. These corrections are tiny for the contextual
  heads at ``n = 512``;
* all denominators are reported in units of ``mu`` (``D / mu``): content weights are handled as
  logarithms, because ``c`` itself can overflow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens import HookedTransformer

from context_neurons.decomposition import (
    LAYER,
    IndexError_,
    _positional_scores,
    centred,
    check_heads,
    check_position,
    check_tokens,
    default_reference_tokens,
    ln_affine,
    mean_positional_keys,
    token_id,
)
from context_neurons.models import EOT_ID

DEFAULT_DESTINATION = " the"


# ----------------------------------------------------------------------------------------------
# The theory: moments and bounds of a kernel-weighted sum of independent weights
# ----------------------------------------------------------------------------------------------


def sum_of_squares(kernel: Float[Tensor, "... key_pos"]) -> Float[Tensor, "..."]:
    """``sum_i pos(i)^2`` (``1 / n_eff``) of each kernel row."""
    return (kernel.double() ** 2).sum(-1)


def iid_moments(
    values: Float[Tensor, "n_values"], probs: Float[Tensor, "n_values"]
) -> tuple[float, float]:
    """Mean and variance of a discrete distribution (values with probabilities)."""
    values, probs = values.double(), probs.double() / probs.double().sum()
    mean = float((probs * values).sum())
    return mean, float((probs * (values - mean) ** 2).sum())


def weighted_sum_variance(kernel: Float[Tensor, "key_pos"], variance: float) -> float:
    """``Var[sum_i pos(i) X_i] = sigma^2 sum_i pos(i)^2`` for independent ``X_i`` of variance
    ``sigma^2``."""
    return variance * float(sum_of_squares(kernel))


def hoeffding_bound(
    t: Float[Tensor, "n_t"], sum_sq: float, low: float, high: float
) -> Float[Tensor, "n_t"]:
    """Hoeffding: ``P(|D - E D| >= t) <= 2 exp(-2 t^2 / ((b - a)^2 sum pos^2))``, capped at one.

    Args:
        t: deviations (same units as ``low`` and ``high``).
        sum_sq: ``sum_i pos(i)^2`` over the random terms.
        low, high: the range ``[a, b]`` of each weight.
    """
    t = torch.as_tensor(t, dtype=torch.float64)
    return (2 * torch.exp(-2 * t**2 / ((high - low) ** 2 * sum_sq))).clamp(max=1.0)


def chebyshev_bound(
    t: Float[Tensor, "n_t"], sum_sq: float, variance: float
) -> Float[Tensor, "n_t"]:
    """Chebyshev: ``P(|D - E D| >= t) <= sigma^2 sum pos^2 / t^2``, capped at one."""
    t = torch.as_tensor(t, dtype=torch.float64)
    return (variance * sum_sq / t**2).clamp(max=1.0)


def hoeffding_deviation(prob: float, sum_sq: float, low: float, high: float) -> float:
    """The ``t`` at which the Hoeffding bound equals ``prob``."""
    return (high - low) * math.sqrt(sum_sq * math.log(2 / prob) / 2)


def chebyshev_deviation(prob: float, sum_sq: float, variance: float) -> float:
    """The ``t`` at which the Chebyshev bound equals ``prob``."""
    return math.sqrt(variance * sum_sq / prob)


def tail_probability(
    deviations: Float[Tensor, "n_samples"], t: Float[Tensor, "n_t"]
) -> Float[Tensor, "n_t"]:
    """Empirical ``P(|deviation| >= t)`` for each ``t``."""
    t = torch.as_tensor(t, dtype=torch.float64)
    return (deviations.double().abs()[:, None] >= t[None]).double().mean(0)


def simulate_weighted_sums(
    kernel: Float[Tensor, "key_pos"],
    values: Float[Tensor, "n_values"],
    probs: Float[Tensor, "n_values"],
    n_samples: int,
    seed: int = 0,
) -> Float[Tensor, "n_samples"]:
    """Monte Carlo draws of ``sum_i pos(i) X_i`` with ``X_i`` i.i.d. from ``(values, probs)``."""
    gen = torch.Generator().manual_seed(seed)
    draws = torch.multinomial(probs.double().cpu(), n_samples * len(kernel), replacement=True,
                              generator=gen).view(n_samples, len(kernel))
    return values.double().cpu()[draws] @ kernel.double().cpu()


# ----------------------------------------------------------------------------------------------
# Denominators of the model
# ----------------------------------------------------------------------------------------------


@torch.no_grad()
def destination_queries_double(
    model: HookedTransformer, dest_token: str | int, positions: Int[Tensor, "pos"], heads=None
) -> Float[Tensor, "pos head_index d_head"]:
    """Layer-0 queries of ``dest_token`` at each position, in float64.

    The local heads' queries are large, so the float32 rounding of a query changes scores by
    ~1e-3; computing them once in float64 keeps positional and content scores consistent and
    independent of how many positions are computed together.
    """
    heads = check_heads(model, heads)
    attn = model.blocks[LAYER].attn
    gamma, beta = ln_affine(model.blocks[LAYER].ln1, model.cfg.d_model)
    x = centred(model.W_E[token_id(model, dest_token)].double()[None]
                + model.W_pos[positions.to(model.cfg.device)].double())
    normed = x * torch.rsqrt((x**2).mean(-1, keepdim=True) + model.cfg.eps) * gamma.double()
    normed = normed + beta.double()
    return (torch.einsum("pd,hde->phe", normed, attn.W_Q[heads].double())
            + attn.b_Q[heads].double())


@torch.no_grad()
def log_kernels(
    model: HookedTransformer,
    n_positions: int,
    dest_token: str | int = DEFAULT_DESTINATION,
    heads=None,
    mean_keys: Float[Tensor, "pos head_index d_head"] | None = None,
) -> Float[Tensor, "head_index query_pos key_pos"]:
    """``log pos_n(i)`` for ``dest_token`` at every ``n < n_positions`` (``-inf`` for ``i > n``)."""
    heads = check_heads(model, heads)
    check_position(model, n_positions - 1)
    if mean_keys is None:
        mean_keys = mean_positional_keys(model, default_reference_tokens(model), n_positions)
    positions = torch.arange(n_positions, device=model.cfg.device)
    queries = torch.zeros(n_positions, model.cfg.n_heads, model.cfg.d_head, dtype=torch.float64,
                          device=model.cfg.device)
    queries[:, heads] = destination_queries_double(model, dest_token, positions, heads)
    # Float64: local heads have large scores q.M[i] - q.M[n] that cancel near i = n.
    scores = _positional_scores(model, queries, positions, n_positions, mean_keys.double(), heads)
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
    positions: Int[Tensor, "query_pos"]
    queries: Float[Tensor, "query_pos head_index d_head"]
    position_term: Float[Tensor, "head_index query_pos"]  # q_n . K_P[n]
    bias_term: Float[Tensor, "head_index query_pos"]  # q_n . K_b
    centred_positions: Float[Tensor, "query_pos d_model"]  # mean-centred W_pos[n]
    position_sq: Float[Tensor, "query_pos"]


@torch.no_grad()
def destination_terms(
    model: HookedTransformer,
    positions: Int[Tensor, "query_pos"],
    dest_token: str | int = DEFAULT_DESTINATION,
    heads=None,
) -> DestinationTerms:
    """Precompute :class:`DestinationTerms` for ``dest_token`` at ``positions``."""
    heads = check_heads(model, heads)
    positions = positions.to(model.cfg.device)
    dest = token_id(model, dest_token)
    queries = destination_queries_double(model, dest, positions, heads)
    attn = model.blocks[LAYER].attn
    w_k = attn.W_K[heads].double()
    gamma, beta = (x.double() for x in ln_affine(model.blocks[LAYER].ln1, model.cfg.d_model))
    p = centred(model.W_pos[positions].double())
    position_keys = torch.einsum("qd,hde->qhe", gamma * p, w_k)  # K_P[n]
    key_bias = torch.einsum("d,hde->he", beta, w_k) + attn.b_K[heads].double()  # K_b
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
    model: HookedTransformer,
    positions: Int[Tensor, "query_pos"],
    token_ids: Int[Tensor, "n_tokens"],
    dest_token: str | int = DEFAULT_DESTINATION,
    heads=None,
    terms: DestinationTerms | None = None,
) -> Float[Tensor, "head_index query_pos n_tokens"]:
    """``log c_n(t)`` for ``dest_token`` at each position ``n`` and each token ``t``.

    The same arithmetic as :func:`context_neurons.decomposition.content_log_weights`, for many
    destination positions at once.

    Args:
        model: a GPT-2-architecture HookedTransformer.
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
    attn = model.blocks[LAYER].attn
    gamma, _ = ln_affine(model.blocks[LAYER].ln1, model.cfg.d_model)
    # Float64: the local heads' large query and key parts cancel in the score.
    e = centred(model.W_E[token_ids].double())  # [token, d_model]
    token_keys = torch.einsum("td,hde->the", gamma.double() * e, attn.W_K[terms.heads].double())
    sq = (e**2).sum(-1)[None, :] + 2 * terms.centred_positions @ e.T + terms.position_sq[:, None]
    inv = torch.rsqrt(sq / model.cfg.d_model + model.cfg.eps)  # [query, token]
    token_term = torch.einsum("qhe,the->hqt", terms.queries, token_keys)
    scores = (token_term + terms.position_term[..., None]) * inv[None] + terms.bias_term[..., None]
    return scores / model.cfg.d_head**0.5


@torch.no_grad()
def log_denominators(
    model: HookedTransformer,
    tokens: Int[Tensor, "pos"],
    dest_token: str | int = DEFAULT_DESTINATION,
    heads=None,
    kernels: Float[Tensor, "head_index query_pos key_pos"] | None = None,
    terms: DestinationTerms | None = None,
    positions: Int[Tensor, "query_pos"] | None = None,
) -> Float[Tensor, "head_index query_pos"]:
    """``log D_n`` at positions of a text, with ``dest_token`` placed at ``n``.

    ``D_n = sum_{j<n} pos_n(j) c_n(t_j) + pos_n(n) c_n(dest)``.

    Args:
        model: a GPT-2-architecture HookedTransformer.
        tokens: one text, BOS first.
        dest_token: the destination token placed at every position.
        heads: heads to keep (default all).
        kernels: precomputed :func:`log_kernels` for these heads (at least ``len(tokens)`` long).
        terms: precomputed :func:`destination_terms` for these heads at ``positions``.
        positions: destination positions (default: every position of the text).
    """
    tokens = check_tokens(model, tokens)
    heads = check_heads(model, heads)
    n = len(tokens)
    if positions is None:
        positions = torch.arange(n, device=tokens.device)
    positions = positions.to(tokens.device)
    if int(positions.max()) >= n or int(positions.min()) < 0:
        raise IndexError_(f"Positions must be in 0..{n - 1} for a text of {n} tokens.")
    if kernels is None:
        kernels = log_kernels(model, n, dest_token, heads)
    if terms is None or not torch.equal(terms.positions.to(tokens.device), positions):
        terms = destination_terms(model, positions, dest_token, heads)
    dest = token_id(model, dest_token)
    unique, inverse = torch.unique(torch.cat([tokens, tokens.new_tensor([dest])]),
                                   return_inverse=True)
    table = log_content_table(model, positions, unique, terms=terms)  # [head, query, unique]
    log_c = table[:, :, inverse[:-1]]  # [head, query, key]: log c_n(t_i)
    rows = torch.arange(len(positions), device=tokens.device)
    log_c[:, rows, positions] = table[:, :, inverse[-1]]  # the destination at i = n
    return torch.logsumexp(kernels[:, positions, :n] + log_c, dim=-1)


@dataclass
class DenominatorStudy:
    """Denominators of layer-0 heads at one destination position ``n`` across many texts.

    All denominators are in units of the independent-token mean ``mu`` of each head.
    """

    n: int
    heads: list[int]
    kernel: Float[Tensor, "head_index key_pos"]  # pos_n(i), i = 0..n
    token_ids: Int[Tensor, "n_tokens"]  # support of the pooled token distribution
    probs: Float[Tensor, "n_tokens"]
    log_c: Float[Tensor, "head_index n_tokens"]  # log c_n(t) on the support
    log_c_bos: Float[Tensor, "head_index"]
    log_c_dest: Float[Tensor, "head_index"]
    log_mu: Float[Tensor, "head_index"]
    ratio: Float[Tensor, "text head_index"]  # D_n / mu on each text
    labels: list[str]

    # --- the independent-token model, per head (in units of mu) ----------------------------

    def values(self, k: int) -> Float[Tensor, "n_tokens"]:
        """``c_n(t) / mu`` on the support, for the ``k``-th head."""
        return torch.exp(self.log_c[k] - self.log_mu[k])

    def sum_sq(self, k: int) -> float:
        """``sum_{0<i<n} pos_n(i)^2``: the random terms only."""
        return float(sum_of_squares(self.kernel[k, 1:-1]))

    def n_eff(self, k: int) -> float:
        return float(1 / sum_of_squares(self.kernel[k]))

    def sigma(self, k: int) -> float:
        """``sigma / mu`` of the content weights."""
        return math.sqrt(iid_moments(self.values(k), self.probs)[1])

    def predicted_mean(self, k: int) -> float:
        """``E[D_n] / mu`` including the fixed BOS and destination terms."""
        pos = self.kernel[k].double()
        fixed = pos[0] * math.exp(self.log_c_bos[k] - self.log_mu[k]) + pos[-1] * math.exp(
            self.log_c_dest[k] - self.log_mu[k]
        )
        return float(fixed + pos[1:-1].sum())

    def predicted_sd(self, k: int) -> float:
        return self.sigma(k) * math.sqrt(self.sum_sq(k))

    def weight_range(self, k: int) -> tuple[float, float]:
        """``[a, b] / mu``: the smallest and largest content weight on the support."""
        values = self.values(k)
        return float(values.min()), float(values.max())

    def simulate(self, k: int, n_samples: int = 4000, seed: int = 0) -> Float[Tensor, "n_samples"]:
        """``D_n / mu`` on synthetic texts whose tokens are i.i.d. from the pooled distribution."""
        pos = self.kernel[k].double().cpu()
        random = simulate_weighted_sums(pos[1:-1], self.values(k), self.probs, n_samples, seed)
        return random + (self.predicted_mean(k) - float(pos[1:-1].sum()))

    # --- comparisons -------------------------------------------------------------------------

    def tails(self, k: int, t: Float[Tensor, "n_t"], n_samples: int = 4000) -> pd.DataFrame:
        """Tail probabilities ``P(|D/mu - E| >= t)``: texts, i.i.d. texts and the two bounds."""
        mean = self.predicted_mean(k)
        low, high = self.weight_range(k)
        return pd.DataFrame({
            "t": t.double().numpy(),
            "texts": tail_probability(self.ratio[:, k] - mean, t).numpy(),
            "i.i.d. texts": tail_probability(self.simulate(k, n_samples) - mean, t).numpy(),
            "Chebyshev": chebyshev_bound(t, self.sum_sq(k), self.sigma(k) ** 2).numpy(),
            "Hoeffding": hoeffding_bound(t, self.sum_sq(k), low, high).numpy(),
        })

    def table(self, prob: float = 0.05, n_samples: int = 4000) -> pd.DataFrame:
        """One row per head: the model's prediction beside the measured spread.

        Columns: ``n_eff``; ``sigma/mu``; the predicted and measured coefficient of variation
        (on texts and on i.i.d. texts); the ``(1 - prob)`` half-width ``t`` of ``D/mu`` from
        Chebyshev, Hoeffding, the texts and the i.i.d. texts.
        """
        rows = []
        for k, head in enumerate(self.heads):
            mean = self.predicted_mean(k)
            low, high = self.weight_range(k)
            simulated = self.simulate(k, n_samples)
            measured = self.ratio[:, k].double()
            rows.append({
                "head": head,
                "n_eff": self.n_eff(k),
                "sigma/mu": self.sigma(k),
                "CV predicted": self.predicted_sd(k) / mean,
                "CV texts": float(measured.std() / measured.mean()),
                "CV i.i.d.": float(simulated.std() / simulated.mean()),
                "t Chebyshev": chebyshev_deviation(prob, self.sum_sq(k), self.sigma(k) ** 2),
                "t Hoeffding": hoeffding_deviation(prob, self.sum_sq(k), low, high),
                "t texts": float(torch.quantile((measured - mean).abs(), 1 - prob)),
                "t i.i.d.": float(torch.quantile((simulated - mean).abs(), 1 - prob)),
            })
        return pd.DataFrame(rows).set_index("head")


@torch.no_grad()
def denominator_study(
    model: HookedTransformer,
    windows: list[Int[Tensor, "pos"]],
    n: int | None = None,
    dest_token: str | int = DEFAULT_DESTINATION,
    heads=None,
    labels: list[str] | None = None,
    mean_keys: Float[Tensor, "pos head_index d_head"] | None = None,
) -> DenominatorStudy:
    """``D_n`` of each head on each text long enough, and the independent-token model beside it.

    Args:
        model: a GPT-2-architecture HookedTransformer.
        windows: texts, BOS first; those shorter than ``n + 1`` tokens are skipped.
        n: destination position (default ``n_ctx / 2``, as in Figure 4).
        dest_token: the destination token placed at ``n``.
        heads: heads to keep (default all).
        labels: a label per window.
        mean_keys: precomputed ``M`` (default: from the calibration text).
    """
    n = check_position(model, model.cfg.n_ctx // 2 if n is None else n)
    heads = check_heads(model, heads)
    labels = labels or [str(i) for i in range(len(windows))]
    kept = [(w, lab) for w, lab in zip(windows, labels) if len(w) > n]
    if not kept:
        raise ValueError(f"No window is longer than n = {n} tokens; use shorter n or longer texts.")
    device = model.cfg.device
    texts = torch.stack([check_tokens(model, w)[:n] for w, _ in kept])  # [text, n]: t_0..t_{n-1}
    if mean_keys is None:
        mean_keys = mean_positional_keys(model, default_reference_tokens(model), n + 1)
    kernel = log_kernels(model, n + 1, dest_token, heads, mean_keys)[:, n].exp()  # [head, n + 1]
    dest = token_id(model, dest_token)
    body = texts[:, 1:].reshape(-1)
    body = body[body != EOT_ID]
    support, counts = torch.unique(body, return_counts=True)
    everything = torch.cat([support, torch.tensor([EOT_ID, dest], device=device)])
    log_c_all = log_content_table(model, torch.tensor([n], device=device), everything, dest,
                                  heads)[:, 0].double()  # [head, n_support + 2]
    log_c, log_c_bos, log_c_dest = log_c_all[:, :-2], log_c_all[:, -2], log_c_all[:, -1]
    probs = counts.double() / counts.sum()
    log_mu = torch.logsumexp(log_c + probs.log()[None], dim=-1)
    # D_n / mu on each text: log c of every token by lookup, then a kernel-weighted sum.
    lookup = torch.full((model.cfg.d_vocab, len(heads)), float("nan"), dtype=torch.float64,
                        device=device)
    lookup[everything] = log_c_all.T
    log_terms = lookup[texts].permute(0, 2, 1) + kernel[None, :, :n].double().log()  # [t, h, n]
    log_dest = (log_c_dest + kernel[:, n].double().log())[None, :, None].expand(len(texts), -1, 1)
    log_d = torch.logsumexp(torch.cat([log_terms, log_dest], dim=-1), dim=-1)
    ratio = torch.exp(log_d - log_mu[None])
    return DenominatorStudy(
        n=n, heads=heads, kernel=kernel.double().cpu(), token_ids=support.cpu(),
        probs=probs.cpu(), log_c=log_c.cpu(), log_c_bos=log_c_bos.cpu(),
        log_c_dest=log_c_dest.cpu(), log_mu=log_mu.cpu(), ratio=ratio.cpu(),
        labels=[lab for _, lab in kept],
    )


@torch.no_grad()
def denominators_over_positions(
    model: HookedTransformer,
    windows: list[Int[Tensor, "pos"]],
    dest_token: str | int = DEFAULT_DESTINATION,
    heads=None,
    stride: int = 1,
    progress: bool = False,
) -> tuple[Int[Tensor, "query_pos"], Float[Tensor, "text head_index query_pos"]]:
    """``log D_n`` at every ``stride``-th position of every text (cut to the shortest length).

    Returns:
        The positions, and ``log D_n`` per text, head and position.
    """
    from tqdm.auto import tqdm

    heads = check_heads(model, heads)
    length = min(len(w) for w in windows)
    positions = torch.arange(0, length, stride, device=model.cfg.device)
    kernels = log_kernels(model, length, dest_token, heads)
    terms = destination_terms(model, positions, dest_token, heads)
    out = [log_denominators(model, w[:length], dest_token, heads, kernels, terms, positions).cpu()
           for w in tqdm(windows, desc="denominators", disable=not progress)]
    return positions.cpu(), torch.stack(out)


def relative_denominators(
    log_d: Float[Tensor, "text head_index pos"]
) -> Float[Tensor, "text head_index pos"]:
    """``D_{h,i} / c_{h,i}`` with ``c_{h,i}`` the mean of ``D`` over the texts (Figure 3)."""
    log_mean = torch.logsumexp(log_d, dim=0) - math.log(log_d.shape[0])
    return torch.exp(log_d - log_mean[None])


# ----------------------------------------------------------------------------------------------
# Keyword density
# ----------------------------------------------------------------------------------------------


def kernel_weighted_density(
    study: DenominatorStudy,
    windows: list[Int[Tensor, "pos"]],
    token_ids: Int[Tensor, "n_ids"],
) -> Float[Tensor, "text head_index"]:
    """``sum_{i<n} pos_n(i) [t_i in token_ids]``: the share of a head's kernel on those tokens.

    ``windows`` must be those the study kept (same order), e.g. all longer than ``study.n``.
    """
    texts = torch.stack([w[: study.n].cpu() for w in windows if len(w) > study.n])
    member = torch.isin(texts, token_ids.cpu()).double()  # [text, n]
    return member @ study.kernel[:, : study.n].T


def correlation(x: Float[Tensor, "n"], y: Float[Tensor, "n"]) -> float:
    """Pearson correlation."""
    x, y = x.double() - x.double().mean(), y.double() - y.double().mean()
    return float((x * y).sum() / (x.norm() * y.norm()))


def reproduce_section(ctx) -> list:
    """Chapter 3's rows: spread of the denominators at ``n = n_ctx / 2`` across the texts."""
    from context_neurons.reproduce import Row

    study = denominator_study(ctx.model, ctx.windows, labels=ctx.labels)
    cv = {}
    predicted = {}
    for k, head in enumerate(study.heads):
        measured = study.ratio[:, k]
        cv[head] = round(float(measured.std() / measured.mean()), 3)
        predicted[head] = round(study.predicted_sd(k) / study.predicted_mean(k), 3)
    return [
        Row("denominator_cv", cv, "small for heads 0,2,6,8,9,10 (Figure 4)",
            label=f"Coefficient of variation of D_h at n={study.n} (destination ' the') across "
                  f"{len(study.labels)} texts, per head"),
        Row("denominator_cv_predicted", predicted, "sigma/(mu sqrt(n_eff))",
            label="Independent-token prediction of that coefficient of variation, per head"),
    ]
