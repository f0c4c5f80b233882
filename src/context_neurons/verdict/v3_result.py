"""Protocol v3's result for one model, typed (:class:`V3Evaluation`), and how it becomes JSON
(:func:`jsonable`).

The evaluation (:func:`~context_neurons.verdict.v3.evaluate_v3`) builds it; the report
(:mod:`.v3_report`), the stored replications (:mod:`.v3_stored`), the main job and chapter 8
read its attributes. ``to_json`` is used only where JSON is written, and ``from_json`` reads a
stored result back (the two are inverse: tested on every shipped stored result). The controls,
the sensitivities and the non-pooled domains are typed here (:class:`V3Controls`,
:class:`Sensitivity`, :class:`NonPooledDomain`), each writing the keys, in the order, of the
JSON stored before they were.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from context_neurons.checks import DataError
from context_neurons.verdict.entries import EntryStatus
from context_neurons.verdict.gpt2_protocol import load_protocol_gpt2
from context_neurons.verdict.protocol import load_protocol_v3
from context_neurons.verdict.formatting import read_json_fields
from context_neurons.verdict.results import VOCABULARY_PERMUTED, Controls, ScoreResult
from context_neurons.verdict.comparison import PrimaryComparison
from context_neurons.verdict.context_set import ContextSet
from context_neurons.verdict.label_free import LabelFreePool
from context_neurons.verdict.truth import TruthSummary


def jsonable(value):
    """``value`` with numpy scalars and arrays, tuples and non-finite floats made JSON-ready
    (NaN and infinities become None)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.bool_,)):
        return bool(value)
    if isinstance(value, Path):
        return str(value)
    return value


@dataclass(frozen=True)
class NeuronsPermuted:
    """The neurons-permuted control: each secondary score's rho with the neurons permuted
    (PCG64(34)) and whether either exceeds the bound, voiding the secondary verdicts.

    Attributes:
        frequency_aware_rho: the frequency-aware score's rho with the neurons permuted.
        top_rho: ``top[j]``'s.
        bound: the largest |rho| allowed (``verdict.permutation_control_abs_at_most``).
        void: whether either |rho| exceeds ``bound``.
    """

    frequency_aware_rho: float
    top_rho: float
    bound: float
    void: bool

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "NeuronsPermuted":
        return cls(**read_json_fields(cls, data))


@dataclass(frozen=True)
class V3Controls:
    """Protocol v3's controls (JSON: one flat dict, in this order).

    Attributes:
        same_model: v2's controls on the same model with v3's seeds (the vocabulary permuted
            in ``p_D``, each score's random read directions), None when not run.
        neurons_permuted: the neurons-permuted control, None when not run.
        apart: the controls timed apart, by name (``step_0``: the evaluation of the model at
            initialisation, less its ``data``; ``planted``: the planted control), kept in
            their JSON form as written (a stored result's step 0 has no ``data`` to read
            back, and the planted control's JSON is its own module's).
    """

    same_model: Controls | None = None
    neurons_permuted: NeuronsPermuted | None = None
    apart: dict[str, dict] = field(default_factory=dict)

    @property
    def vocabulary_permuted(self) -> ScoreResult | None:
        """The frequency-aware score with the vocabulary permuted in ``p_D``."""
        return self.same_model.vocabulary_permuted if self.same_model else None

    def to_json(self) -> dict:
        out = self.same_model.to_json() if self.same_model else {}
        if self.neurons_permuted is not None:
            out["neurons_permuted"] = self.neurons_permuted.to_json()
        return {**out, **self.apart}

    @classmethod
    def from_json(cls, data: dict) -> "V3Controls":
        """The value :meth:`to_json` wrote: every key that is not a same-model control is one
        timed apart."""
        permuted = data.get("neurons_permuted")
        return cls(Controls.from_json(data) if VOCABULARY_PERMUTED in data else None,
                   NeuronsPermuted.from_json(permuted) if permuted else None,
                   {k: v for k, v in data.items()
                    if k != "neurons_permuted" and not Controls.writes(k)})


