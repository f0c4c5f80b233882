"""Model loading: the offline tokenizer, the GPT-2 loader on a local checkpoint, the planted model."""

from __future__ import annotations

import pytest
import torch

from context_neurons.checks import ModelLoadError
from context_neurons.models.loading import (
    WeightProcessing,
    build_offline_tokenizer,
    load_hf_gpt2,
    load_model,
    load_tokenizer,
    save_gpt2_shaped_checkpoint,
)
from context_neurons.models.planted import CONTEXT_NEURONS, LOOKUPS, build_planted_state


def test_offline_tokenizer_known_ids():
    tokenizer = load_tokenizer()
    assert tokenizer.encode(" the", add_special_tokens=False) == [262]
    assert tokenizer.encode("Hello world", add_special_tokens=False) == [15496, 995]
    assert len(tokenizer) == 50257
    assert tokenizer.decode([15496, 995]) == "Hello world"


def test_missing_tokenizer_dir_is_a_clear_error(tmp_path):
    with pytest.raises(ModelLoadError, match="vocab.json and merges.txt"):
        build_offline_tokenizer(tmp_path)


def test_unknown_model_name():
    with pytest.raises(ModelLoadError, match="Unknown model 'gpt3'.*gpt2, gpt2-medium.*planted"):
        load_model("gpt3")


def test_missing_weights_directory(tmp_path):
    with pytest.raises(ModelLoadError, match="config.json missing"):
        load_hf_gpt2("gpt2", tmp_path / "nowhere")


@pytest.mark.slow
@pytest.mark.parametrize("processing", [WeightProcessing(), WeightProcessing(False, False, False, False)])
def test_gpt2_loader_matches_hugging_face_logits(tmp_path, processing):
    """A GPT-2-Small-shaped checkpoint goes through exactly the code users run for GPT-2."""
    from transformers import GPT2LMHeadModel

    path = save_gpt2_shaped_checkpoint(tmp_path / "gpt2-shaped", seed=1, n_layer=12)
    loaded = load_model("gpt2", weights=path, processing=processing)
    cfg = loaded.model.cfg
    assert loaded.name == "gpt2" and not loaded.is_planted
    assert (cfg.d_model, cfg.n_heads, cfg.d_mlp, cfg.n_layers) == (768, 12, 3072, 12)
    assert (cfg.d_vocab, cfg.n_ctx) == (50257, 1024)
    # The processing asked for is the processing done: writing weights centred or not.
    centred = bool(loaded.model.W_E.mean(-1).abs().max() < 1e-6)
    assert centred == processing.center_writing_weights
    hf_model = GPT2LMHeadModel.from_pretrained(path).eval()
    tokens = loaded.model.to_tokens("The quick brown fox jumps over the lazy dog.")
    assert tokens[0, 0].item() == 50256  # BOS prepended
    hf_logits = hf_model(tokens).logits
    tl_logits = loaded.model(tokens)
    # centre_unembed shifts all logits of a position by a constant: compare log-probabilities.
    torch.testing.assert_close(tl_logits.log_softmax(-1), hf_logits.log_softmax(-1), atol=2e-4, rtol=0)


def test_planted_model_shapes_and_truth(planted):
    cfg = planted.model.cfg
    assert (cfg.d_model, cfg.n_heads, cfg.d_head, cfg.d_mlp) == (768, 12, 64, 3072)
    assert (cfg.d_vocab, cfg.n_ctx, cfg.n_layers) == (50257, 1024, 2)
    truth = planted.truth
    assert truth.head_groups["contextual"] == [0, 2, 6, 8, 9, 10]
    assert truth.head_groups["detokenization"] == [3, 4, 7]
    assert truth.head_groups["duplicate"] == [1, 5]
    assert truth.head_groups["miscellaneous"] == [11]
    assert {300, 704, 1621, 1710} <= set(truth.context_neurons)
    assert len(truth.context_neurons) == len(CONTEXT_NEURONS) >= 15
    assert [lookup.neuron for lookup in truth.lookups] == [p.neuron for p in LOOKUPS]
    assert len(truth.topic_token_ids["british"]) == len(truth.topic_token_ids["american"]) >= 18
    assert "banner" not in truth.to_dict() and "PLANTED" in planted.banner()


