"""Printed numbers are the same on every machine (issue 21).

nbval compares the stored chapters' outputs character by character, so a number must not print
differently when the BLAS build, the thread count or the precision changes. Chapter 9's rotary
table printed the median TV of an exact factorisation, float rounding, with ``{:.4g}``: 3.506e-08
on one machine, 3.615e-08 on another. These tests compute what the chapters print from the toy
models in float32 with one and two threads and in float64, and require the same text; they also
check the formatting helpers, and that no chapter prints a computed number at relative precision.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
import torch

from context_neurons import position_schemes as ps
from context_neurons import printing
from context_neurons.printing import Table, below, fixed, frame

BOOK = Path(__file__).resolve().parents[2] / "book"

#: The chapters whose stored outputs nbval compares (chapter 8 is rewritten elsewhere).
CHAPTERS = sorted(
    p for p in BOOK.glob("*.py") if p.name.startswith(("ch0", "appendix")) and "ch08" not in p.name
)

def shown(table, model: str) -> str:
    """A head table as chapter 9 shows it (``show_table`` with the head-table formats): its
    text form, which is :func:`ps.format_head_table`'s, and its HTML."""
    shown_table = Table(table, "heads", model, formats=ps.HEAD_TABLE_FORMATS)
    assert repr(shown_table).split("\n", 1)[1] == ps.format_head_table(table)
    return shown_table._repr_html_()


def chapter9_prints(dtype: torch.dtype, threads: int) -> str:
    """What chapter 9 shows in section 9.4 (the head tables as text and as HTML), computed at
    ``dtype`` with ``threads`` threads."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        rope, rope_heads = ps.rotary_toy_model(seed=0)
        rope = rope.to(dtype)
        texts = ps.random_texts(rope, 8, seed=1)
        fit = ps.factorise_attention(rope, texts)
        rope_table = rope_heads.join(ps.head_table(fit))
        excess = float((fit.score_error().abs() - ps.rotary_error_bound(rope, fit)).max())
        alibi = ps.alibi_toy_model(seed=0).to(dtype)
        alibi_fit = ps.factorise_attention(alibi, texts)
        alibi_table = ps.head_table(alibi_fit)
        alibi_table.insert(0, "slope m", ps.alibi_slopes(alibi).cpu().tolist())
    finally:
        torch.set_num_threads(previous)
    return "\n".join(
        [
            ps.format_head_table(rope_table),
            shown(rope_table, "rotary toy model"),
            f"excess {below(excess, 1e-3)}",
            ps.format_head_table(alibi_table),
            shown(alibi_table, "ALiBi toy model"),
            f"largest TV {below(float(alibi_fit.tv().max()), 1e-5)}",
        ]
    )


@pytest.fixture(scope="module")
def reference() -> str:
    return chapter9_prints(torch.float32, 1)


@pytest.mark.parametrize(
    ("dtype", "threads"), [(torch.float32, 2), (torch.float64, 1)], ids=["2 threads", "float64"]
)
def test_chapter9_tables_print_alike(reference, dtype, threads):
    assert chapter9_prints(dtype, threads) == reference


def test_the_old_format_would_have_failed(reference):
    """The test above catches the issue: ``{:.4g}`` prints the exact heads' TV differently."""
    rope, _ = ps.rotary_toy_model(seed=0)
    texts = ps.random_texts(rope, 8, seed=1)
    tv = [
        float(ps.head_table(ps.factorise_attention(rope.to(dtype), texts)).loc[6, "median TV"])
        for dtype in (torch.float32, torch.float64)
    ]
    assert f"{tv[0]:.4g}" != f"{tv[1]:.4g}"
    assert fixed(tv[0], 4) == fixed(tv[1], 4) == "0.0000"
    assert "0.0000" in reference


