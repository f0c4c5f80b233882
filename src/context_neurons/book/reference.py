"""Generated blocks: the parts of the README and the book's pages that the code and the shipped
results already say (what the book found, every command's help, the configuration variables,
the corpora dataset), so that they cannot drift from them.

A block sits between two comment lines, invisible on GitHub and on the website::

    <!-- generated: commands -->
    ...
    <!-- end of generated block -->

``python -m context_neurons refresh-docs`` rewrites every block of :data:`DOCUMENTS` in place;
``tests/unit/test_reference.py`` fails while one is out of date; and the website build fills
them again as it reads each page (``scripts/book_extension.py``), so the first page's findings
are computed when the page is built.
"""

from __future__ import annotations

import argparse
import functools
import re
from collections.abc import Callable
from pathlib import Path

from context_neurons import config
from context_neurons.book.notebooks import BOOK, REPO
from context_neurons.files import write_text_whole
from context_neurons.reproduce.findings import finding_sentence, findings_table, shipped_findings
from context_neurons.text.dataset import load_manifest, markdown_table

BLOCK = re.compile(r"(?P<open><!-- generated: (?P<name>[a-z-]+) -->\n)(?P<body>.*?)"
                   r"(?P<close><!-- end of generated block -->)", re.S)
#: The files that hold generated blocks.
DOCUMENTS = (REPO / "README.md", BOOK / "intro.md", *sorted((BOOK / "reference").glob("*.md")))
#: Help texts are wrapped at this width whatever the terminal, so that they print alike.
HELP_WIDTH = 96


def help_text(parser: argparse.ArgumentParser) -> str:
    """A parser's ``--help`` at :data:`HELP_WIDTH` columns."""
    original = parser.formatter_class
    parser.formatter_class = functools.partial(original, width=HELP_WIDTH)
    try:
        return parser.format_help()
    finally:
        parser.formatter_class = original


def commands_reference(parsers: dict[str, argparse.ArgumentParser]) -> str:
    """Every command's ``--help``, a section each (``parsers``: name -> its parser, the main
    parser under ``""``)."""
    sections = []
    for name, parser in parsers.items():
        title = f"python -m context_neurons {name}".rstrip()
        sections.append(f"### `{title}`\n\n```text\n{help_text(parser).rstrip()}\n```")
    return "\n\n".join(sections)


def configuration_table() -> str:
    """Every environment variable the package reads (:data:`context_neurons.config.VARIABLES`)."""
    rows = [f"| `{v.name}` | {v.meaning} | {v.default} |" for v in config.VARIABLES]
    return "\n".join(["| variable | meaning | default |", "|---|---|---|", *rows])


def findings_sentences() -> str:
    """What the book found on each registered model, a bullet each."""
    return "\n".join(f"- {finding_sentence(f)}" for f in shipped_findings())


def generators(parsers: dict[str, argparse.ArgumentParser]) -> dict[str, Callable[[], str]]:
    """Each block's name and the function that writes its text."""
    return {
        "findings-table": lambda: findings_table(shipped_findings()),
        "findings-sentences": findings_sentences,
        "commands": lambda: commands_reference(parsers),
        "configuration": configuration_table,
        "corpora": lambda: markdown_table(load_manifest()),
    }


def refreshed(text: str, parsers: dict[str, argparse.ArgumentParser]) -> str:
    """``text`` with every generated block written again (an unknown block name is an error)."""
    makers = generators(parsers)

    def fill(match: re.Match) -> str:
        name = match["name"]
        if name not in makers:
            raise ValueError(f"unknown generated block {name!r}; known: {sorted(makers)}")
        return f"{match['open']}{makers[name]().rstrip()}\n{match['close']}"

    return BLOCK.sub(fill, text)


def _refreshed_documents(parsers: dict[str, argparse.ArgumentParser]) -> dict[Path, str]:
    """Each out-of-date document and its text with every block written again (read once)."""
    out = {}
    for path in DOCUMENTS:
        text = path.read_text()
        new = refreshed(text, parsers)
        if new != text:
            out[path] = new
    return out


def stale_documents(parsers: dict[str, argparse.ArgumentParser]) -> list[Path]:
    """The documents whose generated blocks are out of date."""
    return list(_refreshed_documents(parsers))


def refresh_documents(parsers: dict[str, argparse.ArgumentParser]) -> list[Path]:
    """Rewrite every out-of-date document (each written whole); returns those rewritten."""
    stale = _refreshed_documents(parsers)
    for path, text in stale.items():
        write_text_whole(path, text)
    return list(stale)


__all__ = ["BLOCK", "DOCUMENTS", "HELP_WIDTH", "commands_reference", "configuration_table",
           "findings_sentences", "generators", "help_text", "refresh_documents", "refreshed",
           "stale_documents"]
