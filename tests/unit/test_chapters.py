"""Chapter structure, read from the sources (fast, no model, nothing executed).

Every executable page of the book (``notebooks.chapter_files()``: ``book/chNN_*.py``, then
``book/appendix_*.py``) starts with the Colab cell (:data:`colab.FIRST_CELL`) and loads its model
through ``setup_chapter()`` (whose banner says which model produced the page), and its stored
notebook in ``tests/notebooks/`` has exactly the chapter's cells, so nbval never tests stale code.
Chapters (``chNN``) also open with a "Learning objectives" admonition and end with at least two
exercises (sphinx-exercise) whose solutions are gated (``solution-start`` / ``solution-end``), in
a dropdown, around code that prints a line starting "check passed". Reference pages (appendices,
a gallery: decided by the title of their first markdown cell) need neither objectives nor
exercises, but still show the model banner.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import jupytext
import nbformat
import pytest

from context_neurons.book import colab
from context_neurons.book.notebooks import chapter_files, read_chapter, stored_notebook

CHAPTERS = chapter_files()
NUMBERED = [path for path in CHAPTERS if re.match(r"ch\d\d_", path.name)]
REFERENCE_TITLE = re.compile(r"^#\s+(?:appendix\b|.*\b(?:gallery|atlas)\b)", re.I | re.M)
OBJECTIVES = re.compile(r"^```+\{admonition\}\s+Learning objectives\s*$", re.M)
EXERCISE = re.compile(r"^(`{3,})\{exercise\}[^\n]*\n(?P<options>(?::[^\n]*\n)*)", re.M)
LABEL = re.compile(r"^:label:\s*(\S+)", re.M)
SOLUTION_START = re.compile(
    r"^(`{3,}|:{3,})\{solution-start\}\s+(?P<label>\S+)\s*\n(?P<options>(?::[^\n]*\n)*)", re.M
)
SOLUTION_END = re.compile(r"^(`{3,}|:{3,})\{solution-end\}", re.M)
CHECK_PRINT = re.compile(r"""print\(\s*f?(["'])check passed""")
HIDING_TAGS = {"hide-input", "remove-input", "hide-cell", "remove-cell"}
# Issue 33: a cell calls tested package findings, shows a table or figure, prints findings. Lines of
# code counted: neither blank nor whole-line comments. Exercise solutions are exempt.
MAX_CELL_LINES = 20


def ids(paths: list[Path]) -> list[str]:
    return [path.stem for path in paths]


def cells(chapter: Path) -> list:
    return _cells(chapter, chapter.stat().st_mtime_ns)


@functools.lru_cache(maxsize=None)
def _cells(chapter: Path, mtime_ns: int) -> list:
    return read_chapter(chapter).cells


def first_markdown(chapter: Path) -> str:
    return next(cell.source for cell in cells(chapter) if cell.cell_type == "markdown")


def is_reference_page(chapter: Path) -> bool:
    """Appendices and galleries: the title of their first markdown cell says so."""
    return bool(REFERENCE_TITLE.search(first_markdown(chapter)))


def calls(cell_source: str, name: str) -> list[ast.Call]:
    """The calls of function ``name`` in a code cell (comments and strings do not count)."""
    tree = ast.parse(cell_source)
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (getattr(node.func, "id", None) == name or getattr(node.func, "attr", None) == name)
    ]


def model_calls(chapter: Path, name: str) -> list[ast.Call]:
    found = []
    for cell in cells(chapter):
        if cell.cell_type == "code":
            found += calls(cell.source, name)
    return found


def gated_solutions(chapter: Path) -> dict[str, dict]:
    """``label -> {"class": ..., "code": [sources], "tags": [...], "ended": bool}`` per solution.

    A solution opens at a ``solution-start`` directive (in a markdown cell) and holds the code
    cells up to the next ``solution-end``.
    """
    solutions: dict[str, dict] = {}
    current = None
    for cell in cells(chapter):
        if cell.cell_type == "code":
            if current is not None:
                current["code"].append(cell.source)
                current["tags"] += cell.metadata.get("tags", [])
            continue
        events = [(m.start(), "start", m) for m in SOLUTION_START.finditer(cell.source)]
        events += [(m.start(), "end", m) for m in SOLUTION_END.finditer(cell.source)]
        for _, kind, match in sorted(events, key=lambda event: event[0]):
            if kind == "start":
                assert current is None, f"solution {match['label']} opens inside another one"
                options = dict(
                    line[1:].split(":", 1) for line in match["options"].splitlines() if ":" in line
                )
                current = solutions[match["label"]] = {
                    "class": options.get("class", "").split(),
                    "code": [],
                    "tags": [],
                    "ended": False,
                }
            else:
                assert current is not None, "a solution-end without a solution-start"
                current["ended"] = True
                current = None
    return solutions


def code_cells_outside_solutions(chapter: Path) -> list:
    """The code cells that no gated solution holds (a markdown cell's last marker decides)."""
    outside, inside = [], False
    for cell in cells(chapter):
        if cell.cell_type == "code":
            if not inside:
                outside.append(cell)
            continue
        markers = [(m.start(), True) for m in SOLUTION_START.finditer(cell.source)]
        markers += [(m.start(), False) for m in SOLUTION_END.finditer(cell.source)]
        if markers:
            inside = max(markers)[1]
    return outside


def code_lines(cell_source: str) -> list[str]:
    """A code cell's lines that are neither blank nor whole-line comments."""
    lines = cell_source.splitlines()
    return [line for line in lines if line.strip() and not line.lstrip().startswith("#")]


def exercise_labels(chapter: Path) -> list[str]:
    labels = []
    for cell in cells(chapter):
        if cell.cell_type == "markdown":
            for match in EXERCISE.finditer(cell.source):
                label = LABEL.search(match["options"])
                labels.append(label[1] if label else None)
    return labels


# ------------------------------------------------------------------------------ every page


def test_pages_found():
    assert NUMBERED, "no book/chNN_*.py chapters found"
    assert NUMBERED == CHAPTERS[: len(NUMBERED)], "chapters come first, in order"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=ids(CHAPTERS))
