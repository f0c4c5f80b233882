"""A neuron's own domain named from half the texts and checked on the other half, on hand-built
densities (no model)."""

from __future__ import annotations

import math
import pandas as pd
import pytest
import torch

from context_neurons import casestudies
from context_neurons.casestudies import TokenDensities
from context_neurons.checks import InputError
from context_neurons.discovery import NeuronScores
from context_neurons.own_domain import held_out_domains, split_halves
from context_neurons.text.windows import DomainTexts

DOMAINS = ("a", "b", "c")


def densities(columns: dict[int, list[float]], per_domain: int = 4, down: int | None = None):
    """Densities of neurons (keys) on ``per_domain`` texts of each of DOMAINS; ``columns[j]`` is
    neuron j's density on each text, in text order. ``down``: a neuron driven down (its density
    is on the down side, its up side is zero)."""
    domains = [d for d in DOMAINS for _ in range(per_domain)]
    texts = DomainTexts(
        [torch.tensor([0, 1])] * len(domains), [f"x:{d}{k}" for k, d in enumerate(domains)], domains
    )
    neurons = sorted(columns)
    values = torch.tensor([columns[j] for j in neurons], dtype=torch.float32).T
    is_down = torch.tensor([j == down for j in neurons])
    sign = torch.ones(max(neurons) + 1)
    if down is not None:
        sign[down] = -1.0
    return (
        TokenDensities(
            neurons=neurons,
            texts=texts,
            up=torch.where(is_down, 0.0, values),
            down=torch.where(is_down, values, 0.0),
            n_up=torch.full((len(neurons),), 10),
            n_down=torch.full((len(neurons),), 10),
            theta=6.0,
        ),
        NeuronScores(
            top=torch.zeros(len(sign)),
            median=torch.zeros(len(sign)),
            spread=torch.ones(len(sign)),
            sign=sign,
            k=1,
            vocabulary=torch.ones(2, dtype=torch.bool),
            extreme_tokens=torch.zeros(len(sign), 1, dtype=torch.long),
        ),
    )


#: Texts in order a0 a1 a2 a3 (naming, held out, naming, held out), then b and c alike.
CONFIRMED = [10, 10, 10, 10] + [1] * 8  # domain a on both halves
WEAK = [10, 1, 10, 1] + [1] * 8  # domain a on the naming half only
AT_RATIO = [10, 4, 10, 4] + [1, 2, 1, 2] * 2  # held out: 4 against 2, ratio exactly 2, gap 2
BELOW_RATIO = [10, 3.9, 10, 3.9] + [1, 2, 1, 2] * 2
AT_GAP = [10, 2, 10, 2] + [1, 1, 1, 1] * 2  # held out: 2 against 1, gap exactly 1, ratio 2
NONE = [1.0] * 12


def test_split_halves_alternate_within_each_domain():
    d, _ = densities({0: NONE})
    naming, held = split_halves(d.texts)
    assert naming == [0, 2, 4, 6, 8, 10] and held == [1, 3, 5, 7, 9, 11]
    odd, _ = densities({0: [1.0] * 9}, per_domain=3)
    assert split_halves(odd.texts) == ([0, 2, 3, 5, 6, 8], [1, 4, 7])
    one, _ = densities({0: [1.0] * 3}, per_domain=1)
    with pytest.raises(InputError, match="at least 2 texts"):
        split_halves(one.texts)


def test_held_out_confirmed_weak_and_no_domain():
    d, scores = densities({0: CONFIRMED, 1: WEAK, 2: NONE, 3: CONFIRMED}, down=3)
    table = held_out_domains(d, scores)
    assert list(table["domain"]) == ["a", "a", None, "a"]
    assert list(table["held-out"]) == ["confirmed", "weak", None, "confirmed"]
    assert table.loc[3, "side"] == "down"
    assert table.loc[1, "held-out density, domain"] == pytest.approx(1.0)
    assert table.loc[1, "held-out density, others"] == pytest.approx(1.0)
    assert table.loc[1, "held-out ratio"] == pytest.approx(1.0)
    assert math.isnan(table.loc[2, "held-out ratio"])
    # the name and its densities are domain_from_weights' of the naming half
    naming = casestudies.domain_from_weights(d.subset(split_halves(d.texts)[0]), scores)
    pd.testing.assert_frame_equal(table[naming.columns], naming)


def test_held_out_rule_boundary_counts_as_confirmed():
    d, scores = densities({0: AT_RATIO, 1: BELOW_RATIO, 2: AT_GAP})
    table = held_out_domains(d, scores)
    assert table.loc[0, "held-out ratio"] == casestudies.MIN_DENSITY_RATIO
    assert list(table["held-out"]) == ["confirmed", "weak", "confirmed"]
    assert casestudies.density_rule(4.0, 2.0) == (2.0, True)
    assert casestudies.density_rule(2.0, 0.0) == (math.inf, True)
    assert casestudies.density_rule(0.0, 0.0) == (0.0, False)
    assert casestudies.density_rule(1.5, 0.5) == (3.0, True)  # gap exactly 1
    assert casestudies.density_rule(1.4, 0.5)[1] is False  # gap below 1


def test_domain_check_findings_count_ranks_and_weak_names():
    """Chapter 5's findings on its own-domain table, computed in the package (issue 33)."""
    import pandas as pd

    from context_neurons.own_domain import DomainCheck

    table = pd.DataFrame({"own domain": ["bible", "code"], "held-out": ["confirmed", "weak"],
                          "rank of that domain": [1, 3], "its tokens there (count)": ["a(2)", ""]},
                         index=pd.Index([5, 9], name="neuron"))
    check = DomainCheck(table, carried=[5, 9, 11], no_domain=[11])
    assert check.findings() == [
        "2 of 3 neurons get a domain from their weights; on 1 of them it is also the domain that "
        "moves them most in the predicted direction",
        "the name holds on the held-out texts for 1 of them; weak (1): [9]",
        "no domain from the weights (1): [11]",
    ]
    assert list(check.listing.columns) == ["its tokens there (count)"]
    assert "its tokens there (count)" not in check.evidence.columns
    empty = DomainCheck(table.iloc[:0], carried=[11], no_domain=[11])
    assert empty.findings() == ["no domain from the weights (1): [11]"]
