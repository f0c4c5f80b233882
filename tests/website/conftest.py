"""Website tests: run against a built book, only when asked.

Build the book, then point ``CONTEXT_NEURONS_SITE`` at its HTML::

    CONTEXT_NEURONS_MODEL=planted jupyter-book build .
    CONTEXT_NEURONS_SITE=_build/html python -m pytest -m website tests/website

Screenshots go to ``artifacts/screenshots/`` (emptied when the tests start, listed at the end;
``CONTEXT_NEURONS_SCREENSHOTS`` names another directory).
For another book (a small test site), also set ``CONTEXT_NEURONS_TOC`` (its ``_toc.yml``) and
``CONTEXT_NEURONS_BOOK_ROOT`` (the directory it was built from, where the page sources are).

Without ``CONTEXT_NEURONS_SITE`` the tests are skipped (so ``pytest tests`` before a build skips
them); with it they need Chromium and ChromeDriver and fail without them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from site_helpers import REPO

SITE_ENV = "CONTEXT_NEURONS_SITE"


def pytest_configure(config):
    config.addinivalue_line("markers", "website: drives headless Chromium over the built book")


@pytest.fixture(scope="session")
def site() -> Path:
    """The built site's directory (``$CONTEXT_NEURONS_SITE``)."""
    if not os.environ.get(SITE_ENV):
        pytest.skip(f"set {SITE_ENV}=_build/html after building the book to run the website tests")
    path = Path(os.environ[SITE_ENV])
    path = path if path.is_absolute() else REPO / path
    if not (path / "index.html").is_file():
        pytest.fail(
            f"{SITE_ENV}={path}: no index.html; build the book first (jupyter-book build .)"
        )
    return path


SCREENSHOTS = Path(
    os.environ.get("CONTEXT_NEURONS_SCREENSHOTS") or REPO / "artifacts" / "screenshots"
)
_taken: list[Path] = []  # the screenshot directory, once this session has started writing to it


@pytest.fixture(scope="session")
def screenshots(site) -> Path:
    """Where screenshots go (gitignored ``artifacts/screenshots``), emptied first.

    Screenshots of an earlier run are removed when the website tests start, so every file there
    shows this build. The directory and its files are listed at the end of the run.
    """
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)
    SCREENSHOTS.mkdir(parents=True)
    _taken.append(SCREENSHOTS)
    return SCREENSHOTS


def pytest_terminal_summary(terminalreporter):
    """List the screenshots (CI logs show where they are and what was taken)."""
    for directory in _taken:
        files = sorted(directory.glob("*.png"))
        terminalreporter.section("website screenshots")
        terminalreporter.write_line(f"{len(files)} screenshots in {directory}:")
        for path in files:
            terminalreporter.write_line(f"  {path.name} ({path.stat().st_size // 1024} KiB)")
