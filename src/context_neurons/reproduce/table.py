"""The results table. This module prints the main job's rows (:class:`~.results.Results`).

Each :class:`~.results.Row` is one quantity computed in the run, printed with the paper's value
beside it (from :mod:`context_neurons.reproduce.paper`, never in its place) and, on the planted
model, the planted truth.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from context_neurons.printing import fixed, number_cell, significant
from context_neurons.reproduce.results import Results, Row
from context_neurons.verdict import verdict_sentences
from context_neurons.verdict.v3_report import verdict_sentences_v3


def number(value: float) -> str:
    """A float at the precision it carries: a whole number as one (``6``, not ``6.0000``); from 1
    on, 4 significant digits (``91.5``, ``1.235e+06``); below 1, 4 fixed decimals without the
    trailing zeros (``0.123``), so that a value near zero prints alike on every machine."""
    if math.isnan(value) or math.isinf(value):
        return fixed(value, 4)
    if value.is_integer() and abs(value) < 1e15:
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
        items = _numeric_order([(str(k), {row.key: v}) for k, v in value.items()])
    elif isinstance(value, list) and all(isinstance(v, dict) for v in value):
        items = [(str(k + 1), v) for k, v in enumerate(value)]
    elif isinstance(value, dict) and all(isinstance(v, dict) for v in value.values()):
        items = _numeric_order([(str(k), v) for k, v in value.items()])
    else:
        return None
    flat = all(not isinstance(f, dict) for _, fields in items for f in fields.values())
    return items if items and flat else None


def _markdown(head: list[str], body: list[list[str]]) -> list[str]:
    """Lines of a Markdown table, columns padded to their widest cell."""
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"

    return [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, body)]


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


def _record_table(items: list[tuple[str, dict]], index: str) -> list[str]:
    """A table with a row per record and a column per field (``-`` where a record has none)."""
    fields = list(dict.fromkeys(f for _, record in items for f in record))
    body = [[name] + [fmt(record[f]) if record.get(f) is not None else "-" for f in fields]
            for name, record in items]
    return _markdown([index, *fields], body)


#: The protocols whose verdicts the table prints in words: the protocol, its status
#: (registered when, and whether it is the one to believe) and its sentences.
PROTOCOLS = (
    ("v3", "v3 (confirmatory: registered before any of its numbers, on "
     "documents no earlier evaluation read)", verdict_sentences_v3),
    ("v2", "v2 (registered after v1's verdicts were seen; superseded by v3)",
     verdict_sentences),
    ("v1", "v1 (registered before any verdict; superseded by v3)",
     verdict_sentences),
)

#: Labels of rows that were not computed: printed as notes under the table.
SKIPPED_PREFIXES = ("not computed", "no contextual head")


def format_table(results: Results) -> str:
    """The table "quantity | paper (GPT-2 Small) | this run [| planted truth]", then a table of
    the values per head, one per sweep or list of records, notes and the verdicts in words."""
    rows, planted = results.rows, results.planted
    head = ["quantity", "paper (GPT-2 Small)", f"this run ({results.model})"]
    if planted:
        head.append("planted truth")
    per_head = [r for r in rows if r.show in ("per_head", "groups") and isinstance(r.value, dict)
                and r.value]
    tables: list[tuple[str, list[str]]] = []
    if per_head:
        tables.append(("per head", _head_table(per_head, planted)))

    def cell(row: Row, value: Any, suffix: str = "") -> str:
        if value is None:
            return "-"
        if row.show == "groups" and isinstance(value, dict) and value:
            return ", ".join(f"{len(h)} {group}" for group, h in value.items()) + ": per head"
        if row.show == "per_head" and isinstance(value, dict) and value:
            return "table: per head"
        records = _records(row, value) if row.show in ("records", "sweep") else None
        if records is None:
            return "see the JSON" if row.show == "json" else fmt(value)
        name = row.key + suffix
        tables.append((name, _record_table(records, row.index)))
        return f"table: {name}"

    body = [[r.key, r.paper or "-", cell(r, r.value)]
            + ([cell(r, r.truth, " (planted)")] if planted else []) for r in rows]
    body.append(["seconds", "-", fixed(results.seconds, 1)] + (["-"] if planted else []))
    out = _markdown(head, body)
    for name, lines in tables:
        out += ["", f"{name}:", *lines]
    # What was not computed, and why, under the table (the JSON's labels hold it too).
    out += [""] + [f"note: {r.key}: {r.label}" for r in rows
                   if r.label.startswith(SKIPPED_PREFIXES)]
    out += [f"reading: {r.key}: {r.reading}" for r in rows if r.reading]
    # The verdicts in words (chapter 8) of each protocol the run evaluated, each with its status.
    for name, protocol, sentences in PROTOCOLS:
        evaluation = results.evaluation(name)
        if evaluation is not None:
            out += [f"verdict, protocol {protocol}:"] + [f"  {s}" for s in sentences(evaluation)]
    return "\n".join(out).rstrip("\n")


def explain_table(results: Results) -> str:
    """The table's legend (``reproduce --explain``): what its columns are, then what each row is."""
    rows = results.rows
    out = [
        "columns:",
        "  quantity: the result's key in the JSON (--out)",
        "  paper (GPT-2 Small): Gibson (2025)'s value or claim, for comparison only; never used "
        "in the run ('-': the paper gives none)",
        f"  this run ({results.model}): computed in this run, on this model",
    ]
    if results.planted:
        out.append("  planted truth: what was planted in the planted model (known by construction)")
    out.append("rows:")
    out += [f"  {r.key}: {r.label or '-'}" for r in rows]
    out.append("  seconds: wall-clock time of the run")
    return "\n".join(out)


def number_rows(results: Results, column: str) -> pd.DataFrame:
    """The rows with one number, indexed by quantity: the paper's value on GPT-2 Small (``-``
    where the paper gives none) beside this run's, in the column ``column``."""
    rows = [{"quantity": row.key, "paper (GPT-2 Small)": row.paper or "-",
             column: number_cell(row.value)}
            for row in results.rows
            if isinstance(row.value, (int, float)) and not isinstance(row.value, bool)]
    return pd.DataFrame(rows).set_index("quantity")
