"""``python -m context_neurons v3``: protocol v3 on a trained model, its report on stdout.

The options (:func:`add_arguments`), the command line that reproduces a stored result
(:func:`command_line`) and the command itself (:func:`command`); the computation is
:func:`context_neurons.verdict.v3.run`. :func:`main` runs it alone (``python -m
context_neurons.commands.v3``), through the same error wrapper as ``python -m context_neurons``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

import torch

from context_neurons import config as settings
from context_neurons.checks import check_device, check_output_file, report_errors
from context_neurons.files import write_text_whole
from context_neurons.training.cli import DefaultsHelpFormatter, positive_int
from context_neurons.verdict.protocol import load_protocol_v3
from context_neurons.verdict.v3 import run, run_directory
from context_neurons.verdict.v3_report import report_lines
from context_neurons.verdict.v3_stored import entries_json

#: The command's name under ``python -m context_neurons``, and what its help says it does.
COMMAND = "v3"
DESCRIPTION = ("run protocol v3, the pre-registered confirmatory test of discovery, on a trained "
               "model and print its report")
#: The device the stored results were computed on and CI tests (``--device``'s default).
DEFAULT_DEVICE = "cpu"
DEFAULT_BATCH_SIZE = 8


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of ``python -m context_neurons v3`` added to ``parser``."""
    parser.add_argument("--model", default="trained",
                        help="'trained' (seed 0), 'trained-seed1' (the shipped replication) or "
                             "a trained run's directory (with its training.json)")
    parser.add_argument("--out", type=Path, default=None,
                        help="write the result as JSON to this file (its folder must exist)")
    parser.add_argument("--resamples", type=positive_int, default=None,
                        help=f"bootstrap resamples (default: the protocol's "
                             f"{load_protocol_v3().bootstrap.resamples})")
    parser.add_argument("--threads", type=positive_int, default=None,
                        help=f"torch threads (default: ${settings.THREADS.name}, else 2)")
    parser.add_argument("--batch-size", type=positive_int, default=DEFAULT_BATCH_SIZE,
                        help="windows per forward pass (8 is the fastest on one CPU core)")
    parser.add_argument("--device", choices=["cpu", "cuda", "auto"], default=DEFAULT_DEVICE,
                        help="where the model runs: cpu is the tested path, cuda a GPU, auto "
                             "CUDA when available, else CPU")
    parser.add_argument("--no-label-free", action="store_true",
                        help="leave out the exploratory label-free arm")
    parser.add_argument("--no-apart", action="store_true",
                        help="leave out step 0 and the planted control (timed apart)")
    parser.add_argument("--store", action="store_true",
                        help="write the result beside the model's weights (verdict-v3.json), where the "
                             "main job, chapter 8, the README and the first page read it, "
                             "labelled as stored")
    parser.add_argument("--no-progress", action="store_true", help="no progress messages")
    return parser


def command_line(args: argparse.Namespace, device: str, threads: int) -> str:
    """The command that computes the same result (what ``--store`` records): every option that
    changes it, with the device and thread count the run used."""
    words = ["python -m context_neurons", COMMAND, "--model", args.model]
    if args.resamples is not None:
        words += ["--resamples", str(args.resamples)]
    if args.batch_size != DEFAULT_BATCH_SIZE:
        words += ["--batch-size", str(args.batch_size)]
    words += [flag for flag, on in (("--no-label-free", args.no_label_free),
                                    ("--no-apart", args.no_apart), ("--store", args.store)) if on]
    if device != DEFAULT_DEVICE:
        words += ["--device", device]
    return " ".join(words + ["--threads", str(threads)])


def command(args: argparse.Namespace) -> int:
    """``python -m context_neurons v3``: the input checked before any work (the device, the
    threads, the model, the output file), a line on stderr when it starts, the report on
    stdout."""
    check_device(args.device)
    device = settings.resolve_device(args.device).type
    threads = args.threads or settings.threads()
    run_directory(args.model)
    out = check_output_file(args.out) if args.out else None
    torch.set_num_threads(threads)
    progress = not args.no_progress
    if progress:
        print(f"protocol v3 on {args.model} ({device}, {threads} torch threads): minutes on "
              "one core; each phase is named when it starts", file=sys.stderr, flush=True)
    with contextlib.redirect_stdout(sys.stderr):  # progress messages: stdout holds the report
        result = run(args.model, args.resamples, not args.no_label_free, not args.no_apart,
                     args.batch_size, store=command_line(args, device, threads) if args.store
                     else None, device=device, progress=progress)
    for name, entry in result["models"].items():
        print("\n".join(report_lines(name, entry)))
    if out:
        write_text_whole(out, json.dumps({**result, "models": entries_json(result["models"])},
                                         indent=1) + "\n")
        print(f"wrote {out}", file=sys.stderr)
    return 0


def parser() -> argparse.ArgumentParser:
    """The parser of ``python -m context_neurons v3`` on its own (:func:`main`'s)."""
    return add_arguments(argparse.ArgumentParser(
        prog=f"python -m context_neurons {COMMAND}", description=DESCRIPTION[0].upper()
        + DESCRIPTION[1:] + ".", formatter_class=DefaultsHelpFormatter))


def main(argv: list[str] | None = None) -> int:
    """``python -m context_neurons.commands.v3 ...``: the same command as ``python -m
    context_neurons v3 ...`` (the same options, checks, errors and exit statuses: both call
    :func:`command` through :func:`~context_neurons.checks.report_errors`)."""
    args = parser().parse_args(argv)
    return report_errors(lambda: command(args))


__all__ = ["COMMAND", "DEFAULT_BATCH_SIZE", "DEFAULT_DEVICE", "DESCRIPTION", "add_arguments",
           "command", "command_line", "main", "parser"]

if __name__ == "__main__":
    raise SystemExit(main())
