"""Context look-ups (chapter 7): token-predicting neurons, truncation, attribution, explainers."""

from __future__ import annotations

import io
import socket
import urllib.error
import urllib.request
from dataclasses import replace

import pytest
import torch

from context_neurons.lookups import explainers as ex
from context_neurons import lookups as lk
from context_neurons.checks import (
    DataError,
    OutOfRangeError,
    TokenError,
    check_layer,
    check_layer_neuron,
    check_upstream_head,
)
from context_neurons.hooks import run_until
from context_neurons.models.planted_plan import PlantedLookup

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
    scores = lk.token_prediction_scores(planted.model)  # default: the later half, layer 1 here
    assert set(scores.layer) == {1}
    chosen = lk.select_neurons(scores, n=4)
    truth = {(d.layer, d.neuron): d.target for d in planted.truth.lookups}
    assert set(chosen) == set(truth)
    for layer, neuron in chosen:
        row = scores[(scores.layer == layer) & (scores.neuron == neuron)].iloc[0]
        assert row.token == truth[(layer, neuron)]
    ranked = scores.sort_values("score", ascending=False).score.to_numpy()
    assert ranked[3] > 2 * ranked[4], "the planted neurons should stand far above the rest"
    best = lk.best_neurons(scores, per_layer=4)
    assert set(zip(best.layer, best.neuron)) == set(truth)
    assert best.score.is_monotonic_decreasing


def test_later_layers_default_to_the_later_half():
    from context_neurons.models.toy import make_small_model

    one, _ = make_small_model(n_layers=1)
    four, _ = make_small_model(n_layers=4)
    assert lk.later_layers(one) == [0]
    assert lk.later_layers(four) == [2, 3]
    assert lk.later_layers(four, n_last_layers=1) == [3]
    with pytest.raises(OutOfRangeError, match=r"1\.\.4"):
        lk.later_layers(four, n_last_layers=5)
    with pytest.raises(OutOfRangeError, match="integer"):
        getattr(lk.later_layers, "__wrapped__", lk.later_layers)(four, n_last_layers=2.0)
    with pytest.raises(OutOfRangeError, match="either"):
        lk.token_prediction_scores(four, layers=[3], n_last_layers=1, final_scale=1.0)


def test_logit_effect_reads_through_the_folded_final_layernorm(planted):
    model = planted.model
    effect = lk.neuron_logit_effect(model, 1, 1200, final_scale=2.0)
    w_out = model.W_out[1][1200]
    manual = (w_out - w_out.mean()) @ model.W_U / 2.0
    torch.testing.assert_close(effect, manual)
    assert int(effect.argmax()) == planted.truth.lookups[0].target_id


@pytest.fixture(scope="module")
def unfolded():
    """The same small 2-layer model with ln_final unfolded (weight and bias kept) and folded."""
    from context_neurons.models.toy import make_small_model

    return (
        make_small_model(fold_ln=False, n_layers=2)[0],
        make_small_model(fold_ln=True, n_layers=2)[0],
    )


def test_logit_effect_with_an_unfolded_final_layernorm(unfolded):
    """Unfolded, ln_final's weight multiplies first; the folded model gives the same effect up to
    a constant over the vocabulary (the centred unembedding), so the same scores and tokens."""
    model, folded = unfolded
    assert getattr(model.ln_final, "w", None) is not None  # really unfolded
    assert not torch.allclose(model.ln_final.w, torch.ones_like(model.ln_final.w))
    for neuron in (0, 7, 100):
        effect = lk.neuron_logit_effect(model, 1, neuron, final_scale=1.5)
        w_out = model.W_out[1][neuron]
        manual = ((w_out - w_out.mean()) * model.ln_final.w) @ model.W_U / 1.5
        torch.testing.assert_close(effect, manual)
        other = lk.neuron_logit_effect(folded, 1, neuron, final_scale=1.5)
        torch.testing.assert_close(
            effect - effect.mean(), other - other.mean(), atol=1e-4, rtol=1e-4
        )
        assert int(effect.argmax()) == int(other.argmax())


