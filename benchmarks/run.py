"""Benchmarks: the project's way against the straightforward way, side by side in one run.

    python benchmarks/run.py                 # contributions, evaluation at N = 10, 100 (+1000 ours)
    python benchmarks/run.py --full          # also the straightforward way at N = 1000, and the book
    python benchmarks/run.py --device cuda   # on a GPU

Every case runs in its own subprocess, so that its peak memory (``ru_maxrss``, minus the
process's resident size after loading the model) is its own. All timings on the planted model,
which has GPT-2 Small's shapes (768, 12 heads, 3072 neurons, 50257 tokens, 1024 positions).
Speed is measured here, never in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def rss_mib() -> float:
    """Current resident set size of this process."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * resource.getpagesize() / 2**20


class PeakMemory:
    """Peak resident memory above the level at entry, sampled every 2 ms in a thread."""

    def __enter__(self):
        self.base = self.peak = rss_mib()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_mib())
            time.sleep(0.002)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_mib())

    @property
    def mib(self) -> float:
        return self.peak - self.base


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


# ----------------------------------------------------------------------------------------------
# Cases (each runs in a subprocess: ``python benchmarks/run.py --case NAME ...``)
# ----------------------------------------------------------------------------------------------


def setup(device: str):
    import torch

    from context_neurons.circuit import get_circuit
    from context_neurons.models import load_model

    torch.set_grad_enabled(False)
    loaded = load_model("planted", device=device)
    circuit = get_circuit(loaded.model)
    return loaded.model, circuit


def sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def case_contributions(kind: str, device: str) -> dict:
    import torch

    from context_neurons.neurons import contributions, read_vectors

    model, circuit = setup(device)
    e = circuit.extended  # [d_vocab, d_model]
    if kind == "project":
        run = lambda: contributions(circuit, model)  # noqa: E731
    elif kind == "loop":
        w = read_vectors(circuit, model)  # [d_model, d_mlp]

        def run():
            out = torch.empty(w.shape[1], e.shape[0], device=e.device)
            for j in range(w.shape[1]):
                out[j] = e @ w[:, j]
            return out
    else:  # a plain GEMM of the same shape on fresh random matrices
        a = torch.randn(e.shape, device=e.device)
        b = torch.randn(e.shape[1], model.cfg.d_mlp, device=e.device)
        run = lambda: a @ b  # noqa: E731

    def timed():
        run()
        sync(device)

    if kind != "loop":  # warm-up; the loop (minutes) runs once
        timed()
    with PeakMemory() as memory:
        seconds = best_of(timed, 1 if kind == "loop" else 3)
    flops = 2 * e.shape[0] * e.shape[1] * model.cfg.d_mlp
    return {"seconds": seconds, "gflops": flops / seconds / 1e9, "peak_mib": memory.mib}


def case_evaluation(kind: str, n_texts: int, device: str) -> dict:
    import torch

    from context_neurons.data import corpus_windows, pad_windows
    from context_neurons.evaluation import approximator, true_pre_activations
    from context_neurons.neurons import get_scores

    model, circuit = setup(device)
    neurons = get_scores(circuit, model).found()
    approx = approximator(circuit, model, neurons)
    windows, _, report = corpus_windows(
        model.tokenizer,
        ("nltk_brown_us", "nltk_masc", "wikitext2_pytorch_examples", "nltk_state_union_us",
         "bible_kjv", "medical_abstracts"),
        n=n_texts, min_tokens=1023,
    )
    if len(windows) < n_texts:
        raise SystemExit(f"only {len(windows)} full windows ({report})")
    memory = PeakMemory().__enter__()
    start = time.perf_counter()
    if kind == "project":  # layer 0 only, batched
        batch_size = 2
        for i in range(0, n_texts, batch_size):
            tokens, _ = pad_windows(windows[i : i + batch_size])
            tokens = tokens.to(model.cfg.device)
            true = true_pre_activations(model, tokens, neurons)
            pred = approx(tokens)
            torch.corrcoef(torch.stack([true[0, :, 0], pred[0, :, 0]]))
    else:  # the straightforward way: full model, run_with_cache, text by text
        for window in windows:
            tokens = window[None].to(model.cfg.device)
            _, cache = model.run_with_cache(tokens)
            true = cache["blocks.0.mlp.hook_pre"][0, :, neurons]
            pred = approx(tokens)[0]
            torch.corrcoef(torch.stack([true[:, 0], pred[:, 0]]))
    sync(device)
    seconds = time.perf_counter() - start
    memory.__exit__(None, None, None)
    n_tokens = sum(len(w) for w in windows)
    return {"seconds": seconds, "tokens_per_s": n_tokens / seconds, "n_neurons": len(neurons),
            "peak_mib": memory.mib}


