"""Time chapter 8's pre-registered evaluations on the trained model, phase by phase, and the
batched bootstrap against the straightforward way (one resample at a time, through SciPy).

    python benchmarks/verdict.py [--protocol v1 v2 v3] [--resamples 1000] [--threads 2]

Prints seconds per phase for each protocol (the issue's budget: under 2 minutes on 2 CPU cores
for one whole evaluation) and the speed-up of the batched bootstrap (on v1's additive truth,
Cohen's d 1.0 and context part 0.5), of the forward passes: one pass to ``hook_z`` for every
head set's ablation (``activations.LayerZeroPasses``: layer 0 from the weights, window means
taken before ``W_in``) against one pass per ablation through the hooks, and of the predicted
path shifts (``domain_shift.predict_path_shifts``) against one domain at a time on every token;
each pair of ways is checked equal. Protocol v3 runs with its
own 2000 resamples (``--v3-resamples`` to change) and prints its phases; the label-free arm,
step 0 and the planted control are timed apart (``python -m context_neurons.verdict.v3``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from scipy.stats import spearmanr

from context_neurons import activations as act
from context_neurons import discovery as disc
from context_neurons import domain_shift as ds
from context_neurons.evaluation import position_mask
from context_neurons.hooks import run_until
from context_neurons.method import MethodValues
from context_neurons.models import load_model
from context_neurons.models.loading import TRAINED_DIR
from context_neurons.training.summary import training_run
from context_neurons.verdict import evaluate, load_protocol, protocol_data
from context_neurons.verdict import statistics as st
from context_neurons.verdict.evaluate import head_sets, measure
from context_neurons.verdict.options import RunOptions
from context_neurons.verdict.v3 import evaluate_v3
from context_neurons.verdict.protocol import load_protocol_v3
from context_neurons.verdict.v3_data import v3_data
from context_neurons.text.windows import pad_windows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--protocol", nargs="+", choices=["v1", "v2", "v3"],
                        default=["v1", "v2"])
    parser.add_argument("--v3-resamples", type=int, default=None,
                        help="protocol v3's resamples (default: its registered 2000)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = load_model("trained", device="cpu").model
    record = training_run(TRAINED_DIR)  # the typed record, read once
    measured = None
    for version in args.protocol:
        if version == "v3":
            time_v3(model, record, args)
            continue
        measured = time_protocol(model, record, load_protocol(version), version, args)
    if measured is not None:
        time_bootstrap(measured)
        time_ablations(model, record)
        time_path_shifts(model, record)
    return 0


def time_v3(model, record, args) -> None:
    """Protocol v3's phases (its budget: 120 s on 2 CPU cores, the label-free arm apart)."""
    protocol = load_protocol_v3()
    t0 = time.perf_counter()
    data = v3_data(model.tokenizer, record, protocol)
    t_data = time.perf_counter() - t0
    result = evaluate_v3(model, record, protocol, data, RunOptions(args.v3_resamples))
    runtime = {"data (CONFIRM manifest and CAL)": t_data, **result.runtime}
    runtime["total_within_budget_s"] += t_data
    print(f"protocol v3: {args.threads} threads, {result.primary.n_resamples} resamples, "
          f"{sum(len(c.windows) for c in data.confirm.values())} CONFIRM windows, context set "
          f"{list(result.context_set.heads)}")
    for phase, seconds in runtime.items():
        if isinstance(seconds, float):  # the phases and their total (not the thread count)
            print(f"  {phase}: {seconds:.1f} s")


def time_protocol(model, record, protocol, version: str, args):
    """Seconds to read the documents, to run the forward passes and the whole evaluation."""
    t0 = time.perf_counter()
    data = protocol_data(model.tokenizer, record, protocol)
    t_data = time.perf_counter() - t0
    sets, _ = head_sets(MethodValues(model), protocol, data)
    t0 = time.perf_counter()
    measured = measure(model, data, sets, protocol.data.window_mean_start)
    t_measure = time.perf_counter() - t0
    t0 = time.perf_counter()
    evaluate(model, record, protocol, options=RunOptions(args.resamples))
    t_all = time.perf_counter() - t0
    print(f"protocol {version}: {args.threads} threads, {args.resamples} resamples, "
          f"{sum(len(d.eval_windows) for d in data.values())} EVAL windows, "
          f"primary heads {sets['primary']}")
    print(f"  read and split the documents: {t_data:.1f} s")
    print(f"  forward passes (measure):     {t_measure:.1f} s")
    print(f"  the whole evaluation:         {t_all:.1f} s (documents and passes included)")
    return measured


@torch.no_grad()
def means_through_hooks(model, windows, start: int, heads=(), mean_z=None, batch_size: int = 32):
    """The straightforward way: one forward pass to ``blocks.0.mlp.hook_pre`` per ablation,
    ``heads``' ``hook_z`` replaced by ``mean_z`` in a hook."""
    def replace(z, hook):
        z[:, :, list(heads)] = mean_z[list(heads)]
        return z

    hooks = [("blocks.0.attn.hook_z", replace)] if heads else []
    stop, means = "blocks.0.mlp.hook_pre", []
    for b in range(0, len(windows), batch_size):
        tokens, lengths = pad_windows(windows[b : b + batch_size])
        pre = run_until(model, tokens, stop, extra_hooks=hooks)[stop]
        mask = position_mask(tokens, lengths, start)[..., None].to(pre.dtype)
        means.append((pre * mask).sum(1) / mask.sum(1))
    return torch.cat(means)


