"""Time protocol discovery-verdict-gpt2's whole evaluation on the 12-layer GPT-2-shaped stand-in
(GPT-2's tokenizer and GPT-2 Small's layer-0 sizes, so its layer-0 cost is GPT-2 Small's), phase
by phase, and the bag of tokens' closed form against the straightforward way (the forward pass
on ``[BOS, t, ..., t]`` for every token), checked equal on the tokens both computed.

    python benchmarks/verdict_gpt2.py [--threads 2] [--device cpu] [--resamples 2000]
                                      [--bag-sample 512] [--share-sample 32]

The protocol's runtime targets: under 300 s on 2 CPU cores, under 60 s on a GPU (its
``runtime.targets``; no rule or verdict depends on them). The tokenization of the corpora is
timed on its own (``data``), with an empty token store (cold, as a first run) and again with the
store the first call wrote (warm, as every later run: :mod:`context_neurons.text.token_store`);
the whole evaluation's total counts the cold one. The forward bag of tokens is timed on
``--bag-sample`` tokens and scaled to the support's size (the whole would take as long as the
rest of the evaluation several times over); the previous-token share through the hooks
(``hook_pattern``) on ``--share-sample`` windows, against the weights' pass that also gives the
mean ``z`` (:func:`~context_neurons.activations.head_statistics`). The stand-in's numbers are a plumbing check, never a GPT-2 result.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

from context_neurons import config as settings
from context_neurons.activations import head_statistics, mean_head_z
from context_neurons.hooks import run_until
from context_neurons.models import load_model
from context_neurons.models.weights import as_weights
from context_neurons.training.config import EOT
from context_neurons.verdict.bag_of_tokens import closed_form_bag_responses
from context_neurons.verdict.data import unigram_distributions
from context_neurons.verdict.gpt2 import evaluate_gpt2
from context_neurons.verdict.options import RunOptions
from context_neurons.verdict.gpt2_data import gpt2_data
from context_neurons.verdict.gpt2_protocol import load_protocol_gpt2
from context_neurons.verdict.gpt2_result import model_identity
from context_neurons.verdict.baselines import bag_responses, bag_support

REPO = Path(__file__).resolve().parents[1]


def standin(directory: Path, device: str = "cpu"):
    """The stand-in, written by ``scripts/simulate_online.py`` and loaded as ``gpt2``."""
    sys.path.insert(0, str(REPO / "scripts"))
    from simulate_online import write_gpt2_standin  # noqa: E402 (a script beside this one)

    os.environ[settings.GPT2_WEIGHTS.name] = str(write_gpt2_standin(directory))
    return load_model("gpt2", device=device)


def bag_ratio(model, data, sample: int) -> None:
    """The closed form on the whole support against the forward pass on a sample, scaled."""
    protocol = load_protocol_gpt2()
    start, length = protocol.data.window_mean_start, protocol.bag_length
    distributions = unigram_distributions({d: data.cal[d] for d in data.pooled},
                                          model.cfg.d_vocab)
    support = bag_support(distributions)
    bos = model.tokenizer.convert_tokens_to_ids(EOT)
    t0 = time.perf_counter()
    closed = closed_form_bag_responses(as_weights(model), support, length, start, bos)
    closed_s = time.perf_counter() - t0
    picked = torch.linspace(0, len(support) - 1, min(sample, len(support))).long().unique()
    t0 = time.perf_counter()
    forward = bag_responses(model, support[picked], length, start, bos)
    forward_s = (time.perf_counter() - t0) * len(support) / len(picked)
    error = float((closed[picked] - forward).abs().max() / forward.abs().max())
    print(f"bag of tokens over {len(support)} tokens: closed form {closed_s:.1f} s, forward "
          f"pass {forward_s:.1f} s (scaled from {len(picked)} tokens): {forward_s / closed_s:.1f}x;"
          f" largest relative difference {error:.1e}")


@torch.no_grad()
def share_ratio(model, windows: list, sample: int, start: int) -> None:
    """The previous-token share and mean z from the weights (one pass) against the share read
    from ``hook_pattern`` and the mean z, each its own pass, on ``sample`` windows."""
    windows = windows[:sample]
    t0 = time.perf_counter()
    ours = head_statistics(model, windows, start)
    ours_s = time.perf_counter() - t0
    name, total, count = "blocks.0.attn.hook_pattern", torch.zeros(model.cfg.n_heads), 0
    t0 = time.perf_counter()
    for w in windows:
        pattern = run_until(model, w[None].to(model.cfg.device), name)[name][0]
        n = torch.arange(start, len(w))
        total, count = total + pattern[:, n, n - 1].sum(-1).cpu(), count + len(n)
    mean_z = mean_head_z(model, windows)
    hooks_s = time.perf_counter() - t0
    error = float((ours.previous_share - total / count).abs().max())
    print(f"previous-token share and mean z on {len(windows)} windows: one pass from the weights "
          f"{ours_s:.1f} s, the hooks' pattern and a mean-z pass {hooks_s:.1f} s: "
          f"{hooks_s / ours_s:.1f}x; largest difference {error:.1e} "
          f"(mean z equal: {torch.equal(mean_z, ours.mean_z)})")


def data_times(tokenizer, protocol, cache: Path):
    """The data read with an empty token store, then by a copy of the tokenizer (not in the
    process's memory cache) with the store filled."""
    os.environ[settings.CACHE.name] = str(cache)
    t0 = time.perf_counter()
    data = gpt2_data(tokenizer, protocol.data)
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    gpt2_data(copy.deepcopy(tokenizer), protocol.data)  # another object: no in-memory cache
    warm = time.perf_counter() - t0
    print(f"data (reading and tokenizing the corpora): {cold:.1f} s cold, {warm:.1f} s with the "
          f"token store warm")
    return data, cold


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu",
                        help="where the stand-in runs: cpu (the 300 s target), cuda (60 s)")
    parser.add_argument("--resamples", type=int, default=None,
                        help="bootstrap resamples (default: the protocol's 2000)")
    parser.add_argument("--bag-sample", type=int, default=512,
                        help="tokens of the forward bag of tokens timed (then scaled)")
    parser.add_argument("--share-sample", type=int, default=32,
                        help="windows of the previous-token share through the hooks")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    protocol = load_protocol_gpt2()
    with tempfile.TemporaryDirectory() as tmp:
        loaded = standin(Path(tmp), args.device)
        data, data_s = data_times(loaded.model.tokenizer, protocol, Path(tmp) / "cache")
        share_ratio(loaded.model, data.pooled_cal_windows, args.share_sample,
                    protocol.data.window_mean_start)
        bag_ratio(loaded.model, data, args.bag_sample)
        identity = model_identity(loaded.name, loaded.source, protocol)
        result = evaluate_gpt2(loaded.model, identity, protocol, data,
                               RunOptions(args.resamples))
    runtime = result.core.runtime
    for phase, seconds in runtime.items():
        if isinstance(seconds, float):
            print(f"  {phase}: {seconds:.1f} s")
    total = runtime["total_s"] + data_s
    targets = protocol.document["runtime"]["targets"]
    target = (f"{targets['gpu_s']} s on a GPU" if str(loaded.model.cfg.device).startswith("cuda")
              else f"{targets['cpu_2_cores_s']} s on 2 CPU cores")
    print(f"whole evaluation with the data (cold): {total:.1f} s on {loaded.model.cfg.device}, "
          f"{args.threads} threads (target {target}); {identity.label}")
    print("\n".join(result.sentences()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
