"""The pre-registered evaluation (issue 22): the frequency-aware score's algebra on hand-built
cases, its token outputs against the model's hooks, and the statistics against SciPy and
scikit-learn, with the verdict rule's boundaries."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr
from sklearn.metrics import roc_auc_score

from context_neurons import domain_shift
from context_neurons.domain_shift import (
    DomainShiftPrediction,
    PathPieces,
    _domain_terms,
    path_pieces,
    permuted_vocabulary,
    predict_domain_shifts,
    predict_path_shifts,
    unigram_distribution,
)
from context_neurons.checks import DataError, InputError
from context_neurons.verdict import statistics as st
from context_neurons.verdict.data import cal_fraction_value, is_cal
from context_neurons.verdict.protocol import load_protocol
from verdict_cases import evaluation_of, score_result  # tests/unit/verdict_cases.py

RULE = load_protocol().verdict


# ----------------------------------------------------------------------------------------------
# The algebra on hand-built pieces
# ----------------------------------------------------------------------------------------------


def one_head_pieces(log_c, outputs, n_ctx=4, bos_log=-math.inf):
    """One head with a uniform kernel over its keys and a direct path; BOS weight exp(bos_log);
    ``outputs [path, vocab, d_model]``: the head's values with ``W_O`` the identity."""
    kernels = torch.tril(torch.ones(n_ctx, n_ctx, dtype=torch.float64))
    kernels = (kernels / kernels.sum(-1, keepdim=True))[None]
    outputs = torch.tensor(outputs, dtype=torch.float64)
    return PathPieces(
        log_content=torch.tensor([log_c, [0.0] * len(log_c)], dtype=torch.float64),
        kernels=kernels,
        log_bos=torch.full((1, n_ctx), bos_log, dtype=torch.float64),
        values=outputs[:1],
        out_proj=torch.eye(outputs.shape[-1], dtype=torch.float64)[None],
        direct=outputs[1],
        bos_outputs=torch.zeros(1, 1, dtype=torch.float64),
    )


def test_mean_is_the_content_weighted_average_and_the_kernel_drops_out():
    # vocabulary {0, 1, 2}; head: c = (1, 2, 4), eps_h = (1, 0, -1) (d_model 1, read vector 1);
    # direct path eps_dir = (10, 20, 30).
    pieces = one_head_pieces([0.0, math.log(2), math.log(4)], [[[1.0], [0.0], [-1.0]],
                                                                  [[10.0], [20.0], [30.0]]])
    read = torch.ones(1, 1, dtype=torch.float64)
    p_a = torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64)
    p_b = torch.tensor([0.0, 0.5, 0.5], dtype=torch.float64)
    out = predict_domain_shifts(pieces, read, {"a": p_a, "b": p_b}, [0], start=1, length=4)
    # head means: a: (0.5*1*1 + 0.5*2*0) / (0.5*1 + 0.5*2) = 1/3; b: (0 + 0.5*4*(-1)) / 3 = -2/3
    # shift of a = 1/3 - (-2/3) = 1, of b = -1 (two domains: the rest is the other one)
    assert out.shift_context[:, 0].tolist() == pytest.approx([1.0, -1.0], abs=1e-6)
    # direct path: a 15, b 25: shifts -10 and +10
    assert out.shift_other[:, 0].tolist() == pytest.approx([-10.0, 10.0], abs=1e-5)


def test_bos_share_scales_the_shift():
    # BOS weight b = 1 at every position; uniform kernel over n + 1 keys, so kappa_n = 1/(n+1)
    # and with c = 1 everywhere, E D_n = 1 + (1 - kappa_n) = 1 + n/(n+1); beta_n = 1 / E D_n.
    n_ctx = 4
    pieces = one_head_pieces([0.0, 0.0], [[[1.0], [-1.0]], [[0.0], [0.0]]], n_ctx, bos_log=0.0)
    pieces.log_bos[:] = torch.log(pieces.kernels[0, :, 0])  # b_n = pos_n(0) c(BOS), c(BOS) = 1
    read = torch.ones(1, 1, dtype=torch.float64)
    dists = {"a": torch.tensor([1.0, 0.0]), "b": torch.tensor([0.0, 1.0])}
    out = predict_domain_shifts(pieces, read, dists, [0], start=2, length=4)
    # kappa_n = 1/(n+1), b_n = kappa_n, E D_n = kappa_n + (1 - kappa_n) = 1: beta_n = kappa_n.
    beta_bar = (1 / 3 + 1 / 4) / 2  # positions 2 and 3
    # means: a: (1 - beta_bar) * 1, b: -(1 - beta_bar); shift of a = 2 (1 - beta_bar)
    assert float(out.shift_context[0, 0]) == pytest.approx(2 * (1 - beta_bar), abs=1e-6)


