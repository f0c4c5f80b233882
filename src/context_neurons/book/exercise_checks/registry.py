"""The registry of exercise checks: what a check is, how it reports, and the comparisons it uses.

A check is a function of the student's namespace (the notebook's variables after the exercise
cell ran). It computes its reference with the package, on the reader's own model and text, at run
time, and raises :class:`Differs` with what differs and a hint that does not give the answer
away; returning means correct. :func:`run_check` turns that into a :class:`Verdict`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

SOLVED, UNSOLVED, FAILED = "solved", "not yet solved", "check failed"
#: Kinds of check: a value against the package's, a function on other inputs, properties only.
VALUE, FUNCTION, PROPERTY = "value", "function", "property"


class Differs(Exception):
    """The student's answer differs from the reference (the message says what, and a hint)."""


class Missing(Exception):
    """A name the check reads is not defined yet (or still ``...``)."""


@dataclass(frozen=True)
class Check:
    """One exercise's check: ``label`` of the exercise, what it ``reads`` (name -> what it is),
    its ``kind``, what it compares (``summary``) and, for open-ended exercises, what only the
    solution on the website can judge (``website``)."""

    label: str
    kind: str
    reads: dict[str, str]
    summary: str
    function: Callable[[dict], str | None]
    website: str = ""


@dataclass(frozen=True)
class Verdict:
    """The outcome of a check: ``status`` (solved, not yet solved, check failed) and a message."""

    status: str
    message: str

    @property
    def correct(self) -> bool:
        return self.status == SOLVED


CHECKS: dict[str, Check] = {}


def register(label: str, kind: str, reads: dict[str, str], summary: str, website: str = ""):
    """Decorator: register ``function`` as the check of exercise ``label``."""

    def add(function: Callable[[dict], str | None]) -> Callable[[dict], str | None]:
        CHECKS[label] = Check(label, kind, reads, summary, function, website)
        return function

    return add


def run_check(label: str, namespace: dict) -> Verdict:
    """Run exercise ``label``'s check on ``namespace``; never raises."""
    check = CHECKS[label]
    try:
        note = check.function(_Names(namespace))
    except Missing as missing:
        return Verdict(UNSOLVED, f"Not yet solved: {missing}")
    except Differs as differs:
        return Verdict(FAILED, f"Not correct yet: {differs}")
    except Exception as error:  # a student's value of the wrong kind, or a context not run
        return Verdict(FAILED, f"Not correct yet: the check stopped on {type(error).__name__}: "
                               f"{error}. Run the chapter's cells above this one, then this one.")
    message = "Correct" + (f": {note}" if note else ".")
    if check.website:
        message += f"\n{check.website}"
    return Verdict(SOLVED, message)


class _Names(dict):
    """The namespace, read through ``[]``: a missing name raises :class:`Missing`."""

    def __init__(self, namespace: dict):
        super().__init__(namespace)

    def __missing__(self, name: str):
        raise Missing(f"define `{name}`.")

    def __getitem__(self, name: str):
        value = super().__getitem__(name)
        if value is Ellipsis:
            raise Missing(f"replace the ... given to `{name}`.")
        return value


def tensor(name: str, value, shape: tuple[int, ...] | None = None) -> torch.Tensor:
    """``value`` as a float tensor on the CPU, of ``shape`` when given (else :class:`Differs`)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = torch.tensor(float(value))
    if not isinstance(value, torch.Tensor):
        try:
            value = torch.as_tensor(value)
        except (TypeError, ValueError, RuntimeError):
            raise Differs(f"`{name}` is a {type(value).__name__}, not a tensor or a number.")
    if shape is not None and tuple(value.shape) != tuple(shape):
        raise Differs(f"`{name}` has shape {tuple(value.shape)}; expected {tuple(shape)}.")
    return value.detach().double().cpu()


def number(name: str, value) -> float:
    """``value`` as a float: a number or a tensor of one element (else :class:`Differs`)."""
    value = tensor(name, value)
    if value.numel() != 1:
        raise Differs(f"`{name}` holds {value.numel()} numbers; expected one (a scalar).")
    return float(value.reshape(()))


def close(name: str, value, reference, *, rtol: float = 1e-4, atol: float = 0.0,
          hint: str = "") -> None:
    """Raise :class:`Differs` when ``value`` is not ``reference`` within ``atol + rtol |ref|``."""
    reference = tensor("reference", reference)
    value = tensor(name, value, tuple(reference.shape))
    allowed = atol + rtol * reference.abs()
    off = (value - reference).abs() > allowed
    if bool(off.any()) or bool(value.isnan().any() != reference.isnan().any()):
        where = off.nonzero()[0].tolist() if bool(off.any()) else []
        at = f" at index {tuple(where)}" if where else ""
        got = value[tuple(where)] if where else value
        want = reference[tuple(where)] if where else reference
        raise Differs(f"`{name}`{at} is {_show(got)} where the package gives {_show(want)} "
                      f"(tolerance {_show(atol)} + {rtol:g} x |value|)." + (f" Hint: {hint}"
                                                                             if hint else ""))


def holds(condition: bool, message: str) -> None:
    """Raise :class:`Differs` with ``message`` unless ``condition``."""
    if not condition:
        raise Differs(message)


def _show(value) -> str:
    value = torch.as_tensor(value)
    if value.numel() == 1:
        return f"{float(value):.6g}"
    return f"a tensor of shape {tuple(value.shape)}"


def first(ns: dict, *names: str):
    """The first of ``names`` defined in ``ns`` (the stub's name and the solution's)."""
    for name in names[:-1]:
        if name in ns and ns.get(name) is not Ellipsis:
            return name, ns[name]
    return names[-1], ns[names[-1]]
