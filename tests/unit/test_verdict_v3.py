"""Protocol v3 (issue 32): each new formula against an independent brute-force value on a small
model or a hand-made case: the CONFIRM units and order, the context set's rules and its
previous-token share, the bag-of-tokens response and baseline, the context-set-only ablation,
the paired bootstrap of delta with the max over baselines, the primary verdict's labels, the
non-pooled description and the label-free arm's pieces."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from pathlib import Path

from dataclasses import replace

import numpy as np
import pytest
import torch
from sklearn.metrics import adjusted_rand_score

from context_neurons.activations import PREVIOUS_TOKEN_MIN, mean_head_z
from context_neurons.domain_shift import path_pieces, predict_path_shifts
from context_neurons.models.weights import as_weights
from context_neurons.taxonomy import HeadTaxonomy
from context_neurons.training.corpus import Doc
from context_neurons.verdict import statistics as st
from context_neurons.verdict import v3_report, v3_stored
from context_neurons.checks import DataError, InputError
from context_neurons.verdict.protocol import FallbackCorpus, RegisteredModels, Seeds
from context_neurons.verdict.protocol import VerdictRule, load_protocol, load_protocol_v3
from context_neurons.verdict.statistics import Verdict
from context_neurons.verdict.comparison import PrimaryVerdict, paired_delta, primary_comparison
from context_neurons.verdict.comparison import primary_verdict
from context_neurons.verdict.v3_data import (
    ConfirmDomain,
    Unit,
    V3Data,
    confirm_order,
    confirm_value,
    fallback_units,
    group_units,
    load_confirm_manifest,
    take_windows,
)
from context_neurons.verdict.context_set import build_context_set, calibration_previous_share
from context_neurons.verdict.context_set import fixed_group
from context_neurons.verdict.label_free import adjusted_rand_index, tf_idf_features
from context_neurons.verdict.entries import EntryStatus, NotComparable, Pending
from context_neurons.verdict.v3_models import NOT_EVALUATED, PENDING
from context_neurons.verdict.v3_stored import model_entries
from context_neurons.verdict.v3_result import jsonable
from context_neurons.verdict.baselines import bag_of_tokens, bag_responses
from context_neurons.verdict.baselines import shifts_against
from context_neurons.verdict.truth import ConfirmMeasurements, against_pooled, full_shifts
from context_neurons.verdict.truth import measure_v3, point_truth, set_shifts
from verdict_cases import baseline_case, primary_case, score_result, truth_case  # noqa: E402
from verdict_cases import v3_case  # noqa: E402  (tests/unit/verdict_cases.py)

PROTOCOL = load_protocol_v3()


# ----------------------------------------------------------------------------------------------
# The registered file, seeds and thresholds
# ----------------------------------------------------------------------------------------------


def test_the_code_uses_the_registered_seeds_and_thresholds():
    boot, controls = PROTOCOL.document["bootstrap"], PROTOCOL.document["controls"]
    assert PROTOCOL.bootstrap.resamples == boot["resamples"] == 2000
    assert PROTOCOL.bootstrap.level == boot["level"] == 0.95
    seeds = PROTOCOL.seeds  # parsed from the protocol's words, once
    assert seeds == Seeds(units=32, neurons=33, permutation=34, random_directions=35,
                          vocabulary=36)
    assert f"PCG64({seeds.units})" in boot["unit_draws"]
    assert f"PCG64({seeds.neurons})" in boot["neuron_draws"]
    assert f"PCG64({seeds.permutation})" in controls["neurons_permuted"]
    assert f"torch seed {seeds.random_directions}" in controls["random_read_directions"]
    assert f"seed {seeds.vocabulary}" in controls["vocabulary_permuted"]
    truth = PROTOCOL.document["truth"]
    # values registered beside the rules, read from the file once (issue 51), not restated
    assert "min_cohens_d 0.5 and 2.0" in truth["sensitivity"]["cohens_d"]
    assert PROTOCOL.truth.sensitivity_cohens_d == (0.5, 2.0)
    assert (PROTOCOL.truth.min_cohens_d, PROTOCOL.truth.min_context_part) == (
        truth["min_cohens_d"], truth["min_context_part"]) == (1.0, 0.5)
    assert "L = min(128, n_ctx)" in PROTOCOL.sections("baselines")["baselines"][
        "bag_of_tokens"]["input"]
    assert PROTOCOL.bag_length == 128
    assert PROTOCOL.primary.equivalence_margin == PROTOCOL.document["primary_comparison"][
        "verdict"]["equivalence_margin"] == 0.05
    assert "'equivalent within 0.05'" in PROTOCOL.primary.rules["no_difference_shown"]
    assert PROTOCOL.primary_score == PROTOCOL.document["scores"]["primary"] == "frequency_aware"
    threshold = PROTOCOL.document["context_set"]["taxonomy_fix"]["threshold"]
    assert PROTOCOL.previous_token_threshold == threshold == PREVIOUS_TOKEN_MIN == 0.4
    # v2's verdict thresholds, unchanged, are the secondary question's
    assert PROTOCOL.document["verdict"]["positive"] == load_protocol("v2").document["verdict"][
        "positive"]
    assert PROTOCOL.verdict == VerdictRule.from_json(PROTOCOL.document["verdict"])
    assert PROTOCOL.verdict == load_protocol("v2").verdict


def test_the_typed_protocol_reads_the_registered_values():
    document = PROTOCOL.document
    truth, confirm = document["truth"], document["data"]["confirm"]
    assert (PROTOCOL.truth.min_cohens_d, PROTOCOL.truth.min_context_part,
            PROTOCOL.truth.removes_almost_none_below) == (1.0, 0.5, 0.1) == (
        truth["min_cohens_d"], truth["min_context_part"], truth["removes_almost_none_below"])
    assert PROTOCOL.data.window_mean_start == confirm["window_mean_start"] == 32
    assert PROTOCOL.data.tokens_per_domain == confirm["tokens_per_domain"] == 51200
    assert PROTOCOL.data.min_units == confirm["pooling"]["min_units"] == 20
    assert PROTOCOL.data.cal_windows_per_domain == document["data"]["cal"][
        "cal_windows_per_domain"] == 64
    assert dict(PROTOCOL.data.fallback) == {"code": FallbackCorpus("python_stdlib_tests", 1025)}
    assert "max(1, 1024 // n_ctx)" in confirm["windows_per_unit"]
    assert PROTOCOL.data.tokens_per_unit == 1024
    assert [PROTOCOL.data.windows_per_unit(n) for n in (256, 1024, 2048)] == [4, 1, 1]


def test_the_registered_models_and_when_one_is_comparable_are_read_from_the_file():
    models = PROTOCOL.document["models"]
    assert PROTOCOL.models == RegisteredModels(
        ("trained-seed0", "trained-seed1", "gpt2-layer0-shape"), 0.15)
    assert list(PROTOCOL.models.names) == [k for k, v in models.items() if isinstance(v, dict)]
    assert models[PROTOCOL.models.names[0]]["role"] == "primary"
    assert "heldout_fraction 0.15 " in models["comparable_when"]
    assert PROTOCOL.document["data"]["inventory"]["heldout_fraction"] == 0.15


def test_the_table_of_registered_models_is_the_protocol_files_list_in_its_order():
    """Issue 51: one typed table names the registered models (:data:`V3_MODELS`), in the order
    of the protocol file's ``models``; each shipped directory's training record is identified
    as its own model, and a run the protocol does not register is refused, never named by
    guess (a GPT-2 Small-shaped run is not the model with GPT-2 Small's layer-0 shape)."""
    from context_neurons.checks import InputError
    from context_neurons.training.summary import training_run
    from context_neurons.verdict.v3_models import (V3_MODELS, TrainingIdentity, UnregisteredModel,
                                                   model_key, model_names, primary_model)

    assert model_names() == PROTOCOL.models.names == tuple(m.name for m in V3_MODELS)
    assert primary_model().name == PROTOCOL.models.names[0]
    assert len({m.identity for m in V3_MODELS}) == len(V3_MODELS)
    for model in V3_MODELS:
        run = training_run(model.directory)
        assert TrainingIdentity.of(run) == model.identity and model_key(run) == model.name
        assert model.weights_kept == (model.directory / "model.safetensors").is_file()
    assert v3_stored.WEIGHTS_NOT_KEPT_DIRS == {"gpt2-layer0-shape": V3_MODELS[2].directory}
    run = training_run(V3_MODELS[2].directory)
    small = replace(run, config=replace(run.config, n_layer=12))  # GPT-2 Small's own shape
    with pytest.raises(UnregisteredModel, match="not a model protocol v3 registers"):
        model_key(small)
    seed0 = training_run(V3_MODELS[0].directory)
    seed2 = replace(seed0, config=replace(seed0.config, seed=2))  # once named trained-seed2
    with pytest.raises(InputError, match="seed 2"):
        model_key(seed2)


def test_a_registered_number_the_words_do_not_hold_stops_with_a_data_error():
    controls = {**PROTOCOL.document["controls"], "vocabulary_permuted": "token ids permuted"}
    document = {**PROTOCOL.document, "controls": controls}
    with pytest.raises(DataError, match="register no single number"):
        Seeds.from_json(document)
    rules = document["primary_comparison"]["verdict"]
    assert PROTOCOL.primary.equivalence_margin == rules["equivalence_margin"] == 0.05
    assert set(PROTOCOL.primary.rules) == {"adds_something", "baseline_better",
                                           "no_difference_shown", "not_testable"}
    assert PROTOCOL.budget_s == document["runtime"]["budget_s"]
    assert PROTOCOL.short_kind == "confirmatory" and PROTOCOL.registered_date == "2026-11-26"
    with pytest.raises(TypeError):  # read-only: the file as registered
        PROTOCOL.document["truth"] = {}


def test_manifest_lists_every_domain_and_the_fallback():
    manifest = load_confirm_manifest()
    assert len(manifest["documents"]) == 10
    assert manifest["fallback"]["python_stdlib_tests"]["documents"] == PROTOCOL.data.fallback[
        "code"].documents


# ----------------------------------------------------------------------------------------------
# CONFIRM units, order and windows
# ----------------------------------------------------------------------------------------------


def test_confirm_value_is_the_registered_hash():
    key = "bible_kjv:Acts 24"
    digest = hashlib.sha256(("confirm-v3:" + key).encode()).digest()
    assert confirm_value(key) == int.from_bytes(digest[:8], "big") / 2**64
    assert confirm_order(key) == (confirm_value(key), key)


def test_units_group_documents_until_n_ctx_and_keep_a_shared_key_together():
    doc = lambda key, n: (key, np.arange(n, dtype=np.int32))  # noqa: E731
    documents = [doc("a", 3), doc("b", 2), doc("c", 8), doc("d", 4), doc("d", 4), doc("e", 1)]
    units = group_units(documents, n_ctx=5)
    # a + b = 5 tokens; c alone (8); d, d share a key: one unit even though the first reached 4;
    # e (1 token) is a last, shorter group: dropped
    assert [u.key for u in units] == ["a", "c", "d"]
    assert [len(u.tokens) for u in units] == [5, 8, 8]


def test_take_windows_takes_the_first_windows_of_each_unit_until_the_cap():
    eot = 0
    units = [Unit(f"u{i}", np.array([eot] + [i + 1] * (3 * 4 - 1), dtype=np.int32))
             for i in range(3)]  # 12 tokens each: pack_windows gives 3 windows of 4 (or more)
    windows, keys, read = take_windows(iter(units), n_ctx=4, eot_id=eot, per_unit=2, cap=5)
    assert keys == ["u0", "u0", "u1", "u1", "u2"] and read == 3
    assert all(len(w) == 4 and int(w[0]) == eot for w in windows)
    assert windows[1].tolist() == [eot, 1, 1, 1]  # the unit's second window, BOS prepended


class _CountingTokenizer:
    """A stand-in with the backend interface tokenize_documents uses: one token per word."""

    class _Backend:
        def encode_batch_fast(self, texts, add_special_tokens=False):
            return [type("E", (), {"ids": [1] * len(t.split())})() for t in texts]

    backend_tokenizer = _Backend()


def test_fallback_units_come_in_confirm_order_and_drop_short_files():
    docs = [Doc("python_stdlib_tests", f"test/f{i}.py", "x " * (2 + i)) for i in range(8)]
    units = list(fallback_units(docs, _CountingTokenizer(), eot_id=0, n_ctx=6))
    kept = sorted((d for d in docs if len(d.text.split()) + 1 >= 6),
                  key=lambda d: (confirm_value(d.key), d.key))
    assert [u.key for u in units] == [d.key for d in kept]
    assert all(len(u.tokens) >= 6 and u.tokens[0] == 0 for u in units)


# ----------------------------------------------------------------------------------------------
# The context set
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape, sd, z, share, expected", [
    ("slowly decaying", 1.0, 0.0, 0.39, "contextual"),
    ("slowly decaying", 1.0, 0.0, 0.40, "detokenization"),  # head 0's case: a previous-token head
    ("slowly decaying", 2.0, 0.0, 0.10, "miscellaneous"),
    ("local", 1.0, 0.0, 0.0, "detokenization"),
    ("uniform", 0.5, 0.0, 0.5, "detokenization"),
    ("slowly decaying", 1.0, 4.0, 0.9, "duplicate"),  # duplicate comes first
])
def test_fixed_group_order(shape, sd, z, share, expected):
    assert fixed_group(shape, sd, z, share, PROTOCOL.previous_token_threshold) == expected


