"""The comparison of stored chapter outputs (issue 31): last-digit noise passes, real changes fail.

The unit cases are the five cells that failed on another CPU, and the changes the comparison must
still catch. The last test runs nbval itself, with the notebooks' conftest, on a small notebook.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from context_neurons.book.stored_outputs import PrintedNumber, output_difference

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


@pytest.mark.parametrize(
    ("stored", "fresh"),
    [
        ("n_eff random 94.119", "n_eff random 94.118"),  # ch03 cell 6 on another CPU
        ("t Hoeffding  124.051", "t Hoeffding  124.052"),  # ch03 cell 10
        ("| score | -183.95 |", "| score | -183.96 |"),  # ch05_gallery's Markdown table
        ("221.61", "221.60"),
        ("shift -20.28 nats", "shift -20.29 nats"),
        ("CV 0.000", "CV -0.000"),
        ("x\n  9.999 y", "x\n 10.001 y"),  # a padded column one character wider
        ("limit < 1e-5, found 2.5e-07", "limit < 1e-5, found 2.6e-07"),
    ],
)
def test_last_digit_noise_passes(stored, fresh):
    assert output_difference(stored, fresh) is None


@pytest.mark.parametrize(
    ("stored", "fresh", "reason"),
    [
        ("n_eff 94.1", "n_eff 95.1", "beyond the tolerance: 94.1 stored, 95.1 now"),
        ("221.61", "221.30", "beyond the tolerance"),  # 0.31 > 2 units and > 1e-3 relative
        ("head 2 is contextual", "head 2 is positional", "text after the last number differs"),
        ("173 neurons found", "174 neurons found", "number 1 differs"),  # an integer count
        ("heads [0, 1, 6, 7]", "heads [0, 1, 6, 8]", "number 4 differs"),
        ("a 0.10\nb 0.20\n", "a 0.10\nb 0.20\nc 0.30\n", "2 numbers stored, 3 now"),  # a row
        # a trailing number removed, only white space after it: the text between the numbers
        # that remain is the same, so only the count tells them apart (issue 54)
        ("mean 0.25 0.50\n", "mean 0.25\n", "2 numbers stored, 1 now"),
        ("mean 0.25 0.50", "mean 0.25", "2 numbers stored, 1 now"),
        ("a 0.10\nb 0.20\n", "a 0.10\nb\n", "2 numbers stored, 1 now"),
        ("<caption>planted model (seed 0): D/c over texts</caption>",
         "<caption>planted model (seed 0): D over texts</caption>", "text after the last number"),
        ("ch05 v2 4.3.0", "ch06 v2 4.3.1", "text (no numbers) differs"),  # numbers glued to words: exact
        ("0.5", "0.50", None),  # printed precision changed but values agree: accepted
        ("12", "12.0", "number 1 differs"),  # an integer became a decimal
    ],
)
def test_real_changes_fail(stored, fresh, reason):
    found = output_difference(stored, fresh)
    if reason is None:
        assert found is None
    else:
        assert found is not None and reason in found, found


def test_tolerance_is_two_last_digit_units_or_relative_1e_3():
    assert PrintedNumber.parse("94.119").unit == pytest.approx(1e-3)
    assert PrintedNumber.parse("2.5e-07").unit == pytest.approx(1e-8)
    assert PrintedNumber.parse("-183").unit is None
    assert output_difference("1.000", "1.002") is None and output_difference("1.000", "1.003")
    assert output_difference("5000.1", "5004.9") is None  # relative 1e-3: 5.0
    assert output_difference("5000.1", "5005.2") is not None
    assert output_difference({"a": 1}, {"a": 1}) is None and output_difference({"a": 1}, {"a": 2})


def notebook(stored: str, printed: str) -> dict:
    """A one-cell notebook whose stored output is ``stored`` and whose code prints ``printed``."""
    cell = {
        "cell_type": "code", "execution_count": 1, "id": "c1", "metadata": {},
        "source": [f"print({printed!r})"],
        "outputs": [{"name": "stdout", "output_type": "stream", "text": [stored + "\n"]}],
    }
    return {"cells": [cell], "metadata": {"kernelspec": {"name": "python3", "language": "python",
            "display_name": "Python 3"}}, "nbformat": 4, "nbformat_minor": 5}


@pytest.mark.parametrize(
    ("stored", "printed", "passes"),
    [("n_eff 94.119", "n_eff 94.118", True), ("n_eff 94.1", "n_eff 95.1", False)],
)
def test_nbval_uses_the_comparison(tmp_path, stored, printed, passes):
    shutil.copy(NOTEBOOKS / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "cell.ipynb").write_text(json.dumps(notebook(stored, printed)))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval", "--nbval-current-env", "-q",
         "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path / "cell.ipynb")],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )
    assert (run.returncode == 0) == passes, run.stdout[-2000:]
    if not passes:
        assert "beyond the tolerance: 94.1 stored, 95.1 now" in run.stdout
