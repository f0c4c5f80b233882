"""The pre-registered protocols as typed values (issues 33 and 51).

Each file of ``assets/protocol/`` (listed once, in :mod:`.registry`) is read once into a typed
value. What every protocol registers alike (its name, when it was registered, its question, the
score its verdict is about, the window means' start, the truth's thresholds, the bootstrap's
resamples and level, the verdict's thresholds, the file as registered) is one base,
:class:`Protocol`: the registry's readers, the main job's results and tables take it. Each
protocol adds its own sections as typed fields: :class:`ProtocolV1` (v1 and v2, its amendment),
and the confirmatory protocols (:class:`ConfirmatoryProtocol`: a primary comparison against
baselines, registered seeds, a previous-token threshold), :class:`ProtocolV3` here and
:class:`~.gpt2_protocol.ProtocolGPT2` beside its data source. A value a protocol registers only
in its words (v3's seeds, its windows per unit, the held-out fraction that makes a model
comparable) is parsed from those words here, once. :func:`~.protocols.load` reads any of them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Any, Literal, Mapping, overload

from context_neurons.checks import DataError, InputError
from context_neurons.verdict.registry import TRAINED, RegisteredProtocol, registered

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
    """What every protocol's data registers alike: window means over positions >= this one."""

    window_mean_start: int


@dataclass(frozen=True)
class TruthThresholds:
    """The additive truth's thresholds, every protocol's (its ``truth`` section): Cohen's d at
    the best domain at least ``min_cohens_d`` and the head set's part of the shift at least
    ``min_context_part``."""

    min_cohens_d: float
    min_context_part: float


@dataclass(frozen=True)
class Bootstrap:
    """The cluster bootstrap every protocol registers (its ``bootstrap`` section): how many
    resamples, and the intervals' level."""

    resamples: int
    level: float


@dataclass(frozen=True)
class Protocol:
    """What every pre-registered protocol registers, read once from its file; each protocol's
    own sections are its subclass's fields (module docstring).

    Attributes:
        version: its name in the registry (``"v3"``, ``"gpt2"``).
        name, registered, question: as the file says.
        registered_date: when it was registered (``registered``'s leading date).
        primary_score: the score the verdict is about (``scores.primary``).
        data, truth, bootstrap, verdict: the shared part of those sections.
        document: the file as registered, read-only.
    """

    version: str
    name: str
    registered: str
    registered_date: str
    question: str
    primary_score: str
    data: DataRules
    truth: TruthThresholds
    bootstrap: Bootstrap
    verdict: VerdictRule
    document: Mapping

    @classmethod
    def common_fields(cls, version: str, document: dict) -> dict[str, Any]:
        """The fields this class's protocols parse alike (a subclass adds its own)."""
        return {"version": version, "name": document["name"],
                "registered": document["registered"],
                "registered_date": _leading_date(document["name"], document["registered"]),
                "question": document["question"],
                "primary_score": document["scores"]["primary"],
                "verdict": VerdictRule.from_json(document["verdict"]),
                "document": MappingProxyType(document)}

    @property
    def entry(self) -> RegisteredProtocol:
        """Its entry in the registry: its file, status and result's row."""
        return registered(self.version)

    def sections(self, *names: str) -> dict:
        """The named sections of the file, as registered (to quote them)."""
        return {name: self.document[name] for name in names}


def _leading_date(name: str, registered_words: str) -> str:
    """The date ``registered_words`` start with (``2026-11-26``; a data error without one)."""
    found = re.match(r"\d{4}-\d{2}-\d{2}", registered_words)
    if found is None:
        raise DataError(f"Protocol {name}'s 'registered' starts with no date: "
                        f"{registered_words!r}.")
    return found.group()


def protocol_file(name: str):
    """A registered file of ``assets/protocol/`` (a protocol or protocol v3's CONFIRM manifest)."""
    return resources.files("context_neurons") / "assets" / "protocol" / name


def read_protocol_file(name: str) -> dict:
    """The JSON of :func:`protocol_file`."""
    return json.loads(protocol_file(name).read_text())


# ----------------------------------------------------------------------------------------------
# v1 and v2
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EvalDataRules(DataRules):
    """Which windows v1 and v2 read (their ``data`` section)."""

    cal_windows_per_domain: int
    eval_windows_per_document: int
    eval_windows_per_domain: int


@dataclass(frozen=True)
class TruthRules(TruthThresholds):
    """v1's and v2's truth: the shared thresholds, the spread they are in, v2's ladder."""

    single_position: bool  # v2: d in units of the single-position spread (v1: window means)
    ladder_down: tuple[float, ...] = ()  # v2: thresholds tried while |T| is too small
    ladder_up: tuple[float, ...] = ()  # ... and while it is too large

    @property
    def has_ladder(self) -> bool:
        return bool(self.ladder_down or self.ladder_up)


