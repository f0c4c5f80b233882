"""Does the method recover what was planted? This module checks each look-up planted in the
planted model against what chapter 7's method found: its neuron and token, its head, and an
explanation that beats chance on held-out prompts (chapter 7, section 7.5); and the neurons the
selection chose against the planted ones (section 7.1).

Whether the explanation *names* the topic is measured apart, against the *label half* of the
topic's word list, the half that never planted anything: reading it against the planting half
would read back what was built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pandas as pd

from context_neurons.lookups.attribution import head_name
from context_neurons.lookups.explainers import normalise_word
from context_neurons.lookups.report import NeuronLookup, topic_share


@dataclass(frozen=True)
class PlantedRecovery:
    """Each planted look-up against what the method found.

    Attributes:
        table: one row per planted look-up: ``planted neuron``, ``top head (planted)`` (the
            head found, the planted one in brackets), ``topic``, ``words in topic (label
            half)`` (of the explanation's words), ``first word``, ``topic share``
            (:func:`~context_neurons.lookups.report.topic_share`), ``beats chance`` (accuracy
            above the majority guess and balanced accuracy above 0.5, on held-out prompts) and
            ``recovered`` (the planted token, the planted head on top and beats chance).
    """

    table: pd.DataFrame

    @property
    def recovered(self) -> int:
        """How many planted look-ups were recovered end to end."""
        return int(self.table["recovered"].sum())

    def finding(self) -> str:
        """How many of the planted look-ups were recovered end to end."""
        return f"planted look-ups recovered end to end: {self.recovered} of {len(self.table)}"


def planted_recovery(lookups: Sequence[NeuronLookup], truth, tokenizer) -> PlantedRecovery:
    """:class:`PlantedRecovery` of the examined ``lookups`` against the planted ``truth`` (its
    ``lookups``: layer, neuron, head, target token and topic of each; its ``topic_words``: the
    label half of each topic's word list)."""
    found = {(lookup.layer, lookup.neuron): lookup for lookup in lookups}
    rows = []
    for plan in truth.lookups:
        lookup = found.get((plan.layer, plan.neuron))
        topic_words = truth.topic_words[plan.topic]
        topic = {normalise_word(w) for w in topic_words}
        explanation = lookup.explanation if lookup else None
        words = explanation.tokens if explanation else []
        token_ok = lookup is not None and lookup.token == plan.target
        head_ok = lookup is not None and lookup.top_heads[0][:2] == (plan.layer, plan.head)
        beats_chance = lookup is not None and lookup.evaluation.beats_chance
        rows.append(
            {
                "planted neuron": f"{plan.layer}.{plan.neuron} {plan.target!r}",
                "top head (planted)": (
                    f"{head_name(*lookup.top_heads[0][:2]) if lookup else '-'} "
                    f"({head_name(plan.layer, plan.head)})"
                ),
                "topic": plan.topic,
                "words in topic (label half)": f"{sum(w in topic for w in words)}/{len(words)}",
                "first word": words[0] if words else "-",
                "topic share": (
                    topic_share(lookup.activity, explanation, topic_words, tokenizer)
                    if explanation
                    else float("nan")
                ),
                "beats chance": beats_chance,
                "recovered": token_ok and head_ok and beats_chance,
            }
        )
    return PlantedRecovery(pd.DataFrame(rows))


def selection_against_plan(chosen: Sequence[tuple[int, int]], scores: pd.DataFrame,
                           truth) -> list[str]:
    """Each ``chosen`` neuron's predicted token (its row of ``scores``: ``layer``, ``neuron``,
    ``token``) against the planted look-ups (``truth.lookups``), and whether every planted
    look-up neuron was chosen (chapter 7, section 7.1)."""
    planted = {(plan.layer, plan.neuron): plan for plan in truth.lookups}
    lines = []
    for layer, neuron in chosen:
        row = scores[(scores.layer == layer) & (scores.neuron == neuron)].iloc[0]
        plan = planted.get((layer, neuron))
        verdict = f"planted to predict {plan.target!r}" if plan else "not planted"
        lines.append(f"neuron {layer}.{neuron}: predicts {row.token!r}, {verdict}")
    return lines + [f"all planted look-up neurons found: {set(planted) == set(chosen)}"]
