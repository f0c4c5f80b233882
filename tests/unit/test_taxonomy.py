"""The head taxonomy: kernel widths, shape rules, and recovery of the planted groups."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from context_neurons import taxonomy as tx
from context_neurons.decomposition import IndexError_


@pytest.fixture(scope="module")
def taxonomy(planted):
    return tx.classify_heads(planted.model)


def test_kernel_width_of_known_kernels():
    n = 99
    uniform = torch.full((n + 1,), 1.0 / (n + 1))
    one_hot = torch.zeros(n + 1)
    one_hot[-1] = 1.0
    r = 0.9  # exponential kernel r^(n-i): n_eff -> (1 + r) / (1 - r) for a long context
    exponential = r ** torch.arange(2000, dtype=torch.float64).flip(0)
    exponential = exponential / exponential.sum()
    widths = tx.kernel_width(torch.stack([uniform, one_hot]))
    assert widths.tolist() == pytest.approx([n + 1, 1.0])
    assert float(tx.kernel_width(exponential)) == pytest.approx((1 + r) / (1 - r), rel=1e-6)
    assert float(tx.mean_distance(one_hot)) == 0.0
    assert float(tx.mean_distance(exponential)) == pytest.approx(r / (1 - r), rel=1e-6)


def test_kernel_shape_rules():
    assert tx.classify_kernel(1.5, 501) == "local"
    assert tx.classify_kernel(tx.LOCAL_MAX_N_EFF + 1, 501) == "slowly decaying"
    assert tx.classify_kernel(100.0, 501) == "slowly decaying"
    assert tx.classify_kernel(0.9 * 501, 501) == "uniform"


def test_group_rules():
    assert tx.assign_group("uniform", 1.0, tx.DUPLICATE_MIN_Z + 1) == "duplicate"
    assert tx.assign_group("local", 1.0, 0.0) == "detokenization"
    assert tx.assign_group("slowly decaying", 0.3, 0.0) == "contextual"
    too_sharp = tx.CONTEXTUAL_MAX_CONTENT_SD + 1
    assert tx.assign_group("slowly decaying", too_sharp, 0.0) == "miscellaneous"
    assert tx.assign_group("uniform", 0.3, 0.0) == "miscellaneous"


def test_classification_recovers_planted_groups_and_shapes(planted, taxonomy):
    truth = planted.truth
    assert {g: sorted(h) for g, h in taxonomy.groups.items()} == {
        g: sorted(truth.head_groups[g]) for g in tx.GROUPS
    }
    assert taxonomy.shapes == truth.kernel_shapes
    assert tx.compare_groups(taxonomy.groups, truth.head_groups)["agree"].all()
    # Widths follow the planted decay lengths: n_eff ~ 2 * width for exponential kernels.
    for head in truth.head_groups["contextual"]:
        assert taxonomy.width(head) == pytest.approx(2 * truth.kernel_widths[head], rel=0.15)
    table = taxonomy.table()
    assert list(table.index) == list(range(12))
    assert (table.loc[[1, 5], "self z"] > tx.DUPLICATE_MIN_Z).all()


def test_patterns_depend_little_on_destination(taxonomy):
    relative = taxonomy.n_eff / taxonomy.n_eff[0]
    assert (relative - 1).abs().max() < 0.1
    assert taxonomy.destination_table().shape == (len(tx.DESTINATIONS), 12)


def test_bad_head_or_position_gives_clear_errors(planted):
    with pytest.raises(IndexError_, match="Unknown head"):
        tx.classify_heads(planted.model, heads=[12])
    with pytest.raises(IndexError_, match="Position 1024 out of range"):
        tx.layer0_patterns(planted.model, n=1024)
    with pytest.raises(IndexError_, match="Position -1 out of range"):
        tx.content_statistics(planted.model, n=-1)
    with pytest.raises(IndexError_, match="not one"):
        tx.layer0_patterns(planted.model, destinations=(" antidisestablishmentarianism",))


def test_reproduce_section_rows(planted):
    rows = {r.key: r for r in tx.reproduce_section(SimpleNamespace(model=planted.model,
                                                                    loaded=planted))}
    assert rows["contextual_heads"].value == [0, 2, 6, 8, 9, 10] == rows["contextual_heads"].truth
    assert rows["head_groups"].value["duplicate"] == [1, 5]
    assert set(rows["n_eff"].value) == set(range(12))
    assert rows["n_eff"].value[3] < 2 < 40 < rows["n_eff"].value[0] < 60
