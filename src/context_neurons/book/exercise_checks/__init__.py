"""Exercise checks: for each exercise of the book, a check the student's notebook runs.

``%%exercise --check LABEL`` (:mod:`context_neurons.book.exercises`) runs the cell, then
:func:`run_check` with the student's namespace: "correct", or what differs (type, shape, a value
beyond the stated tolerance, a property that fails) with a hint that does not give the answer
away. Each check computes its reference with the package on the reader's own model and text at
run time, never from a stored number, so it holds on GPT-2 Small, the planted model and the
trained model alike; a function the student writes is called on other inputs than the chapter's.
One module per chapter registers its checks in :data:`CHECKS`, keyed by exercise label.
"""

from __future__ import annotations

from context_neurons.book.exercise_checks import appendix_planted_model  # noqa: F401 (registers)
from context_neurons.book.exercise_checks import ch01_decomposition  # noqa: F401
from context_neurons.book.exercise_checks import ch02_taxonomy  # noqa: F401
from context_neurons.book.exercise_checks import ch03_stability  # noqa: F401
from context_neurons.book.exercise_checks import ch04_circuit  # noqa: F401
from context_neurons.book.exercise_checks import ch05_neurons  # noqa: F401
from context_neurons.book.exercise_checks import ch06_evaluation  # noqa: F401
from context_neurons.book.exercise_checks import ch07_lookups  # noqa: F401
from context_neurons.book.exercise_checks import ch08_trained_model  # noqa: F401
from context_neurons.book.exercise_checks import ch09_open_questions  # noqa: F401
from context_neurons.book.exercise_checks.registry import (
    CHECKS, FAILED, FUNCTION, PROPERTY, SOLVED, UNSOLVED, VALUE, Check, Verdict, run_check,
)

__all__ = ["CHECKS", "FAILED", "FUNCTION", "PROPERTY", "SOLVED", "UNSOLVED", "VALUE", "Check",
           "Verdict", "run_check"]
