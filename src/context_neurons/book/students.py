"""Student notebooks. This module writes the notebook a student opens in Colab for each chapter.

The website shows every exercise's solution in a closed dropdown, and the stored notebooks of
``tests/notebooks/`` (checked by nbval) run the solutions. A student opening a chapter in Colab
gets neither: :func:`student_notebook` turns a chapter into a notebook with no outputs, the
solutions removed (their explanation and their code, from ``solution-start`` to
``solution-end``), and, after each exercise, a code cell holding the exercise's stub (its
```` ```python ```` block) for the student to fill in. ``python -m context_neurons
student-notebooks`` writes them to ``book/students/``, where the website's Colab buttons point;
``tests/unit/test_students.py`` checks they are up to date and hold no solution.
"""

from __future__ import annotations

import re
from pathlib import Path

from context_neurons.book.notebooks import BOOK, REPO, chapter_files, read_chapter

STUDENTS = BOOK / "students"
SOLUTION_START = re.compile(r"^(`{3,}|:{3,})\{solution-start\}", re.M)
SOLUTION_END = re.compile(r"^(`{3,}|:{3,})\{solution-end\}[^\n]*\n\1[ \t]*$", re.M)
EXERCISE = re.compile(r"^(`{3,})\{exercise\}.*?^\1\s*$", re.M | re.S)
STUB = re.compile(r"^```python\n(?P<code>.*?)^```\s*$", re.M | re.S)
HIDDEN = (
    "*The solution is not in the student notebook: write yours in the cell below, then compare "
    "with the solution on the website (the dropdown under the exercise).*"
)


def student_path(chapter: Path) -> Path:
    """Where a chapter's student notebook is written."""
    return STUDENTS / (chapter.stem + ".ipynb")


def student_notebook(chapter: Path):
    """The student version of a chapter: no outputs, no solution, a stub cell per exercise."""
    import nbformat  # optional (the "book" extra): only the book's commands need it

    notebook = read_chapter(chapter)
    cells, in_solution = [], False
    for cell in notebook.cells:
        if cell.cell_type == "code":
            if not in_solution:
                cells.append(nbformat.v4.new_code_cell(cell.source, metadata=dict(cell.metadata)))
            continue
        kept, stubs, in_solution = _strip_solutions(cell.source, in_solution)
        if kept.strip():
            cells.append(nbformat.v4.new_markdown_cell(kept, metadata=dict(cell.metadata)))
        for stub in stubs:
            cells.append(nbformat.v4.new_markdown_cell(HIDDEN))
            cells.append(nbformat.v4.new_code_cell(f"# Your solution here.\n{stub}".rstrip()))
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


def _strip_solutions(source: str, in_solution: bool) -> tuple[str, list[str], bool]:
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


def _stubs(markdown: str) -> list[str]:
    """The stub code of each exercise in a markdown text (empty when an exercise has none)."""
    stubs = []
    for exercise in EXERCISE.finditer(markdown):
        match = STUB.search(exercise.group(0))
        stubs.append(match["code"] if match else "")
    return stubs


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
