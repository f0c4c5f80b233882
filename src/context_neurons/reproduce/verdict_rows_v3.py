"""The main job's rows of protocol v3, the confirmatory test of discovery (a trained model only;
issue 32; ``assets/protocol/discovery-verdict-v3.json``).

Keys: ``context_heads_v3``, ``activation_truth_neurons_v3``, ``discovery_baselines_v3`` (the
score and the four registered baselines against the truth), ``discovery_verdict_v3`` (the primary
comparison's verdict), ``discovery_secondary_v3`` and ``discovery_models_v3`` (every registered
model, the ones not trained as pending); the whole result goes to the JSON as
``discovery_evaluation_v3`` and comes back typed beside the rows. The exploratory label-free arm
and the controls timed apart (step 0, the planted model) are left to ``python -m context_neurons
v3``.
"""

from __future__ import annotations

import math

from context_neurons.checks import DataError
from context_neurons.models.loading import LoadedModel
from context_neurons.method import MethodValues
from context_neurons.reproduce.results import Row
from context_neurons.training.summary import TrainingRun
from context_neurons.verdict.options import RunOptions
from context_neurons.verdict.v3 import evaluate_v3
from context_neurons.verdict.entries import NoResult
from context_neurons.verdict.protocol import load_protocol_v3
from context_neurons.verdict.registry import registered
from context_neurons.verdict.v3_data import v3_data
from context_neurons.verdict.formatting import interval_text
from context_neurons.verdict.comparison import PrimaryVerdict
from context_neurons.verdict.v3_models import UnregisteredModel, model_key
from context_neurons.verdict.v3_report import baseline_records
from context_neurons.verdict.v3_result import V3Evaluation
from context_neurons.verdict.v3_stored import Entries, model_entries

#: The row of the whole result (:mod:`~context_neurons.verdict.registry`).
RESULT_KEY = registered("v3").result_key
KEYS = ("context_heads_v3", "activation_truth_neurons_v3", "discovery_baselines_v3",
        "discovery_verdict_v3")


def _secondary(entry: V3Evaluation) -> dict[str, dict[str, str]]:
    return {name: {"verdict": s.verdict, "AUC": interval_text(s.auc, s.auc_ci95),
                   "rho": interval_text(s.spearman, s.spearman_ci95)}
            for name, s in entry.secondary.items()}


def _models(models: Entries) -> dict[str, dict[str, str]]:
    return {name: {"primary verdict": str(entry) if isinstance(entry, NoResult)
                   else entry.primary_verdict} for name, entry in models.items()}


def v3_rows(loaded: LoadedModel, run: TrainingRun, method: MethodValues, progress: bool = False,
            n_resamples: int | None = None) -> tuple[list[Row], Entries | None]:
    """Run protocol v3 on the loaded trained model (``run``: its training record, read once by
    the pipeline; ``method``: the run's taxonomy, circuits and scores): its rows, and every
    registered model's entry (None where the rows hold no whole result: not computed)."""
    protocol = load_protocol_v3()
    model = loaded.model
    try:
        name = model_key(run)  # a trained run the protocol does not register is not judged
        data = v3_data(model.tokenizer, run, protocol)
    except (DataError, UnregisteredModel) as error:  # online: the held-out documents are absent
        return [Row(key, math.nan, f"not computed: {error}") for key in KEYS] + [
            Row("discovery_models_v3", _models(model_entries({})),
                "every model protocol v3 registers, none computed in this run (its documents "
                "are absent, or the model is not one it registers): each stored result "
                "(computed elsewhere, labelled so), or why it has none", show="records")], None
    result = evaluate_v3(model, run, protocol, data,
                         RunOptions(n_resamples, progress=progress), method=method, name=name)
    models = model_entries({name: result})
    cs = result.context_set
    rows = [
        Row("context_heads_v3", list(cs.heads),
            "protocol v3's context set: the taxonomy's contextual heads whose previous-token "
            f"share is below {protocol.previous_token_threshold:g} on the calibration text and "
            f"on the CAL windows (left out: "
            f"{cs.left_out_by_fix + cs.left_out_by_cal_windows or 'none'})"),
    ]
    if result.stopped:
        return rows + [Row("discovery_verdict_v3", PrimaryVerdict.NOT_TESTABLE, result.stopped),
                       Row("discovery_models_v3", _models(models), "every registered model",
                           show="records"),
                       Row(RESULT_KEY, models, "protocol v3's whole result", show="json")], models
    primary, truth = result.primary, result.truth
    return rows + [
        Row("activation_truth_neurons_v3", truth.n_truth,
            f"context neurons by activation on the CONFIRM documents: {truth.sentence()}"),
        Row("discovery_baselines_v3", baseline_records(primary),
            "the frequency-aware score and the four registered baselines against that truth: "
            "AUC and AUC(score) minus it, with paired 95% cluster-bootstrap intervals",
            show="records"),
        Row("discovery_verdict_v3", primary.label(),
            "protocol v3's primary verdict (confirmatory): does the score rank the context "
            "neurons above the best baseline (adds something, no difference shown, baseline "
            "better or not testable)?"),
        Row("discovery_secondary_v3", _secondary(result),
            "protocol v3's secondary verdicts: each score by the v2-style thresholds",
            show="records"),
        Row("discovery_models_v3", _models(models),
            "every model protocol v3 registers: a replication not trained is pending, "
            "one computed elsewhere is stored and labelled so",
            show="records"),
        Row(RESULT_KEY, models, "protocol v3's whole result, every model", show="json"),
    ], models


__all__ = ["KEYS", "RESULT_KEY", "v3_rows"]
