"""The case-study neurons. This module chooses which neurons chapter 5 studies on real text.

The paper's case studies (:data:`PAPER_CASE_STUDIES`) name GPT-2 Small's neurons.
:func:`case_studies` takes those numbers on GPT-2 Small and on the planted model (planted there
by construction; :func:`uses_paper_neurons`), and on any other model the found neurons whose
up-tokens each case-study domain's texts use most (:func:`token_matched_neuron`). The choice is
made from the weights and the texts' tokens only
(:func:`~context_neurons.casestudies.densities.token_densities`), before any activation is looked
at, so that the activations are a fair test of it.
"""

from __future__ import annotations

from typing import NamedTuple

import pandas as pd

from context_neurons.casestudies.densities import TokenDensities
from context_neurons.checks import InputError


class CaseStudy(NamedTuple):
    """One of the paper's case studies: a role, the domain of its texts, the paper's reading and
    the neuron number the paper gives on GPT-2 Small."""

    role: str
    domain: str
    reading: str
    paper_neuron: int


#: The paper's case studies (Gibson, section "Contextual neurons"), with GPT-2 Small's neuron
#: numbers as the paper gives them. The planted model plants neurons of these roles at the same
#: numbers (by construction); on other models :func:`case_studies` chooses from the weights.
PAPER_CASE_STUDIES: tuple[CaseStudy, ...] = (
    CaseStudy("British spelling", "british", "British versus American English", 300),
    CaseStudy("British spelling, second", "british", "British context, writes opposite", 704),
    CaseStudy("war", "war", "19th-20th century conflict", 1621),
    CaseStudy("religion", "bible", "religious text", 1710),
)


def uses_paper_neurons(loaded) -> bool:
    """Whether the paper's neuron numbers name the case studies on this model.

    True on GPT-2 Small (the paper's model) and on a planted model that planted every case-study
    neuron (by construction); False on any other model, whose neuron numbers mean nothing.
    """
    paper = [case.paper_neuron for case in PAPER_CASE_STUDIES]
    if getattr(loaded, "is_planted", False):
        return all(j in loaded.truth.context_neurons for j in paper)
    return getattr(loaded, "name", None) == "gpt2"


def token_matched_neuron(densities: "TokenDensities", domain: str, neurons=None, exclude=()) -> int:
    """The neuron whose up-tokens the domain's texts use most, relative to the other texts.

    Chosen from the weights and the texts' tokens only
    (:func:`~context_neurons.casestudies.densities.token_densities`), not from the activations, so
    that the activations are a fair test of the choice.

    Args:
        densities: token densities of the neurons on texts of several domains.
        domain: the domain.
        neurons: the candidates (default: all of ``densities``).
        exclude: neurons not to choose (e.g. one already chosen for another role).
    """
    neurons = densities.neurons if neurons is None else [int(j) for j in neurons]
    candidates = [j for j in neurons if j not in set(int(e) for e in exclude)]
    if not candidates:
        raise InputError(f"No candidate neuron for domain {domain!r}: give at least one.")
    gap = densities.gap(domain, "up")
    return max(candidates, key=lambda j: float(gap[densities.column(j)]))


def case_studies(loaded, densities: TokenDensities, neurons) -> pd.DataFrame:
    """The case-study neurons on this model, and how each was chosen.

    On GPT-2 Small and the planted model (:func:`uses_paper_neurons`): the paper's neurons. On
    any other model: for each role, the neuron among ``neurons`` (the found ones) whose up-tokens
    the role's domain uses most relative to the other texts (:func:`token_matched_neuron`); the
    second British-spelling neuron is the next best for British texts. Chosen from the weights
    and the texts' tokens, before any activation is looked at.

    Returns:
        Indexed by ``role``: ``neuron``, ``domain``, ``paper's reading``, ``paper's neuron``
        (GPT-2 Small) and ``chosen by``.
    """
    paper = uses_paper_neurons(loaded)
    if paper:
        how = (
            "the paper's neuron (planted there by construction)"
            if getattr(loaded, "is_planted", False)
            else "the paper's neuron"
        )
    else:
        how = "from the weights: the found neuron whose up-tokens its domain's texts use most"
    rows, taken = [], {}
    for case in PAPER_CASE_STUDIES:
        if paper:
            j = case.paper_neuron
        else:
            exclude = taken.get(case.domain, [])
            pool = [int(k) for k in neurons if int(k) not in exclude] or list(neurons)
            j = token_matched_neuron(densities, case.domain, pool)
            taken.setdefault(case.domain, []).append(j)
        rows.append(
            {
                "role": case.role,
                "neuron": int(j),
                "domain": case.domain,
                "paper's reading": case.reading,
                "paper's neuron": case.paper_neuron,
                "chosen by": how,
            }
        )
    return pd.DataFrame(rows).set_index("role")
