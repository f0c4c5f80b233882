"""The headline numbers. This module evaluates the carried neurons on general texts and on each
neuron's own domain, and sets the medians beside the paper's (chapter 6, section 6.2).

:func:`evaluate_general` evaluates the neurons on general texts that leave out every calibration
text, with per-position and with constant denominators; :func:`evaluate_own_domains` on the texts
of every domain, judging each neuron on its own domain (named beforehand from its weights,
:func:`~context_neurons.casestudies.domain_from_weights`); :func:`headline_medians` tabulates the
medians of both beside the paper's and says how much of them the context part carries.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch
from jaxtyping import Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from context_neurons.circuit import ContextualCircuit
from context_neurons.discovery import selection_note
from context_neurons.evaluation.accuracy import Evaluation, evaluate, evaluate_sets
from context_neurons.evaluation.calibration import matched_domains
from context_neurons.evaluation.texts import held_out_general_windows
from context_neurons.text.windows import WindowReport


@dataclass(frozen=True)
class GeneralEvaluation:
    """The neurons on general texts, none of them a calibration text (section 6.2).

    Attributes:
        windows: the texts (full-length windows, ``<|endoftext|>`` first).
        labels: each text's document (``corpus:id``).
        report: how the documents were cut into windows.
        left_out: the calibration documents left out of the texts.
        result: the evaluation with per-position denominators ``D_h(n)``.
        constant: the same with constant (median) denominators ``Dhat_h``.
        note: which neurons were evaluated
            (:func:`~context_neurons.discovery.scores.selection_note`).
    """

    windows: list[Int[Tensor, " _pos"]]
    labels: list[str]
    report: WindowReport
    left_out: list[str]
    result: Evaluation
    constant: Evaluation
    note: str

    def corpora(self) -> pd.Series:
        """The number of texts of each corpus, most first."""
        return pd.Series([label.split(":")[0] for label in self.labels]).value_counts()

    def findings(self) -> list[str]:
        """The neurons and texts, the calibration documents left out, and the texts per corpus."""
        return [
            f"neurons: {self.note}; {len(self.windows)} general texts ({self.report})",
            f"calibration documents left out of them: {self.left_out or 'none was among them'}",
            "texts per corpus: " + ", ".join(f"{name} {n}" for name, n in self.corpora().items()),
        ]


def evaluate_general(circuit: ContextualCircuit, model: TransformerBridge, neurons,
                     n_texts: int, found=None,
                     truth_cache: dict | None = None) -> GeneralEvaluation:
    """:class:`GeneralEvaluation` of ``neurons`` on ``n_texts`` general texts
    (:func:`~context_neurons.evaluation.texts.held_out_general_windows`); ``found``: all found
    neurons, of which ``neurons`` are the carried ones (default: ``neurons``); ``truth_cache``:
    see :func:`~context_neurons.evaluation.accuracy.evaluate`."""
    windows, labels, report, left_out = held_out_general_windows(model.tokenizer, n_texts)
    result = evaluate(circuit, model, windows, neurons, labels=labels, truth_cache=truth_cache)
    constant = evaluate(
        circuit, model, windows, neurons, labels=labels, truth_cache=truth_cache,
        denominators="median",
    )
    note = selection_note(neurons, neurons if found is None else found)
    return GeneralEvaluation(windows, labels, report, left_out, result, constant, note)


@dataclass(frozen=True)
class OwnDomainEvaluation:
    """The neurons on the texts of every domain, each judged on its own domain (section 6.2).

    Attributes:
        domain_sets: each domain's texts.
        neurons: the neurons evaluated.
        own_domain: each neuron's own domain, named from its weights (``None``: no domain).
        results: the evaluation on each domain's texts, per-position denominators.
        constant: the same with constant (median) denominators.
        matched: each neuron's medians on its own domain's texts
            (:func:`~context_neurons.evaluation.calibration.matched_domains`).
        medians: the medians over all matched neuron-text pairs pooled, per-position
            denominators.
        medians_constant: the same with constant denominators.
    """

    domain_sets: dict[str, list[Int[Tensor, " _pos"]]]
    neurons: list[int]
    own_domain: dict
    results: dict[str, Evaluation]
    constant: dict[str, Evaluation]
    matched: pd.DataFrame
    medians: dict[str, float]
    medians_constant: dict[str, float]

    @property
    def without(self) -> list[int]:
        """The neurons without an own domain (their tokens suggest none of the domains)."""
        return [j for j in self.neurons if self.own_domain[j] is None]

    def findings(self) -> list[str]:
        """The domain texts, and how many neurons have an own domain (and which have none)."""
        n_texts = sum(len(windows) for windows in self.domain_sets.values())
        return [
            f"{n_texts} domain texts: " + ", ".join(self.domain_sets),
            f"own domain from the weights: {len(self.neurons) - len(self.without)} of "
            f"{len(self.neurons)} neurons",
            "no own domain (their tokens suggest none of these domains): "
            f"{self.without or 'none'}",
        ]


def evaluate_own_domains(circuit: ContextualCircuit, model: TransformerBridge,
                         domain_sets: dict[str, list[Int[Tensor, " _pos"]]], neurons,
                         own_domain: dict, truth_cache: dict | None = None) -> OwnDomainEvaluation:
    """:class:`OwnDomainEvaluation` of ``neurons`` on ``domain_sets``, with each neuron's
    ``own_domain`` named beforehand from its weights."""
    results = evaluate_sets(circuit, model, domain_sets, neurons, truth_cache=truth_cache)
    constant = evaluate_sets(
        circuit, model, domain_sets, neurons, truth_cache=truth_cache, denominators="median"
    )
    matched, medians = matched_domains(results, own_domain)
    _, medians_constant = matched_domains(constant, own_domain)
    return OwnDomainEvaluation(domain_sets, list(neurons), own_domain, results, constant, matched,
                               medians, medians_constant)


#: The rows of the headline table -> the measure of :meth:`Evaluation.select` they show.
HEADLINE_MEASURES = {
    "median Pearson r": "median r",
    "median FVU": "median FVU",
    "median context share": "context share",
    "median context r": "context r",
    "median context FVU": "context FVU",
}


@dataclass(frozen=True)
class Headline:
    """The headline medians beside the paper's (section 6.2).

    Attributes:
        table: rows :data:`HEADLINE_MEASURES`, columns the paper's (text: what it reports) and
            the medians over general texts and over own-domain texts, each with per-position
            ``D_h(n)`` and constant ``Dhat_h`` denominators.
        general: the medians over all general neuron-text pairs (per-position denominators).
        own_domain: the medians over the own-domain pairs (per-position denominators).
    """

    table: pd.DataFrame
    general: dict[str, float]
    own_domain: dict[str, float]

    def findings(self) -> list[str]:
        """How much of a pair's variance the context part carries, on general texts and on the
        own domains, and how well it is predicted there."""
        share = self.general["context share"]
        own = self.own_domain
        return [
            f"On the general texts the context part carries a median {share:.1%} of a pair's "
            "variance: "
            + (
                "most of the headline r and FVU measures the local terms, and the context part "
                f"alone is predicted with median r = {self.general['context r']:.3f}."
                if share < 0.5
                else "the headline r and FVU mostly measure the context part."
            ),
            f"On each neuron's own domain the context share is {own['context share']:.1%} "
            f"and the context part alone has median r = {own['context r']:.3f}, "
            f"FVU = {own['context FVU']:.3f} (per-position denominators).",
        ]


def headline_medians(general: GeneralEvaluation, domains: OwnDomainEvaluation, paper_r: float,
                     paper_fvu: float) -> Headline:
    """:class:`Headline` of both evaluations; ``paper_r`` and ``paper_fvu``: the paper's median
    r and FVU (GPT-2 Small, 1000 OpenWebText texts: ``reproduce.paper``)."""
    everything = torch.ones_like(general.result.pearson, dtype=torch.bool)
    general_medians = general.result.select(everything)
    columns = {
        "GPT-2 Small (paper)": [f"{paper_r}", f"{paper_fvu}", *["not reported"] * 3],
        "general, D_h(n)": general_medians,
        "general, Dhat_h": general.constant.select(everything),
        "own domain, D_h(n)": domains.medians,
        "own domain, Dhat_h": domains.medians_constant,
    }
    table = pd.DataFrame(index=list(HEADLINE_MEASURES))
    for name, values in columns.items():
        if not isinstance(values, list):  # medians of this run, by measure
            values = [values[key] for key in HEADLINE_MEASURES.values()]
        table[name] = values
    return Headline(table, general_medians, domains.medians)
