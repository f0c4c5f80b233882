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
  variance and bounds use ``sum_{0<i<n} pos_n(i)^2``, so that the coefficient of variation is
  ``rho (sigma / mu) / sqrt(n_eff_random)`` (see :class:`DenominatorStudy`). These corrections are
  small for the contextual heads at ``n = 512`` but dominate for local heads, whose destination
  position carries most of the kernel;
* all denominators are reported in units of ``mu`` (``D / mu``): content weights are handled as
  logarithms, because ``c`` itself can overflow.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from numbers import Integral

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


def coefficient_of_variation(x: Float[Tensor, "n_samples"]) -> float:
    """Standard deviation over mean."""
    x = x.double()
    return float(x.std() / x.mean())


def bootstrap_standard_error(
    x: Float[Tensor, "n_samples"],
    statistic: Callable[[Tensor], float],
    n_boot: int = 1000,
    seed: int = 0,
) -> float:
    """Bootstrap standard error of ``statistic(x)`` (resampling ``x`` with replacement)."""
    if len(x) < 2:
        raise ValueError(f"Need at least two samples for a standard error, got {len(x)}.")
    gen = torch.Generator().manual_seed(seed)
    x = x.double().cpu()
    draws = torch.randint(len(x), (n_boot, len(x)), generator=gen)
    return float(torch.tensor([statistic(x[idx]) for idx in draws]).std())


def simulate_weighted_sums(
    kernel: Float[Tensor, "key_pos"],
    values: Float[Tensor, "n_values"],
    probs: Float[Tensor, "n_values"],
    n_samples: int,
    seed: int = 0,
) -> Float[Tensor, "n_samples"]:
    """Monte Carlo draws of ``sum_i pos(i) X_i`` with ``X_i`` i.i.d. from ``(values, probs)``."""
    gen = torch.Generator().manual_seed(seed)
    draws = torch.multinomial(
        probs.double().cpu(), n_samples * len(kernel), replacement=True, generator=gen
    ).view(n_samples, len(kernel))
    return values.double().cpu()[draws] @ kernel.double().cpu()


# ----------------------------------------------------------------------------------------------
# Denominators of the model
# ----------------------------------------------------------------------------------------------


@torch.no_grad()
def destination_queries_double(
    model: HookedTransformer,
    dest_token: str | int,
    positions: Int[Tensor, "pos"],
    heads: Sequence[int] | None = None,
) -> Float[Tensor, "pos selected_head d_head"]:
    """Layer-0 queries of ``dest_token`` at each position, in float64.

    The local heads' queries are large, so the float32 rounding of a query changes scores by
    ~1e-3; computing them once in float64 keeps positional and content scores consistent and
    independent of how many positions are computed together.
    """
    heads = check_heads(model, heads)
    attn = model.blocks[LAYER].attn
    gamma, beta = ln_affine(model.blocks[LAYER].ln1, model.cfg.d_model)
    x = centred(
        model.W_E[token_id(model, dest_token)].double()[None]
        + model.W_pos[positions.to(model.cfg.device)].double()
    )
    normed = x * torch.rsqrt((x**2).mean(-1, keepdim=True) + model.cfg.eps) * gamma.double()
    normed = normed + beta.double()
    return torch.einsum("pd,hde->phe", normed, attn.W_Q[heads].double()) + attn.b_Q[heads].double()


@torch.no_grad()
def log_kernels(
    model: HookedTransformer,
    n_positions: int,
    dest_token: str | int = DEFAULT_DESTINATION,
    heads: Sequence[int] | None = None,
    mean_keys: Float[Tensor, "mean_pos head_index d_head"] | None = None,
) -> Float[Tensor, "selected_head query_pos key_pos"]:
    """``log pos_n(i)`` for ``dest_token`` at every ``n < n_positions`` (``-inf`` for ``i > n``)."""
    heads = check_heads(model, heads)
    check_position(model, n_positions - 1)
    if mean_keys is None:
        mean_keys = mean_positional_keys(model, default_reference_tokens(model), n_positions)
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
    queries: Float[Tensor, "query_pos selected_head d_head"]
    position_term: Float[Tensor, "selected_head query_pos"]  # q_n . K_P[n]
    bias_term: Float[Tensor, "selected_head query_pos"]  # q_n . K_b
    centred_positions: Float[Tensor, "query_pos d_model"]  # mean-centred W_pos[n]
    position_sq: Float[Tensor, "query_pos"]