@dataclass(frozen=True)
class BootstrapRules(Bootstrap):
    """v1's and v2's bootstrap: one seed for every draw."""

    seed: int


@dataclass(frozen=True)
class ProtocolV1(Protocol):
    """Protocol v1, or v2 (v1 amended after its verdicts: ``changes_from_v1``)."""

    data: EvalDataRules
    truth: TruthRules
    bootstrap: BootstrapRules
    add_stable_broad_heads: bool  # v2: the primary set adds broad heads as stable as it
    changes_from_v1: tuple[str, ...]

    @classmethod
    def from_json(cls, version: str, document: dict) -> ProtocolV1:
        data, truth = document["data"], document["truth"]
        ladder = truth.get("min_cohens_d_ladder", {})
        return cls(
            **cls.common_fields(version, document),
            data=EvalDataRules(**{key: data[key] for key in (
                "window_mean_start", "cal_windows_per_domain", "eval_windows_per_document",
                "eval_windows_per_domain")}),
            truth=TruthRules(truth["min_cohens_d"], truth["min_context_part"],
                             truth.get("spread") == "single_position",
                             tuple(ladder.get("down", ())), tuple(ladder.get("up", ()))),
            bootstrap=BootstrapRules(**{k: document["bootstrap"][k]
                                        for k in ("resamples", "level", "seed")}),
            add_stable_broad_heads="add_stable_broad_heads" in document["head_sets"],
            changes_from_v1=tuple(document.get("changes_from_v1", ())))


# ----------------------------------------------------------------------------------------------
# The confirmatory protocols: v3 and discovery-verdict-gpt2
# ----------------------------------------------------------------------------------------------


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
class Seeds:
    """A confirmatory protocol's registered seeds (``bootstrap`` and ``controls``, in words)."""

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
class TruthRulesV3(TruthThresholds):
    """A confirmatory protocol's truth (its ``truth`` section): fixed thresholds, no ladder."""

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
    registered, and the margin inside which the interval reads as equivalent."""

    equivalence_margin: float
    rules: Mapping[str, str]  # label -> its rule, in the file's words

    @classmethod
    def from_json(cls, verdict: Mapping) -> PrimaryRule:
        return cls(verdict["equivalence_margin"], MappingProxyType(
            {label: rule for label, rule in verdict.items() if label != "equivalence_margin"}))


@dataclass(frozen=True)
class ConfirmatoryProtocol(Protocol):
    """A confirmatory protocol (v3, discovery-verdict-gpt2): one primary comparison of the
    score (:attr:`primary_score`) against registered baselines, what the shared machinery
    (:mod:`.v3`, :mod:`.comparison`, :mod:`.truth`) reads of it. Its data source's rules are its
    subclass's :attr:`data`.

    Attributes:
        kind: what kind of test it is, in words (``"confirmatory: ..."``).
        primary: the primary comparison's verdict rules.
        truth: the thresholds, the sensitivity's and when a removal is said to remove almost none.
        seeds: every registered seed.
        bag_length: the bag of tokens' sequences: ``min(this, n_ctx)`` tokens.
        previous_token_threshold: a head whose previous-token attention on the calibration
            windows is at least this is left out of the context set.
        budget_s: seconds, the runtime the protocol reports against (no rule depends on it).
    """

    truth: TruthRulesV3
    kind: str
    primary: PrimaryRule
    seeds: Seeds
    bag_length: int
    previous_token_threshold: float
    budget_s: int

    @classmethod
    def common_fields(cls, version: str, document: dict) -> dict[str, Any]:
        return {**super().common_fields(version, document), "kind": document["kind"],
                "primary": PrimaryRule.from_json(document["primary_comparison"]["verdict"]),
                "truth": TruthRulesV3.from_json(document["truth"]),
                "bootstrap": Bootstrap(document["bootstrap"]["resamples"],
                                       document["bootstrap"]["level"]),
                "seeds": Seeds.from_json(document),
                "bag_length": bag_length(document["baselines"])}

    @property
    def short_kind(self) -> str:
        """The kind's first words (``"confirmatory"``)."""
        return self.kind.split(":")[0]


@dataclass(frozen=True)
class FallbackCorpus:
    """A corpus training did not read that tops up a domain short of CONFIRM units
    (``data.confirm.fallback``)."""

    corpus: str
    documents: int  # the registered file count: another count stops the evaluation