@dataclass(frozen=True)
class Sensitivity:
    """One registered sensitivity, reported without a verdict (JSON: only the keys its kind
    has: the resample ablation has ``n_truth``; a Cohen's d threshold ``n_truth``,
    ``n_truth_ci95`` and ``comparison``; the non-local set ``heads`` and either those three
    or a ``note``).

    Attributes:
        n_truth: the truth size.
        n_truth_ci95: its bootstrap interval (with a comparison).
        comparison: the primary comparison on that truth, without a verdict.
        heads: the head set (the non-local set only).
        note: why there is no comparison (the non-local set only).
    """

    n_truth: int | None = None
    n_truth_ci95: list[float] | None = None
    comparison: PrimaryComparison | None = None
    heads: list[int] | None = None
    note: str | None = None

    @property
    def words(self) -> str | None:
        """The comparison in one sentence, None without one."""
        return None if self.comparison is None else self.comparison.words()

    def to_json(self) -> dict:
        out: dict = {} if self.heads is None else {"heads": self.heads}
        if self.heads is None or self.comparison is not None:
            out["n_truth"] = self.n_truth
        if self.comparison is not None:
            out["n_truth_ci95"] = self.n_truth_ci95
            out["comparison"] = self.comparison.to_json()
        if self.note is not None:
            out["note"] = self.note
        return out

    @classmethod
    def from_json(cls, data: dict, margin: float) -> "Sensitivity":
        """The value :meth:`to_json` wrote, under a protocol of equivalence margin ``margin``."""
        written = data.get("comparison")
        comparison = PrimaryComparison.from_json(written, margin) if written else None
        ci = data.get("n_truth_ci95")
        return cls(data.get("n_truth"),
                   None if ci is None else [math.nan if x is None else x for x in ci],
                   comparison, data.get("heads"), data.get("note"))


@dataclass(frozen=True)
class NonPooledDomain:
    """A CONFIRM domain too thin to pool, against the pooled domains (descriptive only).

    Attributes:
        units: the documents (units) read.
        windows: its CONFIRM windows.
        spearman_context_shift: Spearman rho of the measured and the predicted context shift
            (None where a stored result wrote it undefined).
        n_effect_and_context: neurons with |d| >= the truth's threshold and the context set's
            part >= its threshold.
        shift_over_sd: each neuron's shift over the pooled sd.
        context_shift_over_sd: each neuron's context shift over the pooled sd.
    """

    units: int
    windows: int
    spearman_context_shift: float | None
    n_effect_and_context: int
    shift_over_sd: list[float]
    context_shift_over_sd: list[float]

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "NonPooledDomain":
        return cls(**read_json_fields(cls, data))


@dataclass(frozen=True)
class DomainSummary:
    """One domain's CONFIRM data, as reported: its own units, the fallback corpus (or None),
    the units read, the windows and its status (``pooled``, ``not pooled`` or ``no CONFIRM
    data``)."""

    own_units: int
    fallback: str | None
    units_read: int
    windows: int
    status: str


@dataclass(frozen=True)
class DataSummary:
    """The data a v3 evaluation read: each domain's summary, and the domains by status."""

    domains: dict[str, DomainSummary]
    pooled: list[str]
    not_pooled: list[str]
    no_confirm_data: list[str]

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "DataSummary":
        return cls(**{**data, "domains": {d: DomainSummary(**s)
                                          for d, s in data["domains"].items()}})


@dataclass(frozen=True)
class LabelFreeArm:
    """The label-free arm (its label says it is exploratory) on each of its pools."""

    label: str
    pools: dict[str, LabelFreePool]

    def to_json(self) -> dict:
        return {"label": self.label,
                "pools": {name: pool.to_json() for name, pool in self.pools.items()}}

    @classmethod
    def from_json(cls, data: dict) -> "LabelFreeArm":
        return cls(data["label"], {name: LabelFreePool.from_json(pool)
                                   for name, pool in data["pools"].items()})


@functools.lru_cache(maxsize=None)
def registered_margin(protocol_name: str) -> float:
    """The equivalence margin of the protocol a result names (its ``protocol`` key): v3's or
    discovery-verdict-gpt2's, each from its file."""
    for protocol in (load_protocol_v3(), load_protocol_gpt2()):
        if protocol.name == protocol_name:
            return protocol.primary.equivalence_margin
    raise DataError(f"A result under protocol {protocol_name!r}: no registered protocol of "
                    "that name gives its equivalence margin.")


