"""Student notebooks. This module writes the notebook a student opens in Colab for each chapter.

The website shows every exercise's solution in a closed dropdown, and the stored notebooks of
``tests/notebooks/`` (checked by nbval) run the solutions. A student opening a chapter in Colab
gets neither: :func:`student_notebook` turns a chapter into a notebook with no outputs, the
solutions removed (their explanation and their code, from ``solution-start`` to
``solution-end``), and, after each exercise, a code cell holding the exercise's stub (its
```` ```python ```` block) for the student to fill in. ``python -m context_neurons
student-notebooks`` writes them to ``book/students/``, where the website's Colab buttons point;
``tests/unit/test_students.py`` checks they are up to date and hold no solution.

Colab renders plain Markdown, not the book's MyST: every markdown cell goes through
:func:`context_neurons.book.myst.to_markdown` (exercises become a heading and a blockquote,
admonitions a blockquote, roles links or text). "Run all" must not stop at an unsolved exercise:
each stub cell starts with the cell magic ``%%exercise`` (:mod:`.exercises`, loaded by a cell
after the Colab set-up), which prints "not yet solved" instead of raising, and a chapter cell that
reads a name only a removed solution (or a stub) defines starts with ``%%exercise --needs NAME``,
which skips it while the name is missing or still ``...``.

Each stub cell starts ``%%exercise --check LABEL``: once the student's code runs, the exercise's
check (:mod:`.exercise_checks`) prints "Correct" or what differs. A stub that defines nothing (an
open-ended exercise's) lists what the check reads. The notebook's last cell prints, for the
teacher, which of the chapter's exercises are solved, not yet solved or failed their check.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import context_neurons.book.myst as myst
from context_neurons.book.exercise_checks import CHECKS
from context_neurons.book.notebooks import BOOK, REPO, chapter_files, read_chapter

STUDENTS = BOOK / "students"
SOLUTION_START = re.compile(r"^(`{3,}|:{3,})\{solution-start\}", re.M)
SOLUTION_END = re.compile(r"^(`{3,}|:{3,})\{solution-end\}[^\n]*\n\1[ \t]*$", re.M)
EXERCISE = re.compile(r"^(`{3,})\{exercise\}.*?^\1\s*$", re.M | re.S)
STUB = re.compile(r"^```python\n(?P<code>.*?)^```\s*$", re.M | re.S)
HIDDEN = (
    "*The solution is not in the student notebook: write yours in the cell below and run it. Its "
    "first line, `%%exercise --check ...`, then checks your answer against the package's own "
    "computation on your model and prints \"Correct\" or what differs, with a hint; the solution "
    "is on the website (the dropdown under the exercise). Until it is solved the cell prints "
    "\"not yet solved\" and the notebook runs on; delete its first line to see an error in full.*"
)
MAGIC = "%%exercise"
#: The code cell that loads the ``%%exercise`` magic, after the Colab set-up cell.
LOAD_MAGIC = (
    "# Exercise cells start with %%exercise: an exercise you have not solved yet prints\n"
    "# \"not yet solved\" instead of stopping \"Run all\"; a solved one is checked.\n"
    "%load_ext context_neurons.book.exercises"
)
#: The last cell: the chapter's exercises and their status, for the teacher.
TABLE = (
    "# For your teacher: this chapter's exercises, solved, not yet solved or check failed\n"
    "# (run all cells first).\n"
    "from context_neurons.book.exercises import exercise_table\n\n"
    "exercise_table({{\n{rows}}})"
)


def student_path(chapter: Path) -> Path:
    """Where a chapter's student notebook is written."""
    return STUDENTS / (chapter.stem + ".ipynb")


