"""The training pipeline on a tiny configuration (two small corpora written to tmp_path): split,
tokenizer, windows, determinism of the loss log, and the saved half-precision model."""

from __future__ import annotations

import csv
import json
import random
import shutil

import numpy as np
import pytest
import torch

from context_neurons.checks import DataError

from context_neurons.training import EOT, TrainConfig, train
from context_neurons.training.analysis import (
    auc,
    distance_profiles,
    head_kernels,
    neuron_domain_auc,
)
from context_neurons.training.cli import build_parser, config_from_args
from context_neurons.training.config import config_problems, config_to_argv
from context_neurons.training.corpus import (
    corpus_names,
    heldout_documents,
    is_heldout,
    iter_documents,
    manifest_keys,
    read_manifest,
    split_corpora,
    write_manifest,
)
from context_neurons.training.loop import checkpoint_steps, learning_rate
from context_neurons.training.stream import (
    DocumentMixture,
    group_short,
    pack_windows,
    tokenize_corpus,
    tokenize_documents,
)
from context_neurons.training.tokenizer import load_tokenizer, train_tokenizer

ENGLISH = ("the cat sat on the mat and the dog ran to the house while the bird sang in the old "
           "tree by the river").split()
SPANISH = ("el gato se sienta en la casa y el perro corre hacia la plaza mientras el pájaro canta "
           "en el árbol junto al río").split()
WEIGHTS = {"tiny_en": 1.0, "tiny_es": 1.0}


def _write_corpus(folder, name: str, words: list[str], n_docs: int, seed: int) -> None:
    rng = random.Random(seed)
    (folder / name).mkdir(parents=True)
    with (folder / name / "docs.jsonl").open("w", encoding="utf-8") as handle:
        for i in range(n_docs):
            text = " ".join(rng.choice(words) for _ in range(rng.randint(40, 160)))
            handle.write(json.dumps({"id": f"doc-{i}", "text": text.capitalize() + "."}) + "\n")


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpora")
    _write_corpus(folder, "tiny_en", ENGLISH, 60, seed=1)
    _write_corpus(folder, "tiny_es", SPANISH, 60, seed=2)
    return folder


def tiny_config(corpora, out, **overrides) -> TrainConfig:
    values = dict(out=str(out), corpora=str(corpora), seed=0, threads=1, device="cpu",
                  tokens=24 * 4 * 32, n_layer=2, d_model=32, n_head=4, d_mlp=64, n_ctx=32,
                  batch_size=4, vocab_size=320, warmup_steps=4, corpus_weights=dict(WEIGHTS),
                  eval_windows=8, eval_windows_checkpoint=2, progress=False)
    values.update(overrides)
    return TrainConfig(**values)


@pytest.fixture(scope="module")
def run_dir(corpora, tmp_path_factory):
    return train(tiny_config(corpora, tmp_path_factory.mktemp("run") / "seed0"))


def _loss_log(path) -> list[tuple[str, str, str, str]]:
    """(step, tokens, loss, lr) of each row: everything but the wall-clock seconds."""
    with (path / "loss.csv").open() as handle:
        return [(r["step"], r["tokens"], r["loss"], r["lr"]) for r in csv.DictReader(handle)]


# ---- split -------------------------------------------------------------------------------------


def test_split_is_disjoint_deterministic_and_keeps_labels(corpora, tmp_path):
    split = split_corpora(list(WEIGHTS), corpora, 0.2)
    again = split_corpora(list(reversed(WEIGHTS)), corpora, 0.2)
    for corpus in WEIGHTS:
        train_keys = {d.key for d in split.train[corpus]}
        held_keys = {d.key for d in split.heldout[corpus]}
        assert not train_keys & held_keys
        assert len(train_keys | held_keys) == 60
        assert 0 < len(held_keys) < 30  # about 20 % of 60
        assert held_keys == {d.key for d in again.heldout[corpus]}  # order-independent
        assert all(d.corpus == corpus and d.key.startswith(corpus + ":")
                   for d in split.heldout[corpus])
        assert all(is_heldout(k, 0.2) for k in held_keys)
        assert not any(is_heldout(k, 0.2) for k in train_keys)
    data = read_manifest(write_manifest(split, tmp_path / "split.json"))
    assert set(manifest_keys(data, "heldout")) == {d.key for c in WEIGHTS for d in split.heldout[c]}
    assert set(manifest_keys(data, "train")) == {d.key for c in WEIGHTS for d in split.train[c]}
    assert "text" not in (tmp_path / "split.json").read_text()
    assert data["counts"]["tiny_en"]["heldout"] == len(split.heldout["tiny_en"])


def test_split_fraction_must_be_a_fraction():
    with pytest.raises(ValueError):
        is_heldout("a:b", 1.5)


