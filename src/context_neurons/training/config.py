"""Configuration of a training run: model sizes, corpus mixture weights, optimiser and budget.

Everything a run depends on is a field of :class:`TrainConfig`; ``training.json`` stores it whole,
so a run is reproduced by the command it records (see :func:`reproduce_command`).
"""

from __future__ import annotations

import dataclasses
import math
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from context_neurons import config as settings
from context_neurons.checks import MAX_SEED, DataError, InputError
from context_neurons.text.dataset import CODE_FOLDER

#: The special token: beginning of every window, separator between documents (GPT-2's convention).
EOT = "<|endoftext|>"

#: Programming text: the running Python's standard library, read as one more "corpus".
CODE_CORPUS = CODE_FOLDER  # "python_stdlib": the dataset's folder of it

#: Mixture weights: each corpus's expected share of the training tokens (normalised to sum 1).
#: General English is about a quarter; every small domain (Spanish, Bible, legal, medical,
#: Australian news, speeches, Pokemon, astronomy, code) gets several percent, more than its share of
#: the raw text, because a model learns a neuron for a domain only if the domain is frequent enough
#: for knowing it to pay off. Small corpora are repeated (Pokemon about 2 epochs in the default
#: run); large ones are sub-sampled. ``nltk_genesis`` (Genesis in many languages) and the word
#: lists are left out.
CORPUS_WEIGHTS: dict[str, float] = {
    # general English
    "nltk_brown_us": 8.0,
    "nltk_masc": 6.0,
    "wikitext2_pytorch_examples": 6.0,
    "gpt2_webtext_snippets": 6.0,
    # political speeches
    "nltk_state_union_us": 3.0,
    "nltk_inaugural_us": 2.0,
    # Bible (English)
    "bible_kjv": 6.0,
    "bible_web": 6.0,
    # Spanish
    "nltk_spanish": 6.0,
    "fortunes_es": 3.0,
    "bible_es_rv1909": 5.0,
    # legal
    "spdx_license_texts": 7.0,
    # medical
    "medical_abstracts": 6.0,
    "nltk_pil_uk_medical": 5.0,
    # Australian science and rural news
    "nltk_abc_au_news": 6.0,
    # Pokemon, astronomy, code
    "pokemon_showdown": 2.5,
    "stellarium_skycultures": 3.5,
    CODE_CORPUS: 8.0,
}

#: Corpora of short items (a sentence or a paragraph): consecutive documents are concatenated,
#: separated by ``<|endoftext|>``, into units of at least half a window, which the training
#: mixture draws like one document; the analysis packs their held-out items into windows.
SHORT_DOCUMENT_CORPORA: tuple[str, ...] = ("fortunes_es", "pokemon_showdown", "gpt2_webtext_snippets")

#: Domains for the per-domain analysis of neurons: a domain's windows are those of its corpora.
DOMAINS: dict[str, tuple[str, ...]] = {
    "general": ("nltk_brown_us", "nltk_masc", "wikitext2_pytorch_examples", "gpt2_webtext_snippets"),
    "speeches": ("nltk_state_union_us", "nltk_inaugural_us"),
    "bible": ("bible_kjv", "bible_web", "bible_es_rv1909"),
    "spanish": ("nltk_spanish", "fortunes_es", "bible_es_rv1909"),
    "legal": ("spdx_license_texts",),
    "medical": ("medical_abstracts", "nltk_pil_uk_medical"),
    "au_news": ("nltk_abc_au_news",),
    "pokemon": ("pokemon_showdown",),
    "astronomy": ("stellarium_skycultures",),
    "code": (CODE_CORPUS,),
}


@dataclass(frozen=True)
class ModelSize:
    """Shape of the GPT-2-architecture model and the default token budget for that size."""

    n_layer: int
    d_model: int
    n_head: int
    d_mlp: int
    n_ctx: int
    batch_size: int
    tokens: int


#: ``default``: about 18 minutes on 2 CPU cores (the shipped model's budget). ``large``: a bigger
#: variant for a GPU.
SIZES: dict[str, ModelSize] = {
    "default": ModelSize(n_layer=2, d_model=256, n_head=8, d_mlp=1024, n_ctx=256, batch_size=8,
                         tokens=2_000_000),
    "large": ModelSize(n_layer=4, d_model=512, n_head=8, d_mlp=2048, n_ctx=512, batch_size=32,
                       tokens=60_000_000),
}


def default_corpora_dir() -> Path:
    """The corpora directory of :func:`context_neurons.config.corpora_root`
    (``CONTEXT_NEURONS_CORPORA``, else ``../shared/corpora`` beside the repository)."""
    root = settings.corpora_root()
    if root is None:
        raise DataError(
            f"Corpora directory not found: set {settings.CORPORA.name} to the offline corpora "
            "(or pass --corpora DIR) to train."
        )
    return root