@pytest.mark.slow
def test_planted_model_is_deterministic_and_seeded():
    tokenizer = load_tokenizer()
    state_a, truth_a = build_planted_state(tokenizer, seed=0)
    state_b, _ = build_planted_state(tokenizer, seed=0)
    state_c, _ = build_planted_state(tokenizer, seed=1)
    name = "transformer.h.0.mlp.c_fc.weight"
    assert torch.equal(state_a[name], state_b[name])
    assert not torch.equal(state_a[name], state_c[name])
    assert truth_a.seed == 0


def test_planted_context_neuron_fires_on_its_topic(planted):
    """Neuron 1710 (religion) is more active on a Bible chapter than on news prose."""
    from context_neurons.text.corpora import get_document
    from context_neurons.text.windows import tokenize_text

    model = planted.model
    bible = tokenize_text(model.tokenizer, get_document("bible_kjv", "Genesis 1").text, truncate=True)
    news = tokenize_text(model.tokenizer, get_document("nltk_brown_us", "ca01").text, truncate=True)
    acts = []
    for tokens in (bible, news):
        _, cache = model.run_with_cache(tokens[None], stop_at_layer=1, names_filter="blocks.0.mlp.hook_pre")
        acts.append(cache["blocks.0.mlp.hook_pre"][0, 100:, 1710].mean().item())
    assert acts[0] > acts[1] + 1.0