@torch.no_grad()
def destination_terms(
    model: HookedTransformer,
    positions: Int[Tensor, "query_pos"],
    dest_token: str | int = DEFAULT_DESTINATION,
    heads: Sequence[int] | None = None,
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
    heads: Sequence[int] | None = None,
    terms: DestinationTerms | None = None,
) -> Float[Tensor, "selected_head query_pos n_tokens"]:
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
    heads: Sequence[int] | None = None,
    kernels: Float[Tensor, "selected_head query_pos key_pos"] | None = None,
    terms: DestinationTerms | None = None,
    positions: Int[Tensor, "query_pos"] | None = None,
) -> Float[Tensor, "selected_head query_pos"]:
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
    unique, inverse = torch.unique(
        torch.cat([tokens, tokens.new_tensor([dest])]), return_inverse=True
    )
    table = log_content_table(model, positions, unique, terms=terms)  # [head, query, unique]
    log_c = table[:, :, inverse[:-1]]  # [head, query, key]: log c_n(t_i)
    rows = torch.arange(len(positions), device=tokens.device)
    log_c[:, rows, positions] = table[:, :, inverse[-1]]  # the destination at i = n
    return torch.logsumexp(kernels[:, positions, :n] + log_c, dim=-1)


@dataclass
class DenominatorStudy:
    """Denominators of layer-0 heads at one destination position ``n`` across many texts.

    All denominators are in units of the independent-token mean ``mu`` of each head. Methods take
    a head *number* (one of :attr:`heads`), not a row index. With the fixed BOS (``i = 0``) and
    destination (``i = n``) terms, the independent-token model gives, in units of ``mu``,

        E[D] = pos(0) c(BOS) + m + pos(n) c(dest),   m = sum_{0<i<n} pos(i),
        sd[D] = (sigma / mu) sqrt(sum_{0<i<n} pos(i)^2),
        CV = sd / E = rho (sigma / mu) / sqrt(n_eff_random),

    with ``rho = m / E[D]`` (:meth:`random_share`, the share of the mean carried by the random
    tokens) and ``n_eff_random = m^2 / sum_{0<i<n} pos(i)^2`` (:meth:`n_eff_random`, the number of
    random tokens averaged over). Without the fixed terms ``rho = 1`` and ``n_eff_random = n_eff``,
    the textbook ``CV = sigma / (mu sqrt(n_eff))``.
    """

    n: int
    heads: list[int]
    kernel: Float[Tensor, "selected_head key_pos"]  # pos_n(i), i = 0..n
    token_ids: Int[Tensor, "n_tokens"]  # support of the pooled token distribution
    probs: Float[Tensor, "n_tokens"]
    log_c: Float[Tensor, "selected_head n_tokens"]  # log c_n(t) on the support
    log_c_bos: Float[Tensor, "selected_head"]
    log_c_dest: Float[Tensor, "selected_head"]
    log_mu: Float[Tensor, "selected_head"]
    ratio: Float[Tensor, "text selected_head"]  # D_n / mu on each text
    labels: list[str]

    def row(self, head: int) -> int:
        """The row of ``head`` in this study's tensors.

        Raises:
            IndexError_: if the study does not contain that head.
        """
        if isinstance(head, bool) or not isinstance(head, Integral) or head not in self.heads:
            raise IndexError_(
                f"Head {head!r} is not in this study (heads: {self.heads}); pass one of those head "
                f"numbers, or run denominator_study(..., heads=[...]) with it."
            )
        return self.heads.index(int(head))

    # --- the independent-token model, per head (in units of mu) ----------------------------

    def values(self, head: int) -> Float[Tensor, "n_tokens"]:
        """``c_n(t) / mu`` on the support."""
        k = self.row(head)
        return torch.exp(self.log_c[k] - self.log_mu[k])

    def sum_sq(self, head: int) -> float:
        """``sum_{0<i<n} pos_n(i)^2``: the random terms only."""
        return float(sum_of_squares(self.kernel[self.row(head), 1:-1]))

    def random_mass(self, head: int) -> float:
        """``m = sum_{0<i<n} pos_n(i)``: the kernel's mass on the random positions."""
        return float(self.kernel[self.row(head), 1:-1].sum())

    def n_eff(self, head: int) -> float:
        """``1 / sum_{i<=n} pos_n(i)^2`` over all positions (the width of chapter 2)."""
        return float(1 / sum_of_squares(self.kernel[self.row(head)]))

    def n_eff_random(self, head: int) -> float:
        """``m^2 / sum_{0<i<n} pos_n(i)^2``: how many random tokens ``D`` averages over."""
        return self.random_mass(head) ** 2 / self.sum_sq(head)

    def sigma(self, head: int) -> float:
        """``sigma / mu`` of the content weights."""
        return math.sqrt(iid_moments(self.values(head), self.probs)[1])

    def predicted_mean(self, head: int) -> float:
        """``E[D_n] / mu`` including the fixed BOS and destination terms."""
        k = self.row(head)
        pos = self.kernel[k].double()
        bos = float(pos[0]) * math.exp(float(self.log_c_bos[k] - self.log_mu[k]))
        dest = float(pos[-1]) * math.exp(float(self.log_c_dest[k] - self.log_mu[k]))
        return bos + self.random_mass(head) + dest

    def random_share(self, head: int) -> float:
        """``rho = m / E[D]``: the share of the mean carried by the random tokens."""
        return self.random_mass(head) / self.predicted_mean(head)

    def predicted_sd(self, head: int) -> float:
        """``sd[D_n] / mu = (sigma / mu) sqrt(sum_{0<i<n} pos_n(i)^2)``."""
        return self.sigma(head) * math.sqrt(self.sum_sq(head))

    def predicted_cv(self, head: int) -> float:
        """``sd / E = rho (sigma / mu) / sqrt(n_eff_random)``."""
        return self.predicted_sd(head) / self.predicted_mean(head)

    def weight_range(self, head: int) -> tuple[float, float]:
        """``[a, b] / mu``: the smallest and largest content weight on the support."""
        values = self.values(head)
        return float(values.min()), float(values.max())

    def simulate(
        self, head: int, n_samples: int = 4000, seed: int = 0
    ) -> Float[Tensor, "n_samples"]:
        """``D_n / mu`` on synthetic texts whose tokens are i.i.d. from the pooled distribution."""
        pos = self.kernel[self.row(head)].double().cpu()
        random = simulate_weighted_sums(pos[1:-1], self.values(head), self.probs, n_samples, seed)
        return random + (self.predicted_mean(head) - float(pos[1:-1].sum()))

    def measured(self, head: int) -> Float[Tensor, "text"]:
        """``D_n / mu`` on the texts."""
        return self.ratio[:, self.row(head)].double()

    def preference(self, token_ids: Int[Tensor, "n_ids"]) -> dict[int, float]:
        """Per head, mean ``log c`` of the given tokens minus that of all other tokens (nats).

        Both means are weighted by the pooled token frequencies. Positive: the head up-weights
        those tokens (e.g. stop words); negative: it up-weights the others (keywords).
        """
        member = torch.isin(self.token_ids, token_ids.cpu())
        if not member.any() or member.all():
            raise ValueError("token_ids must cover some, but not all, tokens of the study's texts.")
        out = {}
        for k, head in enumerate(self.heads):
            inside = (self.probs[member] * self.log_c[k, member]).sum() / self.probs[member].sum()
            outside = (self.probs[~member] * self.log_c[k, ~member]).sum() / self.probs[
                ~member
            ].sum()
            out[head] = float(inside - outside)
        return out

    # --- comparisons -------------------------------------------------------------------------

    def deviation_grid(self, head: int, n_t: int = 50, n_sd: float = 5.0) -> Float[Tensor, "n_t"]:
        """Deviations ``t`` from a tenth to ``n_sd`` standard deviations (the larger of the
        predicted and the measured one), in units of ``mu``."""
        scale = max(self.predicted_sd(head), float(self.measured(head).std()))
        return torch.linspace(0.1, n_sd, n_t, dtype=torch.float64) * scale

    def tails(self, head: int, t: Float[Tensor, "n_t"], n_samples: int = 4000) -> pd.DataFrame:
        """Tail probabilities ``P(|D/mu - E| >= t)``: texts, i.i.d. texts and the two bounds."""
        t = t.double().cpu()
        mean = self.predicted_mean(head)
        low, high = self.weight_range(head)
        return pd.DataFrame(
            {
                "t": t.numpy(),
                "texts": tail_probability(self.measured(head) - mean, t).numpy(),
                "i.i.d. texts": tail_probability(self.simulate(head, n_samples) - mean, t).numpy(),
                "Chebyshev": chebyshev_bound(t, self.sum_sq(head), self.sigma(head) ** 2).numpy(),
                "Hoeffding": hoeffding_bound(t, self.sum_sq(head), low, high).numpy(),
            }
        )

    def table(self, prob: float = 0.05, n_samples: int = 4000) -> pd.DataFrame:
        """One row per head: the model's prediction beside the measured spread.

        Columns: ``n_eff`` (all positions) and ``n_eff random``; ``random share`` (``rho``);
        ``sigma/mu``; the predicted coefficient of variation ``rho (sigma/mu) / sqrt(n_eff
        random)`` and the measured one on the texts (with its bootstrap standard error) and on
        i.i.d. texts; the ``(1 - prob)`` half-width ``t`` of ``D/mu`` from Chebyshev, Hoeffding,
        the texts and the i.i.d. texts.
        """
        rows = []
        for head in self.heads:
            mean = self.predicted_mean(head)
            low, high = self.weight_range(head)
            simulated = self.simulate(head, n_samples)
            measured = self.measured(head)
            rows.append(
                {
                    "head": head,
                    "n_eff": self.n_eff(head),
                    "n_eff random": self.n_eff_random(head),
                    "random share": self.random_share(head),
                    "sigma/mu": self.sigma(head),
                    "CV predicted": self.predicted_cv(head),
                    "CV texts": coefficient_of_variation(measured),
                    "CV texts se": bootstrap_standard_error(measured, coefficient_of_variation),
                    "CV i.i.d.": coefficient_of_variation(simulated),
                    "t Chebyshev": chebyshev_deviation(
                        prob, self.sum_sq(head), self.sigma(head) ** 2
                    ),
                    "t Hoeffding": hoeffding_deviation(prob, self.sum_sq(head), low, high),
                    "t texts": float(torch.quantile((measured - mean).abs(), 1 - prob)),
                    "t i.i.d.": float(torch.quantile((simulated - mean).abs(), 1 - prob)),
                }
            )
        return pd.DataFrame(rows).set_index("head")


