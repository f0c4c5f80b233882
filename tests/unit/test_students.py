"""Student notebooks: what Colab opens holds no solution, a stub per exercise, no output, no MyST
markup (Colab shows it raw), and no exercise cell that stops "Run all"."""

from __future__ import annotations

import importlib.util
import re
from types import SimpleNamespace

import nbformat
import pytest

from context_neurons.book import myst
from context_neurons.book.exercises import run_exercise_cell
from context_neurons.book.notebooks import REPO, chapter_files, chapter_label, read_chapter
from context_neurons.book.students import MAGIC, STUDENTS, student_notebook, student_path

CHAPTERS = chapter_files()
SCRIPTS = REPO / "scripts"


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
        first, _, code = stub.source.partition("\n")
        assert first.startswith(MAGIC + " --check "), (
            "a stub cell must start with %%exercise (else Run all stops there) and its check")
        compile(code, "stub", "exec")  # a student can run it as it is
    if stubs:  # the magic is loaded before the first stub
        loads = [i for i, c in enumerate(student.cells) if "%load_ext" in c.source]
        assert loads and loads[0] < student.cells.index(stubs[0])


#: MyST that Colab shows raw: a directive's fence, a role, a target.
MYST = re.compile(r"```\{|:::\{|\{[\w:.-]+\}`|^\([\w.:-]+\)=[ \t]*$", re.M)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.stem for c in CHAPTERS])
def test_no_myst_markup_is_left(chapter):
    student = nbformat.read(student_path(chapter), as_version=4)
    left = [
        f"cell {index}: {match.group(0)!r}"
        for index, cell in enumerate(student.cells)
        if cell.cell_type == "markdown"
        for match in MYST.finditer(cell.source)
    ]
    assert not left, "MyST markup Colab cannot render:\n" + "\n".join(left)


def test_myst_becomes_markdown():
    source = (
        "(sec-x)=\n## A section\n\n"
        "````{exercise} Do it\n:label: ex-do\n\n*Difficulty: medium.* See {ref}`the section "
        "<sec-x>` and {math}`x^2`.\n\n```python\nanswer = ...  # {not a role}`x`\n```\n\n"
        "```{admonition} Hint\n:class: dropdown\n\nThink.\n```\n````\n\n"
        ":::{note}\nBe careful.\n:::\n\n```{tip}\nA tip.\n```\n{cite}`gibson2023`"
    )
    context = myst.Context(targets={"sec-x": myst.Target("ch01_x", "A section", True)},
                           numbers={"ex-do": "3.7"})
    out = myst.to_markdown(source, context)
    assert "### Exercise 3.7: Do it" in out
    assert "> *Difficulty: medium.* See [the section](https://colab.research.google.com/" in out
    assert "$x^2$" in out and "(sec-x)=" not in out
    assert "> ```python\n> answer = ...  # {not a role}`x`\n> ```" in out  # code untouched
    assert "<details><summary><b>Hint</b></summary>" in out and "> Think." in out
    assert "> **Note**\n>\n> Be careful." in out and "> **Tip**" in out
    assert "[gibson2023]" in out


class Shell:
    """What ``%%exercise`` uses of IPython's shell."""

    def __init__(self):
        self.user_ns, self.shown = {}, []

    def displayhook(self, value):
        self.shown.append(value)


def test_an_unsolved_exercise_does_not_raise(capsys):
    shell = Shell()
    message = run_exercise_cell(shell, "", "x = 1\ny = undefined_name + x\n")
    assert message.startswith("Not yet solved: NameError") and "line 3 of this cell" in message
    assert shell.user_ns["x"] == 1
    assert "Not yet solved" in capsys.readouterr().out
    assert "replace the ... given to `a`" in run_exercise_cell(shell, "", "a = ...\nb = 2")
    assert "`f`" in run_exercise_cell(shell, "", "def f(x):\n    ...\n")
    assert run_exercise_cell(shell, "", "{...}.items()").startswith("Not yet solved: Attribute")
    # an open-ended exercise's template (comments only) says so too (issue 54: exercise 1.3)
    assert run_exercise_cell(shell, "", "# Your solution here.\n") == (
        "Not yet solved: write your solution in this cell.")


def test_a_solved_exercise_runs_and_shows_its_last_value():
    shell = Shell()
    assert run_exercise_cell(shell, "", "a = 2\na * 3") is None
    assert shell.user_ns["a"] == 2 and shell.shown == [6]


def test_a_cell_needing_an_unsolved_name_is_skipped():
    shell = Shell()
    shell.user_ns["C"] = ...
    assert run_exercise_cell(shell, "--needs C", "D = C + 1").startswith("Skipped")
    assert "D" not in shell.user_ns
    shell.user_ns["C"] = 1
    assert run_exercise_cell(shell, "--needs C", "D = C + 1") is None and shell.user_ns["D"] == 2


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


def test_exercises_are_numbered_within_their_chapter():
    pages = ("ch08_trained_model", "book/ch05_gallery.py", "appendix_planted_model", "intro")
    assert [chapter_label(page) for page in pages] == ["8", "5", "A", None]
    numbers = myst.book_context().numbers
    by_chapter: dict[str, list[int]] = {}
    for number in numbers.values():
        chapter, index = number.split(".")
        by_chapter.setdefault(chapter, []).append(int(index))
    assert all(sorted(k) == list(range(1, len(k) + 1)) for k in by_chapter.values()), numbers
    assert numbers["ex-ch08-rank"] == "8.2" and numbers["ex-appendix-labels"] == "A.1"


def test_the_website_numbers_exercises_as_the_student_notebooks_do():
    pytest.importorskip("sphinx")
    spec = importlib.util.spec_from_file_location("book_extension", SCRIPTS / "book_extension.py")
    extension = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(extension)
    # Sphinx's own numbers run across the book, in book order:
    env = SimpleNamespace(toc_fignumbers={
        "book/ch02_b": {"exercise": {"ex-c": (3,)}, "figure": {"f": (1,)}},
        "book/ch01_a": {"exercise": {"ex-a": (1,), "ex-b": (2,)}},
        "book/appendix_planted_model": {"exercise": {"ex-d": (4,)}},
    })
    assert extension.number_exercises_by_chapter(None, env) == [
        "book/appendix_planted_model", "book/ch01_a", "book/ch02_b"]
    assert env.toc_fignumbers["book/ch01_a"]["exercise"] == {"ex-a": ("1", 1), "ex-b": ("1", 2)}
    assert env.toc_fignumbers["book/ch02_b"] == {
        "exercise": {"ex-c": ("2", 1)}, "figure": {"f": (1,)}}
    assert env.toc_fignumbers["book/appendix_planted_model"]["exercise"] == {"ex-d": ("A", 1)}
