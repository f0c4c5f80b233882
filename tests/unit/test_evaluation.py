"""Tests of the evaluation (chapter 6): exactness, batching, metrics, the planted model, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from context_neurons import circuit as C
from context_neurons import evaluation as E
from context_neurons.evaluation import approximation
from context_neurons import discovery as N
from context_neurons.checks import DataError, OutOfRangeError, TokenError
from context_neurons.models.planted_plan import NeuronPlan
from context_neurons.text.windows import corpus_windows, domain_windows, evaluation_windows
from context_neurons.models import load_model
from context_neurons.models.toy import exact_toy_model, make_small_model

torch.set_grad_enabled(False)


@pytest.fixture(scope="module")
def toy():
    model, heads = exact_toy_model(seed=2)
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
    """Contextual heads content-free, one kernel, other heads on the current token, LN2 fixed."""
    model, circuit, texts = toy
    approx = E.approximator(circuit, model, None, denominators)(texts)
    true = _pre_with_fixed_ln2(model, texts, circuit.ln2_scale)
    assert approx.shape == true.shape == (4, model.cfg.n_ctx, model.cfg.d_mlp)
    assert torch.allclose(approx, true, atol=1e-4 * true.abs().max())


@pytest.mark.parametrize("denominators", ["per_position", "median"])
def test_contextual_heads_accuracy_is_exact_when_the_heads_are_content_free(toy, denominators):
    """The circuit alone (no local terms): exact on content-free heads with one kernel."""
    model, circuit, texts = toy
    result = E.contextual_heads_accuracy(circuit, model, list(texts), [0, 3, 5], (denominators,))
    r, fvu = result[denominators]
    # one pass judging both denominators gives each the same figures as its own pass
    both = E.contextual_heads_accuracy(circuit, model, list(texts), [0, 3, 5],
                                       ("per_position", "median"))
    assert both[denominators] == result[denominators]
    assert r == pytest.approx(1.0, abs=1e-4) and fvu < 1e-4


def test_contextual_heads_accuracy_matches_a_computation_through_the_hooks(planted, circuit,
                                                                           windows):
    """On the planted model (content weights, several kernels) against numpy on hook_z."""
    model, neurons, text = planted.model, [300, 1710], windows[0][0][:300]
    result = E.contextual_heads_accuracy(circuit, model, [text], neurons, ("median",), start=5)
    r, fvu = result["median"]
    _, cache = model.run_with_cache(text[None], names_filter="blocks.0.attn.hook_z")
    z = cache["blocks.0.attn.hook_z"][0][:, circuit.heads]  # [pos, head, d_head]
    true = torch.einsum("phe,hed->pd", z, model.blocks[0].attn.W_O[circuit.heads])
    approx = circuit.approximate_output(text, "median", kernel="per_head")[0]
    read = N.read_vectors(circuit, model, neurons)
    rs, fvus = [], []
    for k in range(len(neurons)):
        t = (true @ read[:, k])[5:].double().numpy()
        a = (approx @ read[:, k])[5:].double().numpy()
        rs.append(np.corrcoef(t, a)[0, 1])
        fvus.append(((t - a) ** 2).sum() / ((t - t.mean()) ** 2).sum())
    # the median of two pairs is the lower one in torch
    assert r == pytest.approx(min(rs), abs=1e-4) and fvu == pytest.approx(min(fvus), rel=1e-3)
    assert 0.5 < r < 1  # content weights and kernels differ: good, not exact


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
    assert cache[key].device.type == "cpu"  # kept off the accelerator, batch by batch
    cache[key] = cache[key] + 1.0  # a shifted truth must change FVU, not Pearson r
    second = E.evaluate(circuit, model, windows[0][:1], [300], truth_cache=cache)
    assert torch.allclose(first.pearson, second.pearson, atol=1e-5)
    assert not torch.allclose(first.fvu, second.fvu)


def test_context_part_measures(planted, circuit, windows):
    """Context r and FVU equal a direct computation from the terms; FVU = context FVU x share."""
    model, neurons = planted.model, [300, 1710]
    texts = windows[0][:2]
    result = E.evaluate(circuit, model, texts, neurons)
    assert torch.allclose(result.fvu, result.context_fvu * result.context_share, rtol=1e-3)
    for b, tokens in enumerate(texts):
        for k, j in enumerate(neurons):
            c = E.activation_curves(circuit, model, tokens, j, parts=True)
            y, yhat = c["true minus local"][1:].numpy(), c["bag + positional"][1:].numpy()
            assert float(result.context_pearson[b, k]) == pytest.approx(
                np.corrcoef(y, yhat)[0, 1], abs=1e-4
            )
            true = c["true"][1:].numpy()
            share = ((y - y.mean()) ** 2).sum() / ((true - true.mean()) ** 2).sum()
            assert float(result.context_share[b, k]) == pytest.approx(share, rel=1e-3)
            assert float(result.true_mean[b, k]) == pytest.approx(true.mean(), abs=1e-4)


def test_activation_curve_parts_add_up(planted, circuit, windows):
    c = E.activation_curves(circuit, planted.model, windows[0][0][:200], 1710, parts=True)
    assert torch.allclose(c["local terms"] + c["bag + positional"], c["approximation"], atol=1e-4)
    assert torch.allclose(c["true minus local"] + c["local terms"], c["true"], atol=1e-5)


def test_evaluate_sets_equals_evaluate(planted, circuit, windows):
    model = planted.model
    sets = {"a": windows[0][:1], "b": windows[0][1:3]}
    together = E.evaluate_sets(circuit, model, sets, [300, 57])
    for name, texts in sets.items():
        alone = E.evaluate(circuit, model, texts, [300, 57])
        assert torch.allclose(together[name].pearson, alone.pearson, atol=1e-6)
        assert torch.allclose(together[name].context_fvu, alone.context_fvu, atol=1e-6)
    with pytest.raises(E.EvaluationError, match="No sets"):
        E.evaluate_sets(circuit, model, {}, [300])


def test_calibration_sensitivity_own_neurons(planted, windows):
    model = planted.model
    sets = {"a": windows[0][:1], "b": windows[0][1:2]}
    table = E.calibration_sensitivity(
        model, sets, [300, 57], calibrations=("prose",), own_neurons={"a": [57]}
    )
    circuit = C.get_circuit(model, "prose")
    alone = E.evaluate(circuit, model, sets["a"], [57])
    assert table.loc["prose", ("own neurons' FVU", "a")] == pytest.approx(
        float(alone.fvu.median()), rel=1e-5
    )
    assert np.isnan(table.loc["prose", ("own neurons' FVU", "b")])
    assert set(table.columns.get_level_values(0)) == {
        "median r",
        "median FVU",
        "median context FVU",
        "own neurons' FVU",
    }


# ----------------------------------------------------------------------------------------------
# The planted model end to end
# ----------------------------------------------------------------------------------------------


@pytest.mark.slow
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
    expected = pre[0, 1:].max(0).values.numpy()
    assert table.iloc[:, 0].to_numpy() == pytest.approx(expected, abs=1e-5)


@pytest.fixture(scope="module")
def domain_sets(planted):
    tokenizer = planted.model.tokenizer
    return {
        d: [w[:400] for w in domain_windows(tokenizer, d, n=2)[0]] for d in ("bible", "spanish")
    }


def test_silent_on_calibration_relative_criterion(planted, circuit, domain_sets):
    """Maxima per set equal the model's; the quiet flag follows its definition after GELU."""
    model, neurons = planted.model, [1710, 1450, 300]
    evaluations = E.evaluate_sets(circuit, model, domain_sets, neurons)
    table = E.silent_on_calibration(circuit, model, neurons, evaluations)
    for name, windows in domain_sets.items():
        pre = E.true_pre_activations(model, torch.stack(windows), neurons)[:, 1:]
        expected = pre.amax((0, 1)).numpy()
        column = f"max pre-activation, {name}"
        assert table[column].to_numpy() == pytest.approx(expected, abs=1e-4)
    assert model.cfg.act_fn == "gelu_new"  # GPT-2's activation, computed here independently

    def gelu(column):
        x = torch.tensor(table[column].to_numpy())
        return torch.nn.functional.gelu(x, approximate="tanh")

    calib = gelu("max pre-activation, calibration text")
    best = gelu("max pre-activation, best set")
    calib_out = table["max output, calibration text"].to_numpy()
    assert calib_out == pytest.approx(calib.numpy(), abs=1e-5)
    assert table["max output, best set"].to_numpy() == pytest.approx(best.numpy(), abs=1e-5)
    quiet = (calib < E.QUIET_FRACTION * best) & (best >= E.STRONG_OUTPUT)
    assert table["quiet on calibration"].tolist() == quiet.tolist()
    assert table["fires clearly on calibration"].tolist() == (calib >= E.STRONG_OUTPUT).tolist()
    assert table.loc[1710, "best set"] == "bible" and table.loc[1450, "best set"] == "spanish"
    units = [c for c in table.columns if c.startswith("max ")]
    assert all(c.startswith(("max pre-activation, ", "max output, ")) for c in units)
    with pytest.raises(E.EvaluationError, match="same neurons"):
        E.silent_on_calibration(circuit, model, [1710], evaluations)


