"""Tests of chapter 9's rotary and ALiBi factorisation against independent computations: rotation
matrices built from scratch, the models' hooks, exact exponentials and brute-force loops."""

from __future__ import annotations

import math

import pytest
import torch

from context_neurons import position_schemes as ps
from context_neurons.checks import InputError
from context_neurons.models.toy import make_small_model
from context_neurons.taxonomy import exponential_width

torch.set_grad_enabled(False)


@pytest.fixture(scope="module")
def rope():
    model, heads = ps.rotary_toy_model(seed=0, n_ctx=64, d_vocab=100)
    texts = ps.random_texts(model, 3, seed=1)
    return model, heads, texts, ps.factorise_attention(model, texts)


@pytest.fixture(scope="module")
def alibi():
    model = ps.alibi_toy_model(seed=0, n_ctx=64, d_vocab=100)
    texts = ps.random_texts(model, 3, seed=1)
    return model, texts, ps.factorise_attention(model, texts)


def rotation(omega: torch.Tensor, pairs: torch.Tensor, d_head: int, j: int) -> torch.Tensor:
    """The rotation ``R_j`` of a head's dimensions, built from scratch (float64)."""
    r = torch.eye(d_head, dtype=torch.float64)
    for (a, b), w in zip(pairs.tolist(), omega.double().tolist()):
        c, s = math.cos(j * w), math.sin(j * w)
        r[a, a], r[a, b], r[b, a], r[b, b] = c, -s, s, c
    return r


def test_exact_patterns_are_the_models(rope, alibi):
    for model, texts, fit in ((rope[0], rope[2], rope[3]), alibi):
        _, cache = model.run_with_cache(texts)
        assert torch.allclose(fit.exact_pattern(), cache["blocks.0.attn.hook_pattern"], atol=1e-6)


def test_rotary_frequencies_and_pairs_rebuild_the_models_scores(rope):
    model, _, texts, fit = rope
    omega = ps.rotary_frequencies(model)
    assert torch.allclose(omega, 10000 ** (-torch.arange(6) / 6.0), rtol=1e-4)
    pairs = ps.rotary_pairs(model)
    assert pairs.tolist() == [[p, p + 6] for p in range(6)]  # GPT-NeoX layout
    q, k = fit.queries[0].double(), fit.keys[0].double()  # [pos, head, d_head]
    for n, i in ((10, 3), (40, 40), (63, 0)):
        r_n = rotation(omega, pairs, 16, n)
        r_i = rotation(omega, pairs, 16, i)
        scores = torch.einsum("he,he->h", q[n] @ r_n.T, k[i] @ r_i.T) / 4.0
        assert torch.allclose(scores.float(), fit.exact_scores[0, :, n, i], atol=1e-4)


def test_rotary_score_error_is_the_rotated_deviation(rope):
    """error = q . (R_{i-n} - I)(k(t_i) - kbar) / sqrt(d), with R built from scratch."""
    model, _, _, fit = rope
    omega, pairs = ps.rotary_frequencies(model), ps.rotary_pairs(model)
    q, k, kbar = fit.queries[1].double(), fit.keys[1].double(), fit.mean_key.double()
    error = fit.score_error()[1]
    for n, i in ((30, 2), (50, 49), (63, 10)):
        # R_n q . R_i x = q . R_n^T R_i x = q . R_{i - n} x (R_{-j} = R_j^T)
        r = rotation(omega, pairs, 16, n).T @ rotation(omega, pairs, 16, i)
        expected = torch.einsum("he,he->h", q[n], (k[i] - kbar) @ (r - torch.eye(16)).T) / 4.0
        assert torch.allclose(error[:, n, i].double(), expected, atol=2e-4)
    assert error[:, 5, 5].abs().max() < 1e-4  # exact at i = n


