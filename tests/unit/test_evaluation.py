"""Tests of the evaluation (chapter 6): exactness, batching, metrics, the planted model, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from context_neurons import circuit as C
from context_neurons import evaluation as E
from context_neurons import neurons as N
from context_neurons.data import DataError, corpus_windows
from context_neurons.models import load_model
from context_neurons.testing import make_small_model

torch.set_grad_enabled(False)


@pytest.fixture(scope="module")
def toy():
    model, heads = C.exact_toy_model(seed=2)
    gen = torch.Generator().manual_seed(5)
    calibration = torch.randint(0, model.cfg.d_vocab, (model.cfg.n_ctx,), generator=gen)
    circuit = C.build_circuit(model, calibration, heads=heads, dest_token=7, n_min=4)
    texts = torch.randint(0, model.cfg.d_vocab, (4, model.cfg.n_ctx), generator=gen)
    return model, circuit, texts


@pytest.fixture(scope="module")
def planted():
    return load_model("planted")


@pytest.fixture(scope="module")
def circuit(planted):
    return C.get_circuit(planted.model)


@pytest.fixture(scope="module")
def windows(planted):
    windows, labels, _ = corpus_windows(planted.model.tokenizer, "nltk_masc", n=3, min_tokens=600)
    return [w[:700] for w in windows], labels


def _pre_with_fixed_ln2(model, tokens, scale):
    store = {}
    hooks = [
        ("blocks.0.ln2.hook_scale", lambda s, hook: torch.full_like(s, 1 / scale)),
        ("blocks.0.mlp.hook_pre", lambda x, hook: store.setdefault("pre", x)),
    ]
    model.run_with_hooks(tokens, fwd_hooks=hooks)
    return store["pre"]


# ----------------------------------------------------------------------------------------------
# Exactness where the assumptions hold
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("denominators", ["per_position", "median"])
def test_approximation_is_exact_when_assumptions_hold(toy, denominators):
    """Contextual heads content-free with one kernel, other heads on the current token, LN2 fixed."""
    model, circuit, texts = toy
    approx = E.approximator(circuit, model, None, denominators)(texts)
    true = _pre_with_fixed_ln2(model, texts, circuit.ln2_scale)
    assert approx.shape == true.shape == (4, model.cfg.n_ctx, model.cfg.d_mlp)
    assert torch.allclose(approx, true, atol=1e-4 * true.abs().max())


def test_unfixed_ln2_scale_breaks_exactness(toy):
    """Negative control: with LN2's real, varying scale the same comparison fails."""
    model, circuit, texts = toy
    approx = E.approximator(circuit, model, None)(texts)
    true = E.true_pre_activations(model, texts, None)
    assert (approx - true).abs().max() > 1e-2


def test_terms_add_up(toy):
    model, circuit, texts = toy
    fn = E.approximator(circuit, model, [0, 5])
    terms = fn.terms(texts)
    assert set(terms) == {"bag", "positional", "direct", "other heads", "constant"}
    assert torch.allclose(sum(terms.values()), fn(texts))


# ----------------------------------------------------------------------------------------------
# Metrics and batching
# ----------------------------------------------------------------------------------------------


def test_pearson_and_fvu_match_numpy():
    gen = torch.Generator().manual_seed(0)
    true = torch.randn(3, 50, 2, generator=gen)
    approx = 0.8 * true + 0.3 * torch.randn(3, 50, 2, generator=gen) + 0.1
    mask = torch.ones(3, 50, dtype=torch.bool)
    mask[1, 30:] = False
    mask[:, 0] = False
    r, fvu = E.pearson_and_fvu(true, approx, mask)
    for b in range(3):
        for j in range(2):
            y, yhat = true[b, mask[b], j].numpy(), approx[b, mask[b], j].numpy()
            assert float(r[b, j]) == pytest.approx(np.corrcoef(y, yhat)[0, 1], abs=1e-5)
            expected = ((y - yhat) ** 2).sum() / ((y - y.mean()) ** 2).sum()
            assert float(fvu[b, j]) == pytest.approx(expected, rel=1e-4)