def test_matched_domains(planted, circuit, domain_sets):
    """Domains are given (from the weights), not chosen from the activations; a neuron with no
    domain is left out of the pooled medians."""
    evaluations = E.evaluate_sets(circuit, planted.model, domain_sets, [1710, 1450, 300])
    domains = {1710: "bible", 1450: "spanish", 300: None}
    table, pooled = E.matched_domains(evaluations, domains)
    assert table["domain"].to_dict() == domains
    assert table.loc[300].drop("domain").isna().all()
    bible, spanish = evaluations["bible"], evaluations["spanish"]
    pooled_r = torch.cat([bible.context_pearson[:, 0], spanish.context_pearson[:, 1]])
    assert pooled["context r"] == pytest.approx(float(pooled_r.median()), abs=1e-6)
    assert pooled["context share"] > 0.3  # on its own domain the context part is large
    # the given domain is used even where another set has the higher activation
    swapped, _ = E.matched_domains(evaluations, {1710: "spanish", 1450: None, 300: None})
    assert swapped.loc[1710, "context r"] == pytest.approx(
        float(spanish.context_pearson[:, 0].median()), abs=1e-6
    )
    _, empty = E.matched_domains(evaluations, {})
    assert all(np.isnan(v) for v in empty.values())


def test_main_job_rows(planted, circuit, windows):
    from context_neurons.reproduce.pipeline import discovery_rows, evaluation_rows

    scores = N.get_scores(circuit, planted.model)
    rows = discovery_rows(scores, circuit, N.THETA, planted.truth)
    rows += evaluation_rows(circuit, planted.model, windows[0][:2], windows[1][:2],
                            scores.found(N.THETA), progress=False)
    rows = {r.key: r for r in rows}
    for key in (
        "theta",
        "neurons_found",
        "median_pearson_r",
        "median_fvu",
        "neuron_precision",
        "neuron_recall",
    ):
        assert key in rows
    precision, recall = N.precision_recall(scores.found(N.THETA), planted.truth.context_neurons)
    assert rows["neuron_precision"].value == precision and rows["neuron_recall"].value == recall
    assert rows["neurons_found"].truth == len(planted.truth.context_neurons)
    assert rows["median_pearson_r"].value >= 0.9
    assert 0 < rows["median_context_share"].value < 1
    assert rows["median_context_fvu"].value >= 0


