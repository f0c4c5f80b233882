"""The paper's claim in its own terms (protocol discovery-verdict-gpt2's ``paper_claim``, issue
52): precision, base rate, enrichment and recall on small arrays where they are known; each
registered label where its rule holds (and only there); the count-matched set's ties; the
result's JSON round trip; the model identity (a stand-in is a plumbing check, never GPT-2's
result) and the replication words."""

from __future__ import annotations

import numpy as np
import pytest

from context_neurons import config as settings
from context_neurons.verdict.gpt2_protocol import load_protocol_gpt2
from context_neurons.verdict.gpt2_result import PLUMBING, PRIMARY, REPLICATION, model_identity
from context_neurons.verdict.gpt2_result import paper_heads
from context_neurons.verdict.paper_claim import (
    ClaimLabel,
    PaperClaim,
    count_matched,
    enrichment_label,
    paper_claim,
    set_precision,
)

RULES = load_protocol_gpt2().paper_claim


def _draws(d: int, n: int, seed: int = 0) -> np.ndarray:
    return np.random.Generator(np.random.PCG64(seed)).integers(0, d, size=(n, d))


def test_precision_base_rate_enrichment_recall_at_the_point():
    truth = np.zeros(100, dtype=bool)
    truth[:10] = True
    selected = np.zeros(100, dtype=bool)
    selected[5:25] = True  # 5 of 20 in the truth
    draws = _draws(100, 50)
    out = set_precision(selected, truth, np.tile(truth, (50, 1)), draws, 0.95, 3.0)
    assert out.n_selected == 20
    assert out.precision == pytest.approx(0.25)
    assert out.base_rate == pytest.approx(0.1)
    assert out.enrichment == pytest.approx(2.5)
    assert out.recall == pytest.approx(0.5)
    low, high = out.enrichment_ci95
    assert low <= high


@pytest.mark.parametrize("point, interval, label", [
    (3.5, [1.2, 6.0], ClaimLabel.FINDS_CONTEXT_NEURONS),
    (2.0, [1.2, 3.0], ClaimLabel.WEAKLY_ENRICHED),
    (1.1, [0.8, 1.5], ClaimLabel.NO_ENRICHMENT_SHOWN),
    (0.5, [0.2, 0.9], ClaimLabel.DEPLETED),
    (3.5, [1.0, 6.0], ClaimLabel.NO_ENRICHMENT_SHOWN),  # the lower bound must exceed 1
])
def test_enrichment_labels(point, interval, label):
    assert enrichment_label(point, interval, RULES.precision_over_base_at_least) == label


def test_count_matched_breaks_ties_by_index():
    top = np.array([1.0, 5.0, 5.0, 2.0, 5.0])
    assert count_matched(top, 2).tolist() == [False, True, True, False, False]


def _claim(top: np.ndarray, truth: np.ndarray, testable: bool = True) -> PaperClaim:
    draws = _draws(len(top), 200)
    return paper_claim(top, truth, np.tile(truth, (200, 1)), draws, RULES, 0.95, testable)


def test_threshold_that_finds_every_neuron_separates_nothing():
    d = 400
    truth = np.zeros(d, dtype=bool)
    truth[:40] = True
    top = np.full(d, RULES.theta + 1.0)
    top[:40] += 10.0  # the count-matched 100 hold every truth neuron
    claim = _claim(top, truth)
    assert claim.label == ClaimLabel.SEPARATES_NOTHING
    assert claim.at_theta.label is None and claim.answer_at_count
    assert claim.at_theta.precision == pytest.approx(claim.at_theta.base_rate)
    assert claim.count_matched.enrichment == pytest.approx(0.4 / 0.1)
    assert claim.answer == ClaimLabel.FINDS_CONTEXT_NEURONS
    assert "separates nothing" in claim.sentence() and "not at its threshold" in claim.sentence()
    assert PaperClaim.from_json(claim.to_json()).to_json() == claim.to_json()


def test_threshold_finding_nothing_and_not_testable():
    d = 300
    truth = np.zeros(d, dtype=bool)
    truth[:30] = True
    claim = _claim(np.zeros(d), truth)
    assert claim.label == ClaimLabel.FINDS_NOTHING and claim.answer_at_count
    claim = _claim(np.zeros(d), truth, testable=False)
    assert claim.label == ClaimLabel.NOT_TESTABLE and claim.count_matched.label is None


def test_depleted_set_at_theta():
    d = 1000
    truth = np.zeros(d, dtype=bool)
    truth[:200] = True
    top = np.zeros(d)
    top[500:700] = RULES.theta  # 200 found, none in the truth
    claim = _claim(top, truth)
    assert claim.label == ClaimLabel.DEPLETED == claim.answer and not claim.answer_at_count
    assert [p.theta for p in claim.sweep] == list(RULES.thetas)
    assert claim.sweep[[p.theta for p in claim.sweep].index(RULES.theta)].n_found == 200


def test_identity_is_the_requested_name_and_a_stand_in_is_a_plumbing_check(monkeypatch):
    p = load_protocol_gpt2()
    monkeypatch.delenv(settings.GPT2_WEIGHTS.name, raising=False)
    assert model_identity("gpt2", "Hugging Face hub 'gpt2'", p).role == PRIMARY
    assert model_identity("gpt2-xl", "hub", p).role == REPLICATION
    assert model_identity("trained", "seed 0", p).role == PLUMBING
    monkeypatch.setenv(settings.GPT2_WEIGHTS.name, "/tmp/gpt2-shaped")
    standin = model_identity("gpt2", "local directory /tmp/gpt2-shaped", p)
    assert standin.role == PLUMBING and not standin.is_gpt2_result
    assert standin.label.startswith("gpt2 (plumbing check: ")


def test_paper_heads_comparison():
    same = paper_heads((0, 2, 6, 8, 9, 10), (0, 2, 6, 8, 9, 10))
    assert same.equal and "equals" in same.words()
    other = paper_heads((0, 3), (0, 2, 6, 8, 9, 10))
    assert not other.equal and other.only_context_set == (3,)
    assert other.only_paper == (2, 6, 8, 9, 10)