def test_first_code_cell_is_the_colab_cell(chapter):
    (expected,) = jupytext.reads(colab.FIRST_CELL, fmt="py:percent").cells
    first = next(cell for cell in cells(chapter) if cell.cell_type == "code")
    assert first.source == expected.source, (
        f"{chapter.name}: the first code cell differs from context_neurons.colab.FIRST_CELL; "
        "paste FIRST_CELL as the chapter's first code cell"
    )
    assert first.metadata.get("tags") == expected.metadata["tags"]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=ids(CHAPTERS))
def test_model_loaded_with_a_banner(chapter):
    """Chapters call setup_chapter(); a reference page may load its model otherwise, with banner."""
    setups = model_calls(chapter, "setup_chapter")
    banners = model_calls(chapter, "show_model_banner")
    if not is_reference_page(chapter):
        assert setups, f"{chapter.name} never calls setup_chapter()"
    silent = [
        call
        for call in setups
        for keyword in call.keywords
        if keyword.arg == "show_banner"
        and not (isinstance(keyword.value, ast.Constant) and keyword.value.value)
    ]
    assert (setups and not silent) or banners, (
        f"{chapter.name} shows no model banner: call setup_chapter() (banner on), or "
        "context_neurons.chapter.show_model_banner(loaded) after loading the model"
    )


@pytest.mark.parametrize("chapter", CHAPTERS, ids=ids(CHAPTERS))
def test_stored_notebook_has_the_chapters_cells(chapter):
    stored = stored_notebook(chapter)
    regenerate = (
        "regenerate it: CONTEXT_NEURONS_THREADS=2 python -m context_neurons "
        f"regenerate-notebooks book/{chapter.name}"
    )
    assert stored.is_file(), f"{stored.name} missing; {regenerate}"
    notebook = nbformat.read(stored, as_version=4)
    expected = [
        (cell.cell_type, cell.source, cell.metadata.get("tags", [])) for cell in cells(chapter)
    ]
    got = [
        (cell.cell_type, cell.source, cell.metadata.get("tags", [])) for cell in notebook.cells
    ]
    stale = [index for index, (a, b) in enumerate(zip(expected, got)) if a != b]
    assert len(got) == len(expected) and not stale, (
        f"{stored.name} is stale ({len(got)} cells, chapter {len(expected)}; first differing "
        f"cell {stale[0] if stale else min(len(got), len(expected))}); {regenerate}"
    )


EXPLORER_CALL = re.compile(r"\b\w+_explorer\(")
WIDGET_MIME = "application/vnd.jupyter.widget"


