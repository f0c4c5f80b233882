"""The pre-registered protocols as typed values (issue 33).

Each file of ``assets/protocol/`` is read once, by one loader (:func:`load_protocol`, by its
version): v1 and v2 into a :class:`Protocol`, v3 into a :class:`ProtocolV3`, whose sections
mirror the file's (``data``, ``truth``, ``bootstrap``, ``verdict``); the code reads attributes,
and ``sections`` quotes the file as registered. The verdict rule (:class:`VerdictRule`) is
shared: v3 registered v2's thresholds unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Literal, Mapping, overload

from context_neurons.checks import InputError

#: The protocol file, committed before any verdict was computed.
PROTOCOL_FILE = "discovery-verdict.json"
#: Protocol v3's file, registered before any v3 number (git commit 871d5be).
PROTOCOL_V3_FILE = "discovery-verdict-v3.json"
#: The protocols, in the order they were registered: v1 (before any verdict), v2 (after v1's),
#: v3 (the confirmatory test, after v2's).
PROTOCOL_FILES = {"v1": PROTOCOL_FILE, "v2": "discovery-verdict-v2.json", "v3": PROTOCOL_V3_FILE}


@dataclass(frozen=True)
class VerdictRule:
    """The verdict's thresholds (the protocol's ``verdict`` section): ``positive`` needs all four
    of the first conditions, ``negative`` both intervals inside the chance bands,
    ``anti-ranking`` the AUC interval below ``anti_auc_upper_below``."""

    min_truth: int
    auc_lower_at_least: float
    precision_over_base_at_least: float
    rho_lower_at_least: float
    permutation_control_abs_at_most: float
    negative_auc: tuple[float, float]  # the AUC interval must lie inside it
    negative_rho: tuple[float, float]  # the Spearman interval must lie inside it
    anti_auc_upper_below: float

    @classmethod
    def from_json(cls, rule: Mapping) -> VerdictRule:
        positive, negative = rule["positive"], rule["negative"]
        return cls(
            min_truth=int(rule["min_truth"]),
            auc_lower_at_least=positive["auc_lower_at_least"],
            precision_over_base_at_least=positive["precision_over_base_at_least"],
            rho_lower_at_least=positive["rho_lower_at_least"],
            permutation_control_abs_at_most=positive["permutation_control_abs_at_most"],
            negative_auc=tuple(negative["auc_interval_inside"]),
            negative_rho=tuple(negative["rho_interval_inside"]),
            anti_auc_upper_below=rule["anti_ranking"]["auc_upper_below"],
        )


@dataclass(frozen=True)
class DataRules:
    """Which windows the protocol reads (its ``data`` section)."""

    cal_windows_per_domain: int
    eval_windows_per_document: int
    eval_windows_per_domain: int
    window_mean_start: int  # window means over positions >= this one


@dataclass(frozen=True)
class TruthRules:
    """The additive truth (its ``truth`` section): Cohen's d at the best domain at least
    ``min_cohens_d`` and the head set's part of the shift at least ``min_context_part``."""

    min_cohens_d: float
    min_context_part: float
    single_position: bool  # v2: d in units of the single-position spread (v1: window means)
    ladder_down: tuple[float, ...] = ()  # v2: thresholds tried while |T| is too small
    ladder_up: tuple[float, ...] = ()  # ... and while it is too large

    @property
    def has_ladder(self) -> bool:
        return bool(self.ladder_down or self.ladder_up)


@dataclass(frozen=True)
class BootstrapRules:
    """The cluster bootstrap (its ``bootstrap`` section)."""

    resamples: int
    seed: int
    level: float


@dataclass(frozen=True)
class Protocol:
    """One pre-registered protocol, read once from its file."""

    version: str  # "v1" or "v2"
    name: str
    registered: str
    primary_score: str  # the score the verdict is about
    data: DataRules
    truth: TruthRules
    bootstrap: BootstrapRules
    verdict: VerdictRule
    add_stable_broad_heads: bool  # v2: the primary set adds broad heads as stable as it
    changes_from_v1: tuple[str, ...]
    document: Mapping  # the file as registered, read-only

    @classmethod
    def from_json(cls, version: str, document: dict) -> Protocol:
        data, truth, ladder = document["data"], document["truth"], document["truth"].get(
            "min_cohens_d_ladder", {})
        return cls(
            version=version, name=document["name"], registered=document["registered"],
            primary_score=document["scores"]["primary"],
            data=DataRules(data["cal_windows_per_domain"], data["eval_windows_per_document"],
                           data["eval_windows_per_domain"], data["window_mean_start"]),
            truth=TruthRules(truth["min_cohens_d"], truth["min_context_part"],
                             truth.get("spread") == "single_position",
                             tuple(ladder.get("down", ())), tuple(ladder.get("up", ()))),
            bootstrap=BootstrapRules(**{k: document["bootstrap"][k]
                                        for k in ("resamples", "seed", "level")}),
            verdict=VerdictRule.from_json(document["verdict"]),
            add_stable_broad_heads="add_stable_broad_heads" in document["head_sets"],
            changes_from_v1=tuple(document.get("changes_from_v1", ())),
            document=MappingProxyType(document),
        )

    def sections(self, *names: str) -> dict:
        """The named sections of the file, as registered (to quote them)."""
        return {name: self.document[name] for name in names}


