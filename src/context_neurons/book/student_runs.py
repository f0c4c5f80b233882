"""Student notebooks run in one process, as shipped or with the chapter's solutions pasted in.

What Colab's "Run all" does, without a kernel: each code cell runs in one namespace, a cell that
starts with ``%%exercise`` through :func:`run_exercise_cell` (as the magic does), the
``%load_ext`` line left out (the magic is called directly). As shipped, every exercise must say
"not yet solved" and no cell may raise; with the solutions (:func:`solved_notebook`), every check
must say "correct". ``tests/unit/test_exercise_checks.py`` runs the cheapest chapters this way;
``scripts/check_student_notebooks.py`` runs any.
"""

from __future__ import annotations

import re
from pathlib import Path

from context_neurons.book.exercises import STATUS, run_exercise_cell
from context_neurons.book.notebooks import read_chapter
from context_neurons.book.students import MAGIC, student_notebook

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
