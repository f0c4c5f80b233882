"""The head taxonomy: kernel widths, shape rules, and recovery of the planted groups."""

from __future__ import annotations

import math
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest
import torch

from context_neurons import taxonomy as tx
from context_neurons import taxonomy_findings as findings
from context_neurons.checks import InputError
from context_neurons.plotting.taxonomy import panel_range, plot_head_map, plot_kernel_shapes


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


def test_exponential_width_matches_the_closed_form():
    r = math.exp(-1 / 25.0)
    assert tx.exponential_width(25.0, 5000) == pytest.approx((1 + r) / (1 - r), rel=1e-9)
    assert tx.exponential_width(25.0, 5000) == pytest.approx(50.0, rel=0.01)  # ~ 2 w
    assert tx.exponential_width(1e9, 501) == pytest.approx(501, rel=1e-6)  # flat: capped
    with pytest.raises(ValueError, match="positive decay"):
        tx.exponential_width(0.0, 10)


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
    # Widths follow the planted kernels (not exponential: their own n_eff); ' the' and the
    # LayerNorm scales make the measured width differ from the planned one.
    for head in truth.head_groups["contextual"]:
        assert 0.6 < taxonomy.width(head) / truth.kernel_n_eff[head] < 1.6, head
    table = taxonomy.table()
    assert list(table.index) == list(range(12))
    assert (table.loc[[1, 5], "self z"] > tx.DUPLICATE_MIN_Z).all()


def fake_taxonomy(n_eff: list[float], content_sd: list[float], self_z: list[float], n: int = 99):
    """A taxonomy built from given numbers (no model), with the rules of classify_heads."""
    heads = list(range(len(n_eff)))
    shapes = {h: tx.classify_kernel(n_eff[h], n + 1) for h in heads}
    groups = {g: [] for g in tx.GROUPS}
    for h in heads:
        groups[tx.assign_group(shapes[h], content_sd[h], self_z[h])].append(h)
    patterns = torch.full((1, len(heads), n + 1), 1.0 / (n + 1))
    return tx.HeadTaxonomy(
        n,
        heads,
        [" the"],
        patterns,
        torch.tensor([n_eff]),
        torch.tensor([content_sd]),
        torch.tensor([self_z]),
        shapes,
        groups,
    )


def test_margins_closest_calls_and_windows():
    # n = 99: uniform above 50. Head 0 local just below 32, head 1 contextual, head 2 a duplicate
    # with a local kernel, head 3 slowly decaying but too content-sensitive, head 4 uniform.
    taxonomy = fake_taxonomy(
        [30.0, 40.0, 3.0, 45.0, 90.0], [0.5, 0.4, 1.0, 1.6, 0.3], [0.0, 1.0, 6.0, 0.5, 0.2]
    )
    assert taxonomy.groups == {
        "contextual": [1],
        "detokenization": [0],
        "duplicate": [2],
        "miscellaneous": [3, 4],
    }
    margins = taxonomy.margins()
    assert margins.loc[0, "width threshold"] == "local 32"
    assert margins.loc[0, "n_eff / threshold"] == pytest.approx(30 / 32)
    assert margins.loc[4, "width threshold"] == "uniform 50"
    assert margins.loc[2, "self z - duplicate min"] == pytest.approx(6.0 - tx.DUPLICATE_MIN_Z)
    assert margins.loc[3, "content sd / contextual max"] == pytest.approx(1.6 / 1.5)
    calls = taxonomy.closest_calls()
    assert calls.loc["kernel width -> shape", "closest head"] == 0  # 30 vs 32
    assert calls.loc["kernel width -> group", "heads it decides"] == 4  # not the duplicate
    assert calls.loc["content sd -> contextual", "closest head"] == 3  # 1.6 vs 1.5
    assert calls.loc["content sd -> contextual", "heads it decides"] == 2  # heads 1 and 3
    windows = taxonomy.width_windows()
    assert windows.loc["local", "head below"] == 0 and windows.loc["local", "head above"] == 1
    assert windows.loc["uniform", "n_eff below"] == 45.0
    assert windows.loc["uniform", "n_eff above"] == 90.0


def test_unknown_head_gives_a_clear_error(taxonomy):
    with pytest.raises(InputError, match="Head 12 was not classified"):
        taxonomy.width(12)
    with pytest.raises(InputError, match="Head 12 was not classified"):
        taxonomy.group_of(12)
    subset = fake_taxonomy([2.0, 60.0], [1.0, 0.3], [0.0, 0.0])
    with pytest.raises(InputError, match=r"heads: \[0, 1\]"):
        subset.width(5)


