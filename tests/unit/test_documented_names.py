"""Every module path, command, option and file the README, the book's pages and the help texts
name exists (issue 34): a reader who copies one from the text gets what the text says."""

from __future__ import annotations

import argparse
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The texts a reader copies names from: the README, the book's pages (the reference pages
#: included) and chapters, the benchmarks' README.
TEXTS = sorted([ROOT / "README.md", ROOT / "benchmarks" / "README.md",
                *(ROOT / "book").glob("*.md"), *(ROOT / "book" / "reference").glob("*.md"),
                *(ROOT / "book").glob("*.py")])

#: The package's dotted names (not an attribute ``truth.context_neurons.items()``).
DOTTED = re.compile(r"(?<![\w.])context_neurons(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
COMMAND = re.compile(r"python -m context_neurons ([a-z][a-z0-9-]*)([^`\n]*)")
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
FILE = re.compile(r"\b((?:scripts|benchmarks|src/context_neurons)/[\w./-]+\.(?:py|sh|json|md))\b")


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    """Each command's parser (``train``'s own, ``training.cli``, in its place), as the book's
    commands page prints them."""
    from context_neurons.__main__ import command_parsers

    return {name: parser for name, parser in command_parsers().items() if name}


def help_texts() -> dict[str, str]:
    """The main parser's help and every command's."""
    from context_neurons.__main__ import command_parsers

    return {f"{name} --help".strip(): parser.format_help()
            for name, parser in command_parsers().items()}


def all_texts() -> dict[str, str]:
    texts = {str(path.relative_to(ROOT)): path.read_text() for path in TEXTS}
    texts.update(help_texts())
    return texts


def resolves(dotted: str) -> bool:
    """Whether ``dotted`` is a module of the package or an attribute of one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def test_every_module_path_named_exists():
    named = {(where, name) for where, text in all_texts().items() for name in DOTTED.findall(text)}
    assert len({name for _, name in named}) > 50  # the texts name the package's modules often
    missing = sorted(f"{where}: {name}" for where, name in named if not resolves(name))
    assert not missing, "names that do not exist:\n" + "\n".join(missing)


def test_every_command_and_its_options_named_exist():
    commands = _subparsers()
    assert sum(len(COMMAND.findall(text)) for text in all_texts().values()) > 10
    wrong = []
    for where, text in all_texts().items():
        for name, rest in COMMAND.findall(text):
            if name not in commands:
                wrong.append(f"{where}: command {name!r}")
                continue
            known = {s for a in commands[name]._actions for s in a.option_strings}
            wrong += [f"{where}: {name} {option}" for option in OPTION.findall(rest)
                      if option not in known]
    assert not wrong, "commands or options that do not exist:\n" + "\n".join(sorted(set(wrong)))


def test_every_file_named_exists():
    named = {(where, path) for where, text in all_texts().items() for path in FILE.findall(text)}
    assert len(named) > 10
    missing = sorted(f"{where}: {path}" for where, path in named if not (ROOT / path).exists())
    assert not missing, "files that do not exist:\n" + "\n".join(missing)


@pytest.mark.parametrize("bad", ["context_neurons.data.domain_documents",
                                 "context_neurons.taxonomy.no_such_function"])
def test_a_wrong_name_is_caught(bad):
    assert not resolves(bad)
    assert resolves("context_neurons.text.corpora.domain_documents")