def protocol_file(name: str):
    """A registered file of ``assets/protocol/`` (a protocol or protocol v3's CONFIRM manifest)."""
    return resources.files("context_neurons") / "assets" / "protocol" / name


def read_protocol_file(name: str) -> dict:
    """The JSON of :func:`protocol_file`."""
    return json.loads(protocol_file(name).read_text())


@dataclass(frozen=True)
class FallbackCorpus:
    """A corpus training did not read that tops up a domain short of CONFIRM units
    (``data.confirm.fallback``)."""

    corpus: str
    documents: int  # the registered file count: another count stops the evaluation


@dataclass(frozen=True)
class ConfirmRules:
    """Protocol v3's CONFIRM windows (``data.confirm``) and the CAL windows (``data.cal``)."""

    tokens_per_domain: int  # windows per domain: this // n_ctx
    window_mean_start: int  # window means over positions >= this one
    min_units: int  # a domain with fewer units is reported but not pooled
    fallback: Mapping[str, FallbackCorpus]  # by domain
    cal_windows_per_domain: int


@dataclass(frozen=True)
class TruthRulesV3:
    """Protocol v3's truth (its ``truth`` section): fixed thresholds, no ladder."""

    min_cohens_d: float
    min_context_part: float
    removes_almost_none_below: float  # removed / n_effect below it is said in words


@dataclass(frozen=True)
class PrimaryRule:
    """The primary comparison's verdict (``primary_comparison.verdict``): its labels' rules as
    registered, and the margin inside which the interval reads as equivalent."""

    equivalence_margin: float
    rules: Mapping[str, str]  # label -> its rule, in the file's words


@dataclass(frozen=True)
class ProtocolV3:
    """Protocol v3, the confirmatory test of discovery (issue 32), read once from its file."""

    name: str
    registered: str
    kind: str
    question: str
    primary: PrimaryRule
    data: ConfirmRules
    truth: TruthRulesV3
    resamples: int  # the bootstrap's (its generators are fixed in statistics' code)
    level: float
    verdict: VerdictRule  # the secondary verdicts' thresholds, and min_truth for every verdict
    budget_s: int  # seconds: the runtime the protocol reports against (no rule depends on it)
    document: Mapping  # the file as registered, read-only

    @classmethod
    def from_json(cls, document: dict) -> ProtocolV3:
        data, truth, primary = document["data"], document["truth"], document[
            "primary_comparison"]["verdict"]
        confirm = data["confirm"]
        fallback = {domain: FallbackCorpus(spec["corpus"], spec["documents"])
                    for domain, spec in confirm["fallback"].items()
                    if isinstance(spec, dict) and "corpus" in spec}
        return cls(
            name=document["name"], registered=document["registered"], kind=document["kind"],
            question=document["question"],
            primary=PrimaryRule(primary["equivalence_margin"], MappingProxyType(
                {label: rule for label, rule in primary.items()
                 if label != "equivalence_margin"})),
            data=ConfirmRules(confirm["tokens_per_domain"], confirm["window_mean_start"],
                              confirm["pooling"]["min_units"], MappingProxyType(fallback),
                              data["cal"]["cal_windows_per_domain"]),
            truth=TruthRulesV3(truth["min_cohens_d"], truth["min_context_part"],
                               truth["removes_almost_none_below"]),
            resamples=document["bootstrap"]["resamples"], level=document["bootstrap"]["level"],
            verdict=VerdictRule.from_json(document["verdict"]),
            budget_s=document["runtime"]["budget_s"], document=MappingProxyType(document))

    @property
    def short_kind(self) -> str:
        """The kind's first words (``"confirmatory"``)."""
        return self.kind.split(":")[0]

    @property
    def registered_date(self) -> str:
        """When it was registered, without the commit's words."""
        return self.registered.split(",")[0]

    def sections(self, *names: str) -> dict:
        """The named sections of the file, as registered (to quote them)."""
        return {name: self.document[name] for name in names}


@overload
def load_protocol(version: Literal["v1", "v2"] = "v1") -> Protocol: ...


@overload
def load_protocol(version: Literal["v3"]) -> ProtocolV3: ...


def load_protocol(version: str = "v1") -> Protocol | ProtocolV3:
    """A pre-registered protocol (``assets/protocol/``) as its typed value: ``"v1"``
    (``discovery-verdict.json``, registered before any verdict) or ``"v2"`` (registered after
    v1's verdicts), each a :class:`Protocol`; ``"v3"`` (``discovery-verdict-v3.json``, the
    confirmatory test), a :class:`ProtocolV3`."""
    if version not in PROTOCOL_FILES:
        raise InputError(f"Unknown protocol {version!r}; there are {list(PROTOCOL_FILES)}.")
    document = read_protocol_file(PROTOCOL_FILES[version])
    if version == "v3":
        return ProtocolV3.from_json(document)
    return Protocol.from_json(version, document)


def load_protocol_v3() -> ProtocolV3:
    """Protocol v3: ``load_protocol("v3")``."""
    return load_protocol("v3")


__all__ = ["BootstrapRules", "ConfirmRules", "DataRules", "FallbackCorpus", "PROTOCOL_FILE",
           "PROTOCOL_FILES", "PROTOCOL_V3_FILE", "PrimaryRule", "Protocol", "ProtocolV3",
           "TruthRules", "TruthRulesV3", "VerdictRule", "load_protocol", "load_protocol_v3",
           "protocol_file", "read_protocol_file"]