@dataclass(frozen=True)
class V3Evaluation:
    """Protocol v3's result for one model (JSON: :meth:`to_json`).

    ``stopped`` is set (and the later fields empty) when the context set is empty.
    ``data`` (:class:`DataSummary`) and ``label_free`` (:class:`LabelFreeArm`, None when not
    run) are descriptive reports without a verdict; ``controls`` (None when not run),
    ``sensitivities`` and ``non_pooled`` are typed (:class:`V3Controls`, :class:`Sensitivity`,
    :class:`NonPooledDomain`); ``runtime`` is each step's seconds by name (with the budget and
    the thread count). ``stored`` (the provenance
    of a result read from disk, :mod:`.v3_stored`) and ``replicates`` (whether a replication's
    primary verdict is seed 0's, :func:`~.v3_stored.model_entries`) are set only by the report."""

    protocol: str
    model: str
    comparable: str | None
    data: DataSummary
    context_set: ContextSet
    stopped: str | None = None
    truth: TruthSummary | None = None
    primary: PrimaryComparison | None = None
    secondary: dict[str, ScoreResult] = field(default_factory=dict)
    controls: V3Controls | None = None
    sensitivities: dict[str, Sensitivity] = field(default_factory=dict)
    non_pooled: dict[str, NonPooledDomain] = field(default_factory=dict)
    label_free: LabelFreeArm | None = None
    runtime: dict = field(default_factory=dict)
    stored: dict | None = None
    replicates: bool | None = None

    def to_json(self) -> dict:
        out = {"protocol": self.protocol, "model": self.model,
               "comparable": self.comparable or "yes", "data": self.data.to_json(),
               "context_set": self.context_set.to_json(), "stopped": self.stopped,
               "truth": self.truth.to_json() if self.truth else None,
               "primary": self.primary.to_json() if self.primary else None,
               "secondary": {name: s.to_json() for name, s in self.secondary.items()},
               "controls": self.controls.to_json() if self.controls else {},
               "sensitivities": {k: s.to_json() for k, s in self.sensitivities.items()},
               "non_pooled": {k: d.to_json() for k, d in self.non_pooled.items()},
               "label_free": self.label_free.to_json() if self.label_free else None,
               "runtime": self.runtime}
        if self.stored is not None:
            out["stored"] = self.stored
        if self.replicates is not None:
            out["replicates"] = self.replicates
        return jsonable(out)

    @classmethod
    def from_json(cls, data: dict) -> "V3Evaluation":
        """The value :meth:`to_json` wrote (a stored result read back), its comparisons with
        the equivalence margin of the protocol it names (:func:`registered_margin`)."""
        margin = registered_margin(data["protocol"])
        return cls(
            protocol=data["protocol"], model=data["model"],
            comparable=None if data["comparable"] == "yes" else data["comparable"],
            data=DataSummary.from_json(data["data"]),
            context_set=ContextSet.from_json(data["context_set"]),
            stopped=data["stopped"],
            truth=TruthSummary.from_json(data["truth"]) if data["truth"] else None,
            primary=PrimaryComparison.from_json(data["primary"], margin) if data["primary"]
            else None,
            secondary={name: ScoreResult.from_json(s) for name, s in data["secondary"].items()},
            controls=V3Controls.from_json(data["controls"]) if data["controls"] else None,
            sensitivities={k: Sensitivity.from_json(s, margin)
                           for k, s in data["sensitivities"].items()},
            non_pooled={k: NonPooledDomain.from_json(d) for k, d in data["non_pooled"].items()},
            label_free=LabelFreeArm.from_json(data["label_free"]) if data["label_free"] else None,
            runtime=data["runtime"], stored=data.get("stored"),
            replicates=data.get("replicates"))

    @property
    def status(self) -> EntryStatus:
        """Where the result comes from: this run, or stored (:mod:`.v3_stored`)."""
        return EntryStatus.STORED if self.stored else EntryStatus.THIS_RUN

    @property
    def primary_verdict(self) -> str | None:
        """The primary verdict, or why there is none (the context set's stop)."""
        return self.primary.verdict if self.primary else self.stopped


__all__ = ["DataSummary", "DomainSummary", "LabelFreeArm", "NeuronsPermuted",
           "NonPooledDomain", "Sensitivity", "V3Controls", "V3Evaluation", "jsonable",
           "registered_margin"]