def test_frozen_scale_linearisation_against_a_patched_activation(unfolded):
    """Add ``delta`` to a last-layer neuron's activation through a hook: with ln_final's scale
    frozen the logits change by exactly ``delta * effect``; with the real scale, by that plus the
    linearisation error ``(logits' - beta @ W_U - b_U) * (1 - s'/s)``, which is small."""
    model, _ = unfolded
    layer, neuron, delta = 1, 7, 0.5
    tokens = torch.randint(
        0, model.cfg.d_vocab, (2, 12), generator=torch.Generator().manual_seed(0)
    )
    clean, cache = model.run_with_cache(tokens, names_filter="ln_final.hook_scale")
    scale = cache["ln_final.hook_scale"]  # [batch, pos, 1]

    def bump(post, hook):
        post[..., neuron] += delta
        return post

    patch = [(f"blocks.{layer}.mlp.hook_post", bump)]
    frozen = model.run_with_hooks(
        tokens, fwd_hooks=patch + [("ln_final.hook_scale", lambda s, hook: scale)]
    )
    new_scale = {}
    patched = model.run_with_hooks(
        tokens,
        fwd_hooks=patch + [("ln_final.hook_scale", lambda s, hook: new_scale.setdefault("s", s))],
    )
    unit = lk.neuron_logit_effect(model, layer, neuron, final_scale=1.0)
    predicted = delta * unit / scale  # [batch, pos, d_vocab]
    torch.testing.assert_close(frozen - clean, predicted, atol=1e-4, rtol=1e-4)
    # With the real scale: exact error term, and the prediction is close.
    offset = model.ln_final.b @ model.W_U + model.b_U
    error = (patched - offset) * (1 - new_scale["s"] / scale)
    torch.testing.assert_close(patched - clean, predicted + error, atol=1e-4, rtol=1e-4)
    relative = (patched - clean - predicted).norm(dim=-1) / predicted.norm(dim=-1)
    assert float(relative.max()) < 0.2 and float((new_scale["s"] / scale - 1).abs().max()) > 0


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
        stop = f"blocks.{layer}.mlp.hook_pre"
        pre = run_until(model, tokens, stop, extra_hooks=hooks)[stop][0, :, neuron]
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


@pytest.fixture(scope="module")
def astronomy_activity(model, pool):
    layer, neuron = ASTRONOMY
    return lk.explanation_dataset(
        model,
        pool.windows,
        layer,
        neuron,
        (1, 2),
        attribution=pool.attributions[ASTRONOMY],
        labels=pool.labels,
    )


def test_offline_explainer_beats_chance_on_planted_data(planted, astronomy_activity):
    model, activity = planted.model, astronomy_activity
    assert 0.02 < activity.base_rate < 0.5
    result = lk.evaluate_explainer(ex.OfflineExplainer(model.tokenizer), activity, model.tokenizer)
    assert result.accuracy > result.chance and result.beats_chance
    assert result.balanced_accuracy > 0.7
    assert result.n_test == len(activity.split(train=False)[1]) and result.error == ""
    # Labels are the half of the word list the planting never used (topic_words): the head
    # attends to graded, corpus-derived topic loadings, so the explanation generalises to them
    # only in part.
    assert result.explanation.tokens
    share = lk.topic_share(
        activity, result.explanation, planted.truth.topic_words["astronomy"], model.tokenizer
    )
    assert share > 0.3


def test_held_out_split_is_by_document_hash(model, pool, astronomy_activity):
    activity = astronomy_activity
    assert lk.document_of("bible|bible_kjv:Genesis 1") == "bible_kjv:Genesis 1"
    assert lk.document_of("war|openwebtext~war:12#3") == "openwebtext:12"
    assert lk.document_of("general|nltk_brown_us:ca01+") == "nltk_brown_us:ca01"
    # Deterministic and a property of the document alone.
    # Pinned: SHA-256 is fixed, so a document's split never changes between runs or machines.
    assert (lk.is_held_out("bible_kjv:Genesis 1"), lk.is_held_out("corpus:0")) == (False, True)
    held = [lk.is_held_out(f"corpus:{i}") for i in range(2000)]
    assert 0.45 < sum(held) / len(held) < 0.55
    # Prompts of one document are all on one side, and the pool's documents land on both sides.
    side: dict[str, set[bool]] = {}
    for prompt, train in zip(activity.prompts, activity.train.tolist()):
        side.setdefault(lk.document_of(prompt.source), set()).add(train)
        assert train == (not lk.is_held_out(lk.document_of(prompt.source)))
    assert all(len(s) == 1 for s in side.values())
    # Every domain, and each corpus of a two-corpus domain, has documents on both sides.
    sources = [(prompt.source, train) for prompt, train in zip(activity.prompts, activity.train)]
    for part in ("astronomy|", "general|", "bible|", "legal|", "|bible_kjv:", "|bible_web:"):
        assert {bool(train) for source, train in sources if part in source} == {True, False}, part
    with pytest.raises(ValueError, match="fraction"):
        lk.is_held_out("x", 1.0)


def test_active_threshold_ignores_held_out_windows(model, pool, astronomy_activity):
    """Scaling the held-out windows' attributions leaves the threshold alone; scaling the
    training windows' scales it."""
    attribution = pool.attributions[ASTRONOMY]
    held = torch.tensor(
        [lk.is_held_out(lk.document_of(label)) for label in pool.labels],
        device=attribution.pre.device,
    )

    def threshold(scaled_side: bool) -> float:
        scale = torch.where(held == scaled_side, 10.0, 1.0)[:, None]
        changed = lk.NeuronAttribution(
            attribution.layer,
            attribution.neuron,
            attribution.pre * scale,
            attribution.heads * scale[..., None, None],
            attribution.embed,
            attribution.pos_embed,
            attribution.mlp,
            attribution.bias,
        )
        return lk.explanation_dataset(
            model, pool.windows, *ASTRONOMY, (1, 2), attribution=changed, labels=pool.labels
        ).threshold

    assert threshold(scaled_side=True) == pytest.approx(astronomy_activity.threshold, rel=1e-6)
    assert threshold(scaled_side=False) == pytest.approx(10 * astronomy_activity.threshold)


