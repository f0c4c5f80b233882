"""A neuron's own domain, checked on held-out texts. This module answers whether the domain named
for a neuron from its weights holds on texts it was not named from (chapter 5).

The naming rule is not defined here. :func:`context_neurons.casestudies.domain_from_weights`
(module :mod:`context_neurons.casestudies.naming`, the one place where the rule is defined) names
a neuron's *own domain* from how often each domain's texts use its driving tokens. A handful of
texts can name a domain by accident: one article that repeats a rare token, or one corpus's
markup, is enough to pass the rule. :func:`held_out_domains` therefore names the domain from the
*naming half* of each domain's texts, with that same function and thresholds, and recomputes the
densities on the *held-out half* (:func:`split_halves`): the name is ``"confirmed"`` when the
same domain also passes the rule there (:func:`context_neurons.casestudies.density_rule`,
thresholds :data:`~context_neurons.casestudies.MIN_DENSITY_RATIO` and
:data:`~context_neurons.casestudies.MIN_DENSITY_GAP`, all imported from the naming module), and
``"weak"`` otherwise. Only the weights and the texts' token counts are used: the model is not
run.
"""

from __future__ import annotations

import math

import pandas as pd

from context_neurons.casestudies.densities import TokenDensities
from context_neurons.casestudies.naming import (
    MIN_DENSITY_GAP,
    MIN_DENSITY_RATIO,
    density_rule,
    domain_from_weights,
)
from context_neurons.checks import InputError
from context_neurons.discovery import NeuronScores
from context_neurons.text.windows import DomainTexts


def split_halves(texts: DomainTexts) -> tuple[list[int], list[int]]:
    """The naming half and the held-out half of the texts, as indices.

    Each domain's texts alternate, in order: the 1st, 3rd, ... name the domain, the 2nd, 4th,
    ... are held out. Within a domain the halves share no text; a document that two domains
    share (a UK leaflet is *british* and *medical*) may fall in different halves for each. Where
    a domain's texts alternate between two corpora (*american*: Brown, State of the Union), the
    halves are its two corpora, and the check is one across corpora.

    Raises:
        InputError: a domain with fewer than two texts (no held-out half).
    """
    naming, held = [], []
    for domain in dict.fromkeys(texts.domains):
        indices = texts.indices(domain)
        if len(indices) < 2:
            raise InputError(
                f"Domain {domain!r} has {len(indices)} text; a held-out check needs at least 2 "
                "texts of each domain (domain_texts(..., n=4) gives 4)."
            )
        naming += indices[0::2]
        held += indices[1::2]
    return sorted(naming), sorted(held)


def held_out_domains(
    densities: TokenDensities,
    scores: NeuronScores,
    min_ratio: float = MIN_DENSITY_RATIO,
    min_gap: float = MIN_DENSITY_GAP,
) -> pd.DataFrame:
    """Each neuron's own domain named from the naming half of the texts, checked on the rest.

    Args:
        densities: token densities of the neurons on texts of several domains, at least two
            texts of each (:func:`context_neurons.casestudies.token_densities`).
        scores: the neurons' scores (their dominant side, ``scores.sign``).
        min_ratio, min_gap: the rule of :func:`~context_neurons.casestudies.domain_from_weights`,
            applied alike to both halves.

    Returns:
        :func:`~context_neurons.casestudies.domain_from_weights` of the naming half (its
        densities and ratio are the naming half's), with ``held-out`` (``"confirmed"`` when the
        named domain also passes the rule on the held-out half, ``"weak"`` when it does not,
        ``None`` for a neuron without a domain), and ``held-out density, domain``,
        ``held-out density, others`` and ``held-out ratio`` of the named domain (NaN without
        one).
    """
    naming, held = split_halves(densities.texts)
    table = domain_from_weights(densities.subset(naming), scores, min_ratio, min_gap)
    check = densities.subset(held)
    marks, numbers = [], []
    for j in table.index:
        domain, side = table.loc[j, "domain"], table.loc[j, "side"]
        if domain is None:
            marks.append(None)
            numbers.append((math.nan, math.nan, math.nan))
            continue
        col = check.column(j)
        there = float(check.inside(domain, side)[col])
        elsewhere = float(check.outside(domain, side)[col])
        ratio, passes = density_rule(there, elsewhere, min_ratio, min_gap)
        marks.append("confirmed" if passes else "weak")
        numbers.append((there, elsewhere, ratio))
    table["held-out"] = pd.Series(marks, index=table.index, dtype=object)
    for k, name in enumerate(("density, domain", "density, others", "ratio")):
        table[f"held-out {name}"] = [float(row[k]) for row in numbers]
    return table
