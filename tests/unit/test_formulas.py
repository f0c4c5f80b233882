"""Unit tests that pin the formulas (issue 21).

Every formula a chapter states in mathematics is checked here against an *independent* value:
either a small case whose numbers are worked out by hand in a comment, or a brute-force
computation from the model's own hooks (``run_with_cache`` on a tiny model). Boundaries where a
rule changes are tested explicitly (a score exactly on the threshold, zero, one token, the first
position). Each test names, in its docstring, the one-line bug it is meant to catch.

The brute force reads exact layer-0 queries, keys and values of *every token at every position*
from one forward pass over constant sequences (token ``t`` repeated ``n_ctx`` times): in layer 0
the query/key/value at position ``i`` depends only on the token there and on ``i``. Everything
else (mean keys, kernels, content weights, denominators, extended embeddings, the destination
sweep) is rebuilt from those tables in float64 by the formulas of ``book/notation.md``, with no
call into the library. The library computes in float32, so those comparisons are at float32
precision (relative 1e-5 of the largest entry); the hand cases are exact to float64 rounding.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from context_neurons import circuit as cc
from context_neurons import decomposition as dec
from context_neurons import discovery as disc
from context_neurons import evaluation as ev
from context_neurons import stability as st
from context_neurons import sweeps as sw
from context_neurons.models.toy import make_small_model

torch.set_grad_enabled(False)

HEADS = [0, 2]
DEST = 3
OTHER_DEST = 11
N_MIN = 4
N_REF = 16
#: float32 arithmetic in the library against float64 brute force: relative to the largest entry.
F32 = 1e-5


def close(got, expected, rtol=F32):
    """``|got - expected| <= rtol * max|expected|`` elementwise (float32 precision)."""
    got, expected = got.double().cpu(), expected.double().cpu()
    scale = float(expected.abs().max().clamp(min=1e-12))
    err = float((got - expected).abs().max())
    assert err <= rtol * scale, f"max error {err:.3g} > {rtol:g} * {scale:.3g}"


# ----------------------------------------------------------------------------------------------
# Brute force from the hooks
# ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small():
    """A tiny GPT-2 model with *unfolded* LayerNorms (gamma, beta non-trivial, W_O not centred),
    a calibration text and the hook tables ``Q, K, V[t, i, head, d_head]`` in float64."""
    model = make_small_model(seed=0, d_vocab=60, n_ctx=32)[0]
    gen = torch.Generator().manual_seed(1)
    calibration = torch.randint(0, model.cfg.d_vocab, (model.cfg.n_ctx,), generator=gen)
    every = torch.arange(model.cfg.d_vocab)[:, None].expand(-1, model.cfg.n_ctx)
    _, cache = model.run_with_cache(
        every, stop_at_layer=1, names_filter=lambda n: n.startswith("blocks.0.attn.hook_")
    )
    tables = {x: cache[f"blocks.0.attn.hook_{x.lower()}"].double() for x in "QKV"}
    return model, calibration, tables


def brute_mean(table, reference):
    """``M[i] = sum_r p(r) table[r, i]`` with ``p`` the empirical distribution of ``reference``."""
    p = torch.bincount(reference, minlength=table.shape[0]).double()
    return torch.einsum("t,tihe->ihe", p / p.sum(), table)


def brute_circuit(model, tables, calibration, dest, heads=HEADS, n_ref=N_REF, n_min=N_MIN,
                  frame="reference"):
    """The contextual circuit of ``book/notation.md`` §5 from the hook tables alone; the
    denominators with the content weights at ``n_ref`` (``frame="reference"``, as ``e(t)`` takes
    them) or at each destination ``n`` (``"destination"``)."""
    Q, K, V = tables["Q"], tables["K"], tables["V"]
    n_ctx, scale = model.cfg.n_ctx, model.cfg.d_head**0.5
    reference = calibration[1:]
    M, M_V = brute_mean(K, reference), brute_mean(V, reference)
    w_o = model.blocks[0].attn.W_O.double()
    out = {"log_kernels": [], "log_d": [], "log_content": [], "kernels": []}
    for h in heads:
        q = Q[dest, :, h]  # [n, e]: the destination token placed at each n
        logits = (q @ M[:, h].T) / scale  # [n, i]
        logits = logits.masked_fill(~torch.ones(n_ctx, n_ctx, dtype=torch.bool).tril(), -math.inf)
        log_pos = torch.log_softmax(logits, -1)  # log pos_n(i)
        # log c_n(t) = q_n . k(t, n) / sqrt(d), for the calibration tokens and the destination
        log_c = torch.einsum("ne,tne->nt", q, K[:, :, h]) / scale  # [n, token]
        if frame == "reference":  # c_{n_ref}(t) at every destination
            log_c = log_c[n_ref][None].expand(n_ctx, -1)
        log_d = []
        for n in range(n_ctx):
            if n == 0:  # position 0 holds the text's own first token; pos_0(0) = 1
                log_d.append(float(log_c[0, calibration[0]]))
                continue
            terms = [log_pos[n, j] + log_c[n, calibration[j]] for j in range(n)]
            terms.append(log_pos[n, n] + log_c[n, dest])
            log_d.append(float(torch.logsumexp(torch.stack(terms), 0)))
        out["log_kernels"].append(log_pos)
        out["kernels"].append(log_pos.exp())
        out["log_d"].append(torch.tensor(log_d, dtype=torch.float64))
        out["log_content"].append(Q[dest, n_ref, h] @ K[:, n_ref, h].T / scale)  # [t]
    log_d = torch.stack(out["log_d"])
    tail = log_d[:, n_min:].sort(-1).values
    log_dhat = tail[:, (tail.shape[1] - 1) // 2]  # lower median (torch.median's convention)
    log_content = torch.stack(out["log_content"])  # [head, t]
    kernels = torch.stack(out["kernels"])  # [head, n, i]
    values = V[:, n_ref][:, heads] - M_V[n_ref, heads]  # v_h(t) = value(t, n_ref) - M_V[n_ref]
    weight = torch.exp(log_content - log_dhat[:, None])  # c_h(t) / Dhat_h
    extended = torch.einsum("ht,the,hed->td", weight, values, w_o[heads])
    positional = torch.einsum("hni,ihe,hed->nd", kernels, M_V[:, heads], w_o[heads])
    median = kernels.mean(0)  # two heads: the median is the mean of the two
    return {
        "M": M,
        "M_V": M_V,
        "kernels": kernels,
        "kernel": median / median.sum(-1, keepdim=True),
        "log_d": log_d,
        "log_dhat": log_dhat,
        "log_content": log_content,
        "values": values,
        "extended": extended,
        "positional": positional,
    }


@pytest.fixture(scope="module")
def built(small):
    model, calibration, tables = small
    circuit = cc.build_circuit(
        model, calibration, heads=HEADS, dest_token=DEST, n_ref=N_REF, n_min=N_MIN
    )
    return circuit, brute_circuit(model, tables, calibration, DEST)


# ----------------------------------------------------------------------------------------------
# Chapter 1: the decomposition
# ----------------------------------------------------------------------------------------------


def test_mean_positional_keys_against_hooks(small):
    """``M[i] = sum_t p(t) k(t, i)`` (keys and values), with a repeated reference token so that
    the weights are not uniform. Catches: uniform weights, a missing LN scale or bias."""
    model, _, tables = small
    reference = torch.tensor([5, 5, 5, 9, 17, 40])  # p = 1/2, 1/6, 1/6, 1/6
    for which in "KV":
        got = dec.mean_positional_keys(model, reference, model.cfg.n_ctx, which=which)
        close(got, brute_mean(tables[which], reference))


@pytest.mark.parametrize("n", [0, 1, 31])
def test_positional_pattern_and_content_weights_against_hooks(small, n):
    """``pos_n(i) = softmax_{i<=n} q_n . M[i] / sqrt(d)`` and ``log c_n(t) = q_n . k(t, n) / sqrt(d)``
    with the destination at ``n``. At the first position ``n = 0`` the kernel is the single
    weight 1."""
    model, calibration, tables = small
    Q, K = tables["Q"], tables["K"]
    reference = calibration[1:]
    M = brute_mean(K, reference)
    scale = model.cfg.d_head**0.5
    pattern = dec.positional_pattern(model, n, DEST, reference_tokens=reference)
    expected = torch.softmax(torch.einsum("he,ihe->hi", Q[DEST, n], M[: n + 1]) / scale, -1)
    assert pattern.shape == (model.cfg.n_heads, n + 1)
    close(pattern, expected)
    if n == 0:
        assert pattern[:, 0].tolist() == [1.0] * model.cfg.n_heads
    log_c = dec.content_log_weights(model, n, DEST)
    close(log_c, torch.einsum("he,the->ht", Q[DEST, n], K[:, n]) / scale)


def test_single_token_decomposition(small):
    """A one-token text: every pattern is the single weight 1 and ``log D_0 = log c_0(t_0)``
    (``pos_0(0) = 1``), the exact score at (0, 0) by the hooks."""
    model, _, tables = small
    d = dec.decompose_attention(model, torch.tensor([7]), reference_tokens=torch.arange(60))
    for pattern in (d.exact_pattern(), d.reconstructed_pattern(), d.positional_pattern()):
        assert pattern.tolist() == [[[1.0]]] * model.cfg.n_heads
    score = torch.einsum("he,he->h", tables["Q"][7, 0], tables["K"][7, 0]) / model.cfg.d_head**0.5
    close(d.log_denominator()[:, 0], score)
    close(d.content_scores[:, 0, 0], score)
    assert d.positional_scores[:, 0, 0].tolist() == [0.0] * model.cfg.n_heads  # M[0] - M[0]


def test_tv_distance_by_hand():
    """``TV = 1/2 sum |p - q|``: (0.5, 0.5, 0) against (0.25, 0.25, 0.5) is 1/2 (0.25+0.25+0.5)."""
    p = torch.tensor([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])
    q = torch.tensor([[0.25, 0.25, 0.5], [1.0, 0.0, 0.0]])
    assert dec.tv_distance(p, q).tolist() == [0.5, 0.0]


# ----------------------------------------------------------------------------------------------
# Chapter 3: bounds, and the denominator study's prediction
# ----------------------------------------------------------------------------------------------


def test_bounds_by_hand():
    """Hoeffding ``2 exp(-2 t^2 / ((b - a)^2 S))`` and Chebyshev ``sigma^2 S / t^2`` with
    ``S = sum pos^2``, on a range ``b - a = 2`` (where ``(b - a)^2 != b - a``).

    S = 0.25, [a, b] = [1, 3]: exponent -2 t^2 / (4 * 0.25) = -2 t^2, so t = 1 gives 2 e^-2,
    t = 2 gives 2 e^-8, t = 0 gives 2, capped at 1. Its inverse at p = 2 e^-2:
    t = (b - a) sqrt(S ln(2/p) / 2) = 2 sqrt(0.25 * 2 / 2) = 1.
    Chebyshev with sigma^2 = 4: 4 * 0.25 / t^2 = 1 / t^2: t = 2 gives 1/4, t = 1/2 gives 4,
    capped at 1; its inverse at p = 1/4 is t = sqrt(1 / (1/4)) = 2.
    Catches: (b - a) for (b - a)^2, sum pos for sum pos^2, a lost factor 2, a missing cap.
    """
    t = torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64)
    assert st.hoeffding_bound(t, 0.25, 1.0, 3.0).tolist() == pytest.approx(
        [1.0, 2 * math.exp(-2), 2 * math.exp(-8)], rel=1e-14
    )
    assert st.hoeffding_deviation(2 * math.exp(-2), 0.25, 1.0, 3.0) == pytest.approx(1.0, rel=1e-14)
    t = torch.tensor([0.5, 2.0], dtype=torch.float64)
    assert st.chebyshev_bound(t, 0.25, 4.0).tolist() == [1.0, 0.25]
    assert st.chebyshev_deviation(0.25, 0.25, 4.0) == 2.0


def test_moments_by_hand():
    """``sum pos^2`` of (1/2, 1/4, 1/4) is 1/4 + 1/16 + 1/16 = 3/8; the variance of the weighted
    sum with sigma^2 = 2 is 3/4; X in {0, 4} with p = (3/4, 1/4): mean 1, variance 3."""
    kernel = torch.tensor([0.5, 0.25, 0.25], dtype=torch.float64)
    assert float(st.sum_of_squares(kernel)) == 0.375
    assert st.weighted_sum_variance(kernel, 2.0) == 0.75
    assert st.iid_moments(torch.tensor([0.0, 4.0]), torch.tensor([3.0, 1.0])) == (1.0, 3.0)


def test_tail_probability_counts_a_deviation_equal_to_t():
    """``P(|dev| >= t)``: |dev| = (1, 0.5, 1, 2) at t = 1 is 3/4 (equality counts); at t = 0, 1."""
    dev = torch.tensor([-1.0, 0.5, 1.0, 2.0], dtype=torch.float64)
    assert st.tail_probability(dev, torch.tensor([0.0, 1.0, 2.5])).tolist() == [1.0, 0.75, 0.0]


def hand_study() -> st.DenominatorStudy:
    """One head (number 5), destination n = 3, kernel pos = (1/8, 1/4, 1/2, 1/8) over i = 0..3.

    Random tokens 10, 11 with p = (1/2, 1/2) and c = (1, 7): mu = 4, c/mu = (1/4, 7/4), mean 1,
    sigma^2/mu^2 = (3/4)^2 = 9/16, range [a, b] = [1/4, 7/4] (b - a = 3/2).
    BOS: c = 16 (c/mu = 4); destination: c = 8 (c/mu = 2).
    """
    return st.DenominatorStudy(
        n=3,
        heads=[5],
        kernel=torch.tensor([[0.125, 0.25, 0.5, 0.125]], dtype=torch.float64),
        token_ids=torch.tensor([10, 11]),
        probs=torch.tensor([0.5, 0.5], dtype=torch.float64),
        log_c=torch.tensor([[0.0, math.log(7.0)]], dtype=torch.float64),
        log_c_bos=torch.tensor([math.log(16.0)], dtype=torch.float64),
        log_c_dest=torch.tensor([math.log(8.0)], dtype=torch.float64),
        log_mu=torch.tensor([math.log(4.0)], dtype=torch.float64),
        ratio=torch.tensor([[1.0], [1.5], [2.0], [1.25]], dtype=torch.float64),
        labels=["a", "b", "c", "d"],
    )


def test_denominator_study_prediction_by_hand():
    """The independent-token model with its fixed BOS and destination terms, in units of mu:

    m = 1/4 + 1/2 = 3/4 (random positions 1, 2);  S = 1/16 + 1/4 = 5/16;
    E[D] = pos(0) c(BOS) + m + pos(n) c(dest) = 4/8 + 3/4 + 2/8 = 3/2 (without BOS: 1);
    sd = (3/4) sqrt(5/16);  CV = sd / E;  rho = m / E = 1/2;  n_eff random = m^2 / S = 9/5;
    n_eff = 1 / (1/64 + 1/16 + 1/4 + 1/64) = 64/22.
    Catches: the BOS (or destination) term dropped from E[D]; S over all positions.
    """
    s = hand_study()
    assert s.random_mass(5) == 0.75
    assert s.sum_sq(5) == 0.3125
    assert s.n_eff(5) == pytest.approx(64 / 22, rel=1e-14)
    assert s.n_eff_random(5) == pytest.approx(1.8, rel=1e-14)
    assert s.values(5).tolist() == pytest.approx([0.25, 1.75], rel=1e-14)
    assert s.sigma(5) == pytest.approx(0.75, rel=1e-14)
    assert s.weight_range(5) == pytest.approx((0.25, 1.75), rel=1e-14)
    assert s.predicted_mean(5) == pytest.approx(1.5, rel=1e-14)
    assert s.random_share(5) == pytest.approx(0.5, rel=1e-14)
    assert s.predicted_sd(5) == pytest.approx(0.75 * math.sqrt(0.3125), rel=1e-14)
    assert s.predicted_cv(5) == pytest.approx(0.5 * math.sqrt(0.3125), rel=1e-14)


def test_denominator_study_simulation_adds_the_fixed_terms():
    """Each simulated ``D/mu`` is 1/4 X_1 + 1/2 X_2 + (fixed terms 4/8 + 2/8 = 3/4), X in
    {1/4, 7/4}: 1/4 (1/4) + 1/2 (1/4) + 3/4 = 15/16, 1/4 (7/4) + 1/2 (1/4) + 3/4 = 21/16,
    1/4 (1/4) + 1/2 (7/4) + 3/4 = 27/16, 1/4 (7/4) + 1/2 (7/4) + 3/4 = 33/16, nothing else.
    Catches: a simulation without the fixed BOS and destination terms."""
    draws = hand_study().simulate(5, n_samples=200, seed=0)
    support = torch.tensor([15 / 16, 21 / 16, 27 / 16, 33 / 16], dtype=torch.float64)
    nearest = (draws[:, None] - support[None]).abs().min(-1).values
    assert float(nearest.max()) < 1e-14
    assert len(torch.unique(draws.round(decimals=10))) == 4


def test_denominator_study_half_widths_by_hand():
    """The (1 - p) half-widths of ``D/mu`` with p = 0.05:

    Chebyshev: t = sqrt(sigma^2 S / p) = sqrt((9/16)(5/16) / 0.05) = sqrt(225/64) = 15/8
    (with sum pos = 3/4 in place of S = 5/16 it would be sqrt(8.4375) = 2.90).
    Hoeffding: t = (b - a) sqrt(S ln(2/p) / 2) = (3/2) sqrt((5/16) ln(40) / 2).
    The tail columns at t = 15/8 equal p for Chebyshev and 2 exp(-2 t^2 / ((3/2)^2 (5/16)))
    for Hoeffding. Catches: sum pos for sum pos^2, (b - a) for (b - a)^2.
    """
    s = hand_study()
    row = s.table(prob=0.05, n_samples=100).loc[5]
    assert row["t Chebyshev"] == pytest.approx(15 / 8, rel=1e-14)
    assert row["t Hoeffding"] == pytest.approx(1.5 * math.sqrt(0.3125 * math.log(40) / 2), rel=1e-14)
    assert row["n_eff random"] == pytest.approx(1.8, rel=1e-14)
    assert row["random share"] == pytest.approx(0.5, rel=1e-14)
    assert row["CV predicted"] == pytest.approx(0.5 * math.sqrt(0.3125), rel=1e-14)
    tails = s.tails(5, torch.tensor([15 / 8], dtype=torch.float64), n_samples=100)
    assert tails["Chebyshev"][0] == pytest.approx(0.05, rel=1e-14)
    hoeffding = 2 * math.exp(-2 * (15 / 8) ** 2 / (1.5**2 * 0.3125))
    assert tails["Hoeffding"][0] == pytest.approx(hoeffding, rel=1e-14)
    # measured |D/mu - 3/2| = (1/2, 0, 1/2, 1/4): P(>= 1/2) = 1/2 (equality counts)
    measured = s.tails(5, torch.tensor([0.5], dtype=torch.float64), n_samples=10)["texts"][0]
    assert measured == 0.5


def test_denominator_study_against_hooks(small):
    """``D_n / mu`` of each text, the kernel, ``c(BOS)`` and ``mu`` of :func:`denominator_study`,
    rebuilt from the hook tables: ``D_n = sum_{i<n} pos_n(i) c_n(t_i) + pos_n(n) c_n(dest)`` and
    ``mu = sum_t p(t) c_n(t)`` over the non-BOS tokens of the texts."""
    model, calibration, tables = small
    Q, K = tables["Q"], tables["K"]
    n, bos, scale = 12, 0, model.cfg.d_head**0.5
    gen = torch.Generator().manual_seed(7)
    windows = [torch.cat([torch.tensor([bos]), torch.randint(1, 60, (n + 2,), generator=gen)])
               for _ in range(5)]
    reference = calibration[1:]
    M = brute_mean(K, reference)
    study = st.denominator_study(model, windows, n=n, dest_token=DEST, mean_keys=M.float())
    pos = torch.softmax(torch.einsum("he,ihe->hi", Q[DEST, n], M[: n + 1]) / scale, -1)
    log_c = torch.einsum("he,the->ht", Q[DEST, n], K[:, n]) / scale  # [head, token]
    body = torch.cat([w[1:n] for w in windows])
    p = torch.bincount(body, minlength=60).double()
    p = p / p.sum()
    mu = (p[None] * log_c.exp()).sum(-1)
    close(study.kernel, pos)
    close(study.log_mu, mu.log())
    close(study.log_c_bos, log_c[:, bos])
    close(study.log_c_dest, log_c[:, DEST])
    expected = torch.stack([
        ((pos[:, :n] * log_c[:, w[:n]].exp()).sum(-1) + pos[:, n] * log_c[:, DEST].exp()) / mu
        for w in windows
    ])
    close(study.ratio, expected)
    for h in (0, 1):
        mean = pos[h, 0] * log_c[h, bos].exp() / mu[h] + pos[h, 1:n].sum() \
            + pos[h, n] * log_c[h, DEST].exp() / mu[h]
        assert study.predicted_mean(h) == pytest.approx(float(mean), rel=F32)


# ----------------------------------------------------------------------------------------------
# Chapter 4: the contextual circuit
# ----------------------------------------------------------------------------------------------


def test_circuit_against_hooks(built):
    """Kernels, calibrated denominators ``D_h(n)`` (``D_h(0) = c_0(t_0)``, the first position),
    their median ``Dhat_h`` over ``n >= n_min``, content weights at ``n_ref``, token values
    ``v_h(t)``, extended embeddings ``e(t) = sum_h c_h(t) / Dhat_h v_h(t) W_O^h`` and the
    positional part, all rebuilt from the hooks."""
    circuit, brute = built
    close(circuit.head_kernels, brute["kernels"])
    close(circuit.kernel, brute["kernel"])
    close(circuit.calibration.log_denominators, brute["log_d"])
    close(circuit.calibration.log_dhat, brute["log_dhat"])
    close(circuit.log_content, brute["log_content"])
    close(circuit.token_values, brute["values"])
    close(circuit.extended, brute["extended"])
    close(circuit.positional_part, brute["positional"])
    assert circuit.head_kernels[:, 0, 0].tolist() == [1.0, 1.0]  # first position


def test_destination_frame_against_hooks(small):
    """``frame="destination"``, the denominators read with the content weights at each
    destination (chapter 1's frame, the package's before issue 50), rebuilt from the hooks."""
    model, calibration, tables = small
    circuit = cc.build_circuit(model, calibration, heads=HEADS, dest_token=DEST, n_ref=N_REF,
                               n_min=N_MIN, frame="destination")
    brute = brute_circuit(model, tables, calibration, DEST, frame="destination")
    close(circuit.calibration.log_denominators, brute["log_d"])
    close(circuit.calibration.log_dhat, brute["log_dhat"])
    close(circuit.extended, brute["extended"])
    with pytest.raises(cc.CircuitError, match="frame"):
        cc.build_circuit(model, calibration, heads=HEADS, dest_token=DEST, frame="query")


def test_bag_weights_sum_to_one_in_the_reference_frame(small, built):
    """On the calibration text with the destination token at ``n``, the bag's weights
    ``pos_n(i) c_h(t_i) / D_h(n)`` (content weights at ``n_ref``, as ``e(t)`` has them) sum to 1
    at every position in the reference frame. In the destination frame they are off by the
    content score's part that depends on ``n`` alone (cancelled by the softmax, not by the bag):
    the failure of issue 50, FVU 600,000 on the trained model. This tiny model drifts too."""
    model, calibration, _ = small
    circuit, _ = built
    tokens = calibration.clone()
    n = len(tokens)
    weights = circuit.head_kernels[:, :n, :n] * circuit.log_content[:, tokens][:, None].exp()
    at = torch.arange(1, n)
    weights[:, at, at] = (circuit.head_kernels[:, at, at]
                          * circuit.log_content[:, DEST][:, None].exp())
    total = weights.sum(-1) / circuit.calibration.log_denominators.exp()
    close(total, torch.ones_like(total))
    old = cc.build_circuit(model, calibration, heads=HEADS, dest_token=DEST, n_ref=N_REF,
                           n_min=N_MIN, frame="destination")
    drift = (weights.sum(-1).log() - old.calibration.log_denominators).abs().max()
    assert drift > 0.1, f"the destination frame's drift on this model: {drift:.3g} nats"
    close(circuit.text_log_denominators(model, tokens), circuit.calibration.log_denominators)


def test_ln2_scale_against_hooks(small, built):
    """``s2``: the lower median over positions ``n >= 1`` of ``1 / std`` of LN2's input, against
    ``1 / blocks.0.ln2.hook_scale`` on the calibration text (LN2 centres before its std)."""
    model, calibration, _ = small
    circuit, _ = built
    _, cache = model.run_with_cache(calibration[None], names_filter="blocks.0.ln2.hook_scale")
    inverse = 1 / cache["blocks.0.ln2.hook_scale"][0, :, 0].double()
    close(circuit.calibration.ln2_inverse_scales, inverse)
    rest = inverse[1:].sort().values
    assert circuit.ln2_scale == pytest.approx(float(rest[(len(rest) - 1) // 2]), rel=F32)


def test_destination_sweep_against_hooks(small, built):
    """:class:`DestinationSweep` for another destination against the circuit of that destination
    rebuilt from the hooks (not against :func:`build_circuit`, which shares its code)."""
    model, calibration, tables = small
    circuit, _ = built
    swept = sw.DestinationSweep(circuit, model).circuit(OTHER_DEST)
    brute = brute_circuit(model, tables, calibration, OTHER_DEST)
    assert swept.dest_token == OTHER_DEST
    close(swept.head_kernels, brute["kernels"])
    close(swept.kernel, brute["kernel"])
    close(swept.calibration.log_denominators, brute["log_d"])
    close(swept.calibration.log_dhat, brute["log_dhat"])
    close(swept.log_content, brute["log_content"])
    close(swept.extended, brute["extended"])
    close(swept.positional_part, brute["positional"])


def test_actual_destination_bag_against_hooks(small, built):
    """:func:`actual_destination_terms`: at each position ``n`` the bag
    ``sum_i K^{d_n}[n, i] sum_h c^{d_n}_h(t_i) / D^{d_n}_h(n) v_h(t_i) W_O^h . w_j`` and the
    positional part of destination ``d_n``, with every piece rebuilt from the hooks."""
    model, calibration, tables = small
    circuit, _ = built
    neurons = [0, 4]
    text = torch.tensor([[DEST, OTHER_DEST, 8, DEST, 8, 8, OTHER_DEST, DEST, 21, 8]])
    terms = sw.actual_destination_terms(circuit, model, text, neurons)
    read = disc.read_vectors(circuit, model, neurons).double()
    w_o = model.blocks[0].attn.W_O.double()[HEADS]
    pieces = {d: brute_circuit(model, tables, calibration, d) for d in set(text[0].tolist())}
    for n, d in enumerate(text[0].tolist()):
        b = pieces[d]
        weight = b["kernel"][n, : n + 1][None] * torch.exp(
            b["log_content"][:, text[0, : n + 1]] - b["log_d"][:, n : n + 1]
        )  # [head, i]
        bag = torch.einsum("hi,ihe,hed,dj->j", weight, b["values"][text[0, : n + 1]], w_o, read)
        close(terms["bag"][0, n], bag, rtol=1e-4)
        close(terms["positional"][0, n], b["positional"][n] @ read, rtol=1e-4)


# ----------------------------------------------------------------------------------------------
# Chapter 5: discovery
# ----------------------------------------------------------------------------------------------


def test_contributions_against_ln2_through_hooks(small, built):
    """``contribution[j, t] = s2 (gamma2 * centred(e(t))) . W_in[:, j]``, brute force through the
    model's own LN2 with its scale fixed to ``1 / s2`` (hook ``blocks.0.ln2.hook_scale``), on a
    model whose LN2 is not folded and whose extended embeddings are not mean-free (so the
    centring matters). Catches: the LayerNorm's centring dropped from the read vectors."""
    model, _, _ = small
    circuit, _ = built
    e = circuit.extended
    assert float(e.mean(-1).abs().max()) > 0.05 * float(e.abs().max())  # centring matters here
    fixed = lambda scale, hook: torch.full_like(scale, 1 / circuit.ln2_scale)  # noqa: E731
    ln2 = model.blocks[0].ln2
    with model.hooks(fwd_hooks=[("blocks.0.ln2.hook_scale", fixed)]):
        linear = ln2(e[None])[0] - ln2(torch.zeros_like(e)[None])[0]  # removes beta2
    neurons = [0, 7, 100, model.cfg.d_mlp - 1]
    expected = (linear @ model.blocks[0].mlp.W_in[:, neurons]).T
    close(disc.contributions(circuit, model, neurons), expected)
    close(disc.contributions(circuit, model, neurons, torch.tensor([3, 0, 59])), expected[:, [3, 0, 59]])


