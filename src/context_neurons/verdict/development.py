"""The developmental view under the protocol: previous-token heads, contextual heads and the
additive truth at each checkpoint of a training run (added to its ``development.json``)."""

from __future__ import annotations

import json
from pathlib import Path

from tqdm.auto import tqdm
from transformer_lens.model_bridge import TransformerBridge

from context_neurons.files import write_text_whole
from context_neurons.method import MethodValues
from context_neurons.models.loading import bridge_from_hf, load_checkpoint
from context_neurons.training.development import DEVELOPMENT_FILE
from context_neurons.training.heldout import read_record
from context_neurons.training.tokenizer import load_tokenizer
from context_neurons.verdict import statistics as st
from context_neurons.verdict.data import eval_arrays, protocol_data
from context_neurons.verdict.evaluate import head_sets, measure, previous_token_heads
from context_neurons.verdict.protocol import Protocol, load_protocol


def structure(model: TransformerBridge, data, protocol: Protocol) -> dict:
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


def add_development_view(run_dir: str | Path, progress: bool = True) -> Path:
    """Add :func:`structure` to every checkpoint row of ``run_dir/development.json`` (the last
    step's row reads the run's saved model when no checkpoint directory holds it)."""
    run_dir = Path(run_dir)
    protocol = load_protocol()
    record = read_record(run_dir)
    tokenizer = load_tokenizer(run_dir)
    data = protocol_data(tokenizer, record, protocol)
    path = run_dir / DEVELOPMENT_FILE
    summary = json.loads(path.read_text())
    rows = {int(row["step"]): row for row in summary["checkpoints"]}
    for step in tqdm(sorted(rows), desc="checkpoints", disable=not progress):
        directory = run_dir / "checkpoints" / f"step-{step}"
        if not directory.is_dir() and step == record["steps_done"]:
            directory = run_dir
        model = bridge_from_hf(load_checkpoint(directory), tokenizer, "checkpoint", device="cpu")
        rows[step].update(structure(model, data, protocol))
    summary["protocol"] = protocol.name
    summary["eval_windows"] = len(eval_arrays(data)[0])
    write_text_whole(path, json.dumps(summary, indent=1) + "\n")
    return path
