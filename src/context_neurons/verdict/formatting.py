"""How every protocol's results are written and read back: a result with its interval in words,
``0.924 [0.891, 0.940]`` at fixed decimals, "undefined" where a value is NaN or missing (issue 51:
v1's ``with_interval`` and v3's ``interval_text`` were two formatters; v1's printed NaN where v3
printed "undefined"); and a typed result's JSON fields read back with the NaN that JSON wrote as
null (:func:`read_json_fields`)."""

from __future__ import annotations

import math
from dataclasses import fields

from context_neurons.printing import fixed


def number_text(value: float | None, decimals: int = 3) -> str:
    """``value`` at fixed decimals; "undefined" for NaN (an AUC over an empty truth) or None
    (the same read from JSON)."""
    return "undefined" if value is None or math.isnan(value) else fixed(value, decimals)


def bounds_text(interval: list, decimals: int = 3) -> str:
    """``[0.891, 0.940]``: a 95% interval at fixed decimals (``undefined`` for a missing bound)."""
    low, high = interval
    return f"[{number_text(low, decimals)}, {number_text(high, decimals)}]"


def interval_text(value: float | None, interval: list, decimals: int = 3) -> str:
    """``0.924 [0.891, 0.940]``: a value and its 95% interval at fixed decimals."""
    return f"{number_text(value, decimals)} {bounds_text(interval, decimals)}"


def read_json_fields(cls: type, data: dict) -> dict:
    """``data`` (a dataclass's ``to_json``, read back) with the NaN JSON could not hold: a
    ``float`` field written as null (an undefined AUC, say) is NaN again, and so is a null inside
    a ``list[float]`` interval."""
    kinds = {f.name: f.type for f in fields(cls)}
    out = dict(data)
    for name, value in data.items():
        if kinds.get(name) == "float" and value is None:
            out[name] = math.nan
        elif kinds.get(name) == "list[float]" and isinstance(value, list):
            out[name] = [math.nan if x is None else x for x in value]
    return out


__all__ = ["bounds_text", "interval_text", "number_text", "read_json_fields"]
