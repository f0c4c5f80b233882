"""Issue 21, bad input and lost data: each test gives the command line (or the function behind it)
a bad input and checks the message, the exit status and that no file was harmed."""

from __future__ import annotations

import ast
import csv
import hashlib
import json
import math
import os
import random
from pathlib import Path

import pytest
import torch

from context_neurons import config
from context_neurons.__main__ import build_parser, main, strict_json
from context_neurons.checks import DataError, ModelLoadError
from cli_cases import one_line_error  # tests/unit/cli_cases.py

ENGLISH = ("the cat sat on the mat and the dog ran to the house while the bird sang in the old "
           "tree by the river").split()
SPANISH = ("el gato se sienta en la casa y el perro corre hacia la plaza mientras el pájaro canta "
           "en el árbol junto al río").split()
REPO = Path(__file__).resolve().parents[2]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def no_run(monkeypatch):
    """The pipeline replaced by one that fails the test: a refusal must come before any work."""
    import context_neurons.reproduce as reproduce_package

    def must_not_run(*args, **kwargs):
        raise AssertionError("the computation started before the input was checked")

    monkeypatch.setattr(reproduce_package, "reproduce", must_not_run)


# ---- 1. the package's errors are one line and exit status 2 ------------------------------------


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_device_cuda_without_a_gpu_is_one_line(capsys, no_run):
    assert main(["reproduce", "--model", "planted", "--device", "cuda"]) == 2
    one_line_error(capsys.readouterr(), "--device cuda", "no CUDA")


def test_a_bad_seed_variable_is_one_line(monkeypatch, capsys, no_run):
    monkeypatch.setenv(config.PLANTED_SEED.name, "seven")
    assert main(["reproduce", "--model", "planted"]) == 2
    one_line_error(capsys.readouterr(), config.PLANTED_SEED.name, "'seven'")


def test_planted_truth_reads_the_seed_variable_as_reproduce_does(monkeypatch, capsys):
    """Issue 54: with ``CONTEXT_NEURONS_SEED=3``, ``planted-truth`` printed seed 0's truth while
    ``reproduce --model planted`` built seed 3's. It reads the variable now (``--seed`` wins),
    and a bad value is the same one line as the main job's."""
    import context_neurons.__main__ as cli

    built = []

    class Truth:
        def __init__(self, seed: int) -> None:
            self.seed = seed

        def to_dict(self) -> dict:
            return {"seed": self.seed}

    def build(tokenizer, seed, variant):
        built.append(seed)
        return {}, Truth(seed)

    monkeypatch.setattr(cli, "load_tokenizer", lambda: None)
    monkeypatch.setattr(cli, "build_planted_state", build)
    monkeypatch.setenv(config.PLANTED_SEED.name, "3")
    assert main(["planted-truth"]) == 0 and json.loads(capsys.readouterr().out) == {"seed": 3}
    assert main(["planted-truth", "--seed", "5"]) == 0 and built == [3, 5]
    monkeypatch.setenv(config.PLANTED_SEED.name, "seven")
    assert main(["planted-truth"]) == 2 and built == [3, 5]
    one_line_error(capsys.readouterr(), config.PLANTED_SEED.name, "'seven'", "Unset it")
    monkeypatch.delenv(config.PLANTED_SEED.name)
    assert main(["planted-truth"]) == 0 and built == [3, 5, 0]


def test_a_variant_of_another_model_is_one_line(capsys, no_run):
    assert main(["reproduce", "--model", "gpt2", "--variant", "shuffled-kernels"]) == 2
    one_line_error(capsys.readouterr(), "only for the planted model")


def test_a_missing_checkpoint_is_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(config.GPT2_WEIGHTS.name, str(tmp_path / "missing"))
    assert main(["reproduce", "--model", "gpt2", "--texts", "1", "--no-progress"]) == 2
    one_line_error(capsys.readouterr(), config.GPT2_WEIGHTS.name, "missing")


@pytest.mark.parametrize("seed", ["12345678901234567890123", "-1"])
def test_a_seed_out_of_range_is_refused_by_the_parser(seed, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["planted-truth", "--seed", seed])
    assert exit_.value.code == 2 and "0..4294967295" in capsys.readouterr().err


def test_a_bug_keeps_its_traceback(monkeypatch):
    import context_neurons.reproduce as reproduce_package

    def bug(*args, **kwargs):
        raise ZeroDivisionError("a real bug")

    monkeypatch.setattr(reproduce_package, "reproduce", bug)
    with pytest.raises(ZeroDivisionError):
        main(["reproduce", "--model", "planted", "--texts", "1"])


