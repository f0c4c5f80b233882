"""Domain evidence. This module measures how much a domain's texts move a neuron, and whether
that confirms the reading from the weights (chapter 5).

From activations on texts of several domains
(:func:`~context_neurons.casestudies.along_text.text_activations`), :func:`domain_means` gives
each neuron's mean pre-activation per domain (:func:`relative_domain_means`: against the
neuron's median over domains, in units of its within-text spread), :func:`domain_evidence`
tabulates how much a domain moves a neuron against how often the domain's texts use the
neuron's tokens, and :func:`verdict`
says whether the measurement confirms the reading from the weights (thresholds
:data:`CONFIRMED` and :data:`WEAK`). A controlled experiment at fixed text is in
:mod:`context_neurons.respelling`.
"""

from __future__ import annotations

import pandas as pd

from context_neurons.casestudies.along_text import TextActivations
from context_neurons.checks import InputError


def domain_means(acts: TextActivations, which: str = "true") -> pd.DataFrame:
    """Mean pre-activation of each neuron (rows) over each domain's texts (columns)."""
    means = acts.window_means(which)
    domains = list(dict.fromkeys(acts.texts.domains))
    columns = {d: means[acts.texts.indices(d)].mean(0).tolist() for d in domains}
    return pd.DataFrame(columns, index=pd.Index(acts.neurons, name="neuron"))


def relative_to_median(means: pd.DataFrame, spread: pd.Series) -> pd.DataFrame:
    """Each row of ``means`` (a neuron's mean per domain) minus its median over the columns,
    divided by the neuron's ``spread`` (aligned on the index)."""
    return means.sub(means.median(axis=1), axis=0).div(spread, axis=0)


def relative_domain_means(acts: TextActivations, which: str = "true") -> pd.DataFrame:
    """:func:`domain_means` minus each neuron's median over domains, in units of its mean
    within-text standard deviation (:meth:`TextActivations.window_spreads`, mean over texts):
    how far a domain moves each neuron above the token-by-token noise."""
    spread = pd.Series(acts.window_spreads().mean(0).tolist(), index=acts.neurons)
    return relative_to_median(domain_means(acts, which), spread)


#: ``|excess| / within-text SD`` from which a domain's effect counts as confirmed, or as weak.
CONFIRMED, WEAK = 1.0, 0.5


def verdict(separation: float, predicted: float) -> str:
    """Whether a domain's measured effect on a neuron confirms the reading from the weights.

    Args:
        separation: the measured excess over the within-text SD (:func:`domain_evidence`).
        predicted: the excess the circuit predicts from the weights and the texts' tokens.

    Returns:
        ``"confirmed"`` (at least :data:`CONFIRMED` SDs, in the predicted direction), ``"weak"``
        (at least :data:`WEAK`), ``"contradicted"`` (at least :data:`WEAK`, against the
        prediction), or ``"not shown"`` (smaller: these texts cannot tell).
    """
    size = abs(separation)
    if size < WEAK:
        return "not shown"
    if separation * predicted < 0:
        return "contradicted"
    return "confirmed" if size >= CONFIRMED else "weak"


def domain_evidence(acts: TextActivations, cases) -> pd.DataFrame:
    """How much a domain moves a neuron, and how often the domain's texts use its tokens.

    Args:
        acts: activations on texts of several domains.
        cases: ``(neuron, domain)`` pairs.

    Returns:
        One row per case: the mean true pre-activation on the domain's texts and on the other
        domains' texts (:meth:`DomainTexts.others`: a text two domains share, such as a UK
        medicine leaflet that is both *british* and *medical*, is left out), their difference
        (``excess``), the same difference for the approximation (``predicted excess``), the mean
        standard deviation along the domain's texts
        (``within-text SD``), ``excess / within-text SD``, and the neuron's up- and down-tokens
        per 1000 tokens in the domain's texts and in the others, and the :func:`verdict`.
    """
    means, approx = acts.window_means(), acts.window_means("approx")
    spreads = acts.window_spreads()
    up, down = acts.marks_per_1000()
    rows = []
    for neuron, domain in cases:
        col, inside = acts.column(neuron), acts.texts.indices(domain)
        outside = acts.texts.others(domain)
        if not outside:
            raise InputError("domain_evidence needs texts of at least one other domain.")
        excess = float(means[inside, col].mean() - means[outside, col].mean())
        predicted = float(approx[inside, col].mean() - approx[outside, col].mean())
        spread = float(spreads[inside, col].mean())
        rows.append(
            {
                "neuron": int(neuron),
                "domain": domain,
                "mean, domain": float(means[inside, col].mean()),
                "mean, others": float(means[outside, col].mean()),
                "excess": excess,
                "predicted excess": predicted,
                "within-text SD": spread,
                "excess / SD": excess / spread,
                "verdict": verdict(excess / spread, predicted),
                "up-tokens /1000, domain": float(up[inside, col].mean()),
                "up-tokens /1000, others": float(up[outside, col].mean()),
                "down-tokens /1000, domain": float(down[inside, col].mean()),
                "down-tokens /1000, others": float(down[outside, col].mean()),
            }
        )
    return pd.DataFrame(rows).set_index(["neuron", "domain"])
