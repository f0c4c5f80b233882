"""The gallery. This module writes the gallery page of the book: every discovered neuron with its
tokens and its true against approximate activations.

:func:`gallery_table` (one row per neuron), :func:`index_markdown` and :func:`neuron_markdown`
(the page's Markdown, one heading per neuron) and :func:`neuron_facts` (what is listed under a
heading). The figures are drawn by :mod:`context_neurons.plotting.discovery`.
"""

from __future__ import annotations

import re

import pandas as pd
from transformer_lens.model_bridge import TransformerBridge

from context_neurons.casestudies import TextActivations
from context_neurons.checks import check_neurons
from context_neurons.circuit import ContextualCircuit
from context_neurons.discovery import (
    NeuronScores,
    planted_description,
    planted_topic_share,
    token_tables,
)


#: The gallery's index lists at most this many neurons, best score first.
MAX_INDEX_ROWS = 500


def gallery_table(
    circuit: ContextualCircuit,
    model: TransformerBridge,
    neurons,
    scores: NeuronScores,
    truth=None,
    k: int = 5,
) -> pd.DataFrame:
    """One row per neuron: score, sign, top and bottom tokens (and the planted plan, if any).

    Columns: ``score``, ``direction`` (``+`` when its extreme tokens push it up on balance),
    ``top tokens``, ``bottom tokens``; on the planted model also ``planted truth`` (the planted
    description, or ``-``) and ``label-word share``, the share of its ``scores.k`` most extreme
    tokens (largest ``|z|``, the tokens behind the score) that are label words of the topics
    planted there (:func:`~context_neurons.discovery.planted.planted_topic_share`: words held out
    of the planting, never the words that planted the neuron).
    """
    neurons = check_neurons(model, neurons)
    tables = token_tables(circuit, model, neurons, k=max(k, scores.k), scores=scores)
    rows = []
    for j in neurons:
        table = tables[j]
        row = {
            "neuron": j,
            "score": round(float(scores.top[j]), 1),
            "direction": "+" if scores.sign[j] > 0 else "-",
            "top tokens": " ".join(table["top token"].iloc[:k]),
            "bottom tokens": " ".join(table["bottom token"].iloc[:k]),
        }
        if truth is not None:
            row["planted truth"] = planted_description(truth, j)
            row["label-word share"] = round(
                planted_topic_share(truth, j, _extreme_ids(table, scores.k)), 2
            )
        rows.append(row)
    return pd.DataFrame(rows).set_index("neuron")


def _extreme_ids(table: pd.DataFrame, k: int) -> list[int]:
    """The ``k`` tokens of a token table with the largest ``|z|``, either side."""
    both = pd.concat(
        [
            table[["top id", "top z"]].set_axis(["id", "z"], axis=1),
            table[["bottom id", "bottom z"]].set_axis(["id", "z"], axis=1),
        ]
    )
    order = (-both["z"].abs().to_numpy()).argsort(kind="stable")[:k]
    return [int(t) for t in both["id"].iloc[order]]


def neuron_facts(
    acts: TextActivations, scores: NeuronScores, neuron, window: int, truth=None
) -> dict[str, str]:
    """The facts listed under a neuron's heading on the gallery page.

    Args:
        acts: activations on the gallery's texts (the neuron among them).
        scores: the discovery scores.
        neuron: the neuron.
        window: the text its plot shows.
        truth: the planted truth, or ``None`` (GPT-2).
    """
    j, col = int(neuron), acts.column(neuron)
    found = scores.found(acts.theta)
    rank = f" (rank {found.index(j) + 1} of {len(found)})" if j in found else ""
    push = "up" if scores.sign[j] > 0 else "down"
    marks = acts.marks[window, 1 : int(acts.lengths[window]), col]
    facts = {
        "score": f"top[j] = {float(scores.top[j]):.1f}{rank}; its {scores.k} most extreme "
        f"tokens push it {push} on balance",
    }
    if truth is not None:
        facts["planted truth"] = planted_description(truth, j)
    departure = float(acts.departures()[window, col])
    facts["plotted text"] = (
        f"{code_span(acts.texts.labels[window])} (domain *{acts.texts.domains[window]}*): its "
        f"mean pre-activation there is {departure:+.2f} from its median over the "
        f"{len(acts.lengths)} texts (up-tokens in it: {int((marks > 0).sum())}, down-tokens: "
        f"{int((marks < 0).sum())})"
    )
    return facts