@pytest.mark.parametrize("n", [20, 100, 500])
def test_kernel_shape_figure_for_short_contexts_and_empty_groups(n):
    patterns = torch.softmax(torch.randn(3, n + 1, generator=torch.Generator().manual_seed(0)), -1)
    shapes = {0: "local", 1: "local", 2: "slowly decaying"}  # no uniform head
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the book builds with warnings as errors
        figure = plot_kernel_shapes(patterns, [0, 1, 2], shapes)
    slow, local, uniform = figure.axes
    assert len(local.lines) == 2 and len(slow.lines) == 1 and not uniform.lines
    assert len(slow.lines[0].get_xdata()) == panel_range(patterns[[2]]) + 1
    assert "no head" in uniform.texts[0].get_text()
    plt.close(figure)


def test_head_map_draws_all_three_thresholds():
    figure = plot_head_map(
        torch.tensor([2.0, 60.0, 400.0]),
        torch.tensor([0.0, 0.0, 6.0]),
        [0, 1, 2],
        {"detokenization": [0], "contextual": [1], "duplicate": [2]},
        local_max=32.0,
        duplicate_min=4.0,
        uniform_min=250.5,
    )
    (ax,) = figure.axes
    vertical = sorted(
        float(line.get_xdata()[0])
        for line in ax.lines
        if line.get_xdata()[0] == line.get_xdata()[1]
    )
    assert vertical == [32.0, 250.5]
    plt.close(figure)


def test_patterns_depend_on_destination_within_bounds(taxonomy):
    # The planted kernels change with the destination token (its LayerNorm scale), as GPT-2's do.
    relative = taxonomy.n_eff / taxonomy.n_eff[0]
    assert 0.05 < (relative - 1).abs().max() < 0.6
    assert taxonomy.destination_table().shape == (len(tx.DESTINATIONS), 12)


def test_bad_head_or_position_gives_clear_errors(planted):
    with pytest.raises(InputError, match="Head 12 out of range"):
        tx.classify_heads(planted.model, heads=[12])
    with pytest.raises(InputError, match="Position 1024 out of range"):
        tx.layer0_patterns(planted.model, n=1024)
    with pytest.raises(InputError, match="Position -1 out of range"):
        tx.content_statistics(planted.model, n=-1)
    with pytest.raises(InputError, match="not one"):
        tx.layer0_patterns(planted.model, destinations=(" antidisestablishmentarianism",))


def test_main_job_rows(planted):
    from context_neurons.reproduce.pipeline import taxonomy_rows

    rows = {r.key: r for r in taxonomy_rows(tx.classify_heads(planted.model), planted.truth)}
    assert rows["contextual_heads"].value == [0, 2, 6, 8, 9, 10] == rows["contextual_heads"].truth
    assert rows["head_groups"].value["duplicate"] == [1, 5]
    assert set(rows["n_eff"].value) == set(range(12))
    assert rows["n_eff"].value[3] < 2 < 40 < rows["n_eff"].value[0] < 150


def test_kernel_panels_reach_the_widest_kernel():
    """Figure 2's panels reach back as far as their widest kernel needs (a local kernel of decay
    length 15 was cut at 30 tokens once)."""
    from context_neurons.plotting.taxonomy import MIN_PANEL_RANGE, panel_range

    n = 500
    distance = torch.arange(n + 1, dtype=torch.float64).flip(0)
    rows = [torch.exp(-distance / w) for w in (0.6, 15.0)]
    patterns = torch.stack([r / r.sum() for r in rows])
    reach = panel_range(patterns)
    assert float(patterns[1].flip(0)[: reach + 1].sum()) >= 0.99
    assert reach < 150  # not the whole context
    assert panel_range(patterns[:1]) == MIN_PANEL_RANGE
    figure = plot_kernel_shapes(patterns, [3, 5], {3: "local", 5: "local"}, title="a model")
    assert figure.axes[1].lines[1].get_xdata()[-1] == reach
    assert figure._suptitle.get_text() == "a model"
    plt.close(figure)


def test_single_tokens_and_the_rules_table(planted):
    kept = tx.single_tokens(planted.model, [" the", " xqzzyv", " war"])
    assert kept == [" the", " war"]
    rules = tx.threshold_rules(500)
    assert list(rules.index) == ["local kernel", "previous-token head", "uniform kernel",
                                 "duplicate head", "contextual head"]
    assert "250.5" in rules.loc["uniform kernel", "threshold"]
    assert rules["why it transfers"].str.len().min() > 40


def test_a_previous_token_head_is_a_detokenization_head_whatever_its_kernel():
    share = tx.PREVIOUS_TOKEN_MIN
    assert tx.assign_group("slowly decaying", 0.3, 0.0, share) == "detokenization"
    assert tx.assign_group("uniform", 0.3, 0.0, share) == "detokenization"
    assert tx.assign_group("slowly decaying", 0.3, 0.0, share - 1e-6) == "contextual"
    # the duplicate test still comes first
    assert tx.assign_group("slowly decaying", 0.3, tx.DUPLICATE_MIN_Z, 0.9) == "duplicate"


