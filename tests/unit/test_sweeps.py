"""Tests of chapter 9's sweeps: each function against an independent computation on small models
(the circuit rebuilt from scratch, the hooks, brute force over destinations, hand-made inputs)."""

from __future__ import annotations

import math
import pandas as pd
import pytest
import torch

from context_neurons import circuit as cc
from context_neurons import discovery as disc
from context_neurons import evaluation as ev
from context_neurons.sweeps import calibration_clusters as clu
from context_neurons import sweeps as sw
from context_neurons import taxonomy as tx
from context_neurons.checks import InputError
from context_neurons.models import load_tokenizer
from context_neurons.models.toy import exact_toy_model, make_small_model
from context_neurons.text.windows import DomainTexts

torch.set_grad_enabled(False)

HEADS = [0, 2]
DEST = 3
N_MIN = 4


@pytest.fixture(scope="module")
def small():
    model = make_small_model(seed=0, d_vocab=60, n_ctx=32)[0]
    gen = torch.Generator().manual_seed(1)
    calibration = torch.randint(0, model.cfg.d_vocab, (model.cfg.n_ctx,), generator=gen)
    circuit = cc.build_circuit(model, calibration, heads=HEADS, dest_token=DEST, n_min=N_MIN)
    texts = torch.randint(0, model.cfg.d_vocab, (2, 20), generator=gen)
    return model, circuit, calibration, texts


def close(a, b, rtol=1e-4):
    scale = float(b.abs().max().clamp(min=1e-12))
    return float((a - b).abs().max()) <= rtol * scale


# ------------------------------------------------------------------------------ destinations


def test_sweep_at_the_circuits_destination_is_the_circuit(small):
    model, circuit, _, _ = small
    again = sw.DestinationSweep(circuit, model).circuit(DEST)
    for name in ("log_content", "head_kernels", "kernel", "extended", "positional_part"):
        assert close(getattr(again, name), getattr(circuit, name)), name
    assert close(again.calibration.log_denominators, circuit.calibration.log_denominators)
    assert again.dest_token == DEST


@pytest.mark.parametrize("dest", [7, 11])
def test_sweep_equals_a_circuit_built_from_scratch(small, dest):
    model, circuit, calibration, _ = small
    swept = sw.DestinationSweep(circuit, model).circuit(dest)
    built = cc.build_circuit(model, calibration, heads=HEADS, dest_token=dest, n_min=N_MIN)
    for name in ("log_content", "head_kernels", "kernel", "extended", "positional_part"):
        assert close(getattr(swept, name), getattr(built, name)), name
    assert close(swept.calibration.log_dhat, built.calibration.log_dhat)
    assert not close(swept.log_content, circuit.log_content)  # the destination does matter


def test_mean_keys_of_a_circuit_with_other_reference_tokens_are_refused(small):
    model, _, calibration, _ = small
    other = cc.build_circuit(
        model,
        calibration,
        heads=HEADS,
        dest_token=DEST,
        n_min=N_MIN,
        reference_tokens=torch.arange(10),
    )
    with pytest.raises(InputError, match="reference_tokens"):
        sw.circuit_mean_keys(other, model)


def test_actual_destination_terms_with_the_fixed_destination_are_the_circuits(small):
    model, circuit, _, texts = small
    neurons = [1, 5, 9]
    fixed = torch.full_like(texts, DEST)
    terms = sw.actual_destination_terms(circuit, model, texts, neurons, destinations=fixed)
    expected = ev.approximator(circuit, model, neurons, "per_position").terms(texts)
    for name in expected:
        assert close(terms[name], expected[name]), name


