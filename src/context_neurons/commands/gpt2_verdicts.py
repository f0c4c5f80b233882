"""``python -m context_neurons gpt2-verdicts FILE [FILE ...]``: protocol discovery-verdict-gpt2's
verdicts of several models side by side, read from the main job's JSON files (``reproduce
--model gpt2 --out gpt2.json``, and the same for gpt2-medium, gpt2-large and gpt2-xl).

Each file's whole result (the row :data:`~context_neurons.reproduce.verdict_rows_gpt2.RESULT_KEY`)
comes back typed (:meth:`~context_neurons.verdict.gpt2_result.GPT2Evaluation.from_json`); every
replication's verdicts then say whether they replicate gpt2's
(:func:`~context_neurons.verdict.gpt2_result.replication_lines`), never pooled with them. Nothing
is computed here.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from context_neurons.checks import InputError
from context_neurons.reproduce.verdict_rows_gpt2 import RESULT_KEY, VERDICT_KEY
from context_neurons.verdict.gpt2_protocol import load_protocol_gpt2
from context_neurons.verdict.gpt2_result import GPT2Evaluation, replication_lines

COMMAND = "gpt2-verdicts"
DESCRIPTION = ("print discovery-verdict-gpt2's verdicts of several GPT-2 models side by side "
               "(replications marked), from main-job JSON files written by reproduce --out")


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE",
                        help="a main job's JSON (python -m context_neurons reproduce --model "
                             "gpt2 --out gpt2.json), one per model")
    return parser


def read_result(path: Path) -> GPT2Evaluation:
    """The protocol's whole result from a main job's JSON, or an :class:`InputError` saying
    why the file holds none."""
    if not path.is_file():
        raise InputError(f"{path} does not exist: write it with python -m context_neurons "
                         "reproduce --model gpt2 --out FILE.")
    data = json.loads(path.read_text())
    if data.get(RESULT_KEY) is None:
        why = data.get("labels", {}).get(VERDICT_KEY) or (
            f"its model ({data.get('model')}) is not of the GPT-2 family")
        raise InputError(f"{path} holds no discovery-verdict-gpt2 result: {why}")
    return GPT2Evaluation.from_json(data[RESULT_KEY])


def results_by_model(paths: list[Path]) -> dict[str, GPT2Evaluation]:
    """Each file's result by the model it was asked for; one file per model."""
    out: dict[str, GPT2Evaluation] = {}
    for path in paths:
        result = read_result(path)
        name = result.identity.requested
        if name in out:
            raise InputError(f"Two files hold {name}'s result: give one per model.")
        out[name] = result
    return out


def command(args: argparse.Namespace) -> int:
    for line in replication_lines(results_by_model(args.files), load_protocol_gpt2()):
        print(line)
    return 0


__all__ = ["COMMAND", "DESCRIPTION", "add_arguments", "command", "read_result",
           "results_by_model"]
