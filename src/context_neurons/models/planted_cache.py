"""The planted model's file cache. Building the planted model from its seed takes about ten
seconds on a CPU (most of it the corpora's topic association), and every chapter kernel and test
process that loads it would build it again: :func:`planted_state` keeps each build in
``$CONTEXT_NEURONS_CACHE/planted``, keyed by everything the build reads or computes with.

The key is a hash of the seed and variant, the package's source, the tokenizer and the
``tokenizers`` version, every file of the corpora directory, and what can change a float's low
bits (torch's and NumPy's versions, the CPU's model and the capability PyTorch uses on it,
``ATEN_CPU_CAPABILITY``, ``MKL_CBWR`` and the thread count), so that a file is read back where a
fresh build would compute the same tensors (tested bit for bit). Files are written whole; the
newest :data:`KEEP` are kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import warnings
from pathlib import Path

import numpy as np
import tokenizers
import torch
from torch import Tensor

from context_neurons import config
from context_neurons.checks import InputError
from context_neurons.files import write_whole
from context_neurons.models.planted import build_planted_state
from context_neurons.models.planted_plan import PlantedTruth
from context_neurons.text.corpora import corpora_dir

#: Cached builds kept (each about 215 MB): the newest, by when they were written or read.
KEEP = 4
#: Bumped when the file's layout changes.
FORMAT = 2
_PACKAGE = Path(__file__).resolve().parents[1]


def build_key(tokenizer, seed: int, variant: str, corpora: Path | None) -> str:
    """The SHA-256 of what a build of ``(seed, variant)`` depends on (module docstring)."""
    digest = hashlib.sha256()

    def add(name: str, content: bytes) -> None:  # each part named and its length given
        digest.update(f"{name}\0{len(content)}\0".encode() + content)

    setting = {
        "format": FORMAT, "seed": seed, "variant": variant, "torch": torch.__version__,
        "numpy": np.__version__, "tokenizers": tokenizers.__version__,
        "machine": platform.machine(), "cpu": _cpu_model(),
        "capability": torch.backends.cpu.get_cpu_capability(),
        **config.cpu_arithmetic(), "threads": torch.get_num_threads(),
        "corpora": corpora is not None,
    }
    add("setting", json.dumps(setting, sort_keys=True).encode())
    for path in sorted(_PACKAGE.rglob("*.py")):
        add(path.relative_to(_PACKAGE).as_posix(), path.read_bytes())
    add("tokenizer", tokenizer.backend_tokenizer.to_str().encode())
    if corpora is not None:
        for path in sorted(p for p in corpora.rglob("*") if p.is_file()):
            add(f"corpora/{path.relative_to(corpora).as_posix()}", path.read_bytes())
    return digest.hexdigest()


def _cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; else what ``platform`` says)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def planted_state(tokenizer, seed: int = 0, variant: str = "standard"
                  ) -> tuple[dict[str, Tensor], PlantedTruth]:
    """:func:`~context_neurons.models.planted.build_planted_state` (corpora found as it finds
    them), read from the cache when this exact build was made before, else built and written.
    A cache that cannot be used is warned about, and the model is built."""
    corpora = corpora_dir(required=False)
    try:
        folder = config.cache_dir() / "planted"
        folder.mkdir(exist_ok=True)
    except (InputError, OSError) as err:
        warnings.warn(f"The planted model is built without its cache: {err}", stacklevel=2)
        return build_planted_state(tokenizer, seed=seed, corpora=corpora, variant=variant)
    path = folder / f"{build_key(tokenizer, seed, variant, corpora)}.pt"
    try:
        saved = torch.load(path, weights_only=True)
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: kept by _prune
        return saved["state"], PlantedTruth.from_dict(saved["truth"])
    except FileNotFoundError:  # not built yet here (or just pruned by another process)
        pass
    except Exception as err:  # a damaged file: built again and replaced
        warnings.warn(f"Unreadable planted-model cache {path} ({err}): building it again.",
                      stacklevel=2)
    state, truth = build_planted_state(tokenizer, seed=seed, corpora=corpora, variant=variant)
    try:
        _write(path, state, truth)
    except OSError as err:
        warnings.warn(f"The planted model's cache could not be written ({err}).", stacklevel=2)
    return state, truth


def _write(path: Path, state: dict[str, Tensor], truth: PlantedTruth) -> None:
    saved = {"state": state, "truth": truth.to_dict()}
    write_whole(path, lambda tmp: torch.save(saved, tmp))
    with contextlib.suppress(OSError):  # written: a failed clean-up is not a failed write
        _prune(path.parent)


def _prune(folder: Path) -> None:
    """Remove all but the :data:`KEEP` most recently used builds (another process may be
    pruning too: a file gone meanwhile is skipped)."""
    builds = []
    for path in folder.glob("*.pt"):
        with contextlib.suppress(FileNotFoundError):
            builds.append((path.stat().st_mtime, path.name))
    for _, name in sorted(builds, reverse=True)[KEEP:]:
        (folder / name).unlink(missing_ok=True)


__all__ = ["KEEP", "build_key", "planted_state"]
