"""The findings of chapters 1 to 4 that the chapters print, on small cases computed by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from context_neurons import circuit as cc
from context_neurons import decomposition as dec
from context_neurons import stability as st
from context_neurons import taxonomy_findings as findings
from context_neurons.taxonomy import HeadTaxonomy


def test_content_spread_is_each_heads_std_over_the_vocabulary(small_model):
    groups = ["contextual", "detokenization", "duplicate", "miscellaneous"]
    spreads = dec.content_spread(small_model, 5, groups, dest_token=3)
    assert list(spreads.index) == [0, 1, 2, 3] and spreads.index.name == "head"
    assert list(spreads["group"]) == groups
    for head in range(4):
        log_c = dec.content_log_weights(small_model, n=5, dest_token=3, heads=[head])[0]
        assert spreads.loc[head, "std of log c"] == pytest.approx(float(log_c.std()), rel=1e-5)


def test_tv_summary_by_hand():
    tv = torch.tensor([[0.0, 0.1, 0.2, 0.3, 0.4, 0.5], [0.6, 0.6, 0.6, 0.6, 0.6, 0.6]])
    summary = dec.tv_summary(tv, [7, 2])
    assert list(summary.table.index) == [7, 2]
    row = summary.table.loc[7]
    assert row["median"] == pytest.approx(0.2)  # the lower of the two middle values
    assert row["90th percentile"] == pytest.approx(0.45)
    assert row["max"] == pytest.approx(0.5)
    assert row["median, first half"] == pytest.approx(0.1)  # positions 1 and 2
    assert row["median, second half"] == pytest.approx(0.4)  # positions 3 to 5
    assert summary.median == pytest.approx(0.5)  # the lower middle of the twelve values
    assert summary.finding(0.05) == (
        "median over heads and positions: 0.500   (paper, GPT-2 Small: ~0.05)")


def test_scale_range_findings_and_quantiles(small_model):
    assert dec.ScaleRange(512, 0.15, 0.2).findings((0.15, 0.175)) == [
        "LN1 scale 1/sigma over the vocabulary at n = 512: 5%-95% range 0.150 to 0.200 "
        "(relative width 0.25)",
        "the blog's comparison (GPT-2 Small): 0.15 to 0.175 (relative width 0.14)",
    ]
    found = dec.ln1_scale_range(small_model, 4)
    vocabulary = torch.arange(small_model.cfg.d_vocab)
    scale = dec.ln1_inverse_scale(small_model, vocabulary, torch.tensor([4])).double()
    assert found.n == 4
    assert found.low == pytest.approx(float(torch.quantile(scale.flatten(), 0.05)))
    assert found.high == pytest.approx(float(torch.quantile(scale.flatten(), 0.95)))
    assert found.low < found.high


def hand_taxonomy(shapes: dict[int, str]) -> HeadTaxonomy:
    """Two heads at n = 99 and two destination tokens, with widths set by hand."""
    n_eff = torch.tensor([[2.0, 40.0], [3.0, 50.0]])  # [dest, head]
    zeros = torch.zeros(2, 2)
    return HeadTaxonomy(n=99, heads=[0, 1], destinations=[" the", " a"],
                        patterns=torch.zeros(2, 2, 100), n_eff=n_eff, content_sd=zeros,
                        self_z=zeros, shapes=shapes)


def test_destination_shapes_by_hand():
    shapes = findings.destination_shapes(hand_taxonomy({0: "local", 1: "slowly decaying"}))
    assert list(shapes.table.columns) == ["head 0", "head 1"]
    assert shapes.spread == pytest.approx(0.5)  # head 0: 3 / 2 - 1; head 1: 50 / 40 - 1
    assert shapes.same_shapes
    assert shapes.findings() == [
        "largest relative change of a head's width across these tokens: 50.0%",
        "every head keeps its kernel shape for every destination token: the taxonomy is a "
        "property of the head",
    ]
    moved = findings.destination_shapes(hand_taxonomy({0: "local", 1: "uniform"}))
    assert not moved.same_shapes
    assert moved.findings()[1].startswith("some head changes kernel shape")


def test_group_ranges_by_hand():
    table = pd.DataFrame(
        {
            "group": ["contextual", "detokenization", "contextual"],
            "n_eff random": [50.0, 2.0, 70.0],
            "random share": [0.9, 0.2, 0.95],
            "sigma/mu": [0.1, 1.0, 0.3],
            "CV predicted": [0.01, 0.5, 0.04],
            "CV texts": [0.02, 0.9, 0.04],
            "CV i.i.d.": [0.01, 0.5, 0.04],
            "CV texts se": [0.002, 0.2, 0.01],
        },
        index=pd.Index([3, 5, 8], name="head"),
    )
    ranges = st.group_ranges(table)
    assert list(ranges.table.index) == ["contextual", "detokenization"]
    assert ranges.table.loc["contextual", "sigma/mu"] == "0.100 .. 0.300"
    assert ranges.table.loc["detokenization", "n_eff random"] == "2.000 .. 2.000"
    assert ranges.excess == [3]  # head 3: 0.01 above, 5 se; head 5: 0.4 above, 2 se
    assert ranges.findings() == [
        "heads whose CV on texts exceeds the i.i.d. CV by more than 3 standard errors: [3]"]


def test_group_ranges_excess_needs_more_than_three_standard_errors():
    ranged = {column: [1.0, 1.0] for column in st.concentration.RANGED}
    table = pd.DataFrame({"group": ["contextual"] * 2, **ranged, "CV texts": [0.5, 0.5],
                          "CV i.i.d.": [0.1, 0.1], "CV texts se": [0.1, 0.2]}, index=[1, 2])
    assert st.group_ranges(table).excess == [1]


def test_stop_words_by_hand():
    one = torch.zeros(1)
    study = st.DenominatorStudy(
        n=1, heads=[0], kernel=torch.ones(1, 2) / 2, token_ids=torch.tensor([5, 6, 7, 8]),
        probs=torch.tensor([0.1, 0.4, 0.3, 0.2]), log_c=torch.zeros(1, 4), log_c_bos=one,
        log_c_dest=one, log_mu=one, ratio=torch.ones(3, 1), labels=["a", "b", "c"],
    )
    stops = st.stop_words(study, 2)
    assert stops.ids.tolist() == [6, 7]
    assert stops.mass == pytest.approx(0.7)
    assert stops.finding() == "stop words: the 2 most frequent tokens, 70% of the texts' tokens"
    assert stops.planted_finding([7, 9]).startswith(
        "on the planted model, 1 of these 2 are in the list that planted the preference")


def test_denominator_table_by_hand():
    log_denominators = torch.zeros(2, 120)
    log_denominators[0, 10] = math.log(4.0)
    log_denominators[1, 10] = 1.0
    log_denominators[1, 100::2] = 2.0  # n >= 100: ten 0s and ten 2s
    calibration = cc.Calibration(
        name="custom", tokens=torch.zeros(120, dtype=torch.long),
        log_denominators=log_denominators, n_min=100, log_dhat=torch.tensor([0.0, 1.0]),
        ln2_inverse_scales=torch.ones(120), ln2_scale=1.0,
    )
    table = cc.denominator_table(calibration, [4, 9])
    assert list(table.index) == [4, 9] and table.index.name == "head"
    assert table["Dhat_h"].tolist() == pytest.approx([1.0, math.e])
    assert table["spread of log D_h(n), n >= 100"].tolist() == pytest.approx(
        [0.0, math.sqrt(20 / 19)])
    assert table["D_h(10) / Dhat_h"].tolist() == pytest.approx([4.0, 1.0])