# ---- tokenizer ---------------------------------------------------------------------------------


def test_tokenizer_round_trip_special_token_and_auto_loading(corpora, tmp_path):
    from transformers import AutoTokenizer

    split = split_corpora(list(WEIGHTS), corpora, 0.2)
    texts = [d.text for c in WEIGHTS for d in split.train[c]]
    tokenizer = train_tokenizer(texts, vocab_size=320)
    eot = tokenizer.convert_tokens_to_ids(EOT)
    assert eot == len(tokenizer) - 1 and len(tokenizer) <= 320
    assert len(tokenizer.encode(" the")) == 1
    ids = tokenizer.encode(f"el río{EOT} the cat")
    assert ids.count(eot) == 1  # the special token is one id, never split into bytes
    for text in ["The old tree, by the river.", "  el pájaro canta\n\tjunto al río ¿sí? 😀", ""]:
        assert tokenizer.decode(tokenizer.encode(text)) == text
    assert tokenizer.encode("the") != tokenizer.encode(" the")  # no prefix space added
    tokenizer.save_pretrained(tmp_path / "tok")
    loaded = AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    assert loaded.bos_token == loaded.eos_token == EOT
    assert loaded.bos_token_id == loaded.eos_token_id == eot
    assert loaded.encode("the cat sat") == tokenizer.encode("the cat sat")
    assert loaded.encode(" the cat")[0] != eot  # no BOS added by the tokenizer itself
    assert load_tokenizer(tmp_path / "tok").encode(" the") == tokenizer.encode(" the")


# ---- windows -----------------------------------------------------------------------------------


def test_windows_start_with_bos_and_cover_the_stream():
    eot = 99
    stream = np.array([eot, 1, 2, 3, 4, 5, 6, eot, 7, 8, eot, 9, 10, 11, 12, 13, 14, 15, 16])
    windows = pack_windows(stream, 4, eot)
    assert windows.shape[1] == 4 and len(windows) >= 4
    assert (windows[:, 0] == eot).all()
    # without a prepended BOS, the windows are consecutive pieces of the stream
    p = 0
    for w in windows:
        piece = w if stream[p] == eot else w[1:]
        assert (stream[p:p + len(piece)] == piece).all()
        p += len(piece)
    assert p <= len(stream) and len(stream) - p < 4  # at most a partial window is dropped
    # no window starts with two BOS
    assert not ((windows[:, 0] == eot) & (windows[:, 1] == eot)).any()


def test_training_windows_start_with_bos(corpora):
    split = split_corpora(list(WEIGHTS), corpora, 0.2)
    tokenizer = train_tokenizer([d.text for d in split.train["tiny_en"]], vocab_size=320)
    eot = tokenizer.convert_tokens_to_ids(EOT)
    stream = tokenize_corpus(split.train["tiny_en"], tokenizer, eot)
    assert stream[0] == eot and (stream == eot).sum() == len(split.train["tiny_en"])
    assert (pack_windows(stream, 32, eot)[:, 0] == eot).all()
    units = {c: tokenize_documents(split.train[c], tokenizer, eot) for c in WEIGHTS}
    mixture = DocumentMixture(units, dict(WEIGHTS), seed=0, n_ctx=32, eot_id=eot, n_streams=3)
    batches = [mixture.batch(3) for _ in range(40)]
    assert all(b.shape == (3, 32) and (b[:, 0] == eot).all() for b in batches)
    assert not any(((b[:, 0] == eot) & (b[:, 1] == eot)).any() for b in batches)
    row0 = np.concatenate([b[0].numpy() for b in batches])
    assert (row0 == eot).sum() >= 5  # documents follow each other in a stream
    assert not all(torch.equal(b[0], b[1]) for b in batches)  # rows are separate streams
    with pytest.raises(ValueError):
        mixture.batch(4)


def test_short_documents_are_grouped_with_their_separators():
    docs = [np.array([9, 1, 2]), np.array([9, 3]), np.array([9, 4, 5, 6]), np.array([9, 7])]
    units = group_short(docs, min_tokens=5)
    assert [u.tolist() for u in units] == [[9, 1, 2, 9, 3], [9, 4, 5, 6, 9, 7]]


