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
run. :func:`check_domains` then sets each name beside what the texts measure (the neuron's
departure on its domain, and that domain's rank among all).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
from transformer_lens.model_bridge import TransformerBridge

from context_neurons.casestudies.densities import TokenDensities
from context_neurons.casestudies.naming import (
    MIN_DENSITY_GAP,
    MIN_DENSITY_RATIO,
    density_rule,
    domain_from_weights,
    frequent_driving_tokens,
)
from context_neurons.checks import InputError, NoNeuronsFoundError
from context_neurons.circuit import ContextualCircuit
from context_neurons.discovery import NeuronScores, planted_description
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


#: The columns of :attr:`DomainCheck.table` that list tokens or the planted truth (text), shown
#: apart from the evidence (numbers).
LISTING = ["its tokens there (count)", "planted truth"]


@dataclass(frozen=True)
class DomainCheck:
    """Each carried neuron's own domain, named from its weights, against what the texts measure
    (chapter 5): the densities of its driving tokens, its measured departure there and the rank
    of that domain among all by the departure in the predicted direction.

    Attributes:
        table: a row per neuron with an own domain.
        carried: the neurons asked about.
        no_domain: those the weights name no domain for.
    """

    table: pd.DataFrame
    carried: list[int]
    no_domain: list[int]

    @property
    def evidence(self) -> pd.DataFrame:
        """The table's numbers (everything but :data:`LISTING`)."""
        return self.table[[c for c in self.table.columns if c not in LISTING]]

    @property
    def listing(self) -> pd.DataFrame:
        """The driving tokens the domain's texts use most (and the planted truth)."""
        return self.table[[c for c in self.table.columns if c in LISTING]]

    def findings(self) -> list[str]:
        """How many neurons get a domain, on how many it is also the measured one, whether the
        name holds on held-out texts, and which get none."""
        out = []
        if len(self.table):
            first = int((self.table["rank of that domain"] == 1).sum())
            out.append(f"{len(self.table)} of {len(self.carried)} neurons get a domain from their "
                       f"weights; on {first} of them it is also the domain that moves them most "
                       "in the predicted direction")
            weak = [int(j) for j in self.table.index if self.table.loc[j, "held-out"] == "weak"]
            out.append(f"the name holds on the held-out texts for {len(self.table) - len(weak)} "
                       f"of them; weak ({len(weak)}): {weak or 'none'}")
        out.append(f"no domain from the weights ({len(self.no_domain)}): "
                   f"{self.no_domain[:20] or 'none'}")
        return out


def check_domains(own: pd.DataFrame, relative: pd.DataFrame, carried: list[int],
                  circuit: ContextualCircuit, model: TransformerBridge, texts: DomainTexts,
                  scores: NeuronScores, truth=None) -> DomainCheck:
    """:class:`DomainCheck` of the ``carried`` neurons: ``own`` from :func:`held_out_domains`,
    ``relative`` each neuron's measured departure per domain in units of its spread (neuron x
    domain); ``truth``: the planted truth, for a column describing what was planted."""
    measured = {}
    for j in carried:
        domain = own.loc[j, "domain"]
        if domain is None:
            continue
        expected = 1 if own.loc[j, "side"] == "up" else -1
        column = relative.loc[j]
        measured[j] = {
            "own domain": domain,
            "held-out": own.loc[j, "held-out"],
            "side": own.loc[j, "side"],
            "density there /1000": own.loc[j, "density, domain"],
            "elsewhere /1000": own.loc[j, "density, others"],
            "measured there, SD": column[domain],
            "rank of that domain": int((expected * column).rank(ascending=False)[domain]),
            "its tokens there (count)": " ".join(
                f"{token}({n})"
                for token, n in frequent_driving_tokens(circuit, model, j, texts, domain, scores)
            ),
        }
    table = pd.DataFrame(measured).T.rename_axis("neuron").infer_objects()
    if truth is not None:
        table["planted truth"] = [planted_description(truth, j) for j in table.index]
    no_domain = [j for j in carried if own.loc[j, "domain"] is None]
    return DomainCheck(table, list(carried), no_domain)


def first_with_domain(neurons: list[int], own_domain: dict[int, str | None]) -> int:
    """The first of ``neurons`` (best score first) with a domain of its own from its weights."""
    for j in neurons:
        if own_domain.get(j) is not None:
            return j
    raise NoNeuronsFoundError(
        f"None of the {len(neurons)} neurons studied has a domain of its own from its weights "
        "(its driving tokens are not denser in any domain's texts), so there is no domain to "
        "predict its shift on. Chapter 6's own-domain table shows each neuron's densities.")

