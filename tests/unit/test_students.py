"""Student notebooks: what Colab opens holds no solution, a stub per exercise, and no output."""

from __future__ import annotations

import re

import nbformat
import pytest

from context_neurons.book.notebooks import chapter_files, read_chapter
from context_neurons.book.students import STUDENTS, student_notebook, student_path

CHAPTERS = chapter_files()


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.stem for c in CHAPTERS])
def test_student_notebook_is_up_to_date(chapter):
    path = student_path(chapter)
    assert path.is_file(), f"{path.name} missing: run python -m context_neurons student-notebooks"
    stored = nbformat.read(path, as_version=4)
    fresh = student_notebook(chapter)
    assert [c.source for c in stored.cells] == [c.source for c in fresh.cells], (
        f"{path.name} is out of date: run python -m context_neurons student-notebooks"
    )


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.stem for c in CHAPTERS])
def test_no_solution_is_visible_or_run(chapter):
    student = nbformat.read(student_path(chapter), as_version=4)
    text = "\n".join(cell.source for cell in student.cells)
    assert "solution-start" not in text and "solution-end" not in text
    assert "check passed" not in text, "a solution's checking code is in the student notebook"
    for cell in student.cells:
        assert not cell.get("outputs") and cell.get("execution_count") is None
    # Every code cell of a gated solution in the chapter is absent from the student notebook.
    chapter_cells = read_chapter(chapter).cells
    solution_code = _gated_code(chapter_cells)
    student_code = {c.source for c in student.cells if c.cell_type == "code"}
    assert not solution_code & student_code


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.stem for c in CHAPTERS])
def test_every_exercise_has_a_stub_cell(chapter):
    student = nbformat.read(student_path(chapter), as_version=4)
    exercises = sum(
        len(re.findall(r"^`{3,}\{exercise\}", c.source, re.M))
        for c in read_chapter(chapter).cells
        if c.cell_type == "markdown"
    )
    stubs = [c for c in student.cells if c.cell_type == "code" and "Your solution here" in c.source]
    assert len(stubs) == exercises
    for stub in stubs:
        compile(stub.source, "stub", "exec")  # a student can run it as it is


def test_student_notebooks_cover_the_chapters_only():
    assert sorted(p.stem for p in STUDENTS.glob("*.ipynb")) == sorted(c.stem for c in CHAPTERS)


def _gated_code(cells) -> set[str]:
    gated, inside = set(), False
    for cell in cells:
        if cell.cell_type == "markdown":
            for marker in re.findall(r"\{solution-(start|end)\}", cell.source):
                inside = marker == "start"
        elif inside:
            gated.add(cell.source)
    return gated
