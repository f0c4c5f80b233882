"""Tests of the contextual circuit (chapter 4): exact cases, brute force through hooks, errors."""

from __future__ import annotations

import pytest
import torch

from context_neurons import circuit as C
from context_neurons import decomposition as dec
from context_neurons.caching import IdentityCache
from context_neurons.checks import InputError
from context_neurons.models import load_model
from context_neurons.models.toy import exact_toy_model

torch.set_grad_enabled(False)


@pytest.fixture(scope="module")
def planted():
    return load_model("planted")


@pytest.fixture(scope="module")
def circuit(planted):
    return C.get_circuit(planted.model)


@pytest.fixture(scope="module")
def toy():
    model, heads = exact_toy_model(seed=0)
    gen = torch.Generator().manual_seed(1)
    calibration = torch.randint(0, model.cfg.d_vocab, (model.cfg.n_ctx,), generator=gen)
    circuit = C.build_circuit(model, calibration, heads=heads, dest_token=3, n_min=4)
    texts = torch.randint(0, model.cfg.d_vocab, (3, model.cfg.n_ctx), generator=gen)
    return model, circuit, texts


# ----------------------------------------------------------------------------------------------
# Where the assumptions hold exactly
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("denominators", ["median", "per_position"])
@pytest.mark.parametrize("kernel", ["shared", "per_head"])
def test_circuit_is_exact_when_assumptions_hold(toy, denominators, kernel):
    model, circuit, texts = toy
    fit = C.circuit_error(circuit, model, texts, denominators, kernel=kernel)
    assert fit.relative_error.max() < 1e-5
    assert fit.cosine.min() > 1 - 1e-6
    assert torch.allclose(fit.true, fit.approx, atol=1e-5)


def test_toy_denominators_and_kernel(toy):
    model, circuit, _ = toy
    assert torch.allclose(circuit.calibration.log_dhat, torch.zeros(2), atol=1e-6)
    n = 7
    assert torch.allclose(circuit.kernel[n, : n + 1], torch.full((n + 1,), 1 / (n + 1)), atol=1e-6)
    assert circuit.kernel[n, n + 1 :].abs().max() == 0


def test_circuit_error_detects_content_dependence():
    """Negative control: once content weights vary, the same check fails."""
    model, heads = exact_toy_model(seed=0)
    model.blocks[0].attn.W_Q[0, :16] = torch.randn(
        16, 16, generator=torch.Generator().manual_seed(3)
    )
    gen = torch.Generator().manual_seed(1)
    calibration = torch.randint(0, model.cfg.d_vocab, (model.cfg.n_ctx,), generator=gen)
    circuit = C.build_circuit(model, calibration, heads=heads, dest_token=3, n_min=4)
    texts = torch.randint(0, model.cfg.d_vocab, (3, model.cfg.n_ctx), generator=gen)
    fit = C.circuit_error(circuit, model, texts)
    assert fit.relative_error.max() > 1e-2


# ----------------------------------------------------------------------------------------------
# The planted model: pieces against independent computations
# ----------------------------------------------------------------------------------------------


def test_kernels_match_positional_patterns(planted, circuit):
    model = planted.model
    mean_keys = dec.mean_positional_keys(model, circuit.calibration.tokens[1:], model.cfg.n_ctx)
    for n in (1, 100, 700):
        # All heads, then select: decomposition's shape annotations reject a subset of heads.
        expected = dec.positional_pattern(model, n, " the", mean_keys=mean_keys)[circuit.heads]
        assert torch.allclose(circuit.head_kernels[:, n, : n + 1], expected, atol=1e-6)
    rows = circuit.kernel.sum(-1)
    assert torch.allclose(rows, torch.ones_like(rows), atol=1e-5)
    assert circuit.kernel.triu(1).abs().max() == 0
    # The median lies between the heads' smallest and largest weights (before renormalising).
    assert (circuit.kernel[500, :501] > 0).all()


def test_denominators_match_decomposition(planted, circuit):
    """In the destination frame, D_h(n) equals chapter 1's denominator of the calibration prefix
    with ' the' at n; in the reference frame (the default) it is the same sum with the content
    weights at n_ref, as the extended embeddings take them (the bag's weights then sum to 1)."""
    model = planted.model
    the = dec.token_id(model, " the")
    tokens = circuit.calibration.tokens
    destination = C.build_circuit(model, "prose", circuit.heads, frame="destination")
    for n in (5, 150, 600):
        seq = torch.cat([tokens[:n], torch.tensor([the])])
        mean_keys = dec.mean_positional_keys(model, tokens[1:], n + 1)
        decomposed = dec.decompose_attention(model, seq, mean_keys=mean_keys)
        expected = decomposed.log_denominator()[circuit.heads, n]
        assert torch.allclose(destination.calibration.log_denominators[:, n], expected, atol=1e-4)
        weights = circuit.head_kernels[:, n, :n + 1].log() + circuit.log_content[:, seq]
        assert torch.allclose(circuit.calibration.log_denominators[:, n],
                              torch.logsumexp(weights, -1), atol=1e-4)
    for built in (circuit, destination):
        expected_median = built.calibration.log_denominators[:, C.N_MIN :].median(-1).values
        assert torch.equal(built.calibration.log_dhat, expected_median)


