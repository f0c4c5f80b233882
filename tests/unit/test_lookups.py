"""Context look-ups (chapter 7): token-predicting neurons, truncation, attribution, explainers."""

from __future__ import annotations

import socket

import pytest
import torch

from context_neurons import explainers as ex
from context_neurons import lookups as lk

ASTRONOMY = (1, 777)  # planted: layer 1, neuron 777 predicts ' telescope', driven by head 1.2


@pytest.fixture(scope="module")
def model(planted):
    return planted.model


@pytest.fixture(scope="module")
def pool(model):
    """A small prompt pool: four domains, 24 windows each (about 100 windows of 64 tokens)."""
    windows, labels = lk.lookup_windows(
        model.tokenizer, ("astronomy", "general", "bible", "legal"), per_domain=24
    )
    return lk.scan_pool(model, windows, labels, [ASTRONOMY])


@pytest.fixture(scope="module")
def top_prompt(model, pool):
    layer, neuron = ASTRONOMY
    attribution = pool.attributions[ASTRONOMY]
    return lk.top_activating_prompts(
        model, pool.windows, layer, neuron, k=3, labels=pool.labels, acts=attribution.pre
    )[0]


# ----------------------------------------------------------------------------------------------
# Token-predicting neurons
# ----------------------------------------------------------------------------------------------


def test_scores_find_the_planted_neurons_and_tokens(planted):
    scores = lk.token_prediction_scores(planted.model, layers=[1])
    chosen = lk.select_neurons(scores, n=4)
    truth = {(d["layer"], d["neuron"]): d["target"] for d in planted.truth.lookups}
    assert set(chosen) == set(truth)
    for layer, neuron in chosen:
        row = scores[(scores.layer == layer) & (scores.neuron == neuron)].iloc[0]
        assert row.token == truth[(layer, neuron)]
    ranked = scores.sort_values("score", ascending=False).score.to_numpy()
    assert ranked[3] > 2 * ranked[4], "the planted neurons should stand far above the rest"
    best = lk.best_neurons(scores, per_layer=4)
    assert set(zip(best.layer, best.neuron)) == set(truth)
    assert best.score.is_monotonic_decreasing


def test_logit_effect_reads_through_the_folded_final_layernorm(planted):
    model = planted.model
    effect = lk.neuron_logit_effect(model, 1, 1200, final_scale=2.0)
    w_out = model.W_out[1][1200]
    manual = (w_out - w_out.mean()) @ model.W_U / 2.0
    torch.testing.assert_close(effect, manual)
    assert int(effect.argmax()) == planted.truth.lookups[0]["target_id"]


# ----------------------------------------------------------------------------------------------
# Attribution and ablation
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("neuron", [777, 5])  # a planted look-up neuron and a random one
def test_attribution_sums_to_the_pre_activation(model, pool, neuron):
    windows = pool.windows[:12]
    attribution = lk.attribute_neuron(model, windows, 1, neuron)
    error = (attribution.total() - attribution.pre).abs().max()
    assert error < 1e-5 * max(1.0, float(attribution.pre.abs().max())), error
    # The parts are not trivially zero: heads and excluded parts both matter.
    assert attribution.heads.abs().sum((-2, -1)).max() > 0.1
    assert attribution.excluded().abs().max() > 0.1
    # ... and the pre-activation is the model's own hook value.
    acts = lk.neuron_activations(model, windows, 1, neuron)[..., 0]
    torch.testing.assert_close(attribution.pre, acts, rtol=1e-5, atol=1e-5)