def test_actual_destination_terms_by_brute_force(small):
    """At each position, the bag and positional part of the circuit built for the token there."""
    model, circuit, calibration, _ = small
    gen = torch.Generator().manual_seed(5)
    pool = torch.tensor([3, 8, 13, 21])
    text = pool[torch.randint(0, len(pool), (1, 16), generator=gen)]
    neurons = [0, 4]
    terms = sw.actual_destination_terms(circuit, model, text, neurons)
    for name in ("bag", "positional"):
        expected = torch.zeros_like(terms[name])
        for d in pool.tolist():
            built = cc.build_circuit(model, calibration, heads=HEADS, dest_token=d, n_min=N_MIN)
            own = ev.approximator(built, model, neurons, "per_position").terms(text)[name]
            where = text == d
            expected[where] = own[where]
        assert close(terms[name], expected), name


def test_actual_destination_refuses_texts_longer_than_the_calibration(small):
    model, circuit, _, _ = small
    short = clu.recalibrate(circuit, model, circuit.calibration.tokens[:10])
    with pytest.raises(InputError, match="calibration text"):
        sw.actual_destination_terms(short, model, torch.zeros(1, 12, dtype=torch.long), [0])


def test_compare_destination_rules_measures_both(small):
    model, circuit, _, texts = small
    rules = sw.compare_destination_rules(circuit, model, list(texts), [1, 5])
    table = rules.table()
    assert list(table.index) == ["fixed", "actual"]
    fixed = ev.evaluate(circuit, model, list(texts), [1, 5])
    assert math.isclose(table.loc["fixed", "median FVU"], fixed.median_fvu, rel_tol=1e-5)
    assert math.isclose(table.loc["fixed", "median r"], fixed.median_pearson, rel_tol=1e-5)
    assert not torch.allclose(rules.fvu["fixed"], rules.fvu["actual"])


def test_sweep_destinations_reference_row(small):
    model, circuit, _, texts = small
    table = pd.DataFrame(
        {
            "token": [DEST, 7, 11],
            "class": ["reference", "stop word", "keyword"],
            "id": [DEST, 7, 11],
        }
    )
    neurons = [1, 5]
    result = sw.sweep_destinations(
        circuit,
        model,
        sw.DestinationClasses(table),
        list(texts),
        neurons,
        k=3,
        theta=3.0,
        position=20,
    )
    ref = result.table.loc[DEST]
    assert ref["Jaccard"] == 1.0 and math.isclose(ref[f"cosine to {DEST!r}"], 1.0, rel_tol=1e-5)
    assert result.found[DEST] == disc.score_neurons(circuit, model, k=3).found(3.0)
    direct = ev.evaluate(circuit, model, list(texts), neurons)
    assert math.isclose(ref["median FVU"], direct.median_fvu, rel_tol=1e-5)
    assert math.isclose(ref["n_eff"], cc.effective_tokens(circuit.kernel[20, :21]), rel_tol=1e-5)
    assert (result.cosines.to_numpy() <= 1 + 1e-5).all()
    other = sw.DestinationSweep(circuit, model).circuit(7)
    assert result.found[7] == disc.score_neurons(other, model, k=3).found(3.0)


def test_destination_classes_from_counts(monkeypatch):
    tokenizer = load_tokenizer()
    model = make_small_model(seed=0, d_vocab=len(tokenizer), n_ctx=32)[0]
    model.tokenizer = tokenizer  # GPT-2's tokenizer on a tiny model of its vocabulary
    monkeypatch.setattr(sw.destinations, "STOP_RANKS", 3)  # where destination_classes reads it
    bos = tokenizer.bos_token_id

    def window(text):
        return torch.tensor([bos, *tokenizer.encode(text)])

    general = [
        window(
            " the the the the the of of of of and and and in in people people people "
            "water water government house house"
        )
    ]
    bible = [window(" thou thou thou thou thou thou the the unto unto unto unto unto of people")]
    code = [window(" return return return return return return self self self self self the")]
    domains = DomainTexts(general + bible + code, ["g", "b", "c"], ["general", "bible", "code"])
    classes = sw.destination_classes(model, general, domains, per_class=2)
    table = classes.table.set_index("token")
    assert classes.tokens[0] == " the" and table.loc[" the", "class"] == "reference"
    assert list(table.index[table["class"] == "stop word"]) == [" of", " and"]
    # beyond the three stop-word ranks (the, of, and), words of five letters or more
    assert list(table.index[table["class"] == "keyword"]) == [" people", " water"]
    assert list(table.index[table["class"] == "topic word"]) == [" thou", " return"]
    assert table.loc[" thou", "domain"] == "bible"
    assert table.loc[" the", "count"] == 5 and table.loc[" thou", "count"] == 0
    with pytest.raises(Exception, match="Too few"):
        sw.destination_classes(model, general, domains, per_class=3)