def test_mixture_follows_token_weights_and_seed():
    short = [np.array([9] + [1] * 9) for _ in range(50)]  # 10 tokens each
    long = [np.array([9] + [2] * 39) for _ in range(50)]  # 40 tokens each
    units = {"a": short, "b": long}
    mixture = DocumentMixture(units, {"a": 3.0, "b": 1.0}, seed=0, n_ctx=16, eot_id=9, n_streams=4)
    tokens = torch.cat([mixture.batch(4).flatten() for _ in range(500)])
    share_a = float((tokens == 1).sum() / ((tokens == 1).sum() + (tokens == 2).sum()))
    assert 0.7 < share_a < 0.8  # token shares follow the weights despite unequal lengths
    assert abs(mixture.tokens_seen_share()["a"] - 0.75) < 0.05
    one = DocumentMixture(units, {"a": 1.0, "b": 1.0}, 5, 16, 9, 2)
    two = DocumentMixture(units, {"a": 1.0, "b": 1.0}, 5, 16, 9, 2)
    other = DocumentMixture(units, {"a": 1.0, "b": 1.0}, 6, 16, 9, 2)
    first = [one.batch(2) for _ in range(20)]
    assert all(torch.equal(x, two.batch(2)) for x in first)
    assert not all(torch.equal(x, other.batch(2)) for x in first)
    with pytest.raises(ValueError):
        DocumentMixture(units, {"a": 1.0, "missing": 1.0}, 0, 16, 9, 2)


# ---- schedule and checkpoints ------------------------------------------------------------------


def test_schedule_warms_up_then_decays_to_the_floor():
    cfg = TrainConfig(lr=1e-3, warmup_steps=10, min_lr_ratio=0.1)
    lrs = [learning_rate(s, 100, cfg) for s in range(100)]
    assert lrs[0] < lrs[5] < lrs[9] == pytest.approx(1e-3)
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:]))
    assert lrs[-1] == pytest.approx(1e-4, rel=0.01)


def test_checkpoint_steps_are_log_spaced():
    assert checkpoint_steps(100) == [0, 1, 2, 4, 8, 16, 32, 64, 100]
    assert checkpoint_steps(64) == [0, 1, 2, 4, 8, 16, 32, 64]
    steps = checkpoint_steps(2000, n_checkpoints=12)
    assert steps[0] == 0 and steps[-1] == 2000 and 10 <= len(steps) <= 13


# ---- training ----------------------------------------------------------------------------------


def test_same_seed_same_loss_log_other_seed_differs(corpora, run_dir, tmp_path):
    first = _loss_log(run_dir)
    assert len(first) == 24 and first[-1][1] == str(24 * 4 * 32)
    again = train(tiny_config(corpora, tmp_path / "again"))
    assert _loss_log(again) == first
    other = train(tiny_config(corpora, tmp_path / "seed1", seed=1))
    assert [r[2] for r in _loss_log(other)] != [r[2] for r in first]
    assert float(first[-1][2]) < float(first[0][2])  # it learns


def test_saved_model_loads_in_half_precision_and_matches_the_trained_weights(run_dir):
    from transformers import AutoTokenizer, GPT2LMHeadModel

    final = GPT2LMHeadModel.from_pretrained(str(run_dir))
    record = json.loads((run_dir / "training.json").read_text())
    full = GPT2LMHeadModel.from_pretrained(
        str(run_dir / "checkpoints" / f"step-{record['steps']}"), dtype=torch.float32)
    half_state, full_state = final.state_dict(), full.state_dict()
    assert set(half_state) == set(full_state)
    for name, value in full_state.items():
        assert half_state[name].dtype == torch.float16, name
        assert value.dtype == torch.float32, name
        assert torch.equal(half_state[name], value.half()), name
        torch.testing.assert_close(half_state[name].float(), value, rtol=1e-3, atol=1e-4)
    assert final.transformer.wte.weight.data_ptr() == final.lm_head.weight.data_ptr()  # tied
    tokenizer = AutoTokenizer.from_pretrained(str(run_dir))
    assert tokenizer.bos_token == EOT and final.config.bos_token_id == tokenizer.bos_token_id
    assert final.config.n_positions == 32 and final.config.vocab_size == len(tokenizer)
    for key in ("command", "seed", "threads", "device", "versions", "tokens_seen",
                "wall_seconds", "tokens_per_second", "heldout_loss"):
        assert key in record, key
    assert set(record["heldout_loss"]) == {"tiny_en", "tiny_es", "mean"}
    assert record["tokens_seen"] == 24 * 4 * 32 and record["versions"]["torch"] == torch.__version__
    assert (run_dir / "model.safetensors").stat().st_size < 400_000
    assert "tiny_en" in read_manifest(run_dir / "split.json")["heldout"]


def test_recorded_command_rebuilds_the_configuration(run_dir):
    record = json.loads((run_dir / "training.json").read_text())
    argv = record["command"].split()[4:]  # after "python -m context_neurons train"
    rebuilt = config_from_args(build_parser().parse_args(argv))
    rebuilt.progress = False
    assert rebuilt.resolved().to_dict() == TrainConfig(**record["config"]).resolved().to_dict()
    assert config_to_argv(rebuilt) == argv