def test_padding_does_not_change_results(planted, circuit, windows):
    model = planted.model
    texts = [windows[0][0][:400], windows[0][1][:650]]
    together = E.evaluate(circuit, model, texts, [300, 57], batch_size=2)
    apart = E.evaluate(circuit, model, texts, [300, 57], batch_size=1)
    assert torch.allclose(together.pearson, apart.pearson, atol=1e-4)
    assert torch.allclose(together.fvu, apart.fvu, atol=1e-4)


def test_truth_cache_is_reused(planted, circuit, windows):
    model = planted.model
    cache = {}
    first = E.evaluate(circuit, model, windows[0][:1], [300], truth_cache=cache)
    assert len(cache) == 1
    (key,) = cache
    cache[key] = cache[key] + 1.0  # a shifted truth must change FVU, not Pearson r
    second = E.evaluate(circuit, model, windows[0][:1], [300], truth_cache=cache)
    assert torch.allclose(first.pearson, second.pearson, atol=1e-5)
    assert not torch.allclose(first.fvu, second.fvu)


# ----------------------------------------------------------------------------------------------
# The planted model end to end
# ----------------------------------------------------------------------------------------------


def test_planted_neurons_are_well_approximated(planted, circuit, windows):
    model = planted.model
    found = N.get_scores(circuit, model).found(N.THETA)
    ev = E.evaluate(circuit, model, windows[0], found, labels=windows[1])
    assert ev.pearson.shape == (3, len(found))
    assert ev.median_pearson >= 0.9
    assert ev.median_fvu <= 0.2
    constant = E.evaluate(circuit, model, windows[0], found, denominators="median")
    assert constant.median_fvu > ev.median_fvu  # the <|endoftext|> sink, early positions


def test_activation_curves(planted, circuit, windows):
    curves = E.activation_curves(circuit, planted.model, windows[0][0][:300], 300)
    assert set(curves) == {"true", "approximation", "bag only"}
    r = np.corrcoef(curves["true"][1:].numpy(), curves["approximation"][1:].numpy())[0, 1]
    assert r > 0.8


def test_silent_on_calibration_reports_maxima(planted, circuit):
    table = E.silent_on_calibration(circuit, planted.model, [300, 1450])
    pre = E.true_pre_activations(planted.model, circuit.calibration.tokens[None], [300, 1450])
    assert table.iloc[:, 0].to_numpy() == pytest.approx(pre[0, 1:].max(0).values.numpy(), abs=1e-5)


def test_reproduce_sections(planted, windows):
    from context_neurons.reproduce import ReproContext

    ctx = ReproContext(planted, windows[0][:2], windows[1][:2], progress=False)
    rows = {r.key: r for r in N.reproduce_section(ctx) + E.reproduce_section(ctx)}
    for key in (
        "theta",
        "neurons_found",
        "median_pearson_r",
        "median_fvu",
        "neuron_precision",
        "neuron_recall",
    ):
        assert key in rows
    assert rows["neuron_precision"].value >= 0.9 and rows["neuron_recall"].value >= 0.9
    assert rows["neurons_found"].truth == len(planted.truth.context_neurons)
    assert rows["median_pearson_r"].value >= 0.9


# ----------------------------------------------------------------------------------------------
# Errors
# ----------------------------------------------------------------------------------------------


def test_empty_texts_are_refused(planted, circuit):
    model = planted.model
    with pytest.raises(E.EvaluationError, match="No texts"):
        E.evaluate(circuit, model, [], [300])
    with pytest.raises(E.EvaluationError, match="at least"):
        E.evaluate(circuit, model, [torch.tensor([50256, 262])], [300])
    with pytest.raises(E.EvaluationError, match="empty"):
        E.activation_curves(circuit, model, torch.tensor([], dtype=torch.long), 300)
    with pytest.raises(E.EvaluationError, match="non-empty"):
        E.true_pre_activations(model, torch.zeros(1, 0, dtype=torch.long), [300])


