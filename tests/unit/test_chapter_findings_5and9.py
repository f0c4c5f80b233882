"""Tests of the analyses chapters 5 and 9 print (issue 33: findings in the package): each on
hand-made inputs or a small seeded model, against values worked out by hand or recomputed."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from context_neurons import casestudies
from context_neurons import circuit as cc
from context_neurons.sweeps import calibration_clusters as clu
from context_neurons import discovery as disc
from context_neurons import position_schemes as ps
from context_neurons import sweeps as sw
from context_neurons.models.toy import make_small_model
from context_neurons.text.windows import DomainTexts

torch.set_grad_enabled(False)


@pytest.fixture(scope="module")
def small():
    model = make_small_model(seed=0, d_vocab=60, n_ctx=32)[0]
    gen = torch.Generator().manual_seed(1)
    calibration = torch.randint(0, model.cfg.d_vocab, (model.cfg.n_ctx,), generator=gen)
    circuit = cc.build_circuit(model, calibration, heads=[0, 2], dest_token=3, n_min=4)
    return model, circuit


# ------------------------------------------------------------------------------ chapter 5


def test_pair_similarity_by_hand():
    contributions = torch.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 7.0]])
    pair = disc.pair_similarity((3, 7), contributions, torch.tensor([[1.0, 1.0], [-2.0, 0.0]]))
    assert pair.neurons == (3, 7)
    assert pair.input_r == pytest.approx(0.9933, abs=1e-4)
    assert pair.output_cosine == pytest.approx(-1 / math.sqrt(2))
    assert pair.findings() == [
        "neurons 3 and 7:",
        "correlation of their token contributions: 0.993",
        "cosine of their output weights W_out[3], W_out[7]: -0.707",
    ]


def test_neuron_pair_reads_contributions_and_w_out(small):
    model, circuit = small
    pair = disc.neuron_pair(circuit, model, 1, 5)
    both = disc.contributions(circuit, model, [1, 5])
    assert pair.input_r == pytest.approx(float(torch.corrcoef(both)[0, 1]))
    w = model.blocks[0].mlp.W_out
    assert pair.output_cosine == pytest.approx(
        float(torch.nn.functional.cosine_similarity(w[1], w[5], dim=0)), abs=1e-6
    )


def test_centroid_cosines_by_neuron():
    def split(cosine):
        return disc.SubLatents(
            table=pd.DataFrame(),
            centroid_cosine=torch.tensor([[1.0, cosine], [cosine, 1.0]]),
            within_cosine=torch.ones(2),
            singular_values=torch.ones(2),
        )

    cosines = disc.centroid_cosines({4: split(0.25), 9: split(-0.5)})
    assert cosines.name == "centroid cosine"
    assert cosines.to_dict() == {4: 0.25, 9: -0.5}
    assert cosines.idxmin() == 9


def test_relative_to_median_by_hand():
    means = pd.DataFrame({"a": [1.0, 0.0], "b": [3.0, 4.0], "c": [5.0, 2.0]}, index=[10, 20])
    relative = casestudies.relative_to_median(means, pd.Series([2.0, 0.5], index=[10, 20]))
    assert relative.loc[10].tolist() == [-1.0, 0.0, 1.0]  # median 3, spread 2
    assert relative.loc[20].tolist() == [-4.0, 4.0, 0.0]  # median 2, spread 0.5


def test_case_term_spreads_and_relative_means(small):
    model, circuit = small
    gen = torch.Generator().manual_seed(2)
    windows = list(torch.randint(0, model.cfg.d_vocab, (4, model.cfg.n_ctx), generator=gen))
    texts = DomainTexts(windows, ["t0", "t1", "t2", "t3"], ["x", "x", "y", "y"])
    scores = disc.score_neurons(circuit, model, k=5)
    acts = casestudies.text_activations(circuit, model, [1, 5], texts, scores, start=8)
    spreads = casestudies.case_term_spreads(circuit, model, acts, [(1, "x"), (5, "y")])
    assert spreads.index.names == ["neuron", "domain"]
    best = acts.best_window(5, "y")
    assert best in (2, 3)
    expected = casestudies.term_spreads(circuit, model, 5, windows[best], start=8)
    assert spreads.loc[(5, "y"), "bag"] == pytest.approx(expected["bag"])
    relative = casestudies.relative_domain_means(acts)
    means = acts.window_means()[:, 0]
    x, y = float(means[:2].mean()), float(means[2:].mean())
    spread = float(acts.window_spreads()[:, 0].mean())
    # two domains: the median is their mean, each is half their difference from it
    assert relative.loc[1, "x"] == pytest.approx((x - y) / 2 / spread, rel=1e-5)


# ------------------------------------------------------------------------------ chapter 9


def test_sweep_by_class_and_findings():
    table = pd.DataFrame(
        {
            "class": ["reference", "stop word", "stop word", "keyword"],
            "n_eff": [10.0, 8.0, 6.0, 4.0],
            "cosine to ' the'": [1.0, 0.9, 0.7, 0.5],
            "norm ratio": [1.0, 1.1, 1.3, 0.9],
            "found": [4, 3, 5, 2],
            "Jaccard": [1.0, 0.5, 0.75, 0.25],
            "median r": [0.9, 0.8, 0.7, 0.6],
            "median FVU": [0.1, 0.2, 0.05, 0.3],
        },
        index=pd.Index([" the", " a", " of", " house"], name="destination"),
    ).astype(object)
    sweep = sw.SweepResult(table, pd.DataFrame(), {})
    by_class = sweep.by_class()
    assert list(by_class.index) == ["reference", "stop word", "keyword"]
    assert by_class.loc["stop word", "cosine"] == pytest.approx(0.8)
    assert by_class.loc["stop word", "found"] == 4.0
    assert sweep.findings() == [
        "largest change of the found set: ' house' (Jaccard 0.25); FVU range over destinations "
        "0.050 to 0.300"
    ]


def test_weighted_means_of_calibrations():
    columns = pd.MultiIndex.from_tuples(
        [("texts", ""), ("calibration text", ""), ("median r", "default"),
         ("median r", "own cluster"), ("median FVU", "default"), ("median FVU", "own cluster")]
    )
    comparison = pd.DataFrame(
        [[1, 0, 0.9, 0.8, 0.1, 0.2], [3, 4, 0.5, 0.4, 0.3, 0.6]], columns=columns
    ).astype(object)
    means = clu.weighted_means(comparison)
    assert means.table.loc["median r", "default"] == pytest.approx(0.6)  # (0.9 + 3 * 0.5) / 4
    assert means.table.loc["median FVU", "own cluster"] == pytest.approx(0.5)
    assert means.findings() == [
        "median r: default 0.600, own cluster 0.500",
        "median FVU: default 0.250, own cluster 0.500",
    ]


def test_bound_check_findings():
    assert ps.BoundCheck(2e-7).findings() == [
        "largest |error| minus bound over all heads and pairs of positions: < 1e-3 (at most "
        "float rounding)"
    ]
    failed = ps.BoundCheck(0.25)
    assert not failed.holds
    assert failed.findings()[0].endswith(": 0.25 (the bound fails)")


def test_check_rotary_bound_on_the_toy_model():
    model, _ = ps.rotary_toy_model(seed=0, n_ctx=32, d_vocab=50)
    fit = ps.factorise_attention(model, ps.random_texts(model, 2, seed=1))
    check = ps.check_rotary_bound(model, fit)
    assert check.holds  # the bound holds on a rotary model, up to float rounding