def explorer_outputs(notebook) -> list[list[dict]]:
    """The outputs of every code cell that calls an explorer (``head_explorer(...)`` etc.)."""
    return [
        cell.outputs
        for cell in notebook.cells
        if cell.cell_type == "code" and EXPLORER_CALL.search(cell.source)
    ]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=ids(CHAPTERS))
def test_stored_explorers_are_static(chapter):
    """Explorers executed headless store a figure and a table, never a widget (the site's view)."""
    stored = stored_notebook(chapter)
    if not stored.is_file():
        pytest.skip(f"{stored.name} missing (see test_stored_notebook_has_the_chapters_cells)")
    for outputs in explorer_outputs(nbformat.read(stored, as_version=4)):
        mimes = [set(output.get("data", {})) for output in outputs]
        assert any("image/png" in m for m in mimes), f"{stored.name}: an explorer without a figure"
        assert any("text/html" in m for m in mimes), f"{stored.name}: an explorer without a table"
        widgets = [m for group in mimes for m in group if m.startswith(WIDGET_MIME)]
        assert not widgets, f"{stored.name}: an explorer stored widget output {widgets}"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=ids(CHAPTERS))
def test_code_cells_outside_solutions_are_short(chapter):
    """Issue 33: outside an exercise solution, no code cell holds over MAX_CELL_LINES lines of
    code; a longer computation belongs in the package (tested), or splits at a natural step."""
    long = [
        f"{len(lines)} lines: {lines[0].strip()}"
        for cell in code_cells_outside_solutions(chapter)
        if len(lines := code_lines(cell.source)) > MAX_CELL_LINES
    ]
    assert not long, (
        f"{chapter.name}: code cells over {MAX_CELL_LINES} lines of code (blank lines and "
        f"whole-line comments not counted) outside an exercise solution: {long}"
    )


# ------------------------------------------------------------------------ numbered chapters


@pytest.mark.parametrize("chapter", NUMBERED, ids=ids(NUMBERED))
def test_learning_objectives_open_the_chapter(chapter):
    if is_reference_page(chapter):
        pytest.skip(f"{chapter.name} is a reference page (its title says so): no objectives")
    before_code = []
    for cell in cells(chapter):
        if cell.cell_type == "code":
            break
        before_code.append(cell.source)
    assert OBJECTIVES.search("\n".join(before_code)), (
        f"{chapter.name}: no '{{admonition}} Learning objectives' before the first code cell"
    )


@pytest.mark.parametrize("chapter", NUMBERED, ids=ids(NUMBERED))
def test_at_least_two_exercises_with_gated_solutions(chapter):
    if is_reference_page(chapter):
        pytest.skip(f"{chapter.name} is a reference page (its title says so): no exercises")
    labels = exercise_labels(chapter)
    assert len(labels) >= 2, f"{chapter.name}: {len(labels)} exercise(s), at least 2 expected"
    assert None not in labels, f"{chapter.name}: every exercise needs a :label:"
    solutions = gated_solutions(chapter)
    missing = [label for label in labels if label not in solutions]
    assert not missing, (
        f"{chapter.name}: exercises without a gated solution ({{solution-start}} label ... "
        f"{{solution-end}}): {missing}"
    )
    for label in labels:
        solution = solutions[label]
        assert solution["ended"], f"{chapter.name}: solution {label} has no {{solution-end}}"
        assert "dropdown" in solution["class"], f"{chapter.name}: {label} needs :class: dropdown"
        assert solution["code"], f"{chapter.name}: solution {label} holds no code cell"
        code = "\n".join(solution["code"])
        assert CHECK_PRINT.search(code), (
            f"{chapter.name}: solution {label} must print a line starting 'check passed'"
        )
        hidden = HIDING_TAGS & set(solution["tags"])
        assert not hidden, (
            f"{chapter.name}: the code of solution {label} carries {sorted(hidden)}; it is "
            "already hidden in the dropdown"
        )


# ----------------------------------------------------------------- the checks can fail


