"""The benchmark cases, one per part of benchmarks/run.py: each times the project's way against
the straightforward way on the same work, with the same inputs, and checks that both give the
same numbers.

A case runs in its own subprocess (``run.py --case NAME``, started by ``harness.run_part``) and
hands each result to the parent as a result line (``measure.emit``). Part ``lookups`` is
benchmarks/lookups.py.
"""

from __future__ import annotations

import os
import time

from harness import descendants  # benchmarks/harness.py, beside this module
from measure import Meter, _status_kib, best_of, close, emit  # benchmarks/measure.py

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
BOOK_THREADS = "2"


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


CASES = {
    "contributions": case_contributions,
    "scoring": case_scoring,
    "evaluation": case_evaluation,
    "book": case_book,
    "lookups": case_lookups,
}