def test_sample_vocabulary_and_jaccard(small):
    model = small[0]
    quarter = sw.sample_vocabulary(model, 0.25, seed=0)
    assert torch.equal(quarter, sw.sample_vocabulary(model, 0.25, seed=0))
    assert 0 < int(quarter.sum()) < model.cfg.d_vocab
    assert torch.equal(sw.sample_vocabulary(model, 1.0), disc.scoring_vocabulary(model))
    assert sw.jaccard([1, 2, 3], [2, 3, 4]) == 0.5 and sw.jaccard([], []) == 1.0
    with pytest.raises(InputError):
        sw.sample_vocabulary(model, 0.0)


# --------------------------------------------------------------------- the closest head


def made_up_taxonomy() -> tx.HeadTaxonomy:
    """Four heads with chosen widths, spreads and self-preferences (n = 99: 100 keys)."""
    n, heads = 99, [0, 1, 2, 3]
    n_eff = torch.tensor([[40.0, 10.0, 80.0, 40.0]])
    sd = torch.tensor([[1.0, 1.0, 1.0, 3.0]])
    z = torch.tensor([[0.0, 0.0, 0.0, 8.0]])
    patterns = torch.full((1, 4, n + 1), 1.0 / (n + 1))
    shapes = {h: tx.classify_kernel(float(n_eff[0, h]), n + 1) for h in heads}
    groups = {g: [] for g in tx.GROUPS}
    for h in heads:
        groups[tx.assign_group(shapes[h], float(sd[0, h]), float(z[0, h]))].append(h)
    return tx.HeadTaxonomy(n, heads, [" the"], patterns, n_eff, sd, z, shapes, groups)


def test_contextual_distance_by_hand():
    taxonomy = made_up_taxonomy()
    table = sw.contextual_distance(taxonomy)
    assert list(table["group"]) == ["contextual", "detokenization", "miscellaneous", "duplicate"]
    expected = [0.0, math.log(32 / 10), math.log(80 / 50), math.log(3 / 1.5) + math.log(8 / 4)]
    assert table["distance"].tolist() == pytest.approx(expected)
    assert sw.closest_to_contextual(taxonomy) == 2


def test_contextual_distance_counts_the_previous_token_share():
    """A slowly decaying, content-blind head with a previous-token share of 0.6 is a
    detokenization head; its distance to the contextual group is log(0.6 / 0.4), and without the
    rule (v1 and v2's taxonomy) it is contextual at distance 0."""
    taxonomy = made_up_taxonomy()
    taxonomy.previous_share = torch.tensor([0.6, 0.0, 0.1, 0.2])
    taxonomy.groups = {g: [] for g in tx.GROUPS}
    for h in taxonomy.heads:
        group = tx.assign_group(taxonomy.shapes[h], float(taxonomy.content_sd[0, h]),
                                float(taxonomy.self_z[0, h]), float(taxonomy.previous_share[h]))
        taxonomy.groups[group].append(h)
    table = sw.contextual_distance(taxonomy)
    assert table.loc[0, "group"] == "detokenization"
    assert table.loc[0, "previous"] == pytest.approx(math.log(0.6 / 0.4))
    assert table.loc[1:, "previous"].tolist() == [0.0, 0.0, 0.0]
    assert sw.closest_to_contextual(taxonomy) == 0  # log 1.5 < log 1.6 (head 2's width)
    calls = taxonomy.closest_calls()  # a share of exactly 0 (head 1) does not break the log
    assert calls.loc["prev. share -> detokenization", "closest head"] == 0
    taxonomy.previous_token_rule = False
    assert sw.contextual_distance(taxonomy).loc[0, "previous"] == 0.0