def _taxonomy(shapes, groups, n_eff, sd, z) -> HeadTaxonomy:
    heads = list(range(len(shapes)))
    n = 7
    patterns = torch.full((1, len(heads), n + 1), 1.0 / (n + 1), dtype=torch.float64)
    return HeadTaxonomy(
        n, heads, [" the"], patterns, torch.tensor([n_eff], dtype=torch.float64),
        torch.tensor([sd], dtype=torch.float64), torch.tensor([z], dtype=torch.float64),
        dict(enumerate(shapes)),
        {g: [h for h in heads if groups[h] == g]
         for g in ("contextual", "detokenization", "duplicate", "miscellaneous")})


def test_context_set_leaves_out_previous_token_heads_on_either_measure():
    shapes = ["slowly decaying"] * 3 + ["local", "uniform", "slowly decaying"]
    groups = ["contextual"] * 3 + ["detokenization", "miscellaneous", "duplicate"]
    taxonomy = _taxonomy(shapes, groups, [40.0, 50, 60, 5, 200, 80], [1.0] * 6,
                         [0.0, 0, 0, 0, 0, 5.0])
    calibration = torch.tensor([0.44, 0.10, 0.10, 0.9, 0.05, 0.1])
    cal = torch.tensor([0.30, 0.45, 0.20, 0.9, 0.05, 0.1])
    cs = build_context_set(taxonomy, calibration, cal, PROTOCOL.previous_token_threshold)
    assert cs.taxonomy_contextual == (0, 1, 2)
    assert cs.fixed_contextual == (1, 2)  # head 0: previous-token on the calibration text
    assert cs.heads == (2,)  # head 1: previous-token on the CAL windows
    assert cs.non_local == (2, 4, 5)  # not local, below 0.4 on both measures
    rows = {m.head: m for m in cs.measures}
    assert rows[0].fixed_group == "detokenization" and rows[0].group == "contextual"
    assert rows[5].fixed_group == "duplicate"
    report = cs.to_json()
    assert report["left_out_by_the_fix"] == [0] and report["left_out_by_cal_windows"] == [1]
    assert set(report["per_head"][0]) >= {"group", "kernel_n_eff", "content_sd", "self_z",
                                          "previous_share_calibration",
                                          "previous_share_cal_windows", "in_context_set"}
    # The threshold is the one passed (a protocol's own), not chapter 2's constant.
    looser = build_context_set(taxonomy, calibration, cal, 0.5)
    assert looser.heads == (0, 1, 2) and looser.threshold == 0.5


def test_calibration_previous_share_is_the_mean_attention_to_the_previous_token(small_model):
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(1, small_model.cfg.d_vocab, (small_model.cfg.n_ctx,), generator=gen)
    tokens[0] = 0
    share = calibration_previous_share(small_model, start=32, tokens=tokens)
    _, cache = small_model.run_with_cache(tokens[None], names_filter="blocks.0.attn.hook_pattern")
    pattern = cache["blocks.0.attn.hook_pattern"][0]  # [head, query, key]
    expected = [np.mean([float(pattern[h, n, n - 1]) for n in range(32, len(tokens))])
                for h in range(small_model.cfg.n_heads)]
    assert share.tolist() == pytest.approx(expected, abs=1e-6)


# ----------------------------------------------------------------------------------------------
# The bag of tokens
# ----------------------------------------------------------------------------------------------


def test_bag_response_is_the_window_mean_of_a_forward_pass(small_model):
    length, start, bos = small_model.cfg.n_ctx, 32, 0
    tokens = torch.tensor([3, 7, 11])
    responses = bag_responses(small_model, tokens, length, start, bos, batch_size=2)
    for k, t in enumerate(tokens.tolist()):
        sequence = torch.full((1, length), t)
        sequence[0, 0] = bos
        _, cache = small_model.run_with_cache(sequence, names_filter="blocks.0.mlp.hook_pre")
        expected = cache["blocks.0.mlp.hook_pre"][0, start:length].double().mean(0)
        assert torch.allclose(responses[k], expected, atol=1e-5)