def _hook_values(model, token_ids, position, names):
    """Activations of ``names`` at ``position`` when each token of ``token_ids`` sits there."""
    filler = dec.token_id(model, " and")
    batch = torch.full((len(token_ids), position + 1), filler)
    batch[:, 0] = model.tokenizer.bos_token_id
    batch[:, position] = token_ids
    _, cache = model.run_with_cache(batch, stop_at_layer=1, names_filter=names)
    return {name: cache[name][:, position] for name in names}


def brute_force_extended(model, circuit, token_ids, reference):
    """``e(t)`` assembled from hook_q, hook_k and hook_v, with the circuit's ``Dhat`` only."""
    n_ref, heads = circuit.n_ref, circuit.heads
    the = torch.tensor([circuit.dest_token])
    q = _hook_values(model, the, n_ref, ["blocks.0.attn.hook_q"])["blocks.0.attn.hook_q"][0]
    acts = _hook_values(model, token_ids, n_ref, ["blocks.0.attn.hook_k", "blocks.0.attn.hook_v"])
    k, v = acts["blocks.0.attn.hook_k"], acts["blocks.0.attn.hook_v"]
    ref, counts = torch.unique(reference, return_counts=True)
    v_ref = _hook_values(model, ref, n_ref, ["blocks.0.attn.hook_v"])["blocks.0.attn.hook_v"]
    mean_v = (v_ref * (counts / counts.sum())[:, None, None]).sum(0)
    log_c = torch.einsum("he,the->th", q[heads], k[:, heads]) / model.cfg.d_head**0.5
    weight = torch.exp(log_c - circuit.calibration.log_dhat)
    w_o = model.blocks[0].attn.W_O[heads]
    return torch.einsum("th,the,hed->td", weight, (v - mean_v)[:, heads], w_o)


def test_extended_embeddings_match_hooks(planted):
    model = planted.model
    # A small reference distribution (with repeats) keeps the brute-force mean values cheap.
    reference = torch.tensor([262, 290, 286, 262, 1110, 3303, 262, 13, 11, 50000, 1234, 290])
    circuit = C.build_circuit(model, "prose", n_ref=64, reference_tokens=reference)
    ids = [dec.token_id(model, s) for s in (" colour", " the", " war", " God", " de")] + [17, 40000]
    ids = torch.tensor(ids)
    expected = brute_force_extended(model, circuit, ids, reference)
    got = circuit.extended[ids]
    error = (got - expected).norm(dim=-1) / expected.norm(dim=-1)
    assert error.max() < 1e-4, error


def test_positional_part_is_each_heads_kernel_times_mean_values(circuit, planted):
    model = planted.model
    n = 300
    w_o = model.blocks[0].attn.W_O[circuit.heads]
    expected = sum(
        circuit.head_kernels[r, n, : n + 1] @ (circuit.mean_values[: n + 1, r] @ w_o[r])
        for r in range(len(circuit.heads))
    )
    assert torch.allclose(circuit.positional_part[n], expected, atol=1e-5)


def test_planted_circuit_is_close(planted, circuit):
    from context_neurons.text.windows import corpus_windows

    model = planted.model
    windows, _, _ = corpus_windows(model.tokenizer, "nltk_masc", n=1, min_tokens=500)
    fit = C.circuit_error(circuit, model, windows[0][:600])
    assert fit.cosine[0, C.N_MIN :].median() > 0.92
    late = fit.relative_error[0, C.N_MIN :].median()
    early = C.circuit_error(circuit, model, windows[0][:600], "per_position")
    assert early.relative_error[0, 1:50].median() < fit.relative_error[0, 1:50].median()
    assert late < 0.4


def test_per_position_denominators_extend_with_median(circuit):
    calib = circuit.calibration
    n = len(calib.tokens) + 10
    log_d = calib.position_log_denominators(n)
    assert log_d.shape == (len(circuit.heads), n)
    assert torch.equal(log_d[:, : len(calib.tokens)], calib.log_denominators)
    assert torch.equal(log_d[:, -1], calib.log_dhat)


