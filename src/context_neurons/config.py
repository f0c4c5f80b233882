"""Configuration. This module is the one place that reads environment variables and finds paths.

Every ``CONTEXT_NEURONS_*`` variable is named once, here, in :data:`VARIABLES` (the book's
configuration page, ``book/reference/configuration.md``, prints them from here;
``tests/unit/test_layout.py`` checks that they agree and that no other module reads the
environment). Other modules call the functions below.

Shared resources (the GPT-2 tokenizer files, the offline corpora) live in a ``shared/`` directory
beside the repository and are never copied into it: :func:`find_shared_dir` looks for them.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import torch

from context_neurons.checks import DataError, InputError, check_seed


@dataclass(frozen=True)
class Variable:
    """One environment variable: its name, what it means and its default (for the configuration page)."""

    name: str
    meaning: str
    default: str


MODEL = Variable(
    "CONTEXT_NEURONS_MODEL",
    "model the chapters run on: `gpt2`, `gpt2-medium`, `gpt2-large`, `gpt2-xl`, `planted`, "
    "`trained`, or a directory holding a GPT-2-architecture Hugging Face checkpoint",
    "`gpt2`",
)
PLANTED_SEED = Variable(
    "CONTEXT_NEURONS_SEED",
    "seed the planted model is built from (chapters, main job, `planted-truth`)",
    "`0`",
)
CORPORA = Variable(
    "CONTEXT_NEURONS_CORPORA",
    "directory of JSONL corpora (a path given must exist; `none`: run without them, online)",
    "`../shared/corpora` beside the repository",
)
TOKENIZER = Variable(
    "CONTEXT_NEURONS_TOKENIZER",
    "directory with GPT-2's `vocab.json`, `merges.txt`",
    "`../shared/gpt2-tokenizer`, else the hub",
)
GPT2_WEIGHTS = Variable(
    "CONTEXT_NEURONS_GPT2",
    "local directory of the GPT-2 checkpoint's Hugging Face files (for `--model gpt2` and its "
    "larger siblings)",
    "hub or cache",
)
THREADS = Variable("CONTEXT_NEURONS_THREADS", "torch threads in chapters (reproducible outputs)", "`2`")
CACHE = Variable(
    "CONTEXT_NEURONS_CACHE",
    "derived files (the offline tokenizer, the planted model's builds, the corpora's token ids)",
    "`~/.cache/context_neurons`",
)
OPENWEBTEXT = Variable(
    "CONTEXT_NEURONS_OPENWEBTEXT",
    "another copy of OpenWebText: a hub dataset `owner/name[@revision]`, or a local directory "
    "or file of Parquet or JSONL files with a `text` column (read through `datasets`)",
    "`Skylion007/openwebtext`",
)
LLM_API_KEY = Variable(
    "CONTEXT_NEURONS_LLM_API_KEY",
    "key of an OpenAI-compatible service: enables chapter 7's LLM explainer (about 110 requests "
    "per neuron on the default pool); unset, the offline explainer runs and nothing touches the "
    "network",
    "unset",
)
LLM_BASE_URL = Variable(
    "CONTEXT_NEURONS_LLM_BASE_URL",
    "root of that API, ending in `/v1` (a local server works too)",
    "`https://api.openai.com/v1`",
)
LLM_MODEL = Variable("CONTEXT_NEURONS_LLM_MODEL", "the chat model's name", "`gpt-4o-mini`")
STATIC = Variable(
    "CONTEXT_NEURONS_STATIC",
    "`1`: the explorers draw static figures (the website build sets it)",
    "unset",
)
WIDGETS = Variable(
    "CONTEXT_NEURONS_WIDGETS", "`1`: the explorers draw widgets in any notebook front end", "unset"
)
MATHJAX = Variable(
    "CONTEXT_NEURONS_MATHJAX",
    "directory holding `tex-mml-chtml.js`, served with the website instead of the CDN",
    "`_build/mathjax` after `scripts/install_mathjax.sh`",
)
CODE = Variable(
    "CONTEXT_NEURONS_CODE",
    "directory of Python sources read as the trained model's code corpus (the training run and "
    "its held-out text)",
    "the corpora's `python_stdlib` folder when fetched, else the running Python's standard "
    "library",
)
SCALE = Variable(
    "CONTEXT_NEURONS_SCALE",
    "`reduced`: chapters use fewer texts and neurons (the simulated online run in CI)",
    "`full`",
)
VERDICT_RECORD = Variable(
    "CONTEXT_NEURONS_VERDICT_RECORD",
    "file where chapter 8 writes GPT-2's verdict lines when it computes them (the website "
    "build's job summary prints it instead of computing them again)",
    "unset: not written",
)

#: Every variable the package reads, in the order of the configuration page's table.
VARIABLES: tuple[Variable, ...] = (
    MODEL, PLANTED_SEED, CORPORA, TOKENIZER, GPT2_WEIGHTS, THREADS, CACHE, OPENWEBTEXT,
    LLM_API_KEY, LLM_BASE_URL, LLM_MODEL, STATIC, WIDGETS, MATHJAX, CODE, SCALE, VERDICT_RECORD,
)

DEFAULT_MODEL = "gpt2"
#: The value of a directory variable that means "no such directory here" (online sources).
NO_DIRECTORY = "none"
DEFAULT_LLM_BASE_URL = "https://api.openai.com/v1"
DEFAULT_LLM_MODEL = "gpt-4o-mini"

#: The repository this package was installed from (``src/context_neurons/config.py`` -> repo).
REPOSITORY_ROOT = Path(__file__).resolve().parents[2]


def get(variable: Variable, environ: Mapping[str, str] | None = None) -> str:
    """The stripped value of a variable (empty when unset)."""
    environ = os.environ if environ is None else environ
    return environ.get(variable.name, "").strip()


def flag(variable: Variable, environ: Mapping[str, str] | None = None) -> bool:
    """Whether a variable is set to ``1``, ``true`` or ``yes``."""
    return get(variable, environ).lower() in ("1", "true", "yes")


def child_environment(overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment with ``overrides`` added: the environment of a child process."""
    return {**os.environ, **(overrides or {})}