def test_explanation_dataset_prompts_match_a_reference_loop(model, pool):
    """The vectorised prompts equal the obvious loop, also for windows of different lengths."""
    windows = [pool.windows[0], pool.windows[1][:30], pool.windows[2][:9]]
    labels = pool.labels[:3]
    attribution = lk.attribute_neuron(model, windows, *ASTRONOMY)
    activity = lk.explanation_dataset(
        model, windows, *ASTRONOMY, (1, 2), attribution=attribution, labels=labels, threshold=0.5
    )
    expected = [(w, p) for w, window in enumerate(windows) for p in range(8, len(window), 8)]
    assert [(pr.window, pr.end) for pr in activity.prompts] == expected
    for prompt, value in zip(activity.prompts, activity.attribution.tolist()):
        assert torch.equal(prompt.tokens, windows[prompt.window][: prompt.end + 1].cpu())
        assert value == pytest.approx(float(attribution.heads[prompt.window, prompt.end, 1, 2]))
        assert prompt.activation == pytest.approx(float(attribution.pre[prompt.window, prompt.end]))
        assert prompt.source == labels[prompt.window]
    assert activity.active.tolist() == [v >= 0.5 for v in activity.attribution.tolist()]
    with pytest.raises(ValueError, match="labels"):
        lk.explanation_dataset(model, windows, *ASTRONOMY, (1, 2), labels=labels[:2])


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


def _refuse_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a network connection was attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


def test_no_network_connection_without_a_key(monkeypatch, model, pool):
    for name in (ex.API_KEY_ENV, ex.BASE_URL_ENV, ex.MODEL_ENV):
        monkeypatch.delenv(name, raising=False)
    _refuse_network(monkeypatch)
    # The patch is effective: urllib fails through it, by name lookup or by address.
    with pytest.raises(AssertionError, match="network"):
        ex.urllib_transport("http://llm.invalid/v1/chat/completions", {}, {})
    with pytest.raises(AssertionError, match="network"):
        ex.urllib_transport("http://127.0.0.1:9/v1/chat/completions", {}, {})

    assert ex.LLMExplainer.from_env() is None
    explainer = ex.get_explainer("auto", tokenizer=model.tokenizer)
    assert isinstance(explainer, ex.OfflineExplainer)
    with pytest.raises(ex.ExplainerError, match=ex.API_KEY_ENV):
        ex.get_explainer("llm")
    with pytest.raises(ex.ExplainerError, match="API key"):
        ex.LLMExplainer("")
    # The chapter's path, under the patch: windows, scan, examine (explain and evaluate).
    windows, labels = lk.lookup_windows(model.tokenizer, ("astronomy", "general"), per_domain=8)
    assert len(windows) == 16
    small = lk.scan_pool(model, windows, labels, [ASTRONOMY])
    lookup = lk.examine_neuron(model, *ASTRONOMY, small, explainer=explainer, n_prompts=3)
    assert lookup.explanation is not None and lookup.evaluation.n_test > 0
    result = lk.evaluate_explainer(explainer, lookup.activity, model.tokenizer)
    assert result.accuracy == lookup.evaluation.accuracy


def _llm(monkeypatch, **kwargs) -> ex.LLMExplainer:
    monkeypatch.setenv(ex.API_KEY_ENV, "test-key")
    monkeypatch.setenv(ex.BASE_URL_ENV, "http://llm.invalid/v1/")
    monkeypatch.setenv(ex.MODEL_ENV, "tiny")
    llm = ex.LLMExplainer.from_env()
    for key, value in kwargs.items():
        setattr(llm, key, value)
    return llm


def test_llm_explainer_through_a_fake_transport(monkeypatch):
    llm = _llm(monkeypatch)
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
    assert llm.n_requests(41) == 1 + 3 and len(calls) == 2


class _Reply(io.BytesIO):
    """What ``urlopen`` returns: readable, and a context manager (BytesIO is both)."""


@pytest.mark.parametrize(
    "failure, message",
    [
        (urllib.error.HTTPError("u", 401, "Unauthorized", {}, None), "HTTP 401.*API_KEY"),
        (urllib.error.URLError(ConnectionRefusedError(111, "refused")), "reach.*BASE_URL"),
        (TimeoutError("timed out"), "reach.*BASE_URL"),
        (_Reply(b"<html>not json</html>"), "not JSON.*BASE_URL"),
        (_Reply(b'{"error": {"message": "no such model"}}'), "Unexpected reply.*MODEL"),
    ],
)
def test_llm_service_errors_name_the_environment_variables(monkeypatch, failure, message):
    """urllib's errors (through the real transport, with a fake ``urlopen``) become
    ExplainerErrors that say which variables to check; nothing touches the network."""
    _refuse_network(monkeypatch)
    seen = {}

    def fake_urlopen(request, timeout):
        seen["url"], seen["timeout"] = request.full_url, timeout
        if isinstance(failure, BaseException):
            raise failure
        return failure

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    llm = _llm(monkeypatch, timeout=7.0)
    active = [ex.Example((1,), "the stars tonight", "a")]
    inactive = [ex.Example((2,), "the cat sat", "b")]
    with pytest.raises(ex.ExplainerError, match=message):
        llm.explain(active, inactive)
    assert seen == {"url": "http://llm.invalid/v1/chat/completions", "timeout": 7.0}