def test_analysis_reads_kernels_and_separates_the_two_languages(run_dir):
    from transformers import GPT2LMHeadModel

    model = GPT2LMHeadModel.from_pretrained(str(run_dir), dtype=torch.float32,
                                            attn_implementation="eager").eval()
    rows = head_kernels(model, eot_id=model.config.bos_token_id, token_id=5, query=31)
    assert len(rows) == 4
    for r in rows:
        assert 1.0 <= r["n_eff"] <= 31.0 + 1e-6
        assert 0.0 <= r["bos"] <= 1.0 and 0.0 <= r["prev"] <= 1.0
    gen = np.random.default_rng(0)
    windows = {"tiny_en": gen.integers(0, 100, (6, 32)), "tiny_es": gen.integers(150, 250, (6, 32))}
    profiles = distance_profiles(model, windows["tiny_en"])
    assert len(profiles) == 4
    for r in profiles:
        assert 1.0 <= r["n_eff"] <= 31.0 and 0.0 <= r["prev"] <= 1.0
        assert 0.0 <= r["mean_distance"] <= 31.0
    by_domain, by_corpus = neuron_domain_auc(model, windows)
    assert set(by_corpus) == {"tiny_en", "tiny_es"}
    assert np.allclose(by_corpus["tiny_en"], 1 - by_corpus["tiny_es"])
    assert (np.maximum(by_corpus["tiny_en"], by_corpus["tiny_es"]) == 1.0).any()


def test_auc_matches_a_hand_computed_example():
    scores = np.array([[0.1], [0.4], [0.35], [0.8]])
    positive = np.array([False, False, True, True])
    assert auc(scores, positive)[0] == pytest.approx(0.75)
    tied = np.array([[1.0], [1.0], [1.0], [1.0]])
    assert auc(tied, positive)[0] == pytest.approx(0.5)


def test_time_budget_is_recorded_as_a_token_budget(corpora, tmp_path):
    out = train(tiny_config(corpora, tmp_path / "timed", tokens=None, minutes=0.02,
                            save_checkpoints=False))
    record = json.loads((out / "training.json").read_text())
    assert record["tokens_per_second_measured_for_budget"] > 0
    assert record["config"]["minutes"] is None and record["config"]["tokens"] > 0
    assert "--tokens" in record["command"] and "--minutes" not in record["command"]
    assert not (out / "checkpoints").exists()


def test_stopping_early_keeps_the_schedule_of_the_whole_budget(corpora, run_dir, tmp_path):
    out = train(tiny_config(corpora, tmp_path / "short", stop_after_steps=10,
                            save_checkpoints=False))
    assert _loss_log(out) == _loss_log(run_dir)[:10]
    assert json.loads((out / "training.json").read_text())["tokens_seen"] == 10 * 4 * 32


def test_heldout_windows_are_the_runs_heldout_documents_labelled_by_domain(run_dir, corpora):
    """The held-out split recomputed from training.json is the one the run stored (split.json),
    and every window carries its corpus's domain."""
    from context_neurons.training.heldout import domain_of_corpus, labelled_windows
    from context_neurons.training.summary import training_run

    tokenizer = load_tokenizer(run_dir)
    run = training_run(run_dir)
    domains = {"english": ("tiny_en",), "spanish": ("tiny_es",)}
    windows, labels = labelled_windows(tokenizer, run, corpora, per_domain=5, domains=domains)
    assert labels == ["english"] * 5 + ["spanish"] * 5
    # a corpus listed under two domains labels nothing
    assert domain_of_corpus({"a": ("x", "y"), "b": ("y", "z")}) == {"x": "a", "z": "b"}
    assert all(len(w) == run.config.n_ctx for w in windows)
    bos = tokenizer.convert_tokens_to_ids(EOT)
    assert all(int(w[0]) == bos for w in windows)
    heldout = set(manifest_keys(read_manifest(run_dir / "split.json"), "heldout"))
    streams = {}  # each corpus's held-out documents, by the run's stored split, as one stream
    for corpus in WEIGHTS:
        docs = [d for d in iter_documents(corpus, corpora) if d.key in heldout]
        ids = tokenize_corpus(docs, tokenizer, bos).tolist()
        streams[corpus] = "," + ",".join(map(str, ids)) + ","
    for window, label in zip(windows, labels):
        corpus = "tiny_en" if label == "english" else "tiny_es"
        inner = "," + ",".join(str(int(t)) for t in window[1:]) + ","
        assert inner in streams[corpus]  # a run of the held-out stream of its own corpus
    with pytest.raises(DataError):
        training_run(corpora)


