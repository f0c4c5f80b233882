"""The pre-registered protocols as typed values (issue 33).

Each file of ``assets/protocol/`` (listed once, in :mod:`.registry`) is read once, by one loader
(:func:`load_protocol`, by its version): v1 and v2 into a :class:`Protocol`, v3 into a
:class:`ProtocolV3`, whose sections mirror the file's (``data``, ``truth``, ``bootstrap``,
``verdict``); the code reads attributes, and ``sections`` quotes the file as registered. A value
a protocol registers only in its words (v3's seeds, its windows per unit, the held-out fraction
that makes a model comparable) is parsed from those words here, once. The verdict rule
(:class:`VerdictRule`) is shared: v3 registered v2's thresholds unchanged.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Literal, Mapping, overload

from context_neurons.checks import DataError, InputError
from context_neurons.verdict.registry import TRAINED, registered

#: The protocol file, committed before any verdict was computed.
PROTOCOL_FILE = registered("v1").file
#: Protocol v3's file, registered before any v3 number (git commit 871d5be).
PROTOCOL_V3_FILE = registered("v3").file


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
    tokens_per_unit: int  # windows per unit: max(1, this // n_ctx) (``windows_per_unit``)

    def windows_per_unit(self, n_ctx: int) -> int:
        """The first windows each unit gives at context ``n_ctx`` (at least one)."""
        return max(1, self.tokens_per_unit // n_ctx)


@dataclass(frozen=True)
class Seeds:
    """Protocol v3's registered seeds (``bootstrap`` and ``controls``, in words there)."""

    units: int  # the unit draws: numpy PCG64
    neurons: int  # the neuron draws: numpy PCG64
    permutation: int  # the neurons-permuted control: numpy PCG64
    random_directions: int  # the random read directions: torch
    vocabulary: int  # the vocabulary permuted in p_D

    @classmethod
    def from_json(cls, document: Mapping) -> Seeds:
        boot, controls = document["bootstrap"], document["controls"]
        return cls(_registered_int(r"PCG64\((\d+)\)", boot["unit_draws"]),
                   _registered_int(r"PCG64\((\d+)\)", boot["neuron_draws"]),
                   _registered_int(r"PCG64\((\d+)\)", controls["neurons_permuted"]),
                   _registered_int(r"torch seed (\d+)", controls["random_read_directions"]),
                   _registered_int(r"seed (\d+)", controls["vocabulary_permuted"]))


@dataclass(frozen=True)
class RegisteredModels:
    """The models protocol v3 is run on (``models``), and when one is comparable."""

    names: tuple[str, ...]  # in the protocol's order, the primary model first
    heldout_fraction: float  # ``comparable_when``: the training run's held-out fraction

    @classmethod
    def from_json(cls, models: Mapping) -> RegisteredModels:
        return cls(tuple(name for name, entry in models.items() if isinstance(entry, dict)),
                   float(_registered_number(r"heldout_fraction ([0-9.]+)",
                                            models["comparable_when"])))


def _registered_number(pattern: str, words: str) -> str:
    """The one number ``pattern`` finds in a protocol's ``words`` (a data error otherwise)."""
    found = re.findall(pattern, words)
    if len(found) != 1:
        raise DataError(f"The protocol's words {words!r} register no single number for "
                        f"{pattern!r}.")
    return found[0]


def _registered_int(pattern: str, words: str) -> int:
    return int(_registered_number(pattern, words))


