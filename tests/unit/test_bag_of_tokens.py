"""The bag of tokens' closed form (issue 52): ``r_j(t)`` from the per-token and per-position
parts of ``E_t + P_p`` equals the forward pass (v3's ``bag_responses``) to 1e-4 relative in
float32, on small models with LayerNorm folded and not and on a sample of tokens of a model with
GPT-2 Small's layer-0 sizes and vocabulary (the planted model); a closed form that is off stops
with an error; the baseline built on it equals v3's."""

from __future__ import annotations

import pytest
import torch

from context_neurons.checks import ModelLoadError
from context_neurons.models.toy import make_small_model
from context_neurons.models.weights import as_weights
from context_neurons.verdict.bag_of_tokens import (
    RELATIVE_TOLERANCE,
    check_against_forward,
    checked_bag_responses,
    closed_form_bag_responses,
)
from context_neurons.verdict.baselines import bag_of_tokens_score, bag_responses


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


@pytest.mark.parametrize("fold_ln", [True, False])
@pytest.mark.parametrize("length, start", [(128, 32), (40, 5)])
def test_closed_form_equals_the_forward_pass(fold_ln, length, start):
    model, _ = make_small_model(seed=5, fold_ln=fold_ln, n_ctx=128, n_layers=2)
    tokens = torch.arange(3, 43)
    forward = bag_responses(model, tokens, length, start, 0)
    closed = closed_form_bag_responses(as_weights(model), tokens, length, start, 0, batch_size=7)
    assert closed.shape == forward.shape == (40, model.cfg.d_mlp)
    assert _relative(closed, forward) < RELATIVE_TOLERANCE
    # a response depends on its token: the test is not passed by a constant
    assert float((forward[0] - forward[1]).abs().max()) > 100 * RELATIVE_TOLERANCE


def test_closed_form_on_gpt2_small_sizes():
    from context_neurons.models import load_model

    model = load_model("planted", device="cpu").model
    assert (model.cfg.d_model, model.cfg.d_vocab) == (768, 50257)
    tokens = torch.randint(0, 50256, (16,), generator=torch.Generator().manual_seed(52))
    forward = bag_responses(model, tokens, 128, 32, 50256)
    closed = closed_form_bag_responses(as_weights(model), tokens, 128, 32, 50256)
    assert _relative(closed, forward) < RELATIVE_TOLERANCE


def test_a_wrong_closed_form_is_an_error(monkeypatch):
    model, _ = make_small_model(seed=5, n_ctx=128)
    tokens = torch.arange(3, 20)
    forward = bag_responses(model, tokens, 128, 32, 0)
    assert check_against_forward(forward * (1 + RELATIVE_TOLERANCE / 10), forward) < \
        RELATIVE_TOLERANCE
    with pytest.raises(ModelLoadError, match="closed form"):
        check_against_forward(forward * 1.001, forward)
    import context_neurons.verdict.bag_of_tokens as cf

    right = cf.closed_form_bag_responses
    monkeypatch.setattr(cf, "closed_form_bag_responses",
                        lambda *a, **k: right(*a, **k) * 1.001)
    with pytest.raises(ModelLoadError):
        cf.checked_bag_responses(model, tokens, 128, 32, 0)


def test_baseline_on_the_closed_form_equals_v3s():
    from context_neurons.verdict.protocol import load_protocol_v3

    model, _ = make_small_model(seed=5, n_ctx=128)
    gen = torch.Generator().manual_seed(0)
    distributions = {}
    for name in ("a", "b", "c"):
        p = torch.zeros(model.cfg.d_vocab, dtype=torch.float64)
        p[torch.randint(0, 200, (30,), generator=gen)] = 1.0
        distributions[name] = p / p.sum()
    length = load_protocol_v3().bag_length
    v3 = bag_of_tokens_score(model, distributions, 32, length)
    closed = bag_of_tokens_score(model, distributions, 32, length,
                                 responses_of=checked_bag_responses)
    torch.testing.assert_close(closed.score, v3.score, rtol=1e-4, atol=1e-6)
