"""Shared fixtures: the planted model (built once per session) and small seeded models."""

from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("CONTEXT_NEURONS_MODEL", "planted")
torch.set_grad_enabled(False)


#: (cell, output type) of the stored chapters' outputs that matched within the tolerance only
#: (tests/notebooks/conftest.py), gathered from the reports, pytest-xdist's workers' included.
WITHIN_TOLERANCE: list[tuple[str, str]] = []


#: Seconds each pytest-xdist worker spent in tests (setup, call and teardown): how evenly the
#: stage is shared, for whoever next shortens CI.
WORKER_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report) -> None:
    if report.when == "call":
        WITHIN_TOLERANCE.extend((report.nodeid, key) for name, key in report.user_properties
                                if name == "matched_within_tolerance")
    gateway = getattr(getattr(report, "node", None), "gateway", None)  # set by pytest-xdist
    if gateway is not None:
        WORKER_SECONDS[gateway.id] = WORKER_SECONDS.get(gateway.id, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter) -> None:
    if WITHIN_TOLERANCE:
        terminalreporter.write_sep("-", "stored outputs that matched within the tolerance only")
        for cell, key in WITHIN_TOLERANCE:
            terminalreporter.write_line(f"{cell} ('{key}')")
    if WORKER_SECONDS:
        terminalreporter.write_sep("-", "seconds in tests per worker")
        for worker, seconds in sorted(WORKER_SECONDS.items()):
            terminalreporter.write_line(f"{worker}: {seconds:.0f} s")


def pytest_collection_modifyitems(items) -> None:
    """The test files holding a ``slow``-marked test first, whole (their module fixtures are
    built once), the order otherwise kept: under ``-n 2`` the scheduler hands out the chapters,
    then the unit tests in this order, so the long ones start early and the run does not end
    with one worker finishing a long test while the other waits."""
    def path(item) -> str:
        return item.nodeid.split("::", 1)[0]

    slow = {path(item) for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: path(item) not in slow)


#: Unit test files handed to one worker whole under ``-n 2``: their module-scoped fixture is an
#: end-to-end run that every test of the file reads, so split over two workers it was built twice
#: (the GPT-2-shaped stand-in's whole protocol: 512 s and 481 s of setup, one per worker, in the
#: CI run of 2026-11-29). The scheduler runs in the controller, which sees test ids but no
#: markers, so the files are named here.
WHOLE_MODULES = frozenset({"tests/unit/test_gpt2_standin.py"})


@pytest.hookimpl(optionalhook=True)  # without pytest-xdist the hook is never called
def pytest_xdist_make_scheduler(config, log):
    """``pytest -n 2``: each stored chapter's cells go to one worker, in order (a chapter's
    kernel keeps its state from cell to cell), the chapters first as the longest units, and so
    does each file of :data:`WHOLE_MODULES`; every other unit test goes to whichever worker is
    free. (xdist's own ``--dist loadgroup`` cannot be
    used: under pytest 9 its renaming of test ids no longer takes effect.) An explicit
    ``--dist`` keeps its own meaning."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ChaptersTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if path.endswith(".ipynb") or path in WHOLE_MODULES else nodeid

    return ChaptersTogether(config, log)


@pytest.fixture(scope="session")
def planted():
    """The planted ground-truth model (GPT-2 Small shapes, 2 layers); about 10 s to build."""
    from context_neurons.models import load_model

    return load_model("planted")


@pytest.fixture(scope="session")
def small_model():
    from context_neurons.models.toy import make_small_model

    return make_small_model()[0]


@pytest.fixture
def computations(monkeypatch):
    """A Counter of the method's computations during a test: every call of ``classify_heads``,
    ``build_circuit`` and ``score_neurons`` through any reference the package holds, and every
    read of a model's weights (issue 33: one main-job run computes each once)."""
    from collections import Counter

    from context_neurons import circuit, discovery, method, taxonomy
    from context_neurons.models import weights

    counts: Counter = Counter()

    def counted(name, function):
        def wrapper(*args, **kwargs):
            counts[name] += 1
            return function(*args, **kwargs)
        return wrapper

    for name, holders in {"classify_heads": (taxonomy, method),
                          "build_circuit": (circuit, method),
                          "score_neurons": (discovery, method)}.items():
        original = getattr(holders[0], name)
        for holder in holders:
            monkeypatch.setattr(holder, name, counted(name, original))
    monkeypatch.setattr(weights, "_read", counted("read_weights", weights._read))
    weights._READ.clear()  # every model is read again while counted
    return counts