def code_span(text: str, in_table: bool = False) -> str:
    """``text`` as a Markdown code span, shown verbatim (backticks inside are fenced around)."""
    run = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (run + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    span = f"{fence}{pad}{text}{pad}{fence}"
    return span.replace("|", "\\|") if in_table else span


def anchor(neuron) -> str:
    """The HTML id of a neuron's heading on the gallery page (``Neuron 300`` -> ``neuron-300``)."""
    return f"neuron-{int(neuron)}"


def index_markdown(
    neurons,
    scores: NeuronScores,
    tables: dict[int, pd.DataFrame],
    extra=None,
    k: int = 3,
    linked=None,
    model: str = "",
    limit: int = MAX_INDEX_ROWS,
) -> str:
    """A Markdown table of the neurons (the ``limit`` first, and a line saying how many more),
    each with a section linking to its heading on the page.

    Args:
        neurons: the neurons, in the order of the rows.
        scores: their scores.
        tables: neuron -> token table (:func:`neurons.token_tables`).
        extra: neuron -> {column: text}, further columns (e.g. what was planted there).
        k: tokens shown per side.
        linked: the neurons that have a section (default: all); the others are listed unlinked.
        model: the name of the model that made the numbers (``loaded.title``): when given, a
            caption ``"<model>: ..."`` above the table names it.
        limit: rows at most (a threshold that finds nearly every neuron would list thousands).
    """
    listed = list(neurons)[:limit]
    linked = set(int(j) for j in (neurons if linked is None else linked))
    extra = extra or {}
    columns = list(dict.fromkeys(c for j in listed for c in extra.get(j, {})))
    head = ["neuron", "score", "top tokens", "bottom tokens", *columns]
    lines = _caption(model, f"the found neurons, best score first ({k} tokens a side)")
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for j in listed:
        table = tables[j]
        cells = [
            f'<a href="#{anchor(j)}">{j}</a>' if int(j) in linked else str(j),
            f"{float(scores.top[j]):.1f}",
            " ".join(code_span(t, True) for t in table["top token"].iloc[:k]),
            " ".join(code_span(t, True) for t in table["bottom token"].iloc[:k]),
            *[str(extra.get(j, {}).get(c, "")).replace("|", "\\|") for c in columns],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if len(listed) < len(neurons):
        lines += ["", f"*The {len(listed)} highest-scoring of {len(neurons)} found neurons are "
                      "listed: a threshold that finds this many separates little on this model.*"]
    return "\n".join(lines)


def _caption(model: str, what: str) -> list[str]:
    """The Markdown lines of a table's caption ``"<model>: <what>"`` (none without a model)."""
    return [f"*{model}: {what}*", ""] if model.strip() else []


def neuron_markdown(
    neuron: int, table: pd.DataFrame, facts: dict[str, str], k: int = 10, model: str = ""
) -> str:
    """One neuron's section of the gallery: a heading, facts, and its top and bottom tokens.

    Args:
        neuron: the neuron index (the heading is ``Neuron <j>``, its HTML id :func:`anchor`).
        table: its token table (:func:`neurons.token_tables`), at least ``k`` rows.
        facts: label -> text, shown as a list under the heading.
        k: rows of the token table shown.
        model: the model's name (``loaded.title``): when given, a caption above the token table
            names it.
    """
    lines = [f"### Neuron {int(neuron)}", ""]
    lines += [f"- **{label}**: {text}" for label, text in facts.items()]
    what = f"the {k} tokens that push neuron {int(neuron)} up and down most"
    lines += [""] + _caption(model, what)
    lines += [
        "| rank | top token | contribution | z | bottom token | contribution | z |",
        "|---:|---|---:|---:|---|---:|---:|",
    ]
    for rank, row in table.head(k).iterrows():
        lines.append(
            f"| {rank} | {code_span(row['top token'], True)} | {row['top contribution']:+.2f} "
            f"| {row['top z']:+.1f} | {code_span(row['bottom token'], True)} "
            f"| {row['bottom contribution']:+.2f} | {row['bottom z']:+.1f} |"
        )
    return "\n".join(lines)