def test_same_layer_head_attribution_equals_ablation_with_frozen_ln2(model, top_prompt):
    """Zero-ablating a layer-1 head with ln2's scale frozen changes hook_pre by its attribution."""
    layer, neuron = ASTRONOMY
    tokens = top_prompt.tokens[None].to(model.cfg.device)
    attribution = lk.attribute_neuron(model, tokens, layer, neuron)
    _, cache = model.run_with_cache(tokens, names_filter=f"blocks.{layer}.ln2.hook_scale")
    clean_scale = cache[f"blocks.{layer}.ln2.hook_scale"]
    for head in (2, 5):

        def ablate(z, hook, head=head):
            z[:, :, head] = 0.0
            return z

        hooks = [
            (f"blocks.{layer}.attn.hook_z", ablate),
            (f"blocks.{layer}.ln2.hook_scale", lambda s, hook: clean_scale),
        ]
        pre = lk._run_to_pre(model, tokens, layer, extra_hooks=hooks)[
            f"blocks.{layer}.mlp.hook_pre"
        ][0, :, neuron]
        drop = attribution.pre[0] - pre
        torch.testing.assert_close(drop, attribution.heads[0, :, layer, head], atol=1e-4, rtol=1e-4)


def test_mean_ablation_agrees_with_attribution_for_the_lookup_head(model, pool, top_prompt):
    layer, neuron = ASTRONOMY
    drops = lk.ablation_drops(
        model,
        [top_prompt],
        layer,
        neuron,
        heads=[(1, 2), (1, 5), (0, 3)],
        mode="mean",
        mean_z=pool.mean_z[layer],
    )[0]
    attribution = lk.attribute_neuron(model, top_prompt.tokens, layer, neuron)
    head_attr = attribution.heads[0, -1]
    assert float(head_attr[1, 2]) > 2.0  # the planted head drives the neuron
    assert abs(float(drops[0]) - float(head_attr[1, 2])) < 0.25 * float(head_attr[1, 2])
    assert abs(float(drops[1])) < 0.5 and abs(float(drops[2])) < 0.5
    zero = lk.ablation_drops(model, [top_prompt], layer, neuron, heads=[(1, 2)], mode="zero")
    assert float(zero[0, 0]) > 2.0


def test_rank_heads_finds_the_planted_head(model, top_prompt):
    attribution = lk.attribute_neuron(model, top_prompt.tokens, *ASTRONOMY)
    (layer, head, value), *_ = lk.rank_heads(attribution.heads[:, -1], k=3)
    assert (layer, head) == (1, 2) and value > 2.0


# ----------------------------------------------------------------------------------------------
# Truncation
# ----------------------------------------------------------------------------------------------


def test_truncation_keeps_80_percent_and_is_the_shortest(model, top_prompt):
    layer, neuron = ASTRONOMY
    truncated = lk.truncate_prompt(model, top_prompt, layer, neuron)
    assert len(truncated.tokens) < len(top_prompt.tokens)
    assert int(truncated.tokens[0]) == 50256
    torch.testing.assert_close(
        truncated.tokens[1:], top_prompt.tokens[-(len(truncated.tokens) - 1) :]
    )
    # Checked with the model, independently of the function's own bookkeeping.
    full = float(lk.neuron_activations(model, top_prompt.tokens, layer, neuron)[0, -1, 0])
    kept = float(lk.neuron_activations(model, truncated.tokens, layer, neuron)[0, -1, 0])
    assert kept >= 0.8 * full > 0
    assert truncated.activation == pytest.approx(kept, abs=1e-4)
    # Every shorter suffix loses more than 20%.
    suffix = lk.suffix_activations(model, top_prompt.tokens, layer, neuron)
    n_kept = len(truncated.tokens) - 1
    shorter = suffix.flip(0)[: n_kept - 1]  # suffixes of 1 .. n_kept - 1 tokens
    assert (shorter < 0.8 * full).all()


def test_truncation_rejects_non_positive_activations(model, pool):
    tokens = pool.windows[0][:10]
    acts = lk.neuron_activations(model, tokens, *ASTRONOMY)[0, :, 0]
    assert acts[-1] < 0  # general text does not switch the astronomy neuron on
    with pytest.raises(ValueError, match="<= 0"):
        lk.truncate_prompt(model, tokens, *ASTRONOMY)


# ----------------------------------------------------------------------------------------------
# Explainers
# ----------------------------------------------------------------------------------------------


