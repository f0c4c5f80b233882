"""The planted model's construction (issue 13): each GPT-2 difficulty planted is measured, the
label and planting halves of the word lists are disjoint, any seed builds, and the negative control
has no contextual head; the recovery study's runs summarise and write their JSON.

The measurements are :func:`context_neurons.recovery.difficulty_measurements`, which
``scripts/planted_recovery.py --difficulties`` prints for every seed of the recovery study.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
import torch

from context_neurons import circuit as C
from context_neurons import discovery as N
from context_neurons import recovery
from context_neurons.checks import NoContextualHeadsError
from context_neurons.models import load_model, load_tokenizer
from context_neurons.models import planted as P
from context_neurons.models.planted_topics import split_word, topic_word_halves
from context_neurons.taxonomy import classify_heads
from context_neurons.text.corpora import corpora_dir


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


@pytest.fixture(scope="module")
def negative_control():
    """The planted model's shuffled-kernels variant: no contextual head by construction."""
    return load_model("planted", variant="shuffled-kernels")


@pytest.fixture(scope="module")
def measured(planted):
    return recovery.difficulty_measurements(planted.model, planted.truth)


# ----------------------------------------------------------------------------------------------
# Word lists: planting and label halves
# ----------------------------------------------------------------------------------------------


def test_split_is_a_fixed_hash_of_the_word():
    assert split_word("religion", "God") == split_word("religion", "god") == "planting"
    assert split_word("gb_us", "colour") == "planting"
    assert {split_word("war", w) for w in ("army", "troops", "battle", "navy")} == {
        "planting", "label"}


def test_halves_are_disjoint_and_both_used(tokenizer):
    halves, _ = topic_word_halves(tokenizer, corpora_dir(required=False))
    planted_anywhere = {i for words in halves["planting"].values() for i in words.values()}
    for topic in halves["planting"]:
        planting, label = halves["planting"][topic], halves["label"][topic]
        assert planting and label, topic
        assert not set(planting.values()) & set(label.values()), topic
        assert not set(label.values()) & planted_anywhere, topic  # labels are never planted
    # British and American spellings are split by pair: both spellings in the same half.
    for half in halves.values():
        assert len(half["british"]) == len(half["american"])


def test_truth_records_both_halves(planted):
    truth = planted.truth
    for topic, ids in truth.planting_token_ids.items():
        assert ids and truth.topic_token_ids[topic], topic
        assert not set(ids) & set(truth.label_token_ids[topic])
    for lookup in truth.lookups:
        assert lookup.topic_token_ids == truth.label_token_ids[lookup.topic]


# ----------------------------------------------------------------------------------------------
# The planted kernels (no model needed)
# ----------------------------------------------------------------------------------------------


def test_planned_kernels_are_not_exponential_and_peak_where_planned():
    for head, plan in P.LAYER0_HEADS.items():
        kernel = P.planned_kernel(plan)
        if plan.group == "contextual":
            assert recovery.exponential_tv(kernel) > 0.01, head
            assert 32 < 1 / float((kernel**2).sum()) < 250, head  # slowly decaying at n = 500
        if plan.peak:  # previous-token heads: the peak is at i = n - 1, not at i = n
            assert kernel[-2] > 0.6 and kernel[-2] > 3 * kernel[-1], head


# ----------------------------------------------------------------------------------------------
# GPT-2's difficulties, measured on the model (seed 0)
# ----------------------------------------------------------------------------------------------


def test_positions_have_gpt2_like_norms_and_helix(measured):
    assert measured["pos_norm_0_over_late"] > 2.5  # position 0 stands out
    assert measured["pos_norm_1_over_late"] > 1.3  # early positions are longer
    assert 1.03 < measured["pos_norm_late_max_over_min"] < 1.3  # later: moderate variation
    assert measured["pos_pca_top6_share"] > 0.6  # low-dimensional
    # Sinusoid-like principal components of increasing frequency (a helix).
    assert measured["pos_pca_top6_sign_changes"] == sorted(measured["pos_pca_top6_sign_changes"])


def test_tokens_overlap_positions_a_little_glitch_tokens_most(measured):
    assert 0.01 < measured["token_pos_max_abs_cos_median"] < 0.08
    assert measured["token_pos_max_abs_cos_glitch_median"] > 2 * measured[
        "token_pos_max_abs_cos_median"]
    assert measured["token_pos_max_abs_cos_max"] < 0.3


