"""Exercise cells of the student notebooks. This module keeps "Run all" going past an unsolved one.

A student notebook (:mod:`.students`) gives each exercise a code cell holding its stub, which does
not run as it is: it names what the solution defines, or leaves ``...`` where the student writes
code. The notebook loads this module as an IPython extension (``%load_ext
context_neurons.book.exercises``) and starts every exercise cell with the cell magic
``%%exercise``, which runs the cell's code in the notebook's namespace and, where it raises,
leaves a value ``...`` (or a function whose body is ``...``) or holds nothing but comments (an
open-ended exercise's template), prints that the exercise is *not yet solved* instead of raising. Every later cell therefore still runs, as in ARENA's notebooks.
Deleting the ``%%exercise`` line shows an error in full.

A chapter cell that reads what a removed solution defined starts with ``%%exercise --needs NAME
...``: it is skipped, with a message, while one of those names is missing or still ``...``.

An exercise cell starts with ``%%exercise --check LABEL``: once the cell ran and left nothing
unfinished, the exercise's check (:mod:`.exercise_checks`) runs on the notebook's namespace and
prints "Correct" or what differs. Each outcome is recorded in :data:`STATUS`, which the last cell
of a student notebook prints for the teacher (:func:`exercise_table`).
"""

from __future__ import annotations

import ast
import shlex
import sys
import traceback

from context_neurons.book.exercise_checks import CHECKS, FAILED, SOLVED, UNSOLVED as NOT_SOLVED
from context_neurons.book.exercise_checks import run_check

MAGIC = "exercise"
FILENAME = "<exercise cell>"
UNSOLVED = "Not yet solved"
CONTAINERS = (list, tuple, set, frozenset)
#: Exercise label -> solved, not yet solved or check failed: what this kernel's cells gave.
STATUS: dict[str, str] = {}


def load_ipython_extension(ipython) -> None:
    """Register ``%%exercise`` (on ``%load_ext context_neurons.book.exercises``)."""

    def exercise(line: str, cell: str) -> None:
        run_exercise_cell(ipython, line, cell)

    ipython.register_magic_function(exercise, magic_kind="cell", magic_name=MAGIC)


def run_exercise_cell(shell, line: str, cell: str) -> str | None:
    """Run an exercise cell in ``shell``'s namespace; returns (and prints) what is left to do.

    ``line`` is the rest of the magic's line: ``--check LABEL`` and ``--needs NAME ...``.
    Returns None when the cell ran, left nothing unfinished and its check (if any) passed.
    """
    label = parse_option(line, "--check")
    left = _run_cell(shell, line, cell)
    if label not in CHECKS:  # no --check, or a label with no check: the cell alone
        return left
    if left is not None:
        STATUS[label] = NOT_SOLVED
        return left
    verdict = run_check(label, shell.user_ns)
    STATUS[label] = verdict.status
    print(verdict.message)
    return None if verdict.correct else verdict.message


def _run_cell(shell, line: str, cell: str) -> str | None:
    """Run the cell's code; returns (and prints) what is left to do, None when nothing is."""
    needs = parse_needs(line)
    namespace = shell.user_ns
    missing = [name for name in needs if _unset(namespace.get(name, ...))]
    if missing:
        message = (f"Skipped: this cell needs {_names(missing)} from an exercise above, "
                   f"{UNSOLVED.lower()}.")
        print(message)
        return message
    try:
        code = shell.transform_cell(cell) if hasattr(shell, "transform_cell") else cell
        tree = ast.parse(code, FILENAME)
        if not tree.body:  # comments only: the template of an open-ended exercise, untouched
            message = f"{UNSOLVED}: write your solution in this cell."
            print(message)
            return message
        value = _execute(tree, namespace)
    except Exception as error:  # the point: report, do not stop the notebook
        message = f"{UNSOLVED}: {_describe(error)}"
        print(message + "\n(Delete the line %%exercise to see the full traceback.)")
        return message
    if value is not None and hasattr(shell, "displayhook"):
        shell.displayhook(value)
    left = unfinished(tree, namespace)
    if left:
        print(left)
    return left