def deterministic_cublas() -> None:
    """Ask cuBLAS for deterministic kernels (PyTorch's deterministic mode needs it on CUDA)."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def model_name() -> str:
    """``$CONTEXT_NEURONS_MODEL`` (default ``gpt2``), as given (a name or a directory)."""
    return get(MODEL) or DEFAULT_MODEL


def _whole_number(variable: Variable, default: str) -> tuple[int | None, str]:
    """The variable's value as an int (None when it is not a whole number), and its text."""
    text = get(variable) or default
    try:
        return int(text), text
    except ValueError:
        return None, text


def planted_seed() -> int:
    """``$CONTEXT_NEURONS_SEED`` (default 0): a whole number in ``0..MAX_SEED``, else an
    :class:`InputError` naming the variable."""
    value, text = _whole_number(PLANTED_SEED, "0")
    if value is None:
        raise InputError(f"{PLANTED_SEED.name} must be a whole number, got {text!r}.")
    return check_seed(value, PLANTED_SEED.name)


def threads() -> int:
    """``$CONTEXT_NEURONS_THREADS`` (default 2): a whole number of at least 1."""
    value, text = _whole_number(THREADS, "2")
    if value is None or value < 1:
        raise InputError(f"{THREADS.name} must be a whole number of at least 1, got {text!r}.")
    return value


def reduced_scale() -> bool:
    """Whether ``$CONTEXT_NEURONS_SCALE`` asks for the reduced sizes of the simulated online run."""
    value = get(SCALE).lower() or "full"
    if value not in ("full", "reduced"):
        raise ValueError(f"{SCALE.name} must be 'full' or 'reduced', got {value!r}.")
    return value == "reduced"


def find_shared_dir(name: str, variable: Variable | None = None) -> Path | None:
    """Find ``shared/<name>`` (tokenizer, corpora) without copying it into the repository.

    Order: the environment variable, then ``../shared/<name>`` beside the repository checkout this
    package was installed from, then ``shared/<name>`` or ``../shared/<name>`` from the working
    directory and its parents. Returns None when nothing exists, or when the variable is ``none``
    (run without it: online sources). A directory the variable names must exist: a
    :class:`~context_neurons.checks.DataError` says so (never a silent fall-back to other data).
    """
    if variable is not None and get(variable):
        value = get(variable)
        if value.lower() == NO_DIRECTORY:
            return None
        path = Path(value).expanduser()
        if not path.is_dir():
            raise DataError(
                f"{variable.name} is {value!r}, which is not a directory: point it at the {name} "
                f"directory, set it to '{NO_DIRECTORY}' to run without one, or unset it."
            )
        return path
    candidates = [REPOSITORY_ROOT.parent / "shared" / name]
    here = Path.cwd().resolve()
    for parent in [here, *here.parents]:
        candidates += [parent / "shared" / name, parent.parent / "shared" / name]
    return next((candidate for candidate in candidates if candidate.is_dir()), None)