def student_notebook(chapter: Path):
    """The student version of a chapter: no outputs, no solution, a stub cell per exercise."""
    import nbformat  # optional (the "book" extra): only the book's commands need it

    notebook = read_chapter(chapter)
    context = myst.book_context(chapter)
    cells, in_solution, tainted, labels = [], False, set(), []
    for cell in notebook.cells:
        if cell.cell_type == "code":
            defined, free = _names(cell.source)
            if in_solution:
                tainted |= defined
                continue
            source, needs = cell.source, sorted(free & tainted)
            if needs:  # reads what only a removed solution or a stub defines
                source = f"{MAGIC} --needs {' '.join(needs)}\n{source}"
                tainted |= defined
            else:
                tainted -= defined
            cells.append(nbformat.v4.new_code_cell(source, metadata=dict(cell.metadata)))
            continue
        kept, stubs, in_solution = _strip_solutions(cell.source, in_solution)
        if kept.strip():
            markdown = myst.to_markdown(kept, context)
            cells.append(nbformat.v4.new_markdown_cell(markdown, metadata=dict(cell.metadata)))
        for label, stub in stubs:
            tainted |= _names(stub)[0]
            labels.append(label)
            cells.append(nbformat.v4.new_markdown_cell(HIDDEN))
            cells.append(nbformat.v4.new_code_cell(stub_cell(label, stub)))
    if any(c.cell_type == "code" and c.source.startswith(MAGIC) for c in cells):
        setup = [i for i, c in enumerate(cells)
                 if c.cell_type == "code" and "colab_setup" in c.source]
        first_code = next(i for i, c in enumerate(cells) if c.cell_type == "code")
        cells.insert(setup[0] + 1 if setup else first_code, nbformat.v4.new_code_cell(LOAD_MAGIC))
    if labels:
        rows = "".join(f"    {label!r}: {context.targets[label].title!r},\n" for label in labels)
        cells.append(nbformat.v4.new_code_cell(TABLE.format(rows=rows)))
    for index, cell in enumerate(cells):
        cell["id"] = f"cell-{index}"  # stable across runs, as the stored notebooks
    student = nbformat.v4.new_notebook(cells=cells)
    student.metadata = {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
        "colab": {"provenance": [], "name": chapter.stem + ".ipynb"},
        "accelerator": "GPU",
    }
    return student


def stub_cell(label: str, stub: str) -> str:
    """An exercise's code cell: the magic with its check, and the stub (or, when the stub is
    empty, the names the check reads)."""
    if not stub.strip() and label in CHECKS:
        reads = "".join(f"#   {name}: {what}\n" for name, what in CHECKS[label].reads.items())
        stub = f"# The check reads what you define as:\n{reads}"
    return f"{MAGIC} --check {label}\n# Your solution here.\n{stub}".rstrip()


def _strip_solutions(source: str, in_solution: bool) -> tuple[str, list[tuple[str, str]], bool]:
    """A markdown cell without the solution text it holds, the exercises' stubs, and whether a
    solution is still open at its end."""
    kept: list[str] = []
    rest = source
    while rest:
        if in_solution:
            end = SOLUTION_END.search(rest)
            if end is None:
                return "".join(kept), _stubs("".join(kept)), True
            rest, in_solution = rest[end.end():].lstrip("\n"), False
        else:
            start = SOLUTION_START.search(rest)
            if start is None:
                kept.append(rest)
                break
            kept.append(rest[: start.start()])
            rest, in_solution = rest[start.start():], True
    text = "".join(kept)
    return text, _stubs(text), in_solution


def _stubs(markdown: str) -> list[tuple[str, str]]:
    """``(label, stub code)`` of each exercise in a markdown text (the code empty when an
    exercise has none)."""
    stubs = []
    for exercise in EXERCISE.finditer(markdown):
        match = STUB.search(exercise.group(0))
        label = myst.SOURCE_LABEL.search(exercise.group(0))
        stubs.append((label["label"] if label else "", match["code"] if match else ""))
    return stubs


def _names(source: str) -> tuple[set[str], set[str]]:
    """``(names a cell defines, names it reads without defining them)``; empty when it is not
    plain Python (a magic)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set(), set()
    stored, loaded = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else stored).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stored.add(node.name)
        elif isinstance(node, ast.arg):
            stored.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            stored |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return stored, loaded - stored


def write_student_notebooks(chapters: list[Path] | None = None) -> list[Path]:
    """Write the student notebook of every chapter (default: all of ``chapter_files()``)."""
    import nbformat  # optional (the "book" extra), as above

    STUDENTS.mkdir(parents=True, exist_ok=True)
    written = []
    for chapter in chapters or chapter_files():
        path = student_path(Path(chapter))
        nbformat.write(student_notebook(Path(chapter)), path)
        written.append(path)
        print(f"{Path(chapter).name} -> {path.relative_to(REPO)}")
    return written
