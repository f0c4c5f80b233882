"""Stored notebook outputs. This module regenerates the executed chapters that nbval checks.

The chapters are jupytext ``py:percent`` files in ``book/``. ``regenerate`` executes each one on
the planted model (``CONTEXT_NEURONS_MODEL=planted``) and stores the executed notebook in
``tests/notebooks/``; CI re-executes those notebooks under nbval and fails when outputs differ.
Run it through the project command: ``python -m context_neurons regenerate-notebooks``.
"""

from __future__ import annotations

import os
import re
import time
from datetime import datetime
from pathlib import Path

from context_neurons import config
from context_neurons.checks import InputError

REPO = config.REPOSITORY_ROOT
BOOK = REPO / "book"
STORED = REPO / "tests" / "notebooks"
TIMEOUT_S = 1800


def chapter_files() -> list[Path]:
    """The executable pages, in book order: chapters ``book/chNN_*.py``, then appendices."""
    return sorted(BOOK.glob("ch[0-9][0-9]_*.py")) + sorted(BOOK.glob("appendix_*.py"))


def chapter_label(page: str | Path) -> str | None:
    """What a page's exercise numbers start with (``Exercise 8.2``): the chapter's number for
    ``book/chNN_*`` (a chapter's sections, such as ``ch05_gallery``, share it), a letter for an
    appendix (``A`` for the first ``book/appendix_*.py`` in name order), None for other pages."""
    stem = Path(page).stem
    chapter = re.match(r"ch(\d\d)_", stem)
    if chapter:
        return str(int(chapter[1]))
    appendices = sorted(path.stem for path in BOOK.glob("appendix_*.py"))
    return chr(ord("A") + appendices.index(stem)) if stem in appendices else None


def resolve_chapters(names: list[str | Path]) -> list[Path]:
    """The chapter files that ``names`` name: a chapter's name (``ch03_decomposition``, with or
    without ``.py``) or a path to a chapter inside ``book/`` (relative to the working directory or
    to the repository). Anything else (another ``.py``, a file outside ``book/``) is refused with
    an :class:`InputError` that lists the chapters: a command never overwrites a stored notebook
    with something that is not a chapter."""
    chapters = {path.resolve(): path for path in chapter_files()}
    found = []
    for name in names:
        given = Path(name).expanduser()
        if "/" not in str(name) and os.sep not in str(name):  # a name: looked up in book/
            candidates = [BOOK / (given.name if given.suffix == ".py" else given.name + ".py")]
        else:
            candidates = [given, REPO / given] if not given.is_absolute() else [given]
        match = next((chapters[c.resolve()] for c in candidates if c.resolve() in chapters), None)
        if match is None:
            raise InputError(
                f"{str(name)!r} is not a chapter of the book: give a chapter's name or its file "
                f"in {BOOK}; the chapters are {', '.join(p.stem for p in chapter_files())}."
            )
        found.append(match)
    return found


def stored_notebook(chapter: Path) -> Path:
    return STORED / (chapter.stem + ".ipynb")


def read_chapter(chapter: Path):
    import jupytext  # optional (the "book" extra): only the book's commands need it

    return jupytext.read(chapter, fmt="py:percent")


def execute(chapter: Path, environment: dict[str, str] | None = None, cwd: Path = STORED):
    """Execute a chapter in a fresh kernel whose environment adds ``environment``.

    Returns:
        ``(notebook, seconds, cell_seconds)``: the executed notebook (cell ids and timestamps made
        stable), the time it took, and each code cell's time by cell index (read from the
        timestamps before they are removed). A cell that raises raises
        ``nbclient.exceptions.CellExecutionError``.
    """
    return execute_notebook(read_chapter(Path(chapter)), environment, cwd)


def execute_notebook(notebook, environment: dict[str, str] | None = None, cwd: Path = STORED):
    """Execute ``notebook`` (a chapter, or a student notebook) as :func:`execute` does."""
    from nbclient import NotebookClient  # optional (the "book" extra), as jupytext above

    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    start = time.perf_counter()
    client = NotebookClient(notebook, timeout=TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(cwd)}})
    client.execute(env=config.child_environment(environment))
    cell_seconds = {}
    for index, cell in enumerate(notebook.cells):  # keep the stored file stable across runs
        stamps = cell.get("metadata", {}).pop("execution", None) or {}  # timestamps
        if "iopub.execute_input" in stamps and "shell.execute_reply" in stamps:
            cell_seconds[index] = _seconds_between(stamps["iopub.execute_input"],
                                                   stamps["shell.execute_reply"])
        cell["id"] = f"cell-{index}"  # jupytext draws random ids
    return notebook, time.perf_counter() - start, cell_seconds


def _seconds_between(start: str, end: str) -> float:
    """Seconds between two of Jupyter's ISO timestamps (``2026-11-28T22:05:01.123456Z``)."""
    def parse(stamp: str) -> datetime:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))

    return (parse(end) - parse(start)).total_seconds()


def slowest_cells(cell_seconds: dict[int, float], n: int = 3) -> str:
    """The ``n`` slowest cells in words (``"cell 12 43 s, cell 7 20 s"``), for the CI log."""
    slowest = sorted(cell_seconds.items(), key=lambda item: -item[1])[:n]
    return ", ".join(f"cell {index} {seconds:.0f} s" for index, seconds in slowest)


def regenerate(chapters: list[Path] | None = None) -> int:
    """Execute chapters on the planted model and store them with their outputs."""
    import nbformat  # optional (the "book" extra), as jupytext above

    STORED.mkdir(parents=True, exist_ok=True)
    for chapter in chapters or chapter_files():
        chapter = Path(chapter).resolve()
        notebook, seconds, _ = execute(chapter, {config.MODEL.name: "planted"})
        nbformat.write(notebook, stored_notebook(chapter))
        print(f"{chapter.name}: executed in {seconds:.0f} s -> "
              f"{stored_notebook(chapter).relative_to(REPO)}")
    return 0


def run_chapters(
    chapters: list[Path] | None, environment: dict[str, str], out: Path
) -> dict[str, float]:
    """Execute chapters (not compared) with ``environment``; write them to ``out``, return the
    seconds each took. Used for the trained model and the simulated online run in CI."""
    import nbformat  # optional (the "book" extra), as jupytext above

    out.mkdir(parents=True, exist_ok=True)
    timings = {}
    for chapter in chapters or chapter_files():
        notebook, seconds, cell_seconds = execute(Path(chapter).resolve(), environment, cwd=out)
        nbformat.write(notebook, out / (Path(chapter).stem + ".ipynb"))
        timings[Path(chapter).name] = round(seconds, 1)
        print(f"{Path(chapter).name}: executed in {seconds:.0f} s (slowest: "
              f"{slowest_cells(cell_seconds)})", flush=True)
    return timings
