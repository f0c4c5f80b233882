"""Run a student notebook in this process, as shipped or with the chapter's solutions pasted in.

What Colab's "Run all" does, without a kernel: each code cell runs in one namespace, a cell that
starts with ``%%exercise`` through :func:`run_exercise_cell` (as the magic does), the
``%load_ext`` line is left out (the magic is called directly).
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib
import nbformat

from context_neurons.book.exercises import run_exercise_cell
from context_neurons.book.notebooks import read_chapter
from context_neurons.book.students import MAGIC, student_notebook

matplotlib.use("Agg")


class Shell:
    """What ``%%exercise`` uses of IPython's shell."""

    def __init__(self):
        self.user_ns: dict = {"__name__": "__main__"}

    def displayhook(self, value) -> None:
        pass


def solutions(chapter: Path) -> dict[str, str]:
    """Exercise label -> the code of its solution (the chapter's gated code cells, joined)."""
    found: dict[str, list[str]] = {}
    label = None
    for cell in read_chapter(chapter).cells:
        if cell.cell_type == "markdown":
            for marker, name in re.findall(r"\{solution-(start|end)\}[ \t]*([\w-]*)", cell.source):
                label = name if marker == "start" else None
        elif label:
            found.setdefault(label, []).append(cell.source)
    return {name: "\n\n".join(cells) for name, cells in found.items()}


def solved_notebook(chapter: Path):
    """The student notebook with each exercise's stub replaced by the chapter's solution."""
    notebook, pasted = student_notebook(chapter), solutions(chapter)
    for cell in notebook.cells:
        first, _, _ = cell.source.partition("\n")
        label = re.search(r"--check (\S+)", first)
        if cell.cell_type == "code" and label and label[1] in pasted:
            cell.source = f"{first}\n{pasted[label[1]]}"
    return notebook


def run(notebook, shell: Shell | None = None) -> tuple[Shell, list[str | None]]:
    """Run every code cell; returns the shell and what each exercise cell left to do."""
    shell = shell or Shell()
    left = []
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        source = re.sub(r"^%load_ext .*$", "", cell.source, flags=re.M)
        if source.startswith(MAGIC):
            line, _, body = source.partition("\n")
            result = run_exercise_cell(shell, line[len(MAGIC):], body)
            if "--check" in line:
                left.append(result)
        else:
            exec(compile(source, "<cell>", "exec"), shell.user_ns)
    return shell, left


def read(path: Path):
    return nbformat.read(path, as_version=4)