@torch.no_grad()
def denominator_study(
    model: HookedTransformer,
    windows: list[Int[Tensor, "pos"]],
    n: int | None = None,
    dest_token: str | int = DEFAULT_DESTINATION,
    heads: Sequence[int] | None = None,
    labels: list[str] | None = None,
    mean_keys: Float[Tensor, "mean_pos head_index d_head"] | None = None,
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
    log_c_all = log_content_table(model, torch.tensor([n], device=device), everything, dest, heads)[
        :, 0
    ].double()  # [head, n_support + 2]
    log_c, log_c_bos, log_c_dest = log_c_all[:, :-2], log_c_all[:, -2], log_c_all[:, -1]
    probs = counts.double() / counts.sum()
    log_mu = torch.logsumexp(log_c + probs.log()[None], dim=-1)
    # D_n / mu on each text: log c of every token by lookup, then a kernel-weighted sum.
    lookup = torch.full(
        (model.cfg.d_vocab, len(heads)), float("nan"), dtype=torch.float64, device=device
    )
    lookup[everything] = log_c_all.T
    log_terms = lookup[texts].permute(0, 2, 1) + kernel[None, :, :n].double().log()  # [t, h, n]
    log_dest = (log_c_dest + kernel[:, n].double().log())[None, :, None].expand(len(texts), -1, 1)
    log_d = torch.logsumexp(torch.cat([log_terms, log_dest], dim=-1), dim=-1)
    ratio = torch.exp(log_d - log_mu[None])
    return DenominatorStudy(
        n=n,
        heads=heads,
        kernel=kernel.double().cpu(),
        token_ids=support.cpu(),
        probs=probs.cpu(),
        log_c=log_c.cpu(),
        log_c_bos=log_c_bos.cpu(),
        log_c_dest=log_c_dest.cpu(),
        log_mu=log_mu.cpu(),
        ratio=ratio.cpu(),
        labels=[lab for _, lab in kept],
    )


@torch.no_grad()
def denominators_over_positions(
    model: HookedTransformer,
    windows: list[Int[Tensor, "pos"]],
    dest_token: str | int = DEFAULT_DESTINATION,
    heads: Sequence[int] | None = None,
    stride: int = 1,
    progress: bool = False,
) -> tuple[Int[Tensor, "query_pos"], Float[Tensor, "text selected_head query_pos"]]:
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
    out = [
        log_denominators(model, w[:length], dest_token, heads, kernels, terms, positions).cpu()
        for w in tqdm(windows, desc="denominators", disable=not progress)
    ]
    return positions.cpu(), torch.stack(out)


def relative_denominators(
    log_d: Float[Tensor, "text selected_head pos"],
) -> Float[Tensor, "text selected_head pos"]:
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
) -> Float[Tensor, "text selected_head"]:
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
    n_texts = len(study.labels)
    cv, se, predicted = {}, {}, {}
    for head in study.heads:
        measured = study.measured(head)
        cv[head] = round(coefficient_of_variation(measured), 3)
        se[head] = round(bootstrap_standard_error(measured, coefficient_of_variation), 3)
        predicted[head] = round(study.predicted_cv(head), 3)
    return [
        Row(
            "denominator_cv",
            cv,
            "small for heads 0,2,6,8,9,10 (Figure 4)",
            label=f"Coefficient of variation of D_h at n={study.n} (destination ' the') across "
            f"{n_texts} texts, per head (standard errors: denominator_cv_se)",
        ),
        Row(
            "denominator_cv_se",
            se,
            "-",
            label=f"Bootstrap standard error of denominator_cv ({n_texts} texts, 1000 resamples)",
        ),
        Row(
            "denominator_cv_predicted",
            predicted,
            "-",
            label="Independent-token prediction of that coefficient of variation, per head "
            "(rho sigma / (mu sqrt(n_eff over the random positions)); chapter 3)",
        ),
    ]