def test_kernels_change_with_destination_and_position(measured):
    heads = measured["kernel_n_eff_the"]
    assert sum(tv > 0.02 for tv in measured["kernel_exponential_tv"].values()) >= len(heads) // 2
    for head in heads:
        assert measured["kernel_n_eff_destination_max_over_min"][head] > 1.15, head
        assert measured["kernel_n_eff_position_max_over_min"][head] > 1.04, head


def test_content_weights_depend_on_the_destination(measured):
    assert measured["content_corr_the_vs_other_destinations_median"] < 0.97
    assert measured["content_sd_destination_max_over_min_median"] > 1.2


def test_previous_token_heads_look_at_the_previous_token(planted, measured):
    for head in planted.truth.head_groups["detokenization"]:
        previous = measured[f"head{head}_attention_previous"]
        assert previous > 0.5 and previous > 2 * measured[f"head{head}_attention_current"], head


def test_topics_are_graded_overlapping_and_superposed(measured):
    assert measured["topic_direction_abs_cos_max"] > 0.3  # religion and Bible English
    assert measured["topic_direction_abs_cos_median"] > 0.05  # not orthogonal
    assert measured["tokens_on_two_or_more_topics"] > 50
    assert measured["planting_projection_cv_median"] > 0.08  # graded, not one loading


def test_label_words_carry_a_topic_only_through_the_corpora(planted, measured):
    truth = planted.truth
    planting, label = measured["planting_tokens_median_z"], measured["label_tokens_median_z"]
    for topic in label:
        assert label[topic] < planting[topic], topic
    if truth.corpus_association:  # topics with corpora of their own generalise to their labels
        for topic in ("war", "medicine", "astronomy", "bible_archaic"):
            assert label[topic] > 1.0, topic


def test_distractors_read_glitch_tokens_or_non_contextual_heads(planted):
    model, truth = planted.model, planted.truth
    w_in = model.blocks[0].mlp.W_in.double()
    glitch = truth.glitch_token_ids
    assert len(glitch) >= 6
    w_e = model.W_E.double()
    ov = {h: model.blocks[0].attn.W_V[h].double() @ model.blocks[0].attn.W_O[h].double()
          for h in range(model.cfg.n_heads)}
    contextual = truth.head_groups["contextual"]
    for j, plan in truth.distractor_neurons.items():
        if plan.kind == "glitch-direct":
            direct = w_e @ w_in[:, j]
            z = (direct - direct.median()) / direct.std()
            assert float(z[glitch].min()) > 8, j
        else:
            head = 11 if plan.kind == "uniform-head" else 3
            topic = next(iter(plan.topics))
            # what the topic's tokens add to the heads' values, beyond an average token
            source = w_e[truth.planting_token_ids[topic]].mean(0) - w_e[:-1].mean(0)
            through = float((source @ ov[head] @ w_in[:, j]).abs())
            bag = sum(float((source @ ov[h] @ w_in[:, j]).abs()) for h in contextual)
            assert through > 2 * bag, (j, through, bag)


# ----------------------------------------------------------------------------------------------
# Discovery on the planted model: a curve, not a step (slow: scores every neuron)
# ----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_gains_spread_across_the_threshold(planted):
    truth = planted.truth
    scores = N.get_scores(C.get_circuit(planted.model), planted.model)
    top = {j: float(scores.top[j]) for j in truth.context_neurons}
    assert sum(v < N.THETA for v in top.values()) >= 1  # some planted neurons are too weak
    assert sum(v > 4 * N.THETA for v in top.values()) >= 3
    assert max(float(scores.top[j]) for j in truth.distractor_neurons) < 2 * N.THETA
    sweep = N.theta_sweep(scores, (4, 5, 6, 8, 12, 20), truth=sorted(truth.context_neurons))
    assert sweep.loc[6.0, "precision"] >= 0.8 and sweep.loc[6.0, "recall"] >= 0.8
    assert sweep["recall"].nunique() >= 3 and sweep["precision"].nunique() >= 3  # a curve


# ----------------------------------------------------------------------------------------------
# Seeds and the negative control (slow: build models)
# ----------------------------------------------------------------------------------------------


def test_unknown_variant_is_refused(tokenizer):
    with pytest.raises(ValueError, match="variant"):
        P.build_planted_state(tokenizer, seed=0, variant="shuffled")


