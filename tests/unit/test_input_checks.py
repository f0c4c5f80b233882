"""Issue 34: inputs that used to pass silently (a wrapped seed, a negative token id read from the
end of the vocabulary, a head counted twice, NaN as a threshold) or end in a raw traceback now
stop with the package's one-line :class:`InputError` naming the input."""

from __future__ import annotations

import pytest
import torch

from context_neurons import config
from context_neurons import discovery as disc
from context_neurons import taxonomy as tx
from context_neurons.checks import MAX_SEED, InputError, check_heads, check_seed
from context_neurons.models import load_model


@pytest.mark.parametrize("seed", [-1, MAX_SEED + 1, 2**40, 1.5, True, "3"])
def test_a_seed_outside_32_bits_or_not_whole_is_refused(seed):
    with pytest.raises(InputError, match="seed"):
        check_seed(seed)


@pytest.mark.parametrize("seed", [-1, MAX_SEED + 1, 2**40])
def test_the_planted_model_refuses_a_seed_it_would_wrap(seed):
    """-1 used to build seed 4294967295's weights labelled 'seed -1'; 2**40 seed 0's."""
    with pytest.raises(InputError, match="seed"):
        load_model("planted", seed=seed)


def test_seeds_at_the_ends_of_the_range_pass():
    assert check_seed(0) == 0 and check_seed(MAX_SEED) == MAX_SEED


@pytest.mark.parametrize("text", ["-1", "4294967296", "1.5", "seven"])
def test_the_seed_variable_is_checked_where_it_is_read(monkeypatch, text):
    monkeypatch.setenv(config.PLANTED_SEED.name, text)
    with pytest.raises(InputError, match=config.PLANTED_SEED.name):
        config.planted_seed()


@pytest.mark.parametrize("text", ["abc", "0", "-2", "1.5"])
def test_the_threads_variable_must_be_a_whole_number_of_at_least_one(monkeypatch, text):
    monkeypatch.setenv(config.THREADS.name, text)
    with pytest.raises(InputError, match=config.THREADS.name):
        config.threads()
    monkeypatch.setenv(config.THREADS.name, "3")
    assert config.threads() == 3


@pytest.mark.parametrize("device", ["tpu", "mps", "not a device"])
def test_a_device_other_than_cpu_or_cuda_is_refused(device):
    with pytest.raises(InputError, match="'cpu', 'cuda' or 'auto'"):
        config.resolve_device(device)


def test_a_head_given_twice_is_refused(planted):
    with pytest.raises(InputError, match=r"Heads \[0\] are given more than once"):
        check_heads(planted.model, [0, 0])
    assert check_heads(planted.model, [2, 0]) == [2, 0]


@pytest.fixture(scope="module")
def scored(planted):
    from context_neurons.circuit import get_circuit

    circuit = get_circuit(planted.model)
    return circuit, disc.get_scores(circuit, planted.model)


@pytest.mark.parametrize("ids", [torch.tensor([-1]), torch.tensor([10**6])])
def test_contributions_refuse_token_ids_outside_the_vocabulary(planted, scored, ids):
    circuit, _ = scored
    with pytest.raises(InputError, match="token"):
        disc.contributions(circuit, planted.model, [0], token_ids=ids)
    d_vocab = planted.model.cfg.d_vocab
    last = disc.contributions(circuit, planted.model, [0], token_ids=torch.tensor([d_vocab - 1]))
    assert last.shape == (1, 1)


@pytest.mark.parametrize("theta", [float("nan"), float("inf"), True])
def test_found_refuses_a_threshold_that_is_not_a_finite_number(scored, theta):
    _, scores = scored
    with pytest.raises(InputError, match="theta"):
        scores.found(theta)


def test_score_neurons_and_the_sweep_refuse_empty_or_zero_sizes(planted, scored):
    circuit, scores = scored
    with pytest.raises(InputError, match="chunk"):
        disc.score_neurons(circuit, planted.model, chunk=0)
    with pytest.raises(InputError, match="thetas is empty"):
        disc.theta_sweep(scores, thetas=())
    assert len(disc.theta_sweep(scores, thetas=(4,))) == 1


def test_the_taxonomy_refuses_a_repeated_head(planted):
    with pytest.raises(InputError, match="more than once"):
        tx.classify_heads(planted.model, heads=[0, 0])