def test_main_job_rows_without_neurons(planted, circuit, windows):
    """With no neuron found the main job still reports both headline keys, as NaN."""
    from context_neurons.reproduce.pipeline import evaluation_rows

    rows = evaluation_rows(circuit, planted.model, windows[0][:1], windows[1][:1], [], False)
    rows = {r.key: r for r in rows}
    assert {"median_pearson_r", "median_fvu"} <= set(rows)
    assert np.isnan(rows["median_fvu"].value) and np.isnan(rows["median_pearson_r"].value)


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
    with pytest.raises(TokenError, match="non-empty"):
        E.true_pre_activations(model, torch.zeros(1, 0, dtype=torch.long), [300])


def test_bad_neurons_and_options_are_refused(planted, circuit, windows):
    model = planted.model
    with pytest.raises(OutOfRangeError, match="0..3071"):
        E.evaluate(circuit, model, windows[0][:1], [3072])
    with pytest.raises(OutOfRangeError):
        E.approximator(circuit, model, [-5])
    with pytest.raises(C.CircuitError, match="denominators"):
        E.approximator(circuit, model, [300], denominators="mean")
    with pytest.raises(DataError, match="Unknown domain"):
        domain_windows(model.tokenizer, "cooking")


def test_evaluation_windows_mix_corpora(planted):
    model = planted.model
    windows, labels, report = evaluation_windows(model.tokenizer, 6)
    bos = model.tokenizer.bos_token_id
    assert len(windows) == 6 and all(len(w) == model.cfg.n_ctx and w[0] == bos for w in windows)
    assert len({label.split(":")[0] for label in labels}) >= 3
    assert report.n_windows == 6