def test_weight_scores_like_another_head_set_take_its_paths_only_when_reads_agree(
        planted, monkeypatch):
    """A second head set's scores take the first's path pieces, and every path's shifts when the
    read vectors are equal (the paths' inputs are then the same: only their split depends on the
    head set); other read vectors compute the paths again."""
    from context_neurons.method import MethodValues
    from context_neurons.verdict import baselines

    method = MethodValues(planted.model)
    distributions = {name: torch.zeros(planted.model.cfg.d_vocab) for name in "abc"}
    for k, p in enumerate(distributions.values()):
        p[100 * k : 100 * k + 150] = 1 / 150
    first = baselines.weight_scores(method, [0, 1], distributions, 32)
    like = baselines.weight_scores(method, [2], distributions, 32, like=first)
    assert like.paths is first.paths and like.pieces is first.pieces
    assert torch.equal(like.prediction.score(), first.paths.split([2]).score())
    assert like.prediction.heads == [2] and torch.equal(like.top, method.scores([2]).top)
    read = baselines.read_vectors
    monkeypatch.setattr(baselines, "read_vectors", lambda c, m: 2 * read(c, m))
    other = baselines.weight_scores(method, [0, 1], distributions, 32, like=first)  # cached
    assert other.paths is not first.paths and other.pieces is first.pieces
    assert torch.allclose(other.paths.shifts, 2 * first.paths.shifts, rtol=1e-4, atol=1e-6)


def test_bag_of_tokens_shift_scale_and_score_by_hand():
    rng = np.random.default_rng(0)
    r = rng.normal(size=(4, 3))  # 4 tokens, 3 neurons
    p = np.array([[0.5, 0.5, 0.0, 0.0], [0.0, 0.25, 0.75, 0.0], [0.1, 0.2, 0.3, 0.4]])
    out = bag_of_tokens(torch.from_numpy(r), torch.from_numpy(p))
    for j in range(3):
        deltas, variances = [], []
        for d in range(3):
            rest = [e for e in range(3) if e != d]
            weight = p[d] - (p[rest[0]] + p[rest[1]]) / 2
            deltas.append(sum(weight[t] * r[t, j] for t in range(4)))
            mean = sum(p[d, t] * r[t, j] for t in range(4))
            variances.append(sum(p[d, t] * (r[t, j] - mean) ** 2 for t in range(4)))
        scale = math.sqrt(np.mean(variances))
        assert float(out.shift[:, j].abs().max()) == pytest.approx(max(map(abs, deltas)))
        assert float(out.scale[j]) == pytest.approx(scale)
        assert float(out.score[j]) == pytest.approx(max(abs(x) for x in deltas) / scale)
    # a response that does not depend on the token cancels
    shifted = bag_of_tokens(torch.from_numpy(r + 5.0), torch.from_numpy(p))
    assert torch.allclose(shifted.shift, out.shift) and torch.allclose(shifted.score, out.score)


def test_shifts_against_the_pooled_domains_equal_a_direct_prediction(small_model):
    """The non-pooled domain's predicted shift, from one call with every domain, equals the
    call with only the pooled domains and that domain."""
    model = small_model
    pieces = path_pieces(model, torch.arange(1, 40), dest_token=5, n_ref=32, bos_token=0)
    gen = torch.Generator().manual_seed(2)
    read = torch.randn(model.cfg.d_model, 16, generator=gen)
    p = {name: torch.rand(model.cfg.d_vocab, generator=gen, dtype=torch.float64) ** 4
         for name in ("a", "b", "c", "x", "y")}
    p = {name: v / v.sum() for name, v in p.items()}
    every = predict_path_shifts(pieces, read, p, start=32).shifts.double()
    against = shifts_against(every, [0, 1, 2])
    for k, name in ((3, "x"), (4, "y")):
        alone = predict_path_shifts(pieces, read, {n: p[n] for n in ("a", "b", "c", name)},
                                    start=32).shifts.double()
        assert torch.allclose(against[k], alone[3], atol=1e-4)
    pooled = predict_path_shifts(pieces, read, {n: p[n] for n in "abc"}, start=32).shifts
    # a pooled domain against all three pooled means: (n - 1) / n of its shift against the others
    assert torch.allclose(against[:3], pooled.double() * 2 / 3, atol=1e-4)


# ----------------------------------------------------------------------------------------------
# The context-set-only ablation
# ----------------------------------------------------------------------------------------------


def _manual_pre(model, tokens, heads, mean_z):
    """``blocks.0.mlp.hook_pre`` recomputed by hand from the unablated ``hook_z``, with the
    ``heads``' z replaced by ``mean_z`` and every other head's z as it was."""
    w = as_weights(model)
    _, cache = model.run_with_cache(tokens, names_filter=lambda n: n in (
        "blocks.0.attn.hook_z", "blocks.0.hook_resid_pre"))
    z = cache["blocks.0.attn.hook_z"].clone()  # [batch, pos, head, d_head]
    z[:, :, heads] = mean_z[heads]
    resid = cache["blocks.0.hook_resid_pre"] + torch.einsum("bphe,hed->bpd", z, w.W_O) + w.b_O
    centred = resid - resid.mean(-1, keepdim=True)
    normed = centred / (centred.pow(2).mean(-1, keepdim=True) + model.cfg.eps).sqrt()
    return (normed * w.ln2_w + w.ln2_b) @ w.W_in + w.b_in


def _small_data(model, n_windows=(3, 2, 2)) -> V3Data:
    gen = torch.Generator().manual_seed(1)
    confirm = {}
    statuses = ("pooled", "pooled", "not pooled")
    for k, (name, count) in enumerate(zip(("a", "b", "c"), n_windows)):
        windows = []
        for _ in range(count):
            w = torch.randint(1, model.cfg.d_vocab, (model.cfg.n_ctx,), generator=gen)
            w[0] = 0
            windows.append(w)
        confirm[name] = ConfirmDomain(name, count, None, count, tuple(windows),
                                      tuple(f"{name}{i}" for i in range(count)), statuses[k])
    return V3Data(confirm, {}, {})


def test_context_set_ablation_matches_a_manual_ablation_leaving_other_heads_intact(small_model):
    model, start, heads = small_model, 32, [1, 3]
    data = _small_data(model)
    pooled = [w for d in ("a", "b") for w in data.confirm[d].windows]
    mean_z = mean_head_z(model, pooled)
    measured = measure_v3(model, data, {"context": heads}, mean_z, start, batch_size=2,
                          resample=False)
    manual = _manual_pre(model, torch.stack(pooled), heads, mean_z)[:, start:].mean(1)
    np.testing.assert_allclose(measured.ablated["context"], manual.double().numpy(), atol=1e-4)
    everything = _manual_pre(model, torch.stack(pooled), [0, 1, 2, 3], mean_z)[:, start:].mean(1)
    assert not np.allclose(measured.ablated["context"], everything.double().numpy(), atol=1e-3)
    unablated = _manual_pre(model, torch.stack(pooled), [], mean_z)[:, start:].mean(1)
    np.testing.assert_allclose(measured.full, unablated.double().numpy(), atol=1e-4)
    # the non-pooled domain: its own windows, unablated and context-ablated
    full_c, ablated_c = measured.others["c"]
    own = torch.stack(list(data.confirm["c"].windows))
    np.testing.assert_allclose(ablated_c, _manual_pre(model, own, heads, mean_z)[:, start:]
                               .mean(1).double().numpy(), atol=1e-4)
    assert measured.domains == ["a", "b"] and measured.domain_index.tolist() == [0, 0, 0, 1, 1]
    assert measured.units == ["a0", "a1", "a2", "b0", "b1"]


def test_the_point_truth_is_the_truth_pairs_point():
    """The development view's truth without resamples is the evaluation's point truth."""
    rng = np.random.default_rng(3)
    index = np.repeat([0, 1, 2], 8)
    shift = rng.normal(0, 1.5, (3, 16))[index]
    full = shift + rng.normal(0, 1, (24, 16))
    measured = ConfirmMeasurements(
        ["a", "b", "c"], index, [f"u{i // 2}" for i in range(24)], full, full ** 2 + 1.0,
        {"context": full - 0.7 * shift}, None)
    weights = st.cluster_weights(index, measured.units, 5, seed=1)
    expected = set_shifts(measured, "context", weights, full_shifts(measured, weights)).truth(
        0.5, 0.3).point
    got = point_truth(measured, "context", 0.5, 0.3)
    assert 0 < got.mask.sum() < 16  # a case the thresholds split
    np.testing.assert_array_equal(got.mask, expected.mask)
    np.testing.assert_allclose(got.d, expected.d)