def test_fixed_has_no_negative_zero():
    assert fixed(-3e-9, 3) == fixed(2e-9, 3) == "0.000"
    assert fixed(-3e-9, 2, sign=True) == fixed(2e-9, 2, sign=True) == "+0.00"
    assert fixed(-0.126, 2) == "-0.13" and fixed(0.5, 1, sign=True) == "+0.5"
    assert fixed(float("nan")) == "NaN"


def test_below_hides_rounding_only():
    assert below(7e-7, 1e-5) == below(-3e-9, 1e-5) == below(0.0, 1e-5) == "< 1e-5"
    assert below(2e-3, 1e-5) == "0.002"


def test_frame_formats_floats_at_fixed_decimals():
    import pandas as pd  # only this test needs it

    table = pd.DataFrame({"x": [-1e-9, 0.1234], "name": ["a", "b"], "n": [1, 2]})
    text = frame(table, 2, {"n": 0})
    assert "-0.00" not in text and "0.12" in text and "e-" not in text
    assert frame(table, 2) == frame(table.assign(x=[2e-9, 0.12341]), 2)


#: A format spec with an explicit precision in e or g: relative precision (``{x:.1e}``,
#: ``{:.4g}``, ``"%.3g"``). ``{x:g}`` alone (constants such as thresholds) is allowed.
RELATIVE = re.compile(r"(?::[+ ]?\d*\.\d+[eEgG][}\"'])|(?:%[+ ]?\d*\.\d+[eEgG])")


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_no_chapter_prints_at_relative_precision(chapter):
    code = [
        (number, line)
        for number, line in enumerate(chapter.read_text().splitlines(), 1)
        if not line.lstrip().startswith("#")
    ]
    found = [f"{chapter.name}:{number}: {line.strip()}" for number, line in code
             if RELATIVE.search(line)]
    assert not found, "print with context_neurons.printing (fixed, below, frame):\n" + "\n".join(
        found
    )


def test_table_names_its_model_and_formats_like_frame():
    import pandas as pd  # only this test needs it

    from context_neurons.printing import Table

    data = pd.DataFrame({"x": [-1e-9, 0.1234], "name": ["a<b", "b"]})
    table = Table(data, "two rows", "planted model (seed 0)", decimals=2)
    page = table._repr_html_()
    assert "<caption>planted model (seed 0): two rows</caption>" in page
    assert "a&lt;b" in page and "-0.00" not in page and ">0.12<" in page
    assert repr(table).splitlines()[0] == "planted model (seed 0): two rows"
    assert frame(data, 2) in repr(table)
    assert page == Table(data.assign(x=[2e-9, 0.12341]), "two rows", "planted model (seed 0)",
                         decimals=2)._repr_html_()
    with pytest.raises(ValueError, match="names the model"):
        Table(data, "two rows", " ")


def test_wrapped_items_breaks_between_items_only():
    tokens = [repr(f" word{k}") for k in range(30)]
    text = printing.wrapped_items("tokens:", tokens, ",")
    lines = text.split("\n")
    assert all(len(line) <= printing.TEXT_WIDTH for line in lines), lines
    assert all(line.startswith("  '") for line in lines[1:]), lines
    assert text.replace("\n  ", " ") == "tokens: " + ", ".join(tokens)  # nothing split or lost
    assert printing.wrapped_items("x:", ["a" * 90, "b"]) == "x:\n  " + "a" * 90 + "\n  b"


def test_show_table_prints_in_a_terminal_and_displays_in_a_notebook(monkeypatch, capsys):
    data = pd.DataFrame({"x": [0.5]})
    printing.show_table(data, "a table", model="m")
    assert capsys.readouterr().out.startswith("m: a table\n")
    ipython = pytest.importorskip("IPython")
    shown = []
    monkeypatch.setattr(ipython, "get_ipython", lambda: object())  # a notebook's shell
    monkeypatch.setattr("IPython.display.display", shown.append)
    assert printing.ipython_shell() is not None
    printing.show_table(data, "a table", model="m")
    assert capsys.readouterr().out == "" and shown[0].title == "m: a table"