def test_domain_windows(planted):
    windows, labels = domain_windows(planted.model.tokenizer, "code", n=1)
    assert len(windows) == 1 and windows[0][0] == 50256 and len(windows[0]) == 1024
    assert labels[0].startswith("python_stdlib:")


def test_true_pre_activations_equal_the_hook(planted):
    """The layer-0-only path equals hook blocks.0.mlp.hook_pre for the chosen neurons."""
    model = planted.model
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, model.cfg.d_vocab, (2, 200), generator=gen)
    _, cache = model.run_with_cache(tokens, names_filter="blocks.0.mlp.hook_pre")
    neurons = [300, 704, 1621, 1710, 5]
    torch.testing.assert_close(
        E.true_pre_activations(model, tokens, neurons),
        cache["blocks.0.mlp.hook_pre"][..., neurons],
        atol=1e-4,
        rtol=1e-4,
    )


def test_position_zero_uses_the_sink_denominator(planted, circuit, windows):
    """D_h(0) is the <|endoftext|> token's own content weight, so position 0 is predicted better
    with the per-position denominators. (Not exactly: position 0's large norm shrinks its values,
    which the circuit takes at n_ref.)"""
    tokens = windows[0][0][:50]
    curves = E.activation_curves(circuit, planted.model, tokens, 300)
    constant = E.activation_curves(circuit, planted.model, tokens, 300, denominators="median")
    error = (curves["true"][0] - curves["approximation"][0]).abs()
    assert error < (constant["true"][0] - constant["approximation"][0]).abs()
    assert error < 0.6 * curves["true"].abs().max()


@pytest.mark.parametrize("fold_ln", [False, True])
def test_fused_layer0_equals_the_hooked_forward_pass(fold_ln):
    """The fused-attention path gives hook blocks.0.hook_resid_mid, folded LayerNorm or not."""
    model, _ = make_small_model(seed=3, fold_ln=fold_ln)
    assert approximation._fused_attention_applies(model)
    gen = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, model.cfg.d_vocab, (3, model.cfg.n_ctx), generator=gen)
    _, cache = model.run_with_cache(tokens, names_filter=lambda name: name.startswith("blocks.0."))
    torch.testing.assert_close(
        E.layer0_resid_mid(model, tokens), cache["blocks.0.hook_resid_mid"], atol=1e-5, rtol=1e-5
    )
    torch.testing.assert_close(
        E.true_pre_activations(model, tokens, None),
        cache["blocks.0.mlp.hook_pre"],
        atol=1e-5,
        rtol=1e-5,
    )


def test_hooks_on_layer0_are_respected():
    """With a hook on layer 0's attention the hooked forward pass runs, not the fused path."""
    model, _ = make_small_model(seed=3)
    gen = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, model.cfg.d_vocab, (2, 20), generator=gen)
    clean = E.layer0_resid_mid(model, tokens)

    def ablate_head_0(z, hook):
        z[:, :, 0] = 0.0
        return z

    with model.hooks(fwd_hooks=[("blocks.0.attn.hook_z", ablate_head_0)]):
        assert not approximation._fused_attention_applies(model)
        ablated = E.layer0_resid_mid(model, tokens)
        _, cache = model.run_with_cache(tokens, names_filter="blocks.0.hook_resid_mid")
    torch.testing.assert_close(ablated, cache["blocks.0.hook_resid_mid"])
    assert (ablated - clean).abs().max() > 1e-3
    assert approximation._fused_attention_applies(model)


# ----------------------------------------------------------------------------------------------
# No calibration text among the evaluation texts (issue 14)
# ----------------------------------------------------------------------------------------------


def _contains(window, needle) -> bool:
    """Whether ``needle`` occurs in ``window`` as a contiguous run of tokens."""
    window, needle = torch.as_tensor(window), torch.as_tensor(needle)
    if len(window) < len(needle):
        return False
    return bool((window.unfold(0, len(needle), 1) == needle).all(1).any())