def test_the_effect_count_reads_negative_effects_too():
    """Issue 54: ``n_effect`` counts ``|d| >= min_cohens_d`` whatever the sign, so "the context
    criterion removes N (x%)" and the "removes almost none" label hold on a case where most
    large effects are negative (a count of ``d >= min_cohens_d`` reports 1 of 4 and says the
    criterion removes almost none). Six neurons on three domains, sd 1: +2.0 and -2.0 all from
    the context set, -1.5 and -3.0 none of it, +0.5 and -0.9 below the threshold."""
    from context_neurons.verdict.truth import TruthPair, truth_summary_v3

    spec = PROTOCOL.truth
    assert spec.min_cohens_d == 1.0 and spec.removes_almost_none_below == 0.1
    effect = np.array([2.0, -2.0, -1.5, -3.0, 0.5, -0.9])
    context = np.array([1.0, 1.0, 0.0, 0.0, 1.0, 1.0])  # the context set's part of each shift
    best = np.array([0, 1, 2, 0, 1, 2])
    shift = np.zeros((3, 6))
    shift[best, np.arange(6)] = effect
    full = st.Shifts(shift, np.ones(6))
    ablated = st.Shifts(shift * (1 - context), np.ones(6))
    point = st.additive_truth(full, ablated, spec.min_cohens_d, spec.min_context_part)
    boot = st.additive_truth(st.Shifts(shift[None], np.ones((1, 6))),
                             st.Shifts((shift * (1 - context))[None], np.ones((1, 6))),
                             spec.min_cohens_d, spec.min_context_part)
    summary = truth_summary_v3(TruthPair(point, boot, full, full), ["a", "b", "c"], spec,
                               spec.min_cohens_d, PROTOCOL.bootstrap.level)
    assert (summary.n_effect, summary.n_truth, summary.removed) == (4, 2, 2)
    assert summary.removed_share == 0.5 and not summary.removes_almost_none
    assert summary.neurons == [0, 1] and summary.domains == {"a": 1, "b": 1}
    assert summary.sentence() == ("2 context neurons by activation of 4 with |d| >= 1: the "
                                  "context criterion removes 2 (50.0%)")
    # every large effect from the context set: nothing removed, and the label says so
    point = st.additive_truth(full, st.Shifts(np.zeros((3, 6)), np.ones(6)), 1.0, 0.5)
    summary = truth_summary_v3(TruthPair(point, boot, full, full), ["a", "b", "c"], spec, 1.0,
                               PROTOCOL.bootstrap.level)
    assert (summary.n_effect, summary.n_truth, summary.removed) == (4, 4, 0)
    assert summary.removes_almost_none and "removes almost none" in summary.sentence()


def test_the_shipped_development_view_ends_at_the_stored_v3_truth():
    """development.json's v3 columns at the last step (the shipped weights) are the stored v3
    result's context set and truth size; the steps without weights are named and empty."""
    import json

    from context_neurons.models.loading import TRAINED_SEED1_DIR

    development = json.loads((TRAINED_SEED1_DIR / "development.json").read_text())
    stored = json.loads((TRAINED_SEED1_DIR / "verdict-v3.json").read_text())["result"]
    last = development["checkpoints"][-1]
    assert last["v3_context_heads"] == stored["context_set"]["heads"]
    assert last["v3_truth"] == stored["truth"]["n_truth"]
    for row in development["checkpoints"]:
        if row["step"] in development["v3_steps_without_weights"]:
            assert row["v3_context_heads"] is None and row["v3_truth"] is None
        else:
            assert row["v3_context_heads"] is not None


def test_non_pooled_shift_is_against_the_equal_weight_mean_of_the_pooled_domains():
    full = np.array([[1.0], [3.0], [10.0]])  # means a 2, b 10: pooled mean 6
    measured = ConfirmMeasurements(
        domains=["a", "b"], domain_index=np.array([0, 0, 1]), units=["x", "y", "z"], full=full,
        squares=full**2, ablated={"context": np.array([[1.0], [1.0], [4.0]])},  # 1 and 4: 2.5
        resampled=None)
    out = against_pooled(np.array([[8.0], [12.0]]), np.array([[3.0], [3.0]]), measured,
                         np.array([2.0]), 1.0, 0.5)
    # shift 10 - 6 = 4 (d = 2); ablated 3 - 2.5 = 0.5; context shift 3.5, part 0.875
    assert out["shift_over_sd"].tolist() == [2.0]
    assert out["context_shift_over_sd"].tolist() == [1.75]
    assert out["n_effect_and_context"] == 1


# ----------------------------------------------------------------------------------------------
# The paired bootstrap and the max over baselines
# ----------------------------------------------------------------------------------------------


def _auc_by_pairs(score, truth):
    pos = [s for s, t in zip(score, truth) if t]
    neg = [s for s, t in zip(score, truth) if not t]
    if not pos or not neg:
        return math.nan
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg))
    return wins / (len(pos) * len(neg))


def test_paired_bootstrap_delta_on_a_hand_made_case():
    truth = np.array([True, True, False, False, False, False])
    scores = {"score": np.array([6.0, 5, 4, 3, 2, 1]),
              "a": np.array([1.0, 6, 5, 4, 3, 2]),
              "b": np.array([6.0, 1, 2, 5, 4, 3])}
    boot = np.array([truth, truth, [True, False, False, False, False, True],
                     [False] * 6])  # the last resample's truth is empty
    draws = np.array([[0, 1, 2, 3, 4, 5], [0, 0, 2, 3, 3, 5], [0, 1, 5, 2, 3, 4],
                      [0, 1, 2, 3, 4, 5]])
    protocol = replace(PROTOCOL, bootstrap=replace(PROTOCOL.bootstrap, level=0.5),
                       verdict=replace(PROTOCOL.verdict, min_truth=1), primary_score="score")
    out = primary_comparison(scores, truth, boot, draws, protocol)
    # The score is the one the protocol names, wherever it stands among the scores.
    assert primary_comparison({**dict(list(scores.items())[1:]), "score": scores["score"]},
                              truth, boot, draws, protocol) == out
    with pytest.raises(InputError, match="registered score 'frequency_aware'"):
        primary_comparison(scores, truth, boot, draws,
                           replace(protocol, primary_score=PROTOCOL.primary_score))
    aucs = {n: [_auc_by_pairs(s[d], m[d]) for m, d in zip(boot, draws)] for n, s in scores.items()}
    deltas = [aucs["score"][b] - max(aucs["a"][b], aucs["b"][b]) for b in range(3)]
    assert out.undefined_resamples == 1 and out.n_resamples == 4
    assert out.delta_ci95 == pytest.approx(np.percentile(deltas, [25, 75]).tolist())
    point = {n: _auc_by_pairs(s, truth) for n, s in scores.items()}
    assert out.delta == pytest.approx(point["score"] - max(point["a"], point["b"]))
    assert out.best_baseline == max(("a", "b"), key=point.get)
    for b in out.baselines:
        diffs = [aucs["score"][k] - aucs[b.name][k] for k in range(3)]
        assert b.auc == pytest.approx(point[b.name])
        assert b.difference_ci95 == pytest.approx(np.percentile(diffs, [25, 75]).tolist())
        best = [max(("a", "b"), key=lambda n: aucs[n][k]) for k in range(3)]
        assert b.best_in_resamples == best.count(b.name)


def test_delta_takes_the_best_baseline_inside_each_resample():
    score = np.array([0.8, 0.7, 0.9, math.nan])
    baselines = np.array([[0.6, 0.75, 0.5, 0.5], [0.7, 0.5, 0.95, 0.5]])
    delta, best = paired_delta(score, baselines)
    np.testing.assert_allclose(delta[:3], [0.1, -0.05, -0.05])
    assert best.tolist() == [1, 0, 1, -1] and math.isnan(delta[3])
    assert np.all(delta[:3] <= score[:3] - baselines[:, :3] + 1e-12)  # conservative for every b


@pytest.mark.parametrize("ci, n_truth, has_context, expected, equivalent", [
    ([0.001, 0.2], 30, True, PrimaryVerdict.ADDS_SOMETHING, False),
    ([-0.2, -0.001], 30, True, PrimaryVerdict.BASELINE_BETTER, False),
    ([0.0, 0.04], 30, True, PrimaryVerdict.NO_DIFFERENCE, True),  # a lower bound 0 is not > 0
    ([-0.05, 0.05], 30, True, PrimaryVerdict.NO_DIFFERENCE, True),  # the margin's ends: inside
    ([-0.06, 0.02], 30, True, PrimaryVerdict.NO_DIFFERENCE, False),
    ([0.1, 0.2], 29, True, PrimaryVerdict.NOT_TESTABLE, False),
    ([0.1, 0.2], 30, False, PrimaryVerdict.NOT_TESTABLE, False),
])
def test_primary_verdict_labels(ci, n_truth, has_context, expected, equivalent):
    label, inside = primary_verdict(ci, n_truth, has_context,
                                    PROTOCOL.primary.equivalence_margin, 30)
    assert label == expected and inside == equivalent


def test_unit_draws_and_neuron_draws_use_separate_generators():
    index, units = np.array([0, 0, 1, 1]), ["x", "y", "z", "w"]
    weights = st.cluster_weights(index, units, 5, PROTOCOL.seeds.units)
    rng = np.random.Generator(np.random.PCG64(PROTOCOL.seeds.units))
    first = rng.integers(0, 2, size=(5, 2))  # domain 0's draws come first
    assert weights[:, 0].tolist() == (first == 0).sum(1).tolist()


# ----------------------------------------------------------------------------------------------
# Models, the label-free arm
# ----------------------------------------------------------------------------------------------


