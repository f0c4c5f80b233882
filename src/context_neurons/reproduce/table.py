"""The results table. This module holds the rows the main job reports and prints them.

Each :class:`Row` is one quantity computed in the run, with the paper's value beside it (from
:mod:`context_neurons.reproduce.paper`, never in its place) and, on the planted model, the planted
truth.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from context_neurons.printing import fixed
from context_neurons.reproduce.paper import PAPER
from context_neurons.verdict import verdict_sentences


@dataclass
class Row:
    """One reproduced quantity: its key, the value computed in this run, the planted truth (if
    any) and what it is. The paper's value is looked up by key in :data:`PAPER`."""

    key: str
    value: Any
    label: str = ""
    truth: Any = None

    @property
    def paper(self) -> str:
        return PAPER.get(self.key, "")


def fmt(value: Any) -> str:
    """A value as a table cell (long lists and dicts are summarised: the JSON has them)."""
    if isinstance(value, float):  # fixed decimals: a value near zero prints alike everywhere
        return fixed(value, 4)
    if isinstance(value, (list, tuple)) and (
        len(value) > 12 or any(isinstance(v, dict) for v in value)
    ):
        return f"[{len(value)} items, see the JSON]"
    if isinstance(value, dict):
        text = json.dumps(value, default=str)
        return text if len(text) < 60 else text[:57] + "..."
    return str(value)


#: Labels of rows that were not computed: printed as notes under the table.
SKIPPED_PREFIXES = ("not computed", "no contextual head")


def format_table(results: dict[str, Any]) -> str:
    """The table "quantity | paper (GPT-2 Small) | this run [| planted truth]"."""
    rows: list[Row] = results["_rows"]
    planted = results["planted"]
    head = ["quantity", "paper (GPT-2 Small)", f"this run ({results['model']})"]
    if planted:
        head.append("planted truth")
    body = [
        [r.key, r.paper or "-", fmt(r.value)]
        + ([fmt(r.truth) if r.truth is not None else "-"] if planted else [])
        for r in rows
    ]
    body.append(["seconds", "-", fixed(results["seconds"], 1)] + (["-"] if planted else []))
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"

    out = [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in body]
    # What was not computed, and why, under the table (the JSON's labels hold it too).
    out += [f"note: {r.key}: {r.label}" for r in rows if r.label.startswith(SKIPPED_PREFIXES)]
    # The pre-registered verdicts in words (chapter 8), of each protocol the run evaluated.
    for key, protocol in (("discovery_evaluation", "v1"), ("discovery_evaluation_v2", "v2")):
        evaluation = results.get(key)
        if isinstance(evaluation, dict):
            out += [f"verdict, protocol {protocol}: {s}" for s in verdict_sentences(evaluation)]
    return "\n".join(out)


def explain_table(results: dict[str, Any]) -> str:
    """The table's legend (``reproduce --explain``): what its columns are, then what each row is."""
    rows: list[Row] = results["_rows"]
    out = [
        "columns:",
        "  quantity: the result's key in the JSON (--out)",
        "  paper (GPT-2 Small): Gibson (2025)'s value or claim, for comparison only; never used "
        "in the run ('-': the paper gives none)",
        f"  this run ({results['model']}): computed in this run, on this model",
    ]
    if results["planted"]:
        out.append("  planted truth: what was planted in the planted model (known by construction)")
    out.append("rows:")
    out += [f"  {r.key}: {r.label or '-'}" for r in rows]
    out.append("  seconds: wall-clock time of the run")
    return "\n".join(out)


def to_json(results: dict[str, Any]) -> str:
    """The results as JSON: values by key, with ``labels``, ``paper`` and ``planted_truth``."""
    clean = {k: v for k, v in results.items() if not k.startswith("_")}
    clean["labels"] = {r.key: r.label for r in results["_rows"] if r.label}
    clean["paper"] = {r.key: r.paper for r in results["_rows"] if r.paper}
    if results["planted"]:
        clean["planted_truth"] = {r.key: r.truth for r in results["_rows"] if r.truth is not None}
    return json.dumps(clean, indent=2, default=str)
