"""Where the error comes from. This module splits the approximation's accuracy by the choice of
denominators and by the positions evaluated, all positions or only those from ``n = 100`` on,
where the ``<|endoftext|>`` sink no longer dominates the denominators (chapter 6, section 6.5)."""

from __future__ import annotations

import pandas as pd
from jaxtyping import Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from context_neurons.circuit import ContextualCircuit
from context_neurons.evaluation.accuracy import evaluate

#: The denominators compared: their name in the table -> :func:`evaluate`'s ``denominators``.
DENOMINATOR_CHOICES = {"per-position D_h(n)": "per_position", "constant Dhat_h": "median"}
#: The positions compared: their name in the table -> the first position evaluated.
POSITION_SPANS = {"all positions": 1, "n >= 100": 100}


def error_by_position(circuit: ContextualCircuit, model: TransformerBridge,
                      windows: list[Int[Tensor, " _pos"]], neurons,
                      truth_cache: dict | None = None) -> pd.DataFrame:
    """Median r, FVU and context FVU of ``neurons`` on ``windows``, by denominators
    (:data:`DENOMINATOR_CHOICES`) and positions evaluated (:data:`POSITION_SPANS`).

    Returns:
        Rows ``(denominators, positions)``, columns ``median r``, ``median FVU`` and ``median
        context FVU``.
    """
    rows = {}
    for name, denominators in DENOMINATOR_CHOICES.items():
        for span, start in POSITION_SPANS.items():
            res = evaluate(circuit, model, windows, neurons, truth_cache=truth_cache,
                           denominators=denominators, start=start)
            rows[(name, span)] = {
                "median r": res.median_pearson,
                "median FVU": res.median_fvu,
                "median context FVU": res.median_context_fvu,
            }
    return pd.DataFrame(rows).T
