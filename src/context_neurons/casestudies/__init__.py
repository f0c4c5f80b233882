"""Neurons on real text. This subpackage reads discovered neurons on texts of their domains
(chapter 5), one module per question.

Chapter 5 reads a context neuron from its token contributions; activations on real texts of the
domain test that reading. The choices are made first, from the weights and the texts' tokens
only, so that the activations are a fair test of them:

* :mod:`.densities`: how often does each text use each neuron's up-tokens and down-tokens?
  :func:`token_densities` counts them per 1000 tokens without running the model
  (:class:`TokenDensities`, from :func:`token_counts`).
* :mod:`.naming`: what is a neuron's own domain? :func:`domain_from_weights` names the domain
  whose texts use its driving tokens most often relative to the others, or none
  (:func:`density_rule`, :data:`MIN_DENSITY_RATIO`, :data:`MIN_DENSITY_GAP`);
  :func:`frequent_driving_tokens` lists what a name rests on. Whether a name holds on held-out
  texts, with the same rule, is :mod:`context_neurons.own_domain`.
* :mod:`.paper_neurons`: which neurons are the case studies? :func:`case_studies` takes the
  paper's GPT-2 neuron numbers (:data:`PAPER_CASE_STUDIES`) on GPT-2 Small and on the planted
  model (:func:`uses_paper_neurons`), and on any other model the found neurons whose up-tokens
  each case-study domain's texts use most (:func:`token_matched_neuron`).

Then the activations:

* :mod:`.along_text`: what do the neurons do along a text? :func:`text_activations` runs the
  model's first layer and the circuit's approximation on every text, and marks where each
  neuron's strongest tokens occur (:func:`token_marks`); :func:`term_spreads` says how much each
  term of the approximation varies along one text (:func:`case_term_spreads`: along each case
  study's text).
* :mod:`.evidence`: does a domain move a neuron as the weights say? :func:`domain_means`,
  :func:`relative_domain_means` (:func:`relative_to_median`), :func:`domain_evidence` and
  :func:`verdict` (:data:`CONFIRMED`, :data:`WEAK`).

Every public name is re-exported here (``casestudies.X``).
"""

from context_neurons.casestudies.along_text import (
    START,
    TextActivations,
    case_term_spreads,
    term_spreads,
    text_activations,
    token_marks,
)
from context_neurons.casestudies.densities import TokenDensities, token_counts, token_densities
from context_neurons.casestudies.evidence import (
    CONFIRMED,
    WEAK,
    domain_evidence,
    domain_means,
    relative_domain_means,
    relative_to_median,
    verdict,
)
from context_neurons.casestudies.naming import (
    MIN_DENSITY_GAP,
    MIN_DENSITY_RATIO,
    density_rule,
    domain_from_weights,
    frequent_driving_tokens,
)
from context_neurons.casestudies.paper_neurons import (
    PAPER_CASE_STUDIES,
    CaseStudy,
    case_studies,
    token_matched_neuron,
    uses_paper_neurons,
)

__all__ = [
    "CONFIRMED",
    "MIN_DENSITY_GAP",
    "MIN_DENSITY_RATIO",
    "PAPER_CASE_STUDIES",
    "START",
    "WEAK",
    "CaseStudy",
    "TextActivations",
    "TokenDensities",
    "case_studies",
    "case_term_spreads",
    "density_rule",
    "domain_evidence",
    "domain_from_weights",
    "domain_means",
    "frequent_driving_tokens",
    "relative_domain_means",
    "relative_to_median",
    "term_spreads",
    "text_activations",
    "token_counts",
    "token_densities",
    "token_marks",
    "token_matched_neuron",
    "uses_paper_neurons",
    "verdict",
]
