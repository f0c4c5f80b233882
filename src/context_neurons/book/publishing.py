"""Publishing. This module moves the book to another repository in one command.

The repository's address is set in one place, :data:`context_neurons.book.colab.REPOSITORY`. Every
other place that must name it is derived from it, and ``tests/unit/test_colab.py`` and
``tests/unit/test_chapters.py`` fail when one disagrees: ``_config.yml`` (the website's repository
button and its Colab links), the first cell of every chapter (:data:`~context_neurons.book.colab.
FIRST_CELL`, which installs the package in Colab before it can import anything), the README's
Colab line, and the stored and student notebooks (regenerated from the chapters). A publisher runs
``python -m context_neurons set-repository https://github.com/OWNER/NAME`` and then the two
regeneration commands it prints.
"""

from __future__ import annotations

import re
from pathlib import Path

from context_neurons import config
from context_neurons.book import colab
from context_neurons.checks import InputError

#: ``https://github.com/OWNER/NAME``: an owner is GitHub's user or organisation name (letters,
#: digits and single hyphens inside, at most 39 characters); a repository's name is letters,
#: digits, ``.``, ``-`` and ``_``, but not ``.`` or ``..``.
GITHUB = re.compile(
    r"^https://github\.com/(?P<owner>[A-Za-z0-9](?:-?[A-Za-z0-9]){0,38})/(?P<name>[A-Za-z0-9._-]{1,100})$"
)


def check_repository_url(url: str) -> str:
    """``url`` without a trailing slash or ``.git`` if it names a GitHub repository, else an
    :class:`InputError`."""
    url = url.strip().rstrip("/").removesuffix(".git")
    match = GITHUB.match(url)
    if match is None or match["name"] in (".", ".."):
        raise InputError(
            f"Expected https://github.com/OWNER/NAME (OWNER: letters, digits and hyphens; NAME: "
            f"letters, digits, '.', '-' and '_', not '.' or '..'), got {url!r}."
        )
    return url


def set_repository(url: str, root: Path = config.REPOSITORY_ROOT) -> list[Path]:
    """Replace the repository's address everywhere it is written; returns the files changed.

    Args:
        url: ``https://github.com/OWNER/NAME`` (Colab opens notebooks from GitHub).
        root: the repository's root (a copy of it, in tests).
    """
    url = check_repository_url(url)
    old = colab.REPOSITORY
    files = [
        root / "src" / "context_neurons" / "book" / "colab.py",
        root / "_config.yml",
        root / "README.md",
        *sorted((root / "book").glob("*.py")),
    ]
    changed = []
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text()
        new = text.replace(old, url)
        if new != text:
            path.write_text(new)
            changed.append(path)
    return changed


def main(url: str) -> int:
    """The command: set the address, then say what to regenerate."""
    for path in set_repository(url):
        print(f"updated {path.relative_to(config.REPOSITORY_ROOT)}")
    print(
        "now regenerate what is derived from the chapters:\n"
        "  python -m context_neurons student-notebooks\n"
        "  python -m context_neurons regenerate-notebooks"
    )
    return 0
