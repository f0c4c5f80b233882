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

And two rules of layout, so that every output fits the website's text column (1280 px) without
sideways scrolling: :func:`wrapped` breaks a printed sentence at :data:`TEXT_WIDTH` characters
(:func:`wrapped_items` a list between its items, never inside a token such as ``' the'``), and a
result table is shown with :func:`show_table` as a rendered HTML table (its cells wrap) whose
caption names the model that produced it; its text form (:func:`frame`) stays the fallback
outside a notebook.
"""

from __future__ import annotations

import html
import json
import math
import re
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
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
    if isinstance(table, pd.Series):
        spec = (formats or {}).get(table.name, decimals)
        return table.to_string(float_format=_formatter(spec), **to_string)
    return table.to_string(formatters=_column_formatters(table, decimals, formats), **to_string)


def _formatter(spec: Format) -> Callable[[SupportsFloat], str]:
    """A format spec (decimals or a function) as a function of the value."""
    if callable(spec):
        return spec
    return lambda value: fixed(value, spec)


def _column_formatters(
    table: pd.DataFrame, decimals: int, formats: Mapping[str, Format] | None
) -> dict[object, Callable[[SupportsFloat], str]]:
    """One formatter per float column (``decimals``) and per column named in ``formats``."""
    formats = dict(formats or {})
    return {
        column: _formatter(formats.get(column, decimals))
        for column in table.columns
        if column in formats or pd.api.types.is_float_dtype(table[column])
    }


def wrapped(text: str, width: int = TEXT_WIDTH, indent: str = "  ") -> str:
    """``text`` broken into lines of at most ``width`` characters (words are not split), the
    continuation lines indented by ``indent``."""
    return textwrap.fill(text, width=width, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False)


def number_cell(value: SupportsFloat) -> str:
    """A number as a table cell: a count as it is; a magnitude of 100 or more (a large ratio) to
    4 significant digits; anything else to 4 decimals (fixed: alike on every machine)."""
    if isinstance(value, int):
        return str(value)
    return significant(value, 4) if abs(float(value)) >= 100 else fixed(value, 4)


def nested_lines(entries: Mapping, indent: str = "") -> list[str]:
    """Nested keys as indented lines, each value wrapped to the text width (a string as it is,
    anything else as JSON): a protocol's rules printed as they stand in its file."""
    lines = []
    for key, value in entries.items():
        if isinstance(value, Mapping):
            lines += [f"{indent}{key}:", *nested_lines(value, indent + "  ")]
        else:
            text = value if isinstance(value, str) else json.dumps(value)
            lines.append(wrapped(f"{indent}{key}: {text}", indent=indent + "    "))
    return lines


def wrapped_items(prefix: str, items, separator: str = "", indent: str = "  ",
                  width: int = TEXT_WIDTH) -> str:
    """``prefix`` then ``items`` on lines of at most ``width`` characters, breaking only between
    items, so an item with spaces inside (a token such as ``' the'``, a text's name) is never
    split; ``separator`` follows each item but the last. An item longer than a line gets its own."""
    items = [str(item) for item in items]
    items = [f"{item}{separator}" for item in items[:-1]] + items[-1:]
    lines, line = [], prefix.rstrip()
    for item in items:
        if len(line) + 1 + len(item) > width and line.strip():
            lines.append(line)
            line = indent + item
        else:
            line = f"{line} {item}" if line else item
    return "\n".join(lines + [line])


@dataclass(frozen=True)
class Table:
    """A result table that names the model that produced it.

    In a notebook (Jupyter, Colab, the website) it renders as an HTML table whose caption is
    ``"<model>: <caption>"`` and whose cells wrap to the text column; as text (``repr``, a
    terminal) it is the caption over :func:`frame`'s text. Numbers are formatted as in
    :func:`frame` in both forms, so the stored outputs compare alike on every machine.
    """

    data: pd.DataFrame
    caption: str
    model: str
    decimals: int = 3
    formats: Mapping[str, Format] = field(default_factory=dict)
    index: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.data, pd.Series):
            object.__setattr__(self, "data", self.data.to_frame())
        if not self.model.strip():
            raise ValueError("a result table names the model that produced it: model is empty")

    @property
    def title(self) -> str:
        """The caption with the model's name in front."""
        return f"{self.model}: {self.caption}"

    def __repr__(self) -> str:
        text = frame(self.data, self.decimals, self.formats, index=self.index)
        return f"{wrapped(self.title, indent='')}\n{text}"

    def _repr_html_(self) -> str:
        formatters = _column_formatters(self.data, self.decimals, self.formats)
        body = self.data.to_html(formatters=formatters, index=self.index, border=0,
                                 classes="result-table", na_rep="NaN")
        caption = f"<caption>{html.escape(self.title)}</caption>"
        return re.sub(r"(<table[^>]*>)", lambda m: m.group(1) + caption, body, count=1)


def show_table(
    data: pd.DataFrame | pd.Series,
    caption: str,
    *,
    model: str,
    decimals: int = 3,
    formats: Mapping[str, Format] | None = None,
    index: bool = True,
) -> None:
    """Display ``data`` as a :class:`Table` captioned ``"<model>: <caption>"`` (in a notebook as
    HTML, elsewhere printed as text). ``model`` is the name of the model that made the numbers
    (``loaded.title``), or ``"GPT-2 Small (paper)"`` for the paper's. Returns nothing, so that a
    call ending a cell is not shown twice."""
    table = Table(data, caption, model, decimals, dict(formats or {}), index)
    if ipython_shell() is None:  # a terminal
        print(repr(table))
        return
    from IPython.display import display  # present: an IPython shell runs this code

    display(table)


def ipython_shell():
    """The IPython shell running this code (Jupyter, Colab, the website's kernels), or None in a
    terminal or where IPython is not installed (it comes with the "book" extra)."""
    try:  # optional: only the book's notebooks need it
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()
