"""Student notebooks run in one process, as shipped or with the chapter's solutions pasted in.

What Colab's "Run all" does, without a kernel: each code cell runs in one namespace, a cell that
starts with ``%%exercise`` through :func:`run_exercise_cell` (as the magic does), the
``%load_ext`` line left out (the magic is called directly). As shipped, every exercise must say
"not yet solved" and no cell may raise; with the solutions (:func:`solved_notebook`), every check
must say "correct". ``tests/unit/test_exercise_checks.py`` runs the cheapest chapters this way;
``scripts/check_student_notebooks.py`` runs any.

:func:`run_student_notebooks` runs them as Colab does, in a kernel (``%load_ext`` and all), on any
model: CI's lane of the trained model runs them as shipped (``run-chapters --students shipped``)
and the simulated online run with the solutions (``simulate_online.py --students solved``), in
place of the chapters (a student notebook is its chapter with the solutions taken out or pasted
back). Each run reads the teacher's table, the notebook's last cell, and fails when an exercise
is not in the expected state.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from context_neurons.book.exercise_checks import SOLVED, UNSOLVED
from context_neurons.book.exercises import STATUS, run_exercise_cell
from context_neurons.book.notebooks import chapter_files, execute_notebook, read_chapter
from context_neurons.book.notebooks import slowest_cells
from context_neurons.book.students import MAGIC, student_notebook, student_path

SOLUTION = re.compile(r"\{solution-(start|end)\}[ \t]*([\w-]*)")
CHECKED = re.compile(r"--check (\S+)")


class Shell:
    """What ``%%exercise`` uses of IPython's shell."""

    def __init__(self):
        self.user_ns: dict = {"__name__": "__main__"}

    def displayhook(self, value) -> None:
        """A cell's last value is not shown."""


def solutions(chapter: Path) -> dict[str, str]:
    """Exercise label -> the code of its solution (the chapter's gated code cells, joined)."""
    found: dict[str, list[str]] = {}
    label = None
    for cell in read_chapter(chapter).cells:
        if cell.cell_type == "markdown":
            for marker, name in SOLUTION.findall(cell.source):
                label = name if marker == "start" else None
        elif label:
            found.setdefault(label, []).append(cell.source)
    return {name: "\n\n".join(cells) for name, cells in found.items()}


def solved_notebook(chapter: Path):
    """The student notebook with each exercise's stub replaced by the chapter's solution."""
    notebook, pasted = student_notebook(chapter), solutions(chapter)
    for cell in notebook.cells:
        first, _, _ = cell.source.partition("\n")
        label = CHECKED.search(first) if first.startswith(MAGIC) else None
        if cell.cell_type == "code" and label and label[1] in pasted:
            cell.source = f"{first}\n{pasted[label[1]]}"
    return notebook


def run_notebook(notebook, shell: Shell | None = None) -> tuple[Shell, dict[str, str]]:
    """Run every code cell of a student notebook; returns the shell and each exercise's status
    (solved, not yet solved, check failed). A cell outside the exercises that raises, raises."""
    shell = shell or Shell()
    STATUS.clear()
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        source = re.sub(r"^%load_ext .*$", "", cell.source, flags=re.M)
        if source.startswith(MAGIC):
            line, _, body = source.partition("\n")
            run_exercise_cell(shell, line[len(MAGIC):], body)
        else:
            exec(compile(source, "<cell>", "exec"), shell.user_ns)
    return shell, dict(STATUS)


#: The two runs of a student notebook, and what each exercise must then report.
VARIANTS = {"shipped": UNSOLVED, "solved": SOLVED}


class ExerciseStatusError(Exception):
    """An executed student notebook's table reports an exercise in another state than expected."""


def variant_notebook(chapter: Path, variant: str):
    """The student notebook of ``chapter`` as shipped (the file Colab opens) or ``solved``."""
    import nbformat  # optional (the "book" extra)

    if variant == "solved":
        return solved_notebook(chapter)
    return nbformat.read(student_path(chapter), as_version=4)


def table_titles(notebook) -> dict[str, str]:
    """Exercise label -> its title in the teacher's table, the notebook's last cell."""
    last = notebook.cells[-1] if notebook.cells else None
    if last is None or "exercise_table(" not in last.source:
        return {}
    call = next(node for node in ast.walk(ast.parse(last.source))
                if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "exercise_table")
    return ast.literal_eval(call.args[0])


def table_status(notebook) -> dict[str, str]:
    """Exercise label -> the status the executed notebook's last cell (the teacher's table)
    printed for it; an exercise the table does not show is missing."""
    titles = table_titles(notebook)
    if not titles:
        return {}
    printed = "".join(output.get("text", "") for output in notebook.cells[-1].get("outputs", [])
                      if output.get("output_type") == "stream").splitlines()
    found = {}
    for label, title in titles.items():
        row = next((line for line in printed if line.startswith(title + "  ")), None)
        if row is not None:
            found[label] = row[len(title):].strip()
    return found


def checked_labels(notebook) -> list[str]:
    """The labels of the notebook's exercise cells (``%%exercise --check LABEL``), in order."""
    firsts = [cell.source.partition("\n")[0] for cell in notebook.cells
              if cell.cell_type == "code" and cell.source.startswith(MAGIC)]
    return [found[1] for found in map(CHECKED.search, firsts) if found]


def exercise_output(notebook, label: str) -> str:
    """What exercise ``label``'s cell printed (its check's verdict), for a failure's report."""
    for cell in notebook.cells:
        if cell.cell_type == "code" and cell.source.startswith(f"{MAGIC} --check {label}"):
            return "".join(o.get("text", "") for o in cell.get("outputs", [])).strip()
    return ""


def run_student_notebooks(chapters: list[Path] | None, variant: str,
                          environment: dict[str, str], out: Path) -> dict[str, float]:
    """Execute the student notebooks of ``chapters`` as shipped or solved (``variant``) in a
    kernel with ``environment``, write them to ``out`` and return the seconds each took. Raises
    :class:`ExerciseStatusError` (after running every chapter) when a table reports an exercise
    other than "not yet solved" (shipped) or "solved"; a cell that raises raises."""
    import nbformat  # optional (the "book" extra)

    expected = VARIANTS[variant]
    out.mkdir(parents=True, exist_ok=True)
    timings, wrong = {}, []
    for chapter in chapters or chapter_files():
        chapter = Path(chapter)
        notebook = variant_notebook(chapter, variant)
        labels = checked_labels(notebook)
        executed, seconds, cell_seconds = execute_notebook(notebook, environment, cwd=out)
        nbformat.write(executed, out / f"{chapter.stem}-{variant}.ipynb")
        timings[f"{chapter.name} ({variant} student notebook)"] = round(seconds, 1)
        status = table_status(executed)
        off = {label: status.get(label, "missing from the table") for label in labels
               if status.get(label) != expected}
        print(f"{chapter.stem} student notebook {variant}: {len(labels) - len(off)} of "
              f"{len(labels)} exercises {expected} ({seconds:.0f} s; slowest: "
              f"{slowest_cells(cell_seconds)})", flush=True)
        for label, got in off.items():
            wrong.append(f"{chapter.stem} {variant}: {label} is {got!r}, expected {expected!r}")
            print(f"  {label}: {got}\n    " + exercise_output(executed, label).replace(
                "\n", "\n    "), flush=True)
    if wrong:
        raise ExerciseStatusError("; ".join(wrong))
    return timings
