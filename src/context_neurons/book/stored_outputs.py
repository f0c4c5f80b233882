"""How a stored output is compared with a fresh one: the text exactly, the numbers within the
noise another CPU's float32 arithmetic adds to their last printed digit.

Two CPUs (or two kernel paths of one CPU) round float32 matmuls, GELUs and LayerNorms
differently, so a number printed with a few decimals can come out one unit of its last digit
apart (94.119 against 94.118). nbval compares outputs character by character; the notebooks'
conftest replaces that comparison with :func:`output_difference`, which

- splits each output into numbers and the text between them;
- requires the text to be identical, except that a run of white space counts as one space (a
  padded column or a wrapped line may shift when a number changes width: 9.999 against 10.001),
  and the same count of numbers (an added row, a changed word or caption fails);
- requires integers (no decimal point, no exponent) to be equal: counts and indices are exact;
- accepts two decimal numbers within :data:`LAST_DIGIT_UNITS` units of the last printed digit
  of the coarser one, or within a relative :data:`RELATIVE_TOLERANCE`, whichever is larger.

A number glued to a word or to another number (``ch05``, ``v2``, ``4.3.0``) is part of the text
and compared exactly. The tolerance is stated once, here, and in ``book/rebuilding.md``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: A decimal number is accepted within this many units of its last printed digit ...
LAST_DIGIT_UNITS = 2
#: ... or within this relative difference, whichever is larger.
RELATIVE_TOLERANCE = 1e-3

#: A number standing on its own: not preceded by a letter, digit, underscore or dot, and not
#: followed by one (a sentence's final dot is allowed).
NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?!\w|\.\d)")
SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class PrintedNumber:
    """A number as printed: its value, and the size of one unit of its last digit (``None`` for
    an integer, which must match exactly)."""

    text: str
    value: float
    unit: float | None

    @classmethod
    def parse(cls, text: str) -> PrintedNumber:
        mantissa, _, exponent = text.lower().partition("e")
        decimals = len(mantissa.partition(".")[2])
        if "." not in mantissa and not exponent:
            return cls(text, float(text), None)
        return cls(text, float(text), 10.0 ** (int(exponent or 0) - decimals))


def split_numbers(text: str) -> tuple[list[str], list[PrintedNumber]]:
    """The text between numbers (white space collapsed) and the numbers, in order."""
    pieces = NUMBER.split(text)  # no groups in NUMBER: only the text between numbers
    between = [SPACES.sub(" ", piece) for piece in pieces]
    return between, [PrintedNumber.parse(m.group()) for m in NUMBER.finditer(text)]


def numbers_agree(stored: PrintedNumber, fresh: PrintedNumber) -> bool:
    """Integers equal; decimals within the stated tolerance of the coarser printed precision."""
    if stored.unit is None or fresh.unit is None:
        return stored.unit is None and fresh.unit is None and stored.value == fresh.value
    tolerance = max(
        LAST_DIGIT_UNITS * max(stored.unit, fresh.unit),
        RELATIVE_TOLERANCE * max(abs(stored.value), abs(fresh.value)),
    )
    return abs(stored.value - fresh.value) <= tolerance * (1 + 1e-9)


def output_difference(stored: object, fresh: object) -> str | None:
    """``None`` when ``fresh`` matches ``stored`` as above, else one line saying where it
    differs. Anything but strings (a JSON output) must be equal."""
    if not isinstance(stored, str) or not isinstance(fresh, str):
        return None if stored == fresh else "the outputs differ"
    stored_text, stored_numbers = split_numbers(stored)
    fresh_text, fresh_numbers = split_numbers(fresh)
    if len(stored_numbers) != len(fresh_numbers):
        return f"{len(stored_numbers)} numbers stored, {len(fresh_numbers)} now"
    for k, (was, now) in enumerate(zip(stored_text, fresh_text)):
        if was != now:
            where = f"before number {k + 1}" if k < len(stored_numbers) else "after the last number"
            where = where if stored_numbers else "(no numbers)"
            return f"the text {where} differs: {was!r} stored, {now!r} now"
    for k, (was, now) in enumerate(zip(stored_numbers, fresh_numbers), 1):
        if not numbers_agree(was, now):
            return f"number {k} differs beyond the tolerance: {was.text} stored, {now.text} now"
    return None