def test_service_errors_are_not_swallowed_by_examine_neuron(monkeypatch, model, pool):
    """A misconfigured LLM stops the run; only "nothing to explain" becomes an error entry."""

    def unreachable(url, payload, headers):
        raise urllib.error.URLError("Name or service not known")

    llm = _llm(monkeypatch, transport=unreachable)
    with pytest.raises(ex.ExplainerError, match=ex.BASE_URL_ENV):
        lk.examine_neuron(model, *ASTRONOMY, pool, explainer=llm, n_prompts=2)


def test_llm_contrast_set_is_spread_over_domains_and_texts(monkeypatch):
    pool = [
        ex.Example((0,), f"{domain} text {text} prompt {k}", f"{domain}|c:{text}")
        for domain in ("bible", "war", "legal")
        for text in range(4)
        for k in range(5)
    ]
    sample = ex.spread_sample(pool, 6)
    assert [e.group.split("|")[0] for e in sample] == ["bible", "war", "legal"] * 2
    assert len({e.group for e in sample}) == 6  # six different texts
    assert ex.spread_sample(pool, 6) == sample  # deterministic
    assert ex.spread_sample(pool[:3], 6) == pool[:3]
    sent = []

    def fake(url, payload, headers):
        sent.append(payload["messages"][0]["content"])
        return {"choices": [{"message": {"content": 'Active on "x".'}}]}

    llm = _llm(monkeypatch, transport=fake, max_examples=9)
    llm.explain(pool, pool[::-1])
    active_part = sent[0].split("ACTIVE:")[1].split("INACTIVE:")[0]
    lines = [line for line in active_part.splitlines() if line.startswith("- ")]
    assert [line.split()[1] for line in lines] == ["bible", "war", "legal"] * 3
    assert len(set(lines)) == 9
    llm.max_words_per_example = 2  # clipping keeps the last words, and says so
    assert llm._clip(pool[0]) == "... prompt 0"


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
    with pytest.raises(DataError, match="Unknown domain"):
        lk.lookup_windows(None, ("klingon",))


def test_lookup_windows_read_domain_documents(monkeypatch, model):
    """Windows come from ``data.domain_documents(domain, interleave=True)``; an OpenWebText
    stand-in document (``openwebtext~domain``) serves one domain only."""
    from context_neurons.caching import IdentityCache
    from context_neurons.text.corpora import Document

    text = "The telescope and the stars of the night sky. " * 20
    calls = []

    def fake_documents(domain, interleave=False):
        calls.append((domain, interleave))
        yield Document(f"openwebtext~{domain}", "7", text)  # the same document for both
        yield Document(f"openwebtext~{domain}", f"{domain}-only", text)

    from context_neurons.text import windows as text_windows

    monkeypatch.setattr(text_windows, "domain_documents", fake_documents)
    monkeypatch.setattr(text_windows, "_LOOKUP_WINDOWS", IdentityCache(size=1))  # no fakes cached
    windows, labels = lk.lookup_windows(model.tokenizer, ("astronomy", "war"), per_domain=5)
    assert calls == [("astronomy", True), ("war", True)]
    assert labels == [
        "astronomy|openwebtext~astronomy:7",
        "astronomy|openwebtext~astronomy:astronomy-only",
        "war|openwebtext~war:war-only",
    ]
    assert all(len(w) == 65 and int(w[0]) == 50256 for w in windows)


def test_bad_indices_give_clear_errors(model, pool):
    tokens = pool.windows[0][:8]
    with pytest.raises(OutOfRangeError, match=r"0\.\.1"):
        lk.attribute_neuron(model, tokens, 2, 0)
    with pytest.raises(OutOfRangeError, match=r"0\.\.3071"):
        lk.attribute_neuron(model, tokens, 1, 3072)
    with pytest.raises(OutOfRangeError, match=r"0\.\.3071"):
        lk.neuron_logit_effect(model, 1, -1)
    with pytest.raises(OutOfRangeError, match="Layer 5"):
        lk.token_prediction_scores(model, layers=[5])
    with pytest.raises(OutOfRangeError, match="No layers"):
        lk.token_prediction_scores(model, layers=[])
    with pytest.raises(OutOfRangeError, match=r"heads 0\.\.11"):
        lk.ablation_drops(model, [tokens], 1, 777, heads=[(1, 12)])
    with pytest.raises(OutOfRangeError, match="upstream"):
        lk.ablation_drops(model, [tokens], 0, 777, heads=[(1, 0)])
    with pytest.raises(TokenError, match="BOS"):
        lk.truncate_prompt(model, tokens[1:], *ASTRONOMY)
    with pytest.raises(TokenError, match="Token ids"):
        lk.neuron_activations(model, torch.tensor([50256, 60000]), 1, 0)
    with pytest.raises(ValueError, match="mode"):
        lk.ablation_drops(model, [tokens], 1, 777, mode="resample")
    # Floats are refused, not truncated (3.7 is not neuron 3); integer-like types are accepted.
    # (Under pytest, beartype rejects a float before the function runs: call the unwrapped one.)
    unwrapped = getattr(check_layer_neuron, "__wrapped__", check_layer_neuron)
    with pytest.raises(OutOfRangeError, match="Neuron must be an integer, got 3.7"):
        unwrapped(model, 1, 3.7)
    with pytest.raises(OutOfRangeError, match="Layer must be an integer"):
        getattr(check_layer, "__wrapped__", check_layer)(model, 1.0)
    with pytest.raises(OutOfRangeError, match="Head must be an integer"):
        getattr(check_upstream_head, "__wrapped__", check_upstream_head)(model, 1, 2.0, 1)
    with pytest.raises((OutOfRangeError, TypeError)):
        lk.neuron_logit_effect(model, 1, 3.7)
    assert check_layer_neuron(model, torch.tensor(1), torch.tensor(3)) == (1, 3)


