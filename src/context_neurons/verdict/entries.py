"""A registered model's entry. This module types why a model a protocol registers has no result.

A protocol that registers models (v3: ``models``) reports every one of them, never leaving one
out: its result (computed in this run, or stored), or why it has none. Each reason is a value of
its own (:class:`Pending`, :class:`NotEvaluated`, :class:`NotComparable`, :class:`StaleStored`)
with its :class:`EntryStatus` and the reason as a field, so that no reader parses it back out
of text. Each prints, and goes to the JSON, as the one line it was written as before it was
typed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar


class EntryStatus(StrEnum):
    """Where a registered model's entry comes from, in the words the reports print."""

    THIS_RUN = "this run"
    STORED = "stored"
    PENDING = "pending"
    NOT_EVALUATED = "not evaluated in this run"
    NOT_COMPARABLE = "not comparable"
    STALE = "stored result not used"


@dataclass(frozen=True)
class NoResult:
    """A registered model without a result: its status, and why (``reason``). Each kind is a
    subclass that sets its ``status`` (the fields, equality and immutability are this one's)."""

    reason: str
    status: ClassVar[EntryStatus]

    def __str__(self) -> str:
        return f"{self.status}: {self.reason}"

    def to_json(self) -> str:
        """The entry in the JSON: its line."""
        return str(self)


class Pending(NoResult):
    """Not trained yet, or its result not yet brought back from where it was computed."""

    status: ClassVar[EntryStatus] = EntryStatus.PENDING


class NotEvaluated(NoResult):
    """In the package, but neither evaluated in this run nor stored (``reason``: how to)."""

    status: ClassVar[EntryStatus] = EntryStatus.NOT_EVALUATED

    def __str__(self) -> str:
        return f"{self.status} ({self.reason})"


class NotComparable(NoResult):
    """Trained otherwise than the protocol compares (its ``comparable_when``)."""

    status: ClassVar[EntryStatus] = EntryStatus.NOT_COMPARABLE


class StaleStored(NoResult):
    """A stored result whose model or protocol changed since it was computed."""

    status: ClassVar[EntryStatus] = EntryStatus.STALE


__all__ = ["EntryStatus", "NoResult", "NotComparable", "NotEvaluated", "Pending", "StaleStored"]