def exercise_table(exercises: dict[str, str]) -> None:
    """Print each exercise's title and status, for the teacher: solved, not yet solved (also
    when its cell has not run) or check failed. ``exercises``: label -> title."""
    rows = [(title, STATUS.get(label, NOT_SOLVED)) for label, title in exercises.items()]
    width = max([len("exercise")] + [len(title) for title, _ in rows])
    print(f"{'exercise':{width}s}  status")
    for title, status in rows:
        print(f"{title:{width}s}  {status}")
    solved = sum(status == SOLVED for _, status in rows)
    failed = sum(status == FAILED for _, status in rows)
    print(f"{solved} of {len(rows)} solved, {failed} with a failed check.")


def parse_option(line: str, option: str) -> str | None:
    """The word after ``option`` on the magic's line (None when the line does not give it)."""
    words = shlex.split(line)
    if option not in words or words.index(option) + 1 >= len(words):
        return None
    return words[words.index(option) + 1]


def parse_needs(line: str) -> list[str]:
    """The names after ``--needs`` on the magic's line (none when it has no ``--needs``)."""
    words = shlex.split(line)
    if "--needs" not in words:
        return []
    names = []
    for word in words[words.index("--needs") + 1:]:
        if word.startswith("--"):
            break
        names.append(word)
    return names


def unfinished(tree: ast.Module, namespace: dict) -> str | None:
    """What a cell that ran left unfinished: names still ``...``, functions whose body is ``...``.
    """
    names, bodies = [], []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _stub_body(node.body):
            bodies.append(node.name)
        for name in _assigned(node):
            if name in namespace and _unset(namespace[name]) and name not in names:
                names.append(name)
    parts = []
    if names:
        parts.append(f"replace the ... given to {_names(names)}")
    if bodies:
        parts.append(f"write the body of {_names(bodies)}")
    return f"{UNSOLVED}: {'; '.join(parts)}." if parts else None


def _execute(tree: ast.Module, namespace: dict):
    """Run a parsed cell; returns the value of its last line when that is an expression."""
    last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    body = ast.Module(body=tree.body[:-1] if last else tree.body, type_ignores=[])
    exec(compile(body, FILENAME, "exec"), namespace)
    if last is None:
        return None
    return eval(compile(ast.Expression(last.value), FILENAME, "eval"), namespace)


def _describe(error: Exception) -> str:
    """``Type: message (line N of this cell)``, the line counted with the magic's own line."""
    lines = [frame.lineno for frame in traceback.extract_tb(sys.exc_info()[2])
             if frame.filename == FILENAME and frame.lineno]
    if isinstance(error, SyntaxError) and error.filename == FILENAME and error.lineno:
        lines = [error.lineno]
    where = f" (line {lines[-1] + 1} of this cell)" if lines else ""
    text = str(error) if not isinstance(error, SyntaxError) else error.msg
    return f"{type(error).__name__}: {text}{where}"


def _unset(value) -> bool:
    """``...`` itself, or a list, tuple, set or dict holding ``...``: a placeholder left in."""
    if value is Ellipsis:
        return True
    if isinstance(value, dict):
        return any(v is Ellipsis for v in (*value.keys(), *value.values()))
    return isinstance(value, CONTAINERS) and any(v is Ellipsis for v in value)


def _stub_body(body: list[ast.stmt]) -> bool:
    """A function body that is only a docstring and ``...`` or ``pass``."""
    rest = [s for s in body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                                    and isinstance(s.value.value, str))]
    return all(isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and isinstance(
        s.value, ast.Constant) and s.value.value is Ellipsis) for s in rest)


def _assigned(node: ast.stmt) -> list[str]:
    """The names a top-level statement assigns."""
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    else:
        return []
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def _names(names: list[str]) -> str:
    return ", ".join(f"`{name}`" for name in names)
