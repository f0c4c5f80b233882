"""The results table. This module prints the main job's rows (:class:`~.results.Row`).

Each :class:`~.results.Row` is one quantity computed in the run, printed with the paper's value
beside it (from :mod:`context_neurons.reproduce.paper`, never in its place) and, on the planted
model, the planted truth: a table per section of the run (:attr:`~.results.Row.section`), every
line within :data:`WIDTH` columns, a cell too long for its table printed in full under it.
"""

from __future__ import annotations

import math
import textwrap
from typing import Any

import pandas as pd

from context_neurons.printing import fixed, number_cell, significant
from context_neurons.reproduce.results import Results, Row
from context_neurons.verdict.evaluate import verdict_sentences
from context_neurons.verdict.gpt2_result import GPT2Evaluation
from context_neurons.verdict.registry import PROTOCOLS
from context_neurons.verdict.results import Evaluation
from context_neurons.verdict.v3_report import verdict_sentences_v3
from context_neurons.verdict.v3_stored import Entries


def number(value: float) -> str:
    """A float at the precision it carries: a whole number of at most 4 digits as one (``6``,
    not ``6.0000``); from 1 on, 4 significant digits (``91.5``, ``1.235e+06``, also for a large
    float that happens to be whole on one machine and not on another); below 1, 4 fixed decimals
    without the trailing zeros (``0.123``), so that a value near zero prints alike everywhere."""
    if math.isnan(value) or math.isinf(value):
        return fixed(value, 4)
    if value.is_integer() and abs(value) < 1e4:
        return str(int(value))
    if abs(value) >= 1:
        return significant(value, 4)
    return fixed(value, 4).rstrip("0").rstrip(".")


def fmt(value: Any) -> str:
    """A value as a table cell: a float at its precision (:func:`number`), a short list as a
    list (``[0]``: head 0, not a count)."""
    if isinstance(value, float):
        return number(value)
    if isinstance(value, (list, tuple)):
        if len(value) > 12 or any(isinstance(v, (dict, list, tuple)) for v in value):
            return f"{len(value)} items (the JSON)"
        return "[" + ", ".join(fmt(v) for v in value) + "]" if value else "none"
    if isinstance(value, dict):
        return "see the JSON"
    if isinstance(value, str) and (value != value.strip() or not value.isprintable()):
        return repr(value)  # a token such as ' the' or '\\n' keeps its spaces and one line
    return str(value)


