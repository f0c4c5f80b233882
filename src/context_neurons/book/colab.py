"""Colab set-up. This module prepares a Google Colab runtime for a chapter (elsewhere: nothing).

A chapter opened in Colab (the rocket button of the website) is a lone notebook: the
``context_neurons`` package is not installed there. Each chapter therefore starts with a short
cell, :data:`FIRST_CELL`, that pip-installs the package from the repository when it runs in Colab
and cannot import it yet, then calls :func:`colab_setup`, which selects the GPU when the runtime
has one and returns the device string. Outside Colab (a local Jupyter, CI, the website build) the
cell installs nothing, prints nothing and returns the device the chapters will use.

Colab is detected by the ``google.colab`` module being imported (it is, in every Colab kernel) or
by the ``COLAB_RELEASE_TAG`` environment variable that Colab sets. In Colab, :func:`colab_setup`
also turns on Colab's custom widget manager, without which the interactive explorers
(:mod:`context_neurons.interactive`, ipywidgets 8) do not display.

Chapter 8 also calls :func:`colab_corpora`: in Colab, without the offline corpora, it fetches the
folders its verdict protocols read from the book's dataset release (``fetch-corpora``), so that
the page's verdicts are computed there, not read from the stored page.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

import torch

from context_neurons import config
from context_neurons.checks import ContextNeuronsError
from context_neurons.config import in_colab
from context_neurons.models.loading import TRAINED_DIR
from context_neurons.text.dataset import default_directory, fetch_corpora, load_manifest
from context_neurons.training.summary import TrainingRun, training_run

REPOSITORY = "https://github.com/context-neurons/context-neurons"
#: Only what the chapters import at run time (``online``: ``datasets`` for OpenWebText); the
#: ``book`` extra (jupyter-book, Sphinx) builds the website: it is not installed into Colab kernels.
EXTRAS = "online"
PACKAGE_SPEC = f"context-neurons[{EXTRAS}] @ git+{REPOSITORY}"
COLAB_MODULE = "google.colab"
NO_GPU_HINT = (
    "No GPU in this Colab runtime: the chapter runs on the CPU (slower). For a GPU choose "
    "Runtime > Change runtime type > T4 GPU, then run the notebook again."
)

#: The first code cell of every chapter (jupytext ``py:percent``), tagged ``remove-cell`` so the
#: website does not show it. It cannot import this module before the package is installed, so it
#: repeats the Colab test and the install command; ``tests/unit/test_colab.py`` runs it with
#: Colab simulated and checks it agrees with :func:`context_neurons.config.in_colab` and
#: :func:`pip_install_command`.
FIRST_CELL = f"""\
# %% tags=["remove-cell"]
# Colab only: install this book's package and use the GPU (elsewhere this cell does nothing).
import importlib.util
import os
import sys

if ("google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ) and (
    importlib.util.find_spec("context_neurons") is None
):
    import subprocess

    spec = "{PACKAGE_SPEC}"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", spec], check=True)
    importlib.invalidate_caches()
from context_neurons.book.colab import colab_setup