def test_variance_of_the_direct_path_is_the_token_variance_over_the_window():
    # the direct path alone (no head counted, head outputs zero): window mean of N iid tokens
    # has variance Var_p(eps_dir) / N. p = (1/2, 1/2), eps_dir = (0, 2): Var = 1; N = 2.
    pieces = one_head_pieces([0.0, 0.0], [[[0.0], [0.0]], [[0.0], [2.0]]], n_ctx=4)
    read = torch.ones(1, 1, dtype=torch.float64)
    dists = {"a": torch.tensor([0.5, 0.5]), "b": torch.tensor([0.5, 0.5])}
    out = predict_domain_shifts(pieces, read, dists, [0], start=2, length=4)
    assert out.variance[:, 0].tolist() == pytest.approx([0.5, 0.5], abs=1e-6)
    assert out.shift[:, 0].tolist() == pytest.approx([0.0, 0.0], abs=1e-6)


@pytest.mark.parametrize("block", [512, 1, 2])
def test_shifts_and_variances_equal_the_formulas_token_by_token(block, monkeypatch):
    """Two heads and the direct path, three domains on overlapping supports, neurons in chunks
    and the variance's tokens in blocks (``block``): every mean and variance against the module
    docstring's sums written out per token."""
    monkeypatch.setattr(domain_shift, "VARIANCE_BLOCK", block)
    gen = torch.Generator().manual_seed(0)
    n_heads, n_vocab, n_ctx, d_model, start = 2, 7, 6, 3, 2
    kernels = torch.rand(n_heads, n_ctx, n_ctx, generator=gen, dtype=torch.float64).tril()
    pieces = PathPieces(
        log_content=torch.cat([3 * torch.randn(n_heads, n_vocab, generator=gen,
                                               dtype=torch.float64),
                               torch.zeros(1, n_vocab, dtype=torch.float64)]),
        kernels=kernels / kernels.sum(-1, keepdim=True),
        log_bos=torch.randn(n_heads, n_ctx, generator=gen, dtype=torch.float64),
        values=torch.randn(n_heads, n_vocab, 2, generator=gen, dtype=torch.float64),
        out_proj=torch.randn(n_heads, 2, d_model, generator=gen, dtype=torch.float64),
        direct=torch.randn(n_vocab, d_model, generator=gen, dtype=torch.float64),
        bos_outputs=torch.randn(n_heads, d_model, generator=gen, dtype=torch.float64))
    read = torch.randn(d_model, 5, generator=gen, dtype=torch.float64)
    dists = {}
    for name, tokens in {"a": [0, 1, 2], "b": [1, 2, 3, 4], "c": [0, 4]}.items():
        p = torch.zeros(n_vocab, dtype=torch.float64)
        p[tokens] = torch.rand(len(tokens), generator=gen, dtype=torch.float64) + 0.1
        dists[name] = p / p.sum()  # tokens 5 and 6 in no domain
    out = predict_path_shifts(pieces, read, dists, start, chunk=2)
    eps = torch.einsum("ptd,dj->ptj", pieces.outputs, read)  # [path, token, neuron], unfactored
    eps_bos = pieces.bos_outputs @ read
    means, variances = [], []
    for p in dists.values():
        _, beta, _, a = _domain_terms(pieces, p, start, n_ctx)
        c = pieces.log_content.exp()  # [path, token]
        s = (p * c).sum(-1)  # S_h (1 for the direct path)
        m = torch.stack([(p * c[q] * eps[q].T).sum(-1) / s[q] for q in range(n_heads + 1)])
        beta_bar = beta[:, start:].mean(-1)
        means.append(torch.cat([beta_bar[:, None] * eps_bos
                                + (1 - beta_bar[:, None]) * m[:n_heads], m[n_heads:]]))
        gram = a @ a.T
        variance = torch.zeros(read.shape[1], dtype=torch.float64)
        for t in range(n_vocab):
            g = c[:, t, None] / s[:, None] * (eps[:, t] - m)  # [path, neuron]
            variance += p[t] * torch.einsum("pj,pq,qj->j", g, gram, g)
        variances.append(variance)
    means = torch.stack(means)
    shifts = means - (means.sum(0, keepdim=True) - means) / 2
    torch.testing.assert_close(out.shifts, shifts.float(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.variance, torch.stack(variances).float(), atol=1e-6,
                               rtol=1e-5)


def test_score_is_standardized_shift_times_clipped_share():
    pred = DomainShiftPrediction(
        domains=["a", "b"], heads=[0],
        shift_context=torch.tensor([[2.0, -1.0, 0.0], [-2.0, 1.0, 0.0]]),
        shift_other=torch.tensor([[2.0, 1.0, 0.0], [-2.0, -1.0, 0.0]]),
        variance=torch.tensor([[4.0, 1.0, 1.0], [4.0, 1.0, 1.0]]),
    )
    # neuron 0: shift 4 / sd 2 = 2, share 1/2 -> 1; neuron 1: shift 0 -> share 0 -> 0;
    # neuron 2: nothing moves -> 0
    assert pred.score().tolist() == pytest.approx([1.0, 0.0, 0.0])


def test_unigram_distribution_skips_bos_and_sums_to_one():
    windows = [torch.tensor([9, 1, 1, 2]), torch.tensor([9, 2])]
    p = unigram_distribution(windows, d_vocab=10)
    assert p[9] == 0 and p[1] == pytest.approx(0.5) and p[2] == pytest.approx(0.5)
    shuffled = permuted_vocabulary({"a": p}, seed=0)["a"]
    assert sorted(shuffled.tolist()) == sorted(p.tolist()) and not torch.equal(shuffled, p)


def test_token_outputs_match_the_model_hooks(small_model):
    """u_h(t) = value of t at the reference position times W_O, against hook_v; and the BOS
    output at position 0."""
    model = small_model
    n_ref = model.cfg.n_ctx // 2
    reference = torch.arange(1, 20)
    pieces = path_pieces(model, reference, dest_token=5, n_ref=n_ref, bos_token=0)
    tokens = torch.full((1, n_ref + 1), 5)
    tokens[0, 0] = 0
    for t in (3, 7):
        tokens[0, n_ref] = t
        _, cache = model.run_with_cache(tokens, names_filter="blocks.0.attn.hook_v")
        v = cache["blocks.0.attn.hook_v"][0, n_ref]  # [head, d_head]
        expected = torch.einsum("he,hed->hd", v, model.blocks[0].attn.W_O)
        assert torch.allclose(pieces.outputs[:-1, t], expected, atol=1e-5)
        bos = torch.einsum("he,hed->hd", cache["blocks.0.attn.hook_v"][0, 0],
                           model.blocks[0].attn.W_O)
        assert torch.allclose(pieces.bos_outputs, bos, atol=1e-5)
    assert torch.equal(pieces.outputs[-1], model.W_E)


# ----------------------------------------------------------------------------------------------
# Statistics against the libraries, and by hand
# ----------------------------------------------------------------------------------------------


def test_auc_matches_scikit_learn_with_ties():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 5, size=(4, 50)).astype(float)  # many ties
    truth = rng.random((4, 50)) < 0.3
    ours = st.auc(scores, truth)
    for row in range(4):
        assert ours[row] == pytest.approx(roc_auc_score(truth[row], scores[row]), abs=1e-12)
    assert math.isnan(float(st.auc(scores[0], np.zeros(50, bool))))


