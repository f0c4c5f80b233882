"""The developmental view: how kernels, head groups and context neurons appear during training.

For each checkpoint a training run saved (``checkpoints/step-N``, log-spaced steps), the method's
own analyses are run as on any model: the head taxonomy (chapter 2: each head's kernel width
``n_eff``, content spread and group), discovery from the weights (chapter 5: neurons with
``top[j] >= theta`` when the taxonomy finds a contextual head), and the truth from activations on the
run's held-out text (:mod:`context_neurons.activations`: neurons that separate a domain, and those
whose separation the contextual heads carry). The summary is small JSON (``development.json``),
stored with the shipped model so a chapter can draw it without the checkpoints.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd
import torch
from tqdm.auto import tqdm

from context_neurons.activations import activation_truth
from context_neurons.circuit import build_circuit
from context_neurons.discovery import THETA, score_neurons
from context_neurons.models.loading import bridge_from_hf, load_checkpoint
from context_neurons.taxonomy import classify_heads
from context_neurons.training.heldout import labelled_windows
from context_neurons.training.summary import training_run
from context_neurons.training.tokenizer import load_tokenizer

#: The summary's file name, beside the run's ``training.json``.
DEVELOPMENT_FILE = "development.json"
#: The neuron counts of :func:`checkpoint_table`, and what they are (for a caption).
CHECKPOINT_COUNTS = ("sep. (old)", "act. (old)", "additive", "found")
CHECKPOINT_COLUMNS = ("sep. (old): separating a domain; act. (old): context neurons by the old "
                      "rule; additive: the additive truth of protocol v1; found: top[j] at theta")


def _listed(values, empty: str) -> str:
    """Head (or step) numbers as "1, 6, 7", ``empty`` for none."""
    return ", ".join(map(str, values)) or empty


def checkpoint_table(development: dict) -> pd.DataFrame:
    """One row per checkpoint of ``development.json`` (index: tokens seen): held-out loss,
    contextual and previous-token heads ("-" for none), and :data:`CHECKPOINT_COUNTS`
    (None where the checkpoint's row lacks the additive truth)."""
    heads = lambda values: _listed(values, "-")  # noqa: E731
    return pd.DataFrame([{
        "tokens": f"{r['tokens']:,}", "loss": r["heldout_loss"],
        "contextual": heads(r["contextual_heads"]),
        "prev.-token": heads(r.get("previous_token_heads", [])),
        "sep. (old)": r["separating_neurons"], "act. (old)": r["context_neurons_by_activation"],
        "additive": r.get("additive_truth"), "found": r["neurons_found"],
    } for r in development["checkpoints"]]).set_index("tokens")


#: What protocol v3's columns say where they hold no count.
WEIGHTS_NOT_KEPT, NO_CONTEXT_SET = "weights not kept", "no context set"
NOT_COMPUTED = "not computed: v3 cannot compare this run"


def v3_checkpoint_table(developments: dict[str, dict]) -> pd.DataFrame:
    """Protocol v3's view of each checkpoint of each run (``developments``: a label, such as
    "seed 0", to its ``development.json``), one row per run and checkpoint: the context set and
    the size of the truth, or why there is none (:data:`WEIGHTS_NOT_KEPT`, the summary's
    ``v3_steps_without_weights``; :data:`NO_CONTEXT_SET`; :data:`NOT_COMPUTED` for a run v3
    cannot read, whose reason is the file's ``v3_not_computed``). A file without v3's view is an
    error: ``python -m context_neurons development RUN_DIR --v3-only`` adds it."""
    rows = []
    for label, development in developments.items():
        if "v3_steps_without_weights" not in development:
            raise ValueError(f"{label}: development.json has no protocol v3 view; add it with "
                             "python -m context_neurons development RUN_DIR --v3-only")
        missing = set(development["v3_steps_without_weights"])
        for r in development["checkpoints"]:
            heads = r["v3_context_heads"]
            context = (NOT_COMPUTED if development.get("v3_not_computed")
                       else WEIGHTS_NOT_KEPT if r["step"] in missing
                       else _listed(heads, NO_CONTEXT_SET))
            truth = r["v3_truth"] if r["v3_truth"] is not None else "-"
            rows.append({"run": label, "tokens": f"{r['tokens']:,}", "v3 context set": context,
                         "v3 truth": truth})
    return pd.DataFrame(rows).set_index(["run", "tokens"])


def development_findings(development: dict) -> list[str]:
    """The development in two sentences: when contextual heads first appear (tokens seen,
    which heads), and the last checkpoint's contextual heads with those of them that are
    previous-token heads (so files written before and after chapter 2's rule read alike), its
    held-out loss and the additive truth's size; and protocol v3's context set and truth at the
    end, where the file has v3's view."""
    rows = development["checkpoints"]
    first = next((r for r in rows if r["contextual_heads"]), None)
    heads = lambda values: _listed(values, "none")  # noqa: E731
    out = [f"contextual heads first at {first['tokens']:,} tokens "
           f"({heads(first['contextual_heads'])})" if first
           else "no checkpoint has a contextual head"]
    last = rows[-1]
    local = sorted(set(last["contextual_heads"]) & set(last.get("previous_token_heads", [])))
    out.append(f"at the end ({last['tokens']:,} tokens): contextual heads "
               f"{heads(last['contextual_heads'])}, of which previous-token {heads(local)}; "
               f"previous-token heads {heads(last.get('previous_token_heads', []))}; held-out "
               f"loss {last['heldout_loss']:.3f}; additive truth {last.get('additive_truth')} "
               f"neurons")
    if development.get("v3_not_computed"):
        out.append(f"protocol v3 not computed: {development['v3_not_computed']}")
    elif "v3_steps_without_weights" in development:
        context = last["v3_context_heads"]
        text = ("protocol v3 at the end: " + (
            WEIGHTS_NOT_KEPT if context is None else NO_CONTEXT_SET if not context
            else f"context set {heads(context)}, truth {last['v3_truth']} neurons"))
        missing = development["v3_steps_without_weights"]
        out.append(text + (f"; weights not kept at steps {heads(missing)}" if missing else ""))
    return out


def _step(path: Path) -> int:
    return int(path.name.removeprefix("step-"))


def heldout_loss_by_step(run_dir: Path) -> dict[int, float]:
    """Mean held-out loss at each checkpoint step (``heldout.csv``, rows of corpus ``mean``)."""
    losses = {}
    with (run_dir / "heldout.csv").open() as handle:
        for row in csv.DictReader(handle):
            if row["corpus"] == "mean":
                losses[int(row["step"])] = float(row["loss"])
    return losses


@torch.no_grad()
def summarize_checkpoint(model, windows, labels, theta: float = THETA) -> dict:
    """Taxonomy, discovery and activation truth of one model (a checkpoint) as plain values."""
    taxonomy = classify_heads(model)
    table = taxonomy.table()
    heads = sorted(taxonomy.groups["contextual"])
    summary = {
        "heads": [
            {"head": int(h), "n_eff": round(float(row["n_eff"]), 2),
             "content_sd": round(float(row["content sd"]), 3), "kernel": row["kernel"],
             "group": row["group"]}
            for h, row in table.iterrows()
        ],
        "contextual_heads": heads,
        "neurons_found": None,
        "separating_neurons": None,
        "context_neurons_by_activation": None,
    }
    if heads:
        scores = score_neurons(build_circuit(model, "prose", heads), model)
        truth = activation_truth(model, windows, labels, heads)
        summary.update(
            neurons_found=len(scores.found(theta)),
            separating_neurons=len(truth.separating_neurons()),
            context_neurons_by_activation=len(truth.context_neurons()),
        )
    return summary


def summarize_run(run_dir: str | Path, progress: bool = True) -> Path:
    """Summarise every checkpoint of a run into ``run_dir/development.json``; returns its path."""
    run_dir = Path(run_dir)
    run = training_run(run_dir)
    tokenizer = load_tokenizer(run_dir)
    windows, labels = labelled_windows(tokenizer, run)
    losses = heldout_loss_by_step(run_dir)
    checkpoints = sorted((run_dir / "checkpoints").glob("step-*"), key=_step)
    if not checkpoints:
        raise FileNotFoundError(f"No checkpoints in {run_dir / 'checkpoints'}: train with them.")
    rows = []
    for path in tqdm(checkpoints, desc="checkpoints", disable=not progress):
        model = bridge_from_hf(load_checkpoint(path), tokenizer, "checkpoint", device="cpu")
        step = _step(path)
        rows.append({"step": step, "tokens": step * run.tokens_per_step,
                     "heldout_loss": losses.get(step),
                     **summarize_checkpoint(model, windows, labels)})
    out = run_dir / DEVELOPMENT_FILE
    out.write_text(json.dumps({"theta": THETA, "heldout_windows": len(windows),
                               "checkpoints": rows}, indent=1) + "\n")
    return out