@pytest.mark.slow
def test_any_seed_builds(tokenizer, planted):
    state, truth = P.build_planted_state(tokenizer, seed=987_654_321)
    reference = planted.truth
    assert truth.seed == 987_654_321
    assert state["transformer.wte.weight"].shape == (P.D_VOCAB, P.D_MODEL)
    assert all(torch.isfinite(v).all() for v in state.values())
    assert truth.head_groups == reference.head_groups
    assert truth.label_token_ids == reference.label_token_ids  # the split does not depend on it
    assert sorted(truth.context_neurons) == sorted(reference.context_neurons)


@pytest.mark.slow
def test_negative_control_has_no_contextual_head(negative_control):
    truth, model = negative_control.truth, negative_control.model
    assert truth.variant == "shuffled-kernels"
    assert truth.head_groups["contextual"] == [] and truth.context_neurons == {}
    taxonomy = classify_heads(model)
    assert taxonomy.groups["contextual"] == []
    assert not any(math.isnan(v) for v in taxonomy.n_eff.flatten().tolist())
    # The method stops with a clear message; nothing stands in for the missing heads.
    with pytest.raises(NoContextualHeadsError, match="found no contextual head"):
        C.build_circuit(model, "prose")


def test_chapter_4_stops_on_the_negative_control_saying_what_is_missing_and_what_to_do(
    negative_control,
):
    """Issue 52: chapter 4's own cell, run on the model without a contextual head, stops with
    the library's message (:func:`context_neurons.circuit.contextual_heads`): which model, what it
    lacks, and what the reader can do; the title names the variant (the standard planted model
    has the heads)."""
    from context_neurons.book.notebooks import BOOK, read_chapter

    loaded = negative_control
    assert loaded.title == "planted model (seed 0, shuffled-kernels)"
    cell = next(c.source for c in read_chapter(BOOK / "ch04_circuit.py").cells
                if c.cell_type == "code" and "cc.contextual_heads(model)" in c.source)
    with pytest.raises(NoContextualHeadsError) as stopped:
        exec(compile(cell, "<chapter 4>", "exec"), {"loaded": loaded, "model": loaded.model})
    message = " ".join(str(stopped.value).split())
    assert message.startswith("Chapter 4 stops here: the planted model (seed 0, shuffled-kernels) "
                              "has no contextual head. The taxonomy of this model's layer 0 found "
                              "no contextual head"), message
    assert "so there is no contextual circuit" in message, message  # what is missing
    assert message.endswith("To study chosen heads anyway, pass heads=[...] explicitly."), message


# ----------------------------------------------------------------------------------------------
# The appendix's tables (issue 33: computed in the package)
# ----------------------------------------------------------------------------------------------


def test_planned_heads_and_difficulty_table_on_a_made_up_plan():
    from types import SimpleNamespace

    plan = P.HeadPlan("contextual", "slowly decaying", 22.0, 0.25, stopword_weight=-0.8,
                      bos_weight=2.0, tail=0.15)
    truth = SimpleNamespace(
        layer0_heads={3: replace(plan, group="detokenization"), 0: plan},
        kernel_n_eff={0: 96.24, 3: 1.26}, head_groups={"detokenization": [3, 4]})
    heads = recovery.planned_heads(truth)
    assert list(heads.index) == [0, 3]
    assert list(heads.columns[:6]) == ["group", "kernel", "width w", "stretch", "tail",
                                       "n_eff (planned)"]
    assert heads.loc[0, "n_eff (planned)"] == 96.2 and heads.loc[3, "group"] == "detokenization"
    assert set(recovery.PLAN_DECIMALS) <= set(heads.columns)
    measured = {key: 0.5 for key in (
        "pos_norm_0_over_late", "pos_norm_1_over_late", "pos_norm_late_max_over_min",
        "pos_pca_top6_share", "token_pos_max_abs_cos_median",
        "token_pos_max_abs_cos_glitch_median", "content_corr_the_vs_other_destinations_median",
        "topic_direction_abs_cos_median", "planting_projection_cv_median")}
    measured.update({
        "pos_pca_top6_sign_changes": [1, 2], "tokens_on_two_or_more_topics": 7,
        "kernel_exponential_tv": {0: 0.04, 2: 0.213},
        "kernel_n_eff_destination_max_over_min": {0: 1.4},
        "kernel_n_eff_position_max_over_min": {0: 1.1},
        "head3_attention_previous": 0.7, "head4_attention_previous": 0.8,
        "head3_attention_current": 0.1, "head4_attention_current": 0.2,
    })
    table = recovery.difficulty_table(measured, truth)
    assert list(table.columns) == ["measured here", "GPT-2 (described)"]
    assert len(table) == 16
    assert table.loc["position 0 norm / typical norm", "measured here"] == "0.50"
    assert table.loc["same, glitch tokens", "measured here"] == "0.500"
    assert table.loc["TV to the nearest exponential, per head", "measured here"] == "0.04 .. 0.21"
    assert table.loc["detokenization heads: attention on i = n - 1", "measured here"] == (
        "0.70 .. 0.80")
    assert table.loc["sign changes of those 6 components", "measured here"] == "[1, 2]"