# ----------------------------------------------------------------------------------------------
# The planted look-ups, end to end (the chapter's pool)
# ----------------------------------------------------------------------------------------------


# The four planted look-ups recovered end to end (examine_best_neurons, minutes on the CPU) are
# checked on the planted main job's run: test_reproduce.check_planted_lookups.


def test_a_lookup_that_does_not_fire_is_a_row_with_its_reason():
    from context_neurons.reproduce.pipeline import lookup_row

    (row,) = lookup_row({(1, 5): lk.NotFiring("the neuron does not fire on any window")}, None)
    assert row.value == [{"layer": 1, "neuron": 5,
                          "error": "the neuron does not fire on any window"}]
    assert row.truth is None


# ----------------------------------------------------------------------------------------------
# Batched computations equal the one-at-a-time ones (issue 15: look-ups at depth)
# ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def deep_toy():
    """A 4-layer toy model with unfolded LayerNorms (ln2's weight and bias both matter)."""
    from context_neurons.models.toy import make_small_model

    model = make_small_model(seed=3, n_layers=4, n_ctx=40)[0]
    gen = torch.Generator().manual_seed(0)
    lengths = (7, 12, 3, 25, 18, 9)
    sequences = [torch.randint(0, model.cfg.d_vocab, (n,), generator=gen) for n in lengths]
    return model, sequences


