"""The neuron gallery. This module summarises every discovered context neuron (chapter 5).

For each neuron found by :mod:`context_neurons.neurons` it gathers the score, the tokens that push
it up and down most, and (on the planted model) what was planted there. :func:`gallery_table`
gives one row per neuron, :func:`plot_gallery` a grid of small bar charts, and
:func:`write_gallery` writes a browsable folder of Markdown pages with figures (one page per
neuron plus an index), for use outside the book or in a build step.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from transformer_lens import HookedTransformer

from context_neurons.circuit import ContextualCircuit
from context_neurons.neurons import NeuronScores, check_neurons, planted_topic_share, token_table
from context_neurons.plotting_neurons import plot_token_bars


def gallery_table(
    circuit: ContextualCircuit,
    model: HookedTransformer,
    neurons,
    scores: NeuronScores,
    truth=None,
    k: int = 5,
) -> pd.DataFrame:
    """One row per neuron: score, sign, top and bottom tokens (and the planted plan, if any).

    Columns: ``score``, ``direction`` (``+`` when its extreme tokens push it up on balance),
    ``top tokens``, ``bottom tokens``; on the planted model also ``planted as`` (the planted
    description, or ``-``) and the share of its ``scores.k`` most extreme tokens (largest
    ``|z|``, the tokens behind the score) that belong to the topics planted there.
    """
    neurons = check_neurons(model, neurons)
    rows = []
    for j in neurons:
        table = token_table(circuit, model, j, k=max(k, scores.k), scores=scores)
        row = {
            "neuron": j,
            "score": round(float(scores.top[j]), 1),
            "direction": "+" if scores.sign[j] > 0 else "-",
            "top tokens": " ".join(table["top token"].iloc[:k]),
            "bottom tokens": " ".join(table["bottom token"].iloc[:k]),
        }
        if truth is not None:
            plan = truth.context_neurons.get(j)
            row["planted as"] = plan["description"] if plan else "-"
            both = pd.concat(
                [
                    table[["top id", "top z"]].set_axis(["id", "z"], axis=1),
                    table[["bottom id", "bottom z"]].set_axis(["id", "z"], axis=1),
                ]
            )
            extreme = both.iloc[(-both["z"].abs().to_numpy()).argsort(kind="stable")[: scores.k]]
            ids = list(extreme["id"])
            row["planted-topic share"] = round(planted_topic_share(truth, j, ids), 2)
        rows.append(row)
    return pd.DataFrame(rows).set_index("neuron")


def plot_gallery(
    circuit: ContextualCircuit,
    model: HookedTransformer,
    neurons,
    scores: NeuronScores,
    k: int = 5,
    columns: int = 4,
    max_neurons: int = 40,
):
    """A grid of small bar charts of top and bottom contributions, one per neuron (best first)."""
    neurons = check_neurons(model, neurons)[:max_neurons]
    rows = (len(neurons) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(3.1 * columns, 2.3 * rows), squeeze=False)
    for ax, j in zip(axes.flat, neurons):
        table = token_table(circuit, model, j, k=k, scores=scores)
        plot_token_bars(
            table, j, k=k, ax=ax, title=f"neuron {j} (score {float(scores.top[j]):.0f})"
        )
    for ax in list(axes.flat)[len(neurons) :]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def write_gallery(
    directory: str | Path,
    circuit: ContextualCircuit,
    model: HookedTransformer,
    neurons,
    scores: NeuronScores,
    truth=None,
    k: int = 12,
) -> list[Path]:
    """Write ``index.md`` and one ``neuron_<j>.md`` page (with a PNG) per neuron into ``directory``.

    Returns:
        The paths written, index first.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    neurons = check_neurons(model, neurons)
    summary = gallery_table(circuit, model, neurons, scores, truth)
    written = []
    index = [
        "# Context neuron gallery",
        "",
        f"{len(neurons)} layer-0 neurons found from the weights (calibration text "
        f"'{circuit.calibration.name}'), best score first.",
        "",
        "| neuron | score | top tokens | bottom tokens |",
        "|---|---|---|---|",
    ]
    for j in neurons:
        row = summary.loc[j]
        index.append(
            f"| [{j}](neuron_{j}.md) | {row['score']} | `{row['top tokens']}` | "
            f"`{row['bottom tokens']}` |"
        )
        table = token_table(circuit, model, j, k=k, scores=scores)
        fig = plot_token_bars(table, j, k=k)
        fig.savefig(directory / f"neuron_{j}.png", dpi=90)
        plt.close(fig)
        page = [f"# Neuron {j}", "", f"Score {row['score']} (direction {row['direction']}).", ""]
        if truth is not None:
            page += [f"Planted as: {row['planted as']}.", ""]
        shown = table.drop(columns=["top id", "bottom id"]).round(3)
        page += [
            f"![token contributions of neuron {j}](neuron_{j}.png)",
            "",
            shown.to_markdown() if _has_tabulate() else f"```\n{shown.to_string()}\n```",
            "",
        ]
        path = directory / f"neuron_{j}.md"
        path.write_text("\n".join(page), encoding="utf-8")
        written.append(path)
    (directory / "index.md").write_text("\n".join(index) + "\n", encoding="utf-8")
    return [directory / "index.md", *written]


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401
    except ImportError:
        return False
    return True
