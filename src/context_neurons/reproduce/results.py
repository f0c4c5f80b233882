"""The main job's result. This module holds the typed value :func:`reproduce` returns.

A :class:`Results` carries what the run was (model, texts, device, time), its rows (each
:class:`Row` one quantity computed in the run, the paper's value looked up beside it), and the
typed values the rows were computed from, so that a chapter reads them instead of computing them
again:
the method's taxonomy, circuits and scores (:class:`~context_neurons.method.MethodValues`), the
truth from activations on held-out text, and each protocol's whole result
(:class:`ProtocolResults`, a typed field per protocol). JSON is written only by
:meth:`Results.to_json`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from jaxtyping import Int
from torch import Tensor

from context_neurons.activations import PREVIOUS_TOKEN_MIN, ActivationTruth
from context_neurons.assumptions import AssumptionsCheck
from context_neurons.circuit import ContextualCircuit
from context_neurons.discovery import NeuronScores
from context_neurons.lookups import NeuronLookup, NotFiring
from context_neurons.method import MethodValues
from context_neurons.printing import wrapped
from context_neurons.reproduce.paper import PAPER
from context_neurons.taxonomy import HeadTaxonomy
from context_neurons.verdict.gpt2_result import GPT2Evaluation
from context_neurons.verdict.registry import registered
from context_neurons.verdict.results import Evaluation
from context_neurons.verdict.v3_stored import Entries


#: How a row is shown in the table (:attr:`Row.show`): ``cell`` its value in the row's cell;
#: ``per_head`` a value per head and ``groups`` the heads of each group, both as columns of the
#: table of heads; ``records`` a table of its own, a row per record (a list or a dict of flat
#: dicts); ``sweep`` a table of its own, one number per threshold; ``json`` in the JSON only.
SHOWN_AS = ("cell", "per_head", "groups", "records", "sweep", "json")


#: A row's value when the row was not computed (its label says why).
NOT_COMPUTED = "not computed"
#: Labels of rows that were not computed: printed as notes under the table.
SKIPPED_PREFIXES = (NOT_COMPUTED, "no contextual head")


@dataclass
class Row:
    """One reproduced quantity: its key, the value computed in this run, the planted truth (if
    any), what it is and how the table shows it (:data:`SHOWN_AS`; ``index`` names the first
    column of a table of its own; ``reading``, a line printed under the table where the value
    would mislead without it; ``section``, the title of the table it is printed in, set by the
    pipeline). The paper's value is looked up by key in :data:`PAPER`."""

    key: str
    value: Any
    label: str = ""
    truth: Any = None
    show: str = "cell"
    index: str = "name"
    reading: str = ""  # one line under the table when the value needs reading (saturated, ...)
    section: str = ""  # the table's section, e.g. "discovery (chapters 4-5)"; not in the JSON

    def __post_init__(self) -> None:
        if self.show not in SHOWN_AS:
            raise ValueError(f"Row {self.key!r}: show must be one of {SHOWN_AS}, got "
                             f"{self.show!r}.")

    @property
    def paper(self) -> str:
        return PAPER.get(self.key, "")

    @property
    def skipped(self) -> bool:
        """Not computed: its value is :data:`NOT_COMPUTED` or its label starts with one of
        :data:`SKIPPED_PREFIXES` (its label, printed as a note under the table, says why)."""
        not_computed = isinstance(self.value, str) and self.value == NOT_COMPUTED
        return not_computed or self.label.startswith(SKIPPED_PREFIXES)


@dataclass(frozen=True)
class HeldOutTruth:
    """The truth from activations of the main job (a trained model only): the held-out windows
    of the training split, their corpus labels, and :func:`~context_neurons.activations.
    activation_truth` for the contextual heads."""

    windows: list[Int[Tensor, " _pos"]]
    labels: list[str]
    heads: list[int]
    truth: ActivationTruth


@dataclass(frozen=True)
class PreviousTokenHeads:
    """Each layer-0 head's mean attention to the previous token on EVAL windows (three decimals)
    and the heads at or above :data:`~context_neurons.activations.PREVIOUS_TOKEN_MIN` (the
    protocols' previous-token rule; a trained model with its documents only)."""

    attention: list[float]
    heads: list[int]

    def findings(self) -> list[str]:
        """The attention per head, then the previous-token heads (chapter 8, section 8.3)."""
        return [wrapped(f"mean attention to the previous token on EVAL windows, per head: "
                        f"{self.attention}"),
                f"previous-token heads (>= {PREVIOUS_TOKEN_MIN}): {self.heads}"]


