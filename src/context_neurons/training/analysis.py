"""Does a trained model have the structure the method looks for? Two quick checks.

1. Layer-0 positional kernels (:func:`head_kernels`): the model reads ``<|endoftext|>`` followed
   by one common token (``' the'``) repeated, so every key has the same content and a head's
   attention from query position ``q`` is its positional kernel ``pos_q(i)``. Reported per head:
   the weight on BOS (position 0), on the previous token, and the effective width
   ``n_eff = 1 / sum_i p(i)^2`` of the kernel over positions ``1..q`` renormalised without BOS
   (``q`` for a uniform head, 1 for a previous-token head).
2. Domain neurons (:func:`neuron_domain_auc`): on held-out windows of each corpus, each layer-0
   MLP neuron's mean pre-activation over positions ``>= min_pos``; for each domain
   (:data:`~context_neurons.training.config.DOMAINS`) the ROC AUC of that value for the domain's
   windows against all others. AUC >= 0.9 means the neuron's activation separates the domain.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from transformers import AutoTokenizer, GPT2LMHeadModel

from context_neurons.training.config import DOMAINS, EOT, default_corpora_dir
from context_neurons.training.corpus import iter_documents, manifest_keys, read_manifest
from context_neurons.training.loop import quiet_transformers
from context_neurons.training.stream import eval_windows, pack_windows, tokenize_corpus


def load_run(run_dir: str | Path, checkpoint: str | None = None):
    """(float32 eager-attention model, tokenizer) of a run directory or one of its checkpoints."""

    quiet_transformers()
    run_dir = Path(run_dir)
    path = run_dir / "checkpoints" / checkpoint if checkpoint else run_dir
    model = GPT2LMHeadModel.from_pretrained(str(path), dtype=torch.float32,
                                            attn_implementation="eager")
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(str(run_dir))
    return model, tokenizer


@torch.no_grad()
def head_kernels(model, eot_id: int, token_id: int, query: int) -> list[dict]:
    """Layer-0 attention from position ``query`` on ``[EOT, token, token, ...]``, per head."""
    x = torch.tensor([[eot_id] + [token_id] * query])
    attn = model(input_ids=x, output_attentions=True).attentions[0][0, :, query, :]  # [head, key]
    rows = []
    for h, p in enumerate(attn.double()):
        rest = p[1:] / p[1:].sum()
        distances = torch.arange(query - 1, -1, -1, dtype=torch.float64)  # key i -> query - i
        rows.append({
            "head": h,
            "bos": float(p[0]),
            "prev": float(p[query - 1]) if query >= 1 else 0.0,
            "self": float(p[query]),
            "n_eff": float(1.0 / (rest**2).sum()),
            "n_eff_with_bos": float(1.0 / (p**2).sum()),
            "mean_distance": float((rest * distances).sum()),
        })
    return rows


@torch.no_grad()
def distance_profiles(model, windows: np.ndarray, min_query: int | None = None) -> list[dict]:
    """Layer-0 attention on real text, by distance: for each head, the mean weight at distance
    ``d`` (query minus key) over queries ``>= min_query`` (default half the window) of
    ``windows``, with BOS left out and each row renormalised; its weight at distances 0 and 1
    and its effective width ``1 / sum_d w(d)^2`` where ``w`` is that mean profile."""
    n_ctx = windows.shape[1]
    min_query = n_ctx // 2 if min_query is None else min_query
    total = torch.zeros(model.config.n_head, n_ctx, dtype=torch.float64)
    count = 0
    for start in range(0, len(windows), 8):
        x = torch.from_numpy(windows[start:start + 8].astype(np.int64))
        attn = model(input_ids=x, output_attentions=True).attentions[0].double()  # b h q k
        for q in range(min_query, n_ctx):
            row = attn[:, :, q, 1:q + 1]
            row = row / row.sum(-1, keepdim=True)
            total[:, :q] += row.flip(-1).sum(0)  # index d = q - k, d = 0 .. q - 1
            count += x.shape[0]
    rows = []
    for h, profile in enumerate(total / count):
        rows.append({"head": h, "self": float(profile[0]), "prev": float(profile[1]),
                     "n_eff": float(1.0 / (profile**2).sum()),
                     "mean_distance": float((profile * torch.arange(n_ctx)).sum())})
    return rows


def heldout_windows(run_dir: str | Path, tokenizer, corpora_dir: str | Path | None = None,
                    n_ctx: int | None = None, per_corpus: int = 64) -> dict[str, np.ndarray]:
    """Held-out windows of each corpus of a run (its ``split.json``), packed as in training."""
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir / "split.json")
    heldout = set(manifest_keys(manifest, "heldout"))
    record_path = run_dir / "training.json"  # absent while a run is going or was stopped
    config = json.loads(record_path.read_text())["config"] if record_path.exists() else {}
    corpora_dir = corpora_dir or config.get("corpora") or default_corpora_dir()
    n_ctx = n_ctx or config["n_ctx"]
    eot_id = tokenizer.convert_tokens_to_ids(EOT)
    windows = {}
    for corpus in manifest["counts"]:
        docs = [d for d in iter_documents(corpus, corpora_dir) if d.key in heldout]
        packed = pack_windows(tokenize_corpus(docs, tokenizer, eot_id), n_ctx, eot_id)
        windows[corpus] = eval_windows(packed, per_corpus)
    return windows


@torch.no_grad()
def layer0_preactivations(model, windows: np.ndarray, min_pos: int = 32,
                          batch_size: int = 16) -> torch.Tensor:
    """``[window, neuron]``: each layer-0 neuron's mean pre-activation over positions >= min_pos."""
    min_pos = min(min_pos, windows.shape[1] // 2)
    captured = []
    handle = model.transformer.h[0].mlp.c_fc.register_forward_hook(
        lambda module, inputs, output: captured.append(output[:, min_pos:].float().mean(1)))
    try:
        for start in range(0, len(windows), batch_size):
            model(input_ids=torch.from_numpy(windows[start:start + batch_size].astype(np.int64)))
    finally:
        handle.remove()
    return torch.cat(captured)


def auc(scores: np.ndarray, positive: np.ndarray) -> np.ndarray:
    """ROC AUC of each column of ``scores`` [sample, feature] for the boolean ``positive``
    (Mann-Whitney U with average ranks for ties)."""
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError("AUC needs positive and negative samples.")
    order = np.argsort(scores, axis=0, kind="mergesort")
    ranks = np.empty_like(scores, dtype=np.float64)
    n = scores.shape[0]
    for j in range(scores.shape[1]):
        col = scores[order[:, j], j]
        r = np.arange(1, n + 1, dtype=np.float64)
        # average the ranks of tied values
        _, first, counts = np.unique(col, return_index=True, return_counts=True)
        for f, c in zip(first, counts):
            if c > 1:
                r[f:f + c] = r[f:f + c].mean()
        ranks[order[:, j], j] = r
    u = ranks[positive].sum(0) - n_pos * (n_pos + 1) / 2
    return u / (n_pos * n_neg)


def neuron_domain_auc(model, windows: dict[str, np.ndarray], domains: dict | None = None,
                      min_pos: int = 32) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """({domain: AUC per neuron}, {corpus: AUC per neuron}) over held-out windows."""
    domains = domains or DOMAINS
    corpora = [c for c in sorted(windows) if len(windows[c])]
    acts = torch.cat([layer0_preactivations(model, windows[c], min_pos) for c in corpora]).numpy()
    labels = np.concatenate([[c] * len(windows[c]) for c in corpora])
    by_domain = {}
    for name, members in domains.items():
        positive = np.isin(labels, members)
        if positive.any() and (~positive).any():
            by_domain[name] = auc(acts, positive)
    by_corpus = {c: auc(acts, labels == c) for c in corpora}
    if not by_domain:  # corpora outside the known domains (tests): each corpus is a domain
        by_domain = dict(by_corpus)
    return by_domain, by_corpus


def analyze(run_dir: str | Path, checkpoint: str | None = None,
            corpora_dir: str | Path | None = None, per_corpus: int = 64,
            threshold: float = 0.9, token: str = " the", neurons: bool = True) -> dict:
    """Both checks on a run directory (or one of its checkpoints); a JSON-ready summary.
    ``neurons=False`` skips the second (which reads and runs the held-out documents)."""
    model, tokenizer = load_run(run_dir, checkpoint)
    n_ctx = model.config.n_positions
    eot_id = tokenizer.convert_tokens_to_ids(EOT)
    (token_id,) = tokenizer.encode(token)
    kernels = {str(q): head_kernels(model, eot_id, token_id, q)
               for q in sorted({n_ctx // 2, n_ctx - 1})}
    if not neurons:
        return {"run": str(run_dir), "checkpoint": checkpoint, "kernels": kernels}
    windows = heldout_windows(run_dir, tokenizer, corpora_dir, n_ctx, per_corpus)
    mixed = np.concatenate([w[:4] for w in windows.values()])
    profiles = distance_profiles(model, mixed)
    by_domain, by_corpus = neuron_domain_auc(model, windows)
    stacked = np.stack(list(by_domain.values()))  # [domain, neuron]
    names = list(by_domain)
    separating = {}
    for j in np.flatnonzero(stacked.max(0) >= threshold):
        separating[int(j)] = {names[i]: round(float(stacked[i, j]), 3)
                              for i in np.flatnonzero(stacked[:, j] >= threshold)}
    return {
        "run": str(run_dir),
        "checkpoint": checkpoint,
        "kernels": kernels,
        "text_profiles": profiles,
        "windows_per_corpus": {c: int(len(w)) for c, w in windows.items()},
        "threshold": threshold,
        "n_neurons": int(stacked.shape[1]),
        "n_separating": len(separating),
        "n_separating_low": int((stacked.min(0) <= 1 - threshold).sum()),
        "n_separating_at": {str(t): int((stacked.max(0) >= t).sum()) for t in (0.9, 0.95, 0.99)},
        "per_domain_count": {n: int((by_domain[n] >= threshold).sum()) for n in names},
        "per_domain_best": {n: round(float(by_domain[n].max()), 3) for n in names},
        "per_corpus_count": {c: int((a >= threshold).sum()) for c, a in by_corpus.items()},
        "separating_neurons": separating,
    }


def format_summary(result: dict) -> str:
    lines = []
    for q, rows in result["kernels"].items():
        lines.append(f"layer-0 heads at query position {q} (n_eff over 1..{q} without BOS):")
        for r in rows:
            lines.append(f"  head {r['head']}: n_eff {r['n_eff']:7.1f}  mean dist "
                         f"{r['mean_distance']:6.1f}  prev {r['prev']:.3f}  self {r['self']:.3f}  "
                         f"bos {r['bos']:.3f}")
    if "n_neurons" not in result:
        return "\n".join(lines)
    lines.append("layer-0 heads on held-out text, mean attention by distance (queries in the "
                 "second half, BOS left out):")
    for r in result["text_profiles"]:
        lines.append(f"  head {r['head']}: n_eff {r['n_eff']:7.1f}  mean dist "
                     f"{r['mean_distance']:6.1f}  prev {r['prev']:.3f}  self {r['self']:.3f}")
    lines.append(f"layer-0 neurons with AUC >= {result['threshold']} for some domain: "
                 f"{result['n_separating']} of {result['n_neurons']} "
                 f"({result['n_separating_low']} with AUC <= {1 - result['threshold']:.1f})")
    lines.append("  neurons with some domain's AUC >= 0.9 / 0.95 / 0.99: " + " / ".join(
        str(v) for v in result["n_separating_at"].values()))
    lines.append("  per domain: " + ", ".join(
        f"{d} {n} (best {result['per_domain_best'][d]:.2f})"
        for d, n in result["per_domain_count"].items()))
    lines.append("  per corpus: " + ", ".join(
        f"{c} {n}" for c, n in result["per_corpus_count"].items()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m context_neurons.training analyze")
    parser.add_argument("run_dir")
    parser.add_argument("--checkpoint", default=None, help="e.g. step-512")
    parser.add_argument("--corpora", default=None)
    parser.add_argument("--windows", type=int, default=64, help="held-out windows per corpus")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", default=None, help="write the full result here")
    parser.add_argument("--kernels-only", action="store_true", help="skip the neurons")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    result = analyze(args.run_dir, args.checkpoint, args.corpora, args.windows,
                     neurons=not args.kernels_only)
    print(format_summary(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0