def test_a_trained_directory_loads_through_the_gpt2_loader_with_its_record(run_dir):
    from context_neurons.models import load_model

    loaded = load_model(str(run_dir), device="cpu")
    assert loaded.directory == run_dir and loaded.name == "checkpoint"
    assert loaded.model.cfg.n_ctx == 32 and loaded.model.cfg.d_vocab == 320
    assert "not GPT-2 Small" in loaded.banner()


def test_a_steps_weights_are_its_checkpoint_the_saved_model_or_the_rebuilt_initialisation(
        run_dir, tmp_path):
    """The development view's weights at a step (verdict.development.model_at_step): step 0
    rebuilt from the run's configuration and seed is the checkpoint training saved at step 0;
    a step whose checkpoint was deleted has none."""
    from context_neurons.models import load_model
    from context_neurons.models.weights import as_weights
    from context_neurons.training.summary import training_run
    from context_neurons.verdict.development import model_at_step

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    run, tokenizer = training_run(copy), load_tokenizer(copy)
    saved = as_weights(model_at_step(copy, 0, run, tokenizer))
    middle = sorted(_step_of(p) for p in (copy / "checkpoints").glob("step-*"))[1]
    shutil.rmtree(copy / "checkpoints" / "step-0")
    shutil.rmtree(copy / "checkpoints" / f"step-{middle}")
    rebuilt = as_weights(model_at_step(copy, 0, run, tokenizer))
    for name in ("W_E", "W_pos", "W_Q", "W_K", "W_V", "W_O", "W_in", "b_in"):
        torch.testing.assert_close(getattr(rebuilt, name), getattr(saved, name))
    assert model_at_step(copy, middle, run, tokenizer) is None
    shutil.rmtree(copy / "checkpoints" / f"step-{run.steps_done}")
    last = as_weights(model_at_step(copy, run.steps_done, run, tokenizer))
    torch.testing.assert_close(last.W_in, as_weights(load_model(str(copy), device="cpu")
                                                     .model).W_in)  # the saved model


def test_a_run_protocol_v3_cannot_read_gets_the_reason_not_a_silent_gap(run_dir, tmp_path):
    """A run on other corpora than v3's registered ones: every v3 column None, the reason in
    ``v3_not_computed``, and the table and sentences say "not computed". A comparable run
    whose documents are missing is an error that leaves the file as it was."""
    from context_neurons.training.development import (
        NOT_COMPUTED,
        development_findings,
        v3_checkpoint_table,
    )
    from context_neurons.verdict.development import add_v3_view

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    rows = [{"step": 0, "tokens": 0, "contextual_heads": [], "heldout_loss": 5.0}]
    (copy / "development.json").write_text(json.dumps({"checkpoints": rows}))
    summary = json.loads(add_v3_view(copy, progress=False).read_text())
    assert summary["v3_not_computed"].startswith("protocol v3 cannot compare this run: ")
    assert summary["v3_steps_without_weights"] == []
    assert summary["checkpoints"][0]["v3_truth"] is None
    assert list(v3_checkpoint_table({"tiny": summary})["v3 context set"]) == [NOT_COMPUTED]
    assert development_findings(summary)[-1].startswith("protocol v3 not computed: ")

    import context_neurons.verdict.development as dev
    from context_neurons.checks import DataError

    before = (copy / "development.json").read_text()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dev, "comparability", lambda record: None)  # as if comparable
        patch.setenv("CONTEXT_NEURONS_CORPORA", str(tmp_path / "absent"))
        with pytest.raises(DataError):
            add_v3_view(copy, progress=False)
    assert (copy / "development.json").read_text() == before


def test_v3_columns_computed_earlier_stay_when_their_weights_are_gone(run_dir, tmp_path,
                                                                      monkeypatch):
    """--v3-only on a run whose checkpoints were deleted after v3's view was written keeps that
    view: only a step with neither weights nor an earlier value is listed as not kept."""
    import context_neurons.verdict.development as dev

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    steps = sorted(_step_of(p) for p in (copy / "checkpoints").glob("step-*"))
    rows = [{"step": s, "tokens": s, "v3_context_heads": [1], "v3_truth": 7} for s in steps]
    rows[1]["v3_context_heads"] = rows[1]["v3_truth"] = None  # never computed
    summary = {"checkpoints": rows, "protocol_v3": dev.load_protocol_v3().name}
    (copy / "development.json").write_text(json.dumps(summary))
    for step in steps[1:3]:
        shutil.rmtree(copy / "checkpoints" / f"step-{step}")
    monkeypatch.setattr(dev, "comparability", lambda record: None)
    monkeypatch.setattr(dev, "v3_data", lambda *args: "data")
    monkeypatch.setattr(dev, "structure_v3", lambda model, data, protocol: {
        "v3_context_heads": [0], "v3_truth": 1})
    written = json.loads(dev.add_v3_view(copy, progress=False).read_text())
    by_step = {row["step"]: row for row in written["checkpoints"]}
    assert written["v3_steps_without_weights"] == [steps[1]]
    assert by_step[steps[2]]["v3_truth"] == 7  # kept from before
    assert by_step[steps[0]]["v3_truth"] == 1 and by_step[steps[-1]]["v3_truth"] == 1