@pytest.mark.slow
def test_no_calibration_document_in_the_evaluation_sets(planted):
    """Chapter 6's sets (200 general texts, 4 texts of every domain) hold no calibration
    document: checked by content (the first 64 tokens of each calibration text), not by the
    names the exclusion uses. Without the exclusion the same check finds them (it is live)."""
    from context_neurons.text.corpora import CALIBRATION_TEXTS, DOMAINS, calibration_text
    from context_neurons.text.windows import tokenize_text

    tokenizer = planted.model.tokenizer
    needles = {
        name: tokenize_text(tokenizer, calibration_text(name).text, truncate=True)[1:65]
        for name in CALIBRATION_TEXTS
    }
    general, labels, _, left_out = E.held_out_general_windows(tokenizer, 200)
    sets, _ = E.held_out_domain_sets(tokenizer, DOMAINS, n=4)
    assert len(general) == 200 and all(len(w) == 4 for w in sets.values())
    every = general + [w for windows in sets.values() for w in windows]
    leaks = [name for name, needle in needles.items() for w in every if _contains(w, needle)]
    assert not leaks, f"calibration documents in the evaluation sets: {leaks}"
    raw_general, raw_labels, _ = evaluation_windows(tokenizer, 200)
    assert any(_contains(w, needles["news"]) for w in raw_general)
    assert "nltk_brown_us:ca01" in left_out and "nltk_brown_us:ca01" not in labels
    assert raw_labels[0] == "nltk_brown_us:ca01"  # why the main job and chapters 1 and 4 leave it out
    raw_sets = {}
    for name in ("bible", "spanish", "code"):
        raw_sets[name] = domain_windows(tokenizer, name, n=4)[0]
        assert any(_contains(w, needles[name]) for w in raw_sets[name]), name
    # the package's own content check agrees with this one
    assert E.calibration_leaks(tokenizer, {"general": general, **sets}) == []
    found = E.calibration_leaks(tokenizer, raw_sets, names=("bible", "spanish", "code"))
    assert found == ["bible: bible", "spanish: spanish", "code: code"]


def test_document_keys_ignore_the_online_domain():
    assert E.document_key("openwebtext~bible:17") == E.document_key("openwebtext:17")
    assert E.document_key("nltk_masc:spoken/a.txt") == ("nltk_masc", "spoken/a.txt")
    with pytest.raises(DataError):
        E.document_key("no-colon")


# ---- chapter 6's findings, computed in the package (issue 33) ----------------------------------


def _sensitivity():
    """A calibration_sensitivity table by hand: rows calibration texts, columns (measure, set)."""
    import pandas as pd

    texts = ["prose", "bible", "code"]
    fvu = {("median FVU", s): {c: 0.2 + 0.1 * (c != s) for c in texts} for s in texts}
    fvu[("median FVU", "prose")] = {c: 0.2 for c in texts}
    own = {("own neurons' FVU", s): {c: 0.5 - 0.2 * (c == s) for c in texts} for s in texts}
    table = pd.DataFrame({**fvu, **own})
    table.columns = pd.MultiIndex.from_tuples(table.columns)
    return table


def test_matched_calibration_counts_the_domains_it_helps():
    from context_neurons import evaluation as ev

    found = ev.matched_calibration(_sensitivity(), {"bible": [1], "code": []},
                                   domains=("bible", "code"))
    assert found.helps == 2 and list(found.table["matched is"]) == ["better", "better"]
    assert list(found.table["best"]) == ["bible", "code"]
    assert found.table.loc["bible", "own, matched"] == pytest.approx(0.3)
    assert math.isnan(found.table.loc["code", "own, matched"])  # no neuron of its own
    assert found.finding().endswith("on 2 of 2 domains: on this model it mostly helps.")
    one = ev.matched_calibration(_sensitivity(), {"bible": [1], "prose": []},
                                 domains=("bible", "prose"))
    assert one.helps == 1 and one.finding().endswith("it helps on half the domains.")


def test_ingredient_swap_says_which_ingredient_moves_the_fvu_more(planted):
    import pandas as pd

    from context_neurons import evaluation as ev
    from context_neurons.circuit import get_circuit

    circuit = get_circuit(planted.model)
    assert ev.ingredient_swap(planted.model, circuit, _sensitivity(), {}, {"bible": []},
                              domains=("bible",)) is None  # no domain with neurons of its own
    index = pd.MultiIndex.from_tuples([("prose", "prose"), ("prose", "code"), ("code", "prose"),
                                       ("code", "code")])
    table = pd.DataFrame({"FVU": [0.2, 0.5, 0.25, 0.4], "context r": [0.9] * 4}, index=index)
    swap = ev.IngredientSwap("code", [3], table)
    assert swap.finding() == ("The reference distribution changes the FVU more than the "
                              "denominators and LN2 scale (0.3000 vs 0.0500).")


