"""Every stored output fits the website's text column (fast: reads ``tests/notebooks``).

A printed line longer than :data:`printing.TEXT_WIDTH` characters needs sideways scrolling at
1280 px; result tables are shown as HTML tables (``printing.show_table``), whose cells wrap, and
whose caption names the model. The browser test (``tests/website``) measures the rendered pages;
this one catches a wide print before the book is built.
"""

from __future__ import annotations

import nbformat
import pytest

from context_neurons.book.notebooks import chapter_files, stored_notebook
from context_neurons.printing import TEXT_WIDTH

CHAPTERS = chapter_files()


def stored(chapter):
    return nbformat.read(stored_notebook(chapter), as_version=4)


def printed_texts(notebook) -> list[tuple[int, str]]:
    """``(cell index, text)`` of every printed or displayed text output that is shown as text:
    an output with an HTML form is rendered from it, not from its text fallback."""
    found = []
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []):
            if output.output_type == "stream":
                found.append((index, output.text))
            elif "data" in output and not {"text/html", "image/png"} & set(output.data):
                found.append((index, output.data.get("text/plain", "")))
    return found


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_printed_lines_fit_the_text_column(chapter):
    wide = [
        f"cell {index}: {len(line)} characters: {line[:60]}..."
        for index, text in printed_texts(stored(chapter))
        for line in text.splitlines()
        if len(line) > TEXT_WIDTH
    ]
    assert not wide, f"lines wider than {TEXT_WIDTH} characters:\n" + "\n".join(wide)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_result_tables_name_their_model(chapter):
    """Every HTML result table has a caption (``show_table``: "<model>: <what>")."""
    tables = [
        (index, output.data["text/html"])
        for index, cell in enumerate(stored(chapter).cells)
        for output in cell.get("outputs", [])
        if "data" in output and "result-table" in output.data.get("text/html", "")
    ]
    uncaptioned = [index for index, page in tables if "<caption>" not in page]
    assert not uncaptioned, f"result tables without a caption in cells {uncaptioned}"
