"""Colab set-up, with Colab simulated: ``google.colab`` in ``sys.modules`` or ``COLAB_RELEASE_TAG``
set, and ``subprocess.run`` replaced so nothing is installed."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import jupytext
import pytest

from context_neurons.book import colab
from context_neurons.config import in_colab

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_colab(monkeypatch):
    monkeypatch.delitem(sys.modules, colab.COLAB_MODULE, raising=False)
    monkeypatch.delenv("COLAB_RELEASE_TAG", raising=False)
    monkeypatch.delenv("CONTEXT_NEURONS_MODEL", raising=False)


@pytest.fixture
def pip_calls(monkeypatch):
    """Record pip commands instead of running them (also for the first cell's own subprocess)."""
    calls = []

    def fake_run(command, check=False, **kwargs):
        calls.append(list(command))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(subprocess, "run", fake_run)
    return calls


def fake_colab_output(monkeypatch) -> list[str]:
    """A fake ``google.colab.output`` whose ``enable_custom_widget_manager`` records its calls."""
    calls: list[str] = []
    google = types.ModuleType("google")
    package = types.ModuleType(colab.COLAB_MODULE)
    output = types.ModuleType(f"{colab.COLAB_MODULE}.output")
    output.enable_custom_widget_manager = lambda: calls.append("enabled")
    package.output = output
    google.colab = package
    monkeypatch.setitem(sys.modules, "google", google)
    monkeypatch.setitem(sys.modules, colab.COLAB_MODULE, package)
    monkeypatch.setitem(sys.modules, output.__name__, output)
    return calls


def simulate_colab(monkeypatch, how: str) -> None:
    if how == "module":
        monkeypatch.setitem(sys.modules, colab.COLAB_MODULE, types.ModuleType(colab.COLAB_MODULE))
    else:
        monkeypatch.setenv("COLAB_RELEASE_TAG", "release-colab_20260101-060000_RC00")


def test_in_colab_detection(no_colab, monkeypatch):
    assert not in_colab()
    assert in_colab(modules={"google.colab": object()}, environ={})
    assert in_colab(modules={}, environ={"COLAB_RELEASE_TAG": "x"})
    assert not in_colab(modules={}, environ={"COLAB_RELEASE_TAG": ""})
    simulate_colab(monkeypatch, "env")
    assert in_colab()


def test_pip_command_installs_the_repository_into_this_interpreter():
    command = colab.pip_install_command()
    assert command[:4] == [sys.executable, "-m", "pip", "install"]
    assert command[-1] == "context-neurons[online] @ git+" + colab.REPOSITORY
    assert "--upgrade" in colab.pip_install_command(upgrade=True)


def test_colab_installs_only_what_chapters_import():
    """jupyter-book and Sphinx (the ``book`` extra) are for building the site, not for a kernel."""
    assert colab.EXTRAS.split(",") == ["online"]
    assert "book" not in colab.PACKAGE_SPEC.split("@")[0]


def test_repository_is_the_books_repository():
    yaml = pytest.importorskip("yaml")  # a dependency of jupyter-book (the book extra)
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    assert colab.REPOSITORY == config["repository"]["url"].rstrip("/")
    assert colab.PACKAGE_SPEC.endswith("@ git+" + config["repository"]["url"].rstrip("/"))


def test_outside_colab_nothing_happens(no_colab, pip_calls, capsys):
    assert colab.colab_setup(cuda_available=False) == "cpu"
    assert colab.colab_setup(cuda_available=True) == "cuda"
    assert colab.colab_setup(install=True, cuda_available=False) == "cpu"  # not even when asked
    assert pip_calls == []
    assert capsys.readouterr().out == ""
    assert "CONTEXT_NEURONS_MODEL" not in __import__("os").environ


@pytest.mark.parametrize("how", ["module", "env"])
def test_in_colab_gpu_selected_and_package_present(no_colab, pip_calls, monkeypatch, capsys, how):
    simulate_colab(monkeypatch, how)
    assert colab.colab_setup(cuda_available=True) == "cuda"
    assert pip_calls == []  # context_neurons is importable: nothing to install
    out = capsys.readouterr().out
    assert "device cuda" in out and "No GPU" not in out
    assert __import__("os").environ["CONTEXT_NEURONS_MODEL"] == "gpt2"


def test_in_colab_the_widget_manager_is_enabled(no_colab, pip_calls, monkeypatch, capsys):
    calls = fake_colab_output(monkeypatch)
    assert in_colab()
    assert colab.colab_setup(cuda_available=True) == "cuda"
    assert calls == ["enabled"]
    assert pip_calls == []


def test_widget_manager_missing_is_harmless(no_colab, pip_calls, monkeypatch, capsys):
    simulate_colab(monkeypatch, "module")  # google.colab without an output module
    assert colab.enable_colab_widgets() is False
    assert colab.colab_setup(cuda_available=False) == "cpu"
    monkeypatch.undo()
    calls = fake_colab_output(monkeypatch)
    del sys.modules[f"{colab.COLAB_MODULE}.output"].enable_custom_widget_manager  # older Colab
    assert colab.enable_colab_widgets() is False
    assert calls == []


def test_outside_colab_the_widget_manager_is_left_alone(no_colab, pip_calls, monkeypatch):
    calls = fake_colab_output(monkeypatch)
    monkeypatch.delitem(sys.modules, colab.COLAB_MODULE)  # the module exists but is not loaded
    colab.colab_setup(cuda_available=False)
    assert calls == []


def test_in_colab_without_gpu_hints_at_the_runtime(no_colab, pip_calls, monkeypatch, capsys):
    simulate_colab(monkeypatch, "module")
    assert colab.colab_setup(cuda_available=False) == "cpu"
    assert "Change runtime type" in capsys.readouterr().out


def test_in_colab_installs_when_missing_or_asked(no_colab, pip_calls, monkeypatch):
    simulate_colab(monkeypatch, "env")
    monkeypatch.setattr(colab.importlib.util, "find_spec", lambda name: None)
    colab.colab_setup(cuda_available=False)
    assert pip_calls == [colab.pip_install_command()]
    monkeypatch.undo()
    simulate_colab(monkeypatch, "env")
    calls = []
    colab.colab_setup(install=True, cuda_available=False, run=lambda cmd, check: calls.append(cmd))
    assert calls == [colab.pip_install_command(upgrade=True)]


def test_model_choice_is_respected(no_colab, pip_calls, monkeypatch):
    simulate_colab(monkeypatch, "module")
    monkeypatch.setenv("CONTEXT_NEURONS_MODEL", "planted")
    colab.colab_setup(cuda_available=False)
    assert __import__("os").environ["CONTEXT_NEURONS_MODEL"] == "planted"


# --------------------------------------------------------------------------- the first cell


def first_cell_source() -> str:
    notebook = jupytext.reads(colab.FIRST_CELL, fmt="py:percent")
    (cell,) = notebook.cells
    assert cell.cell_type == "code"
    assert cell.metadata.get("tags") == ["remove-cell"]
    return cell.source


def run_first_cell(monkeypatch, installed: bool, pip_calls: list) -> dict:
    """Execute the first cell; the package counts as installed once pip has been called."""
    real_find_spec = colab.importlib.util.find_spec

    def find_spec(name, *args):
        if name == "context_neurons" and not (installed or pip_calls):
            return None
        return real_find_spec(name, *args)

    monkeypatch.setattr("importlib.util.find_spec", find_spec)
    namespace: dict = {}
    exec(compile(first_cell_source(), "first-cell", "exec"), namespace)  # noqa: S102 - our snippet
    return namespace


def test_first_cell_outside_colab_installs_nothing(no_colab, pip_calls, monkeypatch, capsys):
    namespace = run_first_cell(monkeypatch, installed=False, pip_calls=pip_calls)
    assert pip_calls == []
    assert namespace["device"] in ("cpu", "cuda")
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("how", ["module", "env"])
def test_first_cell_in_colab_installs_from_the_repository(no_colab, pip_calls, monkeypatch, how):
    simulate_colab(monkeypatch, how)
    namespace = run_first_cell(monkeypatch, installed=False, pip_calls=pip_calls)
    assert pip_calls == [colab.pip_install_command()]
    assert namespace["device"] in ("cpu", "cuda")


def test_first_cell_in_colab_does_not_reinstall(no_colab, pip_calls, monkeypatch):
    simulate_colab(monkeypatch, "module")
    run_first_cell(monkeypatch, installed=True, pip_calls=pip_calls)
    assert pip_calls == []


def test_first_cell_is_formatted_for_chapters():
    assert max(len(line) for line in colab.FIRST_CELL.splitlines()) <= 100  # black, 100 columns
    assert colab.PACKAGE_SPEC in colab.FIRST_CELL


def test_set_repository_moves_every_place_that_names_the_repository(tmp_path):
    """One command changes the address everywhere; nothing else names it."""
    import shutil

    from context_neurons import config
    from context_neurons.book.publishing import set_repository

    root = config.REPOSITORY_ROOT
    for name in ("_config.yml", "README.md"):
        shutil.copy(root / name, tmp_path / name)
    shutil.copytree(root / "book", tmp_path / "book", ignore=shutil.ignore_patterns("students"))
    (tmp_path / "src" / "context_neurons" / "book").mkdir(parents=True)
    shutil.copy(root / "src/context_neurons/book/colab.py", tmp_path / "src/context_neurons/book")
    changed = set_repository("https://github.com/someone/fork", root=tmp_path)
    assert tmp_path / "_config.yml" in changed and tmp_path / "README.md" in changed
    chapters = sorted((tmp_path / "book").glob("ch*.py"))
    assert chapters and all(path in changed for path in chapters)
    readme = (tmp_path / "README.md").read_text()  # the website and Colab addresses move too
    assert "https://someone.github.io/fork" in readme and "github.com/context-neurons" not in readme
    assert "colab.research.google.com/github/someone/fork/blob/main/book/students/" in readme
    for path in [tmp_path / "_config.yml", *chapters, tmp_path / "src/context_neurons/book/colab.py"]:
        text = path.read_text()
        assert colab.REPOSITORY not in text and "https://github.com/someone/fork" in text
    with pytest.raises(ValueError, match="OWNER/NAME"):
        set_repository("https://example.com/x", root=tmp_path)


# ----------------------------------------------------------------------------------------------
# Chapter 8's corpora in Colab (issue 35)
# ----------------------------------------------------------------------------------------------


def test_protocol_folders_are_the_trained_models_corpora_in_the_dataset():
    from context_neurons.models.loading import TRAINED_DIR
    from context_neurons.text.dataset import CODE_FOLDER, load_manifest
    from context_neurons.training.summary import training_run

    folders = colab.protocol_folders()
    weights = training_run(TRAINED_DIR).config.corpus_weights
    assert folders == sorted(c for c, w in weights.items() if w > 0)  # every one is published
    assert CODE_FOLDER in folders and set(folders) <= set(load_manifest()["folders"])
    assert "wordlists_en_gb_us" not in folders  # read by chapter 5, not by the protocols


def test_colab_corpora_fetches_the_protocol_folders_only_in_colab_without_corpora(
        no_colab, monkeypatch, tmp_path, capsys):
    calls = []
    fetch = lambda folders, directory: calls.append((folders, directory))  # noqa: E731
    monkeypatch.setenv("CONTEXT_NEURONS_CORPORA", "restored after the test")
    monkeypatch.delenv("CONTEXT_NEURONS_CORPORA")  # (setenv first: the test's own value goes)
    assert colab.colab_corpora(fetch) is None and calls == []  # outside Colab: nothing
    monkeypatch.setenv("COLAB_RELEASE_TAG", "release-colab-test")
    monkeypatch.setattr(colab.config, "corpora_root", lambda: tmp_path / "configured")
    assert colab.colab_corpora(fetch) == tmp_path / "configured" and calls == []  # already there
    monkeypatch.setattr(colab.config, "corpora_root", lambda: None)
    monkeypatch.setattr(colab, "default_directory", lambda: tmp_path / "cache" / "corpora")
    assert colab.colab_corpora(fetch) == tmp_path / "cache" / "corpora"
    assert calls == [(colab.protocol_folders(), tmp_path / "cache" / "corpora")]
    assert colab.os.environ["CONTEXT_NEURONS_CORPORA"] == str(tmp_path / "cache" / "corpora")


def test_colab_corpora_says_in_one_line_when_the_release_cannot_be_fetched(
        no_colab, monkeypatch, tmp_path, capsys):
    from context_neurons.checks import DataError

    def fetch(folders, directory):
        raise DataError("https://example.invalid/bible_kjv.tar.gz could not be downloaded")

    monkeypatch.setenv("COLAB_RELEASE_TAG", "release-colab-test")
    monkeypatch.setenv("CONTEXT_NEURONS_CORPORA", "restored after the test")
    monkeypatch.delenv("CONTEXT_NEURONS_CORPORA")
    monkeypatch.setattr(colab.config, "corpora_root", lambda: None)
    monkeypatch.setattr(colab, "default_directory", lambda: tmp_path / "corpora")
    assert colab.colab_corpora(fetch) is None
    out = capsys.readouterr().out.strip().splitlines()
    assert out == ["Colab: the corpora could not be fetched (https://example.invalid/bible_kjv."
                   "tar.gz could not be downloaded); chapter 8 shows no verdict."]
    assert "CONTEXT_NEURONS_CORPORA" not in colab.os.environ