def test_attribute_layers_one_pass_matches_run_with_cache(deep_toy):
    """Neurons of two layers from one pass: every head term, the MLP terms and the mean hook_z
    equal a reference computed from run_with_cache, and the parts sum to hook_pre."""
    model, sequences = deep_toy
    neurons = {3: [5, 0], 1: [7]}
    mean_z: dict = {}
    found = lk.attribute_layers(model, sequences, neurons, batch_size=4, mean_z=mean_z)
    assert set(found) == {(3, 5), (3, 0), (1, 7)}
    batch, lengths = lk.as_batch(model, sequences)
    _, cache = model.run_with_cache(batch)
    real = torch.arange(batch.shape[1])[None] < lengths[:, None]
    for (layer, neuron), attribution in found.items():
        v = model.blocks[layer].ln2.w * model.W_in[layer][:, neuron]
        v = v - v.mean()
        scale = cache[f"blocks.{layer}.ln2.hook_scale"][..., 0]
        heads = (
            torch.stack(
                [
                    torch.einsum("bphe,hed->bphd", cache[f"blocks.{l}.attn.hook_z"], model.W_O[l])
                    @ v
                    for l in range(layer + 1)
                ],
                dim=2,
            )
            / scale[..., None, None]
        )
        mlp = [cache[f"blocks.{l}.hook_mlp_out"] @ v / scale for l in range(layer)]
        pre = cache[f"blocks.{layer}.mlp.hook_pre"][..., neuron]
        assert attribution.heads.shape == (len(sequences), batch.shape[1], layer + 1, 4)
        torch.testing.assert_close(attribution.heads[real], heads[real], atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(
            attribution.mlp[real], torch.stack(mlp, -1)[real], atol=1e-5, rtol=1e-4
        )
        torch.testing.assert_close(attribution.pre[real], pre[real], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(attribution.total()[real], pre[real], atol=1e-4, rtol=1e-4)
        z = torch.stack([cache[f"blocks.{l}.attn.hook_z"] for l in range(layer + 1)])
        torch.testing.assert_close(mean_z[layer], z[:, real].mean(1), atol=1e-6, rtol=1e-5)


def test_scan_pool_reads_every_layer_in_one_pass_per_batch(monkeypatch, deep_toy):
    """Neurons of three layers cost one forward pass per batch of windows, not one per layer."""
    from context_neurons.lookups import attribution as attribution_module

    model, sequences = deep_toy
    calls = []
    real_run = attribution_module.run_until

    def counting(model_, tokens, stop, *args, **kwargs):
        calls.append(stop)
        return real_run(model_, tokens, stop, *args, **kwargs)

    monkeypatch.setattr(attribution_module, "run_until", counting)
    labels = [f"toy|doc:{i}" for i in range(len(sequences))]
    pool = lk.scan_pool(model, sequences, labels, [(1, 2), (3, 4), (2, 9)], batch_size=4)
    assert calls == ["blocks.3.mlp.hook_pre"] * 2  # 6 windows, batches of 4
    assert set(pool.attributions) == {(1, 2), (3, 4), (2, 9)} and set(pool.mean_z) == {1, 2, 3}
    one = lk.attribute_neuron(model, sequences, 2, 9)
    torch.testing.assert_close(pool.attributions[(2, 9)].heads, one.heads, atol=1e-5, rtol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_batched_ablation_equals_one_head_at_a_time(deep_toy, mode):
    """ablation_drops (prompts tiled per head, several heads per pass) equals ablating one head per
    forward pass of the full model, for every upstream head."""
    model, sequences = deep_toy
    layer, neuron = 3, 11
    heads = [(l, h) for l in range(layer + 1) for h in range(model.cfg.n_heads)]
    mean_z = torch.randn(layer + 1, model.cfg.n_heads, model.cfg.d_head) if mode == "mean" else None
    drops = lk.ablation_drops(
        model, sequences, layer, neuron, heads=heads, mode=mode, mean_z=mean_z, batch_size=20
    )
    assert drops.shape == (len(sequences), len(heads))
    batch, lengths = lk.as_batch(model, sequences)
    rows, hook_pre = torch.arange(len(sequences)), f"blocks.{layer}.mlp.hook_pre"

    def final_pre(hooks):  # the old way: the full model, one forward pass per ablated head
        with model.hooks(fwd_hooks=hooks):
            _, cache = model.run_with_cache(batch, names_filter=hook_pre)
        return cache[hook_pre][rows, lengths - 1, neuron]

    clean = final_pre([])
    for k, (l, h) in enumerate(heads):

        def ablate(z, hook, h=h, l=l):
            z[:, :, h] = 0.0 if mean_z is None else mean_z[l, h]
            return z

        expected = clean - final_pre([(f"blocks.{l}.attn.hook_z", ablate)])
        torch.testing.assert_close(drops[:, k], expected, atol=1e-5, rtol=1e-4)
    assert drops.abs().max() > 1e-2  # the heads matter (a thousand times the tolerance)


def test_batched_truncation_equals_one_suffix_at_a_time(deep_toy):
    """truncate_prompts (all prompts' suffixes in shared batches, doubling groups) keeps exactly
    the suffix a one-suffix-per-pass loop keeps, and returns non-firing prompts apart."""
    model, sequences = deep_toy
    layer = 3
    finals = torch.stack(
        [
            lk.neuron_activations(model, t, layer, list(range(model.cfg.d_mlp)))[0, -1]
            for t in sequences
        ]
    )
    neuron = int(((finals > 0).any(0) & (finals <= 0).any(0)).nonzero()[0])  # fires on some

    def final(tokens):
        return float(lk.neuron_activations(model, tokens, layer, neuron)[0, -1, 0])

    expected, silent = [], []
    for tokens in sequences:
        full = final(tokens)
        if full <= 0:
            silent.append(tokens)
            continue
        n = len(tokens) - 1
        s = next(
            s for s in range(n, 0, -1) if final(torch.cat([tokens[:1], tokens[s:]])) >= 0.8 * full
        )
        expected.append((torch.cat([tokens[:1], tokens[s:]]), full))
    assert expected and silent, "the toy prompts should include both cases"
    truncated, not_firing = lk.truncate_prompts(model, sequences, layer, neuron, chunk=2)
    assert len(truncated) == len(expected) and len(not_firing) == len(silent)
    for got, (tokens, full) in zip(truncated, expected):
        assert torch.equal(got.tokens, tokens)
        assert got.full_activation == pytest.approx(full, abs=1e-5)
        assert got.activation == pytest.approx(final(tokens), abs=1e-5)
    for got, tokens in zip(not_firing, silent):
        assert torch.equal(got.tokens, tokens) and got.full_activation <= 0
    with pytest.raises(lk.NotFiring, match="<= 0"):
        lk.truncate_prompt(model, silent[0], layer, neuron)


def test_final_activations_packs_any_lengths(deep_toy):
    model, sequences = deep_toy
    got = lk.final_activations(model, sequences, 2, 3, tokens_per_pass=30)
    for value, tokens in zip(got.tolist(), sequences):
        alone = float(lk.neuron_activations(model, tokens, 2, 3)[0, -1, 0])
        assert value == pytest.approx(alone, abs=1e-5)


def test_examine_neuron_skips_prompts_where_the_neuron_is_silent(planted):
    """A pool with few windows of the neuron's topic: the prompts where it does not fire are
    skipped and counted, not raised; a neuron that never fires raises NotFiring."""
    model = planted.model
    plan = next(d for d in planted.truth.lookups if d.topic == "religion")
    windows, labels = lk.lookup_windows(model.tokenizer, ("bible", "legal"), per_domain=3)
    more, more_labels = lk.lookup_windows(model.tokenizer, ("legal",), per_domain=20)
    pool = lk.scan_pool(model, windows + more, labels + more_labels, [(1, plan.neuron)])
    firing = lk.firing_windows(pool, 1, plan.neuron)
    assert 0 < firing < 10
    lookup = lk.examine_neuron(model, 1, plan.neuron, pool, n_prompts=10)
    assert len(lookup.prompts) + lookup.skipped == 10 and lookup.skipped >= 10 - firing
    assert all(p.activation > 0 for p in lookup.prompts)
    assert (plan.layer, plan.head) in lookup.ablated  # the top head is always ablated
    silent_pool = lk.scan_pool(model, more, more_labels, [(1, plan.neuron)])
    if lk.firing_windows(silent_pool, 1, plan.neuron) == 0:
        with pytest.raises(lk.NotFiring, match="never"):
            lk.examine_neuron(model, 1, plan.neuron, silent_pool)


# ---- chapter 7's findings, computed in the package (issue 33) ----------------------------------

#: A tokenizer of ten words, enough for the explainer's statistics.
_WORDS = ["<bos>", " star", " stars", " sky", " the", " war", " God", " bread", " river", " que"]


class _Tokenizer:
    def decode(self, ids):
        return "".join(_WORDS[int(i)] for i in ids)


def _activity(head=(1, 2), star_active=True, all_active=False):
    """Prompts from eight documents: those with ' star' or ' sky' active (all, when asked), the
    first half of the documents for training."""
    from context_neurons.lookups.prompts import Prompt

    gen = torch.Generator().manual_seed(0)
    prompts, active = [], []
    for k in range(40):
        tokens = torch.randint(4, 9, (6,), generator=gen)
        tokens[0] = 0
        if k % 3 == 0:
            tokens[2] = 1 if k % 2 else 3
        prompts.append(Prompt(tokens=tokens, activation=1.0, source=f"astronomy|c:doc{k % 8}"))
        active.append(all_active or (star_active and k % 3 == 0))
    train = torch.tensor([int(p.source[-1]) < 4 for p in prompts])
    active = torch.tensor(active)
    return lk.HeadActivity(1, 777, head, 0.5, prompts, active.float(), active, train)


def _lookup(neuron, token, head, accuracy=0.9, words=("star", "sky"), activity=None):
    """An examined neuron by hand: two prompts, its top head first."""
    from context_neurons.lookups.explainers import Explanation
    from context_neurons.lookups.prompts import Prompt

    prompts = [Prompt(tokens=torch.arange(n), activation=1.0) for n in (4, 7)]
    ablation = torch.full((2, 2, 12), float("nan"))
    ablation[:, 1, head] = torch.tensor([2.0, 3.0])
    explanation = Explanation(", ".join(words), tokens=list(words)) if words else None
    evaluation = (
        lk.ExplainerScore(explanation, accuracy, balanced_accuracy=0.6, chance=0.8,
                          base_rate=0.2, n_test=2)
        if words
        else lk.ExplainerScore.unexplained("nothing to explain", base_rate=0.2)
    )
    return lk.NeuronLookup(1, neuron, token, 9.0, prompts, torch.zeros(2, 2, 12), torch.zeros(2),
                           torch.ones(2), ablation, [(1, head, 9.5), (0, 4, 0.25), (1, 7, -0.125)],
                           activity or _activity((1, head)), evaluation)


def test_top_heads_and_explanation_tables():
    lookups = [_lookup(777, " telescope", 2), _lookup(1200, " Lord", 4, words=())]
    heads = lk.top_heads_table(lookups)
    assert heads["neuron"].tolist() == ["1.777 ' telescope'", "1.1200 ' Lord'"]
    assert heads["prompt length"].tolist() == [4.5, 4.5]  # BOS not counted
    assert heads[["head 1", "head 2", "head 3"]].values.tolist()[0] == ["L1H2", "L0H4", "L1H7"]
    assert heads["attribution 1"].tolist() == [9.5, 9.5] and heads["attribution 2"].tolist() == [
        0.25, 0.25]
    assert heads["ablation drop 1"].tolist() == [2.5, 2.5]
    results = lk.explanation_results(lookups)
    assert results["name"].tolist() == ["L1H2\n' telescope'", "L1H4\n' Lord'"]
    assert results["explanation"].tolist() == ["star, sky", "nothing to explain"]
    assert list(results.columns[1:]) == ["neuron", "head", "active", "accuracy", "chance",
                                         "balanced_accuracy", "explanation"]
    assert results["active"].tolist() == pytest.approx([lookups[0].activity.base_rate] * 2)


def test_prompt_and_truncation_tables():
    full = lk.Prompt(torch.tensor([0, 4, 5, 1, 3]), 2.5, source="astronomy|c:doc1", end=4)
    cut = replace(full, tokens=torch.tensor([0, 1, 3]), activation=2.25, full_activation=2.5)
    prompts = lk.prompts_table([full], _Tokenizer())
    assert prompts.to_dict("records") == [{"activation": 2.5, "source": "astronomy|c:doc1",
                                           "end of the prompt": "...' the war star sky'"}]
    cuts = lk.truncation_table([cut], _Tokenizer())
    assert cuts.to_dict("records") == [{
        "prompt tokens": 4, "kept tokens": 2, "activation": 2.5, "kept activation": 2.25,
        "kept text (last 60 characters)": "' star sky'"}]


def test_the_split_by_document_in_words():
    activity = _activity()  # 40 prompts from the documents c:doc0 .. c:doc7, doc0-3 training
    held = sum(lk.is_held_out(f"c:doc{i}") for i in range(8))
    assert activity.split_findings() == [
        f"40 prompts from 8 documents: 20 training prompts, 20 held out ({held} documents held "
        "out)",
        "domain|corpus pairs with documents on both sides: 1 of 1"]
    one_side = replace(activity, train=torch.ones(40, dtype=torch.bool))
    assert one_side.split_findings()[1].endswith("with documents on both sides: 0 of 1")


def test_word_odds_are_the_offline_explainers():
    activity = _activity()
    odds = lk.word_odds(activity, _Tokenizer(), k=3)
    prompts, active = activity.split(train=True)
    examples = ex.examples_from_prompts(prompts, _Tokenizer())
    direct = ex.OfflineExplainer(_Tokenizer()).word_log_odds(
        [e for e, a in zip(examples, active) if a], [e for e, a in zip(examples, active) if not a])
    assert odds.table.values.tolist() == [list(row) for row in direct[:3]]
    assert list(odds.table.columns) == ["word", "log-odds", "active with", "inactive with"]
    assert odds.table["word"].tolist()[:2] == ["star", "sky"]  # the words that make it active
    assert odds.summary == f"L1H2: {sum(active)} active of {len(active)} training prompts"
    for flat in (_activity(star_active=False), _activity(all_active=True)):
        none = lk.word_odds(flat, _Tokenizer())
        assert none.table is None and none.summary.startswith("L1H2: ")


def test_planted_recovery_against_the_truth():
    import math
    from types import SimpleNamespace

    lookups = [_lookup(777, " telescope", 2), _lookup(1200, " Lord", 4, accuracy=0.7),
               _lookup(3000, " que", 7, words=())]
    plans = [(777, 2, " telescope", "astronomy"), (1200, 4, " Lord", "religion"),
             (3000, 7, " que", "spanish"), (2400, 9, " troops", "war")]
    truth = SimpleNamespace(
        lookups=[PlantedLookup(1, h, n, topic, t, False, 0, []) for n, h, t, topic in plans],
        topic_words={"astronomy": ["Stars", "moon"], "religion": ["God"], "spanish": ["que"],
                     "war": ["war"]})
    recovery = lk.planted_recovery(lookups, truth, _Tokenizer())
    table = recovery.table
    assert table["planted neuron"].tolist() == ["1.777 ' telescope'", "1.1200 ' Lord'",
                                                "1.3000 ' que'", "1.2400 ' troops'"]
    assert table["top head (planted)"].tolist() == ["L1H2 (L1H2)", "L1H4 (L1H4)", "L1H7 (L1H7)",
                                                    "- (L1H9)"]
    assert table["words in topic (label half)"].tolist() == ["1/2", "0/2", "0/0", "0/0"]
    assert table["first word"].tolist() == ["star", "star", "-", "-"]
    assert table["beats chance"].tolist() == [True, False, False, False]
    assert table["recovered"].tolist() == [True, False, False, False] and recovery.recovered == 1
    expected = lk.topic_share(lookups[0].activity, lookups[0].explanation, ["Stars", "moon"],
                              _Tokenizer())
    assert table["topic share"][0] == pytest.approx(expected) and 0 < expected < 1
    assert math.isnan(table["topic share"][2])
    unexplained = lookups[2].evaluation  # no explanation: not scored, and it says why
    assert unexplained.explanation is None and math.isnan(unexplained.accuracy)
    assert unexplained.n_test == 0 and unexplained.error == "nothing to explain"
    assert lookups[2].summary()["explanation"] == "nothing to explain"
    assert recovery.finding() == "planted look-ups recovered end to end: 1 of 4"


def test_the_selection_against_the_plan():
    import pandas as pd
    from types import SimpleNamespace

    scores = pd.DataFrame({"layer": [1, 1, 0], "neuron": [777, 5, 777],
                           "token": [" telescope", " the", " war"]})
    truth = SimpleNamespace(lookups=[
        PlantedLookup(1, 2, 777, "astronomy", " telescope", False, 0, []),
        PlantedLookup(1, 4, 1200, "religion", " Lord", False, 0, [])])
    assert lk.selection_against_plan([(1, 777), (1, 5)], scores, truth) == [
        "neuron 1.777: predicts ' telescope', planted to predict ' telescope'",
        "neuron 1.5: predicts ' the', not planted",
        "all planted look-up neurons found: False"]
    assert lk.selection_against_plan([(1, 777), (1, 1200)], scores.assign(
        neuron=[777, 1200, 777]), truth)[-1].endswith("found: True")
