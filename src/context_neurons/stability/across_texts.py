"""Across texts. This module summarises how the denominators vary from one text to another
(chapter 3): quantile intervals of ``D/c``, and how much of ``log D`` a kernel's stop-word share
explains, on general prose against another kind of text."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from context_neurons.printing import fixed
from context_neurons.stability.bounds import correlation
from context_neurons.stability.study import DenominatorStudy

#: The columns of :func:`density_effect`; the first three are signed (printed with their sign).
DENSITY_COLUMNS = ["preference", "corr(share, log D)", "slope of log D on share",
                   "mean D/mu: prose", "mean D/mu: Bible"]


def quantile_intervals(
    relative: Float[Tensor, "text head pos"],
    heads: list[int],
    positions: Int[Tensor, " pos"],
    start: int,
) -> pd.DataFrame:
    """Per head, the 5% and 95% quantiles of ``D/c`` over texts and positions: over every
    position drawn (from 1 on), and from ``start`` on (a column each, printed ``[low, high]``)."""
    drawn, late = positions >= 1, positions >= start
    intervals = {}
    for k, head in enumerate(heads):
        ranges = [
            relative[:, k, keep].quantile(torch.tensor([0.05, 0.95], dtype=relative.dtype))
            for keep in (drawn, late)
        ]
        intervals[head] = [f"[{low:.3f}, {high:.3f}]" for low, high in ranges]
    return pd.DataFrame.from_dict(
        intervals,
        orient="index",
        columns=[f"positions {int(positions[keep][0])}..{int(positions[-1])}"
                 for keep in (drawn, late)],
    ).rename_axis("head")


def density_effect(
    study: DenominatorStudy,
    density: Float[Tensor, "text head"],
    other: Bool[Tensor, " text"],
    heads: list[int],
    preference: dict[int, float],
) -> pd.DataFrame:
    """Per head (in the order given): its stop-word preference, the correlation of the kernel's
    stop-word share with ``log D`` over the texts, the least-squares slope of ``log D`` on the
    share, and the mean ``D/mu`` on prose and on the ``other`` texts (:data:`DENSITY_COLUMNS`)."""
    rows = {}
    for head in heads:
        k = study.row(head)
        log_d_texts = study.measured(head).log()
        share = density[:, k]
        r = correlation(share, log_d_texts)
        slope = float(r * log_d_texts.std() / share.std())
        prose_mean = study.measured(head)[~other].mean()
        other_mean = study.measured(head)[other].mean()
        rows[head] = [preference[head], float(r), slope, float(prose_mean), float(other_mean)]
    return pd.DataFrame.from_dict(rows, orient="index", columns=DENSITY_COLUMNS).rename_axis("head")


def signed_formats() -> dict:
    """Formats of :func:`density_effect`'s signed columns (two decimals with a sign)."""
    return {name: lambda value: fixed(value, 2, sign=True) for name in DENSITY_COLUMNS[:3]}


@dataclass(frozen=True)
class ShareSpread:
    """How much one head's stop-word share varies between texts, and how much of ``log D`` it
    accounts for."""

    quantiles: pd.DataFrame  # per kind of text: median, 5%, 95% of the share
    log_d_sd: float  # sd of log D over all the texts
    r: float  # correlation of the share with log D
    explained: float  # |r| sd: the part of that sd the share accounts for

    def finding(self) -> str:
        """The share's part of the spread of ``log D``, in one sentence."""
        return (f"sd of log D over these texts {self.log_d_sd:.3f}; the share accounts for "
                f"{self.explained:.3f} of it (r^2 = {self.r**2:.2f})")


def share_spread(study: DenominatorStudy, density: Float[Tensor, "text head"],
                 other: Bool[Tensor, " text"], head: int, other_name: str) -> ShareSpread:
    """:class:`ShareSpread` of ``head`` over prose, the ``other`` texts and all of them."""
    k = study.row(head)
    quantiles = torch.tensor([0.05, 0.5, 0.95], dtype=torch.float64)
    shares = {}
    for name, keep in (("prose", ~other), (other_name, other), ("all", torch.ones_like(other))):
        low, mid, high = torch.quantile(density[keep, k].double(), quantiles).tolist()
        shares[name] = [mid, low, high]
    table = pd.DataFrame.from_dict(shares, orient="index", columns=["median", "5%", "95%"])
    log_d = study.measured(head).log()
    r = correlation(density[:, k], log_d)
    return ShareSpread(table, float(log_d.std()), r, float(abs(r) * log_d.std()))


__all__ = ["DENSITY_COLUMNS", "ShareSpread", "density_effect", "quantile_intervals",
           "share_spread", "signed_formats"]