def test_planned_neuron_and_lookup_tables_on_a_made_up_plan():
    from types import SimpleNamespace

    truth = SimpleNamespace(
        context_neurons={7: P.NeuronPlan({"law": 1.0, "medicine": -0.5}, 4.3, "legal")},
        distractor_neurons={2: P.DistractorPlan("glitch-direct", {}, 6.0, "glitch")},
        lookups=[P.PlantedLookup(1, 4, 12, "war", " troops", True, 88, [1, 2], "hard one", 5),
                 P.PlantedLookup(1, 2, 9, "astronomy", " star", False, 77, [3])])
    neurons = recovery.planned_neurons(truth)
    assert list(neurons.index) == [7, 2]
    assert neurons.loc[7, "reads"] == "+1.0 law, -0.5 medicine"
    assert neurons.loc[2, "reads"] == "glitch"
    assert list(neurons["kind"]) == ["context", "distractor: glitch-direct"]
    lookups = recovery.planned_lookups(truth)
    assert list(lookups["second head"]) == [5, ""]
    assert list(lookups["description"]) == ["hard one", ""]
    assert list(lookups.columns) == ["layer", "head", "neuron", "topic", "target", "second head",
                                     "description"]


def test_the_truth_record_round_trips_typed(planted):
    truth = planted.truth
    again = P.PlantedTruth.from_dict(truth.to_dict())
    assert again == truth
    assert isinstance(again.lookups[0], P.PlantedLookup)
    assert isinstance(next(iter(again.layer0_heads.values())), P.HeadPlan)
    assert all(isinstance(plan, P.NeuronPlan) for plan in again.context_neurons.values())
    assert all(isinstance(plan, P.DistractorPlan) for plan in again.distractor_neurons.values())
    written = truth.to_dict()  # every look-up writes every field (hard or not)
    assert {tuple(lookup) for lookup in written["lookups"]} == {(
        "layer", "head", "neuron", "topic", "target", "hard", "target_id", "topic_token_ids",
        "description", "second_head")}
    hard = [lookup for lookup in written["lookups"] if lookup["hard"]]
    assert len(hard) == 1 and hard[0]["second_head"] is not None and hard[0]["description"]
    assert truth.context_neurons[300].topics is not P.CONTEXT_NEURONS[300].topics  # a copy


# ----------------------------------------------------------------------------------------------
# The recovery study's runs (issue 33: typed values, JSON only where JSON is written)
# ----------------------------------------------------------------------------------------------


def _run(**overrides) -> recovery.RecoveryRun:
    """A made-up :class:`~context_neurons.recovery.RecoveryRun` of seed 0 (overrides: fields)."""
    fields = dict(
        seed=0, variant="standard", build_s=6.5, contextual_heads=[0, 2],
        contextual_recovered=True, groups_recovered=True, content_sd_max_contextual=0.5,
        found={theta: 10 for theta in recovery.THETAS},
        precision={theta: 1.0 for theta in recovery.THETAS},
        recall={theta: 0.5 for theta in recovery.THETAS},
        distractors_found=[], planted_missed=[7], planted_top={7: 5.2}, distractor_top={9: 4.1},
        unplanted_top_max=3.25)
    return recovery.RecoveryRun(**{**fields, **overrides})


