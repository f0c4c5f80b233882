"""Model loading: the offline tokenizer, the GPT-2 loader on a local checkpoint, the planted model."""

from __future__ import annotations

import pytest
import torch

from context_neurons.models import (
    ModelLoadError,
    WeightProcessing,
    build_offline_tokenizer,
    load_hf_gpt2,
    load_model,
    load_tokenizer,
    save_gpt2_shaped_checkpoint,
)
from context_neurons.planted import CONTEXT_NEURONS, LOOKUPS, build_planted_state


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
    with pytest.raises(ModelLoadError, match="Unknown model 'gpt3'.*gpt2, planted"):
        load_model("gpt3")


def test_missing_weights_directory(tmp_path):
    with pytest.raises(ModelLoadError, match="config.json missing"):
        load_hf_gpt2(tmp_path / "nowhere")


@pytest.mark.slow
@pytest.mark.parametrize("processing", [WeightProcessing(), WeightProcessing(False, False, False, False)])
def test_gpt2_loader_matches_hugging_face_logits(tmp_path, processing):
    """A GPT-2-Small-shaped checkpoint goes through exactly the code users run for GPT-2."""
    from transformers import GPT2LMHeadModel

    path = save_gpt2_shaped_checkpoint(tmp_path / "gpt2-shaped", seed=1, n_layer=2)
    loaded = load_model("gpt2", weights=path, processing=processing)
    assert loaded.name == "gpt2" and not loaded.is_planted
    assert (loaded.model.cfg.d_model, loaded.model.cfg.n_heads, loaded.model.cfg.d_mlp) == (768, 12, 3072)
    assert (loaded.model.cfg.d_vocab, loaded.model.cfg.n_ctx) == (50257, 1024)
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
    assert [lookup["neuron"] for lookup in truth.lookups] == [p.neuron for p in LOOKUPS]
    assert len(truth.topic_token_ids["british"]) == len(truth.topic_token_ids["american"]) >= 18
    assert "banner" not in truth.to_dict() and "PLANTED" in planted.banner()


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
    from context_neurons.data import get_document, tokenize_text

    model = planted.model
    bible = tokenize_text(model.tokenizer, get_document("bible_kjv", "Genesis 1").text, truncate=True)
    news = tokenize_text(model.tokenizer, get_document("nltk_brown_us", "ca01").text, truncate=True)
    acts = []
    for tokens in (bible, news):
        _, cache = model.run_with_cache(tokens[None], stop_at_layer=1, names_filter="blocks.0.mlp.hook_pre")
        acts.append(cache["blocks.0.mlp.hook_pre"][0, 100:, 1710].mean().item())
    assert acts[0] > acts[1] + 1.0
