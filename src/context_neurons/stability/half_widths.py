"""Tail bounds against the texts. This module answers how the 95% half-widths of ``D/mu`` that
Chebyshev's and Hoeffding's bounds give compare with the measured ones (chapter 3, section 3.4):
whether each bound covers the texts and the i.i.d. texts, which bound is the narrower, and by
what factor each exceeds the measured half-width."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

#: The two tail bounds, in the order of the columns.
BOUNDS = ("Chebyshev", "Hoeffding")
#: The groups whose ratios of bound to measured half-width are reported.
RATIO_GROUPS = ("contextual", "detokenization")


@dataclass(frozen=True)
class HalfWidths:
    """The half-width ``t`` of a 95% interval of ``D/mu`` per head, from each bound and measured.

    ``table`` has one row per head: its ``group``, ``t Chebyshev``, ``t Hoeffding``, ``t texts``
    and ``t i.i.d.`` (the first five columns), then for each bound whether its half-width covers
    the measured one, ``<bound> covers texts`` and ``<bound> covers i.i.d.``.
    """

    table: pd.DataFrame

    def findings(self) -> list[str]:
        """For how many heads Chebyshev's half-width is the narrower one, then, for the
        contextual and the detokenization heads, the range of each bound's half-width in units
        of the measured one."""
        widths = self.table
        tighter = (widths["t Chebyshev"] < widths["t Hoeffding"]).sum()
        lines = [f"Chebyshev's 95% half-width is the narrower of the two for {tighter} of "
                 f"{len(widths)} heads"]
        for group in RATIO_GROUPS:
            rows = widths[widths["group"] == group]
            for bound in BOUNDS:
                ratios = rows[f"t {bound}"] / rows["t texts"]
                if len(ratios):
                    lines.append(f"{group}: {bound}'s half-width is {ratios.min():.1f} to "
                                 f"{ratios.max():.1f} times the measured one")
        return lines


def interval_half_widths(table: pd.DataFrame) -> HalfWidths:
    """:class:`HalfWidths` from :meth:`DenominatorStudy.table` (``prob=0.05``) with a ``group``
    column added (each head's group in the taxonomy)."""
    widths = table[["group", "t Chebyshev", "t Hoeffding", "t texts", "t i.i.d."]].copy()
    for bound in BOUNDS:
        widths[f"{bound} covers texts"] = widths[f"t {bound}"] >= widths["t texts"]
        widths[f"{bound} covers i.i.d."] = widths[f"t {bound}"] >= widths["t i.i.d."]
    return HalfWidths(widths)


__all__ = ["BOUNDS", "RATIO_GROUPS", "HalfWidths", "interval_half_widths"]
