"""Issue 34: inputs that used to pass silently (a wrapped seed, a negative token id read from the
end of the vocabulary, a head counted twice, NaN as a threshold) or end in a raw traceback now
stop with the package's one-line :class:`InputError` naming the input."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
import torch

from context_neurons import config
from context_neurons import discovery as disc
from context_neurons import taxonomy as tx
from context_neurons.__main__ import main
from context_neurons.checks import MAX_SEED, DataError, InputError, ModelLoadError, check_heads
from context_neurons.checks import check_seed
from context_neurons.models import load_model
from context_neurons.models.loading import MODEL_NAMES, resolve_model_name
from cli_cases import one_line_error  # tests/unit/cli_cases.py


@pytest.mark.parametrize("seed", [-1, MAX_SEED + 1, 2**40, 1.5, True, "3"])
def test_a_seed_outside_32_bits_or_not_whole_is_refused(seed):
    with pytest.raises(InputError, match="seed"):
        check_seed(seed)


@pytest.mark.parametrize("seed", [-1, MAX_SEED + 1, 2**40])
def test_the_planted_model_refuses_a_seed_it_would_wrap(seed):
    """-1 used to build seed 4294967295's weights labelled 'seed -1'; 2**40 seed 0's."""
    with pytest.raises(InputError, match="seed"):
        load_model("planted", seed=seed)


def test_seeds_at_the_ends_of_the_range_pass():
    assert check_seed(0) == 0 and check_seed(MAX_SEED) == MAX_SEED


@pytest.mark.parametrize("text", ["-1", "4294967296", "1.5", "seven"])
def test_the_seed_variable_is_checked_where_it_is_read(monkeypatch, text):
    monkeypatch.setenv(config.PLANTED_SEED.name, text)
    with pytest.raises(InputError, match=config.PLANTED_SEED.name):
        config.planted_seed()


@pytest.mark.parametrize("text", ["abc", "0", "-2", "1.5"])
def test_the_threads_variable_must_be_a_whole_number_of_at_least_one(monkeypatch, text):
    monkeypatch.setenv(config.THREADS.name, text)
    with pytest.raises(InputError, match=config.THREADS.name):
        config.threads()
    monkeypatch.setenv(config.THREADS.name, "3")
    assert config.threads() == 3


@pytest.mark.parametrize("device", ["tpu", "mps", "not a device"])
def test_a_device_other_than_cpu_or_cuda_is_refused(device):
    with pytest.raises(InputError, match="'cpu', 'cuda' or 'auto'"):
        config.resolve_device(device)


def test_a_head_given_twice_is_refused(planted):
    with pytest.raises(InputError, match=r"Heads \[0\] are given more than once"):
        check_heads(planted.model, [0, 0])
    assert check_heads(planted.model, [2, 0]) == [2, 0]


@pytest.fixture(scope="module")
def scored(planted):
    from context_neurons.circuit import get_circuit

    circuit = get_circuit(planted.model)
    return circuit, disc.get_scores(circuit, planted.model)


@pytest.mark.parametrize("ids", [torch.tensor([-1]), torch.tensor([10**6])])
def test_contributions_refuse_token_ids_outside_the_vocabulary(planted, scored, ids):
    circuit, _ = scored
    with pytest.raises(InputError, match="token"):
        disc.contributions(circuit, planted.model, [0], token_ids=ids)
    d_vocab = planted.model.cfg.d_vocab
    last = disc.contributions(circuit, planted.model, [0], token_ids=torch.tensor([d_vocab - 1]))
    assert last.shape == (1, 1)


@pytest.mark.parametrize("theta", [float("nan"), float("inf"), True])
def test_found_refuses_a_threshold_that_is_not_a_finite_number(scored, theta):
    _, scores = scored
    with pytest.raises(InputError, match="theta"):
        scores.found(theta)


def test_score_neurons_and_the_sweep_refuse_empty_or_zero_sizes(planted, scored):
    circuit, scores = scored
    with pytest.raises(InputError, match="chunk"):
        disc.score_neurons(circuit, planted.model, chunk=0)
    with pytest.raises(InputError, match="thetas is empty"):
        disc.theta_sweep(scores, thetas=())
    assert len(disc.theta_sweep(scores, thetas=(4,))) == 1


def test_the_taxonomy_refuses_a_repeated_head(planted):
    with pytest.raises(InputError, match="more than once"):
        tx.classify_heads(planted.model, heads=[0, 0])


# ---- a newcomer's inputs: one line and exit status 2, never silent or a traceback --------------


@pytest.fixture
def no_run(monkeypatch):
    """The pipeline replaced by one that fails the test: a refusal must come before any work."""
    import context_neurons.reproduce as reproduce_package

    def must_not_run(*args, **kwargs):
        raise AssertionError("the computation started before the input was checked")

    monkeypatch.setattr(reproduce_package, "reproduce", must_not_run)


@pytest.mark.parametrize("command", ["reproduce", "run-chapters"])
@pytest.mark.parametrize("name", ["", "  "])
def test_an_empty_model_name_is_refused_naming_the_choices(command, name, capsys, no_run):
    """``--model ""`` used to mean GPT-2 silently (and ``--model " "`` the working directory)."""
    with pytest.raises(SystemExit) as exit_:
        main([command, "--model", name])
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert exit_.value.code == 2 and len(errors) == 1, errors
    assert "model name is empty" in errors[0] and ", ".join(MODEL_NAMES) in errors[0]
    with pytest.raises(ModelLoadError, match="model name is empty.*planted, trained"):
        load_model(name)


def test_an_empty_model_variable_is_unset_and_reproduce_does_not_read_it(monkeypatch, capsys):
    """An empty variable is an unset one (as every variable); ``reproduce --help`` says that
    ``--model`` alone picks its model."""
    monkeypatch.setenv(config.MODEL.name, " ")
    assert resolve_model_name(None) == config.DEFAULT_MODEL
    with pytest.raises(SystemExit) as exit_:
        main(["reproduce", "--help"])
    assert exit_.value.code == 0
    assert f"${config.MODEL.name} is not read here" in " ".join(capsys.readouterr().out.split())


def _gpt2_checkpoint(path, n_positions: int):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, n_positions=n_positions,
                               vocab_size=300)).save_pretrained(path)
    return path


def test_a_checkpoint_with_too_short_a_context_is_refused_before_the_run(tmp_path, capsys,
                                                                         no_run):
    """It used to fail at the last step: "65 tokens exceed the context of 16: cut the text"."""
    from context_neurons.__main__ import check_checkpoint_context
    from context_neurons.method import MIN_CONTEXT, check_run_context

    short = _gpt2_checkpoint(tmp_path / "short", n_positions=16)
    capsys.readouterr()  # the saving's progress bar
    assert main(["reproduce", "--model", str(short), "--texts", "1", "--no-progress"]) == 2
    one_line_error(capsys.readouterr(), str(short), "context of 16 tokens",
                    f"needs at least {MIN_CONTEXT}", "n_positions")
    check_checkpoint_context(str(_gpt2_checkpoint(tmp_path / "enough", MIN_CONTEXT)))
    with pytest.raises(InputError, match=f"context of {MIN_CONTEXT - 1} tokens"):
        check_run_context(MIN_CONTEXT - 1, "a model")
    assert MIN_CONTEXT <= 256  # the trained model's context (and GPT-2's 1024) pass


def test_a_full_cache_is_one_line_naming_the_directory_and_variable(monkeypatch, tmp_path,
                                                                   capsys):
    from transformers import PreTrainedTokenizerFast

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    cache = tmp_path / "cache"
    monkeypatch.setenv(config.CACHE.name, str(cache))
    monkeypatch.setattr(PreTrainedTokenizerFast, "save_pretrained", full)
    assert main(["planted-truth"]) == 2  # it saves the offline tokenizer into the cache first
    one_line_error(capsys.readouterr(), str(cache), config.CACHE.name, "No space left")
    assert list(cache.iterdir()) == []  # no half-written tokenizer left


def test_a_read_only_cache_is_one_line(monkeypatch, tmp_path, capsys):
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o500)
    try:
        if os.access(cache, os.W_OK):
            pytest.skip("root writes anywhere")
        monkeypatch.setenv(config.CACHE.name, str(cache))
        assert main(["planted-truth"]) == 2
        one_line_error(capsys.readouterr(), str(cache), config.CACHE.name)
    finally:
        cache.chmod(0o700)


def test_a_cache_that_cannot_be_created_names_the_variable(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(config.CACHE.name, str(blocker / "cache"))
    with pytest.raises(InputError, match=rf"{blocker / 'cache'} cannot be written.*"
                                         rf"{config.CACHE.name}"):
        config.cache_dir()


class _FailingStream:
    """A ``datasets`` stream that yields one record, then loses the network."""

    def shuffle(self, **kwargs):
        return self

    def __iter__(self):
        yield {"text": "one document"}
        raise ConnectionError("Connection reset by peer\n(while reading a Parquet file)")


def test_openwebtext_that_cannot_be_read_is_one_line_saying_what_to_do(monkeypatch):
    """It used to be four lines: a heading, one line per source and the advice."""
    import datasets

    from context_neurons.text import corpora

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'Skylion007/openwebtext' on the Hub\n(offline)")

    monkeypatch.delenv(config.OPENWEBTEXT.name, raising=False)
    monkeypatch.setattr(datasets, "load_dataset", offline)
    corpora.forget_openwebtext()
    with pytest.raises(DataError) as error:
        corpora.openwebtext_documents(3)
    message = str(error.value)
    assert len(message.splitlines()) == 1, message
    for fragment in ("Skylion007/openwebtext@main", "refs/convert/parquet", "ConnectionError",
                     config.CORPORA.name, "network", config.OPENWEBTEXT.name):
        assert fragment in message, (fragment, message)
    monkeypatch.setattr(datasets, "load_dataset", lambda *args, **kwargs: _FailingStream())
    with pytest.raises(DataError, match=r"after 1 documents: ConnectionError.*network") as error:
        corpora.openwebtext_documents(3)
    assert len(str(error.value).splitlines()) == 1
    corpora.forget_openwebtext()


def test_reproduce_on_unreachable_openwebtext_exits_2_with_one_line(monkeypatch, capsys, planted):
    import datasets

    from context_neurons.text import corpora

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach the Hub\n(offline)")

    monkeypatch.delenv(config.OPENWEBTEXT.name, raising=False)
    monkeypatch.setattr(datasets, "load_dataset", offline)
    corpora.forget_openwebtext()
    assert main(["reproduce", "--model", "planted", "--source", "openwebtext", "--texts", "1",
                 "--no-progress"]) == 2
    one_line_error(capsys.readouterr(), "OpenWebText could not be read", config.CORPORA.name)


def test_set_repository_rewrites_the_stored_and_student_notebooks(tmp_path, capsys):
    """They stayed on the old address until two more commands ran; now rewritten in place."""
    import shutil

    from context_neurons.book import colab
    from context_neurons.book.publishing import addresses, main as set_repository

    root, new = config.REPOSITORY_ROOT, "https://github.com/someone/fork"
    notebooks = [Path("book/students/ch01_decomposition.ipynb"),
                 Path("tests/notebooks/ch01_decomposition.ipynb")]
    for name in [Path("src/context_neurons/book/colab.py"), *notebooks]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(root / name, tmp_path / name)
    assert all(colab.REPOSITORY in (tmp_path / name).read_text() for name in notebooks)
    modes = [(tmp_path / name).stat().st_mode for name in notebooks]
    assert set_repository(new, root=tmp_path) == 0
    printed = capsys.readouterr().out
    for name, mode in zip(notebooks, modes):
        text = (tmp_path / name).read_text()
        assert colab.REPOSITORY not in text and new in text and f"updated {name}" in printed
        assert json.loads(text) and (tmp_path / name).stat().st_mode == mode
        expected = (root / name).read_text()  # the address and the two derived from it (the
        for old, moved in zip(addresses(colab.REPOSITORY), addresses(new)):  # Colab links too)
            expected = expected.replace(old, moved)
        assert text == expected  # nothing else
    assert not list(tmp_path.rglob("*.tmp"))  # written atomically: no temporary file left
    assert set_repository(new, root=tmp_path) == 0  # again: nothing names the old address
    assert "nothing to change" in capsys.readouterr().out