def test_closest_head_needs_a_non_contextual_head():
    taxonomy = made_up_taxonomy()
    taxonomy.groups = {g: ([0, 1, 2, 3] if g == "contextual" else []) for g in tx.GROUPS}
    with pytest.raises(InputError):
        sw.closest_to_contextual(taxonomy)


def test_circuit_attention_tv_is_zero_where_the_circuit_is_exact():
    model, heads = exact_toy_model(seed=0)
    gen = torch.Generator().manual_seed(1)
    calibration = torch.randint(0, model.cfg.d_vocab, (model.cfg.n_ctx,), generator=gen)
    circuit = cc.build_circuit(model, calibration, heads=heads, dest_token=3, n_min=4)
    texts = torch.randint(0, model.cfg.d_vocab, (2, model.cfg.n_ctx), generator=gen)
    assert sw.circuit_attention_tv(circuit, model, texts).max() < 1e-5


def test_circuit_attention_tv_against_the_hook(small):
    model, circuit, _, texts = small
    tv = sw.circuit_attention_tv(circuit, model, texts)
    _, cache = model.run_with_cache(texts)
    pattern = cache["blocks.0.attn.hook_pattern"]
    b, n = 1, 15
    for column, head in enumerate(circuit.heads):
        weights = circuit.kernel[n, : n + 1] * torch.exp(
            circuit.log_content[column, texts[b, : n + 1]]
            - circuit.calibration.log_denominators[column, n]
        )
        by_hand = 0.5 * (pattern[b, head, n, : n + 1] - weights).abs().sum()
        assert math.isclose(float(tv[column, b, n]), float(by_hand), rel_tol=1e-4)
    # the weights are those the bag gives each token: their sum with the values is the bag
    n_pos = texts.shape[1]
    inv = circuit.inverse_denominators(n_pos, "per_position")
    weights = torch.einsum(
        "ni,hbi,hn->bhni", circuit.kernel[:n_pos, :n_pos], circuit.log_content.exp()[:, texts], inv
    )
    values = torch.einsum("bihe,hed->bhid", circuit.token_values[texts], circuit.w_o)
    bag = torch.einsum("bhni,bhid->bnd", weights, values)
    assert close(bag, circuit.bag(texts, denominators="per_position"))


# ------------------------------------------------------------------- clustered calibration


def test_recalibrate_equals_build_circuit_with_the_same_mean_keys(small):
    model, circuit, calibration, _ = small
    assert close(clu.recalibrate(circuit, model, calibration).extended, circuit.extended)
    gen = torch.Generator().manual_seed(9)
    other = torch.randint(0, model.cfg.d_vocab, (model.cfg.n_ctx,), generator=gen)
    mine = clu.recalibrate(circuit, model, other)
    built = cc.build_circuit(
        model, other, heads=HEADS, dest_token=DEST, n_min=N_MIN, reference_tokens=calibration[1:]
    )
    assert close(mine.extended, built.extended)
    assert close(mine.calibration.log_denominators, built.calibration.log_denominators)
    assert math.isclose(mine.ln2_scale, built.ln2_scale, rel_tol=1e-6)
    assert not close(mine.extended, circuit.extended)