# ---- 11. checkpoints that are not GPT-2, incomplete, corrupt or non-finite ----------------------


def _tiny_gpt2(path: Path, **change) -> Path:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, n_positions=32,
                                       vocab_size=300, bos_token_id=0, eos_token_id=0))
    with torch.no_grad():
        for name, value in change.items():
            model.get_parameter(name).fill_(value)
    model.save_pretrained(path)
    return path


def test_a_llama_directory_is_refused(tmp_path, capsys):
    from transformers import LlamaConfig, LlamaForCausalLM

    LlamaForCausalLM(LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                 num_attention_heads=2, num_key_value_heads=2, vocab_size=300,
                                 bos_token_id=0, eos_token_id=0)).save_pretrained(tmp_path / "llama")
    capsys.readouterr()  # the saving's progress bar
    assert main(["reproduce", "--model", str(tmp_path / "llama"), "--texts", "1",
                 "--no-progress"]) == 2
    one_line_error(capsys.readouterr(), "not a GPT-2-architecture model", "llama")


def test_a_gpt2_config_over_other_weights_is_refused(tmp_path):
    """A config that says GPT-2 over weights that are not all GPT-2's: Hugging Face would fill
    the missing ones at random (its report hidden by TransformerLens's log level)."""
    from safetensors.torch import load_file, save_file

    from context_neurons.models.loading import load_checkpoint

    path = _tiny_gpt2(tmp_path / "partial")
    weights = load_file(path / "model.safetensors")
    weights.pop("transformer.h.0.mlp.c_fc.weight")
    weights["model.layers.0.extra"] = torch.zeros(2)
    save_file(weights, path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ModelLoadError, match=r"not a complete GPT-2 checkpoint.*c_fc.*extra"):
        load_checkpoint(path)
    assert load_checkpoint(_tiny_gpt2(tmp_path / "whole")) is not None  # tied lm_head is fine


def test_non_finite_weights_are_refused(tmp_path):
    from context_neurons.models.loading import load_checkpoint

    path = _tiny_gpt2(tmp_path / "nan", **{"transformer.h.0.ln_1.weight": math.nan})
    with pytest.raises(ModelLoadError, match=r"non-finite weights.*ln_1"):
        load_checkpoint(path)