@pytest.mark.parametrize("ties", [True, False])
def test_resampled_aucs_are_the_aucs_of_the_drawn_scores(ties):
    """Ranks counted from one sort of the scores (``drawn_ranks``) are ``rankdata``'s of every
    draw, ties averaged, and the resampled AUCs are ``auc`` of the drawn scores exactly; a score
    with NaN takes the generic path (rankdata's NaN rule)."""
    from scipy.stats import rankdata

    from context_neurons.verdict.comparison import drawn_ranks, resampled_aucs

    rng = np.random.default_rng(3)
    scores = rng.integers(0, 6, 40).astype(float) if ties else rng.normal(size=40)
    draws = rng.integers(0, 40, size=(25, 40))
    boot_mask = rng.random((25, 40)) < 0.3
    assert np.array_equal(drawn_ranks(scores, draws),
                          rankdata(scores[draws], axis=-1, method="average"))
    expected = st.auc(scores[draws], np.take_along_axis(boot_mask, draws, 1))
    assert np.array_equal(resampled_aucs(scores, boot_mask, draws), expected,
                          equal_nan=True)
    scores[5] = np.nan
    expected = st.auc(scores[draws], np.take_along_axis(boot_mask, draws, 1))
    assert np.array_equal(resampled_aucs(scores, boot_mask, draws), expected,
                          equal_nan=True)


def test_ranks_are_scipys_average_ranks_exactly():
    """Ranks by torch's sort are ``rankdata``'s, ties averaged, along the last axis of 1-, 2- and
    3-dimensional arrays; a row holding NaN is all NaN, as rankdata's."""
    from scipy.stats import rankdata

    rng = np.random.default_rng(4)
    for x in (rng.normal(size=30), rng.integers(0, 4, size=(6, 25)).astype(float),
              rng.integers(0, 9, size=(3, 4, 50)).astype(float)):
        assert np.array_equal(st.ranks(x), rankdata(x, axis=-1, method="average"))
    x = rng.integers(0, 4, size=(5, 20)).astype(float)
    x[2, 7] = np.nan
    assert np.array_equal(st.ranks(x), rankdata(x, axis=-1, method="average"), equal_nan=True)
    assert np.isnan(st.ranks(x)[2]).all() and not np.isnan(st.ranks(x)[[0, 1, 3, 4]]).any()


