"""The circuit with one more head. This module answers what changes when the head closest to
contextual (:mod:`.closest_head`) joins the contextual heads (chapter 9, second open question):
:func:`add_head` rebuilds the circuit with it and measures each head's attention TV
(:func:`~context_neurons.sweeps.attention_tv.circuit_attention_tv`), the neurons found and r and
FVU of fixed neurons, before and after (:class:`AddedHead`)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from jaxtyping import Bool, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from context_neurons import circuit as cc
from context_neurons import discovery as disc
from context_neurons import evaluation as ev
from context_neurons.checks import InputError
from context_neurons.sweeps.attention_tv import circuit_attention_tv
from context_neurons.sweeps.shared import jaccard


@dataclass(frozen=True)
class AddedHead:
    """The circuit with one head added, against the circuit without it.

    Attributes:
        added: the head added.
        plus: the circuit with it (same calibration text and destination).
        tv: per circuit (``"<k> heads"``, ``k`` its number of heads), each head's median attention
            TV over the texts' positions from the calibration's ``n_min`` on.
        table: one row per circuit: the median TV of the original heads, how many neurons it
            finds (on the vocabulary scored), their Jaccard index with the original circuit's,
            and the median r, FVU and context FVU of the fixed neurons.
    """

    added: int
    plus: cc.ContextualCircuit
    tv: dict[str, dict[int, float]]
    table: pd.DataFrame

    def finding(self) -> str:
        """The added head's own median TV in the new circuit."""
        return (f"head {self.added}'s own median TV in the new circuit: "
                f"{self.tv[f'{len(self.plus.heads)} heads'][self.added]:.3f}")


def add_head(
    circuit: cc.ContextualCircuit,
    model: TransformerBridge,
    added: int,
    tokens: Int[Tensor, "batch pos"],
    windows: list[Int[Tensor, " _pos"]],
    neurons: list[int],
    found: list[int],
    k: int,
    vocabulary: Bool[Tensor, " d_vocab"] | None = None,
    theta: float = disc.THETA,
    scope: str = "quarter vocabulary",
    plus: cc.ContextualCircuit | None = None,
) -> AddedHead:
    """:class:`AddedHead`: ``circuit`` rebuilt with head ``added`` (:func:`~context_neurons.
    circuit.get_circuit`), measured against it.

    Args:
        circuit: the circuit of the contextual heads.
        model: the model.
        added: the head to add.
        tokens: texts for the attention TV (a padded batch on the model's device).
        windows: texts for r and FVU (``<|endoftext|>`` first).
        neurons: the fixed neurons evaluated on both circuits.
        found: the neurons ``circuit`` finds with the same ``k``, ``vocabulary`` and ``theta``.
        k, vocabulary: the scoring's top-k and vocabulary (:func:`~context_neurons.discovery.
            score_neurons`).
        theta: the threshold of the neurons found.
        scope: the vocabulary scored, as the table's column of neurons found names it.
        plus: the circuit with the head added, when already built (default: ``get_circuit``
            of those heads, with the default calibration text and destination).
    """
    if plus is None:
        plus = cc.get_circuit(model, heads=sorted(circuit.heads + [added]))
    elif sorted(plus.heads) != sorted(circuit.heads + [added]):
        raise InputError(f"The circuit with the head added has heads {plus.heads}, not "
                         f"{sorted(circuit.heads + [added])}.")
    n_min = circuit.calibration.n_min
    tv = {
        f"{len(c.heads)} heads": {
            h: float(v) for h, v in zip(c.heads, circuit_attention_tv(c, model, tokens)[
                :, :, n_min:].flatten(1).median(1).values)
        }
        for c in (circuit, plus)
    }
    plus_found = disc.score_neurons(plus, model, k=k, vocabulary=vocabulary).found(theta)
    truth_cache: dict = {}
    rows = {}
    for name, c, f in (
        (f"{len(circuit.heads)} contextual heads", circuit, found),
        (f"with head {added}", plus, plus_found),
    ):
        result = ev.evaluate(c, model, windows, neurons, truth_cache=truth_cache)
        rows[name] = {
            "median TV, old heads": pd.Series(tv[f"{len(c.heads)} heads"]).loc[circuit.heads]
            .median(),
            f"found ({scope})": len(f),
            f"Jaccard with {len(circuit.heads)}-head set": jaccard(f, found),
            "median r": result.median_pearson,
            "median FVU": result.median_fvu,
            "context FVU": result.median_context_fvu,
        }
    return AddedHead(added, plus, tv, pd.DataFrame(rows).T)


__all__ = ["AddedHead", "add_head"]
