"""Typed results of protocols v1 and v2 (issue 33): one score against the truth
(:class:`ScoreResult`, shared with protocol v3's secondary verdicts), one head set's truth and
scores (:class:`HeadSetResult`), and the whole evaluation (:class:`Evaluation`). Each has a
``to_json()`` with the keys, in the order, of the JSON the main job writes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from context_neurons.verdict.formatting import read_json_fields
from context_neurons.verdict.statistics import Verdict

#: The head sets of protocols v1 and v2, in the order they are reported.
HEAD_SETS = ("primary", "secondary")


@dataclass(frozen=True)
class ScoreResult:
    """One score against a truth: AUC and Spearman rho with their bootstrap intervals, precision
    among the |T| highest against the base rate, each criterion of the rule, and the verdict."""

    auc: float
    auc_ci95: list[float]
    spearman: float
    spearman_ci95: list[float]
    precision: float
    base_rate: float
    n_truth: int
    verdict: Verdict
    criteria: dict[str, bool]
    deciding_truth_size: int | None = None  # inconclusive verdicts: |T| that would decide it
    spearman_partial: float | None = None  # the frequency-aware score: rho partial on the rest
    permutation_spearman: float | None = None  # rho with the neurons permuted (the control)

    @property
    def d_mlp(self) -> int:
        """The number of neurons ranked (|T| over the base rate)."""
        return round(self.n_truth / self.base_rate)

    def to_json(self) -> dict:
        out: dict[str, Any] = {
            "auc": self.auc, "auc_ci95": self.auc_ci95, "spearman": self.spearman,
            "spearman_ci95": self.spearman_ci95, "precision": self.precision,
            "base_rate": self.base_rate, "n_truth": self.n_truth, "verdict": self.verdict,
            "criteria": self.criteria}
        if self.verdict == Verdict.INCONCLUSIVE:
            out["deciding_truth_size"] = self.deciding_truth_size
        for key in ("spearman_partial", "permutation_spearman"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out

    @classmethod
    def from_json(cls, data: dict) -> "ScoreResult":
        """The value :meth:`to_json` wrote, its verdict's word read back as the member."""
        return cls(**{**read_json_fields(cls, data), "verdict": Verdict(data["verdict"])})


@dataclass(frozen=True)
class RandomDirections:
    """A score's random-direction control: neurons whose real score clears the 99th percentile
    of the scores of random read directions with the same norms."""

    random_99th_percentile: float
    honest_found: int
    honest_found_share: float

    def to_json(self) -> dict:
        return {"random_99th_percentile": self.random_99th_percentile,
                "honest_found": self.honest_found, "honest_found_share": self.honest_found_share}


#: The JSON key of the vocabulary control, and the suffix of each score's random-direction
#: control (:meth:`Controls.to_json`).
VOCABULARY_PERMUTED = "frequency_aware_vocabulary_permuted"
RANDOM_DIRECTIONS = "_random_directions"


@dataclass(frozen=True)
class Controls:
    """The controls that live on the same model: the frequency-aware score with the
    vocabulary permuted in ``p_D`` (a score against the truth), and each score's
    random-direction control."""

    vocabulary_permuted: ScoreResult
    random_directions: dict[str, RandomDirections]  # score name -> its control

    def scored(self) -> dict[str, ScoreResult]:
        """The controls with an AUC, by their JSON names."""
        return {VOCABULARY_PERMUTED: self.vocabulary_permuted}

    def to_json(self) -> dict:
        return {**{k: v.to_json() for k, v in self.scored().items()},
                **{f"{name}{RANDOM_DIRECTIONS}": c.to_json()
                   for name, c in self.random_directions.items()}}

    @staticmethod
    def writes(key: str) -> bool:
        """Whether :meth:`to_json` writes ``key``."""
        return key == VOCABULARY_PERMUTED or key.endswith(RANDOM_DIRECTIONS)

    @classmethod
    def from_json(cls, data: dict) -> "Controls":
        """The value :meth:`to_json` wrote (other keys of ``data`` are ignored)."""
        return cls(ScoreResult.from_json(data[VOCABULARY_PERMUTED]),
                   {k.removesuffix(RANDOM_DIRECTIONS):
                    RandomDirections(**read_json_fields(RandomDirections, v))
                    for k, v in data.items() if k.endswith(RANDOM_DIRECTIONS)})


