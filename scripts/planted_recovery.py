"""What the method recovers of the planted model, over seeds (issue 13): a thin command line over
:mod:`context_neurons.recovery`.

Usage::

    python scripts/planted_recovery.py                       # seeds 0-4, 40 windows, the control
    python scripts/planted_recovery.py --seeds 0 1 --windows 10 --json out.json --difficulties

Prints one row per seed, the mean and worst over seeds, and the negative control
(``shuffled-kernels``). A seed takes about two minutes on two cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import torch

from context_neurons.files import write_text_whole
from context_neurons.models import load_tokenizer
from context_neurons.recovery import THETA, THETAS, recover, summarise
from context_neurons.text.windows import corpus_windows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--windows", type=int, default=40, help="evaluation windows (1024 tokens)")
    parser.add_argument("--no-control", action="store_true", help="skip the negative control")
    parser.add_argument("--difficulties", action="store_true",
                        help="also measure each planted GPT-2 difficulty (about 30 s a seed)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", default=None, help="write every row here")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    tokenizer = load_tokenizer()
    windows, _, _ = corpus_windows(tokenizer, n=args.windows) if args.windows else ([], [], None)
    print(f"{len(windows)} evaluation windows of {len(windows[0]) if windows else 0} tokens "
          "(corpus_windows: Brown, MASC, WikiText-2)")
    runs = []
    jobs = [(s, "standard") for s in args.seeds]
    if not args.no_control:
        jobs.append((args.seeds[0], "shuffled-kernels"))
    for seed, variant in jobs:
        start = time.time()
        run = recover(tokenizer, seed, windows, variant, difficulties=args.difficulties)
        run = dataclasses.replace(run, seconds=round(time.time() - start, 1))
        runs.append(run)
        print(json.dumps(run.to_json(), default=str))
        sys.stdout.flush()
    print()
    header = (f"{'seed':>4} {'ctx heads':<20} {'ok':<3} " + " ".join(
        f"P/R@{t:<2}" + " " * 6 for t in THETAS) + " found@6  r(pp)  FVU(pp) r(med) FVU(med)  TV")
    print(header)
    for r in runs:
        if r.variant != "standard":
            continue
        pr = " ".join(f"{r.precision[t]:.2f}/{r.recall[t]:.2f}" + " " * 2 for t in THETAS)
        ok = "yes" if r.contextual_recovered else "NO"
        numbers = " ".join(
            f"{_or_nan(getattr(r, key)):{width}.3f}"
            for key, width in (("median_r_per_position", 6), ("median_fvu_per_position", 7),
                               ("median_r_median", 6), ("median_fvu_median", 7),
                               ("tv_median", 6)))
        print(f"{r.seed:>4} {r.contextual_heads!s:<20} {ok:<3} {pr} {r.found[THETA]:>7} "
              f"{numbers}")
    print()
    for line in summarise(runs):
        print(line)
    for r in runs:
        if r.variant == "shuffled-kernels":
            stopped = r.stopped if r.stopped is not None else (
                "it did not stop (a failure of the control)")
            print(f"negative control (seed {r.seed}, shuffled kernels): contextual heads "
                  f"{r.contextual_heads}, neurons found {r.found[THETA]}. The method "
                  f"stopped: {stopped}")
    if args.json:
        write_text_whole(Path(args.json),
                         json.dumps([r.to_json() for r in runs], indent=1, default=str))
    return 0


def _or_nan(value: float | None) -> float:
    """``value``, nan for ``None`` (a measure the run did not take)."""
    return math.nan if value is None else value


if __name__ == "__main__":
    sys.exit(main())