def test_score_by_hand(small, built):
    """``top[j]`` = mean of the k largest robust ``|z|``, ``z = (x - median) / (1.4826 MAD)``.

    Extended embeddings ``e(t) = x_t w_j / |w_j|^2`` make neuron j's contributions equal ``x_t``:
    x_t = (t mod 3) - 1 for t < 57 (19 each of -1, 0, 1), then 10, -20, 30. Sorted, the 30th of
    60 values (torch's lower median) is 0 (20 negative, 19 zeros); |x| has 19 zeros and 41 values
    >= 1, so MAD = 1 and the spread is 1.4826. With k = 2: top = (30 + 20) / 2 / 1.4826, the
    extreme tokens 59 then 58, sign +1 (30 - 20 > 0)."""
    model, _, _ = small
    circuit, _ = built
    j = 9
    x = torch.tensor([(t % 3) - 1.0 for t in range(57)] + [10.0, -20.0, 30.0])
    w = disc.read_vectors(circuit, model, [j])[:, 0]
    fake = replace(circuit, extended=x[:, None] * w[None] / (w @ w))
    vocabulary = torch.ones(60, dtype=torch.bool)
    close(disc.contributions(fake, model, [j])[0], x, rtol=1e-6)
    scores = disc.score_neurons(fake, model, k=2, vocabulary=vocabulary)
    assert float(scores.median[j]) == pytest.approx(0.0, abs=1e-5)
    assert float(scores.spread[j]) == pytest.approx(1.4826, rel=1e-6)
    assert float(scores.top[j]) == pytest.approx(25 / 1.4826, rel=1e-6)
    assert scores.extreme_tokens[j].tolist() == [59, 58]
    assert float(scores.sign[j]) == 1.0
    # Leaving token 59 out of the vocabulary: 59 values, median still 0, MAD 1; top = (20 + 10)/2
    vocabulary[59] = False
    scores = disc.score_neurons(fake, model, k=2, vocabulary=vocabulary)
    assert float(scores.top[j]) == pytest.approx(15 / 1.4826, rel=1e-6)
    assert scores.extreme_tokens[j].tolist() == [58, 57]
    assert float(scores.sign[j]) == -1.0


