"""Typical examples. This module picks the neuron-text pairs that chapter 6 draws: those at given
quantiles of Pearson r on general texts, and of the context part's r on each neuron's own domain
(section 6.4)."""

from __future__ import annotations

from dataclasses import dataclass

from jaxtyping import Float, Int
from torch import Tensor

from context_neurons.evaluation.accuracy import Evaluation
from context_neurons.evaluation.approximation import EvaluationError

#: The quantiles drawn: a poor, a typical and a good pair.
QUANTILES = (0.1, 0.5, 0.9)


@dataclass(frozen=True)
class ExamplePair:
    """One neuron on one text, to draw, with a title that says where it stands."""

    tokens: Int[Tensor, " pos"]
    neuron: int
    title: str


def quantile_pair(values: Float[Tensor, "n_texts n_neurons"], q: float) -> tuple[int, int]:
    """``(text, neuron column)`` of the pair at quantile ``q`` of ``values`` (the pair of rank
    ``int(q * (n - 1))`` in ascending order, over all ``n`` pairs)."""
    flat = values.flatten()
    order = flat.argsort()
    return divmod(int(order[int(q * (len(order) - 1))]), values.shape[1])


def general_examples(result: Evaluation, windows: list[Int[Tensor, " _pos"]],
                     quantiles=QUANTILES) -> list[ExamplePair]:
    """The pairs of ``result`` (evaluated on ``windows``) at ``quantiles`` of Pearson r, titled
    with their r and context r."""
    examples = []
    for q in quantiles:
        text, k = quantile_pair(result.pearson, q)
        neuron = result.neurons[k]
        examples.append(ExamplePair(
            windows[text],
            neuron,
            f"{int(q * 100)}th percentile of r: neuron {neuron} on {result.labels[text]} "
            f"(r = {float(result.pearson[text, k]):.3f}, context r = "
            f"{float(result.context_pearson[text, k]):.3f})",
        ))
    return examples


def own_domain_examples(results: dict[str, Evaluation],
                        domain_sets: dict[str, list[Int[Tensor, " _pos"]]], own_domain: dict,
                        quantiles=QUANTILES) -> list[ExamplePair]:
    """The pairs of a neuron and a text of its own domain (``own_domain``, named from the
    weights) at ``quantiles`` of the context part's r over all such pairs, titled with their r
    and context r; ``results``: the evaluation of the same neurons on each of ``domain_sets``.

    Raises:
        EvaluationError: no neuron has an own domain.
    """
    pairs = sorted(
        (float(results[d].context_pearson[i, results[d].neurons.index(j)]), d, i, j)
        for j, d in own_domain.items()
        if d is not None
        for i in range(len(domain_sets[d]))
    )
    if not pairs:
        raise EvaluationError("no carried neuron has an own domain from its weights: nothing to "
                              "draw")
    examples = []
    for q in quantiles:
        context_r, domain, text, neuron = pairs[int(q * (len(pairs) - 1))]
        k = results[domain].neurons.index(neuron)
        examples.append(ExamplePair(
            domain_sets[domain][text],
            neuron,
            f"{int(q * 100)}th percentile of context r: neuron {neuron} on {domain} text {text} "
            f"(r = {float(results[domain].pearson[text, k]):.3f}, context r = {context_r:.3f})",
        ))
    return examples
