"""The factors of the predicted spread of ``D`` per group. This module answers how far each factor
of the independent-token prediction of the CV of ``D`` ranges over each group's heads, and which
heads spread more across the texts than across i.i.d. texts (chapter 3, section 3.3)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from context_neurons.printing import fixed

#: The columns of :meth:`DenominatorStudy.table` whose range over a group's heads is reported.
RANGED = ("n_eff random", "random share", "sigma/mu", "CV predicted", "CV texts")
#: How many standard errors the CV on the texts must exceed the i.i.d. CV by to be reported.
EXCESS_STANDARD_ERRORS = 3


@dataclass(frozen=True)
class GroupRanges:
    """The range of each factor of the predicted CV of ``D`` over each group's heads.

    Attributes:
        table: one row per group (index ``group``, sorted), one column per name in
            :data:`RANGED`: ``"min .. max"`` over the group's heads, three decimals.
        excess: the heads whose ``CV texts`` exceeds their ``CV i.i.d.`` by more than
            :data:`EXCESS_STANDARD_ERRORS` times ``CV texts se``.
    """

    table: pd.DataFrame
    excess: list[int]

    def findings(self) -> list[str]:
        """The heads that spread more across the texts than across i.i.d. texts."""
        return [f"heads whose CV on texts exceeds the i.i.d. CV by more than "
                f"{EXCESS_STANDARD_ERRORS} standard errors: {self.excess}"]


def group_ranges(table: pd.DataFrame) -> GroupRanges:
    """:class:`GroupRanges` of :meth:`DenominatorStudy.table` with a ``group`` column added
    (each head's group in the taxonomy)."""
    summary = table.groupby("group")[list(RANGED)].agg(["min", "max"])
    ranges = pd.DataFrame(
        {
            column: [f"{fixed(low, 3)} .. {fixed(high, 3)}" for low, high in summary[column].values]
            for column in RANGED
        },
        index=summary.index,
    )
    above = table["CV texts"] - table["CV i.i.d."] > EXCESS_STANDARD_ERRORS * table["CV texts se"]
    return GroupRanges(ranges, table.index[above].tolist())


__all__ = ["EXCESS_STANDARD_ERRORS", "RANGED", "GroupRanges", "group_ranges"]
