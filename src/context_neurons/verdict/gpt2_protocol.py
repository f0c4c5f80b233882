"""Protocol discovery-verdict-gpt2 as a typed value (issue 52).

The file ``assets/protocol/discovery-verdict-gpt2.json`` was registered before any GPT-2 number.
:func:`load_protocol_gpt2` reads it once into a :class:`ProtocolGPT2`, a
:class:`~context_neurons.verdict.protocol.ConfirmatoryProtocol` like v3: the values the shared
machinery reads (truth, bootstrap, seeds, verdict thresholds) are its common fields, each taken
from this file, never from v3's; its own are its data source's rules (:class:`GPT2DataRules`),
the paper's claim (:class:`PaperClaimRules`) and its models. A value the file registers only in
words (the unit's ``max(1, 1024 // n_ctx)``, the seeds, the theta sweep, the paper's heads) is
parsed here, once.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Mapping

from context_neurons.checks import DataError
from context_neurons.verdict.registry import registered
from context_neurons.verdict.protocol import ConfirmatoryProtocol, DataRules, read_protocol_file
from context_neurons.verdict.protocol import registered_names

#: The protocol's file and its frozen list of excluded documents (same folder).
PROTOCOL_GPT2_FILE = registered("gpt2").file
EXCLUDED_FILE = "discovery-verdict-gpt2-excluded.json"


def _numbers(pattern: str, words: str) -> tuple[int, ...]:
    """The comma-separated integers ``pattern``'s one group finds in ``words``."""
    found = re.findall(pattern, words)
    if len(found) != 1:
        raise DataError(f"The protocol's words {words!r} register no single list for "
                        f"{pattern!r}.")
    return tuple(int(x) for x in found[0].split(","))


@dataclass(frozen=True)
class SideRules:
    """One side of the split (``data.confirm`` or ``data.unigram``): its unit order's hash prefix,
    its windows per domain and its tokens per domain."""

    order_prefix: str
    windows_per_domain: int
    tokens_per_domain: int