def test_gated_solution_parser_on_a_made_up_chapter(tmp_path, monkeypatch):
    text = (
        "# %% [markdown]\n# ````{exercise} Do it\n# :label: ex-a\n#\n# Task.\n# ````\n#\n"
        "# ```{solution-start} ex-a\n# :class: dropdown\n# ```\n\n"
        "# %%\nprint('check passed: a')\n\n"
        "# %% [markdown]\n# ```{solution-end}\n# ```\n\n"
        "# %% [markdown]\n# ````{exercise} Do more\n# :label: ex-b\n# ````\n#\n"
        "# ```{solution-start} ex-b\n# ```\n\n"
        "# %% tags=[\"hide-input\"]\nx = 1\n"
    )
    path = tmp_path / "ch99_made_up.py"
    path.write_text(text)
    assert exercise_labels(path) == ["ex-a", "ex-b"]
    solutions = gated_solutions(path)
    assert solutions["ex-a"] == {
        "class": ["dropdown"],
        "code": ["print('check passed: a')"],
        "tags": [],
        "ended": True,
    }
    assert solutions["ex-b"]["class"] == [] and not solutions["ex-b"]["ended"]
    assert solutions["ex-b"]["tags"] == ["hide-input"]
    with pytest.raises(AssertionError, match="at least 2|without a gated|solution-end|dropdown"):
        test_at_least_two_exercises_with_gated_solutions(path)


def test_cell_length_check_on_a_made_up_chapter(tmp_path):
    long = "\n".join(f"x{i} = {i}" for i in range(MAX_CELL_LINES + 1))
    text = (
        "# %% [markdown]\n# ```{solution-start} ex-a\n# :class: dropdown\n# ```\n\n"
        f"# %%\n{long}\n\n"
        "# %% [markdown]\n# ```{solution-end}\n# ```\n#\n# ```{solution-start} ex-b\n# ```\n\n"
        f"# %%\n{long}\n\n"
        "# %% [markdown]\n# ```{solution-end}\n# ```\n\n"
        f"# %%\n# a comment\n\n{long}\n"
    )
    path = tmp_path / "ch99_made_up.py"
    path.write_text(text)
    (outside,) = code_cells_outside_solutions(path)
    assert len(code_lines(outside.source)) == MAX_CELL_LINES + 1  # the comment not counted
    message = rf"ch99_made_up\.py: .*\['{MAX_CELL_LINES + 1} lines: x0 = 0'\]"
    with pytest.raises(AssertionError, match=message):
        test_code_cells_outside_solutions_are_short(path)
    short = tmp_path / "ch98_made_up.py"  # a new file: the parsed cells are cached by mtime
    short.write_text(text.replace(f"# %%\n# a comment\n\n{long}\n", "# %%\nx = 1\n"))
    test_code_cells_outside_solutions_are_short(short)


def test_reference_pages_recognised_by_their_title(tmp_path):
    for index, (title, reference) in enumerate([
        ("# Appendix: the planted model", True),
        ("# 5b. A gallery of context neurons", True),
        ("# 5. Context neurons (Figure 3)", False),
    ]):
        path = tmp_path / f"page{index}.py"  # one file each: the parsed cells are cached by mtime
        path.write_text(f"# %% [markdown]\n# (label)=\n{_commented(title)}\n# Text.\n")
        assert is_reference_page(path) is reference, title


def _commented(line: str) -> str:
    return "# " + line


def test_a_stale_stored_notebook_is_caught(tmp_path, monkeypatch):
    chapter = CHAPTERS[0]
    notebook = nbformat.read(stored_notebook(chapter), as_version=4)
    code = next(cell for cell in notebook.cells[2:] if cell.cell_type == "code")
    code.source += "\nprint('an edit made after the notebook was regenerated')"
    stale = tmp_path / f"{chapter.stem}.ipynb"
    nbformat.write(notebook, stale)
    monkeypatch.setattr(f"{__name__}.stored_notebook", lambda _: stale)
    with pytest.raises(AssertionError, match="is stale"):
        test_stored_notebook_has_the_chapters_cells(chapter)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=ids(CHAPTERS))
def test_stored_notebook_holds_no_widget(chapter):
    """A widget output (a notebook progress bar, an explorer) needs its JavaScript from a CDN: the
    static website cannot draw it offline, and the browser test fails on the request."""
    stored = stored_notebook(chapter)
    if not stored.is_file():
        pytest.skip(f"{stored.name} missing (see test_stored_notebook_has_the_chapters_cells)")
    widgets = [
        index
        for index, cell in enumerate(nbformat.read(stored, as_version=4).cells)
        for output in cell.get("outputs", [])
        if "application/vnd.jupyter.widget-view+json" in output.get("data", {})
    ]
    assert not widgets, f"{stored.name}: widget outputs in cells {widgets}"
