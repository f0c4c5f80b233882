"""The developmental view under the protocols: previous-token heads, contextual heads and the
truth at each checkpoint of a training run (added to its ``development.json``).

Protocol v1's view (:func:`structure`: the additive truth on its EVAL windows) and protocol v3's
(:func:`structure_v3`: the context set on the CAL windows, the point truth on the CONFIRM
windows). A row whose weights are not on disk keeps what it has: v3's columns computed earlier
(under the same protocol) stay, else they are ``None`` and the step is listed in the summary
(``v3_steps_without_weights``). A run v3 cannot compare (``v3_models.comparability``: other
corpus weights or held-out fraction) gets ``None`` everywhere and the reason
(``v3_not_computed``); any other problem with v3's documents (corpora not found, say) is an
error, and the file is left as it was.
The weights of a step are its checkpoint, the run's saved model for the last step, and the
initialised model (rebuilt from the run's configuration and seed) for step 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformer_lens.model_bridge import TransformerBridge

import context_neurons.verdict.statistics as st
from context_neurons.activations import head_statistics
from context_neurons.files import write_text_whole
from context_neurons.method import MethodValues
from context_neurons.models.loading import bridge_from_hf, load_checkpoint
from context_neurons.training.development import DEVELOPMENT_FILE
from context_neurons.training.summary import TrainingRun, training_run
from context_neurons.training.tokenizer import load_tokenizer
from context_neurons.verdict.data import eval_arrays, protocol_data
from context_neurons.verdict.evaluate import head_sets, measure, previous_token_heads
from context_neurons.verdict.protocol import ProtocolV1, ProtocolV3
from context_neurons.verdict.protocol import load_protocol, load_protocol_v3
from context_neurons.verdict.v3 import step0_model
from context_neurons.verdict.v3_data import V3Data, v3_data
from context_neurons.verdict.context_set import context_set
from context_neurons.verdict.v3_models import comparability
from context_neurons.verdict.truth import measure_v3, point_truth

#: The columns protocol v3 adds to a checkpoint's row.
V3_COLUMNS = ("v3_context_heads", "v3_truth")


def structure(model: TransformerBridge, data, protocol: ProtocolV1) -> dict:
    """Previous-token attention, head sets and the additive truth count of one model."""
    start = protocol.data.window_mean_start
    previous, previous_heads = previous_token_heads(model, data, start)
    sets, _ = head_sets(MethodValues(model))
    out = {
        "previous_token_attention": [round(float(x), 4) for x in previous],
        "previous_token_heads": previous_heads,
        "contextual_heads": sets["primary"],
        "non_local_heads": sets["secondary"],
        "additive_truth": None,
    }
    if sets["primary"]:
        measured = measure(model, data, {"primary": sets["primary"]}, start, resample=False)
        n_dom = len(measured.domains)
        truth = st.additive_truth(
            st.domain_shifts(measured.full, measured.domain_index, n_dom),
            st.domain_shifts(measured.ablated["primary"], measured.domain_index, n_dom),
            protocol.truth.min_cohens_d, protocol.truth.min_context_part)
        out["additive_truth"] = int(truth.mask.sum())
    return out


def structure_v3(model: TransformerBridge, data: V3Data, protocol: ProtocolV3,
                 batch_size: int = 8) -> dict:
    """Protocol v3's context set of one model and the size of its truth at the point (the
    evaluation's ``truth.n_truth`` without the bootstrap): ``None`` without a context set."""
    start = protocol.data.window_mean_start
    cal_windows = data.pooled_cal_windows
    cal = head_statistics(model, cal_windows, start, batch_size)
    heads = list(context_set(MethodValues(model), cal.previous_share, start,
                             protocol.previous_token_threshold).heads)
    out = {"v3_context_heads": heads, "v3_truth": None}
    if heads:
        measured = measure_v3(model, data, {"context": heads}, cal.mean_z, start, batch_size,
                              resample=False)
        truth = point_truth(measured, "context", protocol.truth.min_cohens_d,
                            protocol.truth.min_context_part)
        out["v3_truth"] = int(truth.mask.sum())
    return out


