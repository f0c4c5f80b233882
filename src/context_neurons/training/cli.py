"""Command line of the training run: ``python -m context_neurons train`` (or
``python -m context_neurons.training``), and ``... analyze RUN_DIR`` for the structure checks."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from context_neurons.training.analysis import main as analyze_main
from context_neurons.training.config import (
    _FIELD_FLAGS,
    CORPUS_WEIGHTS,
    SIZES,
    TrainConfig,
)
from context_neurons.training.loop import train


def _positive(kind):
    def parse(text: str):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value
    return parse


def _weight(text: str) -> tuple[str, float]:
    corpus, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected CORPUS=WEIGHT, got {text!r}")
    return corpus, float(value)


def _weights(text: str) -> dict[str, float]:
    return dict(_weight(part) for part in text.split(",") if part)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m context_neurons train",
        description="Train a small GPT-2-architecture model (and its own 8k byte-level BPE) from "
                    "scratch on the offline corpora.")
    defaults = TrainConfig()
    parser.add_argument("--out", default=defaults.out, help="output directory")
    parser.add_argument("--corpora", default="",
                        help="corpora directory (default: $CONTEXT_NEURONS_CORPORA, else "
                             "../shared/corpora beside the repository)")
    parser.add_argument("--size", choices=sorted(SIZES), default=defaults.size,
                        help="default: about 30 min on 2 CPU cores; large: for a GPU")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--threads", type=_positive(int), default=defaults.threads)
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default=defaults.device)
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--tokens", type=_positive(int), default=None,
                        help="training tokens (default: the size's budget); deterministic")
    budget.add_argument("--minutes", type=_positive(float), default=None,
                        help="time budget, turned into --tokens after timing a few steps "
                             "(training.json records the --tokens that reproduces the run)")
    for flag, name, kind in _FIELD_FLAGS[8:]:
        parser.add_argument(flag, type=kind, default=getattr(defaults, name))
    parser.add_argument("--weights", type=_weights, default=None, metavar="C1=W1,C2=W2,...",
                        help="the whole corpus mixture (replaces the default weights)")
    parser.add_argument("--weight", type=_weight, action="append", default=[],
                        metavar="CORPUS=W", help="override one corpus's mixture weight")
    parser.add_argument("--no-checkpoints", action="store_true")
    parser.add_argument("--no-progress", action="store_true")
    return parser


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    values = {name: getattr(args, name) for _, name, _ in _FIELD_FLAGS}
    weights = dict(args.weights if args.weights is not None else CORPUS_WEIGHTS)
    for corpus, value in args.weight:
        weights[corpus] = value
    return TrainConfig(**values, corpus_weights=weights,
                       save_checkpoints=not args.no_checkpoints, progress=not args.no_progress)


def main(argv: list[str] | None = None) -> int:
    """``train [options]`` (the default) or ``analyze RUN_DIR [--corpora DIR]``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "analyze":
        return analyze_main(argv[1:])
    if argv and argv[0] == "train":
        argv = argv[1:]
    args = build_parser().parse_args(argv)
    out = train(config_from_args(args))
    record = json.loads((Path(out) / "training.json").read_text())
    print(json.dumps({k: record[k] for k in ("tokens_seen", "wall_seconds", "tokens_per_second",
                                             "heldout_loss", "command")}, indent=1))
    return 0
