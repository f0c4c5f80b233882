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
import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Self

REPO = Path(__file__).resolve().parents[1]
PARTS = ("contributions", "scoring", "evaluation", "book", "lookups")
GPT2_SMALL_LAYERS = 12
#: Corpora the evaluation texts are cut from (split into consecutive full-length windows).
EVAL_CORPORA = (
    "nltk_brown_us",
    "nltk_masc",
    "wikitext2_pytorch_examples",
    "nltk_abc_au_news",
    "nltk_state_union_us",
    "medical_abstracts",
    "bible_kjv",
)
BOOK_TARGET_S = 15 * 60
EVAL_TARGET = 10.0
GEMM_TARGET = 2.0
BOOK_THREADS = "2"

# ----------------------------------------------------------------------------------------------
# Measuring
# ----------------------------------------------------------------------------------------------


from measure import (  # noqa: E402  (benchmarks/measure.py, beside this script)
    MARK,
    Meter,
    _release_free_memory,
    _reset_high_water_mark,
    _statm_mib,
    _status_kib,
    _sync,
    best_of,
    checks_md,
    close,
    emit,
    mib,
)


# ----------------------------------------------------------------------------------------------
# Models and texts
# ----------------------------------------------------------------------------------------------


def planted_model(device: str, layers: int = 2):
    """The planted model; with ``layers > 2``, the same layer 0 under more (copied) blocks.

    Layer 0, the embeddings and the unembedding are the planted model's, so the layer-0
    pre-activations are the planted model's exactly; blocks 2.. are copies of block 1, so a full
    forward pass costs what a GPT-2 model of that depth costs (12: GPT-2 Small).
    """
    import torch

    from context_neurons.models import load_model, load_tokenizer

    torch.set_grad_enabled(False)
    if layers == 2:
        return load_model("planted", device=device).model
    if layers < 2:
        raise SystemExit(f"--layers must be at least 2 (the planted model's depth), got {layers}.")
    from transformers import GPT2Config, GPT2LMHeadModel

    from context_neurons.models import bridge_from_hf
    from context_neurons.models.planted import build_planted_gpt2

    tokenizer = load_tokenizer()
    planted, _ = build_planted_gpt2(tokenizer)
    state = planted.state_dict()
    for key in [k for k in state if k.startswith("transformer.h.1.")]:
        for layer in range(2, layers):
            state[key.replace("h.1.", f"h.{layer}.", 1)] = state[key].clone()
    config = GPT2Config(**{**planted.config.to_dict(), "n_layer": layers})
    with torch.device("meta"):
        deep = GPT2LMHeadModel(config)
    deep.load_state_dict(state, strict=False, assign=True)
    deep.tie_weights()
    missing = [name for name, p in deep.named_parameters() if p.is_meta]
    if missing:
        raise SystemExit(f"deep model: parameters not loaded from the planted state: {missing[:5]}")
    return bridge_from_hf(deep.eval(), tokenizer, "planted", device=device)


def evaluation_windows(tokenizer, n: int) -> tuple[list, str]:
    """``n`` full-length (1024-token) windows, documents split into consecutive windows."""
    from context_neurons.text.corpora import iter_documents
    from context_neurons.text.windows import tokenize_windows

    documents = (doc for name in EVAL_CORPORA for doc in iter_documents(name))
    windows, _, _ = tokenize_windows(
        tokenizer, documents, min_tokens=1023, long="split", short="concat", max_windows=n
    )
    windows = [w for w in windows if len(w) == 1024]
    if not windows:
        raise SystemExit(f"No full-length window in {EVAL_CORPORA}: are the corpora installed?")
    note = f"{len(windows)} distinct windows from {', '.join(EVAL_CORPORA)}"
    if len(windows) < n:  # reuse windows: the cost of a text depends only on its length
        note += f", repeated cyclically to {n}"
        windows = [windows[i % len(windows)] for i in range(n)]
    return windows, note


# ----------------------------------------------------------------------------------------------
# Part 1: contributions
# ----------------------------------------------------------------------------------------------