@dataclass(frozen=True)
class ProtocolResults:
    """Each registered protocol's whole result in one run, typed, as the pipeline computed it: a
    field per version of :data:`~context_neurons.verdict.registry.PROTOCOLS` (tested). None where
    the run has no such result (no held-out documents, not a model of the protocol's family, the
    corpora absent, or v1's or v2's evaluation stopped before any verdict): exactly where the
    main job's rows hold none.

    Attributes:
        v1, v2: each an :class:`~context_neurons.verdict.results.Evaluation`.
        v3: every model v3 registers: its ``V3Evaluation`` or why it has none.
        gpt2: the GPT-2 model's :class:`~context_neurons.verdict.gpt2_result.GPT2Evaluation`.
    """

    v1: Evaluation | None = None
    v2: Evaluation | None = None
    v3: Entries | None = None
    gpt2: GPT2Evaluation | None = None

    def of(self, version: str) -> Evaluation | Entries | GPT2Evaluation | None:
        """The result of protocol ``version`` (an :class:`~context_neurons.checks.InputError`
        for a version the registry does not hold)."""
        return getattr(self, registered(version).version)


@dataclass(frozen=True)
class Results:
    """One run of the main job.

    Attributes:
        model, model_source, planted, n_texts, texts, device: what the run was.
        rows: the quantities, in the table's order.
        seconds: its wall-clock time.
        method: the taxonomy, circuits and scores of the run, each computed once (None only for a
            table built by hand, as in the tests).
        heldout: the truth from activations (None without held-out documents).
        lookups: chapter 7's examined neurons by ``(layer, neuron)``, each a ``NeuronLookup``
            or the ``NotFiring`` that says why not (None for a table built by hand).
        previous_token: the protocols' previous-token heads (None for a model without a
            training directory, and without its held-out documents).
        assumptions: what the approximation assumes of each head, measured on the evaluation
            texts (None without contextual heads, or for a table built by hand).
        protocols: each protocol's whole result (:class:`ProtocolResults`; the rows hold the
            same values for the JSON).
    """

    model: str
    model_source: str
    planted: bool
    n_texts: int
    texts: dict
    device: str
    rows: list[Row]
    seconds: float
    method: MethodValues | None = None
    heldout: HeldOutTruth | None = None
    lookups: dict[tuple[int, int], NeuronLookup | NotFiring] | None = None
    previous_token: PreviousTokenHeads | None = None
    assumptions: AssumptionsCheck | None = None
    protocols: ProtocolResults = field(default_factory=ProtocolResults)
    _by_key: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._by_key.update({row.key: row for row in self.rows})

    def row(self, key: str) -> Row | None:
        """The row ``key`` (None when the run has none)."""
        return self._by_key.get(key)

    def value(self, key: str, default: Any = None) -> Any:
        """The value of row ``key`` (``default`` when the run has none)."""
        row = self._by_key.get(key)
        return default if row is None else row.value

    @property
    def heads(self) -> list[int]:
        """The contextual heads every step used (the taxonomy's, with the previous-token rule)."""
        return self.method.contextual_heads() if self.method else []

    @property
    def taxonomy(self) -> HeadTaxonomy | None:
        """Chapter 2's taxonomy of the model's layer-0 heads, as the run classified them."""
        return self.method.taxonomy() if self.method else None

    @property
    def circuit(self) -> ContextualCircuit | None:
        """The contextual circuit of :attr:`heads` (None without contextual heads)."""
        return self.method.circuit(self.heads) if self.heads else None

    @property
    def scores(self) -> NeuronScores | None:
        """``top[j]`` of every neuron on :attr:`circuit` (None without contextual heads)."""
        return self.method.scores(self.heads) if self.heads else None

    def evaluation(self, protocol: str) -> Evaluation | Entries | GPT2Evaluation | None:
        """Protocol ``protocol``'s whole result: :meth:`ProtocolResults.of`."""
        return self.protocols.of(protocol)

    def to_json(self) -> str:
        """The results as JSON: the run, values by key, ``labels``, ``paper``, ``planted_truth``."""
        out: dict[str, Any] = {"model": self.model, "model_source": self.model_source,
                               "planted": self.planted, "n_texts": self.n_texts,
                               "texts": self.texts, "device": self.device}
        out.update({row.key: _json_value(row.value) for row in self.rows})
        out["seconds"] = self.seconds
        out["labels"] = {r.key: r.label for r in self.rows if r.label}
        out["paper"] = {r.key: r.paper for r in self.rows if r.paper}
        if self.planted:
            out["planted_truth"] = {r.key: r.truth for r in self.rows if r.truth is not None}
        return json.dumps(out, indent=2, default=str)


def _json_value(value: Any) -> Any:
    """A row's value as JSON: a typed result through its ``to_json()``, in a dict too (protocol
    v3's entries)."""
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, dict):
        return {key: _json_value(v) for key, v in value.items()}
    return value


__all__ = ["NOT_COMPUTED", "SKIPPED_PREFIXES", "HeldOutTruth", "PreviousTokenHeads",
           "ProtocolResults", "Results", "Row", "SHOWN_AS"]