def _evaluation(pearson, neurons, context_share=None, seed=0):
    """An Evaluation by hand: ``pearson`` given, the other measures drawn (shape of ``pearson``)."""
    pearson = torch.tensor(pearson, dtype=torch.float32)
    gen = torch.Generator().manual_seed(seed)
    draw = lambda: torch.rand(pearson.shape, generator=gen)  # noqa: E731
    share = draw() if context_share is None else torch.full(pearson.shape, context_share)
    return E.Evaluation(neurons=list(neurons), labels=[f"c:{i}" for i in range(len(pearson))],
                        pearson=pearson, fvu=draw(), true_max=draw(), approx_max=draw(),
                        context_pearson=draw(), context_fvu=draw(), context_share=share,
                        true_mean=draw())


@pytest.fixture(scope="module")
def long_toy():
    """The exact toy model with a context of 128 tokens: texts long enough to evaluate from
    position 100 on."""
    model, heads = exact_toy_model(seed=2, n_ctx=128)
    gen = torch.Generator().manual_seed(5)
    calibration = torch.randint(0, model.cfg.d_vocab, (model.cfg.n_ctx,), generator=gen)
    circuit = C.build_circuit(model, calibration, heads=heads, dest_token=7, n_min=4)
    texts = list(torch.randint(0, model.cfg.d_vocab, (4, model.cfg.n_ctx), generator=gen))
    return model, circuit, texts


def test_general_and_own_domain_findings(long_toy):
    """The headline: the general texts' findings, each neuron on its own domain, the medians
    beside the paper's, and how much of them the context part carries."""
    from context_neurons.text.windows import WindowReport

    model, circuit, texts = long_toy
    result = _evaluation([[0.9, 0.8], [0.7, 0.6], [0.5, 0.4]], [0, 3], context_share=0.25)
    constant = _evaluation([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]], [0, 3], seed=1)
    general = E.GeneralEvaluation(
        windows=texts[:3], labels=["brown:a", "masc:b", "brown:c"], report=WindowReport(),
        left_out=[], result=result, constant=constant, note="all 2 found neurons")
    assert general.findings() == [
        f"neurons: all 2 found neurons; 3 general texts ({WindowReport()})",
        "calibration documents left out of them: none was among them",
        "texts per corpus: brown 2, masc 1",
    ]
    sets = {"a": texts[:2], "b": texts[2:]}
    own_domain = {0: "a", 3: None, 5: "b"}
    domains = E.evaluate_own_domains(circuit, model, sets, [0, 3, 5], own_domain)
    expected = E.evaluate_sets(circuit, model, sets, [0, 3, 5])
    assert torch.equal(domains.results["b"].pearson, expected["b"].pearson)
    table, medians = E.matched_domains(expected, own_domain)
    assert domains.medians == pytest.approx(medians, nan_ok=True)
    assert domains.matched["domain"].tolist() == ["a", None, "b"] and domains.without == [3]
    assert domains.findings() == ["4 domain texts: a, b", "own domain from the weights: 2 of 3 "
                                  "neurons", "no own domain (their tokens suggest none of these "
                                  "domains): [3]"]
    headline = E.headline_medians(general, domains, 0.9485, 0.1426)
    assert list(headline.table.index) == list(E.HEADLINE_MEASURES)
    assert headline.table["GPT-2 Small (paper)"].tolist()[:3] == ["0.9485", "0.1426",
                                                                  "not reported"]
    # torch's median of an even count is the lower middle value
    assert headline.table.loc["median Pearson r", "general, D_h(n)"] == pytest.approx(0.6)
    assert headline.table.loc["median Pearson r", "general, Dhat_h"] == pytest.approx(0.3)
    assert headline.table.loc["median FVU", "own domain, D_h(n)"] == pytest.approx(
        medians["median FVU"])
    first, second = headline.findings()
    assert first == ("On the general texts the context part carries a median 25.0% of a pair's "
                     "variance: most of the headline r and FVU measures the local terms, and the "
                     f"context part alone is predicted with median r = "
                     f"{headline.general['context r']:.3f}.")
    assert second.startswith("On each neuron's own domain the context share is "
                             f"{medians['context share']:.1%}")
    mostly = E.Headline(headline.table, {**headline.general, "context share": 0.6},
                        headline.own_domain)
    assert mostly.findings()[0].endswith("the headline r and FVU mostly measure the context part.")


