"""Tail bounds. This module holds the theory of chapter 3: moments and bounds of a kernel-weighted
sum of independent content weights (Hoeffding, Chebyshev), and their empirical counterparts."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from jaxtyping import Float
from torch import Tensor


def sum_of_squares(kernel: Float[Tensor, "... key_pos"]) -> Float[Tensor, "..."]:
    """``sum_i pos(i)^2`` (``1 / n_eff``) of each kernel row."""
    return (kernel.double() ** 2).sum(-1)


def iid_moments(
    values: Float[Tensor, " n_values"], probs: Float[Tensor, " n_values"]
) -> tuple[float, float]:
    """Mean and variance of a discrete distribution (values with probabilities)."""
    values, probs = values.double(), probs.double() / probs.double().sum()
    mean = float((probs * values).sum())
    return mean, float((probs * (values - mean) ** 2).sum())


def weighted_sum_variance(kernel: Float[Tensor, " key_pos"], variance: float) -> float:
    """``Var[sum_i pos(i) X_i] = sigma^2 sum_i pos(i)^2`` for independent ``X_i`` of variance
    ``sigma^2``."""
    return variance * float(sum_of_squares(kernel))


def hoeffding_bound(
    t: Float[Tensor, " n_t"], sum_sq: float, low: float, high: float
) -> Float[Tensor, " n_t"]:
    """Hoeffding: ``P(|D - E D| >= t) <= 2 exp(-2 t^2 / ((b - a)^2 sum pos^2))``, capped at one.

    Args:
        t: deviations (same units as ``low`` and ``high``).
        sum_sq: ``sum_i pos(i)^2`` over the random terms.
        low, high: the range ``[a, b]`` of each weight.
    """
    t = torch.as_tensor(t, dtype=torch.float64)
    return (2 * torch.exp(-2 * t**2 / ((high - low) ** 2 * sum_sq))).clamp(max=1.0)


def chebyshev_bound(
    t: Float[Tensor, " n_t"], sum_sq: float, variance: float
) -> Float[Tensor, " n_t"]:
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
    deviations: Float[Tensor, " n_samples"], t: Float[Tensor, " n_t"]
) -> Float[Tensor, " n_t"]:
    """Empirical ``P(|deviation| >= t)`` for each ``t``."""
    t = torch.as_tensor(t, dtype=torch.float64)
    return (deviations.double().abs()[:, None] >= t[None]).double().mean(0)


def cv_standard_error(
    mean: float, variance: float, third_moment: float, fourth_cumulant: float, n_samples: int
) -> float:
    """Standard error of the coefficient of variation ``sd / mean`` estimated from ``n_samples``
    independent draws of a distribution with these moments (the delta method).

    With sample mean ``m`` and sample standard deviation ``s`` of ``N`` draws,
    ``Var[m] = sigma^2 / N``, ``Var[s] ~ (kappa_4 + 2 sigma^4) / (4 sigma^2 N)`` and
    ``Cov[m, s] ~ mu_3 / (2 sigma N)``, so ``Var[s / m] ~ Var[s] / mu^2
    + sigma^2 Var[m] / mu^4 - 2 sigma Cov[m, s] / mu^3``. Heavy tails enter through the fourth
    cumulant ``kappa_4``, skewness through the third central moment ``mu_3``.

    Args:
        mean: the distribution's mean ``mu`` (nonzero).
        variance: its variance ``sigma^2`` (positive).
        third_moment: its third central moment ``mu_3``.
        fourth_cumulant: its fourth cumulant ``kappa_4 = mu_4 - 3 sigma^4``.
        n_samples: the number of draws ``N``.
    """
    if variance <= 0 or mean == 0 or n_samples < 2:
        raise ValueError(
            f"Need a positive variance, a nonzero mean and at least two samples, got {variance}, "
            f"{mean}, {n_samples}."
        )
    sd = math.sqrt(variance)
    var_mean = variance / n_samples
    var_sd = (fourth_cumulant + 2 * variance**2) / (4 * variance * n_samples)
    cov = third_moment / (2 * sd * n_samples)
    var_cv = var_sd / mean**2 + variance * var_mean / mean**4 - 2 * sd * cov / mean**3
    return math.sqrt(max(var_cv, 0.0))


def weighted_sum_cumulants(
    kernel: Float[Tensor, " key_pos"], values: Float[Tensor, " n_values"], probs: Float[Tensor, " n_values"]
) -> tuple[float, float, float]:
    """Variance, third central moment and fourth cumulant of ``sum_i pos(i) X_i`` for ``X_i``
    i.i.d. from ``(values, probs)``: cumulants of independent terms add, ``kappa_r(sum) =
    kappa_r(X) sum_i pos(i)^r`` (the third central moment is the third cumulant)."""
    values, probs = values.double().cpu(), probs.double().cpu() / probs.double().sum()
    kernel = kernel.double().cpu()
    deviation = values - (probs * values).sum()
    var_x = float((probs * deviation**2).sum())
    third_x = float((probs * deviation**3).sum())
    kappa4_x = float((probs * deviation**4).sum()) - 3 * var_x**2
    return (
        var_x * float((kernel**2).sum()),
        third_x * float((kernel**3).sum()),
        kappa4_x * float((kernel**4).sum()),
    )


def coefficient_of_variation(x: Float[Tensor, " n_samples"]) -> float:
    """Standard deviation over mean."""
    x = x.double()
    return float(x.std() / x.mean())


def bootstrap_standard_error(
    x: Float[Tensor, " n_samples"],
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
    kernel: Float[Tensor, " key_pos"],
    values: Float[Tensor, " n_values"],
    probs: Float[Tensor, " n_values"],
    n_samples: int,
    seed: int = 0,
) -> Float[Tensor, " n_samples"]:
    """Monte Carlo draws of ``sum_i pos(i) X_i`` with ``X_i`` i.i.d. from ``(values, probs)``."""
    gen = torch.Generator().manual_seed(seed)
    draws = torch.multinomial(
        probs.double().cpu(), n_samples * len(kernel), replacement=True, generator=gen
    ).view(n_samples, len(kernel))
    return values.double().cpu()[draws] @ kernel.double().cpu()


def correlation(x: Float[Tensor, " n"], y: Float[Tensor, " n"]) -> float:
    """Pearson correlation."""
    x, y = x.double() - x.double().mean(), y.double() - y.double().mean()
    return float((x * y).sum() / (x.norm() * y.norm()))