def test_bad_neurons_and_options_are_refused(planted, circuit, windows):
    model = planted.model
    with pytest.raises(N.NeuronIndexError, match="0..3071"):
        E.evaluate(circuit, model, windows[0][:1], [3072])
    with pytest.raises(N.NeuronIndexError):
        E.approximator(circuit, model, [-5])
    with pytest.raises(C.CircuitError, match="denominators"):
        E.approximator(circuit, model, [300], denominators="mean")
    with pytest.raises(DataError, match="Unknown domain"):
        E.domain_windows(model.tokenizer, "cooking")


def test_domain_windows(planted):
    windows, labels = E.domain_windows(planted.model.tokenizer, "code", n=1)
    assert len(windows) == 1 and windows[0][0] == 50256 and len(windows[0]) == 1024
    assert labels[0].startswith("python_stdlib:")


def test_true_pre_activations_equal_the_hook(planted):
    """The layer-0-only path equals hook blocks.0.mlp.hook_pre for the chosen neurons."""
    model = planted.model
    tokens = torch.randint(0, model.cfg.d_vocab, (2, 200), generator=torch.Generator().manual_seed(0))
    _, cache = model.run_with_cache(tokens, names_filter="blocks.0.mlp.hook_pre")
    neurons = [300, 704, 1621, 1710, 5]
    torch.testing.assert_close(E.true_pre_activations(model, tokens, neurons),
                               cache["blocks.0.mlp.hook_pre"][..., neurons], atol=1e-4, rtol=1e-4)


def test_position_zero_uses_the_sink_denominator(planted, circuit, windows):
    """D_h(0) is the <|endoftext|> token's own content weight, so position 0 is predicted too."""
    curves = E.activation_curves(circuit, planted.model, windows[0][0][:50], 300)
    error = (curves["true"][0] - curves["approximation"][0]).abs()
    assert error < 0.2 * curves["true"].abs().max()


@pytest.mark.parametrize("fold_ln", [False, True])
def test_fused_layer0_equals_the_hooked_forward_pass(fold_ln):
    """The fused-attention path gives hook blocks.0.hook_resid_mid, with and without weight processing."""
    model, _ = make_small_model(seed=3, fold_ln=fold_ln)
    assert E._fused_attention_applies(model)
    tokens = torch.randint(0, model.cfg.d_vocab, (3, model.cfg.n_ctx),
                           generator=torch.Generator().manual_seed(1))
    _, cache = model.run_with_cache(tokens, names_filter=lambda name: name.startswith("blocks.0."))
    torch.testing.assert_close(E.layer0_resid_mid(model, tokens),
                               cache["blocks.0.hook_resid_mid"], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(E.true_pre_activations(model, tokens, None),
                               cache["blocks.0.mlp.hook_pre"], atol=1e-5, rtol=1e-5)


def test_hooks_on_layer0_are_respected():
    """With a hook on layer 0's attention the forward pass (and the hook) runs, not the fused path."""
    model, _ = make_small_model(seed=3)
    tokens = torch.randint(0, model.cfg.d_vocab, (2, 20), generator=torch.Generator().manual_seed(2))
    clean = E.layer0_resid_mid(model, tokens)

    def ablate_head_0(z, hook):
        z[:, :, 0] = 0.0
        return z

    with model.hooks(fwd_hooks=[("blocks.0.attn.hook_z", ablate_head_0)]):
        assert not E._fused_attention_applies(model)
        ablated = E.layer0_resid_mid(model, tokens)
        _, cache = model.run_with_cache(tokens, names_filter="blocks.0.hook_resid_mid")
    torch.testing.assert_close(ablated, cache["blocks.0.hook_resid_mid"])
    assert (ablated - clean).abs().max() > 1e-3
    assert E._fused_attention_applies(model)