def _step_of(path) -> int:
    return int(path.name.removeprefix("step-"))


def test_the_shipped_trained_model_loads_with_its_record_and_development():
    """The package's trained model: the loader GPT-2 uses, its record, and one summary per
    checkpoint the record lists (development.json, written from the run by summarize_run)."""
    from context_neurons.models import load_model
    from context_neurons.models.loading import TRAINED_DIR
    from context_neurons.training.development import DEVELOPMENT_FILE
    from context_neurons.training.summary import read_record

    loaded = load_model("trained", device="cpu")
    record = read_record(TRAINED_DIR)
    cfg = loaded.model.cfg
    assert loaded.directory == TRAINED_DIR and loaded.name == "trained"
    assert (cfg.n_ctx, cfg.d_model, cfg.n_layers) == (
        record["config"]["n_ctx"], record["config"]["d_model"], record["config"]["n_layer"])
    assert cfg.d_vocab == record["model"]["vocab_size"] == len(loaded.model.tokenizer)
    assert loaded.model.tokenizer.bos_token_id == record["model"]["eot_id"]
    assert "TRAINED" in loaded.banner() and "not GPT-2's" in loaded.banner()
    development = json.loads((TRAINED_DIR / DEVELOPMENT_FILE).read_text())
    steps = [row["step"] for row in development["checkpoints"]]
    # the checkpoints kept from the run: step 0, some of the log-spaced ones, and the last
    assert set(steps) <= set(record["checkpoint_steps"]) and steps == sorted(steps)
    assert steps[0] == 0 and steps[-1] == record["steps_done"]
    assert all("previous_token_heads" in row and "additive_truth" in row
               for row in development["checkpoints"])
    assert all(len(row["heads"]) == cfg.n_heads for row in development["checkpoints"])
    with (TRAINED_DIR / "loss.csv").open() as handle:
        assert sum(1 for _ in handle) == record["steps_done"] + 1  # header + one row per step


def test_heldout_documents_are_the_heldout_filter_read_once(corpora, monkeypatch):
    """``heldout_documents`` is the held-out filter over the corpus, in file order, and a
    second call (the next protocol of the same run) reads no file."""
    import context_neurons.training.corpus as corpus_module

    expected = tuple(d for d in iter_documents("tiny_en", corpora) if is_heldout(d.key, 0.3))
    assert 0 < len(expected) < 60
    assert heldout_documents("tiny_en", corpora, 0.3) == expected
    monkeypatch.setattr(corpus_module, "read_jsonl", lambda *a: pytest.fail("read again"))
    assert heldout_documents("tiny_en", str(corpora), 0.3) == expected  # a str: the same key
    with pytest.raises(pytest.fail.Exception, match="read again"):
        heldout_documents("tiny_en", corpora, 0.2)  # another fraction: another split


def test_heldout_windows_without_the_corpora_are_a_clear_error(run_dir, tmp_path):
    """Online (Colab) the training split's documents are absent: say so, before reading anything."""
    from context_neurons.training.heldout import labelled_windows
    from context_neurons.training.summary import training_run

    with pytest.raises(DataError, match="offline corpora"):
        labelled_windows(load_tokenizer(run_dir), training_run(run_dir), tmp_path / "absent")


# ---- GPT-2's tokenizer and GPT-2 Small's layer-0 shape (scripts/device_jobs.sh, step 2) ---------

#: Two blocks whose layer 0 has GPT-2 Small's shape, at GPT-2's context length.
GPT2_LAYER0 = ["--n-layer", "2", "--d-model", "768", "--n-head", "12", "--d-mlp", "3072",
               "--n-ctx", "1024", "--batch-size", "16"]


@pytest.fixture(scope="module")
def gpt2_files():
    """The directory of GPT-2's ``vocab.json`` and ``merges.txt`` (``shared/gpt2-tokenizer``)."""
    from context_neurons import config

    root = config.tokenizer_root()
    if root is None or not (root / "vocab.json").is_file():
        pytest.skip("GPT-2's vocab.json and merges.txt are not here (CONTEXT_NEURONS_TOKENIZER)")
    return root