def test_spearman_matches_scipy():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(3, 40)), rng.normal(size=(3, 40))
    for row in range(3):
        assert st.spearman(x[row], y[row]) == pytest.approx(spearmanr(x[row], y[row])[0])


def test_partial_spearman_removes_a_shared_cause():
    rng = np.random.default_rng(2)
    z = rng.normal(size=400)
    x, y = z + 0.5 * rng.normal(size=400), z + 0.5 * rng.normal(size=400)  # both follow z only
    assert float(st.spearman(x, y)) > 0.6
    assert abs(float(st.partial_spearman(x, y, z))) < 0.15


def test_domain_shifts_by_hand():
    # two domains, one neuron: a = (1, 3), b = (5, 7); means 2 and 6: shifts -4, +4;
    # pooled within variance = ((1-2)^2 + (3-2)^2 + (5-6)^2 + (7-6)^2) / (4 - 2) = 2
    values = np.array([[1.0], [3.0], [5.0], [7.0]])
    index = np.array([0, 0, 1, 1])
    out = st.domain_shifts(values, index, 2)
    assert out.shift[:, 0].tolist() == pytest.approx([-4.0, 4.0])
    assert float(out.sd[0]) == pytest.approx(math.sqrt(2))
    # a resample that draws the first window twice and drops the second: a = (1, 1), mean 1
    weights = np.array([[2.0, 0.0, 1.0, 1.0]])
    boot = st.domain_shifts(values, index, 2, weights)
    assert boot.shift[0, :, 0].tolist() == pytest.approx([-5.0, 5.0])
    assert float(boot.sd[0, 0]) == pytest.approx(1.0)  # (0 + 0 + 1 + 1) / (4 - 2)


def test_single_position_spread_pools_every_position_of_every_domain():
    # Windows of 5 positions; the spread of single positions is the within-domain variance of
    # all positions pooled (population variance, weights = windows drawn), not of window means.
    rng = np.random.default_rng(3)
    positions = rng.normal(size=(6, 5, 2)) * np.array([1.0, 3.0]) + np.arange(6)[:, None, None]
    index = np.array([0, 0, 0, 1, 1, 1])
    means, squares = positions.mean(1), (positions**2).mean(1)
    out = st.domain_shifts(means, index, 2, squares=squares)
    within = [positions[index == d].reshape(-1, 2) for d in (0, 1)]
    pooled = sum(((x - x.mean(0)) ** 2).sum(0) for x in within) / sum(len(x) for x in within)
    np.testing.assert_allclose(out.sd, np.sqrt(pooled), rtol=1e-12)
    np.testing.assert_allclose(out.shift, st.domain_shifts(means, index, 2).shift, rtol=1e-12)
    # a resample drawing window 0 twice and dropping window 1 equals that resample's positions
    weights = np.array([[2.0, 0.0, 1.0, 1.0, 1.0, 1.0]])
    boot = st.domain_shifts(means, index, 2, weights, squares)
    drawn = [np.concatenate([positions[0], positions[0], positions[2]]), positions[3:].reshape(-1, 2)]
    pooled = sum(((x - x.mean(0)) ** 2).sum(0) for x in drawn) / sum(len(x) for x in drawn)
    np.testing.assert_allclose(boot.sd[0], np.sqrt(pooled), rtol=1e-12)
    assert bool((out.sd > st.domain_shifts(means, index, 2).sd).all())  # wider than window means


@pytest.mark.parametrize(
    ("sizes", "expected", "tried"),
    [
        ({1.0: 100}, 1.0, [1.0]),  # in range at once
        ({1.0: 30, 2.0: 0}, 1.0, [1.0]),  # the lower boundary counts as in range
        ({1.0: 10, 0.5: 40, 0.25: 400}, 0.5, [1.0, 0.5]),  # step down once
        ({1.0: 10, 0.5: 500, 0.25: 900}, 0.5, [1.0, 0.5]),  # overshoot: stop, the last tried
        ({1.0: 5, 0.5: 10, 0.25: 20}, 0.25, [1.0, 0.5, 0.25]),  # never enough: the last tried
        ({1.0: 800, 2.0: 400, 4.0: 200}, 4.0, [1.0, 2.0, 4.0]),  # step up twice
        ({1.0: 800, 2.0: 300}, 2.0, [1.0, 2.0]),  # max_size 1024 / 3: 341 is in range
        ({1.0: 800, 2.0: 10, 4.0: 0}, 2.0, [1.0, 2.0]),  # overshoot upwards: the last tried
    ],
)
def test_ladder_threshold_reads_the_truth_size_in_one_direction(sizes, expected, tried):
    threshold, steps = st.ladder_threshold(sizes.__getitem__, 1.0, [0.5, 0.25], [2.0, 4.0],
                                           30, 1024 / 3)
    assert threshold == expected
    assert [t for t, _ in steps] == tried
    assert [n for _, n in steps] == [sizes[t] for t in tried]