def case_contributions(args) -> None:
    """contributions() vs a per-neuron loop vs a plain GEMM of the same shape, checked equal."""
    import torch

    from context_neurons.circuit import get_circuit
    from context_neurons.discovery import contributions, read_vectors

    model = planted_model(args.device)
    circuit = get_circuit(model)
    neurons = list(range(min(args.neurons, model.cfg.d_mlp)))
    e = circuit.extended  # [d_vocab, d_model]
    d_vocab, d_model = e.shape
    flop = 2 * d_vocab * d_model * len(neurons)
    emit(
        ["contributions", "work"],
        {"neurons": len(neurons), "tokens": d_vocab, "d_model": d_model, "gflop": flop / 1e9},
    )

    def project():
        return contributions(circuit, model, neurons)

    w = read_vectors(circuit, model, neurons)  # [d_model, J]

    n_neurons = len(neurons)

    def loop(n=n_neurons):
        out = torch.empty(n, d_vocab, device=e.device)
        for j in range(n):
            out[j] = e @ w[:, j]
        return out

    a = torch.randn(d_vocab, d_model, device=e.device)
    b = torch.randn(d_model, len(neurons), device=e.device)

    def plain():
        return a @ b

    project(), plain(), loop(4)  # warm-up, not counted
    record, _ = best_of(plain, args.repeat, args.device)
    emit(["contributions", "plain"], {**record, "gflops": flop / record["seconds"] / 1e9})
    record, ours = best_of(project, args.repeat, args.device)
    emit(["contributions", "project"], {**record, "gflops": flop / record["seconds"] / 1e9})
    record, theirs = best_of(loop, 1, args.device)
    emit(["contributions", "loop"], {**record, "gflops": flop / record["seconds"] / 1e9})
    emit(["contributions", "checks"], [close("per-neuron loop == contributions()", theirs, ours)])


# ----------------------------------------------------------------------------------------------
# Part 2: scoring
# ----------------------------------------------------------------------------------------------


def score_one_by_one(circuit, model, neurons, k: int) -> dict:
    """The straightforward score: for each neuron, its contributions, median, MAD, z and top-k."""
    import torch

    from context_neurons.discovery import MAD_TO_SD, read_vectors, scoring_vocabulary

    keep = scoring_vocabulary(model)
    e = circuit.extended
    out = {name: torch.empty(len(neurons)) for name in ("top", "median", "spread", "sign")}
    for i, j in enumerate(neurons):
        x = (e @ read_vectors(circuit, model, [j])[:, 0])[keep]
        med = x.median()
        spread = MAD_TO_SD * (x - med).abs().median()
        z = (x - med) / spread.clamp(min=1e-12)
        extreme = z.abs().topk(k)
        out["top"][i] = extreme.values.mean()
        out["sign"][i] = torch.sign(z[extreme.indices].sum())
        out["median"][i], out["spread"][i] = med, spread
    return out


def case_scoring(args) -> None:
    """score_neurons() over every neuron vs the same statistics neuron by neuron, checked equal."""
    from context_neurons.circuit import get_circuit
    from context_neurons.discovery import THETA, TOP_K, contributions, score_neurons

    model = planted_model(args.device)
    circuit = get_circuit(model)
    d_mlp = model.cfg.d_mlp
    neurons = list(range(min(args.neurons, d_mlp)))
    emit(
        ["scoring", "work"],
        {
            "neurons_project": d_mlp,
            "neurons_loop": len(neurons),
            "tokens": int(circuit.extended.shape[0]) - 1,
            "k": TOP_K,
        },
    )
    # Warm-up of the kernels both ways use (a GEMM, median, top-k), not counted; one call of
    # score_neurons takes seconds, so its first-call overhead is negligible.
    contributions(circuit, model, list(range(512))), score_one_by_one(circuit, model, [0], TOP_K)
    record, ours = best_of(lambda: score_neurons(circuit, model), 1, args.device)
    emit(["scoring", "project"], {**record, "seconds_per_neuron": record["seconds"] / d_mlp})
    record, theirs = best_of(
        lambda: score_one_by_one(circuit, model, neurons, TOP_K), 1, args.device
    )
    emit(["scoring", "loop"], {**record, "seconds_per_neuron": record["seconds"] / len(neurons)})
    checks = [
        close(f"{name}: loop == score_neurons()", theirs[name], getattr(ours, name)[neurons])
        for name in ("top", "spread", "sign")
    ]
    # A median sits near zero on the scale of contributions of hundreds: read it in units of
    # the neuron's spread, the unit of the z-scores it shifts.
    checks.insert(1, close("median: loop == score_neurons()", theirs["median"],
                           ours.median[neurons], unit=theirs["spread"],
                           unit_name="each neuron's spread"))
    found_loop = {j for j, top in zip(neurons, theirs["top"].tolist()) if top >= THETA}
    found_ours = {j for j in ours.found(THETA) if j in set(neurons)}
    checks.append(
        {
            "name": f"same neurons with top >= {THETA:g}",
            "passed": found_loop == found_ours,
            "detail": (
                f"{len(found_ours)} found by both ways"
                if found_loop == found_ours
                else f"differ: {sorted(found_loop ^ found_ours)}"
            ),
        }
    )
    emit(["scoring", "checks"], checks)


