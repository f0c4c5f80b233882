"""``python -m context_neurons development RUN_DIR [--v3-only]``: add protocols v1's and v3's
views to a training run's ``development.json`` (the computation is
:mod:`context_neurons.verdict.development`)."""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from context_neurons import config as settings
from context_neurons.verdict.development import add_development_view, add_v3_view

COMMAND = "development"
DESCRIPTION = ("add protocols v1's and v3's views (heads and truth at each checkpoint) to a "
               "training run's development.json")


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of ``python -m context_neurons development``."""
    parser.add_argument("run_dir", type=Path, help="a training run (its training.json and "
                        "development.json)")
    parser.add_argument("--v3-only", action="store_true", help="add protocol v3's columns "
                        "only, keeping the rest (runs whose checkpoints were not kept)")
    return parser


def command(args: argparse.Namespace) -> int:
    """Run the command: the file is rewritten whole, or left as it was on an error."""
    torch.set_num_threads(settings.threads())
    torch.set_grad_enabled(False)
    path = (add_v3_view if args.v3_only else add_development_view)(args.run_dir)
    print(f"wrote {path}")
    return 0


__all__ = ["COMMAND", "DESCRIPTION", "add_arguments", "command"]