def test_pending_models_are_named_never_left_out(monkeypatch, tmp_path):
    _table_with(monkeypatch, directory={"trained-seed1": tmp_path / "none",
                                        "gpt2-layer0-shape": tmp_path / "none"})
    seed0 = v3_case(primary=primary_case(verdict=PrimaryVerdict.NO_DIFFERENCE))
    out = model_entries({"trained-seed0": seed0})
    assert out["trained-seed1"] == NOT_EVALUATED  # in the package, but no result here
    assert isinstance(out["gpt2-layer0-shape"], Pending)
    assert str(out["gpt2-layer0-shape"]).startswith("pending: no v3 result from a lent GPU")
    _table_with(monkeypatch, pending={"gpt2-layer0-shape": None})
    assert model_entries({"trained-seed0": seed0})["gpt2-layer0-shape"] == PENDING
    out = model_entries({"trained-seed0": seed0, "trained-seed1": v3_case(
        primary=primary_case(verdict=PrimaryVerdict.ADDS_SOMETHING))})
    assert out["trained-seed1"].replicates is False
    # a model the protocol cannot judge is reported with its reason and no number
    out = model_entries({"trained-seed0": NotComparable("corpus weights differ")})
    assert out["trained-seed0"].status == EntryStatus.NOT_COMPARABLE
    assert out["trained-seed0"].reason == "corpus weights differ"
    assert out["trained-seed0"].to_json() == "not comparable: corpus weights differ"


def test_a_model_without_a_result_is_a_typed_entry_that_prints_its_one_line():
    """Issue 51: why a registered model has no result is a value with its status and its reason
    as fields (no reader parses it back out of text); it prints and goes to the JSON as the
    line it was before it was typed."""
    from context_neurons.verdict.entries import NotEvaluated, StaleStored

    assert str(PENDING) == PENDING.to_json() == "pending: not trained"
    assert isinstance(NOT_EVALUATED, NotEvaluated) and str(NOT_EVALUATED).startswith(
        "not evaluated in this run (`python -m context_neurons reproduce --model trained`")
    assert str(NotComparable("corpus weights differ")) == "not comparable: corpus weights differ"
    assert str(StaleStored("weights changed")) == "stored result not used: weights changed"
    assert Pending("x") != NotComparable("x") and Pending("x") == Pending("x")
    assert v3_case().status == EntryStatus.THIS_RUN
    assert replace(v3_case(), stored={"command": "c"}).status == EntryStatus.STORED


def test_verdicts_are_enums_whose_words_print_and_read_back_unchanged():
    from context_neurons.verdict.results import ScoreResult
    from context_neurons.verdict.comparison import PrimaryComparison

    written = json.loads(json.dumps(score_result(verdict=Verdict.INCONCLUSIVE).to_json()))
    assert written["verdict"] == "inconclusive" and "deciding_truth_size" in written
    read = ScoreResult.from_json(written)  # a stored word is read back as its member
    assert read.verdict is Verdict.INCONCLUSIVE and f"{read.verdict.upper()}" == "INCONCLUSIVE"
    primary = primary_case(verdict=PrimaryVerdict.NO_DIFFERENCE)
    written = json.loads(json.dumps(primary.to_json()))
    assert written["verdict"] == "no difference shown" and "(equivalent" in written["words"]
    margin = PROTOCOL.primary.equivalence_margin
    assert "equivalence_margin" not in written  # the protocol's: not in the result's JSON
    assert PrimaryComparison.from_json(written, margin) == primary
    sensitivity = PrimaryComparison.from_json({**written, "verdict": None}, margin)
    assert sensitivity.verdict is None  # a sensitivity: no verdict


def _table_with(monkeypatch, directory: dict | None = None, pending: dict | None = None) -> None:
    """Stand a table of registered models in for :data:`V3_MODELS`: the same models, with the
    ``directory`` and ``pending`` reason given here by name."""
    from context_neurons.verdict import v3_models

    directory, pending = directory or {}, pending or {}
    monkeypatch.setattr(v3_models, "V3_MODELS", tuple(
        replace(m, directory=directory.get(m.name, m.directory),
                pending=pending.get(m.name, m.pending)) for m in v3_models.V3_MODELS))


def _fake_model_dir(folder: Path, weights: bytes) -> Path:
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(weights)
    return folder


def test_a_stored_result_is_used_only_for_the_weights_and_protocol_it_was_computed_from(
        monkeypatch, tmp_path):
    from context_neurons.verdict import v3_stored

    folder = _fake_model_dir(tmp_path / "seed1", b"weights")
    _table_with(monkeypatch, directory={"trained-seed1": folder})
    entry = v3_case(model="trained-seed1",
                    primary=primary_case(verdict=PrimaryVerdict.ADDS_SOMETHING))
    path = v3_stored.store_result(folder, "trained-seed1", entry.to_json(),
                                  "python -m x --store", 1)
    assert path == folder / v3_stored.STORED_FILE and not list(folder.glob(".*tmp*"))
    read = v3_stored.stored_entry("trained-seed1")
    assert read.primary == entry.primary and read.stored["command"] == "python -m x --store"
    assert replace(read, stored=None) == entry  # typed, and read back unchanged
    assert "stored result, not computed in this run" in v3_stored.stored_words(read)
    out = model_entries({"trained-seed0": v3_case(
        primary=primary_case(verdict=PrimaryVerdict.ADDS_SOMETHING))})
    assert out["trained-seed1"].replicates is True and out["trained-seed1"].stored
    out = model_entries({"trained-seed0": v3_case()})  # no difference shown
    assert out["trained-seed1"].replicates is False
    assert model_entries({})["trained-seed1"].replicates is None  # seed 0 not evaluated
    (folder / "model.safetensors").write_bytes(b"other weights")  # retrained: stale
    stale = v3_stored.stored_entry("trained-seed1")
    assert stale.status == EntryStatus.STALE and "python -m x" in stale.reason
    assert str(stale).startswith("stored result not used: weights changed")
    _table_with(monkeypatch, directory={"gpt2-layer0-shape": tmp_path / "none"})
    assert v3_stored.stored_entry("gpt2-layer0-shape") is None


def test_a_result_whose_weights_were_not_kept_is_labelled_and_checked_against_the_protocol(
        monkeypatch, tmp_path):
    """The GPT-2-shaped model's v3 result, computed on the GPU that trained it: no weights to
    hash, the device in its label, stale when the protocol files change."""
    import datetime
    import json

    from context_neurons.verdict import v3_stored

    folder = tmp_path / "gpt2"
    folder.mkdir()
    _table_with(monkeypatch, directory={"gpt2-layer0-shape": folder})
    nan = math.nan  # an empty truth: every AUC undefined, written to JSON as null
    primary = primary_case(verdict=PrimaryVerdict.NOT_TESTABLE, score_auc=nan,
                           score_auc_ci95=[nan, nan], delta=nan, delta_ci95=[nan, nan], n_truth=0,
                           baselines=(baseline_case(auc=nan, auc_ci95=[nan, nan]),))
    entry = v3_case(model="gpt2-layer0-shape", primary=primary, truth=truth_case(
        n_truth=0, n_truth_ci95=[nan, nan]), secondary={"frequency_aware": score_result(
            auc=nan, auc_ci95=[nan, nan], verdict=Verdict.NOT_TESTABLE)})
    when = datetime.datetime(2026, 11, 27, 22, 53, tzinfo=datetime.timezone.utc)
    v3_stored.store_result(folder, "gpt2-layer0-shape", jsonable(entry.to_json()),
                           "v3 --device cuda", 12, when,
                           {"python": "3.12.3", "torch": "2.11.0+cu130"},
                           device=v3_stored.device_label("cuda", "H100"))
    assert v3_stored.device_label("cpu", None) == "cpu"
    json.loads((folder / v3_stored.STORED_FILE).read_text(),  # JSON: null, never NaN
               parse_constant=lambda name: pytest.fail(f"{name} in the stored JSON"))
    read = v3_stored.stored_entry("gpt2-layer0-shape")  # typed again: null is NaN
    assert math.isnan(read.primary.delta) and math.isnan(read.primary.baselines[0].auc_ci95[1])
    assert math.isnan(read.truth.n_truth_ci95[0]) and read.truth.n_truth == 0
    assert math.isnan(read.secondary["frequency_aware"].auc)
    assert read.primary.words() == entry.primary.words()
    assert read.stored["weights_sha256"] is None
    assert v3_stored.stored_words(read) == (
        "stored result, not computed in this run: `v3 --device cuda` on 2026-11-27 22:53 UTC "
        "(12 thread(s), torch 2.11.0+cu130, on cuda (H100)); its weights were not kept")
    # not testable: it neither replicates nor contradicts seed 0
    seed0 = v3_case(primary=primary_case(verdict=PrimaryVerdict.NO_DIFFERENCE))
    assert model_entries({"trained-seed0": seed0})["gpt2-layer0-shape"].replicates is None
    monkeypatch.setattr(v3_stored, "_protocol_hashes", lambda: {"changed": "0"})
    assert str(v3_stored.stored_entry("gpt2-layer0-shape")).startswith(
        "stored result not used: protocol changed")