@dataclass(frozen=True)
class TruthRulesV3:
    """Protocol v3's truth (its ``truth`` section): fixed thresholds, no ladder."""

    min_cohens_d: float
    min_context_part: float
    removes_almost_none_below: float  # removed / n_effect below it is said in words
    #: The sensitivity's other thresholds on Cohen's d (``sensitivity``, in words there:
    #: "min_cohens_d 0.5 and 2.0"), reported without a verdict.
    sensitivity_cohens_d: tuple[float, ...]

    @classmethod
    def from_json(cls, truth: Mapping) -> TruthRulesV3:
        """v3's ``truth`` section, or a protocol's that words its sensitivity in one string."""
        sensitivity = truth["sensitivity"]
        words = sensitivity["cohens_d"] if isinstance(sensitivity, Mapping) else sensitivity
        found = re.findall(r"min_cohens_d ([0-9.]+) and ([0-9.]+)", words)
        if len(found) != 1:
            raise DataError(f"The protocol's words {words!r} register no single pair of "
                            "sensitivity thresholds on Cohen's d.")
        return cls(truth["min_cohens_d"], truth["min_context_part"],
                   truth["removes_almost_none_below"], tuple(float(d) for d in found[0]))


def bag_length(baselines: Mapping) -> int:
    """The bag of tokens' longest sequence, ``L = min(this, n_ctx)`` in the words of the
    ``baselines`` section (v3's ``bag_of_tokens.input``, or one string as the GPT-2 protocol's)."""
    bag = baselines["bag_of_tokens"]
    return _registered_int(r"L = min\((\d+), n_ctx\)",
                           bag["input"] if isinstance(bag, Mapping) else bag)


@dataclass(frozen=True)
class PrimaryRule:
    """The primary comparison's verdict (``primary_comparison.verdict``): its labels' rules as
    registered, the margin inside which the interval reads as equivalent, and the score it
    judges against the baselines (``scores.primary``)."""

    equivalence_margin: float
    rules: Mapping[str, str]  # label -> its rule, in the file's words
    score: str


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
    seeds: Seeds
    models: RegisteredModels
    bag_length: int  # the bag of tokens' sequences: min(this, n_ctx) tokens (:func:`bag_length`)
    #: A head whose previous-token attention on the CAL windows is at least this is left out of
    #: the context set (``context_set.taxonomy_fix.threshold``).
    previous_token_threshold: float
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
                 if label != "equivalence_margin"}), document["scores"]["primary"]),
            data=ConfirmRules(confirm["tokens_per_domain"], confirm["window_mean_start"],
                              confirm["pooling"]["min_units"], MappingProxyType(fallback),
                              data["cal"]["cal_windows_per_domain"],
                              _registered_int(r"max\(1, (\d+) // n_ctx\)",
                                              confirm["windows_per_unit"])),
            truth=TruthRulesV3.from_json(truth),
            resamples=document["bootstrap"]["resamples"], level=document["bootstrap"]["level"],
            verdict=VerdictRule.from_json(document["verdict"]),
            budget_s=document["runtime"]["budget_s"], seeds=Seeds.from_json(document),
            models=RegisteredModels.from_json(document["models"]),
            bag_length=bag_length(document["baselines"]),
            previous_token_threshold=document["context_set"]["taxonomy_fix"]["threshold"],
            document=MappingProxyType(document))

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
    confirmatory test), a :class:`ProtocolV3`. The GPT-2 family's protocol has its own typed
    value: :func:`context_neurons.verdict.protocols.load` reads every registered one."""
    entry = registered(version)
    if entry.family != TRAINED:
        raise InputError(f"Protocol {version!r} judges {entry.family}: read it with "
                         f"context_neurons.verdict.protocols.load({version!r}).")
    document = read_protocol_file(entry.file)
    if version == "v3":
        return ProtocolV3.from_json(document)
    return Protocol.from_json(version, document)


def load_protocol_v3() -> ProtocolV3:
    """Protocol v3: ``load_protocol("v3")``."""
    return load_protocol("v3")


__all__ = ["BootstrapRules", "ConfirmRules", "DataRules", "FallbackCorpus", "PROTOCOL_FILE",
           "PROTOCOL_V3_FILE", "PrimaryRule", "Protocol", "ProtocolV3", "RegisteredModels",
           "Seeds", "TruthRules", "TruthRulesV3", "VerdictRule", "bag_length", "load_protocol",
           "load_protocol_v3", "protocol_file", "read_protocol_file"]
