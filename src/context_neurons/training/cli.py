"""Command line of the training run: ``python -m context_neurons train`` (or
``python -m context_neurons.training``), and ``... analyze RUN_DIR`` for the structure checks."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from context_neurons.checks import ContextNeuronsError
from context_neurons.training.analysis import main as analyze_main
from context_neurons.training.config import (
    _FIELD_FLAGS,
    CORPUS_WEIGHTS,
    MAX_SEED,
    SIZES,
    TrainConfig,
)
from context_neurons.training.loop import train


#: Help of the options that map onto :class:`TrainConfig` fields one to one (after --minutes).
FIELD_HELP: dict[str, str] = {
    "n_layer": "transformer blocks (default: the size's)",
    "d_model": "residual stream width; a multiple of --n-head (default: the size's)",
    "n_head": "attention heads per block (default: the size's)",
    "d_mlp": "MLP hidden width (default: the size's)",
    "n_ctx": "context length in tokens (default: the size's)",
    "batch_size": "windows per step (default: the size's)",
    "dropout": "dropout probability in [0, 1)",
    "vocab_size": "size of the byte-level BPE trained for the run (at least 258)",
    "tokenizer": "reuse a tokenizer instead of training one: a saved tokenizer directory "
                 "(tokenizer.json), or GPT-2's vocab.json and merges.txt (shared/gpt2-tokenizer)",
    "tokenizer_chars_per_corpus": "characters of each corpus the tokenizer is trained on",
    "heldout_fraction": "fraction of each corpus's documents held out, in (0, 1)",
    "lr": "peak learning rate (AdamW)",
    "min_lr_ratio": "the cosine schedule decays to this fraction of --lr",
    "warmup_steps": "linear warm-up steps",
    "weight_decay": "AdamW weight decay of the blocks' weight matrices",
    "beta1": "AdamW beta1, in [0, 1)",
    "beta2": "AdamW beta2, in [0, 1)",
    "grad_clip": "gradient-norm clipping",
    "n_checkpoints": "0: checkpoints at steps 0, 1, 2, 4, 8, ... and the last; k: about k "
                     "log-spaced steps",
    "eval_windows": "held-out windows per corpus for the final losses",
    "eval_windows_checkpoint": "held-out windows per corpus at each checkpoint",
    "stop_after_steps": "stop after this many steps, keeping the schedule of the whole budget "
                        "(--resume continues the run)",
    "resume_every": "save the state --resume continues from every this many steps "
                    "(OUT/resume.pt, removed when the run finishes)",
}


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Each option's default after its help, unless the help already says it or there is none
    (as ``argparse.ArgumentDefaultsHelpFormatter``, without ``default: None``)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if ("default" in text or not action.option_strings
                or action.default is None or action.default is False
                or action.default in ("", [], argparse.SUPPRESS)):
            return text
        return text + " (default: %(default)s)"


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {kind.__name__}, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value
    parse.__name__ = f"positive {kind.__name__}"
    return parse


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def seed_int(text: str) -> int:
    """An argparse type: a seed in 0..MAX_SEED (NumPy's and torch's generators are 32-bit)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be in 0..{MAX_SEED}, got {text}")
    return value


def _weight(text: str) -> tuple[str, float]:
    corpus, sep, value = text.partition("=")
    if not sep or not corpus:
        raise argparse.ArgumentTypeError(f"expected CORPUS=WEIGHT, got {text!r}")
    try:
        return corpus, float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"the weight of {corpus} must be a number, got "
                                         f"{value!r}") from None


def _weights(text: str) -> dict[str, float]:
    return dict(_weight(part) for part in text.split(",") if part)


