"""Website tests: run against a built book, only when asked.

Build the book, then point ``CONTEXT_NEURONS_SITE`` at its HTML::

    CONTEXT_NEURONS_MODEL=planted jupyter-book build .
    CONTEXT_NEURONS_SITE=_build/html python -m pytest -m website tests/website

Without ``CONTEXT_NEURONS_SITE`` the tests are skipped (so ``pytest tests`` before a build skips
them); with it they need Chromium and ChromeDriver and fail without them.
"""

from __future__ import annotations

import os
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


@pytest.fixture(scope="session")
def screenshots() -> Path:
    """Where screenshots go (gitignored ``artifacts/screenshots``)."""
    path = REPO / "artifacts" / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path