def test_additive_truth_includes_its_boundaries():
    # d exactly 1 and the heads' part exactly one half: a context neuron; just below: not.
    full = st.Shifts(shift=np.array([[1.0, 0.999, 1.0], [-1.0, -0.999, -1.0]]),
                     sd=np.array([1.0, 1.0, 1.0]))
    ablated = st.Shifts(shift=np.array([[0.5, 0.0, 0.5001], [-0.5, 0.0, -0.5001]]),
                        sd=np.array([1.0, 1.0, 1.0]))
    truth = st.additive_truth(full, ablated, min_d=1.0, min_part=0.5)
    assert truth.mask.tolist() == [True, False, False]


def test_cluster_weights_draw_documents_not_windows():
    index = np.array([0, 0, 0, 1, 1])
    documents = ["x", "x", "y", "z", "w"]
    weights = st.cluster_weights(index, documents, n_resamples=50, seed=0)
    assert np.all(weights[:, 0] == weights[:, 1])  # windows of one document move together
    assert np.all(weights[:, :3].sum(1) == weights[:, 0] + weights[:, 2] + weights[:, 1])
    # each domain draws as many documents as it has: x (2 windows) and y -> 2 draws
    assert set(np.unique(weights[:, 0] / 1 + weights[:, 2])) <= {2.0}


def test_precision_at_truth_size_and_percentile_interval():
    assert st.precision_at_truth_size(np.array([3.0, 2.0, 1.0, 0.0]),
                                      np.array([True, False, True, False])) == 0.5
    assert st.percentile_interval(np.arange(101.0), 0.9) == pytest.approx([5.0, 95.0])


@pytest.mark.parametrize("n_truth, auc_ci, precision, rho_ci, perm, expected", [
    (29, [0.9, 1.0], 1.0, [0.9, 1.0], 0.0, "not testable"),
    (30, [0.65, 0.9], 0.375, [0.3, 0.5], 0.1, "positive"),  # every bound met with equality
    (30, [0.65, 0.9], 0.375, [0.3, 0.5], 0.1001, "inconclusive"),  # the void control
    (30, [0.65, 0.9], 0.37, [0.3, 0.5], 0.0, "inconclusive"),  # precision just below 3x
    (30, [0.42, 0.58], 0.125, [-0.1, 0.1], 0.0, "negative"),
    (30, [0.30, 0.4499], 0.0, [-0.5, 0.0], 0.0, "anti-ranking"),
    (30, [0.5, 0.7], 0.2, [0.0, 0.2], 0.0, "inconclusive"),
])
def test_verdict_rule(n_truth, auc_ci, precision, rho_ci, perm, expected):
    assert st.verdict(n_truth, auc_ci, precision, 0.125, rho_ci, perm, RULE) == expected


def _rule_and_level(version: str):
    """A protocol's verdict rule and interval level (v3's secondary verdicts use its rule)."""
    protocol = load_protocol(version)
    return protocol.verdict, protocol.bootstrap.level


@pytest.mark.parametrize("version", ["v1", "v2", "v3"])
def test_the_auc_criterion_reads_the_interval_lower_end(version):
    """Issue 54: a positive verdict needs the AUC interval's lower end at the threshold; its
    midpoint and the point estimate are not enough. A score at AUC 0.727 whose interval's
    midpoint is 0.72 but whose lower end is 0.62 is inconclusive; the same score with every
    resample the full set (an interval of one point, 0.727) is positive (v1, v2 and v3's
    secondary verdicts: ``scores.score_entry`` and ``statistics.verdict``)."""
    from context_neurons.verdict.scores import score_entry

    rule, level = _rule_and_level(version)
    threshold = rule.auc_lower_at_least
    met = dict(precision=1.0, base_rate=0.1, rho_ci=[0.9, 1.0], permutation_rho=0.0, rule=rule)
    assert st.verdict(30, [threshold - 0.01, 0.95], **met) == "inconclusive"  # midpoint 0.795
    assert st.verdict(30, [threshold, threshold + 0.01], **met) == "positive"
    assert not st.criteria([threshold - 0.01, 0.95], 1.0, 0.1, [0.9, 1.0], 0.0,
                           rule)["auc_lower_at_least"]

    n, resamples = 300, 500  # 10 truth neurons ranked first, 20 spread over the next 240
    ranked = np.concatenate([np.arange(10), np.linspace(10, 250, 20).round().astype(int)])
    mask = np.zeros(n, bool)
    mask[ranked] = True
    score = np.linspace(1.0, 0.0, n)
    truth, boot = (st.Truth(m, np.zeros(m.shape, int), np.zeros(m.shape), np.zeros(m.shape),
                            np.zeros((1, *m.shape))) for m in (mask, np.tile(mask, (resamples, 1))))
    rho_boot = np.full(resamples, 0.9)  # the rho criterion met: only the AUC decides

    def entry(neuron_draws):
        return score_entry(score, truth, boot, 0.9, rho_boot, neuron_draws, 0.0, rule, level)

    wide = entry(np.random.default_rng(1).integers(0, n, size=(resamples, n)))
    lower, upper = wide.auc_ci95
    assert lower < threshold <= min(wide.auc, (lower + upper) / 2), wide
    assert wide.precision >= rule.precision_over_base_at_least * wide.base_rate
    assert wide.verdict == "inconclusive" and not wide.criteria["auc_lower_at_least"]
    tight = entry(np.tile(np.arange(n), (resamples, 1)))
    assert tight.auc_ci95 == [tight.auc, tight.auc] and tight.auc == wide.auc
    assert tight.verdict == "positive" and tight.criteria["auc_lower_at_least"]


