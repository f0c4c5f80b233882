"""Publishing. This module moves the book to another repository in one command.

The repository's address is set in one place, :data:`context_neurons.book.colab.REPOSITORY`. Every
other place that must name it is derived from it, and ``tests/unit/test_colab.py`` and
``tests/unit/test_chapters.py`` fail when one disagrees: ``_config.yml`` (the website's repository
button and its Colab links), the first cell of every chapter (:data:`~context_neurons.book.colab.
FIRST_CELL`, which installs the package in Colab before it can import anything), the README's
Colab line, and the stored and student notebooks (``tests/notebooks/`` and ``book/students/``,
derived from the chapters). A publisher runs ``python -m context_neurons set-repository
https://github.com/OWNER/NAME``: it replaces the address in all of them, the notebooks included
(as text, each file written atomically; nothing is executed), and prints each file it changed.
"""

from __future__ import annotations

import re
from pathlib import Path

import context_neurons.book.colab as colab
from context_neurons import config
from context_neurons.checks import InputError
from context_neurons.files import write_text_whole

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
    pairs = list(zip(addresses(colab.REPOSITORY), addresses(url)))
    return [path for path in repository_files(root) if replace_in_file(path, pairs)]


def addresses(repository: str) -> tuple[str, str, str]:
    """A repository's address and the two derived from it that the README writes: its website
    on GitHub Pages (``https://OWNER.github.io/NAME``) and Colab's path to its notebooks
    (``colab.research.google.com/github/OWNER/NAME``)."""
    owner, name = repository.removeprefix("https://github.com/").split("/")
    return (repository, f"https://{owner}.github.io/{name}",
            f"colab.research.google.com/github/{owner}/{name}")


def repository_files(root: Path) -> list[Path]:
    """Every file that names the repository: the package's address, the website's configuration,
    the README, the chapters, and the student and stored notebooks derived from them."""
    return [
        root / "src" / "context_neurons" / "book" / "colab.py",
        root / "src" / "context_neurons" / "assets" / "corpora.json",  # the corpora release
        root / "_config.yml",
        root / "README.md",
        *sorted((root / "book").glob("*.py")),
        *sorted((root / "book" / "students").glob("*.ipynb")),
        *sorted((root / "tests" / "notebooks").glob("*.ipynb")),
    ]


def replace_in_file(path: Path, pairs: list[tuple[str, str]]) -> bool:
    """Replace each ``old`` by its ``new`` (``pairs``, in order) in the text of ``path`` (a
    missing file is skipped), read once and written atomically: a reader sees the old file or
    the new one. Returns whether it changed."""
    if not path.is_file():
        return False
    text = path.read_bytes().decode("utf-8")  # line endings kept as they are
    changed = text
    for old, new in pairs:
        changed = changed.replace(old, new)
    if changed == text:
        return False
    write_text_whole(path, changed, newline="")  # the file's mode and line endings kept
    return True


def main(url: str, root: Path = config.REPOSITORY_ROOT) -> int:
    """The command: set the address everywhere, notebooks included, and print each file changed."""
    changed = set_repository(url, root)
    for path in changed:
        print(f"updated {path.relative_to(root)}")
    if not changed:
        print(f"nothing to change: no file under {root} names {colab.REPOSITORY}")
    return 0