def test_a_truncated_checkpoint_names_its_file(tmp_path):
    from context_neurons.models.loading import load_checkpoint

    path = _tiny_gpt2(tmp_path / "cut")
    data = (path / "model.safetensors").read_bytes()
    (path / "model.safetensors").write_bytes(data[:len(data) // 2])
    with pytest.raises(ModelLoadError, match=r"model\.safetensors.*truncated or corrupt"):
        load_checkpoint(path)


def test_non_finite_results_are_not_printed():
    from context_neurons.reproduce.pipeline import check_finite
    from context_neurons.reproduce.results import Row

    check_finite([Row("median_fvu", math.nan, "not computed: no neuron was found"),
                  Row("neuron_precision", math.nan, "undefined")])
    with pytest.raises(DataError, match="tv_distance_median"):
        check_finite([Row("tv_distance_median", math.nan, "")])
    with pytest.raises(DataError, match="n_eff"):
        check_finite([Row("n_eff", math.inf, "")])


# ---- 3. --out checked before the run, written atomically, valid JSON ----------------------------


@pytest.mark.parametrize("kind", ["missing-folder", "directory", "unwritable"])
def test_a_bad_out_path_is_refused_before_the_run(kind, tmp_path, capsys, no_run):
    out = {"missing-folder": tmp_path / "no" / "such" / "results.json",
           "directory": tmp_path,
           "unwritable": tmp_path / "locked" / "results.json"}[kind]
    if kind == "unwritable":
        if os.geteuid() == 0:
            pytest.skip("root writes anywhere")
        out.parent.mkdir()
        out.parent.chmod(0o500)
    try:
        assert main(["reproduce", "--model", "planted", "--out", str(out)]) == 2
    finally:
        if kind == "unwritable":
            out.parent.chmod(0o700)
    one_line_error(capsys.readouterr(), "--out")
    assert not out.is_file()


def _fake_results(value: float):
    from context_neurons.reproduce.results import Results, Row

    rows = [Row("tv_distance_median", value, "not computed: test"),
            Row("nested", {"a": [1.0, math.inf]})]
    return Results(model="planted", model_source="test", planted=False, n_texts=1, texts={},
                   device="cpu", rows=rows, seconds=1.0)


def test_results_are_valid_json_written_atomically(monkeypatch, tmp_path, capsys):
    import context_neurons.reproduce as reproduce_package

    def fake(*args, **kwargs):
        print("look-ups: examined neuron 1.2")  # a progress line: stderr, not the table's stdout
        return _fake_results(math.nan)

    monkeypatch.setattr(reproduce_package, "reproduce", fake)
    out = tmp_path / "results.json"
    assert main(["reproduce", "--model", "planted", "--texts", "1", "--out", str(out)]) == 0
    text = out.read_text()
    assert "NaN" not in text and "Infinity" not in text
    data = json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in the JSON"))
    assert data["tv_distance_median"] is None and data["nested"] == {"a": [1.0, None]}
    captured = capsys.readouterr()
    assert "look-ups" in captured.err and "look-ups" not in captured.out
    assert "| quantity" in captured.out
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]  # no temporary file left

    def failing(*args, **kwargs):
        raise DataError("the run failed")

    monkeypatch.setattr(reproduce_package, "reproduce", failing)
    before = _digest(out)
    assert main(["reproduce", "--model", "planted", "--texts", "1", "--out", str(out)]) == 2
    assert _digest(out) == before  # the previous results are intact


def test_strict_json_writes_null_for_non_finite_numbers():
    assert json.loads(strict_json('{"a": NaN, "b": [Infinity, -Infinity, 1.5]}')) == {
        "a": None, "b": [None, None, 1.5]}


def test_run_chapters_checks_its_out_before_running(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("keep me")
    assert main(["run-chapters", "--model", "planted", "--out", str(blocker)]) == 2
    one_line_error(capsys.readouterr(), "--out", "not a directory")
    assert blocker.read_text() == "keep me"


# ---- 2. a corpora directory that is named must exist -------------------------------------------


def test_a_missing_corpora_directory_is_an_error_not_openwebtext(monkeypatch, tmp_path):
    from context_neurons.text.corpora import corpora_dir, resolve_source

    missing = tmp_path / "not-here"
    monkeypatch.setenv(config.CORPORA.name, str(missing))
    with pytest.raises(DataError, match=rf"{config.CORPORA.name}.*not-here.*not a directory"):
        resolve_source("auto")  # it was "openwebtext": a silent change of data
    with pytest.raises(DataError, match=config.CORPORA.name):
        corpora_dir(required=False)
    monkeypatch.setenv(config.CORPORA.name, config.NO_DIRECTORY)  # asked for explicitly
    assert resolve_source("auto") == "openwebtext"


def test_reproduce_with_a_missing_corpora_directory_is_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(config.CORPORA.name, str(tmp_path / "not-here"))
    assert main(["reproduce", "--model", "planted", "--texts", "1", "--no-progress"]) == 2
    one_line_error(capsys.readouterr(), config.CORPORA.name, "not-here")


# ---- 7. corrupt corpus files name the file and the line -----------------------------------------


@pytest.mark.parametrize("damage", ["binary", "latin-1", "truncated-json", "not-an-object"])
def test_a_corrupt_corpus_file_names_the_file_and_line(damage, tmp_path):
    from context_neurons.text.corpora import iter_documents
    from context_neurons.training.corpus import iter_documents as training_documents

    folder = tmp_path / "bad"
    folder.mkdir()
    good = json.dumps({"id": "1", "text": "fine"}) + "\n"
    third = {"binary": b"\x00\xff\xfe\x89PNG\n",
             "latin-1": json.dumps({"id": "3", "text": "caf\u00e9"}, ensure_ascii=False)
             .encode("latin-1") + b"\n",
             "truncated-json": b'{"id": "3", "text": "cut off he',
             "not-an-object": b'["a list"]\n'}[damage]
    (folder / "docs.jsonl").write_bytes(good.encode() * 2 + third)
    for read in (lambda: list(iter_documents("bad", tmp_path)),
                 lambda: list(training_documents("bad", tmp_path))):
        with pytest.raises(DataError, match=r"docs\.jsonl, line 3: .*re-create it"):
            read()


# ---- 4, 5, 8. train: existing runs kept, --resume, configuration checked first ------------------


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpora")
    for name, words, seed in (("tiny_en", ENGLISH, 1), ("tiny_es", SPANISH, 2)):
        rng = random.Random(seed)
        (folder / name).mkdir()
        with (folder / name / "docs.jsonl").open("w", encoding="utf-8") as handle:
            for i in range(40):
                text = " ".join(rng.choice(words) for _ in range(rng.randint(40, 120)))
                handle.write(json.dumps({"id": f"doc-{i}", "text": text}) + "\n")
    return folder


def _train_argv(corpora: Path, out: Path, *extra: str) -> list[str]:
    return ["train", "--out", str(out), "--corpora", str(corpora), "--seed", "0", "--threads",
            "1", "--device", "cpu", "--tokens", str(20 * 2 * 32), "--d-model", "32", "--n-head",
            "2", "--n-layer", "1", "--d-mlp", "64", "--n-ctx", "32", "--batch-size", "2",
            "--vocab-size", "300", "--warmup-steps", "3", "--eval-windows", "4",
            "--eval-windows-checkpoint", "2", "--weights", "tiny_en=1,tiny_es=1",
            "--resume-every", "4", "--no-progress", *extra]


def _loss_rows(out: Path) -> list[tuple[str, ...]]:
    with (out / "loss.csv").open() as handle:
        return [(r["step"], r["tokens"], r["loss"], r["lr"]) for r in csv.DictReader(handle)]


@pytest.fixture(scope="module")
def full_run(corpora, tmp_path_factory):
    out = tmp_path_factory.mktemp("full") / "run"
    assert main(_train_argv(corpora, out)) == 0
    return out


def test_train_refuses_a_directory_holding_a_run(corpora, full_run, capsys):
    before = {p.name: _digest(p) for p in full_run.iterdir() if p.is_file()}
    assert main(_train_argv(corpora, full_run)) == 2
    one_line_error(capsys.readouterr(), "is not empty", "--resume", "--overwrite")
    assert {p.name: _digest(p) for p in full_run.iterdir() if p.is_file()} == before
    assert main(_train_argv(corpora, full_run, "--resume")) == 2  # finished: nothing to resume
    one_line_error(capsys.readouterr(), "finished run")
    assert {p.name: _digest(p) for p in full_run.iterdir() if p.is_file()} == before


def test_train_overwrite_replaces_the_run(corpora, full_run, tmp_path):
    out = tmp_path / "again"
    out.mkdir()
    (out / "loss.csv").write_text("an old run\n")
    (out / "notes.txt").write_text("mine")
    assert main(_train_argv(corpora, out, "--overwrite")) == 0
    assert _loss_rows(out) == _loss_rows(full_run)
    assert (out / "notes.txt").read_text() == "mine"  # only a run's own files are removed


def test_resume_reaches_the_weights_of_an_uninterrupted_run(corpora, full_run, tmp_path):
    out = tmp_path / "interrupted"
    assert main(_train_argv(corpora, out, "--stop-after-steps", "9")) == 0
    assert (out / "RUNNING").is_file() and (out / "resume.pt").is_file()  # marked incomplete
    assert len(_loss_rows(out)) == 9
    assert main(_train_argv(corpora, out, "--resume")) == 0
    assert not (out / "RUNNING").exists() and not (out / "resume.pt").exists()
    assert _loss_rows(out) == _loss_rows(full_run)
    assert _digest(out / "model.safetensors") == _digest(full_run / "model.safetensors")
    for step in (8, 16, 20):  # checkpoints before and after the interruption
        name = f"checkpoints/step-{step}/model.safetensors"
        assert _digest(out / name) == _digest(full_run / name), name
    record = json.loads((out / "training.json").read_text())
    assert record["resumed_from_step"] == 9 and record["steps_done"] == 20


def test_resume_continues_from_the_last_periodic_state(corpora, full_run, tmp_path):
    """An interruption between two saved states: the run continues from the last one (the loss
    rows after it are dropped and computed again)."""
    out = tmp_path / "killed"
    assert main(_train_argv(corpora, out, "--stop-after-steps", "9")) == 0
    state = torch.load(out / "resume.pt", weights_only=True)
    assert state["step"] == 9
    assert main(_train_argv(corpora, out, "--resume", "--stop-after-steps", "14")) == 0
    assert torch.load(out / "resume.pt", weights_only=True)["step"] == 14
    with (out / "loss.csv").open("a") as handle:  # as if killed at step 15, after the last save
        handle.write("15,960,9.9,0.001,1.0\n")
    assert main(_train_argv(corpora, out, "--resume")) == 0
    assert _loss_rows(out) == _loss_rows(full_run)
    assert _digest(out / "model.safetensors") == _digest(full_run / "model.safetensors")


@pytest.mark.parametrize("make", [False, True])
def test_resume_refuses_a_directory_without_a_run(corpora, tmp_path, capsys, make):
    """--resume where no run was ever started used to start a new (hour-long) run silently."""
    out = tmp_path / "nothing"
    if make:
        out.mkdir()
    assert main(_train_argv(corpora, out, "--resume")) == 2
    one_line_error(capsys.readouterr(), "no run to resume", "Drop --resume")
    assert not out.exists() or not any(out.iterdir())


def test_resume_refuses_other_options(corpora, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(_train_argv(corpora, out, "--stop-after-steps", "4")) == 0
    capsys.readouterr()
    before = _digest(out / "resume.pt")
    assert main(_train_argv(corpora, out, "--resume", "--lr", "0.01")) == 2
    one_line_error(capsys.readouterr(), "lr", "--resume")
    assert _digest(out / "resume.pt") == before


@pytest.mark.parametrize("extra, fragments", [
    (["--d-model", "30", "--n-head", "4"], ["--d-model 30 is not a multiple of --n-head 4"]),
    (["--weight", "nosuchcorpus=1"], ["nosuchcorpus", "tiny_en, tiny_es"]),
    (["--heldout-fraction", "1.5"], ["--heldout-fraction"]),
])
def test_train_checks_its_configuration_before_reading_data(corpora, tmp_path, capsys, monkeypatch,
                                                            extra, fragments):
    import context_neurons.training.loop as loop

    def must_not_split(*args, **kwargs):
        raise AssertionError("the corpora were read before the configuration was checked")

    monkeypatch.setattr(loop, "split_corpora", must_not_split)
    out = tmp_path / "never"
    assert main(_train_argv(corpora, out, *extra)) == 2
    one_line_error(capsys.readouterr(), *fragments)
    assert not out.exists()


def test_train_refuses_a_seed_torch_cannot_take(corpora, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(_train_argv(corpora, tmp_path / "x", "--seed", "12345678901234567890123"))
    assert exit_.value.code == 2 and "0..4294967295" in capsys.readouterr().err


def test_every_train_option_has_help_and_the_budget_is_true():
    from context_neurons.training.cli import build_parser as train_parser

    parser = train_parser()
    assert all(action.help for action in parser._actions), [
        a.option_strings for a in parser._actions if not a.help]
    text = parser.format_help()
    assert "18 minutes" in text and "30 min" not in text and "(default: 8192)" in text
    top = build_parser().format_help()
    assert "``" not in top and ":func:" not in top  # no raw reST


# ---- 6. regenerate-notebooks accepts chapters only ---------------------------------------------


def test_regenerate_notebooks_refuses_a_file_that_is_not_a_chapter(tmp_path, capsys, monkeypatch):
    import context_neurons.book.notebooks as notebooks
    from context_neurons.book.notebooks import chapter_files, resolve_chapters, stored_notebook

    def must_not_execute(*args, **kwargs):
        raise AssertionError("a chapter was executed: the refusal came too late")

    monkeypatch.setattr(notebooks, "execute", must_not_execute)
    chapter = chapter_files()[0]
    stored = stored_notebook(chapter)
    before = _digest(stored) if stored.exists() else None
    monkeypatch.chdir(tmp_path)
    (tmp_path / chapter.name).write_text("print('not the chapter')\n")
    stray = tmp_path / "script.py"
    stray.write_text("x = 1\n")
    for name in (str(stray), chapter.name.replace(".py", ".txt"), f"./{chapter.name}"):
        assert main(["regenerate-notebooks", name]) == 2
        one_line_error(capsys.readouterr(), "not a chapter of the book", chapter.stem)
    assert (_digest(stored) if stored.exists() else None) == before
    # a chapter's name resolves against book/, not the working directory
    assert resolve_chapters([chapter.stem, chapter.name, str(chapter)]) == [chapter] * 3
    assert resolve_chapters([f"book/{chapter.name}"]) == [chapter]


# ---- 9. set-repository validates owner and name -------------------------------------------------


@pytest.mark.parametrize("url", ["https://github.com/../..", "https://github.com/owner/..",
                                 "https://github.com/-bad/name", "https://github.com/a/b/c"])
def test_set_repository_refuses_a_bad_address(url, capsys):
    files = [REPO / "src" / "context_neurons" / "book" / "colab.py", REPO / "README.md"]
    before = [_digest(f) for f in files]
    assert main(["set-repository", url]) == 2
    one_line_error(capsys.readouterr(), "OWNER/NAME")
    assert [_digest(f) for f in files] == before


def test_set_repository_accepts_github_names():
    from context_neurons.book.publishing import check_repository_url

    assert check_repository_url("https://github.com/my-org/my.repo_2/") == (
        "https://github.com/my-org/my.repo_2")


# ---- tidy-ups ----------------------------------------------------------------------------------


def test_benchmarks_do_not_import_each_other_in_a_cycle():
    def imports(path: Path) -> set[str]:
        tree = ast.parse(path.read_text())
        return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module} | {
            a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}

    # The scripts beside each other in benchmarks/ (run.py and its modules cases, harness,
    # report, measure and lookups), each with the ones it imports, at the top or in a function.
    scripts = {path.stem: path for path in (REPO / "benchmarks").glob("*.py")}
    graph = {name: imports(path) & scripts.keys() for name, path in scripts.items()}
    assert {"run", "cases", "harness", "report", "measure", "lookups"} <= graph.keys()

    def below(name: str) -> set[str]:
        found, todo = set(), list(graph[name])
        while todo:
            if (other := todo.pop()) not in found:
                found.add(other)
                todo += graph[other]
        return found

    assert not [name for name in graph if name in below(name)]


def test_pyproject_refers_to_no_file_outside_the_repository():
    text = (REPO / "pyproject.toml").read_text()
    assert "STYLE.md" not in text and "../" not in text


def test_the_ci_log_names_each_chapter_s_slowest_cells():
    from context_neurons.book.notebooks import _seconds_between, slowest_cells

    assert _seconds_between("2026-11-28T22:05:01.500000Z", "2026-11-28T22:06:03.000000Z") == 61.5
    assert slowest_cells({0: 0.5, 3: 43.2, 7: 20.0, 9: 1.0}, n=2) == "cell 3 43 s, cell 7 20 s"
    assert slowest_cells({}) == ""


def test_a_changed_gpt2_directory_is_loaded_again(monkeypatch, tmp_path):
    """``$CONTEXT_NEURONS_GPT2`` decides GPT-2's weights, so it is part of the loaded models'
    cache key: after a model loaded from one directory, another directory (or a missing one) is
    read again, not served the cached model (the CI run of 2026-11-29 ran the whole main job on
    a stand-in cached by an earlier test instead of saying the directory was missing)."""
    from context_neurons.models import loading
    from context_neurons.models.toy import make_small_model

    seen = []
    monkeypatch.setattr(loading, "load_tokenizer", lambda directory=None: None)
    monkeypatch.setattr(loading, "load_hf_gpt2", lambda name, weights=None: (
        seen.append(config.gpt2_weights()), "a directory"))
    toy = make_small_model()[0]  # any bridge: what is checked is which directory was read
    monkeypatch.setattr(loading, "bridge_from_hf", lambda *args: toy)
    loading._load_model_cached.cache_clear()
    try:
        for name in ("a", "a", "b"):
            monkeypatch.setenv(config.GPT2_WEIGHTS.name, str(tmp_path / name))
            loading.load_model("gpt2", device="cpu")
    finally:
        loading._load_model_cached.cache_clear()
    assert seen == [tmp_path / "a", tmp_path / "b"]


def test_a_changed_tokenizer_directory_is_read_again(monkeypatch, tmp_path):
    """``$CONTEXT_NEURONS_TOKENIZER`` decides the tokenizer of GPT-2 and of the planted model,
    so, like ``$CONTEXT_NEURONS_GPT2``, it is read before the loaded models' cache and is part
    of its key: another directory is read again, not served the model cached with the first."""
    from context_neurons.models import loading
    from context_neurons.models.toy import make_small_model

    seen = []
    monkeypatch.delenv(config.GPT2_WEIGHTS.name, raising=False)
    monkeypatch.setattr(loading, "load_tokenizer", lambda directory=None: seen.append(directory))
    monkeypatch.setattr(loading, "load_hf_gpt2", lambda name, weights=None: (None, "hub"))
    toy = make_small_model()[0]  # any bridge: what is checked is which directory was read
    monkeypatch.setattr(loading, "bridge_from_hf", lambda *args: toy)
    loading._load_model_cached.cache_clear()
    try:
        for name in ("a", "a", "b"):
            (tmp_path / name).mkdir(exist_ok=True)
            monkeypatch.setenv(config.TOKENIZER.name, str(tmp_path / name))
            loading.load_model("gpt2", device="cpu")
    finally:
        loading._load_model_cached.cache_clear()
    assert seen == [str(tmp_path / "a"), str(tmp_path / "b")]
