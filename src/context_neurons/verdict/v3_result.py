"""Protocol v3's result for one model, typed (:class:`V3Evaluation`), and how it becomes JSON
(:func:`jsonable`).

The evaluation (:func:`~context_neurons.verdict.v3.evaluate_v3`) builds it; the report
(:mod:`.v3_report`), the stored replications (:mod:`.v3_stored`), the main job and chapter 8
read its attributes. ``to_json`` is used only where JSON is written, and ``from_json`` reads a
stored result back (the two are inverse: tested on the shipped seed-1 result).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from context_neurons.verdict.results import ScoreResult, read_json_fields
from context_neurons.verdict.v3_compare import PrimaryComparison
from context_neurons.verdict.v3_heads import ContextSet
from context_neurons.verdict.v3_truth import TruthSummary


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
class V3Evaluation:
    """Protocol v3's result for one model (JSON: :meth:`to_json`).

    ``stopped`` is set (and the later fields empty) when the context set is empty. ``data``,
    ``controls``, ``sensitivities``, ``non_pooled``, ``label_free`` and ``runtime`` are
    descriptive reports without a verdict, kept in their JSON form. ``stored`` (the provenance
    of a result read from disk, :mod:`.v3_stored`) and ``replicates`` (whether a replication's
    primary verdict is seed 0's, :func:`~.v3_report.model_entries`) are set only by the report."""

    protocol: str
    model: str
    comparable: str | None
    data: dict
    context_set: ContextSet
    stopped: str | None = None
    truth: TruthSummary | None = None
    primary: PrimaryComparison | None = None
    secondary: dict[str, ScoreResult] = field(default_factory=dict)
    controls: dict = field(default_factory=dict)
    sensitivities: dict = field(default_factory=dict)
    non_pooled: dict = field(default_factory=dict)
    label_free: dict | None = None
    runtime: dict = field(default_factory=dict)
    stored: dict | None = None
    replicates: bool | None = None

    def to_json(self) -> dict:
        out = {"protocol": self.protocol, "model": self.model,
               "comparable": self.comparable or "yes", "data": self.data,
               "context_set": self.context_set.to_json(), "stopped": self.stopped,
               "truth": self.truth.to_json() if self.truth else None,
               "primary": self.primary.to_json() if self.primary else None,
               "secondary": {name: s.to_json() for name, s in self.secondary.items()},
               "controls": self.controls, "sensitivities": self.sensitivities,
               "non_pooled": self.non_pooled, "label_free": self.label_free,
               "runtime": self.runtime}
        if self.stored is not None:
            out["stored"] = self.stored
        if self.replicates is not None:
            out["replicates"] = self.replicates
        return jsonable(out)

    @classmethod
    def from_json(cls, data: dict) -> "V3Evaluation":
        """The value :meth:`to_json` wrote (a stored result read back)."""
        return cls(
            protocol=data["protocol"], model=data["model"],
            comparable=None if data["comparable"] == "yes" else data["comparable"],
            data=data["data"], context_set=ContextSet.from_json(data["context_set"]),
            stopped=data["stopped"],
            truth=TruthSummary.from_json(data["truth"]) if data["truth"] else None,
            primary=PrimaryComparison.from_json(data["primary"]) if data["primary"] else None,
            secondary={name: ScoreResult(**read_json_fields(ScoreResult, s))
                       for name, s in data["secondary"].items()},
            controls=data["controls"], sensitivities=data["sensitivities"],
            non_pooled=data["non_pooled"], label_free=data["label_free"],
            runtime=data["runtime"], stored=data.get("stored"),
            replicates=data.get("replicates"))

    @property
    def primary_verdict(self) -> str | None:
        """The primary verdict, or why there is none (the context set's stop)."""
        return self.primary.verdict if self.primary else self.stopped


__all__ = ["V3Evaluation", "jsonable"]