# ----------------------------------------------------------------------------------------------
# Part 3: evaluation
# ----------------------------------------------------------------------------------------------


def evaluate_straightforward(circuit, model, windows, neurons, keep: int = 0, start: int = 1):
    """Text by text: the full model's run_with_cache, the approximation, r and FVU per neuron.

    The pre-activations (all positions) of the first ``keep`` texts are kept for the checks.
    """
    import torch

    from context_neurons.evaluation import approximator

    approx_fn = approximator(circuit, model, neurons)
    rows: dict[str, list] = {"pearson": [], "fvu": [], "true_max": [], "approx_max": []}
    kept: list[tuple] = []
    n_neurons = len(neurons)
    for i, window in enumerate(windows):
        tokens = window[None].to(model.cfg.device)
        _, cache = model.run_with_cache(tokens)
        true_all = cache["blocks.0.mlp.hook_pre"][0, :, neurons]  # [pos, J], a copy
        approx_all = approx_fn(tokens)[0]
        if i < keep:
            kept.append((true_all, approx_all))
        true, approx = true_all[start:], approx_all[start:]
        r = torch.corrcoef(torch.cat([true.T, approx.T]))[:n_neurons, n_neurons:].diagonal()
        fvu = ((true - approx) ** 2).sum(0) / ((true - true.mean(0)) ** 2).sum(0)
        for name, value in zip(rows, (r, fvu, true.max(0).values, approx.max(0).values)):
            rows[name].append(value.cpu())
    return {"kept": kept, **{name: torch.stack(values) for name, values in rows.items()}}


def check_evaluation(circuit, model, windows, neurons, ev, theirs, batch_size: int) -> list:
    """Both ways' results equal: r, FVU and maxima on every text; the tensors on one batch.

    On the first batch, the true pre-activations as ``evaluate`` computes them (batched, layer 0)
    are compared with ``run_with_cache``'s ``hook_pre``, and the batched approximation with the
    approximation of each text alone, both kept by :func:`evaluate_straightforward`.
    """
    from context_neurons.evaluation import approximator, true_pre_activations
    from context_neurons.text.windows import pad_windows

    checks = [
        close("Pearson r, every text and neuron", ev.pearson, theirs["pearson"]),
        close("FVU, every text and neuron", ev.fvu, theirs["fvu"], rtol=1e-3),
        close("max true pre-activation", ev.true_max, theirs["true_max"]),
        close("max approximate pre-activation", ev.approx_max, theirs["approx_max"]),
    ]
    batch = windows[:batch_size]  # the first batch, exactly as evaluate() computes it
    tokens, lengths = pad_windows(batch)
    tokens = tokens.to(model.cfg.device)
    true_batch = true_pre_activations(model, tokens, neurons)
    approx_batch = approximator(circuit, model, neurons)(tokens)
    for i, (true_text, approx_text) in enumerate(theirs["kept"][: len(batch)]):
        n = int(lengths[i])
        name = f"text {i}: true pre-activations (evaluate) == run_with_cache hook_pre"
        checks.append(close(name, true_batch[i, :n], true_text))
        name = f"text {i}: approximation batched (evaluate) == text alone"
        checks.append(close(name, approx_batch[i, :n], approx_text))
    return checks