def test_cal_eval_split_is_a_fixed_half():
    keys = [f"corpus:{i}" for i in range(2000)]
    share = np.mean([is_cal(k) for k in keys])
    assert 0.45 < share < 0.55
    assert cal_fraction_value("corpus:1") == cal_fraction_value("corpus:1")


def test_protocol_data_without_the_corpora_is_a_clear_error(monkeypatch):
    """Online (Colab) there are no held-out documents: say so before reading anything."""
    from context_neurons.models.loading import TRAINED_DIR
    from context_neurons.training.summary import training_run
    from context_neurons.verdict import protocol_data

    monkeypatch.setenv("CONTEXT_NEURONS_CORPORA", "none")
    with pytest.raises(DataError, match="offline corpora"):
        protocol_data(None, training_run(TRAINED_DIR))


def test_protocol_v2_changes_only_what_it_says_it_changes():
    v1, v2 = load_protocol("v1"), load_protocol("v2")
    assert v2.verdict == v1.verdict and v2.bootstrap == v1.bootstrap
    assert v2.data == v1.data and v2.document["controls"] == v1.document["controls"]
    assert v2.truth.min_context_part == v1.truth.min_context_part
    assert v2.truth.single_position and not v1.truth.single_position
    assert v2.truth.has_ladder and not v1.truth.has_ladder
    assert v2.add_stable_broad_heads and not v1.add_stable_broad_heads
    assert v1.primary_score == v2.primary_score == "frequency_aware"


def test_one_loader_gives_every_registered_protocol_typed():
    """Issue 54: ``load_protocol("v3")`` answered "Unknown protocol 'v3'; there are ['v1',
    'v2']"; the one loader gives v3's typed value, and an unknown version names all three."""
    from context_neurons.verdict.protocol import ProtocolV3, load_protocol_v3

    v3 = load_protocol("v3")
    assert isinstance(v3, ProtocolV3) and v3 == load_protocol_v3()
    assert v3.name == "discovery-verdict-v3" and v3.verdict == load_protocol("v2").verdict
    assert [type(load_protocol(v)).__name__ for v in ("v1", "v2")] == ["ProtocolV1"] * 2
    with pytest.raises(InputError, match=r"Unknown protocol 'v4'; there are \['v1', 'v2', "
                                         r"'v3', 'gpt2'\]"):
        load_protocol("v4")
    with pytest.raises(InputError, match=r"verdict.protocols.load\('gpt2'\)"):
        load_protocol("gpt2")


def test_the_registry_lists_each_protocol_once_and_every_reader_takes_it_from_there():
    """Issue 51: one registry of protocols (version, file, status, result key); the loader reads
    each file from it, the main job's table prints the protocols newest first from it."""
    from context_neurons.reproduce.pipeline import PROTOCOLS as SECTION
    from context_neurons.reproduce.pipeline import PROTOCOLS_GPT2
    from context_neurons.reproduce.verdict_rows_gpt2 import RESULT_KEY
    from context_neurons.verdict.gpt2_protocol import ProtocolGPT2
    from context_neurons.verdict.protocol import protocol_file
    from context_neurons.verdict.protocols import load
    from context_neurons.verdict.registry import GPT2, PROTOCOLS, TRAINED, of_family, registered

    versions = [p.version for p in PROTOCOLS]
    assert versions == ["v1", "v2", "v3", "gpt2"]
    assert len({p.file for p in PROTOCOLS}) == len({p.result_key for p in PROTOCOLS}) == 4
    for protocol in PROTOCOLS:
        assert registered(protocol.version) is protocol
        assert protocol_file(protocol.file).is_file()
        assert load(protocol.version).document["name"] == protocol.name
    assert [p.version for p in of_family(TRAINED)] == ["v1", "v2", "v3"]
    assert isinstance(load("gpt2"), ProtocolGPT2) and of_family(GPT2) == (registered("gpt2"),)
    assert RESULT_KEY == registered("gpt2").result_key
    assert SECTION == "protocols v1, v2, v3 (chapter 8)"
    assert PROTOCOLS_GPT2 == "protocol discovery-verdict-gpt2 (chapter 8, section 8.12)"
    with pytest.raises(InputError, match="Unknown protocol 'v4'"):
        load("v4")


