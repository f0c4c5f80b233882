"""Tests of the error attribution (chapter 8): pieces against the model's hooks on a small model."""

from __future__ import annotations

import pytest
import torch

from context_neurons import circuit as C
from context_neurons.evaluation.approximation import approximator, true_pre_activations
from context_neurons.discovery import read_vectors
from context_neurons.evaluation.error_terms import DENOMINATORS, error_terms
from context_neurons.models.weights import as_weights
from context_neurons.hooks import run_until

torch.set_grad_enabled(False)
NEURONS = [0, 5, 17, 100]


@pytest.fixture(scope="module")
def setup(small_model):
    gen = torch.Generator().manual_seed(3)
    n_ctx, vocab = small_model.cfg.n_ctx, small_model.cfg.d_vocab
    calibration = torch.randint(0, vocab, (n_ctx,), generator=gen)
    circuit = C.build_circuit(small_model, calibration, heads=[1, 3], dest_token=7, n_min=8)
    tokens = torch.randint(0, vocab, (3, n_ctx), generator=gen)
    return small_model, circuit, tokens, error_terms(circuit, small_model, tokens, NEURONS)


def test_exact_pieces_sum_to_the_true_pre_activations(setup):
    model, _, tokens, et = setup
    true = true_pre_activations(model, tokens, NEURONS)
    hooked = run_until(model, tokens, "blocks.0.mlp.hook_pre")["blocks.0.mlp.hook_pre"][..., NEURONS]
    torch.testing.assert_close(et.true, hooked, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(sum(et.exact.values()), true, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(et.prediction(et.pieces), true, atol=1e-4, rtol=1e-4)
    _, fvu = et.accuracy(et.pieces)
    assert float(fvu.max()) < 1e-8


def test_each_head_piece_is_its_hooked_output(setup):
    model, circuit, tokens, et = setup
    z = run_until(model, tokens, "blocks.0.attn.hook_z")["blocks.0.attn.hook_z"]
    read = read_vectors(circuit, model, NEURONS)
    for h in circuit.heads:
        out = z[:, :, h] @ as_weights(model).W_O[h] @ read
        torch.testing.assert_close(et.exact[f"head {h}"], out, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("denominators", ["per_position", "median"])
def test_approximated_pieces_sum_to_the_approximation(setup, denominators):
    model, circuit, tokens, et = setup
    approx = approximator(circuit, model, NEURONS, denominators)(tokens)
    torch.testing.assert_close(et.prediction((), denominators), approx, atol=1e-4, rtol=1e-4)


def test_text_at_reference_normalises_the_bag(setup):
    """With each text's own denominators in the bag's frame, the bag's weights
    ``K[n, i] c_{n_ref}(t_i) / D(n)`` sum to 1 at every position: the bag of a neuron-free read
    (every token contributing 1) is exactly 1 for every head."""
    model, circuit, tokens, et = setup
    assert set(et.bags) == set(DENOMINATORS)
    n = tokens.shape[1]
    ones = torch.ones(len(tokens), n, len(circuit.heads))
    weights = circuit.kernel[:n, :n][None, None] * circuit.log_content[:, tokens].exp().permute(
        1, 0, 2)[:, :, None]  # [b, h, n, i]: K[n, i] c_h(t_i)
    bag_weights = et.bags["text_at_reference"] / torch.einsum(
        "ni,bihj->bnhj", circuit.kernel[:n, :n],
        circuit.head_contributions(read_vectors(circuit, model, NEURONS), circuit.w_o)[tokens])
    log_total = torch.logsumexp(weights.log(), -1).transpose(1, 2)  # [b, n, h]
    torch.testing.assert_close(bag_weights[..., 0] * log_total.exp(), ones, atol=1e-4, rtol=1e-4)
