"""Protocol v3's stored results: a replication's evaluation, written once by the v3 command beside
the model it judges, and read back only while the model and the protocol are the ones it was
computed from; and every registered model's entry (:func:`model_entries`): its result in this
run, else its stored result, else why it has none.

A registered replication (the seed-1 model) takes about four minutes of v3 on one core, too long
to run again on every page and in CI, so ``python -m context_neurons v3 --model DIR
--store`` writes ``DIR/verdict-v3.json``: the result and its provenance (the SHA-256 of the
weights, of the protocol and of its CONFIRM manifest, the command, the date, the versions and
threads). :func:`stored_entry` returns it marked ``stored`` (the chapters and the table say so),
or a sentence saying why it cannot be used. The primary model's (seed 0's) stored result is what
the README and the book's first page report (:mod:`context_neurons.reproduce.findings`); the main
job and chapter 8 evaluate seed 0 in the run, and their result takes its place there.

The model with GPT-2 Small's layer-0 shape is trained and evaluated on a lent GPU
(``scripts/device_jobs.sh`` step 2): its weights (107 MB in half precision) cannot come back
from that machine, so its directory keeps the run's records and the v3 result computed there
(``scripts/device_steps.py import-v3``), labelled with the device, and checked against the
protocol files only.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import platform
from dataclasses import replace
from pathlib import Path

import torch

from context_neurons.files import write_text_whole
from context_neurons.text.dataset import digest
from context_neurons.verdict.entries import NoResult, StaleStored
from context_neurons.verdict.protocol import PROTOCOL_V3_FILE, protocol_file
from context_neurons.verdict.comparison import PrimaryVerdict
from context_neurons.verdict.v3_data import CONFIRM_MANIFEST_FILE
from context_neurons.verdict.v3_models import V3_MODELS, primary_model, registered_model
from context_neurons.verdict.v3_models import v3_models
from context_neurons.verdict.v3_result import V3Evaluation

STORED_FILE = "verdict-v3.json"
#: The directory of each registered model whose weights stayed on the GPU that trained it (the
#: table :data:`~.v3_models.V3_MODELS`, read as a dict). Kept for chapter 8's stored notebook,
#: whose code cell reads it by this name; the code reads the table.
WEIGHTS_NOT_KEPT_DIRS = {m.name: m.directory for m in V3_MODELS if not m.weights_kept}


def _protocol_hashes() -> dict[str, str]:
    return {name: hashlib.sha256(protocol_file(name).read_bytes()).hexdigest()
            for name in (PROTOCOL_V3_FILE, CONFIRM_MANIFEST_FILE)}


def provenance(directory: Path) -> dict:
    """What a stored result was computed from: the weights' hash (None where the weights were
    not kept) and the protocol files' hashes."""
    weights = Path(directory) / "model.safetensors"
    return {"weights_sha256": digest(weights)[0] if weights.is_file() else None,
            "protocol_sha256": _protocol_hashes()}


def device_label(device: str, name: str | None = None) -> str:
    """How a stored result names where it was computed: ``cpu``, or ``cuda (<GPU name>)``."""
    return device if device == "cpu" or not name else f"{device} ({name})"


def store_result(directory: Path, name: str, entry: dict, command: str, threads: int,
                 computed: datetime.datetime | None = None, versions: dict | None = None,
                 device: str = "cpu") -> Path:
    """Write ``entry`` (one model's v3 result as JSON, :meth:`V3Evaluation.to_json`) and its
    provenance to ``directory/verdict-v3.json``, whole. ``computed``, ``versions`` and
    ``device`` default to now and this machine; a result computed elsewhere gives its own."""
    path = Path(directory) / STORED_FILE
    computed = computed or datetime.datetime.now(datetime.timezone.utc)
    record = {
        "model": name, "command": command,
        "computed": computed.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "versions": versions or {"python": platform.python_version(),
                                 "torch": torch.__version__},
        "threads": threads, "device": device, **provenance(directory), "result": entry,
    }
    write_text_whole(path, json.dumps(record, indent=1) + "\n")
    return path


def stored_entry(name: str) -> V3Evaluation | StaleStored | None:
    """A registered model's stored result with ``stored`` set (its provenance, less the
    result), why it is not used when the file is stale, or None when there is none."""
    model = registered_model(name)
    if model is None or not (model.directory / STORED_FILE).is_file():
        return None
    directory = model.directory
    record = json.loads((directory / STORED_FILE).read_text())
    now = provenance(directory)
    stale = [what for what in ("weights_sha256", "protocol_sha256") if record.get(what) != now[what]]
    if stale:
        return StaleStored(f"{' and '.join(s.split('_')[0] for s in stale)} changed since it "
                           f"was computed; rerun `{record.get('command')}`")
    return replace(V3Evaluation.from_json(record["result"]),
                   stored={k: v for k, v in record.items() if k != "result"})


def stored_words(entry: V3Evaluation) -> str:
    """How a stored result is labelled wherever it is shown."""
    stored = entry.stored
    device = stored.get("device", "cpu")
    where = "" if device == "cpu" else f", on {device}"
    kept = "; its weights were not kept" if stored.get("weights_sha256", "") is None else ""
    return (f"stored result, not computed in this run: `{stored['command']}` on "
            f"{stored['computed']} ({stored['threads']} thread(s), torch "
            f"{stored['versions']['torch']}{where}){kept}")


#: Every registered model's entry: its result, or why it has none (:mod:`.entries`).
Entries = dict[str, "V3Evaluation | NoResult"]


def model_entries(results: Entries) -> Entries:
    """Every registered model: its result in this run, else its stored result (``stored``
    set, :mod:`.v3_stored`), else why it has none (never left out), with ``replicates`` set
    on a replication's result when seed 0 was evaluated in this run and neither primary
    verdict is 'not testable' (such a model can neither replicate nor contradict seed 0)."""
    out: Entries = {}
    primary = primary_model().name
    seed0 = results.get(primary)
    seed0_primary = seed0.primary if isinstance(seed0, V3Evaluation) else None
    for model in v3_models():
        name = model.name
        entry = results.get(name) or stored_entry(name)
        if entry is None:
            out[name] = model.without_result()
            continue
        if isinstance(entry, V3Evaluation) and name != primary and entry.primary \
                and seed0_primary and PrimaryVerdict.NOT_TESTABLE not in (
                    entry.primary.verdict, seed0_primary.verdict):
            entry = replace(entry, replicates=entry.primary.verdict == seed0_primary.verdict)
        out[name] = entry
    return out


def entries_json(models: Entries) -> dict[str, dict | str]:
    """:func:`model_entries`' value as JSON."""
    return {name: entry.to_json() for name, entry in models.items()}


__all__ = ["Entries", "STORED_FILE", "WEIGHTS_NOT_KEPT_DIRS", "entries_json", "model_entries",
           "device_label", "provenance", "store_result", "stored_entry", "stored_words"]