def test_offline_explainer_beats_chance_on_planted_data(planted, pool):
    model = planted.model
    layer, neuron = ASTRONOMY
    activity = lk.explanation_dataset(
        model,
        pool.windows,
        layer,
        neuron,
        (1, 2),
        attribution=pool.attributions[ASTRONOMY],
        labels=pool.labels,
    )
    assert 0.02 < activity.base_rate < 0.5
    result = lk.evaluate_explainer(ex.OfflineExplainer(model.tokenizer), activity, model.tokenizer)
    assert result["accuracy"] > result["chance"]
    assert result["balanced_accuracy"] > 0.7
    planted_words = {ex.normalise_word(w) for w in planted.truth.topic_words["astronomy"]}
    words = result["explanation"].tokens
    assert words and words[0] in planted_words
    assert sum(w in planted_words for w in words) >= len(words) / 2


def test_offline_explainer_on_a_toy_problem(model):
    tok = model.tokenizer
    war, wars, peace, the, cat = (
        tok.encode(w, add_special_tokens=False)[0]
        for w in (" War", " wars", " peace", " the", " cat")
    )
    active = [
        ex.Example((the, war), "", "a"),
        ex.Example((wars, cat), "", "b"),
        ex.Example((the, cat, war), "", "c"),
    ]
    inactive = [
        ex.Example((the, peace), "", "d"),
        ex.Example((cat,), "", "e"),
        ex.Example((the, cat), "", "f"),
    ]
    explainer = ex.OfflineExplainer(tok, min_gain=0.0)
    explanation = explainer.explain(active, inactive)
    assert explanation.tokens == ["war"]  # ' War' and ' wars' are one word
    assert explainer.predict(explanation, active + inactive) == [True] * 3 + [False] * 3
    with pytest.raises(ex.ExplainerError, match="both"):
        explainer.explain(active, [])