device = colab_setup()
"""


def pip_install_command(spec: str = PACKAGE_SPEC, upgrade: bool = False) -> list[str]:
    """The command that installs the package into the running interpreter."""
    command = [sys.executable, "-m", "pip", "install", "-q"]
    if upgrade:
        command.append("--upgrade")
    return command + [spec]


def install_package(
    spec: str = PACKAGE_SPEC, upgrade: bool = False, run: Callable[..., object] | None = None
) -> list[str]:
    """Pip-install ``spec`` (by default the package from the repository); returns the command run.

    ``run`` runs the command (default ``subprocess.run``, looked up at call time).
    """
    command = pip_install_command(spec, upgrade=upgrade)
    (run or subprocess.run)(command, check=True)
    importlib.invalidate_caches()
    return command


def enable_colab_widgets() -> bool:
    """Turn on Colab's custom widget manager (needed by ipywidgets 8); True when it was enabled.

    Calls ``google.colab.output.enable_custom_widget_manager()``; returns False, doing nothing,
    where that module or function is missing (outside Colab, or an older Colab).
    """
    try:
        output = importlib.import_module(f"{COLAB_MODULE}.output")
        enable = output.enable_custom_widget_manager
    except (ImportError, AttributeError):
        return False
    enable()
    return True


def select_device(cuda_available: bool | None = None) -> str:
    """``"cuda"`` when a CUDA GPU is present, else ``"cpu"`` (the device ``setup_chapter`` uses)."""
    if cuda_available is None:
        cuda_available = torch.cuda.is_available()
    return "cuda" if cuda_available else "cpu"


def colab_setup(
    install: bool | None = None,
    spec: str = PACKAGE_SPEC,
    cuda_available: bool | None = None,
    run: Callable[..., object] | None = None,
) -> str:
    """Prepare Colab for a chapter and return the device string; outside Colab only the latter.

    In Colab: installs the package from the repository when it is not importable (``install=None``)
    or when asked (``install=True``, an upgrade to the repository's latest version), points the
    chapters at GPT-2 Small (``CONTEXT_NEURONS_MODEL=gpt2`` unless set), enables Colab's widget
    manager for the explorers (:func:`enable_colab_widgets`), and prints the device with a hint
    when the runtime has no GPU. Outside Colab it installs nothing, prints nothing and
    changes nothing.

    Args:
        install: install the package (None: only when it cannot be imported).
        spec: the pip requirement to install.
        cuda_available: whether a GPU is present (None: ask torch).
        run: the function that runs the pip command (default ``subprocess.run``).

    Returns:
        ``"cuda"`` or ``"cpu"``.
    """
    if not in_colab():
        return select_device(cuda_available)
    if install or (install is None and importlib.util.find_spec("context_neurons") is None):
        install_package(spec, upgrade=bool(install), run=run)
    os.environ.setdefault(config.MODEL.name, config.DEFAULT_MODEL)
    enable_colab_widgets()
    device = select_device(cuda_available)
    print(f"Colab: context_neurons ready; device {device}.")
    if device == "cpu":
        print(NO_GPU_HINT)
    return device


def protocol_folders(run: TrainingRun | None = None) -> list[str]:
    """The corpora dataset's folders the verdict protocols read for the trained model: the
    corpora it was trained on (``corpus_weights``, its held-out documents are v1's and v2's
    EVAL and v3's CONFIRM and CAL documents), the code corpus among them (v3's fallback)."""
    run = run or training_run(TRAINED_DIR)
    folders = load_manifest()["folders"]
    return sorted(c for c, w in run.config.corpus_weights.items()
                  if w > 0 and c in folders)


def colab_corpora(fetch: Callable[..., object] | None = None) -> Path | None:
    """In Colab without corpora, fetch the folders the verdict protocols read
    (:func:`protocol_folders`, about 24 MB to download, 88 MB on disk) from the book's dataset
    release and point the package at them, so that chapter 8 computes its verdicts; returns
    their directory. Outside
    Colab, or where a corpora directory is already configured, it does nothing (returns the
    configured directory or None). A fetch that fails is said in one line, and the chapter then
    shows no verdict, as on any machine without the corpora.

    Args:
        fetch: the fetching function (default :func:`~context_neurons.text.dataset.fetch_corpora`;
            tests pass another).
    """
    if not in_colab():
        return None
    configured = config.corpora_root()
    if configured is not None:
        return configured
    directory = default_directory()
    try:
        (fetch or fetch_corpora)(protocol_folders(), directory)
    except ContextNeuronsError as err:
        print(f"Colab: the corpora could not be fetched ({err}); chapter 8 shows no verdict.")
        return None
    os.environ[config.CORPORA.name] = str(directory)
    return directory