def test_denominator_profiles_are_the_calibration_denominators(small):
    model, circuit, calibration, texts = small
    positions = clu.profile_positions(texts.shape[1], count=3, n_min=N_MIN)
    mean_keys = sw.circuit_mean_keys(circuit, model)
    profiles = clu.denominator_profiles(
        model, list(texts), HEADS, positions, DEST, mean_keys=mean_keys
    )
    assert profiles.shape == (2, len(HEADS), len(positions))
    for b, text in enumerate(texts):
        expected = cc.calibration_log_denominators(model, text, HEADS, mean_keys, DEST)
        assert torch.allclose(profiles[b], expected[:, positions], atol=1e-4)


def test_denominator_profiles_in_the_circuits_frame(small):
    """With the circuit's content weights the profiles are the circuit's own denominators of each
    text (the reference frame, :meth:`ContextualCircuit.text_log_denominators`), which differ
    from the destination frame's on this model."""
    model, circuit, _, texts = small
    positions = clu.profile_positions(texts.shape[1], count=3, n_min=N_MIN)
    mean_keys = sw.circuit_mean_keys(circuit, model)
    profiles = clu.denominator_profiles(model, list(texts), HEADS, positions, DEST,
                                        mean_keys=mean_keys, log_content=circuit.log_content)
    for b, text in enumerate(texts):
        expected = circuit.text_log_denominators(model, text)[:, positions]
        assert torch.allclose(profiles[b], expected, atol=1e-4)
    destination = clu.denominator_profiles(model, list(texts), HEADS, positions, DEST,
                                           mean_keys=mean_keys)
    assert not torch.allclose(profiles, destination, atol=1e-2)


def test_profile_positions():
    assert clu.profile_positions(1024, 6).tolist() == [100, 285, 469, 654, 838, 1023]
    with pytest.raises(InputError):
        clu.profile_positions(50)


