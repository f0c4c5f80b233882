"""Issue 54: protocol v3's command, ``python -m context_neurons v3`` (``python -m
context_neurons.commands.v3`` runs the same one), reads like ``reproduce``: a bad input is refused
before the run of several minutes, in one line with exit status 2 (or argparse's refusal, also
status 2), never a traceback; its help names its defaults and choices; a line on stderr says it
started."""

from __future__ import annotations

import argparse

import pytest
import torch

from context_neurons import config
from context_neurons.__main__ import build_parser, main
from context_neurons.commands import v3
from context_neurons.verdict.protocol import load_protocol_v3
from cli_cases import one_line_error  # tests/unit/cli_cases.py

USAGE = "usage: python -m context_neurons v3"


@pytest.fixture
def no_run(monkeypatch):
    """The evaluation replaced by one that fails the test: a refusal must come before any work."""
    def must_not_run(*args, **kwargs):
        raise AssertionError("the evaluation started before the input was checked")

    monkeypatch.setattr(v3, "run", must_not_run)


@pytest.fixture
def fake_run(monkeypatch):
    """The evaluation replaced by one that records its arguments and returns no model; the
    torch thread count the command sets is put back after the test."""
    calls = []

    def fake(*args, **kwargs):
        calls.append((args, kwargs))
        return {"protocol": "discovery-verdict-v3", "registered": "test", "models": {},
                "primary_verdict": "test"}

    threads = torch.get_num_threads()
    monkeypatch.setattr(v3, "run", fake)
    yield calls
    torch.set_num_threads(threads)


def entry_points(argv: list[str]):
    """The subcommand and the module's entry point, given the same options."""
    return [lambda: main(["v3", *argv]), lambda: v3.main(argv)]


def test_an_unknown_model_is_one_line_before_the_run(capsys, no_run):
    for run in entry_points(["--model", "nope"]):
        assert run() == 2
        one_line_error(capsys.readouterr(), "'nope'", "training.json", "'trained-seed1'")


@pytest.mark.parametrize("argv, fragment", [
    (["--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
    (["--threads", "-2"], "argument --threads: must be at least 1, got -2"),
    (["--threads", "0"], "argument --threads: must be at least 1, got 0"),
    (["--resamples", "0"], "argument --resamples: must be at least 1, got 0"),
    (["--batch-size", "two"], "argument --batch-size: expected a whole number, got 'two'"),
])
def test_a_bad_option_is_refused_by_the_parser(argv, fragment, capsys, no_run):
    for run in entry_points(argv):
        with pytest.raises(SystemExit) as exit_:
            run()
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith(USAGE) and "Traceback" not in err, err
        last = err.strip().splitlines()[-1]  # argparse's one line, under the usage
        assert last.startswith("python -m context_neurons v3: error: ") and fragment in last, err


def test_a_thread_variable_of_zero_is_one_line(monkeypatch, capsys, no_run):
    """``--threads 0`` used to be replaced by the default silently, and the variable's 0 ended
    in a traceback."""
    monkeypatch.setenv(config.THREADS.name, "0")
    assert main(["v3"]) == 2
    one_line_error(capsys.readouterr(), config.THREADS.name, "'0'")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_device_cuda_without_a_gpu_is_one_line(capsys, no_run):
    assert main(["v3", "--device", "cuda"]) == 2
    one_line_error(capsys.readouterr(), "--device cuda", "no CUDA")


@pytest.mark.parametrize("kind", ["missing-folder", "directory"])
def test_a_bad_out_path_is_refused_before_the_run(kind, tmp_path, capsys, no_run):
    out = tmp_path / "no" / "such" / "v3.json" if kind == "missing-folder" else tmp_path
    assert main(["v3", "--out", str(out)]) == 2
    one_line_error(capsys.readouterr(), "--out", "does not exist" if kind == "missing-folder"
                   else "is a directory")
    assert not (tmp_path / "no").exists()


def test_the_help_names_the_command_its_defaults_and_choices():
    action = next(a for a in build_parser()._actions
                  if isinstance(a, argparse._SubParsersAction))
    for parser in (action.choices["v3"], v3.parser()):
        text = parser.format_help()
        assert text.startswith(USAGE), text
        assert "``" not in text and "871d5be" not in text  # no reStructuredText, no cut sentence
        assert "{cpu,cuda,auto}" in text and "(default: cpu)" in text
        assert "(default: trained)" in text and "(default: 8)" in text
        assert f"the protocol's {load_protocol_v3().bootstrap.resamples}" in text
        assert f"${config.THREADS.name}" in text
        description = parser.description.rstrip(".")
        assert "." not in description and description.lower() == v3.DESCRIPTION  # one sentence
    assert "v3" in build_parser().format_help()
    same = {tuple(a.option_strings) for a in v3.parser()._actions}
    assert same == {tuple(a.option_strings) for a in action.choices["v3"]._actions}


def test_a_line_on_stderr_when_it_starts(capsys, fake_run):
    assert main(["v3", "--model", "trained-seed1", "--threads", "1"]) == 0
    err = capsys.readouterr().err
    assert err.splitlines()[0].startswith("protocol v3 on trained-seed1 (cpu, 1 torch threads)")
    assert fake_run[-1][1]["progress"] is True and fake_run[-1][1]["device"] == "cpu"
    assert main(["v3", "--model", "trained-seed1", "--threads", "1", "--no-progress"]) == 0
    assert capsys.readouterr().err == "" and fake_run[-1][1]["progress"] is False


def test_auto_is_resolved_before_the_run(capsys, fake_run):
    """``--device auto`` reaches the evaluation as the device it picked (the stored result's
    label asks CUDA for its name only on a GPU)."""
    assert main(["v3", "--model", "trained-seed1", "--device", "auto", "--no-progress"]) == 0
    assert fake_run[-1][1]["device"] == ("cuda" if torch.cuda.is_available() else "cpu")


def test_store_records_the_command_that_computes_the_same_result():
    args = v3.parser().parse_args(["--model", "trained-seed1", "--store", "--no-progress",
                                   "--out", "x.json"])
    assert v3.command_line(args, "cpu", 1) == (
        "python -m context_neurons v3 --model trained-seed1 --store --threads 1")
    args = v3.parser().parse_args(["--model", "runs/x", "--no-apart", "--no-label-free",
                                   "--resamples", "50", "--batch-size", "4", "--device", "cuda"])
    assert v3.command_line(args, "cuda", 12) == (
        "python -m context_neurons v3 --model runs/x --resamples 50 --batch-size 4 "
        "--no-label-free --no-apart --device cuda --threads 12")