def test_gpt2_files_load_as_gpt2s_tokenizer(gpt2_files):
    from context_neurons.models.loading import load_tokenizer as gpt2_tokenizer

    tokenizer = load_tokenizer(gpt2_files)
    assert len(tokenizer) == 50257 and tokenizer.convert_tokens_to_ids(EOT) == 50256
    assert tokenizer.encode(" the") == [262] and tokenizer.encode("Hello world") == [15496, 995]
    reference = gpt2_tokenizer(gpt2_files)  # the one the planted model and GPT-2 Small read
    for text in ["The old tree, by the river.", "  el pájaro canta\n\tjunto al río ¿sí? 😀",
                 "def f(x):\n    return x ** 2  # squared", f"one{EOT}two", ""]:
        assert tokenizer.encode(text) == reference.encode(text)
        assert tokenizer.decode(tokenizer.encode(text)) == text


def test_a_run_with_gpt2s_tokenizer_saves_and_records_it(corpora, gpt2_files, tmp_path):
    out = train(tiny_config(corpora, tmp_path / "gpt2-tokenizer", tokenizer=str(gpt2_files),
                            tokens=3 * 4 * 32, d_model=16, n_head=2, d_mlp=32,
                            save_checkpoints=False))
    record = json.loads((out / "training.json").read_text())
    assert record["model"]["vocab_size"] == 50257 and record["model"]["eot_id"] == 50256
    assert (out / "tokenizer.json").is_file()  # the run directory is self-contained
    text = "the cat sat by el río"
    assert load_tokenizer(out).encode(text) == load_tokenizer(gpt2_files).encode(text)
    argv = record["command"].split()[4:]
    assert argv[argv.index("--tokenizer") + 1] == str(gpt2_files)
    assert config_from_args(build_parser().parse_args(argv)).tokenizer == str(gpt2_files)


def test_gpt2_small_layer0_shape_is_a_valid_configuration(corpora, gpt2_files):
    argv = ["--corpora", str(corpora), "--weights", "tiny_en=1,tiny_es=1",
            "--tokenizer", str(gpt2_files), *GPT2_LAYER0]
    cfg = config_from_args(build_parser().parse_args(argv)).resolved()
    assert (cfg.n_layer, cfg.d_model, cfg.n_head, cfg.d_mlp, cfg.n_ctx) == (2, 768, 12, 3072, 1024)
    assert config_problems(cfg, corpus_names(corpora)) == []
    assert config_to_argv(cfg)[config_to_argv(cfg).index("--d-model") + 1] == "768"


def test_the_shipped_models_recorded_command_still_rebuilds_its_configuration():
    """The defaults are the shipped model's: its recorded command rebuilds its configuration,
    and the configuration records the same command."""
    from context_neurons.models.loading import TRAINED_DIR

    record = json.loads((TRAINED_DIR / "training.json").read_text())
    argv = record["command"].split()[4:]  # after "python -m context_neurons train"
    rebuilt = config_from_args(build_parser().parse_args(argv))
    rebuilt.progress = False
    shipped = TrainConfig(**record["config"])
    assert rebuilt.resolved().to_dict() == shipped.to_dict() == shipped.resolved().to_dict()
    assert config_to_argv(rebuilt) == argv
    shape = rebuilt.resolved()
    assert (shape.d_model, shape.n_head, shape.d_mlp, shape.n_ctx) == (256, 8, 1024, 256)


def test_checkpoint_table_has_a_row_per_checkpoint_and_says_none_for_no_head():
    """Chapter 8's table of the developmental view, computed in the package (issue 33)."""
    from context_neurons.training.development import CHECKPOINT_COUNTS, checkpoint_table

    row = {"tokens": 1234567, "heldout_loss": 5.5, "contextual_heads": [1, 6],
           "separating_neurons": 10, "context_neurons_by_activation": 4, "neurons_found": 2}
    table = checkpoint_table({"checkpoints": [
        {**row, "tokens": 0, "contextual_heads": []},
        {**row, "previous_token_heads": [0], "additive_truth": 7}]})
    assert list(table.index) == ["0", "1,234,567"]
    assert list(table["contextual"]) == ["-", "1, 6"]
    assert list(table["prev.-token"]) == ["-", "0"]
    assert table["additive"].isna().tolist() == [True, False]  # older rows lack the truth
    assert set(CHECKPOINT_COUNTS) <= set(table.columns)


