"""Benchmarks: the project's way against the straightforward way, side by side in one run.

Parts (benchmarks/README.md explains each):

  contributions  contribution[j, t] for J neurons x 50257 tokens: discovery.contributions (one GEMM)
                 against a per-neuron loop and against a plain GEMM of the same shape (GFLOP/s).
  scoring        discovery.score_neurons (chunked GEMM, median/MAD, top-k over 50256 tokens)
                 against the same statistics computed neuron by neuron.
  evaluation     true and approximate pre-activations of the discovered neurons, Pearson r and
                 FVU on N texts of 1024 tokens: evaluation.evaluate (layer 0 only, batched)
                 against run_with_cache of the full model text by text.
  book           every chapter executed on the planted model with 2 threads (nbclient).
  lookups        chapter 7's look-ups on a 12-layer GPT-2-Small-shaped model (benchmarks/lookups.py):
                 ablation drops and truncation of a neuron, attribution first and batched passes
                 that stop at the neuron's layer, against one full forward pass per ablated head
                 and per suffix; the main job's look-up section (issue 15).

Every part runs in its own subprocess and writes its results as they arrive (``--out`` is
rewritten after every measurement, so a failing part keeps the earlier ones). The outputs of
both ways are compared (``allclose`` with the tolerances printed beside them). Peak memory is the
high-water mark of resident memory (``VmHWM`` of ``/proc/self/status``, reset before each
measurement by writing 5 to ``/proc/self/clear_refs``; where that is refused, ``/proc/self/statm``
sampled every 2 ms), minus the resident size at the start of the measurement. On CUDA the device
peak (``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``, minus the memory
allocated at the start) is reported beside it. For the book, the peak is the largest
``VmHWM`` among the kernel processes. Speed is measured here, never in tests.

Examples:

  python benchmarks/run.py --quick                  # development check, about 3 minutes
  python benchmarks/run.py --full --out benchmarks/results.json --markdown benchmarks/RESULTS.md
  python benchmarks/run.py --only evaluation --eval-n 10 100 --device cuda
  python benchmarks/run.py --only lookups --threads 1 --merge-into benchmarks/results.json
      (one part merged into earlier results; add --markdown benchmarks/RESULTS.md for the summary)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

# The modules beside this script: benchmarks/cases.py, harness.py, report.py (and measure.py).
from cases import CASES, GPT2_SMALL_LAYERS, PARTS
from harness import machine, run_part, set_threads
from report import finish, write_json

# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------

#: --quick and --full (at most one) and their help.
MODES = {
    "--quick": "development run: 128 neurons in parts 1-2, N = 2, 4 in part 3 on the "
               "2-layer model, no book (about 3 minutes on 2 quiet cores)",
    "--full": "the complete measurement: all 3072 neurons, N = 10, 100, 1000 on "
              "both ways with the 12-layer model, and the whole book",
}
INT, INTS, FLAG = {"type": int}, {"type": int, "nargs": "+"}, {"action": "store_true"}
#: The other options in --help's order: add_argument's keywords and the help. A default left out
#: is None; parse_args sets those of --neurons, --eval-n, --straightforward-max, --layers and
#: --only, which depend on --quick and --full.
OPTIONS = {
    "--device": ({"choices": ["cpu", "cuda"], "default": "cpu"},
                 "where everything runs (default cpu); the chapters run with 2 "
                 "threads and, with cpu, with the GPU hidden from them"),
    "--only": ({"nargs": "+", "choices": PARTS},
               "run only these parts (default: contributions, scoring, evaluation; "
               "--full adds book)"),
    "--neurons": (INT, "parts 1-2: neurons in the contributions and the per-neuron loops "
                       "(default 3072; --quick 128)"),
    "--eval-n": (INTS, "part 3: numbers of texts (default 10 100 1000; --quick 2 4)"),
    "--straightforward-max": (INT, "part 3: run the straightforward way only for N up to this "
                                   "(default 1000 with --full, else 100)"),
    "--layers": (INT, "part 3: depth of the evaluated model: 2 is the planted model, 12 "
                      "puts its layer 0 under GPT-2 Small's depth so run_with_cache costs what "
                      "it costs on GPT-2 Small (default 12; --quick 2)"),
    "--batch-size": ({**INT, "default": 8},
                     "part 3: texts per batch of evaluate() (default 8, the project's)"),
    "--repeat": ({**INT, "default": 3},
                 "part 1: timed runs of the one-GEMM ways, best reported (default 3)"),
    "--chapters": ({"nargs": "+"},
                   "part 4: only these chapters (file stems, e.g. ch01_decomposition)"),
    "--lookup-layers": ({**INTS, "default": [11, 5]},
                        "part lookups: layers of the neurons whose ablation and truncation are "
                        "timed (default 11 5)"),
    "--lookup-prompts": ({**INT, "default": 4},
                         "part lookups: top-activating prompts per neuron (default 4; the "
                         "chapter and the main job use 10)"),
    "--lookup-windows": ({**INT, "default": 64},
                         "part lookups: domain windows (65 tokens) the neurons and prompts are "
                         "taken from (default 64)"),
    "--skip-truncation": (FLAG, "part lookups: time ablation only"),
    "--skip-section": (FLAG, "part lookups: do not time the main job's look-up section"),
    "--threads": (INT, "torch threads in parts 1-3 (default: torch's, all cores)"),
    "--out": ({"type": Path}, "JSON file of all results, rewritten after every measurement"),
    "--markdown": ({"type": Path},
                   "also write the markdown summary (printed at the end) to this file"),
    "--merge-into": ({"type": Path},
                     "merge this run's parts into an earlier results JSON (rewritten; each "
                     "merged part records its own run) and summarise the merged results in "
                     "--markdown"),
}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    mode = parser.add_mutually_exclusive_group()
    for name, text in MODES.items():
        mode.add_argument(name, action="store_true", help=text)
    for name, (keywords, text) in OPTIONS.items():
        parser.add_argument(name, **keywords, help=text)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    quick = args.quick
    defaults = {
        "neurons": 128 if quick else 3072,
        "eval_n": [2, 4] if quick else [10, 100, 1000],
        "straightforward_max": 1000 if args.full else 100,
        "layers": 2 if quick else GPT2_SMALL_LAYERS,
        "only": list(PARTS) if args.full else list(PARTS[:3]),
    }
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            parser.error("--device cuda: torch sees no CUDA device.")
    if min(args.eval_n) < 1 or args.neurons < 1 or args.batch_size < 1 or args.repeat < 1:
        parser.error("--eval-n, --neurons, --batch-size and --repeat must be positive.")
    return args


def case_argv(args) -> list[str]:
    """The options a case subprocess needs."""
    argv = [
        "--device",
        args.device,
        "--neurons",
        str(args.neurons),
        "--layers",
        str(args.layers),
        "--batch-size",
        str(args.batch_size),
        "--repeat",
        str(args.repeat),
        "--straightforward-max",
        str(args.straightforward_max),
        "--eval-n",
        *map(str, args.eval_n),
    ]
    argv += ["--lookup-layers", *map(str, args.lookup_layers)]
    argv += ["--lookup-prompts", str(args.lookup_prompts)]
    argv += ["--lookup-windows", str(args.lookup_windows)]
    argv += ["--skip-truncation"] * args.skip_truncation + ["--skip-section"] * args.skip_section
    if args.threads:
        argv += ["--threads", str(args.threads)]
    if args.chapters:
        argv += ["--chapters", *args.chapters]
    return argv


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.case:
        set_threads(args.threads)
        CASES[args.case](args)
        return 0
    results = {
        "command": " ".join(["python", "benchmarks/run.py", *sys.argv[1:]]),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "machine": machine(),
    }

    def save() -> None:
        write_json(args.out, results)

    m = results["machine"]
    print(
        f"{m['date']}: {m['cores']} cores, load average {m['load_average_start'][0]:.1f}; "
        f"torch {m['torch']}, {args.threads or m['torch_threads']} threads; device {args.device}",
        flush=True,
    )
    if m["load_average_start"][0] > 0.5 * m["cores"]:
        print("   warning: the machine is busy; timings will be slow and noisy.", flush=True)
    ok = True
    for part in args.only:
        print(f"\n{part}:", flush=True)
        start = time.perf_counter()
        ok &= run_part(part, case_argv(args), results, save)
        results.setdefault("elapsed_s", {})[part] = time.perf_counter() - start
    results["machine"]["load_average_end"] = os.getloadavg()
    save()
    failed = finish(args, results)
    return 0 if ok and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