def test_factorisation_is_exact_when_content_does_not_rotate(rope):
    model, heads, _, fit = rope
    exact = heads.index[heads["content in"] == "unrotated dimension"].tolist()
    assert exact == [6, 7]
    assert fit.tv()[:, exact].max() < 1e-5
    assert fit.tv()[:, :2].median() > 1e-2  # fast pairs with rotating content do not factorise
    uniform = fit.positional_pattern()[:, 7, 40, :41]  # head 7: no rotated query component
    assert torch.allclose(uniform, torch.full_like(uniform, 1 / 41), atol=1e-6)


def test_error_bound_holds_everywhere(rope):
    model, _, _, fit = rope
    bound = ps.rotary_error_bound(model, fit)
    assert (fit.score_error().abs() <= bound + 1e-4).all()
    assert bound[:, 6:].max() < 1e-6  # nothing rotates for the exact heads
    assert (bound[:, :6] > 0).float().mean() > 0.4  # and the bound is not trivially zero


def test_alibi_kernels_are_exact_exponentials(alibi):
    model, texts, fit = alibi
    slopes = ps.alibi_slopes(model)
    assert torch.allclose(slopes, 2.0 ** (-torch.arange(1, 9, dtype=torch.float32)))
    n = 50
    distance = torch.arange(n, -1, -1, dtype=torch.float64)
    for h, m in enumerate(slopes.tolist()):
        expected = torch.exp(-m * distance)
        expected = expected / expected.sum()
        got = fit.positional_pattern()[0, h, n, : n + 1].double()
        assert torch.allclose(got, expected, atol=1e-6, rtol=1e-4)
    assert fit.tv().max() < 1e-6


def test_alibi_bias_is_the_models(alibi):
    model, texts, fit = alibi
    _, cache = model.run_with_cache(texts)
    q, k = cache["blocks.0.attn.hook_q"], cache["blocks.0.attn.hook_k"]
    bias = cache["blocks.0.attn.hook_attn_scores"] - torch.einsum("bnhe,bihe->bhni", q, k) / 4
    lower = torch.ones(64, 64, dtype=torch.bool).tril()
    assert torch.allclose(bias[..., lower], fit.positional_scores[..., lower], atol=1e-5)
    slopes_from_hook = -bias[0, :, 10, 9]
    assert torch.allclose(slopes_from_hook, ps.alibi_slopes(model), atol=1e-5)


def test_head_table_widths(alibi):
    model, texts, fit = alibi
    table = ps.head_table(fit)
    n = texts.shape[1] - 1
    for h, m in enumerate(ps.alibi_slopes(model).tolist()):
        assert math.isclose(table.loc[h, "n_eff"], exponential_width(1 / m, n + 1), rel_tol=1e-4)
    assert table.loc[0, "kernel"] == "local" and table.loc[7, "kernel"] == "uniform"
    assert (table["median TV"] < 1e-6).all()


def test_by_distance_brute_force():
    gen = torch.Generator().manual_seed(0)
    values = torch.randn(2, 3, 6, 6, generator=gen)
    got = ps.by_distance(values)
    for h in range(3):
        for d in range(6):
            entries = [values[b, h, n, n - d].abs() for b in range(2) for n in range(d, 6)]
            assert math.isclose(float(got[h, d]), float(torch.stack(entries).mean()), rel_tol=1e-5)


def test_reference_tokens_set_the_mean_key(rope):
    model, _, texts, _ = rope
    reference = ps.random_texts(model, 2, seed=7)
    fit = ps.factorise_attention(model, texts, reference_tokens=reference)
    _, cache = model.run_with_cache(reference)
    assert torch.allclose(fit.mean_key, cache["blocks.0.attn.hook_k"].mean((0, 1)), atol=1e-6)


def test_learned_positions_are_refused():
    model = make_small_model(seed=0)[0]
    with pytest.raises(InputError, match="decompose_attention"):
        ps.factorise_attention(model, torch.zeros(1, 8, dtype=torch.long))
    with pytest.raises(InputError):
        ps.rotary_frequencies(model)


def test_bound_is_for_rotary_only(alibi):
    model, _, fit = alibi
    with pytest.raises(InputError):
        ps.rotary_error_bound(model, fit)