def test_development_findings_say_when_contextual_heads_appear_and_which_are_local():
    from context_neurons.training.development import development_findings

    row = {"tokens": 1234567, "heldout_loss": 5.5, "contextual_heads": [1, 6],
           "separating_neurons": 10, "context_neurons_by_activation": 4, "neurons_found": 2}
    first, last = development_findings({"checkpoints": [
        {**row, "tokens": 0, "contextual_heads": []}, row,
        {**row, "tokens": 2000000, "heldout_loss": 3.5714, "contextual_heads": [0, 1, 6],
         "previous_token_heads": [0, 3], "additive_truth": 7}]})
    assert first == "contextual heads first at 1,234,567 tokens (1, 6)"
    assert last == ("at the end (2,000,000 tokens): contextual heads 0, 1, 6, of which "
                    "previous-token 0; previous-token heads 0, 3; held-out loss 3.571; additive "
                    "truth 7 neurons")
    assert development_findings({"checkpoints": [{**row, "contextual_heads": []}]})[0] == (
        "no checkpoint has a contextual head")


def test_corpora_that_differ_from_the_dataset_are_refused_unless_no_verify(tmp_path):
    """Issue 35: a dataset folder whose files differ from the manifest's checksums is refused in
    one line saying what to do; ``--no-verify`` trains on it and records it as not verified;
    folders the dataset does not hold are recorded as such."""
    from context_neurons.training.loop import corpora_dataset

    _write_corpus(tmp_path, "bible_web", ENGLISH, 3, seed=1)  # not the dataset's Bible
    cfg = tiny_config(tmp_path, tmp_path / "out",
                      corpus_weights={"bible_web": 1.0, "tiny_en": 1.0}).resolved()
    with pytest.raises(DataError, match="does not match the corpora dataset, version .*"
                       "fetch-corpora.*--no-verify") as error:
        corpora_dataset(cfg)
    assert "\n" not in str(error.value)
    record = corpora_dataset(cfg, verify=False)
    assert record["not_verified"] == ["bible_web"] and record["verified"] == []
    assert record["not_in_dataset"] == ["tiny_en"]


def test_the_run_records_the_corpora_dataset(run_dir):
    record = json.loads((run_dir / "training.json").read_text())
    assert record["corpora_dataset"]["not_in_dataset"] == sorted(WEIGHTS)
    assert record["corpora_dataset"]["version"]


def test_training_run_reads_the_record_and_says_it_in_sentences(tmp_path):
    """The shipped record's facts come through unchanged; a made-up record (without a CPU
    estimate, as records written before it) gives these exact sentences."""
    import json
    from types import SimpleNamespace

    from context_neurons.models.loading import TRAINED_DIR
    from context_neurons.training.summary import NO_CPU_ESTIMATE, training_run

    shipped = json.loads((TRAINED_DIR / "training.json").read_text())
    run = training_run(TRAINED_DIR)
    assert run.parameters == shipped["model"]["parameters"] and run.seed == shipped["seed"]
    assert run.heldout_loss == shipped["heldout_loss"]["mean"]
    assert run.cpu_estimate == shipped["cpu_estimate"]
    # what the protocols read: the configuration, typed, and the vocabulary (read once here)
    assert run.config.corpus_weights == shipped["config"]["corpus_weights"]
    assert run.config.heldout_fraction == shipped["config"]["heldout_fraction"]
    assert run.config.n_ctx == shipped["config"]["n_ctx"] and run.config.seed == shipped["seed"]
    assert (run.vocab_size, run.eot_id) == (shipped["model"]["vocab_size"],
                                            shipped["model"]["eot_id"])
    assert run.tokens_per_step == shipped["tokens_per_step"]
    assert run.versions == shipped["versions"]
    record = {"model": {"parameters": 1234567, "vocab_size": 512, "eot_id": 511}, "seed": 3,
              "threads": 2, "device": "cpu", "device_name": "a CPU", "tokens_seen": 98765,
              "steps_done": 12, "heldout_loss": {"mean": 4.567}, "wall_seconds": 5400.0,
              "command": "train", "config": {"n_ctx": 128}, "tokens_per_step": 8192,
              "versions": {}}
    (tmp_path / "training.json").write_text(json.dumps(record))
    assert training_run(tmp_path).config.seed == 3  # a configuration without it: the run's
    cfg = SimpleNamespace(n_layers=2, n_heads=4, d_model=64, d_mlp=256, n_ctx=128, d_vocab=512)
    assert training_run(tmp_path).findings(cfg) == [
        "2 layers, 4 heads, d_model 64, d_mlp 256, context 128, vocabulary 512;\n"
        "  1,234,567 parameters",
        "seed 3, 2 threads on cpu: 98,765 tokens in 12 steps",
        "held-out loss (mean over corpora): 4.57 nats/token",
        f"trained on a CPU in 90 minutes; {NO_CPU_ESTIMATE}",
        "command: train"]
    record["config"]["no_such_option"] = 1  # a record of another version: said, not guessed
    (tmp_path / "training.json").write_text(json.dumps(record))
    with pytest.raises(DataError, match="no_such_option"):
        training_run(tmp_path)