@dataclass(frozen=True)
class GPT2DataRules(DataRules):
    """The data source's rules (``data``, ``units``, ``pooling``, ``when_corpora_absent``).

    Attributes:
        version: the corpora dataset's version.
        folders: the folders read, in the file's order.
        code_folder: the folder read from the standard library (its file list checked).
        split_prefix, unigram_below: ``sha256(split_prefix + key) < unigram_below``: UNIGRAM.
        n_ctx: the units' and windows' length.
        confirm, unigram: each side's order and sizes.
        windows_per_unit: CONFIRM windows per unit (``max(1, tokens_per_unit // n_ctx)``).
        tokens_per_unit: the number in that rule.
        window_mean_start: window means over positions >= this one (every protocol's field).
        min_units: a domain pools with at least this many CONFIRM units giving a window.
        min_pooled_domains: fewer pooled domains: not testable.
        excluded_count: the frozen list's registered size.
        absent_line: the line said when the corpora are absent (its template, as registered).
        fetch_command: the command that fetches them.
    """

    version: str
    folders: tuple[str, ...]
    code_folder: str
    split_prefix: str
    unigram_below: float
    n_ctx: int
    confirm: SideRules
    unigram: SideRules
    tokens_per_unit: int
    min_units: int
    min_pooled_domains: int
    excluded_count: int
    absent_line: str
    fetch_command: str

    @property
    def windows_per_unit(self) -> int:
        return max(1, self.tokens_per_unit // self.n_ctx)

    @classmethod
    def from_json(cls, document: Mapping) -> GPT2DataRules:
        data, confirm, unigram = document["data"], document["data"]["confirm"], document[
            "data"]["unigram"]
        absent = document["when_corpora_absent"]
        code = re.findall(r"^(\w+): the \*\.py files", data["corpora"]["code"])
        if len(code) != 1:
            raise DataError("The protocol's data.corpora.code names no code folder.")
        return cls(
            version=data["corpora"]["version"], folders=tuple(data["corpora"]["folders"]),
            code_folder=code[0], split_prefix=data["split"]["prefix"],
            unigram_below=data["split"]["unigram_below"], n_ctx=data["units"]["n_ctx"],
            confirm=SideRules(confirm["order_prefix"], confirm["windows_per_domain"],
                              confirm["tokens_per_domain"]),
            unigram=SideRules(unigram["order_prefix"], unigram["windows_per_domain"],
                              unigram["tokens_per_domain"]),
            tokens_per_unit=_numbers(r"max\(1, (\d+) // n_ctx\)",
                                     confirm["windows_per_unit_rule"])[0],
            window_mean_start=confirm["window_mean_start"],
            min_units=data["pooling"]["min_units"],
            min_pooled_domains=data["pooling"]["min_pooled_domains"],
            excluded_count=data["excluded"]["count"], absent_line=absent["line"],
            fetch_command=absent["command"])


@dataclass(frozen=True)
class PaperClaimRules:
    """The paper's claim in its own terms (``paper_claim``).

    Attributes:
        theta: the found set is ``top[j] >= theta``.
        precision_over_base_at_least: the point enrichment ``finds_context_neurons`` needs.
        separates_nothing_fraction: ``|F| >= this * d_mlp``: the threshold separates nothing.
        count_matched_n: the count-matched set's size (the paper's count).
        thetas: the sweep's thresholds.
        paper_heads: the paper's contextual heads of GPT-2 Small (compared, never used).
    """

    theta: float
    precision_over_base_at_least: float
    separates_nothing_fraction: float
    count_matched_n: int
    thetas: tuple[int, ...]
    paper_heads: tuple[int, ...]

    @classmethod
    def from_json(cls, document: Mapping) -> PaperClaimRules:
        claim, verdict = document["paper_claim"], document["paper_claim"]["verdict"]
        return cls(
            theta=claim["theta"],
            precision_over_base_at_least=verdict["precision_over_base_at_least"],
            separates_nothing_fraction=verdict["separates_nothing_fraction"],
            count_matched_n=claim["count_matched"]["n"],
            thetas=_numbers(r"thetas ([\d, ]+):", claim["also_reported"]),
            paper_heads=_numbers(r"\(([\d, ]+)\)", document["context_set"]["paper_heads"]))


@dataclass(frozen=True)
class ProtocolGPT2(ConfirmatoryProtocol):
    """Protocol discovery-verdict-gpt2, read once from its file: the confirmatory protocols'
    common fields (:class:`~context_neurons.verdict.protocol.ConfirmatoryProtocol`), and its own.

    Attributes:
        data: the data source's rules.
        paper_claim: the paper's claim's rules.
        models: the GPT-2 family, the primary model first.
        primary_model: ``gpt2``.
    """

    data: GPT2DataRules
    paper_claim: PaperClaimRules
    models: tuple[str, ...]
    primary_model: str

    @classmethod
    def from_json(cls, document: dict, version: str = "gpt2") -> ProtocolGPT2:
        models = document["models"]
        return cls(**cls.common_fields(version, document),
                   data=GPT2DataRules.from_json(document),
                   paper_claim=PaperClaimRules.from_json(document),
                   models=registered_names(models), primary_model=models["primary"],
                   budget_s=document["runtime"]["targets"]["cpu_2_cores_s"],
                   previous_token_threshold=document["context_set"][
                       "previous_token_threshold"])


@functools.lru_cache(maxsize=1)
def load_protocol_gpt2() -> ProtocolGPT2:
    """The protocol, read once per process."""
    return ProtocolGPT2.from_json(read_protocol_file(PROTOCOL_GPT2_FILE))


def excluded_keys() -> frozenset[str]:
    """The frozen excluded document keys, every folder's (checked against the registered
    count: another count is a :class:`DataError`)."""
    listed = read_protocol_file(EXCLUDED_FILE)
    keys = frozenset(key for keys in listed["documents"].values() for key in keys)
    count = load_protocol_gpt2().data.excluded_count
    if len(keys) != count:
        raise DataError(f"{EXCLUDED_FILE} lists {len(keys)} keys, not the registered {count}.")
    return keys


__all__ = ["EXCLUDED_FILE", "GPT2DataRules", "PROTOCOL_GPT2_FILE", "PaperClaimRules",
           "ProtocolGPT2", "SideRules", "excluded_keys", "load_protocol_gpt2"]
