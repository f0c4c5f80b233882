"""The main job's rows of the pre-registered discovery verdict (a trained model only; issue 22).

Keys: ``previous_token_heads``, ``contextual_heads_taxonomy``, ``activation_truth_neurons``,
``discovery_scores`` (per score, controls included), ``discovery_primary_score`` and
``discovery_verdict``; the protocol's whole result goes to the JSON as ``discovery_evaluation``.
Protocol v2 (registered after v1's verdicts) adds the same with the suffix ``_v2`` and its primary
heads, ``primary_heads_v2``. Both whole results also come back typed (:class:`VerdictRows`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from context_neurons.activations import PREVIOUS_TOKEN_MIN
from context_neurons.checks import DataError
from context_neurons.models.loading import LoadedModel
from context_neurons.method import MethodValues
from context_neurons.reproduce.results import PreviousTokenHeads, Row
from context_neurons.training.summary import TrainingRun
from context_neurons.verdict import evaluate, load_protocol, protocol_data
from context_neurons.verdict.evaluate import previous_token_heads
from context_neurons.verdict.options import RunOptions
from context_neurons.verdict.registry import registered
from context_neurons.verdict.results import RANDOM_DIRECTIONS, Evaluation, ScoreResult
from context_neurons.verdict.statistics import Verdict

KEYS = ("previous_token_heads", "activation_truth_neurons", "discovery_scores",
        "discovery_primary_score", "discovery_verdict")


def _score_summary(entry: ScoreResult) -> dict:
    return {"auc": entry.auc, "auc_ci95": entry.auc_ci95, "spearman": entry.spearman,
            "spearman_ci95": entry.spearman_ci95, "precision": entry.precision,
            "base_rate": entry.base_rate, "verdict": entry.verdict}


def _scores(result: Evaluation) -> dict:
    """Each score's summary against the primary truth, the controls' included, then each score's
    against the secondary head set (all non-local heads) where the protocol has one."""
    primary = result.primary
    scores = {name: _score_summary(entry) for name, entry in primary.scores.items()}
    if primary.controls is not None:
        controls = primary.controls
        scores.update({name: _score_summary(e) for name, e in controls.scored().items()})
        scores.update({f"{name}{RANDOM_DIRECTIONS}": c.to_json()
                       for name, c in controls.random_directions.items()})
    if result.secondary is not None:
        scores.update({f"{name} (secondary: all non-local heads)": _score_summary(entry)
                       for name, entry in result.secondary.scores.items()})
    return scores


class VerdictRows(NamedTuple):
    """Protocols v1's and v2's rows, the previous-token heads they measured (None without the
    documents), and each protocol's whole result (None where the rows hold none: without the
    documents, or when its evaluation stopped before any verdict)."""

    rows: list[Row]
    previous: PreviousTokenHeads | None
    v1: Evaluation | None = None
    v2: Evaluation | None = None


def verdict_rows(loaded: LoadedModel, run: TrainingRun, method: MethodValues,
                 n_resamples: int | None = None, progress: bool = False) -> VerdictRows:
    """Run protocols v1 and v2 on the loaded trained model (``run``: its training record, read
    once by the pipeline; ``method``: the run's taxonomy, circuits and scores)."""
    protocol = load_protocol()
    model = loaded.model
    try:
        data = protocol_data(model.tokenizer, run, protocol)
    except DataError as error:  # online: the training split's documents are not here
        return VerdictRows([Row(key, math.nan, f"not computed: {error}") for key in KEYS], None)
    start = protocol.data.window_mean_start
    attention, heads = previous_token_heads(model, data, start)
    previous = PreviousTokenHeads([round(float(x), 3) for x in attention], heads)
    cache: dict = {}  # the forward passes both protocols share
    result = evaluate(model, run, protocol, options=RunOptions(n_resamples, progress=progress),
                      data=data, cache=cache, method=method)
    primary_name = protocol.primary_score
    rows = [
        Row("previous_token_heads", previous.heads,
            f"layer-0 heads whose mean attention to the previous token is >= "
            f"{PREVIOUS_TOKEN_MIN} on EVAL windows (positions >= {start})"),
        Row("previous_token_attention", previous.attention,
            "each layer-0 head's mean attention to the previous token on EVAL windows"),
    ]
    primary = result.primary
    if primary is None:
        rows.append(Row("discovery_verdict", Verdict.NOT_TESTABLE, result.stopped or ""))
        return VerdictRows(rows, previous)
    scores = _scores(result)
    rows += [
        Row("activation_truth_neurons", len(primary.truth_neurons),
            "context neurons by activation under the protocol's additive truth (Cohen's d >= 1 "
            "at the best domain, the contextual heads' part >= half of the shift)"),
        Row("discovery_scores", scores,
            "each score against that truth: AUC and Spearman with 95% cluster-bootstrap "
            "intervals, precision at |T| against the base rate, and the protocol's verdict",
            show="records"),
        Row("discovery_primary_score", primary_name,
            "the score the verdict is about: the frequency-aware score of chapter 8"),
        Row("discovery_verdict", primary.scores[primary_name].verdict,
            "the pre-registered verdict of the frequency-aware score (positive, negative, "
            "anti-ranking, inconclusive or not testable)"),
        Row(registered("v1").result_key, result, "the protocol's whole result", show="json"),
    ]
    v2_rows, v2 = _v2_rows(method, run, data, n_resamples, cache, progress)
    return VerdictRows(rows + v2_rows, previous, result, v2)


def _v2_rows(method: MethodValues, run: TrainingRun, data: dict, n_resamples: int | None,
             cache: dict, progress: bool = False) -> tuple[list[Row], Evaluation | None]:
    """Protocol v2 (registered after v1's verdicts; chapter 8), on the same forward passes and
    the same taxonomy, circuits and scores: its rows, and its whole result where they hold it."""
    protocol = load_protocol("v2")
    result = evaluate(method.model, run, protocol, options=RunOptions(n_resamples,
                      progress=progress), data=data, cache=cache, method=method)
    primary = result.primary
    if primary is None:
        return [Row("discovery_verdict_v2", Verdict.NOT_TESTABLE, result.stopped or "")], None
    name = protocol.primary_score
    scores = _scores(result)
    threshold = result.truth_threshold.min_cohens_d
    return [
        Row("primary_heads_v2", primary.heads,
            "protocol v2's primary heads: the taxonomy's contextual heads and the broad heads "
            "whose denominators are as stable as theirs (chapter 3's CV across texts)"),
        Row("activation_truth_neurons_v2", len(primary.truth_neurons),
            f"context neurons by activation under protocol v2: Cohen's d >= {threshold:g} in "
            "units of the single-position spread, the primary heads' part >= half"),
        Row("discovery_scores_v2", scores,
            "each score and control against protocol v2's truth (as above)", show="records"),
        Row("discovery_verdict_v2", primary.scores[name].verdict,
            "protocol v2's verdict of the frequency-aware score (registered after v1's)"),
        Row(registered("v2").result_key, result, "protocol v2's whole result", show="json"),
    ], result
