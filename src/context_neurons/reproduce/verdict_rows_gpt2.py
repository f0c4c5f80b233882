"""The main job's rows of protocol discovery-verdict-gpt2 (issue 52), for a model of the GPT-2
family (``reproduce --model gpt2``, and medium, large, xl).

Keys: ``discovery_verdict_gpt2`` (the primary comparison's verdict), ``paper_claim_gpt2`` (the
paper's claim's answer), ``context_heads_gpt2``, ``activation_truth_neurons_gpt2``,
``discovery_baselines_gpt2``, ``planted_control_gpt2`` (the planted control: when it fails,
every verdict of the run is void) and ``discovery_models_gpt2`` (every registered model: this run's,
or why it has none); the whole result goes to the JSON as :data:`RESULT_KEY` and comes back typed
beside the rows. Without the corpora: one row, the protocol's line (``when_corpora_absent``),
never nothing.
"""

from __future__ import annotations

from context_neurons.models.loading import LoadedModel
from context_neurons.method import MethodValues
from context_neurons.reproduce.results import NOT_COMPUTED, Row
from context_neurons.verdict.gpt2 import gpt2_entry
from context_neurons.verdict.gpt2_data import CorporaAbsent
from context_neurons.verdict.gpt2_protocol import load_protocol_gpt2
from context_neurons.verdict.gpt2_result import GPT2Evaluation, model_identity
from context_neurons.verdict.comparison import PrimaryVerdict
from context_neurons.verdict.registry import registered
from context_neurons.verdict.v3_report import baseline_records

#: The row holding the whole result.
RESULT_KEY = registered("gpt2").result_key
VERDICT_KEY = "discovery_verdict_gpt2"


def models_record(name: str, entry: GPT2Evaluation | CorporaAbsent) -> dict[str, dict[str, str]]:
    """Every model the protocol registers: this run's entry, or why it has none."""
    out = {}
    for model in load_protocol_gpt2().models:
        if model != name:
            why = (f"not computed here: this run computes {name} only (python -m "
                   f"context_neurons reproduce --model {model})")
        elif isinstance(entry, CorporaAbsent):
            why = entry.line()
        elif not entry.identity.is_gpt2_result:
            why = f"not computed here: {entry.identity.label}"
        else:
            why = f"this run: {entry.primary_verdict}; paper's claim: {entry.claim_answer}"
        out[model] = {"entry": why}
    return out


def planted_status(entry: GPT2Evaluation) -> str:
    """The planted control in a word: it passes, fails (the run's verdicts are void) or did not
    run."""
    if entry.planted is None:
        return "not run"
    return "fails: verdicts void" if entry.void else "passes"


def gpt2_rows(loaded: LoadedModel, method: MethodValues | None, progress: bool = False,
              n_resamples: int | None = None) -> tuple[list[Row], GPT2Evaluation | None]:
    """The protocol's rows for a GPT-2-family model (none for another model), and its whole
    result (None where the rows hold none: the corpora absent, or another model)."""
    protocol = load_protocol_gpt2()
    if loaded.name not in protocol.models:
        return [], None
    identity = model_identity(loaded.name, loaded.source, protocol)
    entry = gpt2_entry(loaded.model, identity, method, progress, n_resamples)
    models = Row("discovery_models_gpt2", models_record(loaded.name, entry),
                 "every model discovery-verdict-gpt2 registers", show="records")
    if isinstance(entry, CorporaAbsent):
        return [Row(VERDICT_KEY, NOT_COMPUTED, entry.line()), models], None
    core, name = entry.core, identity.label
    rows = [Row("context_heads_gpt2", list(core.context_set.heads),
                f"discovery-verdict-gpt2's context set on {name}: {entry.heads_words()}")]
    if core.stopped:
        return rows + [Row(VERDICT_KEY, PrimaryVerdict.NOT_TESTABLE, core.stopped), models,
                       Row(RESULT_KEY, entry, "the protocol's whole result", show="json")], entry
    return rows + [
        Row("activation_truth_neurons_gpt2", core.truth.n_truth,
            f"context neurons by activation on the CONFIRM documents ({name}): "
            f"{core.truth.sentence()}"),
        Row("discovery_baselines_gpt2", baseline_records(core.primary),
            f"{name}: the frequency-aware score and the four registered baselines against that "
            "truth: AUC and AUC(score) minus it, with paired 95% cluster-bootstrap intervals",
            show="records"),
        Row(VERDICT_KEY, core.primary.label(), entry.primary_sentence()),
        Row("paper_claim_gpt2", entry.claim_answer, entry.claim_sentence()),
        Row("planted_control_gpt2", planted_status(entry), entry.planted_sentence()),
        models,
        Row(RESULT_KEY, entry, "the protocol's whole result", show="json"),
    ], entry


__all__ = ["RESULT_KEY", "VERDICT_KEY", "gpt2_rows", "models_record", "planted_status"]