@dataclass
class TrainConfig:
    """Everything a training run depends on (stored in ``training.json``)."""

    out: str = "trained-model"
    corpora: str = ""  # empty: default_corpora_dir()
    size: str = "default"
    seed: int = 0
    threads: int = 2
    device: str = "auto"
    # budget: ``tokens`` (deterministic) or ``minutes`` (converted to tokens after timing a few steps)
    tokens: int | None = None
    minutes: float | None = None
    # model (None: from the size)
    n_layer: int | None = None
    d_model: int | None = None
    n_head: int | None = None
    d_mlp: int | None = None
    n_ctx: int | None = None
    batch_size: int | None = None
    dropout: float = 0.0
    # tokenizer
    vocab_size: int = 8192
    tokenizer: str = ""  # reuse instead of training one: a saved tokenizer, or GPT-2's files
    tokenizer_chars_per_corpus: int = 2_000_000
    # split
    heldout_fraction: float = 0.15
    # optimiser and schedule
    lr: float = 2e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 100
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0
    # mixture
    corpus_weights: dict[str, float] = field(default_factory=lambda: dict(CORPUS_WEIGHTS))
    # evaluation and checkpoints
    n_checkpoints: int = 0  # 0: steps 0, 1, 2, 4, 8, ... and the last; k > 0: k log-spaced steps
    eval_windows: int = 64  # held-out windows per corpus at the end
    eval_windows_checkpoint: int = 8  # held-out windows per corpus at each checkpoint
    save_checkpoints: bool = True
    progress: bool = True
    # stop after this many steps, keeping the schedule of the whole budget (to check that a rerun
    # reproduces the start of a long run's loss log); None: run the whole budget
    stop_after_steps: int | None = None
    # the state to continue an interrupted run from (OUT/resume.pt) is saved every this many steps
    resume_every: int = 100

    def resolved(self) -> "TrainConfig":
        """A copy with every size-dependent field filled in from :data:`SIZES`."""
        if self.size not in SIZES:
            raise InputError(f"Unknown size {self.size!r}: choose from {sorted(SIZES)}.")
        size = SIZES[self.size]
        values = {}
        for name in ("n_layer", "d_model", "n_head", "d_mlp", "n_ctx", "batch_size"):
            if getattr(self, name) is None:
                values[name] = getattr(size, name)
        if self.tokens is None and self.minutes is None:
            values["tokens"] = size.tokens
        if not self.corpora:
            values["corpora"] = str(default_corpora_dir())
        return dataclasses.replace(self, **values)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


#: (flag, field) pairs for the options that map one to one onto :class:`TrainConfig` fields.
_FIELD_FLAGS: list[tuple[str, str, type]] = [
    ("--out", "out", str),
    ("--corpora", "corpora", str),
    ("--size", "size", str),
    ("--seed", "seed", int),
    ("--threads", "threads", int),
    ("--device", "device", str),
    ("--tokens", "tokens", int),
    ("--minutes", "minutes", float),
    ("--n-layer", "n_layer", int),
    ("--d-model", "d_model", int),
    ("--n-head", "n_head", int),
    ("--d-mlp", "d_mlp", int),
    ("--n-ctx", "n_ctx", int),
    ("--batch-size", "batch_size", int),
    ("--dropout", "dropout", float),
    ("--vocab-size", "vocab_size", int),
    ("--tokenizer", "tokenizer", str),
    ("--tokenizer-chars-per-corpus", "tokenizer_chars_per_corpus", int),
    ("--heldout-fraction", "heldout_fraction", float),
    ("--lr", "lr", float),
    ("--min-lr-ratio", "min_lr_ratio", float),
    ("--warmup-steps", "warmup_steps", int),
    ("--weight-decay", "weight_decay", float),
    ("--beta1", "beta1", float),
    ("--beta2", "beta2", float),
    ("--grad-clip", "grad_clip", float),
    ("--n-checkpoints", "n_checkpoints", int),
    ("--eval-windows", "eval_windows", int),
    ("--eval-windows-checkpoint", "eval_windows_checkpoint", int),
    ("--stop-after-steps", "stop_after_steps", int),
    ("--resume-every", "resume_every", int),
]

