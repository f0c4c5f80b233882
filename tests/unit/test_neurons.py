"""Tests of neuron discovery (chapter 5): contributions by brute force, the score, the truth."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from context_neurons import circuit as C
from context_neurons import decomposition as dec
from context_neurons import gallery
from context_neurons import neurons as N
from context_neurons.models import load_model

torch.set_grad_enabled(False)


@pytest.fixture(scope="module")
def planted():
    return load_model("planted")


@pytest.fixture(scope="module")
def circuit(planted):
    return C.get_circuit(planted.model)


@pytest.fixture(scope="module")
def scores(planted, circuit):
    return N.get_scores(circuit, planted.model)


# ----------------------------------------------------------------------------------------------
# Contributions against a brute-force computation through hooks
# ----------------------------------------------------------------------------------------------


def _at_position(model, token_ids, position, names):
    filler = dec.token_id(model, " and")
    batch = torch.full((len(token_ids), position + 1), filler)
    batch[:, 0] = model.tokenizer.bos_token_id
    batch[:, position] = token_ids
    _, cache = model.run_with_cache(batch, stop_at_layer=1, names_filter=names)
    return [cache[name][:, position] for name in names]


def test_contributions_match_hooks(planted):
    """contribution[j, t] rebuilt from hook_q/k/v, the MLP's own LN2 (scale fixed) and W_in."""
    model = planted.model
    reference = torch.tensor([262, 290, 286, 262, 1110, 3303, 13, 11, 50000, 1234])
    circuit = C.build_circuit(model, "prose", n_ref=48, reference_tokens=reference)
    heads, n_ref = circuit.heads, circuit.n_ref
    tokens = torch.tensor(
        [dec.token_id(model, s) for s in (" colour", " color", " war", " the")] + [999]
    )
    neurons = [0, 300, 704, 1710, model.cfg.d_mlp - 1]

    (q,) = _at_position(model, torch.tensor([circuit.dest_token]), n_ref, ["blocks.0.attn.hook_q"])
    k, v = _at_position(model, tokens, n_ref, ["blocks.0.attn.hook_k", "blocks.0.attn.hook_v"])
    ref, counts = torch.unique(reference, return_counts=True)
    (v_ref,) = _at_position(model, ref, n_ref, ["blocks.0.attn.hook_v"])
    mean_v = (v_ref * (counts / counts.sum())[:, None, None]).sum(0)
    log_c = torch.einsum("he,the->th", q[0, heads], k[:, heads]) / model.cfg.d_head**0.5
    weight = torch.exp(log_c - circuit.calibration.log_dhat)
    w_o = model.blocks[0].attn.W_O[heads]
    extended = torch.einsum("th,the,hed->td", weight, (v - mean_v)[:, heads], w_o)

    fixed = lambda scale, hook: torch.full_like(scale, 1 / circuit.ln2_scale)  # noqa: E731
    ln2 = model.blocks[0].ln2
    with model.hooks(fwd_hooks=[("blocks.0.ln2.hook_scale", fixed)]):
        linear = ln2(extended[None])[0] - ln2(torch.zeros_like(extended)[None])[0]
    expected = (linear @ model.blocks[0].mlp.W_in[:, neurons]).T

    got = N.contributions(circuit, model, neurons, tokens)
    assert got.shape == (len(neurons), len(tokens))
    assert torch.allclose(got, expected, rtol=1e-3, atol=1e-3 * expected.abs().max())


def test_contributions_are_one_gemm_of_all_tokens(planted, circuit):
    model = planted.model
    full = N.contributions(circuit, model, [300, 1710])
    assert full.shape == (2, model.cfg.d_vocab)
    some = N.contributions(circuit, model, [1710], torch.tensor([5, 17, 262]))
    assert torch.allclose(full[1, [5, 17, 262]], some[0], atol=1e-4)


# ----------------------------------------------------------------------------------------------
# The score
# ----------------------------------------------------------------------------------------------


def test_score_matches_numpy(planted, circuit, scores):
    model = planted.model
    vocab = scores.vocabulary
    assert not vocab[model.tokenizer.bos_token_id] and int(vocab.sum()) == model.cfg.d_vocab - 1
    for j in (0, 300, 2048):
        c = N.contributions(circuit, model, [j])[0][vocab].double().numpy()
        med = np.median(c)  # numpy averages the two middle values; torch takes the lower one
        spread = 1.4826 * np.median(np.abs(c - med))
        top = np.sort(np.abs(c - med) / spread)[-N.TOP_K :].mean()
        assert top == pytest.approx(float(scores.top[j]), rel=2e-3)


