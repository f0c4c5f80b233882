"""The main job's rows of the pre-registered discovery verdict (a trained model only; issue 22).

Keys: ``previous_token_heads``, ``contextual_heads_taxonomy``, ``activation_truth_neurons``,
``discovery_scores`` (per score, controls included), ``discovery_primary_score`` and
``discovery_verdict``; the protocol's whole result goes to the JSON as ``discovery_evaluation``.
"""

from __future__ import annotations

import math

from context_neurons.activations import PREVIOUS_TOKEN_MIN
from context_neurons.checks import DataError
from context_neurons.models.loading import LoadedModel
from context_neurons.reproduce.table import Row
from context_neurons.training.heldout import read_record
from context_neurons.verdict import evaluate, load_protocol, protocol_data
from context_neurons.verdict.evaluate import previous_token_heads

KEYS = ("previous_token_heads", "activation_truth_neurons", "discovery_scores",
        "discovery_primary_score", "discovery_verdict")


def _score_summary(entry: dict) -> dict:
    keep = ("auc", "auc_ci95", "spearman", "spearman_ci95", "precision", "base_rate", "verdict")
    return {k: entry[k] for k in keep if k in entry}


def verdict_rows(loaded: LoadedModel, n_resamples: int | None = None) -> list[Row]:
    """Run the protocol on the loaded trained model and return its rows."""
    protocol = load_protocol()
    model = loaded.model
    try:
        record = read_record(loaded.directory)
        data = protocol_data(model.tokenizer, record, protocol)
    except DataError as error:  # online: the training split's documents are not here
        return [Row(key, math.nan, f"not computed: {error}") for key in KEYS]
    start = protocol["data"]["window_mean_start"]
    previous, previous_heads = previous_token_heads(model, data, start)
    result = evaluate(model, record, protocol, n_resamples=n_resamples, data=data)
    primary_name = protocol["scores"]["primary"]
    rows = [
        Row("previous_token_heads", previous_heads,
            f"layer-0 heads whose mean attention to the previous token is >= "
            f"{PREVIOUS_TOKEN_MIN} on EVAL windows (positions >= {start})"),
        Row("previous_token_attention", [round(float(x), 3) for x in previous],
            "each layer-0 head's mean attention to the previous token on EVAL windows"),
    ]
    if "primary" not in result:
        rows.append(Row("discovery_verdict", "not testable", result.get("stopped", "")))
        return rows
    primary = result["primary"]
    scores = {name: _score_summary(entry) for name, entry in primary["scores"].items()}
    for name, entry in primary.get("controls", {}).items():
        scores[name] = _score_summary(entry) if "auc" in entry else entry
    if "secondary" in result:
        for name, entry in result["secondary"]["scores"].items():
            scores[f"{name} (secondary: all non-local heads)"] = _score_summary(entry)
    rows += [
        Row("activation_truth_neurons", len(primary["truth_neurons"]),
            "context neurons by activation under the protocol's additive truth (Cohen's d >= 1 "
            "at the best domain, the contextual heads' part >= half of the shift)"),
        Row("discovery_scores", scores,
            "each score against that truth: AUC and Spearman with 95% cluster-bootstrap "
            "intervals, precision at |T| against the base rate, and the protocol's verdict"),
        Row("discovery_primary_score", primary_name,
            "the score the verdict is about: the frequency-aware score of chapter 8"),
        Row("discovery_verdict", primary["scores"][primary_name]["verdict"],
            "the pre-registered verdict of the frequency-aware score (positive, negative, "
            "anti-ranking, inconclusive or not testable)"),
        Row("discovery_evaluation", result, "the protocol's whole result"),
    ]
    return rows