def config_problems(cfg: TrainConfig, corpora: list[str] | None = None) -> list[str]:
    """What is wrong with a resolved configuration (empty: nothing), checked before any data is
    read. ``corpora``: the corpus names the corpora directory offers (None: not checked)."""
    problems = []
    positive = ("n_layer", "d_model", "n_head", "d_mlp", "n_ctx", "batch_size", "vocab_size",
                "threads", "tokenizer_chars_per_corpus", "resume_every")
    for name in positive:
        if getattr(cfg, name) < 1:
            problems.append(f"--{name.replace('_', '-')} must be at least 1, got "
                            f"{getattr(cfg, name)}")
    if cfg.n_head >= 1 and cfg.d_model % cfg.n_head:
        problems.append(f"--d-model {cfg.d_model} is not a multiple of --n-head {cfg.n_head} "
                        "(each head takes d_model / n_head dimensions)")
    if cfg.n_ctx < 2:
        problems.append(f"--n-ctx must be at least 2, got {cfg.n_ctx}")
    if not cfg.tokenizer and cfg.vocab_size < 258:
        problems.append(f"--vocab-size must be at least 258 (256 bytes and {EOT}), got "
                        f"{cfg.vocab_size}")
    if not 0 <= cfg.seed <= MAX_SEED:
        problems.append(f"--seed must be in 0..{MAX_SEED}, got {cfg.seed}")
    if cfg.tokens is not None and cfg.tokens < cfg.batch_size * cfg.n_ctx:
        problems.append(f"--tokens {cfg.tokens} is less than one step "
                        f"(--batch-size x --n-ctx = {cfg.batch_size * cfg.n_ctx})")
    if cfg.minutes is not None and not (math.isfinite(cfg.minutes) and cfg.minutes > 0):
        problems.append(f"--minutes must be positive, got {cfg.minutes}")
    if not 0.0 < cfg.heldout_fraction < 1.0:
        problems.append(f"--heldout-fraction must be in (0, 1), got {cfg.heldout_fraction}")
    if not 0.0 <= cfg.dropout < 1.0:
        problems.append(f"--dropout must be in [0, 1), got {cfg.dropout}")
    if not (math.isfinite(cfg.lr) and cfg.lr > 0):
        problems.append(f"--lr must be positive, got {cfg.lr}")
    if not 0.0 <= cfg.min_lr_ratio <= 1.0:
        problems.append(f"--min-lr-ratio must be in [0, 1], got {cfg.min_lr_ratio}")
    for name in ("beta1", "beta2"):
        if not 0.0 <= getattr(cfg, name) < 1.0:
            problems.append(f"--{name} must be in [0, 1), got {getattr(cfg, name)}")
    for name in ("warmup_steps", "weight_decay", "n_checkpoints", "eval_windows",
                 "eval_windows_checkpoint"):
        if getattr(cfg, name) < 0:
            problems.append(f"--{name.replace('_', '-')} must not be negative, got "
                            f"{getattr(cfg, name)}")
    if not cfg.grad_clip > 0:
        problems.append(f"--grad-clip must be positive, got {cfg.grad_clip}")
    if cfg.stop_after_steps is not None and cfg.stop_after_steps < 1:
        problems.append(f"--stop-after-steps must be at least 1, got {cfg.stop_after_steps}")
    if cfg.device not in ("auto", "cpu", "cuda"):
        problems.append(f"--device must be auto, cpu or cuda, got {cfg.device!r}")
    if cfg.tokenizer and not Path(cfg.tokenizer).expanduser().is_dir():
        problems.append(f"--tokenizer {cfg.tokenizer} is not a directory")
    weights = cfg.corpus_weights
    bad = {c: w for c, w in weights.items() if not (math.isfinite(w) and w >= 0)}
    if bad:
        problems.append(f"corpus weights must be finite and not negative, got {bad}")
    if not any(w > 0 for w in weights.values() if math.isfinite(w)):
        problems.append("at least one corpus needs a positive weight")
    if corpora is not None:
        unknown = sorted(c for c, w in weights.items() if w > 0 and c not in corpora)
        if unknown:
            problems.append(f"no corpus named {', '.join(unknown)} in {cfg.corpora}: the corpora "
                            f"are {', '.join(corpora)}")
    return problems


def config_to_argv(cfg: TrainConfig, device: str | None = None) -> list[str]:
    """Arguments that rebuild ``cfg``: every field that differs from the defaults of its size."""
    base = TrainConfig(size=cfg.size, corpora=cfg.corpora).resolved()
    argv: list[str] = []
    for flag, name, _ in _FIELD_FLAGS:
        value = getattr(cfg, name)
        if name == "device" and device is not None:
            value = device
        always = name in ("out", "corpora", "size", "seed", "threads", "device", "tokens")
        if value is not None and (always or value != getattr(base, name)):
            argv += [flag, str(value)]
    if cfg.corpus_weights != CORPUS_WEIGHTS:
        argv += ["--weights", ",".join(f"{c}={w}" for c, w in cfg.corpus_weights.items())]
    if not cfg.save_checkpoints:
        argv.append("--no-checkpoints")
    return argv


def reproduce_command(cfg: TrainConfig, device: str) -> str:
    """The command line that reruns ``cfg`` exactly (a token budget, never a time budget)."""
    return shlex.join(["python", "-m", "context_neurons", "train",
                       *config_to_argv(cfg, device=device)])
