"""Numbers as printed text that is the same on every machine.

The stored notebooks are compared character by character (nbval), so a printed number must not
depend on the BLAS build, the thread count or the floating-point precision that computed it.
Those change a result by a few units in the last place of float32: harmless at a fixed number of
decimals, but not for a quantity that is float rounding itself (``3.506e-08`` on one machine,
``3.615e-08`` on another). The rules, one function each:

- :func:`fixed`: an absolute precision, for any quantity that can be near zero (a TV distance, an
  error, a difference, a z-score). A value that rounds to zero prints without a sign (never
  ``-0.00``).
- :func:`significant`: significant digits, only for quantities bounded away from zero (a width in
  tokens, a frequency set by hand).
- :func:`below`: a quantity that should be float rounding (an exactness check's error) prints
  ``< 1e-5`` against a limit well above the rounding, and its value only if it exceeds it.
- :func:`frame`: a DataFrame's text with :func:`fixed` for every float column, or a format per
  column.

And one rule of layout: :func:`wrapped` breaks a printed sentence at :data:`TEXT_WIDTH`
characters, so that it fits the website's text column without sideways scrolling.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Mapping
from typing import SupportsFloat, Union

import pandas as pd

#: Characters of printed output that fit the website's text column at 1280 px (measured: a
#: line of 88 characters overflowed the column by 98 px).
TEXT_WIDTH = 74

#: A column's format in :func:`frame`: a number of decimals for :func:`fixed`, or a function.
Format = Union[int, Callable[[SupportsFloat], str]]


def fixed(value: SupportsFloat, decimals: int = 3, *, sign: bool = False) -> str:
    """``value`` (a float, or a NumPy or 0-d torch number) with ``decimals`` decimals (``sign``:
    always with ``+`` or ``-``), ``NaN`` for NaN.

    A value that rounds to zero prints as ``0.000`` whatever its sign, so ``-3e-9`` and ``2e-9``
    print alike.
    """
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return ("+" if sign and value > 0 else "") + ("inf" if value > 0 else "-inf")
    text = f"{value:.{decimals}f}"
    if float(text) == 0.0:  # "-0.000" and "0.000" are the same number
        text = f"{0.0:.{decimals}f}"
        return ("+" if sign else "") + text
    return f"{value:+.{decimals}f}" if sign else text


def significant(value: SupportsFloat, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits (``:g``): only for values far from zero, or
    exactly zero (a constant), never for a computed quantity that can be near zero."""
    value = float(value)
    if math.isnan(value):
        return "NaN"
    return f"{value:.{digits}g}"


def _power(limit: float) -> str:
    """``1e-05`` as ``1e-5``."""
    mantissa, exponent = f"{limit:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def below(value: SupportsFloat, limit: float) -> str:
    """``< limit`` when ``|value| < limit`` (the value is float rounding), else the value itself.

    Choose ``limit`` at least ten times above the rounding expected on any machine, so that the
    text does not change with it; a value above the limit is a real error and is printed.
    """
    value = float(value)
    if abs(value) < limit:
        return f"< {_power(limit)}"
    return f"{value:.2g}"


def frame(
    table: pd.DataFrame | pd.Series,
    decimals: int = 3,
    formats: Mapping[str, Format] | None = None,
    **to_string: object,
) -> str:
    """``table.to_string()`` with every float column at ``decimals`` fixed decimals.

    ``formats`` maps a column to its own number of decimals or to a function of the value (for
    example ``significant`` for a constant set by hand); other columns keep pandas' text. Extra
    keyword arguments go to ``to_string`` (``index=False``, ...).
    """
    formats = dict(formats or {})

    def formatter(spec: Format) -> Callable[[SupportsFloat], str]:
        if callable(spec):
            return spec
        return lambda v: fixed(v, spec)

    if isinstance(table, pd.Series):
        return table.to_string(float_format=formatter(formats.get(table.name, decimals)),
                               **to_string)
    by_column = {
        column: formatter(formats.get(column, decimals))
        for column in table.columns
        if column in formats or pd.api.types.is_float_dtype(table[column])
    }
    return table.to_string(formatters=by_column, **to_string)


def wrapped(text: str, width: int = TEXT_WIDTH, indent: str = "  ") -> str:
    """``text`` broken into lines of at most ``width`` characters (words are not split), the
    continuation lines indented by ``indent``."""
    return textwrap.fill(text, width=width, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False)