def test_get_circuit_is_cached(planted, circuit):
    assert C.get_circuit(planted.model) is circuit


def test_identity_cache_does_not_serve_a_reused_id():
    """An entry whose object is gone is never served to a new object that got the same id."""

    class Thing:
        pass

    cache = IdentityCache(size=2)
    first, second = Thing(), Thing()
    assert cache.get((first,), ("a",), lambda: 1) == 1
    assert cache.get((first,), ("a",), lambda: 2) == 1  # cached
    # Simulate id reuse: move the first object's entry under the second object's id.
    cache._entries[(id(second), "a")] = cache._entries.pop((id(first), "a"))
    assert cache.get((second,), ("a",), lambda: 3) == 3
    cache.get((first,), ("b",), lambda: 4)
    cache.get((first,), ("c",), lambda: 5)
    assert len(cache._entries) == 2  # the oldest entry was dropped


def test_ln2_scale_is_median_inverse_std(planted, circuit):
    model = planted.model
    _, cache = model.run_with_cache(
        circuit.calibration.tokens[None], stop_at_layer=1, names_filter="blocks.0.ln2.hook_scale"
    )
    inverse = 1 / cache["blocks.0.ln2.hook_scale"][0, 1:, 0]
    assert abs(float(inverse.median()) - circuit.ln2_scale) < 1e-3 * circuit.ln2_scale


# ----------------------------------------------------------------------------------------------
# Errors
# ----------------------------------------------------------------------------------------------


def test_short_calibration_text_is_refused(planted):
    with pytest.raises(C.CircuitError, match="n_min"):
        C.build_circuit(planted.model, torch.tensor([50256, 262, 290]))


def test_bad_options_are_refused(toy):
    model, circuit, texts = toy
    with pytest.raises(C.CircuitError, match="denominators"):
        circuit.bag(texts, denominators="mean")
    with pytest.raises(C.CircuitError, match="kernel"):
        circuit.bag(texts, kernel="average")
    with pytest.raises(InputError, match="batch, pos"):
        circuit.bag(torch.zeros(1, 0, dtype=torch.long))
    with pytest.raises(InputError):
        C.build_circuit(model, texts[0], heads=[0, 7])


def test_circuit_fit_figure_on_a_log_axis_names_the_model():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from context_neurons.plotting.circuit import plot_circuit_fit

    errors = {"a": torch.full((2, 50), 0.01), "b": torch.full((2, 50), 0.3)}
    figure = plot_circuit_fit(errors, smooth=5, title="a model")
    ax = figure.axes[0]
    assert ax.get_yscale() == "log" and ax.get_title() == "a model"
    low, high = ax.get_ylim()
    assert low < 0.01 and high > 0.3  # both errors visible
    plt.close(figure)
    assert plot_circuit_fit(errors, log=False).axes[0].get_yscale() == "linear"


# ---- chapter 4's findings, computed in the package (issue 33) ----------------------------------


def test_known_heads_lines():
    assert C.KnownHeads([0, 2], [2, 0], gpt2=True).findings() == [
        "contextual heads (computed):  [0, 2]", "paper (GPT-2 Small):          [2, 0]"]
    lines = C.KnownHeads([0, 3], [0, 2], gpt2=True).findings()
    assert len(lines) == 3 and lines[2].startswith("!!! THE COMPUTED CONTEXTUAL HEADS DIFFER")
    assert C.KnownHeads([0, 3], [0, 2], planted=[0, 3]).findings()[1] == (
        "planted truth:                [0, 3]  (by construction)")
    assert C.KnownHeads([0, 3], [0, 2]).findings()[1] == (
        "GPT-2 Small's in the paper:   [0, 2]  (another model; reference)")


def test_variant_fits_and_their_table(toy):
    model, circuit, texts = toy
    true = C.true_head_output(model, texts, circuit.heads)
    fits = C.variant_fits(circuit, model, texts, true)
    assert list(fits) == list(C.FIT_VARIANTS)
    for name, options in C.FIT_VARIANTS.items():
        direct = C.circuit_error(circuit, model, texts, **options)
        torch.testing.assert_close(fits[name].relative_error, direct.relative_error)
    table = C.fit_table(fits)
    assert list(table.index) == list(C.FIT_VARIANTS)
    assert list(table.columns) == ["cosine", "rel. error, n < 100", "rel. error, n >= 100",
                                   "bag cosine, n >= 100"]
    fit = fits["the circuit (Dhat_h, shared kernel)"]
    assert table.iloc[0]["cosine"] == pytest.approx(float(fit.cosine[:, 1:].median()))
    assert table.iloc[0]["rel. error, n < 100"] == pytest.approx(
        float(fit.relative_error[:, 1:100].median()))