def time_ablations(model, record, n_windows: int = 256) -> None:
    """Unablated moments and two head sets' mean-ablations of v1's first EVAL windows: from one
    pass to ``hook_z`` (LayerZeroPasses) against three passes through the hooks."""
    protocol = load_protocol("v1")
    data = protocol_data(model.tokenizer, record, protocol)
    windows = [w for d in data.values() for w in d.eval_windows][:n_windows]
    start, heads = protocol.data.window_mean_start, list(range(model.cfg.n_heads))
    sets = [heads[: len(heads) // 2], heads[len(heads) // 2 :]]
    mean_z = act.mean_head_z(model, windows[:32])
    t0 = time.perf_counter()
    passes = act.LayerZeroPasses.run(model, windows, start, batch_size=32)
    ours = [passes.means(), *[passes.ablated(h, mean_z) for h in sets]]
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    theirs = [means_through_hooks(model, windows, start),
              *[means_through_hooks(model, windows, start, h, mean_z) for h in sets]]
    t_hooks = time.perf_counter() - t0
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
    print(f"forward passes, {len(windows)} windows, unablated and two ablations: one pass "
          f"{t_ours:.1f} s, one pass per ablation {t_hooks:.1f} s "
          f"({t_hooks / max(t_ours, 1e-9):.1f}x); equal")


def time_bootstrap(measured) -> None:
    """The bootstrap's truth and Spearman: batched against one resample at a time with SciPy."""
    n_dom = len(measured.domains)
    weights = st.cluster_weights(measured.domain_index, measured.documents, 50, 0)
    t0 = time.perf_counter()
    full = st.domain_shifts(measured.full, measured.domain_index, n_dom, weights)
    abl = st.domain_shifts(measured.ablated["primary"], measured.domain_index, n_dom, weights)
    batched = st.additive_truth(full, abl, 1.0, 0.5)
    rho_batched = st.spearman(full.shift, abl.shift)
    t_batched = time.perf_counter() - t0
    t0 = time.perf_counter()
    for b in range(len(weights)):
        f = st.domain_shifts(measured.full, measured.domain_index, n_dom, weights[b : b + 1])
        a = st.domain_shifts(measured.ablated["primary"], measured.domain_index, n_dom,
                             weights[b : b + 1])
        one = st.additive_truth(f, a, 1.0, 0.5)
        assert np.array_equal(one.mask[0], batched.mask[b])
        for d in range(n_dom):
            rho = spearmanr(f.shift[0, d], a.shift[0, d])[0]
            assert abs(rho - rho_batched[b, d]) < 1e-9
    t_loop = time.perf_counter() - t0

    print(f"bootstrap of truth and rho, 50 resamples: batched {t_batched:.2f} s, one at a time "
          f"with SciPy {t_loop:.2f} s ({t_loop / max(t_batched, 1e-9):.1f}x); equal")


@torch.no_grad()
def path_shifts_one_domain_at_a_time(pieces, read, distributions, start: int):
    """The straightforward way (the package's own code before it was batched): every domain's
    means and variance on every token of the support, one domain after another."""
    n_heads, length = pieces.kernels.shape[0], pieces.kernels.shape[1]
    pieces = ds.pieces_as(pieces, torch.float64)
    support = (torch.stack(list(distributions.values())).sum(0) > 0).nonzero().flatten()
    eps = torch.einsum("ptd,dj->ptj", pieces.outputs[:, support].float(), read.float())
    eps_bos = (pieces.bos_outputs @ read.double()).float()
    means, variances = [], []
    for p in distributions.values():
        p = p.double()
        _, beta, weights, a = ds._domain_terms(pieces, p, start, length)
        beta_bar = beta[:, start:length].mean(-1).float()
        evals, evecs = torch.linalg.eigh(a @ a.T)
        root = (evecs * evals.clamp(min=0).sqrt()).float()
        w_s = weights[:, support].float()
        ratio = (weights[:, support] / p[support].clamp(min=1e-300)).float()
        m = torch.einsum("pt,ptj->pj", w_s, eps)
        means.append(torch.cat([beta_bar[:, None] * eps_bos + (1 - beta_bar[:, None])
                                * m[:n_heads], m[n_heads:]]).double())
        g = ratio[..., None] * (eps - m[:, None])
        mixed = torch.einsum("pk,ptj->ktj", root, g)
        variances.append(torch.einsum("t,ktj->j", p[support].float(), mixed**2))
    means = torch.stack(means)
    shifts = means - (means.sum(0, keepdim=True) - means) / (len(means) - 1)
    return shifts.float(), torch.stack(variances)


def time_path_shifts(model, record) -> None:
    """predict_path_shifts on v2's domains against the straightforward way; checked equal."""
    method = MethodValues(model)
    protocol = load_protocol("v2")
    data = protocol_data(model.tokenizer, record, protocol)
    sets, _ = head_sets(method, protocol, data)
    circuit = method.circuit(sets["primary"])
    pieces = ds.path_pieces(model, circuit.calibration.tokens[1:])
    read = disc.read_vectors(circuit, model)
    distributions = {name: ds.unigram_distribution(item.cal_windows, model.cfg.d_vocab)
                     for name, item in data.items()}
    start = protocol.data.window_mean_start
    t0 = time.perf_counter()
    ours = ds.predict_path_shifts(pieces, read, distributions, start)
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    shifts, variances = path_shifts_one_domain_at_a_time(pieces, read, distributions, start)
    t_plain = time.perf_counter() - t0
    scale = float(shifts.abs().max())
    torch.testing.assert_close(ours.shifts, shifts, atol=1e-4 * scale, rtol=1e-4)
    torch.testing.assert_close(ours.variance, variances, atol=0, rtol=1e-4)
    print(f"predicted path shifts, {len(distributions)} domains: {t_ours:.1f} s, one domain "
          f"at a time on every token {t_plain:.1f} s ({t_plain / max(t_ours, 1e-9):.1f}x); equal")


if __name__ == "__main__":
    raise SystemExit(main())