def test_robust_location_scale_by_hand():
    """(1, 2, 3, 4, 100): median 3, |x - 3| = (2, 1, 0, 1, 97), MAD 1, spread 1.4826; a constant
    row has MAD 0, clamped to 1e-12 (zero is a boundary: no division by zero)."""
    med, spread = disc.robust_location_scale(torch.tensor([[1.0, 2, 3, 4, 100], [5.0, 5, 5, 5, 5]]))
    assert med.tolist() == [3.0, 5.0]
    assert spread.tolist() == pytest.approx([1.4826, 1e-12], rel=1e-7)


def make_scores(top: list[float]) -> disc.NeuronScores:
    n = len(top)
    return disc.NeuronScores(
        top=torch.tensor(top),
        median=torch.zeros(n),
        spread=torch.ones(n),
        sign=torch.ones(n),
        k=1,
        vocabulary=torch.ones(5, dtype=torch.bool),
        extreme_tokens=torch.zeros(n, 1, dtype=torch.long),
    )


def test_found_rule_is_score_at_least_theta():
    """``top[j] >= theta``: a score exactly on the threshold is found; just below is not; with
    theta = 0 a zero score is found. Best first. Catches: ``>`` for ``>=``."""
    scores = make_scores([6.0, 5.999, 7.5, 0.0, 6.25])
    assert scores.found(6.0) == [2, 4, 0]
    assert scores.found(6) == [2, 4, 0]  # an integer threshold
    assert scores.found(7.5) == [2]
    assert scores.found(7.50001) == []
    assert scores.found(0.0) == [2, 4, 0, 1, 3]
    assert make_scores([disc.THETA]).found() == [0]  # the default theta, on the threshold
    sweep = disc.theta_sweep(scores, thetas=(0, 6, 7.5, 8))
    assert sweep["neurons found"].tolist() == [5, 3, 1, 0]


