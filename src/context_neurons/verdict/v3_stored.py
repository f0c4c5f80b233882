"""Protocol v3's stored results: a replication's evaluation, written once by the v3 command beside
the model it judges, and read back only while the model and the protocol are the ones it was
computed from.

A registered replication (the seed-1 model) takes about four minutes of v3 on one core, too long
to run again on every page and in CI, so ``python -m context_neurons.verdict.v3 --model DIR
--store`` writes ``DIR/verdict-v3.json``: the result and its provenance (the SHA-256 of the
weights, of the protocol and of its CONFIRM manifest, the command, the date, the versions and
threads). :func:`stored_entry` returns it marked ``stored`` (the chapters and the table say so),
or a sentence saying why it cannot be used. The primary model (seed 0) is never read from here:
the main job evaluates it in the run.
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
from context_neurons.models.loading import TRAINED_DIR, TRAINED_SEED1_DIR
from context_neurons.text.dataset import digest
from context_neurons.verdict.protocol import PROTOCOL_V3_FILE, protocol_file
from context_neurons.verdict.v3_data import CONFIRM_MANIFEST_FILE
from context_neurons.verdict.v3_result import V3Evaluation

STORED_FILE = "verdict-v3.json"
#: The directory of each registered model that exists in the package (protocol ``models``).
REGISTERED_DIRS = {"trained-seed0": TRAINED_DIR, "trained-seed1": TRAINED_SEED1_DIR}
#: Why a registered model has no result yet, beyond "not trained" (protocol ``models.rule``).
PENDING_WHY = {
    "gpt2-layer0-shape": "pending: not evaluated (trained once on a lent GPU, 5.5M tokens, with "
                         "no contextual head; its 107 MB of weights stayed on that machine: "
                         "scripts/device_jobs.sh)",
}


def _protocol_hashes() -> dict[str, str]:
    return {name: hashlib.sha256(protocol_file(name).read_bytes()).hexdigest()
            for name in (PROTOCOL_V3_FILE, CONFIRM_MANIFEST_FILE)}


def provenance(directory: Path) -> dict:
    """What a stored result was computed from: the weights' and the protocol files' hashes."""
    return {"weights_sha256": digest(Path(directory) / "model.safetensors")[0],
            "protocol_sha256": _protocol_hashes()}


def store_result(directory: Path, name: str, entry: dict, command: str, threads: int) -> Path:
    """Write ``entry`` (one model's v3 result as JSON, :meth:`V3Evaluation.to_json`) and its provenance to
    ``directory/verdict-v3.json``, whole."""
    path = Path(directory) / STORED_FILE
    record = {
        "model": name, "command": command,
        "computed": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "versions": {"python": platform.python_version(), "torch": torch.__version__},
        "threads": threads, **provenance(directory), "result": entry,
    }
    write_text_whole(path, json.dumps(record, indent=1) + "\n")
    return path


def stored_entry(name: str) -> V3Evaluation | str | None:
    """A registered model's stored result with ``stored`` set (its provenance, less the
    result), a sentence when the file is stale, or None when there is none."""
    directory = REGISTERED_DIRS.get(name)
    if directory is None or not (directory / STORED_FILE).is_file():
        return None
    record = json.loads((directory / STORED_FILE).read_text())
    now = provenance(directory)
    stale = [what for what in ("weights_sha256", "protocol_sha256") if record.get(what) != now[what]]
    if stale:
        return (f"stored result not used: {' and '.join(s.split('_')[0] for s in stale)} changed "
                f"since it was computed; rerun `{record.get('command')}`")
    return replace(V3Evaluation.from_json(record["result"]),
                   stored={k: v for k, v in record.items() if k != "result"})


def stored_words(entry: V3Evaluation) -> str:
    """How a stored result is labelled wherever it is shown."""
    stored = entry.stored
    return (f"stored result, not computed in this run: `{stored['command']}` on "
            f"{stored['computed']} ({stored['threads']} thread(s), torch "
            f"{stored['versions']['torch']})")


__all__ = ["PENDING_WHY", "REGISTERED_DIRS", "STORED_FILE", "provenance", "store_result",
           "stored_entry", "stored_words"]