def test_the_shipped_gpt2_shaped_result_matches_the_protocol_and_its_training_record():
    """assets/gpt2-layer0-shape: the record of the run v3 judged (scripts/device_steps.py
    import-v3 after scripts/device_jobs.sh step 2), and today's protocol."""
    from context_neurons.training.summary import training_run
    from context_neurons.verdict.v3_models import model_key, registered_model
    from context_neurons.verdict.v3_stored import stored_entry

    entry = stored_entry("gpt2-layer0-shape")
    assert entry is not None and entry.status == EntryStatus.STORED, entry
    model = registered_model("gpt2-layer0-shape")
    run = training_run(model.directory)
    assert not model.weights_kept
    assert model_key(run) == entry.model == "gpt2-layer0-shape"
    assert run.config.d_mlp == 3072 and entry.stored["device"].startswith("cuda")
    assert entry.stored["weights_sha256"] is None


def test_the_shipped_replication_result_matches_the_shipped_weights_and_protocol():
    """verdict-v3.json beside the seed-1 weights was computed from them and from today's
    protocol (else regenerate it: python -m context_neurons v3 --model trained-seed1
    --store --threads 1)."""
    from context_neurons.verdict.v3_stored import stored_entry

    entry = stored_entry("trained-seed1")
    assert entry is not None and entry.status == EntryStatus.STORED, entry
    assert entry.model == "trained-seed1" and entry.primary.verdict in (
        PrimaryVerdict.ADDS_SOMETHING, PrimaryVerdict.NO_DIFFERENCE, PrimaryVerdict.BASELINE_BETTER)


def test_replication_rows_put_every_model_side_by_side():
    from context_neurons.verdict.v3_report import replication_rows

    primary = primary_case(delta=0.001, delta_ci95=[-0.019, 0.017])
    seed0 = v3_case((1, 6, 7), truth=truth_case(n_truth=157), primary=primary)
    stored = {"command": "c", "computed": "2026-11-27 06:20 UTC", "threads": 1,
              "versions": {"torch": "2.13.0"}}
    seed1 = replace(seed0, primary=replace(primary, verdict=PrimaryVerdict.BASELINE_BETTER),
                    replicates=False, stored=stored)
    rows = replication_rows({"trained-seed0": seed0, "trained-seed1": seed1,
                             "gpt2-layer0-shape": PENDING})
    assert rows["trained-seed0"] == {
        "result": "this run", "context set": "[1, 6, 7]", "|T|": "157",
        "primary verdict": "no difference shown (equivalent within 0.05)",
        "Delta [95%]": "0.001 [-0.019, 0.017]", "secondary (frequency-aware)": "positive",
        "replicates seed 0": "-"}
    assert rows["trained-seed1"]["result"] == "stored"
    assert rows["trained-seed1"]["replicates seed 0"] == "no"
    assert rows["gpt2-layer0-shape"] == {"result": "pending", **dict.fromkeys(
        v3_report.REPLICATION_COLUMNS, "-")}
    assert list(rows["trained-seed0"]) == ["result", *v3_report.REPLICATION_COLUMNS]
    assert replication_rows({"trained-seed1": NOT_EVALUATED})["trained-seed1"]["result"] == (
        "not evaluated in this run")
    lines = v3_report.source_lines({"trained-seed0": seed0, "trained-seed1": seed1,
                                    "gpt2-layer0-shape": PENDING})
    assert lines == ["trained-seed0: computed in this run",
                     "trained-seed1: stored result, not computed in this run: `c` on 2026-11-27 "
                     "06:20 UTC (1 thread(s), torch 2.13.0)", f"gpt2-layer0-shape: {PENDING}"]


def test_adjusted_rand_index_matches_scikit_learn():
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 4, 60), rng.integers(0, 3, 60)
    assert adjusted_rand_index(a, b) == pytest.approx(adjusted_rand_score(a, b))
    assert adjusted_rand_index(a, a) == pytest.approx(1.0)


def test_tf_idf_features_follow_the_registered_recipe():
    units = [np.array([9, 1, 1, 2, 3, 5]), np.array([9, 1, 2, 2, 4]), np.array([9, 4, 4, 1, 3]),
             np.array([9, 2, 3, 5, 5]), np.array([9, 6, 1, 9, 2])]  # 9: separators, 6: df 1
    x = tf_idf_features(units, d_vocab=10, eot_id=9, n_components=50)
    counts = np.zeros((5, 10))
    for i, unit in enumerate(units):
        for t in unit:
            if t != 9:
                counts[i, t] += 1
    tf = counts / counts.sum(1, keepdims=True)
    df = (counts > 0).sum(0)
    keep = df >= 2
    raw = tf[:, keep] * np.log(5 / df[keep])
    raw = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    raw = raw - raw.mean(0)
    u, s, _ = np.linalg.svd(raw, full_matrices=False)
    expected = u * s
    expected = expected / np.linalg.norm(expected, axis=1, keepdims=True)
    assert x.shape == expected.shape
    np.testing.assert_allclose(x @ x.T, expected @ expected.T, atol=1e-10)  # up to signs
    assert re.search("k = 8", PROTOCOL.document["exploratory_label_free"]["clustering"])


# ----------------------------------------------------------------------------------------------
# The main job's rows and the report's sentences
# ----------------------------------------------------------------------------------------------


def test_a_run_protocol_v3_does_not_register_is_refused_never_named_by_guess(monkeypatch,
                                                                            tmp_path):
    """A trained run that is none of the registered models (here seed 7): the v3 command
    refuses it before loading the model, and the main job's v3 rows say why, with every
    registered model's stored entry still shown (issue 51: it was named 'trained-seed7' and
    then left out of the models' table)."""
    import math
    import shutil

    from context_neurons.checks import InputError
    from context_neurons.method import MethodValues
    from context_neurons.models import load_model
    from context_neurons.models.loading import TRAINED_SEED1_DIR
    from context_neurons.reproduce.verdict_rows_v3 import KEYS, v3_rows
    from context_neurons.training.summary import training_run
    from context_neurons.verdict import v3
    from context_neurons.verdict.v3_models import model_names

    def no_load(*args, **kwargs):
        raise AssertionError("the model was loaded")

    folder = tmp_path / "seed7"
    shutil.copytree(TRAINED_SEED1_DIR, folder, ignore=shutil.ignore_patterns("verdict-v3.json"))
    record = json.loads((folder / "training.json").read_text())
    record["seed"] = record["config"]["seed"] = 7
    (folder / "training.json").write_text(json.dumps(record))
    monkeypatch.setattr(v3, "load_model", no_load)
    with pytest.raises(InputError, match="seed 7.*not a model protocol v3 registers"):
        v3.run(str(folder))
    loaded = load_model("trained")
    rows, entries = v3_rows(loaded, training_run(folder), MethodValues(loaded.model))
    assert entries is None and [r.key for r in rows] == [*KEYS, "discovery_models_v3"]
    assert all(math.isnan(r.value) and "not a model protocol v3 registers" in r.label
               for r in rows[:-1])
    assert tuple(rows[-1].value) == model_names()


def test_main_job_rows_say_why_when_the_documents_are_missing(monkeypatch):
    """Online (no corpora), protocol v3's rows are there, NaN, with the reason: never left out."""
    import math

    from context_neurons.method import MethodValues
    from context_neurons.models import load_model
    from context_neurons.models.loading import TRAINED_DIR
    from context_neurons.reproduce.verdict_rows_v3 import KEYS, v3_rows
    from context_neurons.training.summary import training_run
    from context_neurons.verdict.v3_models import model_names
    from context_neurons.verdict.v3_stored import stored_entry

    monkeypatch.setenv("CONTEXT_NEURONS_CORPORA", "none")
    model = load_model("trained").model
    rows, entries = v3_rows(load_model("trained"), training_run(TRAINED_DIR), MethodValues(model))
    assert entries is None and [r.key for r in rows] == [*KEYS, "discovery_models_v3"]
    assert all(math.isnan(r.value) and r.label.startswith("not computed: Protocol v3 reads")
               for r in rows[:-1])
    # the stored results are still shown (issue 52), each labelled stored, never as this run's
    models = rows[-1]
    assert "none computed in this run" in models.label
    assert tuple(models.value) == model_names()
    for name in model_names():  # all three are stored with the package
        assert models.value[name]["primary verdict"] == stored_entry(name).primary_verdict