@dataclass(frozen=True)
class ConfirmRules(DataRules):
    """Protocol v3's CONFIRM windows (``data.confirm``) and the CAL windows (``data.cal``)."""

    tokens_per_domain: int  # windows per domain: this // n_ctx
    min_units: int  # a domain with fewer units is reported but not pooled
    fallback: Mapping[str, FallbackCorpus]  # by domain
    cal_windows_per_domain: int
    tokens_per_unit: int  # windows per unit: max(1, this // n_ctx) (``windows_per_unit``)

    @classmethod
    def from_json(cls, data: Mapping) -> ConfirmRules:
        confirm = data["confirm"]
        fallback = {domain: FallbackCorpus(spec["corpus"], spec["documents"])
                    for domain, spec in confirm["fallback"].items()
                    if isinstance(spec, dict) and "corpus" in spec}
        return cls(window_mean_start=confirm["window_mean_start"],
                   tokens_per_domain=confirm["tokens_per_domain"],
                   min_units=confirm["pooling"]["min_units"],
                   fallback=MappingProxyType(fallback),
                   cal_windows_per_domain=data["cal"]["cal_windows_per_domain"],
                   tokens_per_unit=_registered_int(r"max\(1, (\d+) // n_ctx\)",
                                                   confirm["windows_per_unit"]))

    def windows_per_unit(self, n_ctx: int) -> int:
        """The first windows each unit gives at context ``n_ctx`` (at least one)."""
        return max(1, self.tokens_per_unit // n_ctx)


def registered_names(models: Mapping) -> tuple[str, ...]:
    """The models a protocol's ``models`` section registers (its entries that are sections), in
    the file's order, the primary model first."""
    return tuple(name for name, entry in models.items() if isinstance(entry, dict))


@dataclass(frozen=True)
class RegisteredModels:
    """The models protocol v3 is run on (``models``), and when one is comparable."""

    names: tuple[str, ...]  # in the protocol's order, the primary model first
    heldout_fraction: float  # ``comparable_when``: the training run's held-out fraction

    @classmethod
    def from_json(cls, models: Mapping) -> RegisteredModels:
        return cls(registered_names(models),
                   float(_registered_number(r"heldout_fraction ([0-9.]+)",
                                            models["comparable_when"])))


@dataclass(frozen=True)
class ProtocolV3(ConfirmatoryProtocol):
    """Protocol v3, the confirmatory test of discovery (issue 32), read once from its file: its
    CONFIRM data (:attr:`data`) and the models trained here that it registers."""

    data: ConfirmRules
    models: RegisteredModels

    @classmethod
    def from_json(cls, document: dict, version: str = "v3") -> ProtocolV3:
        return cls(**cls.common_fields(version, document),
                   data=ConfirmRules.from_json(document["data"]),
                   models=RegisteredModels.from_json(document["models"]),
                   budget_s=document["runtime"]["budget_s"],
                   previous_token_threshold=document["context_set"]["taxonomy_fix"][
                       "threshold"])


@overload
def load_protocol(version: Literal["v1", "v2"] = "v1") -> ProtocolV1: ...


@overload
def load_protocol(version: Literal["v3"]) -> ProtocolV3: ...


def load_protocol(version: str = "v1") -> ProtocolV1 | ProtocolV3:
    """A pre-registered protocol of the models trained here (``assets/protocol/``) as its typed
    value: ``"v1"`` (``discovery-verdict.json``, registered before any verdict) or ``"v2"``
    (registered after v1's verdicts), each a :class:`ProtocolV1`; ``"v3"``
    (``discovery-verdict-v3.json``, the confirmatory test), a :class:`ProtocolV3`. Every
    registered protocol, the GPT-2 family's too: :func:`context_neurons.verdict.protocols.load`."""
    entry = registered(version)
    if entry.family != TRAINED:
        raise InputError(f"Protocol {version!r} judges {entry.family}: read it with "
                         f"context_neurons.verdict.protocols.load({version!r}).")
    document = read_protocol_file(entry.file)
    if version == "v3":
        return ProtocolV3.from_json(document)
    return ProtocolV1.from_json(version, document)


def load_protocol_v3() -> ProtocolV3:
    """Protocol v3: ``load_protocol("v3")``."""
    return load_protocol("v3")


__all__ = ["Bootstrap", "BootstrapRules", "ConfirmRules", "ConfirmatoryProtocol", "DataRules",
           "EvalDataRules", "FallbackCorpus", "PROTOCOL_FILE", "PROTOCOL_V3_FILE", "PrimaryRule",
           "Protocol", "ProtocolV1", "ProtocolV3", "RegisteredModels", "Seeds", "TruthRules",
           "TruthRulesV3", "TruthThresholds", "VerdictRule", "bag_length", "load_protocol",
           "load_protocol_v3", "protocol_file", "read_protocol_file", "registered_names"]
