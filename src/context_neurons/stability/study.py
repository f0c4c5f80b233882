"""The denominator study. This module measures ``D_n`` of layer-0 heads at one destination across
many texts, beside the independent-token model's prediction and the tail bounds (chapter 3)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor

from context_neurons.checks import OutOfRangeError, check_heads, check_position, check_sequence, token_id
from context_neurons.decomposition import (
    DEFAULT_DESTINATION,
    default_mean_keys,
)
from context_neurons.models.weights import Model
from context_neurons.stability.bounds import (
    bootstrap_standard_error,
    chebyshev_bound,
    chebyshev_deviation,
    coefficient_of_variation,
    cv_standard_error,
    hoeffding_bound,
    hoeffding_deviation,
    iid_moments,
    simulate_weighted_sums,
    sum_of_squares,
    tail_probability,
    weighted_sum_cumulants,
)
from context_neurons.stability.denominators import log_content_table, log_kernels


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
    token_ids: Int[Tensor, " n_tokens"]  # support of the pooled token distribution
    probs: Float[Tensor, " n_tokens"]
    log_c: Float[Tensor, "selected_head n_tokens"]  # log c_n(t) on the support
    log_c_bos: Float[Tensor, " selected_head"]
    log_c_dest: Float[Tensor, " selected_head"]
    log_mu: Float[Tensor, " selected_head"]
    ratio: Float[Tensor, "text selected_head"]  # D_n / mu on each text
    labels: list[str]

    def row(self, head: int) -> int:
        """The row of ``head`` in this study's tensors.

        Raises:
            OutOfRangeError: if the study does not contain that head.
        """
        if isinstance(head, bool) or not isinstance(head, Integral) or head not in self.heads:
            raise OutOfRangeError(
                f"Head {head!r} is not in this study (heads: {self.heads}); pass one of those head "
                f"numbers, or run denominator_study(..., heads=[...]) with it."
            )
        return self.heads.index(int(head))

    # --- the independent-token model, per head (in units of mu) ----------------------------

    def values(self, head: int) -> Float[Tensor, " n_tokens"]:
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
    ) -> Float[Tensor, " n_samples"]:
        """``D_n / mu`` on synthetic texts whose tokens are i.i.d. from the pooled distribution."""
        pos = self.kernel[self.row(head)].double().cpu()
        random = simulate_weighted_sums(pos[1:-1], self.values(head), self.probs, n_samples, seed)
        return random + (self.predicted_mean(head) - float(pos[1:-1].sum()))

    def simulated_cv_standard_error(self, head: int, n_samples: int) -> float:
        """Standard error of the CV of :meth:`simulate` with ``n_samples`` draws, from the exact
        moments of the independent-token model (not from the draws, whose sample moments
        underestimate heavy tails): :func:`~context_neurons.stability.bounds.cv_standard_error`."""
        pos = self.kernel[self.row(head)].double()
        variance, third, kappa4 = weighted_sum_cumulants(pos[1:-1], self.values(head), self.probs)
        return cv_standard_error(self.predicted_mean(head), variance, third, kappa4, n_samples)

    def most_frequent(self, k: int) -> Int[Tensor, " k"]:
        """The ``k`` most frequent tokens of the study's texts (pooled frequencies, BOS excluded).

        A definition of "stop words" that needs no word list: in any language and tokenizer the
        most frequent tokens are function words and punctuation.
        """
        if not 0 < k < len(self.token_ids):
            raise OutOfRangeError(
                f"k must be between 1 and {len(self.token_ids) - 1} (the distinct tokens of the "
                f"texts), got {k}."
            )
        return self.token_ids[torch.argsort(self.probs, descending=True, stable=True)[:k]]

    def measured(self, head: int) -> Float[Tensor, " text"]:
        """``D_n / mu`` on the texts."""
        return self.ratio[:, self.row(head)].double()

    def preference(self, token_ids: Int[Tensor, " n_ids"]) -> dict[int, float]:
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

    def deviation_grid(self, head: int, n_t: int = 50, n_sd: float = 5.0) -> Float[Tensor, " n_t"]:
        """Deviations ``t`` from a tenth to ``n_sd`` standard deviations (the larger of the
        predicted and the measured one), in units of ``mu``."""
        scale = max(self.predicted_sd(head), float(self.measured(head).std()))
        return torch.linspace(0.1, n_sd, n_t, dtype=torch.float64) * scale

    def tails(self, head: int, t: Float[Tensor, " n_t"], n_samples: int = 4000) -> pd.DataFrame:
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
    model: Model,
    windows: list[Int[Tensor, " pos"]],
    n: int | None = None,
    dest_token: str | int = DEFAULT_DESTINATION,
    heads: Sequence[int] | None = None,
    labels: list[str] | None = None,
    mean_keys: Float[Tensor, "mean_pos head_index d_head"] | None = None,
) -> DenominatorStudy:
    """``D_n`` of each head on each text long enough, and the independent-token model beside it.

    Args:
        model: a GPT-2-architecture model or its
            :class:`~context_neurons.models.weights.ModelWeights`.
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
    texts = torch.stack([check_sequence(model, w)[:n] for w, _ in kept])  # [text, n]: t_0..t_{n-1}
    if mean_keys is None:
        mean_keys = default_mean_keys(model, n + 1)
    kernel = log_kernels(model, n + 1, dest_token, heads, mean_keys)[:, n].exp()  # [head, n + 1]
    dest = token_id(model, dest_token)
    body = texts[:, 1:].reshape(-1)
    bos = int(texts[0, 0])  # every window starts with BOS
    body = body[body != bos]
    support, counts = torch.unique(body, return_counts=True)
    everything = torch.cat([support, torch.tensor([bos, dest], device=device)])
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


