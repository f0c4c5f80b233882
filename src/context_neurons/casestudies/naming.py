"""A neuron's own domain. This module names each neuron's domain from its weights, before any
activation is looked at (chapters 5 and 6).

:func:`domain_from_weights` gives a neuron the domain whose texts use its *driving tokens* (its
up-tokens or down-tokens, whichever side dominates its score) most often relative to the other
domains' texts (:class:`~context_neurons.casestudies.densities.TokenDensities`), or none: the
rule is :func:`density_rule`, with thresholds :data:`MIN_DENSITY_RATIO` and
:data:`MIN_DENSITY_GAP`. :func:`frequent_driving_tokens` lists the tokens a name rests on.

This is the one place where the rule is defined. :mod:`context_neurons.own_domain` answers a
different question, whether a name holds on texts it was not named from: it applies this rule,
imported from here, to half of each domain's texts and checks the name on the other half.
"""

from __future__ import annotations

import pandas as pd
import torch
from transformer_lens.model_bridge import TransformerBridge

from context_neurons.casestudies.densities import TokenDensities, token_counts
from context_neurons.checks import check_neurons
from context_neurons.circuit import ContextualCircuit
from context_neurons.discovery import THETA, NeuronScores, contributions
from context_neurons.text.windows import DomainTexts


#: A neuron's own domain must use its driving tokens at least this many times as often as the
#: other domains' texts do, and at least :data:`MIN_DENSITY_GAP` more per 1000 tokens.
MIN_DENSITY_RATIO = 2.0
MIN_DENSITY_GAP = 1.0


def density_rule(
    inside: float, outside: float, min_ratio: float = MIN_DENSITY_RATIO,
    min_gap: float = MIN_DENSITY_GAP,
) -> tuple[float, bool]:
    """``inside / outside`` (infinite when only the domain's texts use the tokens, 0 when they do
    not) and whether it is at least ``min_ratio`` with ``inside - outside`` at least ``min_gap``."""
    ratio = (inside / outside if outside > 0 else float("inf")) if inside > 0 else 0.0
    return ratio, inside - outside >= min_gap and ratio >= min_ratio


def domain_from_weights(
    densities: TokenDensities,
    scores: NeuronScores,
    min_ratio: float = MIN_DENSITY_RATIO,
    min_gap: float = MIN_DENSITY_GAP,
) -> pd.DataFrame:
    """Each neuron's own domain, chosen from its weights before any activation is looked at.

    A neuron's *driving tokens* are those on its dominant side (``scores.sign``): its up-tokens
    when its most extreme tokens push it up on balance, its down-tokens when they push it down (a
    "not Spanish" neuron is driven down by Spanish tokens, so its domain is Spanish). Its own
    domain is the domain whose texts use its driving tokens most often relative to the other
    domains' texts (:meth:`TokenDensities.gap`), provided they use them at least ``min_ratio``
    times as often and ``min_gap`` more per 1000 tokens (:func:`density_rule`); otherwise its
    tokens suggest none of the domains and the domain is ``None``. To name it from half the texts
    and check it on the other half: :func:`context_neurons.own_domain.held_out_domains`.

    Returns:
        One row per neuron: ``side`` (``"up"`` or ``"down"``), ``driving tokens`` (how many
        vocabulary tokens), ``domain`` (or ``None``), ``density, domain`` and ``density, others``
        (per 1000 tokens, of the best domain whether or not it qualifies), and ``ratio``.
    """
    domains = densities.domains()
    rows = {}
    for j in densities.neurons:
        col = densities.column(j)
        side = "up" if float(scores.sign[j]) > 0 else "down"
        inside = {d: float(densities.inside(d, side)[col]) for d in domains}
        outside = {d: float(densities.outside(d, side)[col]) for d in domains}
        best = max(domains, key=lambda d: inside[d] - outside[d])
        ratio, qualifies = density_rule(inside[best], outside[best], min_ratio, min_gap)
        rows[j] = {
            "side": side,
            "driving tokens": int((densities.n_up if side == "up" else densities.n_down)[col]),
            "domain": best if qualifies else None,
            "density, domain": inside[best],
            "density, others": outside[best],
            "ratio": ratio,
        }
    table = pd.DataFrame(rows).T
    table.index.name = "neuron"
    return table.astype(
        {"driving tokens": int, "density, domain": float, "density, others": float, "ratio": float}
    )


@torch.no_grad()
def frequent_driving_tokens(
    circuit: ContextualCircuit,
    model: TransformerBridge,
    neuron,
    texts: DomainTexts,
    domain: str,
    scores: NeuronScores,
    theta: float = THETA,
    k: int = 3,
) -> list[tuple[str, int]]:
    """The ``k`` driving tokens of a neuron (:func:`domain_from_weights`) that the domain's texts
    use most, with their counts: what a domain from the weights rests on."""
    j = check_neurons(model, [neuron])[0]
    c = contributions(circuit, model, [j])[0].cpu()
    z = (c - scores.median[j].cpu()) / scores.spread[j].cpu()
    sign = 1.0 if float(scores.sign[j]) > 0 else -1.0
    driving = (sign * z >= theta) & scores.vocabulary.cpu()
    windows = [texts.windows[i] for i in texts.indices(domain)]
    counts = token_counts(windows, model.cfg.d_vocab).sum(0) * driving
    top = counts.topk(min(k, int((counts > 0).sum())))
    return [
        (repr(model.tokenizer.decode([int(t)])), int(c))
        for t, c in zip(top.indices.tolist(), top.values.tolist())
    ]