def case_evaluation(args) -> None:
    """evaluate() vs run_with_cache text by text for each N (both warmed up), checked equal."""
    from context_neurons.circuit import get_circuit
    from context_neurons.discovery import get_scores
    from context_neurons.evaluation import evaluate

    model = planted_model(args.device, args.layers)
    circuit = get_circuit(model)
    neurons = get_scores(circuit, model).found()
    if not neurons:
        raise SystemExit("No neurons found: nothing to evaluate.")
    windows, note = evaluation_windows(model.tokenizer, max(args.eval_n))
    emit(
        ["evaluation", "work"],
        {
            "neurons": len(neurons),
            "layers": model.cfg.n_layers,
            "tokens_per_text": 1024,
            "texts": note,
            "batch_size": args.batch_size,
        },
    )
    evaluate(circuit, model, windows[:2], neurons, batch_size=args.batch_size)  # warm-up
    evaluate_straightforward(circuit, model, windows[:1], neurons)  # warm-up
    for n in args.eval_n:
        texts = windows[:n]
        tokens = sum(len(w) for w in texts)
        with Meter(args.device) as meter:
            ev = evaluate(circuit, model, texts, neurons, batch_size=args.batch_size)
        emit(
            ["evaluation", n, "project"],
            meter.record(tokens_per_s=tokens / meter.seconds, median_r=ev.median_pearson),
        )
        if n > args.straightforward_max:
            continue
        with Meter(args.device) as meter:
            theirs = evaluate_straightforward(circuit, model, texts, neurons, args.batch_size)
        emit(
            ["evaluation", n, "straightforward"], meter.record(tokens_per_s=tokens / meter.seconds)
        )
        emit(
            ["evaluation", n, "checks"],
            check_evaluation(circuit, model, texts, neurons, ev, theirs, args.batch_size),
        )


