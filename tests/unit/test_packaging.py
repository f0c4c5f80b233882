"""Packaging: environment.yml, pyproject.toml and every install command in the repository agree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

import yaml

import tomllib

REPO = Path(__file__).resolve().parents[2]
EXTRAS_IN_COMMAND = re.compile(r"""(?:^|[\s"'])(?:-e\s+)?["']?\.\[(?P<extras>[a-z0-9_,\s-]+)\]""")


@pytest.fixture(scope="module")
def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


@pytest.fixture(scope="module")
def environment() -> dict:
    return yaml.safe_load((REPO / "environment.yml").read_text())


def conda_dependencies(environment: dict) -> dict[str, str]:
    """``name -> version spec`` of the conda (non-pip) dependencies."""
    found = {}
    for dep in environment["dependencies"]:
        if isinstance(dep, str):
            match = re.match(r"^([A-Za-z0-9_.-]+)\s*(.*)$", dep)
            found[match[1]] = match[2].strip()
    return found


def pip_section(environment: dict) -> list[str]:
    sections = [dep["pip"] for dep in environment["dependencies"] if isinstance(dep, dict)]
    assert len(sections) == 1, "environment.yml has one pip section"
    return sections[0]


def extras_of(command: str) -> set[str]:
    match = EXTRAS_IN_COMMAND.search(command)
    assert match, f"no '.[extras]' install in {command!r}"
    return {extra.strip() for extra in match["extras"].split(",") if extra.strip()}


def test_environment_installs_the_package_with_every_extra(pyproject, environment):
    (entry,) = pip_section(environment)  # the package itself and nothing installed beside it
    assert entry.startswith("-e "), "the package is installed editable from the checkout"
    assert extras_of(entry) == set(pyproject["project"]["optional-dependencies"])


def test_python_version_is_allowed(pyproject, environment):
    requires = SpecifierSet(pyproject["project"]["requires-python"])
    pinned = conda_dependencies(environment)["python"].lstrip("=")
    assert Version(pinned) in requires, f"python={pinned} vs requires-python {requires}"


def test_torch_minimum_agrees(pyproject, environment):
    (torch,) = [
        Requirement(r)
        for r in pyproject["project"]["dependencies"]
        if Requirement(r).name == "torch"
    ]
    conda_spec = SpecifierSet(conda_dependencies(environment)["pytorch"])
    assert str(conda_spec) == str(torch.specifier), "pytorch (conda) and torch (pip) ranges"


def test_website_test_dependency_is_declared(pyproject):
    test_extra = {
        Requirement(r).name for r in pyproject["project"]["optional-dependencies"]["test"]
    }
    assert "selenium" in test_extra, "tests/website drives Chromium through selenium"


def install_commands() -> list[tuple[str, str]]:
    """``(file, line)`` of every ``pip install ... .[extras]`` in the repository's docs and scripts."""
    files = [REPO / "README.md", REPO / ".ci" / "run", REPO / "environment.yml"]
    files += sorted((REPO / ".github" / "workflows").glob("*.yml"))
    files += sorted((REPO / "book").glob("*.md")) + sorted((REPO / "book" / "reference").glob("*.md"))
    found = []
    for path in files:
        if path.is_file():
            for line in path.read_text().splitlines():
                if EXTRAS_IN_COMMAND.search(line) and ("pip" in line or "-e " in line):
                    found.append((str(path.relative_to(REPO)), line.strip()))
    return found


def test_install_commands_name_existing_extras(pyproject):
    extras = set(pyproject["project"]["optional-dependencies"])
    commands = install_commands()
    assert any(name == ".ci/run" for name, _ in commands)
    for name, line in commands:
        unknown = extras_of(line) - extras
        assert not unknown, f"{name}: unknown extras {unknown} in {line!r}"


def test_colab_installs_existing_extras(pyproject):
    from context_neurons.book import colab

    assert set(colab.EXTRAS.split(",")) <= set(pyproject["project"]["optional-dependencies"])
    assert colab.PACKAGE_SPEC.startswith(pyproject["project"]["name"] + "[")