def test_precision_recall_by_hand():
    """found {1, 2, 3, 4} against truth {3, 4, 5}: 2 hits, precision 2/4, recall 2/3."""
    assert disc.precision_recall([1, 2, 3, 4], [3, 4, 5]) == (0.5, 2 / 3)


def test_gaussian_null_score_single_token():
    """k = N = 1: the one |z| order statistic at 1 - (1/2)/2 = 3/4, i.e. Phi^-1(0.75) = 0.6745."""
    assert disc.gaussian_null_score(1, 1) == pytest.approx(0.6744897501960817, rel=1e-12)


# ----------------------------------------------------------------------------------------------
# Chapter 6: evaluation metrics
# ----------------------------------------------------------------------------------------------


def test_pearson_and_fvu_by_hand():
    """Over the unmasked positions 1..3 (position 0, BOS, masked with a wild value):
    y = (1, 2, 3), mean 2, sum (y - 2)^2 = 2.
    yhat = (0, 2, 4): r = (2 + 0 + 2) / sqrt(2 * 8) = 1, FVU = (1 + 0 + 1) / 2 = 1 (no fit).
    yhat = (3, 2, 1): r = -1, FVU = (4 + 0 + 4) / 2 = 4.
    yhat = y: r = 1, FVU = 0."""
    true = torch.tensor([[100.0, 1, 2, 3]]).T[None].expand(1, 4, 1).repeat(1, 1, 3)
    approx = torch.tensor([[-50.0, 0, 2, 4], [7.0, 3, 2, 1], [100.0, 1, 2, 3]]).T[None]
    mask = torch.tensor([[False, True, True, True]])
    r, fvu = ev.pearson_and_fvu(true, approx, mask)
    assert r.tolist() == [[1.0, -1.0, 1.0]]
    assert fvu.tolist() == [[1.0, 4.0, 0.0]]
    assert ev.masked_mean(true, mask).tolist() == [[2.0, 2.0, 2.0]]
    assert ev.masked_variance(approx, mask).tolist() == [[8.0, 2.0, 2.0]]


