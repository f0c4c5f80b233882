"""CI's pytest-xdist scheduler (``tests/conftest.py``): which tests travel together under -n 2."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("xdist")


def _scheduler():
    spec = importlib.util.spec_from_file_location(
        "tests_root_conftest", Path(__file__).resolve().parents[1] / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    class Config:  # what the scheduler reads of pytest's config under `-n 2`
        option = type("Option", (), {"numprocesses": 2, "tx": ["popen"] * 2, "dist": "load"})()

        def getvalue(self, name):
            return getattr(self.option, name, None)

        def getoption(self, name, default=None):
            return getattr(self.option, name, default)

    return module, module.pytest_xdist_make_scheduler(Config(), None)


def test_chapters_and_whole_modules_go_to_one_worker_and_other_tests_one_by_one():
    module, scheduler = _scheduler()
    assert scheduler is not None
    chapter = "tests/notebooks/ch06_evaluation.ipynb"
    assert scheduler._split_scope(f"{chapter}::Cell 2") == chapter
    for path in module.WHOLE_MODULES:  # a module fixture built once, not once per worker
        assert Path(path).is_file(), path
        assert scheduler._split_scope(f"{path}::test_a") == scheduler._split_scope(
            f"{path}::test_b") == path
    other = "tests/unit/test_band.py::test_one"
    assert scheduler._split_scope(other) == other