def _numeric_order(items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Items keyed by numbers (heads, thresholds) in numeric order; others as they are."""
    try:
        return sorted(items, key=lambda item: float(item[0]))
    except ValueError:
        return items


def _records(row: Row, value: Any) -> list[tuple[str, dict]] | None:
    """The records of a ``records`` or ``sweep`` row, as ``(name, fields)``: a list or a dict of
    flat dicts, or one number per threshold; None when they nest (then the JSON holds them)."""
    if row.show == "sweep" and isinstance(value, dict):
        items = _numeric_order([(fmt(k), {row.key: v}) for k, v in value.items()])
    elif isinstance(value, list) and all(isinstance(v, dict) for v in value):
        items = [(str(k + 1), v) for k, v in enumerate(value)]
    elif isinstance(value, dict) and all(isinstance(v, dict) for v in value.values()):
        items = _numeric_order([(fmt(k), v) for k, v in value.items()])
    else:
        return None
    flat = all(not isinstance(f, dict) for _, fields in items for f in fields.values())
    return items if items and flat else None


#: Columns every printed line fits in (issue 34).
WIDTH = 100
#: A paper, value or record cell longer than this is shown as a marker ``[^n]`` and printed in
#: full under its table (:class:`Notes`).
CELL_MAX = 22
#: The indent of a wrapped line's continuation lines, under its first line's own indent.
INDENT = "    "


def wrap(text: str, indent: str = "") -> list[str]:
    """``text`` in lines of at most :data:`WIDTH` columns, continuation lines indented."""
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent + INDENT,
                         break_on_hyphens=False) or [indent]


class Notes:
    """The cells too long for a table: each shown as a marker ``[^n]`` (numbered through the
    whole output) and printed in full, as ``[^n] label: text``, under its table (:meth:`take`)."""

    def __init__(self) -> None:
        self.count, self.lines = 0, []

    def cell(self, text: str, label: str) -> str:
        """``text`` as it is, or a marker with its note waiting for :meth:`take`."""
        if len(text) <= CELL_MAX:
            return text
        self.count += 1
        self.lines += wrap(f"[^{self.count}] {label}: {text}")
        return f"[^{self.count}]"

    def take(self) -> list[str]:
        """The notes of the table just built (and no longer waiting)."""
        lines, self.lines = self.lines, []
        return lines


def _parts(widths: list[int]) -> list[list[int]]:
    """The columns after the first (by index) in as few tables as fit in :data:`WIDTH`, each
    repeating the first column, the tables as even in width as their number allows."""

    def pack(limit: int) -> list[list[int]]:  # a line is 4 + widths[0] + (width + 3) per column
        parts: list[list[int]] = [[]]
        for k in range(1, len(widths)):
            if parts[-1] and 4 + widths[0] + sum(widths[j] + 3 for j in parts[-1] + [k]) > limit:
                parts.append([])
            parts[-1].append(k)
        return parts

    best = pack(WIDTH)
    for limit in range(WIDTH - 1, 0, -1):  # narrower, while no more tables are needed
        parts = pack(limit)
        if len(parts) > len(best):
            break
        best = parts
    return best


def _markdown(head: list[str], body: list[list[str]]) -> list[str]:
    """Lines of a Markdown table, columns padded to their widest cell; one wider than
    :data:`WIDTH` is split into tables (:func:`_parts`), a blank line between them."""
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]

    def line(cells: list[str], columns: list[int]) -> str:
        return "| " + " | ".join(str(cells[j]).ljust(widths[j]) for j in columns) + " |"

    out: list[str] = []
    for part in _parts(widths):
        columns = [0, *part]
        out += [""] if out else []
        out += [line(head, columns), "|" + "|".join("-" * (widths[j] + 2) for j in columns) + "|"]
        out += [line(cells, columns) for cells in body]
    return out


def _head_table(rows: list[Row], planted: bool) -> list[str]:
    """One table of every ``per_head`` and ``groups`` row: a column per row (and the planted
    truth's)."""
    columns: dict[str, dict[str, str]] = {}
    for row in rows:
        for name, value in [(row.key, row.value)] + (
                [(f"{row.key} (planted)", row.truth)] if planted and row.truth else []):
            if row.show == "groups":
                columns[name] = {str(h): group for group, heads in value.items() for h in heads}
            else:
                columns[name] = {str(k): fmt(v) for k, v in value.items()}
    heads = sorted({h for column in columns.values() for h in column}, key=int)
    body = [[h] + [column.get(h, "-") for column in columns.values()] for h in heads]
    return _markdown(["head", *columns], body)


def _record_table(name: str, items: list[tuple[str, dict]], index: str,
                  notes: Notes) -> list[str]:
    """A table with a row per record and a column per field (``-`` where a record has none),
    then the notes of its long cells."""
    fields = list(dict.fromkeys(f for _, record in items for f in record))
    body = []
    for key, record in items:
        first = notes.cell(key, f"{name}, {index}")
        body.append([first] + [notes.cell(fmt(record[f]), f"{name}, {index} {first}, {f}")
                               if record.get(f) is not None else "-" for f in fields])
    return _markdown([index, *fields], body) + notes.take()


def _sentences(evaluation: Evaluation | Entries | GPT2Evaluation) -> list[str]:
    """A protocol's verdicts in words: an :class:`Evaluation` (v1, v2), every registered
    model's entry (v3), or a GPT-2 model's result (discovery-verdict-gpt2)."""
    if isinstance(evaluation, Evaluation):
        return verdict_sentences(evaluation)
    if isinstance(evaluation, GPT2Evaluation):
        return evaluation.sentences()
    return verdict_sentences_v3(evaluation)


def _sections(rows: list[Row]) -> dict[str, list[Row]]:
    """The rows by :attr:`~.results.Row.section`, sections in the order they first appear."""
    out: dict[str, list[Row]] = {}
    for row in rows:
        out.setdefault(row.section, []).append(row)
    return out


def _main_tables(results: Results, notes: Notes,
                 below: list[tuple[str, Any, str]]) -> list[str]:
    """A table per section, "quantity | paper (GPT-2 Small) | run [| planted truth]" (the
    truth's column where a row of the section has one), each under its title and over the notes
    of its long cells; records and sweeps go to ``below`` as (name, records, index)."""

    def cell(row: Row, value: Any, suffix: str = "") -> str:
        if value is None:
            return "-"
        if row.show in ("per_head", "groups") and isinstance(value, dict) and value:
            return "table: per head"
        records = _records(row, value) if row.show in ("records", "sweep") else None
        if records is None:
            text = "see the JSON" if row.show == "json" else fmt(value)
            return notes.cell(text, row.key + suffix)
        below.append((row.key + suffix, records, row.index))
        return "table below"

    out: list[str] = []
    for title, rows in _sections(results.rows).items():
        truth = results.planted and any(r.truth is not None for r in rows)
        head = ["quantity", "paper (GPT-2 Small)", f"run ({results.model})"]
        body = [[r.key, notes.cell(r.paper, f"{r.key} (paper)") if r.paper else "-",
                 cell(r, r.value)] + ([cell(r, r.truth, " (planted)")] if truth else [])
                for r in rows]
        head += ["planted truth"] if truth else []
        out += ([f"{title}:"] if title else []) + _markdown(head, body)
        out += notes.take() + [""]
    return out + [f"seconds: {fixed(results.seconds, 1)}"]


def _words(results: Results) -> list[str]:
    """The lines in words under the tables: what was not computed and why (the JSON's labels
    hold it too), the readings, and the verdicts (chapter 8) of each protocol the run
    evaluated, each with its status, the latest registered first."""
    rows = results.rows
    out = [line for r in rows if r.skipped
           for line in wrap(f"note: {r.key}: {r.label}")]
    out += [line for r in rows if r.reading for line in wrap(f"reading: {r.key}: {r.reading}")]
    for protocol in reversed(PROTOCOLS):
        evaluation = results.evaluation(protocol.version)
        if evaluation is not None:
            out += wrap(f"verdict, protocol {protocol.status}:")
            out += [line for s in _sentences(evaluation) for line in wrap(s, "  ")]
    return out


def format_table(results: Results) -> str:
    """A table per section of the rows (:func:`_main_tables`), then a table of the values per
    head, one per sweep or list of records, and the lines in words (:func:`_words`); every line
    fits in :data:`WIDTH` columns, a cell longer than :data:`CELL_MAX` printed as a note."""
    notes, below = Notes(), []
    out = _main_tables(results, notes, below)
    per_head = [r for r in results.rows if r.show in ("per_head", "groups")
                and isinstance(r.value, dict) and r.value]
    if per_head:
        out += ["", "per head:", *_head_table(per_head, results.planted)]
    for name, records, index in below:
        out += ["", f"{name}:", *_record_table(name, records, index, notes)]
    return "\n".join(out + [""] + _words(results)).rstrip("\n")


#: Words the rows use that the legend defines (``reproduce --explain``).
TERMS = {
    "L1H2": "head 2 of layer 1 (layers and heads count from 0)",
    "robust |z|": "a contribution minus the neuron's median over the vocabulary, in units of "
                  "1.4826 times its median absolute deviation (a standard deviation that a few "
                  "extreme tokens do not inflate)",
    "explanation_accuracy, majority_chance": "the held-out accuracy of a look-up's explanation "
                                             "used as a classifier, beside the accuracy of always "
                                             "guessing the majority class",
    "balanced_accuracy": "the mean of the accuracies on active and inactive prompts; 0.5 for any "
                         "constant guess, whatever the base rate",
    "prompts_skipped_not_firing": "corpus prompts left out because the neuron does not fire on "
                                  "them at all",
    "nominal, reading (band_coverage)": "the rate the band promises (1 - delta per pair; "
                                        "1 - delta_head per denominator), and the coverage read "
                                        "against it: 'at or above nominal' when the bootstrap "
                                        "interval's lower end reaches it, 'consistent with "
                                        "nominal' when the interval contains it, 'falls short' "
                                        "when the whole interval lies below it (a rule fixed "
                                        "before any coverage was computed)",
    "vacuous": "the fraction of (neuron, position) pairs whose band is infinite or at least as "
               "wide as the neuron's whole range on these texts: there the band holds and "
               "certifies nothing",
}


def explain_table(results: Results) -> str:
    """The table's legend (``reproduce --explain``): what its columns are, then what each row is."""
    rows = results.rows
    out = [
        "columns:",
        "  quantity: the result's key in the JSON (--out)",
        "  paper (GPT-2 Small): Gibson (2025)'s value or claim, for comparison only; never used "
        "in the run ('-': the paper gives none)",
        f"  run ({results.model}): computed in this run, on this model",
    ]
    if results.planted:
        out.append("  planted truth: what was planted in the planted model (known by construction)")
    out.append(f"  [^n]: a cell longer than {CELL_MAX} characters, printed in full under its table")
    out.append("rows:")
    out += [f"  {r.key}: {r.label or '-'}" for r in rows]
    out.append("  seconds: wall-clock time of the run")
    out.append("terms:")
    out += [f"  {term}: {meaning}" for term, meaning in TERMS.items()]
    return "\n".join(line for text in out  # each line wrapped, under its own indent
                     for line in wrap(text.lstrip(), text[:len(text) - len(text.lstrip())]))


def number_rows(results: Results, column: str) -> pd.DataFrame:
    """The rows with one number, indexed by quantity: the paper's value on GPT-2 Small (``-``
    where the paper gives none) beside this run's, in the column ``column``."""
    rows = [{"quantity": row.key, "paper (GPT-2 Small)": row.paper or "-",
             column: number_cell(row.value)}
            for row in results.rows
            if isinstance(row.value, (int, float)) and not isinstance(row.value, bool)]
    return pd.DataFrame(rows).set_index("quantity")