def build_parser() -> argparse.ArgumentParser:
    size = SIZES["default"]
    parser = argparse.ArgumentParser(
        prog="python -m context_neurons train", formatter_class=DefaultsHelpFormatter,
        description="Train a small GPT-2-architecture model (and its own 8k byte-level BPE) from "
                    "scratch on the offline corpora. The default size trains "
                    f"{size.tokens / 1e6:g}M tokens, about 18 minutes on 2 CPU cores. An "
                    "interrupted run continues with the same command and --resume.")
    defaults = TrainConfig()
    parser.add_argument("--out", default=defaults.out,
                        help="output directory: new or empty, unless --resume or --overwrite")
    state = parser.add_mutually_exclusive_group()
    state.add_argument("--resume", action="store_true",
                       help="continue the interrupted run in --out from its last saved state "
                            "(the same weights as a run without the interruption)")
    state.add_argument("--overwrite", action="store_true",
                       help="replace the run in --out (its files and checkpoints are removed)")
    parser.add_argument("--corpora", default="",
                        help="corpora directory (default: $CONTEXT_NEURONS_CORPORA, else "
                             "../shared/corpora beside the repository)")
    parser.add_argument("--size", choices=sorted(SIZES), default=defaults.size,
                        help=f"default: {size.tokens / 1e6:g}M tokens, about 18 minutes on 2 CPU "
                             f"cores; large: {SIZES['large'].tokens / 1e6:g}M tokens, for a GPU")
    parser.add_argument("--seed", type=seed_int, default=defaults.seed,
                        help=f"seed of the initialisation and the data order, 0..{MAX_SEED}")
    parser.add_argument("--threads", type=_positive(int), default=defaults.threads,
                        help="torch threads (the loss log is reproducible for a thread count)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default=defaults.device,
                        help="auto: CUDA when available, else CPU")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--tokens", type=_positive(int), default=None,
                        help="training tokens (default: the size's budget); deterministic")
    budget.add_argument("--minutes", type=_positive(float), default=None,
                        help="time budget, turned into --tokens after timing a few steps "
                             "(training.json records the --tokens that reproduces the run)")
    for flag, name, kind in _FIELD_FLAGS[8:]:
        parser.add_argument(flag, type=kind, default=getattr(defaults, name),
                            help=FIELD_HELP[name])
    parser.add_argument("--weights", type=_weights, default=None, metavar="C1=W1,C2=W2,...",
                        help="the whole corpus mixture (replaces the default weights)")
    parser.add_argument("--weight", type=_weight, action="append", default=[],
                        metavar="CORPUS=W", help="override one corpus's mixture weight")
    parser.add_argument("--no-checkpoints", action="store_true",
                        help="save no checkpoints under OUT/checkpoints/")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--no-verify", action="store_true",
                        help="train on corpora that differ from the dataset's checksums "
                             "(assets/corpora.json), deliberately; the record says so")
    return parser


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    values = {name: getattr(args, name) for _, name, _ in _FIELD_FLAGS}
    weights = dict(args.weights if args.weights is not None else CORPUS_WEIGHTS)
    for corpus, value in args.weight:
        weights[corpus] = value
    return TrainConfig(**values, corpus_weights=weights,
                       save_checkpoints=not args.no_checkpoints, progress=not args.no_progress)


def main(argv: list[str] | None = None) -> int:
    """``train [options]`` (the default) or ``analyze RUN_DIR [--corpora DIR]``. The package's
    own errors are one line, ``error: ...`` on stderr, with exit status 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "analyze":
        return analyze_main(argv[1:])
    if argv and argv[0] == "train":
        argv = argv[1:]
    args = build_parser().parse_args(argv)
    try:
        out = train(config_from_args(args), resume=args.resume, overwrite=args.overwrite,
                    verify=not args.no_verify)
    except ContextNeuronsError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"interrupted: the run in {args.out} is incomplete; continue it with the same "
              "command and --resume.", file=sys.stderr)
        return 130
    record = json.loads((Path(out) / "training.json").read_text())
    print(json.dumps({k: record[k] for k in ("tokens_seen", "wall_seconds", "tokens_per_second",
                                             "heldout_loss", "command")}, indent=1))
    return 0
