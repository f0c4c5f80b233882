"""Fixed against actual destination. This module answers whether the approximation is more
accurate when each position queries with its own token (chapter 9, first open question):
:func:`compare_destination_rules` measures r and FVU of the fixed-destination approximation and
of :func:`~context_neurons.sweeps.actual_destination.actual_destination_terms` on the same texts,
for the whole pre-activation and for its context part (:class:`DestinationRules`)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from context_neurons import circuit as cc
from context_neurons import evaluation as ev
from context_neurons.checks import check_neurons
from context_neurons.sweeps.actual_destination import actual_destination_terms
from context_neurons.sweeps.shared import circuit_mean_keys
from context_neurons.text.windows import pad_windows


@dataclass
class DestinationRules:
    """Accuracy of the approximation with the fixed destination and with each position's own.

    Attributes:
        pearson, fvu: per rule (``"fixed"``, ``"actual"``), ``[n_texts, n_neurons]``.
        context_pearson, context_fvu: the same for the context part (true minus the local terms
            against bag plus positional part).
    """

    neurons: list[int]
    pearson: dict[str, Float[Tensor, "n_texts n_neurons"]]
    fvu: dict[str, Float[Tensor, "n_texts n_neurons"]]
    context_pearson: dict[str, Float[Tensor, "n_texts n_neurons"]]
    context_fvu: dict[str, Float[Tensor, "n_texts n_neurons"]]

    def table(self) -> pd.DataFrame:
        """Medians over neuron-text pairs, one row per rule."""
        measures = {
            "median r": self.pearson,
            "median FVU": self.fvu,
            "context r": self.context_pearson,
            "context FVU": self.context_fvu,
        }
        return pd.DataFrame(
            {
                name: {rule: float(v.nanmedian()) for rule, v in m.items()}
                for name, m in measures.items()
            }
        )


@torch.no_grad()
def compare_destination_rules(
    circuit: cc.ContextualCircuit,
    model: TransformerBridge,
    windows: list[Int[Tensor, " _pos"]],
    neurons,
    start: int = ev.START,
) -> DestinationRules:
    """r and FVU of the fixed-destination approximation and of :func:`actual_destination_terms`
    on the same texts (one text at a time)."""
    neurons = check_neurons(model, neurons)
    mean_keys = circuit_mean_keys(circuit, model)
    approx = ev.approximator(circuit, model, neurons, "per_position")
    out = {name: {"fixed": [], "actual": []} for name in ("r", "fvu", "cr", "cfvu")}
    for window in windows:
        tokens, lengths = pad_windows([window])
        tokens = tokens.to(model.cfg.device)
        mask = ev.position_mask(tokens, lengths, start)
        true = ev.true_pre_activations(model, tokens, neurons)
        rules = {
            "fixed": approx.terms(tokens),
            "actual": actual_destination_terms(circuit, model, tokens, neurons, None, mean_keys),
        }
        for rule, terms in rules.items():
            local = sum(terms[name] for name in ev.LOCAL_TERMS)
            context = sum(terms[name] for name in ev.CONTEXT_TERMS)
            r, f = ev.pearson_and_fvu(true, local + context, mask)
            cr, cf = ev.pearson_and_fvu(true - local, context, mask)
            for name, value in zip(("r", "fvu", "cr", "cfvu"), (r, f, cr, cf)):
                out[name][rule].append(value.cpu())
    cat = {name: {rule: torch.cat(v) for rule, v in rules.items()} for name, rules in out.items()}
    return DestinationRules(neurons, cat["r"], cat["fvu"], cat["cr"], cat["cfvu"])