@pytest.mark.slow
def test_gpt2_loads_from_an_offline_hugging_face_cache(tmp_path):
    """``HF_HUB_OFFLINE=1`` with a populated cache: the path users take after one download.

    The cache is laid out as ``huggingface_hub`` lays it out (``models--gpt2/refs/main`` naming
    a snapshot); a fresh interpreter is needed because the hub reads its settings at import.
    """
    import json
    import os
    import subprocess
    import sys

    hub = tmp_path / "hub"
    snapshot = hub / "models--gpt2" / "snapshots" / "0123456789abcdef"
    save_gpt2_shaped_checkpoint(snapshot, seed=2, n_layer=1)
    (hub / "models--gpt2" / "refs").mkdir(parents=True)
    (hub / "models--gpt2" / "refs" / "main").write_text("0123456789abcdef")
    env = {**os.environ, "HF_HUB_CACHE": str(hub), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "CONTEXT_NEURONS_GPT2": ""}
    env.pop("CONTEXT_NEURONS_GPT2")
    script = (
        "import json, torch\n"
        "from context_neurons.models import load_model\n"
        "loaded = load_model('gpt2')\n"
        "tokens = loaded.model.to_tokens('Hello world')\n"
        "print(json.dumps({'source': loaded.source, 'layers': loaded.model.cfg.n_layers,\n"
        "                  'logit': float(loaded.model(tokens)[0, -1].log_softmax(-1)[0])}))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["source"] == "Hugging Face cache (offline)" and report["layers"] == 1
    from transformers import GPT2LMHeadModel

    hf_model = GPT2LMHeadModel.from_pretrained(snapshot).eval()
    expected = hf_model(torch.tensor([[50256, 15496, 995]])).logits[0, -1].log_softmax(-1)[0]
    assert report["logit"] == pytest.approx(float(expected), abs=2e-4)


@pytest.mark.slow
def test_gpt2_medium_shape_runs_the_layer0_method(tmp_path):
    """GPT-2 Medium's layer 0 (16 heads, d_model 1024, d_mlp 4096), seeded random weights,
    through the loader ``--model gpt2-medium`` uses: the layer-0 sections take every size from
    the model (16 heads classified, 4096 neurons scored, the approximation evaluated). Three
    layers, not Medium's 24: the method reads layer 0 only, and a count other than GPT-2 Small's
    12 is what matters (24 layers cost about a minute of CI writing and loading 1.4 GB)."""
    from context_neurons import circuit as cc
    from context_neurons import decomposition as dec
    from context_neurons import discovery as disc
    from context_neurons import evaluation as ev
    from context_neurons import taxonomy as tx
    from context_neurons.hooks import run_until
    from context_neurons.text.windows import calibration_tokens

    path = save_gpt2_shaped_checkpoint(
        tmp_path / "gpt2-medium-shaped", seed=3, n_layer=3, n_embd=1024, n_head=16
    )
    loaded = load_model("gpt2-medium", weights=path, device="cpu")
    model = loaded.model
    cfg = model.cfg
    assert (cfg.n_layers, cfg.n_heads, cfg.d_model, cfg.d_mlp) == (3, 16, 1024, 4096)
    assert "GPT-2 Medium" in loaded.banner()
    taxonomy = tx.classify_heads(model)
    assert taxonomy.heads == list(range(16))
    assert sorted(h for g in taxonomy.groups.values() for h in g) == list(range(16))
    # the decomposition's exact pattern is the model's own (hook), and its TV is a distance
    tokens = calibration_tokens(model.tokenizer)[:200].to(cfg.device)
    parts = dec.decompose_attention(model, tokens, heads=[0, 15])
    hook = "blocks.0.attn.hook_pattern"
    pattern = run_until(model, tokens[None], hook)[hook][0, [0, 15]]
    torch.testing.assert_close(parts.exact_pattern(), pattern, atol=1e-5, rtol=1e-4)
    tv = parts.tv_distance()
    assert tv.shape == (2, 200) and float(tv.min()) >= 0 and float(tv.max()) <= 1
    circuit = cc.build_circuit(model, "prose", [0, 15])  # two heads named, not the paper's
    scores = disc.score_neurons(circuit, model)
    assert scores.top.shape == (4096,) and bool(torch.isfinite(scores.top).all())
    windows = [calibration_tokens(model.tokenizer)[:300]]
    result = ev.evaluate(circuit, model, windows, [0, 4095])
    assert result.pearson.shape == (1, 2) and bool(torch.isfinite(result.pearson).all())


def test_a_checkpoint_that_does_not_scale_its_scores_is_refused(tmp_path):
    """TransformerLens 4's bridge ignores scale_attn_weights=False: such a checkpoint would run
    with the wrong scores, so the loader refuses it by name."""
    path = save_gpt2_shaped_checkpoint(tmp_path / "unscaled", seed=0, n_layer=1, n_embd=32,
                                       n_head=2, n_positions=16, vocab_size=100,
                                       scale_attn_weights=False)
    with pytest.raises(ModelLoadError, match="scale_attn_weights=False"):
        load_model(str(path))


def test_the_bridge_puts_a_preloaded_model_on_the_device_asked_for(monkeypatch):
    """TransformerLens's bridge records ``device`` in ``cfg.device`` but leaves a pre-loaded
    Hugging Face model where it is; bridge_from_hf moves it (on a GPU the weights stayed on the
    CPU while the method's token ids went to the GPU). Here the move is observed, not made."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from context_neurons.models import loading

    hf_model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, n_positions=32,
                                          vocab_size=50))
    moved_to, move = [], GPT2LMHeadModel.to

    def spy(self, *args, **kwargs):
        moved_to.append(str(args[0] if args else kwargs.get("device")))
        return move(self, *args, **kwargs)

    monkeypatch.setattr(GPT2LMHeadModel, "to", spy)
    monkeypatch.setattr(loading.config, "resolve_device", lambda device: torch.device("cpu"))
    model = loading.bridge_from_hf(hf_model, None, "tiny", device="cuda")
    assert moved_to == ["cpu"]  # the device resolve_device gave, not left where it was
    assert {p.device.type for p in model.parameters()} == {"cpu"}