@dataclass(frozen=True)
class HeadSetResult:
    """One head set's truth (neurons, their best domains, the count's interval and its count
    under resample ablation) and each score against it."""

    heads: list[int]
    truth_neurons: list[int]
    truth_domains: dict[int, str]  # truth neuron -> its best domain
    truth_count_resample_ablation: int | None
    truth_count_ci95: list[float]
    scores: dict[str, ScoreResult]  # "frequency_aware", "top"
    frequency_aware_highest: list[dict]  # records: neuron, score, domain, share
    controls: Controls | None = None

    def scored(self) -> dict[str, ScoreResult]:
        """Every score and every control with an AUC, in the report's order."""
        return {**self.scores, **(self.controls.scored() if self.controls else {})}

    def to_json(self) -> dict:
        out = {"heads": self.heads, "truth_neurons": self.truth_neurons,
               "truth_domains": self.truth_domains,
               "truth_count_resample_ablation": self.truth_count_resample_ablation,
               "truth_count_ci95": self.truth_count_ci95,
               "scores": {k: v.to_json() for k, v in self.scores.items()},
               "frequency_aware_highest": self.frequency_aware_highest}
        if self.controls is not None:
            out["controls"] = self.controls.to_json()
        return out


@dataclass(frozen=True)
class StableBroadHeads:
    """Protocol v2's rule: each head's CV of the denominator across texts (chapter 3), and the
    broad heads added to the primary set, whose CV is at most the contextual heads' largest."""

    cv_texts: dict[int, float]
    largest_contextual_cv: float
    added: list[int]
    texts: int
    n: int  # the destination position

    def table(self, taxonomy) -> pd.DataFrame:
        """Each head's group under ``taxonomy`` (a
        :class:`~context_neurons.taxonomy.HeadTaxonomy`: the rules v1 and v2 read) and its CV."""
        return pd.DataFrame({
            "group (v1, v2)": [taxonomy.group_of(h) for h in taxonomy.heads],
            "CV of D across texts": [self.cv_texts[h] for h in taxonomy.heads],
        }, index=pd.Index(taxonomy.heads, name="head"))

    @property
    def caption(self) -> str:
        """The table's caption."""
        return (f"the stability of each head's denominator D at destination n = {self.n} over "
                f"{self.texts} CAL texts")

    def findings(self, contextual: list[int], primary: list[int]) -> list[str]:
        """The CVs' range, the rule's threshold (the largest CV among the ``contextual`` heads)
        and what it added to the ``primary`` heads, in sentences."""
        values = list(self.cv_texts.values())
        return [f"CV from {min(values):.2f} to {max(values):.2f} over the heads",
                f"largest CV among the contextual heads {contextual}: "
                f"{self.largest_contextual_cv:.2f}; heads added: {self.added or 'none'}; "
                f"v2's primary heads: {primary}"]

    def to_json(self) -> dict:
        return {"cv_texts": {str(h): v for h, v in self.cv_texts.items()},
                "largest_contextual_cv": self.largest_contextual_cv, "added": self.added,
                "texts": self.texts, "n": self.n}


@dataclass(frozen=True)
class TruthThreshold:
    """Protocol v2's threshold on Cohen's d, and every (threshold, |T|) tried to reach it."""

    min_cohens_d: float
    tried: list[tuple[float, int]]

    def to_json(self) -> dict:
        return {"min_cohens_d": self.min_cohens_d, "tried": self.tried}


@dataclass(frozen=True)
class Evaluation:
    """A protocol's whole result on one model. ``stopped`` says why it stopped early (no
    contextual head); the head sets' results are then None."""

    protocol: str
    head_sets: dict[str, list[int]]
    domains: list[str]
    eval_windows: dict[str, int]  # domain -> EVAL windows
    eval_documents: dict[str, int]  # domain -> EVAL documents
    n_resamples: int
    stopped: str | None = None
    denominator_stability: StableBroadHeads | None = None
    truth_threshold: TruthThreshold | None = None
    results: dict[str, HeadSetResult] = field(default_factory=dict)  # head set -> its result

    @property
    def primary(self) -> HeadSetResult | None:
        return self.results.get("primary")

    @property
    def secondary(self) -> HeadSetResult | None:
        return self.results.get("secondary")

    def to_json(self) -> dict:
        out: dict[str, Any] = {"protocol": self.protocol, "head_sets": self.head_sets,
                               "domains": self.domains, "eval_windows": self.eval_windows,
                               "eval_documents": self.eval_documents,
                               "n_resamples": self.n_resamples}
        if self.stopped is not None:
            out["stopped"] = self.stopped
            return out
        if self.denominator_stability is not None:
            out["denominator_stability"] = self.denominator_stability.to_json()
        if self.truth_threshold is not None:
            out["truth_threshold"] = self.truth_threshold.to_json()
        out.update({name: result.to_json() for name, result in self.results.items()})
        return out


__all__ = ["Controls", "Evaluation", "HEAD_SETS", "HeadSetResult", "RandomDirections",
           "ScoreResult", "StableBroadHeads", "TruthThreshold"]