def test_what_every_protocol_registers_alike_is_one_typed_base_read_from_its_file():
    """Issue 51: one base (:class:`Protocol`) holds what every protocol registers alike, each
    value read from its own file; each protocol's own sections are its adapter's typed fields
    (v1 and v2: :class:`ProtocolV1`; the confirmatory v3 and gpt2 share
    :class:`ConfirmatoryProtocol`, what the shared machinery reads). The main job's typed
    results hold a field per registered protocol."""
    import dataclasses
    import re

    from context_neurons.reproduce.results import ProtocolResults
    from context_neurons.verdict.gpt2_protocol import ProtocolGPT2
    from context_neurons.verdict.protocol import (Bootstrap, ConfirmatoryProtocol, Protocol,
                                                  ProtocolV1, ProtocolV3, TruthThresholds,
                                                  VerdictRule, read_protocol_file)
    from context_neurons.verdict.protocols import load
    from context_neurons.verdict.registry import PROTOCOLS

    adapters = {"v1": ProtocolV1, "v2": ProtocolV1, "v3": ProtocolV3, "gpt2": ProtocolGPT2}
    for entry in PROTOCOLS:
        protocol, document = load(entry.version), read_protocol_file(entry.file)
        assert type(protocol) is adapters[entry.version] and isinstance(protocol, Protocol)
        assert protocol.entry is entry and protocol.version == entry.version
        assert (protocol.name, protocol.registered, protocol.question) == (
            document["name"], document["registered"], document["question"])
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", protocol.registered_date)
        assert document["registered"].startswith(protocol.registered_date)
        assert protocol.primary_score == document["scores"]["primary"]
        boot, truth, data = document["bootstrap"], document["truth"], document["data"]
        assert Bootstrap(protocol.bootstrap.resamples, protocol.bootstrap.level) == Bootstrap(
            boot["resamples"], boot["level"])
        assert TruthThresholds(protocol.truth.min_cohens_d, protocol.truth.min_context_part) == (
            TruthThresholds(truth["min_cohens_d"], truth["min_context_part"]))
        assert isinstance(protocol.truth, TruthThresholds)
        start = data["window_mean_start"] if "window_mean_start" in data else data["confirm"][
            "window_mean_start"]
        assert protocol.data.window_mean_start == start
        assert protocol.verdict == VerdictRule.from_json(document["verdict"])
        assert protocol.sections("verdict") == {"verdict": document["verdict"]}
        confirmatory = isinstance(protocol, ConfirmatoryProtocol)
        assert confirmatory == document.get("kind", "").startswith("confirmatory")
        if confirmatory:
            assert protocol.short_kind == "confirmatory"
    fields = [field.name for field in dataclasses.fields(ProtocolResults)]
    assert fields == [p.version for p in PROTOCOLS]
    undated = {**read_protocol_file(PROTOCOLS[0].file), "registered": "before any verdict"}
    with pytest.raises(DataError, match="starts with no date"):
        ProtocolV1.from_json("v1", undated)


def test_protocol_reads_every_rule_from_its_file():
    """The typed protocol holds the file's numbers, and quotes the file as registered."""
    protocol = load_protocol("v2")
    document = protocol.document
    assert protocol.name == document["name"] and protocol.version == "v2"
    assert protocol.data.window_mean_start == document["data"]["window_mean_start"]
    assert protocol.truth.ladder_down == tuple(document["truth"]["min_cohens_d_ladder"]["down"])
    assert protocol.bootstrap.resamples == document["bootstrap"]["resamples"]
    rule = document["verdict"]
    assert protocol.verdict.min_truth == rule["min_truth"]
    assert protocol.verdict.negative_rho == tuple(rule["negative"]["rho_interval_inside"])
    assert protocol.verdict.anti_auc_upper_below == rule["anti_ranking"]["auc_upper_below"]
    assert protocol.sections("verdict") == {"verdict": rule}
    assert protocol.changes_from_v1 == tuple(document["changes_from_v1"])
    with pytest.raises(TypeError):
        protocol.document["name"] = "edited"  # the registered file is read-only