def test_pearson_single_position_is_zero_not_nan():
    """One evaluated position (a single token): no variance; r is 0 (the clamp), not NaN."""
    true = torch.tensor([[[3.0], [5.0]]])
    mask = torch.tensor([[False, True]])
    r, fvu = ev.pearson_and_fvu(true, true, mask)
    assert r.tolist() == [[0.0]] and fvu.tolist() == [[0.0]]


def test_position_mask_boundaries():
    """``start <= n < length``: with start 1, text lengths 3 and 1 (a single token: nothing)."""
    mask = ev.position_mask(torch.zeros(2, 4, dtype=torch.long), torch.tensor([3, 1]), 1)
    assert mask.tolist() == [[False, True, True, False], [False, False, False, False]]


def test_context_measures_by_hand():
    """``context_share = var(y - local) / var(y)``, ``context_r`` of ``y - local`` against
    ``bag + positional``. y = (0, 1, 2, 3) on positions 1..3, local = (0, 1, 1, 1): y - local =
    (0, 0, 1, 2), variance 2 over 3 positions (mean 1); var y = 2: share = 1.
    bag + positional = (0, 0, 2, 4): context r = 1, context FVU = (0 + 1 + 4) / 2 = 5/2."""
    from context_neurons.evaluation.accuracy import _measures

    y = torch.tensor([0.0, 1, 2, 3])[None, :, None]
    zero = torch.zeros_like(y)
    terms = {
        "direct": torch.tensor([0.0, 1, 1, 1])[None, :, None],
        "other heads": zero,
        "constant": zero,
        "bag": torch.tensor([0.0, 0, 1, 3])[None, :, None],
        "positional": torch.tensor([0.0, 0, 1, 1])[None, :, None],
    }
    mask = torch.tensor([[False, True, True, True]])
    m = _measures(y, terms, mask)
    assert m["context_share"].tolist() == [[1.0]]
    assert m["context_pearson"].tolist() == [[1.0]]
    assert m["context_fvu"].tolist() == [[2.5]]
    # approx = local + context = (0, 1, 3, 5): FVU = (0 + 1 + 4) / 2, r = 1 (slope 2)
    assert m["fvu"].tolist() == [[2.5]] and m["pearson"].tolist() == [[1.0]]
    assert m["true_max"].tolist() == [[3.0]] and m["approx_max"].tolist() == [[5.0]]