def test_previous_token_share_is_the_hooked_pattern(planted):
    """The share from the weights equals the mean of blocks.0.attn.hook_pattern[n, n-1]."""
    import torch

    from context_neurons.hooks import run_until
    from context_neurons.text.windows import calibration_tokens

    model = planted.model
    tokens = calibration_tokens(model.tokenizer, n_ctx=model.cfg.n_ctx)
    name = "blocks.0.attn.hook_pattern"
    pattern = run_until(model, tokens[None], name)[name][0]  # [head, query, key]
    n = torch.arange(tx.PREVIOUS_SHARE_START, len(tokens))
    expected = pattern[:, n, n - 1].double().mean(-1)
    share = tx.previous_token_share(model, tokens)
    torch.testing.assert_close(share.double(), expected.cpu(), atol=1e-5, rtol=0)
    taxonomy = tx.classify_heads(model)
    torch.testing.assert_close(taxonomy.previous_share, share)
    # the planted previous-token heads are local and above the share threshold; no other head is
    high = {h for h in taxonomy.heads if float(share[h]) >= tx.PREVIOUS_TOKEN_MIN}
    assert high and high <= set(taxonomy.groups["detokenization"])


def test_the_previous_token_rule_moves_a_slowly_decaying_head(planted, monkeypatch):
    """With a head's share forced above the threshold, the rule moves it out of the contextual
    group; without the rule (v1 and v2's taxonomy) it stays."""
    import torch

    model = planted.model
    before = tx.classify_heads(model)
    head = before.groups["contextual"][0]
    forced = before.previous_share.clone()
    forced[head] = 0.9
    monkeypatch.setattr(tx, "previous_token_share", lambda *args, **kwargs: forced)
    after = tx.classify_heads(model)
    assert head in after.groups["detokenization"] and head not in after.groups["contextual"]
    unchanged = tx.classify_heads(model, previous_token_rule=False)
    assert unchanged.groups == before.groups
    assert torch.equal(unchanged.previous_share, forced)
    calls = after.closest_calls()
    assert calls.loc["prev. share -> detokenization", "heads it decides"] > 0
    assert after.margins().loc[head, "prev. share / 0.4"] > 1


# ---- chapter 2's findings, computed in the package (issue 33) ----------------------------------


def shared_taxonomy(n_eff, content_sd, self_z, share, n: int = 99) -> tx.HeadTaxonomy:
    """:func:`fake_taxonomy` with a previous-token share per head, grouped with the rule."""
    heads = list(range(len(n_eff)))
    shapes = {h: tx.classify_kernel(n_eff[h], n + 1) for h in heads}
    previous = torch.tensor(share)
    groups = tx.assign_groups(heads, shapes, torch.tensor([content_sd]), torch.tensor([self_z]),
                              previous, True)
    return tx.HeadTaxonomy(n, heads, [" the"], torch.full((1, len(heads), n + 1), 1 / (n + 1)),
                           torch.tensor([n_eff], dtype=torch.float64), torch.tensor([content_sd]),
                           torch.tensor([self_z]), shapes, groups, previous, True)


def test_width_table_adds_the_planted_kernels():
    from types import SimpleNamespace

    taxonomy = shared_taxonomy([30.0, 40.0], [0.5, 0.4], [0.0, 1.0], [0.1, 0.2])
    plain = findings.width_table(taxonomy)
    assert list(plain.columns) == ["n_eff", "mean distance", "kernel", "prev. share"]
    recorded = SimpleNamespace(kernel_n_eff={0: 31.0, 1: 44.0},
                               kernel_shapes={0: "local", 1: "slowly decaying"})
    widths = findings.width_table(taxonomy, recorded)
    assert widths["planted n_eff"].tolist() == [31.0, 44.0]
    assert widths["planted shape"].tolist() == ["local", "slowly decaying"]
    decays = SimpleNamespace(kernel_n_eff={}, kernel_widths={0: 5.0, 1: 20.0},
                             kernel_shapes={0: "local", 1: "slowly decaying"})
    widths = findings.width_table(taxonomy, decays)
    assert widths["planted w"].tolist() == [5.0, 20.0]
    assert widths.loc[1, "planted n_eff"] == pytest.approx(tx.exponential_width(20.0, 100))