def kernel_weighted_density(
    study: DenominatorStudy,
    windows: list[Int[Tensor, " pos"]],
    token_ids: Int[Tensor, " n_ids"],
) -> Float[Tensor, "text selected_head"]:
    """``sum_{i<n} pos_n(i) [t_i in token_ids]``: the share of a head's kernel on those tokens.

    ``windows`` must be those the study kept (same order), e.g. all longer than ``study.n``.
    """
    texts = torch.stack([w[: study.n].cpu() for w in windows if len(w) > study.n])
    member = torch.isin(texts, token_ids.cpu()).double()  # [text, n]
    return member @ study.kernel[:, : study.n].T


@dataclass(frozen=True)
class StopWords:
    """The stop words of chapter 3, section 3.5: the most frequent tokens of a study's texts.

    Attributes:
        ids: their token ids, most frequent first (:meth:`DenominatorStudy.most_frequent`).
        mass: the share of the texts' tokens they make up (their pooled probability).
    """

    ids: Int[Tensor, " k"]
    mass: float

    def finding(self) -> str:
        """How many they are and how much of the texts they make up."""
        return (f"stop words: the {len(self.ids)} most frequent tokens, {self.mass:.0%} of the "
                f"texts' tokens")

    def planted_finding(self, planted_ids: Sequence[int]) -> str:
        """How many of them are in ``planted_ids``, the list that planted the planted model's
        stop-word preference, and what that means for the agreement with the planted heads."""
        overlap = len(set(self.ids.tolist()) & set(planted_ids))
        return (f"on the planted model, {overlap} of these {len(self.ids)} are in the list that "
                "planted the preference: the two definitions overlap, so agreement with the "
                "planted heads below is still largely by construction")


def stop_words(study: DenominatorStudy, count: int = 50) -> StopWords:
    """:class:`StopWords`: the ``count`` most frequent tokens of ``study``'s texts and their
    share of the texts' tokens."""
    ids = study.most_frequent(count)
    return StopWords(ids, float(study.probs[torch.isin(study.token_ids, ids)].sum()))