def test_baseline_records_and_sentences_print_every_baseline_and_model():
    from context_neurons.verdict.v3_report import baseline_records, verdict_sentences_v3

    primary = primary_case(
        (baseline_case(difference_ci95=[0.42, 0.54]),), score_auc=0.92,
        score_auc_ci95=[0.89, 0.94], delta=0.49, delta_ci95=[0.42, 0.54], best_baseline="top",
        verdict=PrimaryVerdict.ADDS_SOMETHING, equivalent_within_margin=False)
    records = baseline_records(primary)
    assert records == {
        "frequency_aware": {"AUC": "0.920 [0.890, 0.940]", "score minus it": "-",
                            "best in resamples": "-"},
        "top": {"AUC": "0.430 [0.390, 0.490]", "score minus it": "0.490 [0.420, 0.540]",
                "best in resamples": "0 of 2000"}}
    seed1 = v3_case((2,), replicates=False, primary=replace(
        primary, verdict=PrimaryVerdict.NO_DIFFERENCE), secondary={})
    stopped = v3_case((), truth=None, primary=None, secondary={},
                            stopped="not testable: no non-local contextual head")
    lines = verdict_sentences_v3({"trained-seed0": stopped, "trained-seed1": seed1,
                                  "gpt2-layer0-shape": PENDING})
    assert lines[0] == ("trained-seed0: context set []: not testable: no non-local contextual "
                        "head")
    assert lines[1] == ("trained-seed1: context set [2]; 40 context neurons by activation of 45 "
                        "with |d| >= 1: the context criterion removes 5 (11.1%)")
    assert lines[2].startswith("trained-seed1: PRIMARY: NO DIFFERENCE SHOWN: ")
    assert lines[2].endswith("(does not replicate seed 0)")
    assert lines[3] == "gpt2-layer0-shape: pending: not trained"


def test_the_equivalence_label_goes_only_with_no_difference_shown():
    """PrimaryComparison.words: 'equivalent within 0.05' is said only beside 'no difference
    shown', never beside another verdict or a sensitivity's missing one."""
    base = primary_case(delta=-0.02, delta_ci95=[-0.04, -0.01], best_baseline="top")
    assert "(equivalent within 0.05)" in base.words()
    assert base.label() == "no difference shown (equivalent within 0.05)"
    for verdict in (PrimaryVerdict.BASELINE_BETTER, PrimaryVerdict.ADDS_SOMETHING, None):
        words = replace(base, verdict=verdict).words()
        assert "equivalent" not in words, words
    assert replace(base, verdict=None).words() == (
        "no verdict (sensitivity): AUC(frequency-aware) minus the best baseline's AUC = -0.020 "
        "[-0.040, -0.010] (best baseline: top; AUC(frequency-aware) = 0.900 [0.800, 0.950])")


def test_decomposition_readings_word_each_registered_verdict():
    """Chapter 8.10's sentences, computed in the package (issue 33): each primary verdict the
    protocol registers has its words about the decomposition."""
    from context_neurons.verdict.v3_report import MEANING, decomposition_readings

    assert set(MEANING) == set(PrimaryVerdict)
    result = v3_case(primary=primary_case(
        verdict=PrimaryVerdict.NO_DIFFERENCE, delta=0.001, delta_ci95=[-0.019, 0.017],
        best_baseline="d_without_share"))
    primary, secondary = decomposition_readings(result)
    assert primary == ("- Protocol v3 (confirmatory), primary: NO DIFFERENCE SHOWN. The "
                       "decomposition's context share does not add measurably to the ranking: the "
                       "score's AUC minus the best baseline's is 0.001 [-0.019, 0.017], the best "
                       "baseline at the point being d without share.")
    assert "frequency-aware score is POSITIVE" in secondary and "top[j] is NEGATIVE" in secondary


def test_detail_lines_word_every_secondary_control_sensitivity_and_unpooled_domain():
    """Chapter 8.8's details of one model, computed in the package (issue 33): one line per
    secondary verdict, the vocabulary control, one per sensitivity and one per domain not
    pooled, an undefined rho said in words."""
    from context_neurons.verdict.results import Controls
    from context_neurons.verdict.v3_report import detail_lines
    from context_neurons.verdict.v3_result import NonPooledDomain, Sensitivity, V3Controls

    score = score_result(verdict=Verdict.INCONCLUSIVE, auc=0.7, auc_ci95=[0.6, 0.8],
                         spearman=0.2, spearman_ci95=[0.1, 0.3], precision=0.25, base_rate=0.1)
    entry = v3_case(
        secondary={"frequency_aware": score, "top": replace(score, verdict=Verdict.NEGATIVE)},
        controls=V3Controls(Controls(score, {})),
        sensitivities={"cohens_d_0.5": Sensitivity(n_truth=40, note="wider truth")},
        non_pooled={"astronomy": NonPooledDomain(1, 4, None, 0, [], [])})
    lines = detail_lines(entry)
    assert lines[0] == ("secondary, frequency-aware: INCONCLUSIVE; AUC 0.700 [0.600, 0.800], rho "
                        "0.200 [0.100, 0.300], precision 0.25 (base rate 0.10)")
    assert lines[1].startswith("secondary, top: NEGATIVE; AUC 0.700")
    assert lines[2] == ("control, token ids permuted in p_D: AUC 0.700 [0.600, 0.800], rho "
                        "0.200 [0.100, 0.300]")
    assert lines[3] == "sensitivity cohens d 0.5 (no verdict): |T| = 40; wider truth"
    assert lines[4] == ("not pooled, astronomy: 1 documents, 4 windows, rho undefined, neurons "
                        "with |d| >= 1 and the context set's part >= 0.5: 0")
    assert len(lines) == 5


def test_a_v3_result_reads_back_from_its_json_unchanged():
    """V3Evaluation.from_json inverts to_json (the shipped stored result: every field, the
    context set's per-head measures, the truth and the primary comparison with its baselines),
    so that a stored result can be handled as the typed value a run returns."""
    import json

    from context_neurons.models.loading import TRAINED_SEED1_DIR
    from context_neurons.verdict.v3_result import V3Evaluation
    from context_neurons.verdict.v3_stored import STORED_FILE

    written = json.loads((TRAINED_SEED1_DIR / STORED_FILE).read_text())["result"]
    typed = V3Evaluation.from_json(written)
    assert typed.context_set.heads == tuple(written["context_set"]["heads"])
    assert typed.primary.baselines[0].name == next(iter(written["primary"]["baselines"]))
    assert typed.truth.sentence() == written["truth"]["sentence"]
    assert json.loads(json.dumps(typed.to_json())) == written
    assert typed.controls.neurons_permuted.void is False  # typed, read by attribute
    assert list(typed.controls.apart) == ["step_0", "planted"]  # timed apart: JSON as written
    assert typed.sensitivities["non_local_set"].comparison.verdict is None
    assert typed.non_pooled["legal"].units == written["non_pooled"]["legal"]["units"]


@pytest.mark.parametrize("name", ["trained-seed1", "gpt2-layer0-shape"])
def test_every_shipped_v3_result_goes_back_to_the_json_it_was_read_from(name):
    """Each stored v3 result in the package, read typed and written again, is the JSON it was
    read from, key for key and in order, except the comparisons' words, which are derived: the
    GPT-2-shaped model's were written with "NaN" before an undefined number was "undefined"."""
    import json

    from context_neurons.verdict.v3_result import V3Evaluation
    from context_neurons.verdict.v3_models import registered_model
    from context_neurons.verdict.v3_stored import STORED_FILE

    path = registered_model(name).directory / STORED_FILE
    written = json.loads(path.read_text())["result"]
    typed = V3Evaluation.from_json(written)
    again = json.loads(json.dumps(typed.to_json()))
    expected = {**written, "primary": {**written["primary"], "words": typed.primary.words()}}
    expected["sensitivities"] = {
        name: {**entry, "comparison": {**entry["comparison"],
                                       "words": typed.sensitivities[name].words}}
        if "comparison" in entry else entry
        for name, entry in written["sensitivities"].items()}
    assert json.dumps(again) == json.dumps(expected)
    derived = [w for w in (typed.primary.words(), *(s.words for s in typed.sensitivities.values()))
               if w]
    assert derived and not any("NaN" in w for w in derived)  # undefined numbers say "undefined"
    assert json.dumps(V3Evaluation.from_json(again).to_json()) == json.dumps(typed.to_json())


def test_typed_v3_parts_write_the_json_keys_of_their_kind():
    """A sensitivity writes only the keys its kind has, in the stored order; the controls
    write one flat dict, those timed apart last; a non-pooled domain all six of its keys."""
    from context_neurons.verdict.results import Controls, RandomDirections
    from context_neurons.verdict.v3_result import (NeuronsPermuted, NonPooledDomain,
                                                   Sensitivity, V3Controls)

    assert Sensitivity(n_truth=7).to_json() == {"n_truth": 7}
    note = Sensitivity(heads=[1], note="no non-local head").to_json()
    assert note == {"heads": [1], "note": "no non-local head"}
    comparison = primary_case(verdict=None)
    full = Sensitivity(5, [4.0, 6.0], comparison, heads=[0, 2]).to_json()
    assert list(full) == ["heads", "n_truth", "n_truth_ci95", "comparison"]
    assert full["comparison"]["words"] == comparison.words()
    assert Sensitivity.from_json(full, comparison.equivalence_margin) == Sensitivity(
        5, [4.0, 6.0], comparison, [0, 2])
    controls = V3Controls(Controls(score_result(), {"top": RandomDirections(2.0, 3, 0.1)}),
                          NeuronsPermuted(0.01, -0.02, 0.1, False), {"planted": {"auc": 1.0}})
    assert list(controls.to_json()) == ["frequency_aware_vocabulary_permuted",
                                        "top_random_directions", "neurons_permuted", "planted"]
    assert controls.to_json()["neurons_permuted"] == {
        "frequency_aware_rho": 0.01, "top_rho": -0.02, "bound": 0.1, "void": False}
    assert V3Controls.from_json(controls.to_json()) == controls
    domain = NonPooledDomain(2, 8, 0.5, 3, [0.1], [0.2])
    assert NonPooledDomain.from_json(domain.to_json()) == domain