def test_held_out_domain_texts_are_the_domain_sets_in_order(planted):
    tokenizer = planted.model.tokenizer
    sets, texts = E.held_out_domain_texts(tokenizer, ("bible", "spanish"), n=2)
    again, labels = E.held_out_domain_sets(tokenizer, ("bible", "spanish"), n=2)
    assert texts.domains == ["bible", "bible", "spanish", "spanish"]
    assert texts.labels == labels["bible"] + labels["spanish"]
    assert all(torch.equal(a, b) for a, b in zip(texts.windows, again["bible"] + again["spanish"]))
    assert list(sets) == ["bible", "spanish"]


def test_examples_are_the_pairs_at_the_quantiles(long_toy):
    model, circuit, texts = long_toy
    result = _evaluation([[0.9, 0.1, 0.5], [0.3, 0.7, 0.2]], [4, 5, 6])
    ranked = sorted((v, i, k) for i, row in enumerate(result.pearson.tolist())
                    for k, v in enumerate(row))
    for q in E.QUANTILES:
        _, text, k = ranked[int(q * 5)]
        assert E.quantile_pair(result.pearson, q) == (text, k)
    examples = E.general_examples(result, texts[:2])
    assert [e.neuron for e in examples] == [5, 4, 5]  # ranks 0, 2 and 4 of 6: r 0.1, 0.3, 0.7
    assert examples[2].title == (f"90th percentile of r: neuron 5 on c:1 (r = 0.700, context r = "
                                 f"{float(result.context_pearson[1, 1]):.3f})")
    assert torch.equal(examples[0].tokens, texts[0])
    results = {"a": result, "b": _evaluation([[0.2, 0.4, 0.6]], [4, 5, 6], seed=3)}
    sets = {"a": texts[:2], "b": texts[2:3]}
    own = E.own_domain_examples(results, sets, {4: "a", 5: None, 6: "b"}, quantiles=(0.0, 1.0))
    pairs = sorted([(float(result.context_pearson[i, 0]), "a", i, 4) for i in range(2)]
                   + [(float(results["b"].context_pearson[0, 2]), "b", 0, 6)])
    assert [(e.neuron, e.title.split(" text ")[1][0]) for e in own] == [
        (pairs[0][3], str(pairs[0][2])), (pairs[-1][3], str(pairs[-1][2]))]
    assert own[0].title.startswith(f"0th percentile of context r: neuron {pairs[0][3]} on "
                                   f"{pairs[0][1]} text {pairs[0][2]} (r = ")
    with pytest.raises(E.EvaluationError, match="no carried neuron has an own domain"):
        E.own_domain_examples(results, sets, {4: None})


def test_plot_example_pairs_draws_a_row_per_pair(long_toy):
    from context_neurons.plotting.evaluation import plot_example_pairs

    model, circuit, texts = long_toy
    result = E.evaluate(circuit, model, texts[:2], [0, 3])
    figure = plot_example_pairs(circuit, model, E.general_examples(result, texts[:2]),
                                title="toy: general texts")
    assert len(figure.axes) == 6 and figure.axes[2].get_title().startswith("50th percentile")
    assert figure.axes[1].get_title() == "context part"


def test_error_by_position_on_the_toy(long_toy):
    model, circuit, texts = long_toy
    table = E.error_by_position(circuit, model, texts, [0, 3, 5])
    assert list(table.columns) == ["median r", "median FVU", "median context FVU"]
    assert list(table.index) == [("per-position D_h(n)", "all positions"),
                                 ("per-position D_h(n)", "n >= 100"),
                                 ("constant Dhat_h", "all positions"),
                                 ("constant Dhat_h", "n >= 100")]
    late = E.evaluate(circuit, model, texts, [0, 3, 5], denominators="median", start=100)
    assert table.loc[("constant Dhat_h", "n >= 100"), "median FVU"] == pytest.approx(
        late.median_fvu)


def test_timings_say_which_is_faster(long_toy):
    timings = E.Timings(4, 19, 0.039, 0.551, 3.38)
    assert timings.finding() == (
        "4 texts, 19 neurons: approximation 0.039 s; first layer, fused 0.551 s (14.1x); first "
        "layer through hooks 3.380 s (86.7x): here the approximation is faster than the fused "
        "first layer")
    assert "is slower than" in E.Timings(4, 19, 0.6, 0.551, 3.38).finding()
    model, circuit, texts = long_toy
    measured = E.time_approximation(circuit, model, texts[:2], [0, 3], repeats=1)
    assert (measured.n_texts, measured.n_neurons) == (2, 2)
    assert min(measured.approximation, measured.first_layer, measured.hooks) > 0