# ----------------------------------------------------------------------------------------------
# Chapter 7: look-up attributions
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("length", [1, 6])
def test_attribution_against_hooks_first_position_and_single_token(length):
    """``pre = sum_c (c - mean c) . (gamma2 * W_in[:, j]) / scale + beta2 . W_in[:, j] + b_in[j]``
    over the residual components ``c``: each head's term is ``hook_z W_O`` read that way, against
    the hooks of a two-layer model with unfolded LayerNorms, on a one-token prompt (the first and
    only position) and a longer one; the parts add up to ``hook_pre``. Catches: the LN2 centring
    dropped from the read vector."""
    from context_neurons.lookups import attribution as at

    model = make_small_model(seed=4, n_layers=2, d_vocab=50, n_ctx=16)[0]
    tokens = torch.tensor([[5, 9, 13, 2, 40, 7][:length]])
    layer, neuron = 1, 17
    (got,) = at.attribute_neurons(model, tokens, layer, [neuron])
    _, cache = model.run_with_cache(tokens)
    w_in = model.W_in[layer][:, neuron].double()
    ln2 = model.blocks[layer].ln2
    v = ln2.w.double() * w_in
    scale = cache[f"blocks.{layer}.ln2.hook_scale"][0, :, 0].double()

    def read(x):  # (x - mean x) . v / scale, per position
        x = x.double()
        return ((x - x.mean(-1, keepdim=True)) @ v) / scale

    for l in range(layer + 1):
        for h in range(model.cfg.n_heads):
            out = cache[f"blocks.{l}.attn.hook_z"][0, :, h] @ model.W_O[l, h]
            close(got.heads[0, :, l, h], read(out), rtol=1e-5)
    close(got.embed[0], read(cache["hook_embed"][0]), rtol=1e-5)
    close(got.mlp[0, :, 0], read(cache["blocks.0.hook_mlp_out"][0]), rtol=1e-5)
    pre = cache[f"blocks.{layer}.mlp.hook_pre"][0, :, neuron].double()
    close(got.pre[0], pre, rtol=1e-6)
    close(got.total()[0], pre, rtol=1e-5)