def case_book() -> dict:
    from nbclient import NotebookClient

    from context_neurons.notebooks import STORED, chapter_files, read_chapter

    os.environ["CONTEXT_NEURONS_MODEL"] = "planted"
    per_chapter = {}
    for chapter in chapter_files():
        notebook = read_chapter(chapter)
        notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                           "language": "python"}
        start = time.perf_counter()
        NotebookClient(notebook, timeout=1800, kernel_name="python3",
                       resources={"metadata": {"path": str(STORED)}}).execute()
        per_chapter[chapter.stem] = time.perf_counter() - start
    return {"seconds": sum(per_chapter.values()), "per_chapter": per_chapter}


def run_case(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, "--case", *args], capture_output=True,
                         text=True, cwd=REPO)
    if out.returncode != 0:
        raise RuntimeError(f"case {args} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--full", action="store_true",
                        help="also the straightforward way at N=1000 and the whole book")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON")
    parser.add_argument("--case", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.case:
        name, *rest = args.case
        if name == "contributions":
            result = case_contributions(rest[0], rest[1])
        elif name == "evaluation":
            result = case_evaluation(rest[0], int(rest[1]), rest[2])
        else:
            result = case_book()
        print(json.dumps(result))
        return 0

    import torch

    print(f"device {args.device}; torch {torch.__version__}; threads {torch.get_num_threads()}; "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    results: dict = {"device": args.device}

    print("\n1. contributions[j, t] for all 3072 neurons x 50257 tokens "
          "(2 x 50257 x 768 x 3072 = 237 GFLOP)")
    contrib = {kind: run_case(["contributions", kind, args.device])
               for kind in ("project", "loop", "plain")}
    results["contributions"] = contrib
    for kind, label in [("project", "project (one GEMM)"), ("loop", "per-neuron loop"),
                        ("plain", "plain GEMM, same shape")]:
        r = contrib[kind]
        print(f"   {label:24s} {r['seconds']:8.2f} s  {r['gflops']:7.1f} GFLOP/s  "
              f"peak +{r['peak_mib']:.0f} MiB")
    print(f"   speed-up over the loop:        {contrib['loop']['seconds'] / contrib['project']['seconds']:.1f}x")
    print(f"   time relative to a plain GEMM: {contrib['project']['seconds'] / contrib['plain']['seconds']:.2f}x "
          f"(target <= 2x)")

    print("\n2. true and approximate pre-activations of the discovered neurons on N texts of 1024 tokens")
    results["evaluation"] = {}
    for n in (10, 100, 1000):
        row = {"project": run_case(["evaluation", "project", str(n), args.device])}
        if n < 1000 or args.full:
            row["straightforward"] = run_case(["evaluation", "straightforward", str(n), args.device])
        results["evaluation"][n] = row
        ours = row["project"]
        line = (f"   N={n:5d}  project: {ours['seconds']:7.1f} s, {ours['tokens_per_s']:8.0f} tok/s, "
                f"peak +{ours['peak_mib']:.0f} MiB")
        if "straightforward" in row:
            theirs = row["straightforward"]
            line += (f" | run_with_cache text by text: {theirs['seconds']:7.1f} s, "
                     f"{theirs['tokens_per_s']:7.0f} tok/s, peak +{theirs['peak_mib']:.0f} MiB"
                     f" | speed-up {theirs['seconds'] / ours['seconds']:.1f}x")
        print(line + f"  ({ours['n_neurons']} neurons)")
    if 100 in results["evaluation"] and "straightforward" in results["evaluation"][100]:
        row = results["evaluation"][100]
        print(f"   target: >= 10x at N=100; measured {row['straightforward']['seconds'] / row['project']['seconds']:.1f}x")

    if args.full:
        print("\n3. executing every chapter on the planted model (nbclient, no files written)")
        book = run_case(["book"])
        results["book"] = book
        for name, seconds in book["per_chapter"].items():
            print(f"   {name:28s} {seconds:6.0f} s")
        print(f"   whole book: {book['seconds'] / 60:.1f} min (target < 15 min on 2 cores)")

    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
        print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