def test_stable_broad_heads_add_exactly_the_heads_as_stable_as_the_contextual_ones():
    from context_neurons.models import load_model
    from context_neurons.stability import denominator_study
    from context_neurons.stability.bounds import coefficient_of_variation
    from context_neurons.verdict.evaluate import stable_broad_heads

    model = load_model("trained").model  # small, with a tokenizer that has a BOS
    gen = torch.Generator().manual_seed(0)
    bos, n_ctx = model.tokenizer.bos_token_id, model.cfg.n_ctx
    windows = [torch.randint(0, model.cfg.d_vocab, (n_ctx,), generator=gen) for _ in range(16)]
    for w in windows:
        w[w == bos] = (bos + 1) % model.cfg.d_vocab
        w[0] = bos  # BOS first, as the protocol's windows
    out = stable_broad_heads(model, windows, contextual=[1], candidates=[0, 1, 2, 3])
    study = denominator_study(model, windows, n=n_ctx // 2)
    cv = {h: coefficient_of_variation(study.measured(h)) for h in range(model.cfg.n_heads)}
    assert out.cv_texts == pytest.approx(cv) and out.n == n_ctx // 2
    assert out.largest_contextual_cv == pytest.approx(cv[1])
    assert out.added == [h for h in (0, 2, 3) if cv[h] <= cv[1]]
    everything = stable_broad_heads(model, windows, contextual=[0, 1, 2, 3], candidates=[0, 1])
    assert everything.added == []  # a contextual head is never "added"


def test_score_readings_and_the_planted_control_in_words():
    """Chapter 8.10's sentences for v1 and v2 and the planted control, computed in the package."""
    from context_neurons.verdict.evaluate import score_readings
    from context_neurons.verdict.planted import PlantedControl, ScoreAgainstPlanted

    entry = score_result(verdict=st.Verdict.INCONCLUSIVE, auc=0.7, auc_ci95=[0.6, 0.8],
                         spearman=0.5, spearman_ci95=[0.4, 0.6], precision=0.5, base_rate=0.4)
    top = replace(entry, verdict=st.Verdict.NEGATIVE, auc_ci95=[0.45, 0.55])
    fa_line, top_line = score_readings(evaluation_of({"frequency_aware": entry, "top": top}))
    assert "Its AUC 0.70 [0.60, 0.80] lies above chance" in fa_line
    assert "precision 0.50 against a base rate of 0.40" in fa_line
    assert top_line.endswith("does not rank the neurons the heads move.")
    control = PlantedControl([1, 4], 20, ["war", "religion"], ScoreAgainstPlanted(0.75, 0.5),
                             ScoreAgainstPlanted(0.95, 0.9))
    assert not control.recovers_what_top_recovers  # 0.5 < 0.9 - PRECISION_MARGIN
    assert "does NOT recover what top[j] recovers (precision at |T| 0.50 against 0.90)" in (
        control.reading())
    assert control.findings() == [
        "planted model, 20 planted context neurons, 2 topic domains:",
        "  frequency_aware: AUC 0.750, precision at |T| 0.50",
        "  top: AUC 0.950, precision at |T| 0.90",
        "the frequency-aware score recovers what top[j] recovers: NO"]
    assert control.to_json() == {
        "contextual_heads": [1, 4], "planted_context_neurons": 20, "domains": ["war", "religion"],
        "frequency_aware": {"auc": 0.75, "precision_at_truth_size": 0.5},
        "top": {"auc": 0.95, "precision_at_truth_size": 0.9},
        "recovers_what_top_recovers": False}
    passing = replace(control, frequency_aware=ScoreAgainstPlanted(0.9, 0.8))
    assert passing.recovers_what_top_recovers  # 0.8 >= 0.9 - 0.10
    assert passing.findings()[-1].endswith(": yes") and " recovers what" in passing.reading()


def test_stable_broad_heads_table_and_findings():
    """Protocol v2's denominator rule, as chapter 8.7 shows it: the table and its sentences."""
    from types import SimpleNamespace

    from context_neurons.verdict.results import StableBroadHeads

    groups = {0: "contextual", 1: "contextual", 2: "miscellaneous"}
    taxonomy = SimpleNamespace(heads=[0, 1, 2], group_of=groups.get)
    rule = StableBroadHeads(cv_texts={0: 0.05, 1: 0.12, 2: 0.1}, largest_contextual_cv=0.12,
                            added=[2], texts=30, n=500)
    table = rule.table(taxonomy)
    assert table.index.tolist() == [0, 1, 2] and table.index.name == "head"
    assert table["group (v1, v2)"].tolist() == ["contextual", "contextual", "miscellaneous"]
    assert table["CV of D across texts"].tolist() == [0.05, 0.12, 0.1]
    assert rule.caption.endswith("at destination n = 500 over 30 CAL texts")
    assert rule.findings([0, 1], [0, 1, 2]) == [
        "CV from 0.05 to 0.12 over the heads",
        "largest CV among the contextual heads [0, 1]: 0.12; heads added: [2]; v2's primary "
        "heads: [0, 1, 2]"]
    assert "heads added: none;" in replace(rule, added=[]).findings([0, 1], [0, 1])[1]