# ----------------------------------------------------------------------------------------------
# Part 4: the book
# ----------------------------------------------------------------------------------------------


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from the parent ids in ``/proc/*/stat``)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        children = [p for p, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def case_book(args) -> None:
    """Execute every chapter (2 threads), with its seconds and its kernel's peak resident memory."""
    from nbclient import NotebookClient

    from context_neurons.book.notebooks import STORED, chapter_files, read_chapter

    os.environ.update(
        {
            "CONTEXT_NEURONS_MODEL": "planted",
            "OMP_NUM_THREADS": BOOK_THREADS,
            "MKL_NUM_THREADS": BOOK_THREADS,
            "CONTEXT_NEURONS_THREADS": BOOK_THREADS,
        }
    )
    if args.device == "cpu":  # chapters use CUDA when they see it
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    every = chapter_files()
    chapters = [c for c in every if not args.chapters or c.stem in args.chapters]
    if not chapters:
        raise SystemExit(f"No chapter named {args.chapters}: see book/ch*.py, book/appendix_*.py.")
    emit(
        ["book", "work"],
        {
            "chapters": [c.stem for c in chapters],
            "all_chapters": len(every),
            "threads": BOOK_THREADS,
            "device": args.device,
        },
    )
    for chapter in chapters:
        notebook = read_chapter(chapter)
        notebook.metadata["kernelspec"] = {
            "name": "python3",
            "display_name": "Python 3",
            "language": "python",
        }
        peak = {"kib": 0}

        def kernel_peak(peak=peak, **_):  # after each cell, while the kernel lives
            for pid in descendants(os.getpid()):
                peak["kib"] = max(peak["kib"], _status_kib("VmHWM", pid) or 0)

        client = NotebookClient(
            notebook,
            timeout=1800,
            kernel_name="python3",
            resources={"metadata": {"path": str(STORED)}},
            on_cell_executed=kernel_peak,
        )
        start = time.perf_counter()
        client.execute()
        emit(
            ["book", "chapters", chapter.stem],
            {"seconds": time.perf_counter() - start, "kernel_peak_mib": peak["kib"] / 1024},
        )


def case_lookups(args) -> None:
    from lookups import case_lookups as run_case  # benchmarks/lookups.py

    run_case(args)


def lookups_md(part: dict) -> list[str]:
    from lookups import lookups_md as render

    return render(part)


CASES = {
    "contributions": case_contributions,
    "scoring": case_scoring,
    "evaluation": case_evaluation,
    "book": case_book,
    "lookups": case_lookups,
}


# ----------------------------------------------------------------------------------------------
# The parent: run the parts, store results as they arrive, print the summary
# ----------------------------------------------------------------------------------------------


def machine() -> dict:
    """Date, machine and software of this run."""
    import torch

    cpu = ""
    try:
        cpu = re.search(
            r"^model name\s*:\s*(.*)$", Path("/proc/cpuinfo").read_text(), re.MULTILINE
        ).group(1)
    except (OSError, AttributeError):
        cpu = platform.processor()
    try:
        mem = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
    except (OSError, AttributeError):
        mem = None
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    ).stdout.strip()
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)),
        "memory_gib": round(mem / 2**20, 1) if mem else None,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "commit": commit + (" (with uncommitted changes)" if dirty else ""),
        "load_average_start": os.getloadavg(),
    }


def set_path(tree: dict, path: list[str], value) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def run_part(part: str, argv: list[str], results: dict, save) -> bool:
    """Run one part in a subprocess, storing each result line as it arrives."""
    with tempfile.TemporaryFile("w+") as stderr:
        process = subprocess.Popen(
            [sys.executable, __file__, "--case", part, *argv],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        for line in process.stdout:
            if line.startswith(MARK):
                item = json.loads(line[len(MARK) :])
                set_path(results, item["path"], item["value"])
                print(f"   {'/'.join(item['path'])}: {brief(item['value'])}", flush=True)
                save()
        if process.wait() == 0:
            return True
        stderr.seek(0)
        tail = stderr.read()[-3000:]
    results.setdefault("errors", {})[part] = tail
    save()
    print(f"   FAILED ({part}):\n{tail}", flush=True)
    return False


def brief(value) -> str:
    """One line for a progress message."""
    if isinstance(value, list):
        failed = [c["name"] for c in value if not c["passed"]]
        return f"{len(value) - len(failed)}/{len(value)} checks passed" + (
            f"; FAILED: {failed}" if failed else ""
        )
    if isinstance(value, dict) and "kernel_peak_mib" in value:
        return f"{value['seconds']:.1f} s, kernel peak {value['kernel_peak_mib']:.0f} MiB"
    if isinstance(value, dict) and "seconds" in value:
        return f"{value['seconds']:.2f} s, host peak +{value['host_peak_mib']:.0f} MiB"
    return json.dumps(value)[:160]


# ----------------------------------------------------------------------------------------------
# Markdown summary
# ----------------------------------------------------------------------------------------------


def header_md(results: dict) -> list[str]:
    m, args = results["machine"], results["args"]
    device = m["gpu"] if args["device"] == "cuda" else "CPU"
    lines = [
        "# Benchmark results",
        "",
        f"- date: {m['date']}; commit {m['commit']}",
        f"- command: `{results['command']}`",
        (
            f"- machine: {m['cores']} CPU cores ({m['cores_usable']} usable), {m['cpu']}, "
            f"{m['memory_gib']} GiB memory; load average at start {m['load_average_start'][0]:.1f}"
        ),
        (
            f"- software: Python {m['python']}, torch {m['torch']} ({m['torch_threads']} threads); "
            f"device: {device}"
        ),
        "- memory columns: peak resident memory above the start of the measurement, MiB"
        + (" (host / device)" if args["device"] == "cuda" else ""),
    ]
    elapsed = results.get("elapsed_s", {})
    if elapsed:
        parts = ", ".join(f"{part} {seconds / 60:.1f}" for part, seconds in elapsed.items())
        lines.append(
            f"- run time: {sum(elapsed.values()) / 60:.1f} min ({parts}); load average "
            f"at the end {m.get('load_average_end', [float('nan')])[0]:.1f}"
        )
    return lines


def contributions_md(part: dict) -> list[str]:
    work = part["work"]
    lines = [
        "",
        (
            f"## 1. Contributions: {work['neurons']} neurons x {work['tokens']} tokens "
            f"(d_model {work['d_model']}, {work['gflop']:.0f} GFLOP)"
        ),
        "",
        "| way | seconds | GFLOP/s | peak memory |",
        "|---|---|---|---|",
    ]
    labels = {
        "project": "project: `discovery.contributions` (one GEMM)",
        "loop": "straightforward: per-neuron loop (GEMV each)",
        "plain": "plain GEMM of the same shape (random matrices)",
    }
    for kind, label in labels.items():
        if kind in part:
            r = part[kind]
            lines.append(f"| {label} | {r['seconds']:.3f} | {r['gflops']:.1f} | {mib(r)} |")
    if {"project", "loop", "plain"} <= part.keys():
        ratio = part["project"]["seconds"] / part["plain"]["seconds"]
        lines += [
            "",
            (
                f"- speed-up over the per-neuron loop: "
                f"**{part['loop']['seconds'] / part['project']['seconds']:.1f}x**"
            ),
            (
                f"- time relative to the plain GEMM: **{ratio:.2f}x** (target <= "
                f"{GEMM_TARGET:g}x: {'met' if ratio <= GEMM_TARGET else 'MISSED'})"
            ),
        ]
    return lines + ([""] + checks_md(part["checks"]) if "checks" in part else [])


def scoring_md(part: dict) -> list[str]:
    work = part["work"]
    lines = [
        "",
        (
            f"## 2. Scoring neurons: median, MAD and top-{work['k']} over "
            f"{work['tokens']} tokens"
        ),
        "",
        "| way | neurons | seconds | ms per neuron | peak memory |",
        "|---|---|---|---|---|",
    ]
    for kind, label, n in [
        ("project", "project: `discovery.score_neurons` (chunked GEMM)", work["neurons_project"]),
        ("loop", "straightforward: neuron by neuron", work["neurons_loop"]),
    ]:
        if kind in part:
            r = part[kind]
            lines.append(
                f"| {label} | {n} | {r['seconds']:.2f} | "
                f"{1e3 * r['seconds_per_neuron']:.2f} | {mib(r)} |"
            )
    if {"project", "loop"} <= part.keys():
        speedup = part["loop"]["seconds_per_neuron"] / part["project"]["seconds_per_neuron"]
        lines += [
            "",
            f"- speed-up per neuron: **{speedup:.1f}x**"
            + (
                ""
                if work["neurons_loop"] == work["neurons_project"]
                else f" (the loop scored the first {work['neurons_loop']} neurons only)"
            ),
        ]
    return lines + ([""] + checks_md(part["checks"]) if "checks" in part else [])


def evaluation_md(part: dict) -> list[str]:
    work = part["work"]
    depth = work["layers"]
    lines = [
        "",
        (
            f"## 3. Evaluation: {work['neurons']} discovered neurons, texts of "
            f"{work['tokens_per_text']} tokens"
        ),
        "",
        (
            f"Texts: {work['texts']}. Project: `evaluation.evaluate` (layer 0 only, batches of "
            f"{work['batch_size']}). Straightforward: `run_with_cache` of the full {depth}-layer "
            "model text by text, the approximation per text, r and FVU of every neuron."
        ),
        "",
    ]
    if depth < GPT2_SMALL_LAYERS:
        lines += [
            (
                f"**Caveat:** the model has {depth} layers, GPT-2 Small {GPT2_SMALL_LAYERS}: "
                "the straightforward way is cheaper here than on GPT-2, so the speed-up is "
                "conservative (run with `--layers 12` for GPT-2 Small's cost)."
            ),
            "",
        ]
    else:
        lines += [
            (
                f"The model has {depth} layers (GPT-2 Small's depth): layer 0 and the "
                "embeddings are the planted model's, the other blocks copies of its layer 1."
            ),
            "",
        ]
    lines += [
        (
            "| N | project s | project tok/s | project peak | straightforward s | "
            "straightforward tok/s | straightforward peak | speed-up | checks |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    rows = sorted((k for k in part if k.isdigit()), key=int)
    for n in rows:
        row = part[n]
        ours, theirs = row.get("project"), row.get("straightforward")
        cells = [n] + (
            [f"{ours['seconds']:.2f}", f"{ours['tokens_per_s']:.0f}", mib(ours)]
            if ours
            else ["-"] * 3
        )
        if theirs:
            cells += [
                f"{theirs['seconds']:.2f}",
                f"{theirs['tokens_per_s']:.0f}",
                mib(theirs),
                f"**{theirs['seconds'] / ours['seconds']:.1f}x**" if ours else "-",
            ]
        else:
            cells += ["not run"] + ["-"] * 3
        checks = row.get("checks")
        cells.append(
            "-" if checks is None else f"{sum(c['passed'] for c in checks)}/{len(checks)} pass"
        )
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    if "100" in part and "straightforward" in part["100"] and "project" in part["100"]:
        speedup = part["100"]["straightforward"]["seconds"] / part["100"]["project"]["seconds"]
        lines += [
            "",
            (
                f"- target: >= {EVAL_TARGET:g}x at N = 100; measured **{speedup:.1f}x** "
                f"({'met' if speedup >= EVAL_TARGET else 'MISSED'})"
            ),
        ]
    for n in rows:
        if "checks" in part[n]:
            lines += ["", f"Checks at N = {n}:", ""] + checks_md(part[n]["checks"])
            break  # one table: every N runs the same checks (counts in the table above)
    return lines


def book_md(part: dict) -> list[str]:
    work = part["work"]
    lines = [
        "",
        (
            f"## 4. The whole book on the planted model ({work['threads']} threads, "
            f"{'CUDA' if work['device'] == 'cuda' else 'CPU only'})"
        ),
        "",
        "| chapter | seconds | kernel peak resident memory (MiB) |",
        "|---|---|---|",
    ]
    chapters = part.get("chapters", {})
    for name, r in chapters.items():
        lines.append(f"| {name} | {r['seconds']:.0f} | {r['kernel_peak_mib']:.0f} |")
    total = sum(r["seconds"] for r in chapters.values())
    complete = len(chapters) == part["work"]["all_chapters"]
    lines += [
        "",
        f"- total: **{total / 60:.1f} min** for {len(chapters)} of "
        f"{part['work']['all_chapters']} chapters (each including its kernel's start)"
        + (
            f" (target < {BOOK_TARGET_S // 60} min: "
            f"{'met' if total < BOOK_TARGET_S else 'MISSED'})"
            if complete
            else ""
        ),
    ]
    if chapters:
        lines.append(
            f"- largest kernel peak: "
            f"{max(r['kernel_peak_mib'] for r in chapters.values()):.0f} MiB"
        )
    return lines


def markdown(results: dict) -> str:
    lines = header_md(results)
    renderers = {
        "contributions": contributions_md,
        "scoring": scoring_md,
        "evaluation": evaluation_md,
        "book": book_md,
        "lookups": lookups_md,
    }
    for part, render in renderers.items():
        if part in results and "work" in results[part]:
            lines += render(results[part])
            lines += measured_md(results[part].get("measured"))
    for part, tail in results.get("errors", {}).items():
        lines += ["", f"**Part {part} FAILED:**", "", "```", tail.strip()[-1500:], "```"]
    return "\n".join(lines) + "\n"


def measured_md(measured: dict | None) -> list[str]:
    """The run a part merged from another run (``--merge-into``) was measured in."""
    if not measured:
        return []
    m = measured["machine"]
    return [
        "",
        (
            f"Measured separately from the header's run: {m['date']}, commit {m['commit']}, "
            f"`{measured['command']}`; {m['cores']} cores, {measured['threads']} torch threads, "
            f"load average {m['load_average_start'][0]:.1f} at the start and "
            f"{m.get('load_average_end', [float('nan')])[0]:.1f} at the end; "
            f"{measured['elapsed_s'] / 60:.1f} min."
        ),
    ]


def merge_into(path: Path, results: dict, parts: list[str]) -> dict:
    """``path``'s results with ``parts`` replaced by this run's, each with its run recorded."""
    merged = json.loads(path.read_text())
    for part in parts:
        if part in results:
            merged[part] = {
                **results[part],
                "measured": {
                    "command": results["command"],
                    "machine": results["machine"],
                    "threads": results["args"]["threads"] or results["machine"]["torch_threads"],
                    "elapsed_s": results.get("elapsed_s", {}).get(part, float("nan")),
                },
            }
        merged.setdefault("errors", {}).pop(part, None)
        if part in results.get("errors", {}):
            merged["errors"][part] = results["errors"][part]
    if not merged.get("errors"):
        merged.pop("errors", None)
    return merged


def all_checks(results: dict) -> list[dict]:
    found = []
    for part in results.values():
        if isinstance(part, dict):
            for key, value in part.items():
                if key == "checks":
                    found += value
                elif isinstance(value, dict) and "checks" in value:
                    found += value["checks"]
    return found


# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--quick",
        action="store_true",
        help="development run: 128 neurons in parts 1-2, N = 2, 4 in part 3 on the "
        "2-layer model, no book (about 3 minutes on 2 quiet cores)",
    )
    mode.add_argument(
        "--full",
        action="store_true",
        help="the complete measurement: all 3072 neurons, N = 10, 100, 1000 on "
        "both ways with the 12-layer model, and the whole book",
    )
    parser.add_argument(
        "--device",
        choices=["cpu", "cuda"],
        default="cpu",
        help="where everything runs (default cpu); the chapters run with 2 "
        "threads and, with cpu, with the GPU hidden from them",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=PARTS,
        default=None,
        help="run only these parts (default: contributions, scoring, evaluation; "
        "--full adds book)",
    )
    parser.add_argument(
        "--neurons",
        type=int,
        default=None,
        help="parts 1-2: neurons in the contributions and the per-neuron loops "
        "(default 3072; --quick 128)",
    )
    parser.add_argument(
        "--eval-n",
        type=int,
        nargs="+",
        default=None,
        help="part 3: numbers of texts (default 10 100 1000; --quick 2 4)",
    )
    parser.add_argument(
        "--straightforward-max",
        type=int,
        default=None,
        help="part 3: run the straightforward way only for N up to this "
        "(default 1000 with --full, else 100)",
    )
    parser.add_argument(
        "--layers",
        type=int,
        default=None,
        help="part 3: depth of the evaluated model: 2 is the planted model, 12 "
        "puts its layer 0 under GPT-2 Small's depth so run_with_cache costs what "
        "it costs on GPT-2 Small (default 12; --quick 2)",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=8,
        help="part 3: texts per batch of evaluate() (default 8, the project's)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="part 1: timed runs of the one-GEMM ways, best reported (default 3)",
    )
    parser.add_argument(
        "--chapters",
        nargs="+",
        default=None,
        help="part 4: only these chapters (file stems, e.g. ch01_decomposition)",
    )
    parser.add_argument(
        "--lookup-layers",
        type=int,
        nargs="+",
        default=[11, 5],
        help="part lookups: layers of the neurons whose ablation and truncation are timed "
        "(default 11 5)",
    )
    parser.add_argument(
        "--lookup-prompts",
        type=int,
        default=4,
        help="part lookups: top-activating prompts per neuron (default 4; the chapter and "
        "the main job use 10)",
    )
    parser.add_argument(
        "--lookup-windows",
        type=int,
        default=64,
        help="part lookups: domain windows (65 tokens) the neurons and prompts are taken "
        "from (default 64)",
    )
    parser.add_argument(
        "--skip-truncation",
        action="store_true",
        help="part lookups: time ablation only",
    )
    parser.add_argument(
        "--skip-section",
        action="store_true",
        help="part lookups: do not time the main job's look-up section",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads in parts 1-3 (default: torch's, all cores)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="JSON file of all results, rewritten after every measurement",
    )
    parser.add_argument(
        "--markdown",
        type=Path,
        default=None,
        help="also write the markdown summary (printed at the end) to this file",
    )
    parser.add_argument(
        "--merge-into",
        type=Path,
        default=None,
        help="merge this run's parts into an earlier results JSON (rewritten; each merged "
        "part records its own run) and summarise the merged results in --markdown",
    )
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
        import torch

        if args.threads:
            torch.set_num_threads(args.threads)
        CASES[args.case](args)
        return 0
    results = {
        "command": " ".join(["python", "benchmarks/run.py", *sys.argv[1:]]),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "machine": machine(),
    }

    def save() -> None:
        if args.out:
            args.out.write_text(json.dumps(results, indent=2))

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
    failed = [c["name"] for c in all_checks(results) if not c["passed"]]
    if args.merge_into:
        results = merge_into(args.merge_into, results, args.only)
        args.merge_into.write_text(json.dumps(results, indent=2))
        print(f"merged {', '.join(args.only)} into {args.merge_into}")
    summary = markdown(results)
    print("\n" + summary)
    if args.markdown:
        args.markdown.write_text(summary)
        print(f"wrote {args.markdown}")
    if args.out:
        print(f"wrote {args.out}")
    if failed:
        print(f"FAILED checks: {failed}")
    return 0 if ok and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