def test_calibration_study_sets_and_findings(long_toy, monkeypatch):
    import pandas as pd

    from context_neurons.evaluation import calibration

    model, circuit, texts = long_toy
    seen = {}

    def sensitivity(model, sets, neurons, calibrations, truth_cache, own_neurons):
        seen.update(sets=list(sets), own=own_neurons, calibrations=calibrations)
        return pd.DataFrame({"x": [1.0]})

    monkeypatch.setattr(calibration, "calibration_sensitivity", sensitivity)
    monkeypatch.setattr(calibration, "calibration_leaks", lambda tokenizer, sets: [])
    matched = pd.DataFrame({"domain": pd.Series({0: "bible", 3: None, 5: "code", 7: "bible"},
                                                dtype=object)})
    domain_sets = {d: texts[:1] for d in ("bible", "spanish", "legal", "code", "medical")}
    study = E.calibration_study(model, texts[:2], domain_sets, matched, [0, 3, 5, 7])
    assert seen["sets"] == ["general", "bible", "spanish", "legal", "code"]
    assert study.own_neurons == {"general": [], "bible": [0, 7], "spanish": [], "legal": [],
                                 "code": [5]}
    assert study.findings() == [
        "calibration texts found inside these sets: none",
        "own neurons: general []; bible [0, 7]; spanish []; legal []; code [5]",
    ]
    assert list(E.SENSITIVITY_TABLES) == ["median r", "median FVU", "own neurons' FVU"]


def test_quiet_on_calibration_lists_the_quiet_neurons(long_toy, monkeypatch):
    import pandas as pd
    from types import SimpleNamespace

    from context_neurons.evaluation import quiet as quiet_module

    model, circuit, texts = long_toy
    numbers = [column for column in E.QUIET_COLUMNS if column != "best set"]
    table = pd.DataFrame({column: [1.0, 2.0, 3.0] for column in numbers},
                         index=pd.Index([0, 3, 5], name="neuron"))
    table["best set"] = ["a", "b", "a"]
    table["output ratio"] = [0.05, 0.5, 0.08]
    table["quiet on calibration"] = [True, False, True]
    table["fires clearly on calibration"] = [False, False, True]
    monkeypatch.setattr(quiet_module, "silent_on_calibration", lambda *args: table)
    monkeypatch.setattr(quiet_module, "calibration_text", lambda name: name)
    monkeypatch.setattr(quiet_module, "describe", lambda text: "a calibration text")
    truth = SimpleNamespace(context_neurons={5: NeuronPlan({"astronomy": 1.0}, 5.0, "astronomy")},
                            distractor_neurons={})
    evaluations = {"a": E.evaluate(circuit, model, texts[:1], [0, 3, 5])}
    quiet = E.quiet_on_calibration(circuit, model, [0, 3, 5], evaluations, truth=truth)
    assert list(quiet.table.index) == [0, 5] and quiet.clear == [5]
    assert list(quiet.table.columns)[:2] == ["max pre-activation, calibration",
                                             "max output, calibration"]
    assert quiet.table["planted truth"].tolist() == ["not planted", "astronomy"]
    assert quiet.summary() == ("2 of 3 carried neurons are quiet on the calibration text (a "
                               "calibration text) and fire strongly in a domain:")
    assert quiet.findings() == [
        "their largest output on the calibration text is at most 8% of their largest on the "
        "best set; 1 of them still reach an output of 1 (clear firing) somewhere in the "
        "calibration text: [5]"]
    table["quiet on calibration"] = False
    none = E.quiet_on_calibration(circuit, model, [0, 3, 5], evaluations)
    assert none.findings() == [] and "planted truth" not in none.table.columns
    assert none.summary().startswith("0 of 3 carried neurons are quiet")


def test_two_window_sets_from_one_stream_share_no_document():
    """Issue 52: online, chapter 3's prose and its Bible stand-in both come from OpenWebText; a
    document in both is kept on the Bible side only, whatever the ``~domain`` part says."""
    windows = [torch.tensor([i]) for i in range(4)]
    labels = ["openwebtext:3", "openwebtext:7", "openwebtext:9+openwebtext:12", "nltk_masc:a"]
    bible = ["openwebtext~bible:7", "openwebtext~bible:12"]
    kept, kept_labels = E.without_documents(windows, labels, bible)
    assert kept_labels == ["openwebtext:3", "nltk_masc:a"]
    assert [int(w) for w in kept] == [0, 3]
    assert E.without_documents(windows, labels, [])[1] == labels