def checkpoint_directory(run_dir: Path, step: int, run: TrainingRun) -> Path:
    """Where the weights of ``step`` are saved: its checkpoint, else the run's saved model for
    the last step (the directory need not exist)."""
    directory = run_dir / "checkpoints" / f"step-{step}"
    if not directory.is_dir() and step == run.steps_done:
        directory = run_dir
    return directory


def model_at_step(run_dir: Path, step: int, run: TrainingRun, tokenizer) -> TransformerBridge | None:
    """The run's model at ``step``: its checkpoint, the saved model (last step), the initialised
    model (step 0), or None when those weights were not kept."""
    directory = checkpoint_directory(run_dir, step, run)
    if directory.is_dir():
        return bridge_from_hf(load_checkpoint(directory), tokenizer, "checkpoint", device="cpu")
    return step0_model(run, tokenizer) if step == 0 else None


def add_v3_view(run_dir: str | Path, progress: bool = True) -> Path:
    """Add :func:`structure_v3` to every checkpoint row of ``run_dir/development.json`` whose
    weights are on disk (:func:`model_at_step`); the others get ``None`` (module docstring)."""
    run_dir = Path(run_dir)
    protocol = load_protocol_v3()
    run = training_run(run_dir)
    tokenizer = load_tokenizer(run_dir)
    path = run_dir / DEVELOPMENT_FILE
    summary = json.loads(path.read_text())
    earlier = summary.get("protocol_v3") == protocol.name  # a view of this protocol is there
    summary.pop("v3_not_computed", None)
    reason = comparability(run)  # v3 reads the held-out documents of the registered corpora
    missing = []
    if reason:
        summary["v3_not_computed"] = f"protocol v3 cannot compare this run: {reason}"
        for row in summary["checkpoints"]:
            row.update(dict.fromkeys(V3_COLUMNS))
    else:
        data = v3_data(tokenizer, run, protocol)  # its DataErrors: raised, nothing written
        for row in tqdm(summary["checkpoints"], desc="checkpoints (v3)", disable=not progress):
            model = model_at_step(run_dir, int(row["step"]), run, tokenizer)
            if model is not None:
                row.update(structure_v3(model, data, protocol))
            elif not (earlier and row.get("v3_context_heads") is not None):  # else: kept
                missing.append(int(row["step"]))
                row.update(dict.fromkeys(V3_COLUMNS))
    summary["protocol_v3"] = protocol.name
    summary["v3_steps_without_weights"] = missing
    write_text_whole(path, json.dumps(summary, indent=1) + "\n")
    return path


def add_development_view(run_dir: str | Path, progress: bool = True) -> Path:
    """Add :func:`structure` to every checkpoint row of ``run_dir/development.json`` (the last
    step's row reads the run's saved model when no checkpoint directory holds it), then
    protocol v3's view (:func:`add_v3_view`)."""
    run_dir = Path(run_dir)
    protocol = load_protocol()
    run = training_run(run_dir)
    tokenizer = load_tokenizer(run_dir)
    data = protocol_data(tokenizer, run, protocol)
    path = run_dir / DEVELOPMENT_FILE
    summary = json.loads(path.read_text())
    rows = {int(row["step"]): row for row in summary["checkpoints"]}
    for step in tqdm(sorted(rows), desc="checkpoints", disable=not progress):
        directory = checkpoint_directory(run_dir, step, run)
        model = bridge_from_hf(load_checkpoint(directory), tokenizer, "checkpoint", device="cpu")
        rows[step].update(structure(model, data, protocol))
    summary["protocol"] = protocol.name
    summary["eval_windows"] = len(eval_arrays(data)[0])
    write_text_whole(path, json.dumps(summary, indent=1) + "\n")
    return add_v3_view(run_dir, progress)