def test_kmeans_finds_separated_blobs_and_is_a_fixed_point():
    gen = torch.Generator().manual_seed(0)
    centres = torch.tensor([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    x = torch.cat([c + 0.5 * torch.randn(7, 2, generator=gen) for c in centres])
    labels, found = clu.kmeans(x, 3)
    truth = torch.arange(3).repeat_interleave(7)
    assert all(len(set(labels[truth == c].tolist())) == 1 for c in range(3))
    assert len(set(labels.tolist())) == 3
    for c in range(3):  # each centre is the mean of its points, each point nearest its centre
        assert torch.allclose(found[c], x[labels == c].mean(0), atol=1e-5)
    assert torch.equal(torch.cdist(x, found).argmin(-1), labels)
    again, _ = clu.kmeans(x, 3)
    assert torch.equal(labels, again)
    with pytest.raises(InputError):
        clu.kmeans(x, 0)


def test_cluster_calibrations_never_evaluate_on_the_calibration_text():
    gen = torch.Generator().manual_seed(2)
    x = torch.cat([c + torch.randn(5, 3, generator=gen) for c in (0.0, 8.0, 16.0)])
    clusters = clu.cluster_calibrations(x, 3, exclude=[14])
    for c, i in clusters.calibration.items():
        members = (clusters.labels == c).nonzero().flatten().tolist()
        assert i in members and i not in clusters.evaluation[c]
        assert 14 not in clusters.evaluation[c]
        gaps = (x[members] - clusters.centres[c]).norm(dim=-1)
        assert i == members[int(gaps.argmin())]
        assert clusters.control[c] != i and clusters.control[c] in clusters.calibration.values()


def test_compare_calibrations_rows(small):
    model, circuit, _, _ = small
    gen = torch.Generator().manual_seed(4)
    windows = list(torch.randint(0, model.cfg.d_vocab, (6, model.cfg.n_ctx), generator=gen))
    clusters = clu.ClusterCalibration(
        labels=torch.tensor([0, 0, 0, 1, 1, 1]),
        centres=torch.zeros(2, 1),
        calibration={0: 0, 1: 3},
        evaluation={0: [1, 2], 1: [4, 5]},
        control={0: 3, 1: 0},
    )
    table = clu.compare_calibrations(circuit, model, windows, clusters, [1, 5])
    default = ev.evaluate(circuit, model, windows[1:3], [1, 5])
    assert math.isclose(table.loc[0, ("median FVU", "default")], default.median_fvu, rel_tol=1e-5)
    own = ev.evaluate(clu.recalibrate(circuit, model, windows[0]), model, windows[1:3], [1, 5])
    assert math.isclose(table.loc[0, ("median FVU", "own cluster")], own.median_fvu, rel_tol=1e-5)
    other = ev.evaluate(clu.recalibrate(circuit, model, windows[3]), model, windows[1:3], [1, 5])
    assert math.isclose(
        table.loc[0, ("median FVU", "other cluster")], other.median_fvu, rel_tol=1e-5
    )
    broken = clu.ClusterCalibration(
        clusters.labels, clusters.centres, {0: 0, 1: 3}, {0: [0, 1], 1: [4]}, {}
    )
    with pytest.raises(AssertionError, match="calibration text"):
        clu.compare_calibrations(circuit, model, windows, broken, [1, 5])


def test_small_clusters_are_merged_into_the_nearest():
    gen = torch.Generator().manual_seed(3)
    x = torch.cat(
        [
            torch.randn(6, 2, generator=gen),
            20 + torch.randn(6, 2, generator=gen),
            torch.tensor([[40.0, 40.0]]),
        ]
    )  # two blobs and one outlier
    labels = torch.tensor([2] * 6 + [0] * 6 + [1])  # the outlier alone in cluster 1
    merged, centres = clu.merge_small_clusters(x, labels, min_size=3)
    assert merged.tolist() == [0] * 6 + [1] * 7  # it joins the nearer blob; renumbered
    assert torch.allclose(centres[1], x[6:].mean(0), atol=1e-5)
    assert clu.merge_small_clusters(x, labels, min_size=100)[0].tolist() == [0] * 13
    clusters = clu.cluster_calibrations(x, 3, min_size=3)
    assert 12 not in clusters.calibration.values()
    assert all(int((clusters.labels == c).sum()) >= 3 for c in clusters.calibration)


def test_add_head_measures_both_circuits(small):
    model, circuit, calibration, texts = small
    plus = cc.build_circuit(model, calibration, heads=[0, 1, 2], dest_token=DEST, n_min=N_MIN)
    neurons, k, theta = [1, 5], 3, 3.0
    found = disc.score_neurons(circuit, model, k=k).found(theta)
    added = sw.add_head(circuit, model, 1, texts, list(texts), neurons, found, k=k, theta=theta,
                        plus=plus)
    assert added.plus is plus and set(added.tv) == {"2 heads", "3 heads"}
    tv = sw.circuit_attention_tv(plus, model, texts)[:, :, N_MIN:].flatten(1).median(1).values
    assert added.tv["3 heads"] == pytest.approx(dict(zip(plus.heads, tv.tolist())))
    table = added.table
    assert list(table.index) == ["2 contextual heads", "with head 1"]
    plus_found = disc.score_neurons(plus, model, k=k).found(theta)
    assert table["found (quarter vocabulary)"].tolist() == [len(found), len(plus_found)]
    assert table.loc["with head 1", "Jaccard with 2-head set"] == pytest.approx(
        sw.jaccard(plus_found, found))
    direct = ev.evaluate(plus, model, list(texts), neurons)
    assert table.loc["with head 1", "median FVU"] == pytest.approx(direct.median_fvu, rel=1e-5)
    assert table.loc["2 contextual heads", "median TV, old heads"] == pytest.approx(
        float(pd.Series(added.tv["2 heads"]).median()))
    assert added.finding() == (
        f"head 1's own median TV in the new circuit: {added.tv['3 heads'][1]:.3f}")
    with pytest.raises(InputError):
        sw.add_head(circuit, model, 3, texts, list(texts), neurons, found, k=k, plus=plus)