def test_gaussian_null_matches_simulation():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(20, 50256, generator=gen)
    med = x.median(-1, keepdim=True).values
    z = (x - med).abs() / (1.4826 * (x - med).abs().median(-1, keepdim=True).values)
    simulated = z.topk(20, dim=-1).values.mean(-1).mean()
    assert float(simulated) == pytest.approx(N.gaussian_null_score(), abs=0.05)
    assert N.gaussian_null_score() < N.THETA


def test_planted_neurons_recovered(planted, scores):
    truth = sorted(planted.truth.context_neurons)
    precision, recall = N.precision_recall(scores.found(N.THETA), truth)
    assert precision >= 0.9 and recall >= 0.9
    found = scores.found(N.THETA)
    assert found == sorted(found, key=lambda j: -float(scores.top[j]))


def test_theta_sweep_is_monotone(planted, scores):
    sweep = N.theta_sweep(scores, truth=sorted(planted.truth.context_neurons))
    counts = sweep["neurons found"].to_numpy()
    assert (np.diff(counts) <= 0).all()
    assert counts[0] > counts[-1]
    assert set(sweep.columns) == {"neurons found", "precision", "recall"}


def test_precision_recall():
    assert N.precision_recall([1, 2, 3, 4], [1, 2, 5]) == (0.5, 2 / 3)
    assert N.precision_recall([], [1])[1] == 0.0


# ----------------------------------------------------------------------------------------------
# Reading neurons
# ----------------------------------------------------------------------------------------------


def test_token_table_of_neuron_300(planted, circuit):
    model, truth = planted.model, planted.truth
    table = N.token_table(circuit, model, 300, k=10)
    assert list(table.index) == list(range(1, 11))
    assert (np.diff(table["top contribution"].to_numpy()) <= 0).all()
    assert (table["top contribution"] > 0).all() and (table["bottom contribution"] < 0).all()
    british = set(truth.topic_token_ids["british"])
    american = set(truth.topic_token_ids["american"])
    assert sum(t in british for t in table["top id"]) >= 9
    assert sum(t in american for t in table["bottom id"]) >= 9


def test_sub_latents_split_two_topics(planted, circuit):
    model, truth = planted.model, planted.truth
    law, medicine = set(truth.topic_token_ids["law"]), set(truth.topic_token_ids["medicine"])
    split = N.sub_latents(circuit, model, 1301, k=40)
    ids, _ = N.top_tokens(circuit, model, 1301, k=40)
    labels = dict(zip(split.table["token"], split.table["cluster"]))
    clusters = [labels[N.token_str(model, t)] for t in ids.tolist()]
    topic = ["law" if t in law else "medicine" if t in medicine else "other" for t in ids.tolist()]
    agree = max(
        sum((c == 0) == (k == "law") for c, k in zip(clusters, topic)),
        sum((c == 1) == (k == "law") for c, k in zip(clusters, topic)),
    )
    assert agree >= 0.9 * len(ids)
    single = N.sub_latents(circuit, model, 57, k=40)
    assert float(split.centroid_cosine[0, 1]) < float(single.centroid_cosine[0, 1])


def test_gallery(planted, circuit, scores, tmp_path):
    model = planted.model
    table = gallery.gallery_table(circuit, model, [300, 1710], scores, planted.truth)
    assert list(table.index) == [300, 1710]
    assert table.loc[1710, "planted as"] == planted.truth.context_neurons[1710]["description"]
    assert table.loc[300, "planted-topic share"] >= 0.9
    written = gallery.write_gallery(tmp_path, circuit, model, [300], scores, planted.truth, k=5)
    assert [p.name for p in written] == ["index.md", "neuron_300.md"]
    assert (tmp_path / "neuron_300.png").stat().st_size > 1000
    assert "neuron_300.md" in (tmp_path / "index.md").read_text()


# ----------------------------------------------------------------------------------------------
# Errors
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [-1, 3072, 10**6, 2.5, "three", None])
def test_bad_neuron_index(planted, circuit, bad):
    with pytest.raises(N.NeuronIndexError, match="0..3071|integer"):
        N.check_neuron(planted.model, bad)
    with pytest.raises(N.NeuronIndexError):
        N.token_table(circuit, planted.model, bad)


def test_bad_neuron_lists(planted, circuit):
    with pytest.raises(N.NeuronIndexError, match="at least one"):
        N.contributions(circuit, planted.model, [])
    with pytest.raises(N.NeuronIndexError, match="0..3071"):
        N.contributions(circuit, planted.model, [5, 4000])
    with pytest.raises(ValueError, match="n_clusters"):
        N.sub_latents(circuit, planted.model, 300, k=3, n_clusters=4)
    with pytest.raises(ValueError, match="side"):
        N.top_tokens(circuit, planted.model, 300, side="middle")