def test_summarise_reads_runs_and_skips_the_control():
    runs = [
        _run(found={**_run().found, 6: 19}, precision={**_run().precision, 6: 0.9},
             recall={**_run().recall, 6: 1.0}, tv_median=0.05,
             difficulties={"kernel_tv": {0: 0.1, 2: 0.3}, "argmax": "the"}),
        _run(seed=1, contextual_recovered=False, found={**_run().found, 6: 12},
             precision={**_run().precision, 6: 0.7}),
        _run(variant="shuffled-kernels", contextual_heads=[], found={t: 0 for t in recovery.THETAS},
             precision=None, recall=None, stopped="no contextual head"),
    ]
    lines = recovery.summarise(runs)
    assert lines[0] == "contextual heads recovered: 1/2 seeds; all four groups: 2/2"
    assert lines[3] == ("theta  6: precision mean 0.800 worst 0.700 | recall mean 0.750 worst "
                        "0.500 | found mean 15.5 range 12-19")
    assert lines[1].startswith("theta  4: precision mean 1.000 worst 1.000 | recall mean 0.500")
    assert lines[7:] == ["tv_median: mean 0.0500 worst 0.0500",
                         "difficulties (min .. max over seeds; per-head values pooled):",
                         "  kernel_tv: 0.100 .. 0.300"]
    assert recovery.summarise(runs[2:]) == []


def test_a_run_writes_the_json_of_its_fields_taken():
    control = _run(variant="shuffled-kernels", contextual_heads=[], content_sd_max_contextual=None,
                   found={t: 0 for t in recovery.THETAS}, precision=None, recall=None,
                   distractors_found=None, planted_missed=None, planted_top=None,
                   distractor_top=None, unplanted_top_max=None, stopped="no contextual head")
    data = control.to_json()
    assert list(data) == ["seed", "variant", "build_s", "contextual_heads", "contextual_recovered",
                          "groups_recovered", "content_sd_max_contextual", "found", "stopped"]
    assert data["content_sd_max_contextual"] is None  # a field without a default stays
    assert data["found"] == {t: 0 for t in recovery.THETAS}
    assert json.loads(json.dumps(data))["found"]["6"] == 0
    timed = replace(_run(median_r_per_position=0.97), seconds=12.5).to_json()
    assert "stopped" not in timed and "difficulties" not in timed and "tv_median" not in timed
    assert list(timed)[-3:] == ["unplanted_top_max", "median_r_per_position", "seconds"]
    assert timed["precision"][6] == 1.0 and timed["seconds"] == 12.5


@pytest.mark.slow
def test_the_cached_build_is_the_fresh_build_bit_for_bit(tokenizer, monkeypatch, tmp_path):
    """``planted_state`` writes a build once and reads it back unchanged; another seed is another
    file; a damaged file is built again (with a warning); only the newest builds are kept."""
    from context_neurons import config
    from context_neurons.models import planted_cache

    monkeypatch.setenv(config.CACHE.name, str(tmp_path))
    fresh_state, fresh_truth = planted_cache.planted_state(tokenizer, seed=5)  # built, written
    files = list((tmp_path / "planted").glob("*.pt"))
    assert len(files) == 1
    monkeypatch.setattr(planted_cache, "build_planted_state",
                        lambda *a, **k: pytest.fail("built again"))
    state, truth = planted_cache.planted_state(tokenizer, seed=5)  # read back
    assert truth == fresh_truth and state.keys() == fresh_state.keys()
    assert all(torch.equal(state[k], fresh_state[k]) for k in state)
    keys = {planted_cache.build_key(tokenizer, seed, variant, corpora_dir(required=False))
            for seed, variant in ((5, "standard"), (6, "standard"), (5, "shuffled-kernels"))}
    assert len(keys) == 3 and files[0].stem in keys
    files[0].write_bytes(b"damaged")
    monkeypatch.setattr(planted_cache, "build_planted_state", lambda *a, **k: (fresh_state,
                                                                                fresh_truth))
    with pytest.warns(UserWarning, match="Unreadable planted-model cache"):
        planted_cache.planted_state(tokenizer, seed=5)
    assert planted_cache.planted_state(tokenizer, seed=5)[1] == fresh_truth  # rewritten whole
    for k in range(planted_cache.KEEP + 2):
        planted_cache._write(tmp_path / "planted" / f"{k}.pt", {}, fresh_truth)
    assert len(list((tmp_path / "planted").glob("*.pt"))) == planted_cache.KEEP