def test_the_label_free_pool_writes_only_what_it_computed():
    """A pool without domains has no Rand index; one with fewer than two kept clusters says why
    it has no score; an undefined AUC is written null and read back NaN."""
    import json
    import math

    from context_neurons.verdict.label_free import LabelFreePool
    from context_neurons.verdict.v3_result import LabelFreeArm, jsonable

    described = dict(units=3, within_cluster_ss=1.5, cluster_sizes={0: 3},
                     kept_clusters=["cluster 0"], distinctive_tokens={"cluster 0": ["a"]})
    unscored = LabelFreePool(**described, score="not computed: fewer than two kept clusters")
    assert list(unscored.to_json()) == ["units", "within_cluster_ss", "cluster_sizes",
                                        "kept_clusters", "distinctive_tokens", "score"]
    scored = LabelFreePool(**described, adjusted_rand_index=0.5, auc=math.nan,
                           auc_ci95=[0.4, 0.6], difference_vs_frequency_aware=0.1,
                           difference_ci95=[0.0, 0.2])
    written = json.loads(json.dumps(jsonable(LabelFreeArm("EXPLORATORY", {
        "mixture": scored, "general": unscored}).to_json())))
    assert written["pools"]["mixture"]["auc"] is None
    assert list(written["pools"]["mixture"])[4:7] == ["adjusted_rand_index",
                                                      "distinctive_tokens", "auc"]
    again = LabelFreeArm.from_json(written)
    assert math.isnan(again.pools["mixture"].auc) and again.pools["general"].score
    assert jsonable(again.to_json()) == written


def test_label_free_pool_clusters_two_vocabularies_and_scores_against_the_truth():
    """Units drawn from two disjoint vocabularies: the clusters follow them (a positive Rand
    index with the domains), the score is the one ``score_of`` returns for the kept clusters, and its AUC
    and paired difference with the reference are computed on the draws given."""
    import numpy as np

    from context_neurons.verdict.label_free import label_free_pool

    rng = np.random.default_rng(0)
    units = [np.concatenate([[0], rng.integers(1 + 10 * (i % 2), 11 + 10 * (i % 2), 40)])
             for i in range(40)]
    domains = ["a" if i % 2 == 0 else "b" for i in range(40)]
    truth = np.array([True] * 5 + [False] * 15)
    draws = np.stack([rng.integers(0, 20, 20) for _ in range(30)])
    boot = np.tile(truth, (30, 1))
    seen = {}

    def score_of(distributions):
        seen["clusters"] = list(distributions)
        return np.arange(20, 0, -1).astype(float)  # ranks the truth first: AUC 1

    pool = label_free_pool(units, domains, score_of, truth, boot, draws, np.full(30, 0.5), 0.5,
                           21, 0, lambda ids: f"t{ids[0]}", 0.95)
    assert pool.units == 40 and sum(pool.cluster_sizes.values()) == 40
    assert seen["clusters"] == pool.kept_clusters and len(pool.kept_clusters) >= 2
    assert pool.adjusted_rand_index > 0  # the clusters follow the two vocabularies
    assert pool.auc == 1.0 and pool.difference_vs_frequency_aware == 0.5
    assert pool.score is None and pool.difference_ci95[0] <= 0.5 <= pool.difference_ci95[1]


def test_the_v3_command_writes_every_model_and_the_reason_for_one_it_cannot_compare(
        tmp_path, monkeypatch):
    """``python -m context_neurons v3 --model DIR --out FILE`` on a model the protocol
    cannot compare (another held-out fraction): no number for it, its reason, and every other
    registered model's entry, the stored seed-1 result typed and written back as its JSON. The
    model is never loaded; a name that is not a trained run is refused before anything runs."""
    import json
    import shutil

    from context_neurons.checks import InputError
    from context_neurons.models.loading import TRAINED_SEED1_DIR
    from context_neurons.commands import v3 as v3_command
    from context_neurons.verdict import v3

    def no_load(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(v3, "load_model", no_load)
    with pytest.raises(InputError, match="training.json"):
        v3.run("gpt2")

    folder = tmp_path / "other"
    shutil.copytree(TRAINED_SEED1_DIR, folder, ignore=shutil.ignore_patterns("verdict-v3.json"))
    record = json.loads((folder / "training.json").read_text())
    record["config"]["heldout_fraction"] = 0.2
    (folder / "training.json").write_text(json.dumps(record))
    out_file = tmp_path / "v3.json"
    argv = ["--model", str(folder), "--out", str(out_file), "--no-label-free"]
    assert v3_command.main(argv) == 0
    written = json.loads(out_file.read_text())
    assert written["primary_verdict"] == "not comparable"
    models = written["models"]
    assert models["trained-seed1"] == "not comparable: held-out fraction 0.2, not 0.15"
    # seed 0 not evaluated in this run: its stored result, labelled so (issue 53)
    assert models["trained-seed0"]["stored"]["command"] == (
        "python -m context_neurons v3 --model trained --store --threads 1")
    assert models["gpt2-layer0-shape"]["stored"]["device"].startswith("cuda")  # from the GPU
    # the shipped seed-1 result, read typed, goes back to the JSON it was stored as
    stored = json.loads((TRAINED_SEED1_DIR / "verdict-v3.json").read_text())
    entries = v3_stored.entries_json(model_entries({}))
    assert entries["trained-seed1"] == {**stored["result"], "stored": {
        k: v for k, v in stored.items() if k != "result"}}


def test_the_baselines_figure_draws_the_score_and_every_baseline():
    """Figure 8.7 from a typed primary comparison: the score and each baseline's AUC on the
    left, the score minus each baseline on the right, the margin drawn at +-0.05."""
    import matplotlib.pyplot as plt

    from context_neurons.plotting.training import plot_baselines

    primary = primary_case((baseline_case("top"),
                            baseline_case("bag_of_tokens", auc=0.91, auc_ci95=[0.88, 0.93])))
    figure = plot_baselines(primary, 0.05, title="test")
    left, right = figure.axes
    assert [t.get_text() for t in left.get_yticklabels()] == [
        "frequency aware", "top", "bag of tokens"]
    assert [t.get_text() for t in right.get_yticklabels()] == ["minus top", "minus bag of tokens"]
    assert right.get_xlabel() == "AUC(frequency aware) minus the baseline's"
    assert sorted(line.get_xdata()[0] for line in right.lines if line.get_linestyle() != "None"
                  )[:1] == [-0.05]
    plt.close(figure)


def test_import_v3_brings_a_device_run_into_the_package_without_its_weights(tmp_path):
    """scripts/device_steps.py import-v3: the records of a run whose weights stayed on the GPU
    and the v3 result from its ``--out`` file, stored with the device, its threads and the
    time that file was written; a model whose weights are kept is refused."""
    import datetime
    import importlib.util
    import json
    import os
    import shutil

    from context_neurons.models.loading import TRAINED_DIR
    from context_neurons.verdict.v3_models import registered_model
    from context_neurons.verdict.v3_stored import STORED_FILE, device_label

    spec = importlib.util.spec_from_file_location(
        "device_steps", Path(__file__).resolve().parents[2] / "scripts" / "device_steps.py")
    device_steps = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(device_steps)
    shipped = registered_model("gpt2-layer0-shape").directory
    run = tmp_path / "run"
    run.mkdir()
    for name in device_steps.RECORD_FILES:
        shutil.copyfile(shipped / name, run / name)
    result = json.loads((shipped / STORED_FILE).read_text())["result"]
    (run / "verdict-v3.json").write_text(json.dumps({"models": {"gpt2-layer0-shape": result}}))
    written = datetime.datetime(2026, 11, 27, 22, 53, tzinfo=datetime.timezone.utc)
    os.utime(run / "verdict-v3.json", (written.timestamp(), written.timestamp()))
    path = device_steps.import_v3(run, "v3 --device cuda", tmp_path / "into")
    stored = json.loads(path.read_text())
    assert stored["result"] == result and stored["command"] == "v3 --device cuda"
    assert stored["computed"] == "2026-11-27 22:53 UTC" and stored["threads"] == 12
    record = json.loads((run / "training.json").read_text())
    assert stored["device"] == device_label(record["device"], record["device_name"])  # its GPU
    assert stored["device"].startswith("cuda (NVIDIA ")
    assert stored["weights_sha256"] is None and stored["versions"]["torch"].endswith("cu130")
    for name in device_steps.RECORD_FILES:
        assert (tmp_path / "into" / name).read_bytes() == (run / name).read_bytes()
    (run / "training.json").write_text((TRAINED_DIR / "training.json").read_text())
    with pytest.raises(SystemExit, match="trained-seed0"):
        device_steps.import_v3(run, "v3", tmp_path / "other")