def corpora_root() -> Path | None:
    """The configured corpora directory, or None when none is found (or the variable is
    ``none``); a directory ``$CONTEXT_NEURONS_CORPORA`` names that does not exist is an error."""
    return find_shared_dir("corpora", CORPORA)


def tokenizer_root() -> Path | None:
    """The configured GPT-2 tokenizer directory, or None (then the hub is asked)."""
    return find_shared_dir("gpt2-tokenizer", TOKENIZER)


def gpt2_weights() -> Path | None:
    """``$CONTEXT_NEURONS_GPT2`` as a path, or None."""
    return Path(get(GPT2_WEIGHTS)).expanduser() if get(GPT2_WEIGHTS) else None


def code_corpus_root() -> Path | None:
    """``$CONTEXT_NEURONS_CODE`` as a path, or None (then the corpora's ``python_stdlib``
    folder, else the running Python's standard library: ``training.corpus.stdlib_dir``)."""
    return Path(get(CODE)).expanduser() if get(CODE) else None


def verdict_record() -> Path | None:
    """``$CONTEXT_NEURONS_VERDICT_RECORD`` as a path (None when unset)."""
    value = get(VERDICT_RECORD)
    return Path(value).expanduser() if value else None


def openwebtext_source() -> str:
    """``$CONTEXT_NEURONS_OPENWEBTEXT`` (empty when unset)."""
    return get(OPENWEBTEXT)


def cache_dir() -> Path:
    """Directory for derived files (the offline tokenizer in Hugging Face format, the planted
    model's builds: :mod:`~context_neurons.models.planted_cache`), created if
    missing; one that cannot be created is an :class:`InputError` (:func:`cache_error`)."""
    root = Path(get(CACHE) or Path.home() / ".cache" / "context_neurons").expanduser()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise cache_error(root, err) from None
    return root


def cpu_arithmetic() -> dict[str, str]:
    """PyTorch's and MKL's variables that change float results' low bits on a CPU
    (``ATEN_CPU_CAPABILITY``, ``MKL_CBWR``; empty when unset): part of what a cached
    computation depends on."""
    return {name: os.environ.get(name, "") for name in ("ATEN_CPU_CAPABILITY", "MKL_CBWR")}


def cache_error(root: Path, err: OSError) -> InputError:
    """The one-line error of a cache directory that cannot be written (read-only, full, not a
    directory), naming it and ``$CONTEXT_NEURONS_CACHE``."""
    return InputError(
        f"The cache directory {root} cannot be written ({err.strerror or err}): point "
        f"{CACHE.name} at a writable directory with free space."
    )


def llm_settings() -> tuple[str, str, str]:
    """``(api_key, base_url, model)`` of the LLM explainer (the key is empty when unset)."""
    base_url = get(LLM_BASE_URL).rstrip("/") or DEFAULT_LLM_BASE_URL
    return get(LLM_API_KEY), base_url, get(LLM_MODEL) or DEFAULT_LLM_MODEL


def hf_offline() -> bool:
    """Whether Hugging Face's own ``HF_HUB_OFFLINE`` is set (a cache, not the hub)."""
    return os.environ.get("HF_HUB_OFFLINE", "") == "1"


#: Proxy variables under which a direct connection to the hub says nothing about reaching it.
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


def behind_proxy() -> bool:
    """Whether a proxy is configured (``HTTPS_PROXY`` or ``ALL_PROXY``, either case): then only
    an HTTP request through it, not a plain connection, tells whether the hub is reachable."""
    return any(os.environ.get(name) for name in PROXY_VARIABLES)


def in_colab(
    modules: Mapping[str, object] | None = None, environ: Mapping[str, str] | None = None
) -> bool:
    """Whether this kernel runs in Google Colab (``google.colab`` imported or
    ``COLAB_RELEASE_TAG`` set, as Colab does)."""
    modules = sys.modules if modules is None else modules
    environ = os.environ if environ is None else environ
    return "google.colab" in modules or bool(environ.get("COLAB_RELEASE_TAG"))


def jupyter_session() -> bool:
    """Whether a Jupyter server started this kernel (it sets ``JPY_SESSION_NAME``)."""
    return bool(os.environ.get("JPY_SESSION_NAME"))


def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """``None`` or ``"auto"``: CUDA when available, else CPU; ``"cuda"`` without a GPU errors."""
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError):
        raise InputError(f"device must be 'cpu', 'cuda' or 'auto', got {device!r}.") from None
    if device.type not in ("cpu", "cuda"):
        raise InputError(f"device must be 'cpu', 'cuda' or 'auto', got {str(device)!r}.")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' was asked for but no CUDA GPU is available; use 'cpu'.")
    return device