def test_no_network_connection_without_a_key(monkeypatch, model):
    for name in (ex.API_KEY_ENV, ex.BASE_URL_ENV, ex.MODEL_ENV):
        monkeypatch.delenv(name, raising=False)

    def refuse(*args, **kwargs):
        raise AssertionError("a network connection was attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    # The patch is effective: urllib would fail through it.
    with pytest.raises(AssertionError, match="network"):
        ex.urllib_transport("http://127.0.0.1:9/v1/chat/completions", {}, {})

    assert ex.LLMExplainer.from_env() is None
    explainer = ex.get_explainer("auto", tokenizer=model.tokenizer)
    assert isinstance(explainer, ex.OfflineExplainer)
    with pytest.raises(ex.ExplainerError, match=ex.API_KEY_ENV):
        ex.get_explainer("llm")
    with pytest.raises(ex.ExplainerError, match="API key"):
        ex.LLMExplainer("")
    active = [ex.Example((1, 2), "a b", "x"), ex.Example((1, 3), "a c", "y")]
    inactive = [ex.Example((4, 5), "d e", "z"), ex.Example((4, 6), "d f", "w")]
    explanation = explainer.explain(active, inactive)
    assert explainer.predict(explanation, active + inactive) == [True, True, False, False]


def test_llm_explainer_through_a_fake_transport(monkeypatch):
    monkeypatch.setenv(ex.API_KEY_ENV, "test-key")
    monkeypatch.setenv(ex.BASE_URL_ENV, "http://llm.invalid/v1/")
    monkeypatch.setenv(ex.MODEL_ENV, "tiny")
    llm = ex.LLMExplainer.from_env()
    assert llm is not None and llm.base_url == "http://llm.invalid/v1" and llm.model == "tiny"
    calls = []

    def fake(url, payload, headers):
        calls.append((url, payload, headers))
        content = payload["messages"][0]["content"]
        if "ACTIVE:" in content:
            reply = 'Active in astronomy text, e.g. "stars" and "telescope".'
        else:
            reply = "[1, 0, 1]"
        return {"choices": [{"message": {"content": reply}}]}

    llm.transport = fake
    active = [ex.Example((1,), "the stars tonight", "a")]
    inactive = [ex.Example((2,), "the cat sat", "b")]
    explanation = llm.explain(active, inactive)
    assert explanation.tokens == ["stars", "telescope"]
    assert llm.predict(explanation, active + inactive + active) == [True, False, True]
    url, payload, headers = calls[0]
    assert url == "http://llm.invalid/v1/chat/completions"
    assert headers["Authorization"] == "Bearer test-key" and payload["model"] == "tiny"
    assert "the stars tonight" in payload["messages"][0]["content"]
    assert explanation.text in calls[1][1]["messages"][0]["content"]


def test_parse_labels():
    assert ex.parse_labels("Here you go: [1, 0, 0]", 3) == [True, False, False]
    assert ex.parse_labels("1\n0\n1", 3) == [True, False, True]
    with pytest.raises(ex.ExplainerError, match="Expected 2"):
        ex.parse_labels("[1, 0, 1]", 2)


def test_explainer_kind_is_checked():
    with pytest.raises(ex.ExplainerError, match="Unknown explainer"):
        ex.get_explainer("gpt")


# ----------------------------------------------------------------------------------------------
# Windows and index checks
# ----------------------------------------------------------------------------------------------


def test_lookup_windows_are_distinct_documents(pool):
    assert len(pool.windows) == 4 * 24
    assert len(set(pool.labels)) == len(pool.labels)
    documents = [label.split("|", 1)[1] for label in pool.labels]
    assert len(set(documents)) == len(documents)
    assert all(len(w) == 65 and int(w[0]) == 50256 for w in pool.windows)
    with pytest.raises(lk.DataError, match="Unknown domain"):
        lk.lookup_windows(None, ("klingon",))


def test_bad_indices_give_clear_errors(model, pool):
    tokens = pool.windows[0][:8]
    with pytest.raises(lk.LookupIndexError, match=r"0\.\.1"):
        lk.attribute_neuron(model, tokens, 2, 0)
    with pytest.raises(lk.LookupIndexError, match=r"0\.\.3071"):
        lk.attribute_neuron(model, tokens, 1, 3072)
    with pytest.raises(lk.LookupIndexError, match=r"0\.\.3071"):
        lk.neuron_logit_effect(model, 1, -1)
    with pytest.raises(lk.LookupIndexError, match="Layer 5"):
        lk.token_prediction_scores(model, layers=[5])
    with pytest.raises(lk.LookupIndexError, match="No layers"):
        lk.token_prediction_scores(model, layers=[])
    with pytest.raises(lk.LookupIndexError, match=r"heads are 0\.\.11"):
        lk.ablation_drops(model, [tokens], 1, 777, heads=[(1, 12)])
    with pytest.raises(lk.LookupIndexError, match="upstream"):
        lk.ablation_drops(model, [tokens], 0, 777, heads=[(1, 0)])
    with pytest.raises(lk.LookupIndexError, match="endoftext"):
        lk.truncate_prompt(model, tokens[1:], *ASTRONOMY)
    with pytest.raises(lk.LookupIndexError, match="Token ids"):
        lk.neuron_activations(model, torch.tensor([50256, 60000]), 1, 0)
    with pytest.raises(ValueError, match="mode"):
        lk.ablation_drops(model, [tokens], 1, 777, mode="resample")


@pytest.mark.slow
def test_reproduce_section_recovers_the_planted_lookups(planted):
    from context_neurons.reproduce import ReproContext

    ctx = ReproContext(planted, [], [], progress=False)
    (row,) = lk.reproduce_section(ctx)
    assert row.key == "lookups"
    found = {(r["layer"], r["neuron"]): r for r in row.value}
    for truth in planted.truth.lookups:
        result = found[(truth["layer"], truth["neuron"])]
        assert result["token"] == truth["target"]
        assert result["top_heads"][0] == lk.head_name(truth["layer"], truth["head"])
        assert result["explanation_accuracy"] >= result["chance"]
