"""What the planted model planted at a neuron (the planted model only): the share of tokens that
belong to a planted neuron's topics, the topics it reads, and its planted description, for
labels."""

from __future__ import annotations


def planted_topic_share(truth, neuron, token_ids) -> float:
    """Fraction of ``token_ids`` that belong to a topic the planted neuron reads (planted only).

    A topic's tokens are the *label half* of its word list (``truth.label_token_ids``), never the
    half that planted it.
    """
    plan = truth.context_neurons.get(int(neuron))
    if plan is None:
        return float("nan")
    topic_ids = set()
    for topic in plan.topics:
        topic_ids |= set(truth.label_token_ids.get(topic, ()))
    token_ids = [int(t) for t in token_ids]
    return sum(t in topic_ids for t in token_ids) / max(len(token_ids), 1)


def planted_topics(truth, neuron) -> dict[str, float]:
    """The topics a planted context neuron reads, with their signed weights (``{}`` for a neuron
    that is not a planted context neuron)."""
    plan = truth.context_neurons.get(int(neuron))
    return {} if plan is None else dict(plan.topics)


def planted_description(truth, neuron) -> str:
    """What the planted model planted at a layer-0 neuron (planted truth, for labels): a context
    neuron's description, a distractor's (a neuron that reads context through another route,
    which discovery should not return), or ``"not planted"``."""
    j = int(neuron)
    plan = truth.context_neurons.get(j)
    if plan is not None:
        return plan.description
    distractor = truth.distractor_neurons.get(j)
    if distractor is not None:
        return f"distractor: {distractor.description}"
    return "not planted"