def test_rule_effects_say_why_and_what_the_previous_token_rule_moved():
    # head 0 contextual but for its share of 0.6; head 1 contextual; head 2 uniform; head 3 too
    # content-sensitive
    taxonomy = shared_taxonomy([40.0, 45.0, 90.0, 35.0], [0.5, 0.4, 0.3, 1.6],
                               [0.0, 1.0, 0.5, 0.2], [0.6, 0.1, 0.0, 0.2])
    effects = findings.rule_effects(taxonomy, taxonomy.with_rule(False))
    assert effects.findings() == [
        "head 2 is miscellaneous: uniform kernel",
        "head 3 is miscellaneous: content sd 1.60 > 1.5",
        "detokenization heads by the previous-token share alone (kernel not local): [0]",
        "groups without the previous-token rule: differ: {'contextual': [0, 1], "
        "'detokenization': []}",
    ]
    local = shared_taxonomy([3.0, 4.0], [0.5, 0.4], [0.0, 1.0], [0.6, 0.1])
    lines = findings.rule_effects(local, local.with_rule(False)).findings()
    assert lines[0] == "no head is miscellaneous"
    assert lines[1].endswith("(kernel not local): none")
    assert lines[2] == "groups without the previous-token rule: the same, group for group"
    assert lines[3] == findings.NO_CONTEXTUAL_HEAD


def test_rule_room_reads_the_closest_calls_and_windows():
    taxonomy = fake_taxonomy(
        [30.0, 40.0, 3.0, 45.0, 90.0], [0.5, 0.4, 1.0, 1.6, 0.3], [0.0, 1.0, 6.0, 0.5, 0.2]
    )
    room = findings.rule_room(taxonomy)
    assert (room.head, room.threshold, room.group) == (0, "local 32", "detokenization")
    assert room.margin == pytest.approx(30 / 32) and room.n_eff == pytest.approx(30.0)
    assert room.closest_call() == (
        "closest call on the width: head 0, n_eff 30.0, 0.94 x the local 32 threshold; its "
        "group (detokenization) depends on it")
    assert room.windows.equals(taxonomy.width_windows())
    assert room.findings() == [
        "largest content sd of a slowly decaying head: 1.60 nats, 0.9 x below the threshold 1.5",
        "the local threshold 32 lies 7% above the widest narrower kernel and 25% below the "
        "narrowest wider one",
    ]
    wide = fake_taxonomy([60.0, 70.0], [0.5, 0.4], [0.0, 6.0])  # uniform, duplicate closest
    room = findings.rule_room(wide)
    assert room.largest_sd is None and room.group == "miscellaneous"
    assert room.findings() == ["every head lies on one side of the local threshold 32"]
    duplicate = fake_taxonomy([40.0, 31.0], [0.5, 0.4], [0.0, 6.0])
    assert findings.rule_room(duplicate).closest_call().endswith(
        "does not depend on it (the duplicate test comes first)")


def test_compare_with_known_on_gpt2_the_planted_model_and_another():
    from types import SimpleNamespace

    taxonomy = fake_taxonomy(
        [30.0, 40.0, 3.0, 45.0, 90.0], [0.5, 0.4, 1.0, 1.6, 0.3], [0.0, 1.0, 6.0, 0.5, 0.2]
    )
    same = dict(taxonomy.groups)
    known = findings.compare_with_known(taxonomy, same, gpt2=True)
    assert known.caption == "computed groups and the paper's" and known.indent == "  "
    assert known.table["agrees with the paper"].all()
    assert known.findings("GPT-2 Small") == ["The computed groups are the paper's, group for group."]
    other = {**same, "contextual": [1, 3], "miscellaneous": [4]}
    known = findings.compare_with_known(taxonomy, other, gpt2=True)
    assert known.differ == ["contextual", "miscellaneous"] and known.indent == "!!! "
    [alarm] = known.findings("GPT-2 Small")
    assert alarm.startswith("!!! THE COMPUTED GROUPS DIFFER FROM THE PAPER'S for: contextual, "
                            "miscellaneous. Computed contextual heads [1], the paper's [1, 3].")
    truth = SimpleNamespace(head_groups=same, kernel_shapes=dict(taxonomy.shapes))
    known = findings.compare_with_known(taxonomy, other, truth=truth)
    assert known.caption == "computed groups, the paper's and the planted ones"
    assert list(known.table.columns) == ["computed", "GPT-2 Small (paper)", "planted truth",
                                         "agrees with the planted truth (by construction)"]
    assert known.findings("m")[0] == (
        "kernel shapes agree with the planted shapes (by construction): True")
    known = findings.compare_with_known(taxonomy, other)
    assert list(known.table.columns) == ["computed", "GPT-2 Small (paper)"]
    assert known.findings("trained model") == [
        "The last column is GPT-2 Small's taxonomy in the paper, for reference only: the trained "
        "model is another model, whose groups nobody wrote down."]
