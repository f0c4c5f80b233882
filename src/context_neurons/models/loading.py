"""Models. This module loads every model the chapters run on, through one code path.

* ``gpt2`` (GPT-2 Small, the default) and its larger siblings ``gpt2-medium``, ``gpt2-large``,
  ``gpt2-xl``: from the Hugging Face hub, a local Hugging Face cache (``HF_HUB_OFFLINE=1``) or a
  local directory of Hugging Face files (``$CONTEXT_NEURONS_GPT2`` for ``gpt2``, or ``weights=``).
* any directory holding a GPT-2-architecture Hugging Face checkpoint (``config.json`` and weights;
  its own tokenizer files if it has them, else GPT-2's tokenizer).
* ``trained``: the model trained here from scratch on the offline corpora
  (``python -m context_neurons train``), shipped with the package with its own tokenizer.
* ``planted``: the offline ground-truth model (:mod:`context_neurons.models.planted`), a Hugging
  Face GPT-2 checkpoint built from a seed.

All become a TransformerLens ``TransformerBridge`` (TransformerLens 4) through
:func:`bridge_from_hf`, which boots the bridge on the Hugging Face module with
``TransformerBridge.boot_transformers`` (given the module, so nothing is downloaded twice) and turns
on compatibility mode, so every model goes through exactly the loader that real GPT-2 uses, on the
device asked for. This module and the hook-based measurements are the only parts of the package
that know TransformerLens's API; the method reads the weights once through
:func:`context_neurons.models.weights.read_weights`.

Weight processing (:class:`WeightProcessing`) defaults to TransformerLens's defaults: LayerNorm
weights folded into the next matrices (``fold_ln``), writing weights centred, unembedding centred,
value biases folded into the output bias. Each is an exact re-parametrisation: logits are unchanged
(tested). The method reads LayerNorm parameters with the other weights (ones and zeros once folded),
so it is exact arithmetic on the weights actually run, whatever the processing.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import socket
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch
from huggingface_hub import try_to_load_from_cache
from safetensors import SafetensorError
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformer_lens.model_bridge import TransformerBridge
from transformers import (
    AutoTokenizer,
    GPT2Config,
    GPT2LMHeadModel,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
)
from transformers.utils import logging as hf_logging

from context_neurons import config
from context_neurons.checks import InputError, ModelLoadError, check_seed
from context_neurons.models.planted import PlantedTruth, planted_gpt2
from context_neurons.models.planted_cache import planted_state

#: The GPT-2 family on the Hugging Face hub, with the names the banner uses.
GPT2_FAMILY: dict[str, str] = {
    "gpt2": "GPT-2 Small",
    "gpt2-medium": "GPT-2 Medium",
    "gpt2-large": "GPT-2 Large",
    "gpt2-xl": "GPT-2 XL",
}
#: Every model name :func:`load_model` knows (besides a checkpoint directory).
MODEL_NAMES = (*GPT2_FAMILY, "planted", "trained")
#: The shipped trained model (``python -m context_neurons train`` writes it).
TRAINED_DIR = Path(__file__).resolve().parents[1] / "assets" / "trained-model"
#: Protocol v3's replication: the same command with ``--seed 1`` (trained on a lent H100; load
#: it as a checkpoint directory).
TRAINED_SEED1_DIR = TRAINED_DIR.with_name("trained-model-seed1")


@dataclass(frozen=True)
class WeightProcessing:
    """TransformerLens weight processing applied when loading (all exact re-parametrisations)."""

    fold_ln: bool = True
    center_writing_weights: bool = True
    center_unembed: bool = True
    fold_value_biases: bool = True


@dataclass
class LoadedModel:
    """A model ready for the chapters: the TransformerBridge, its name, where it came from and,
    for the planted model, its truth.

    Attributes:
        model: the TransformerBridge (compatibility mode).
        name: ``gpt2``, ``gpt2-medium``, ..., ``planted``, ``trained`` or ``checkpoint``.
        source: where the weights came from (hub, cache, a directory, a seed).
        processing: the weight processing applied.
        truth: the planted truth (planted model only).
        directory: the checkpoint directory, when it holds a training record (``training.json``,
            written by ``python -m context_neurons train``): the trained model, or another run.
    """

    model: TransformerBridge
    name: str
    source: str
    processing: WeightProcessing = field(default_factory=WeightProcessing)
    truth: PlantedTruth | None = None
    directory: Path | None = None

    @property
    def is_planted(self) -> bool:
        return self.truth is not None

    @property
    def title(self) -> str:
        """A short name of the model for figure titles (``planted model``, ``GPT-2 Small``, ...);
        a planted negative control's names its variant (it lacks what the standard one has)."""
        if self.is_planted:
            variant = "" if self.truth.variant == "standard" else f", {self.truth.variant}"
            return f"planted model (seed {self.truth.seed}{variant})"
        if self.name == "trained":
            return "trained model"
        return GPT2_FAMILY.get(self.name, f"checkpoint {Path(self.source).name}")

    def banner(self) -> str:
        """One paragraph naming the model that produced a page's outputs."""
        cfg = self.model.cfg
        shape = (
            f"{cfg.n_layers} layers, {cfg.n_heads} heads, d_model {cfg.d_model}, "
            f"context {cfg.n_ctx}, vocabulary {cfg.d_vocab}"
        )
        if self.is_planted:
            return (
                f"Outputs on this page were produced by the PLANTED ground-truth model ({shape}; "
                f"GPT-2's tokenizer; weights built from seed {self.truth.seed}, structure planted "
                f"and known; see the appendix). They are not GPT-2's. Set "
                f"{config.MODEL.name}=gpt2 to run this page on GPT-2 Small."
            )
        if self.name == "trained":
            return (
                f"Outputs on this page were produced by the TRAINED model ({shape}; trained here "
                f"from scratch on the offline corpora with its own tokenizer; {self.source}). They "
                f"are not GPT-2's. Set {config.MODEL.name}=gpt2 to run this page on GPT-2 Small."
            )
        if self.name in GPT2_FAMILY:
            return (
                f"Outputs on this page were produced by {GPT2_FAMILY[self.name]} ({shape}; "
                f"{self.source}) through TransformerLens."
            )
        return (
            f"Outputs on this page were produced by a GPT-2-architecture checkpoint ({shape}; "
            f"{self.source}). It is not GPT-2 Small unless that directory holds GPT-2's weights."
        )


# ----------------------------------------------------------------------------------------------
# Tokenizers
# ----------------------------------------------------------------------------------------------


def build_offline_tokenizer(tokenizer_dir: str | Path) -> PreTrainedTokenizerBase:
    """GPT-2's tokenizer from ``vocab.json`` and ``merges.txt``, with no network access.

    ``GPT2TokenizerFast(vocab_file=..., merges_file=...)`` returns empty encodings under
    transformers 5, so we build a byte-level BPE with ``tokenizers``, save it in Hugging Face
    format and reload it with ``AutoTokenizer`` (TransformerLens reloads tokenizers by their
    ``name_or_path``, so the tokenizer must live in a directory).
    """
    tokenizer_dir = Path(tokenizer_dir)
    vocab, merges = tokenizer_dir / "vocab.json", tokenizer_dir / "merges.txt"
    if not (vocab.is_file() and merges.is_file()):
        raise ModelLoadError(
            f"GPT-2 tokenizer files not found in {tokenizer_dir} (need vocab.json and merges.txt). "
            f"Point {config.TOKENIZER.name} at a directory holding them, or run online so the "
            "tokenizer can be downloaded."
        )
    digest = f"{vocab.stat().st_size}-{merges.stat().st_size}"
    saved = config.cache_dir() / f"gpt2-tokenizer-{digest}"
    if not (saved / "tokenizer.json").is_file():
        bpe = Tokenizer(models.BPE.from_file(str(vocab), str(merges)))
        bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        bpe.decoder = decoders.ByteLevel()
        fast = PreTrainedTokenizerFast(
            tokenizer_object=bpe,
            bos_token="<|endoftext|>",
            eos_token="<|endoftext|>",
            unk_token="<|endoftext|>",
            model_max_length=1024,
        )
        _save_whole(fast, saved)
    return AutoTokenizer.from_pretrained(str(saved))


def load_tokenizer(tokenizer_dir: str | Path | None = None) -> PreTrainedTokenizerBase:
    """GPT-2's tokenizer: from ``tokenizer_dir`` (or ``shared/gpt2-tokenizer``), else the hub."""
    tokenizer_dir = tokenizer_dir or config.tokenizer_root()
    if tokenizer_dir is not None:
        return build_offline_tokenizer(tokenizer_dir)
    try:
        return AutoTokenizer.from_pretrained("gpt2")
    except OSError as err:
        raise ModelLoadError(
            "No GPT-2 tokenizer: none found locally and the Hugging Face hub is unreachable. "
            f"Set {config.TOKENIZER.name} to a directory with vocab.json and merges.txt."
        ) from err


def checkpoint_tokenizer(directory: Path) -> PreTrainedTokenizerBase:
    """A checkpoint directory's own tokenizer (``tokenizer.json``), else GPT-2's."""
    if (directory / "tokenizer.json").is_file():
        return AutoTokenizer.from_pretrained(str(directory))
    return load_tokenizer()


# ----------------------------------------------------------------------------------------------
# Hugging Face GPT-2 -> TransformerBridge
# ----------------------------------------------------------------------------------------------


def placeholder_tokenizer(d_vocab: int) -> PreTrainedTokenizerBase:
    """A tokenizer of ``d_vocab`` placeholder tokens ``<0>``, ``<1>``, ..., for small test models
    that are only fed token ids: TransformerBridge needs a tokenizer, and reloads it from its
    directory, so it is saved once under the cache directory. It has no BOS token (models built with
    it take any first token; :func:`bridge_from_hf` removes the one TransformerBridge adds)."""
    saved = config.cache_dir() / f"placeholder-tokenizer-{d_vocab}"
    if not (saved / "tokenizer.json").is_file():
        word_level = Tokenizer(models.WordLevel({f"<{i}>": i for i in range(d_vocab)}, "<0>"))
        word_level.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        fast = PreTrainedTokenizerFast(tokenizer_object=word_level, unk_token="<0>")
        _save_whole(fast, saved)
    return AutoTokenizer.from_pretrained(str(saved))


def _save_whole(tokenizer: PreTrainedTokenizerBase, saved: Path) -> None:
    """Save a tokenizer into ``saved`` atomically (parallel test workers never see half of it);
    a cache that cannot be written (read-only, full) is an :class:`InputError` naming it."""
    tmp = saved.with_name(saved.name + f".tmp{os.getpid()}")
    try:
        tokenizer.save_pretrained(tmp)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise config.cache_error(saved.parent, err) from None
    try:
        os.replace(tmp, saved)
    except OSError:  # another process won the race
        shutil.rmtree(tmp, ignore_errors=True)


def bridge_from_hf(
    hf_model: GPT2LMHeadModel,
    tokenizer: PreTrainedTokenizerBase | None,
    model_name: str,
    processing: WeightProcessing = WeightProcessing(),
    device: str | torch.device | None = "cpu",
) -> TransformerBridge:
    """Wrap a Hugging Face GPT-2 model in a TransformerLens ``TransformerBridge``, fully offline.

    The bridge runs in compatibility mode, with the weight processing of ``processing``
    (HookedTransformer-equivalent numerics and hook names; ``tests/unit/test_raw_transformers.py``
    checks every weight and hook the method reads against the Hugging Face module itself). The
    bridge takes ``hf_model`` over (it processes its weights in place): pass a copy to keep it.
    ``tokenizer`` may be None for small test models that are only fed token ids (they get
    :func:`placeholder_tokenizer`); the bridge's tokenizer (its own copy) gets the model's context
    as ``model_max_length``, which the windowing functions read.
    """
    if not isinstance(getattr(hf_model, "config", None), GPT2Config):
        raise ModelLoadError(
            f"Expected a GPT-2-architecture model (GPT2LMHeadModel), got {type(hf_model).__name__}."
        )
    if not getattr(hf_model.config, "scale_attn_weights", True):
        raise ModelLoadError(
            "This checkpoint does not scale its attention scores (scale_attn_weights=False), "
            "which TransformerLens 4's bridge ignores: it would run the model with scores divided "
            "by sqrt(d_head). Use a checkpoint with GPT-2's default (scale_attn_weights=True)."
        )
    device = str(config.resolve_device(device))
    # float32 (checkpoints may be stored in half precision), on the device asked for: the bridge
    # records `device` in cfg.device but leaves a pre-loaded model where it is
    hf_model = hf_model.float().eval().to(device)
    placeholder = tokenizer is None
    if placeholder:
        tokenizer = placeholder_tokenizer(hf_model.config.vocab_size)
    with quiet_bridge():
        model = TransformerBridge.boot_transformers(
            model_name, hf_model=hf_model, tokenizer=tokenizer, device=device
        )
        model.enable_compatibility_mode(
            disable_warnings=True,
            fold_ln=processing.fold_ln,
            center_writing_weights=processing.center_writing_weights,
            center_unembed=processing.center_unembed,
            fold_value_biases=processing.fold_value_biases,
        )
    if placeholder:
        model.tokenizer.bos_token = None  # ids only: no token is a BOS the checks would ask for
    model.tokenizer.model_max_length = model.cfg.n_ctx
    model.eval()
    return model


@contextlib.contextmanager
def quiet_bridge():
    """TransformerBridge's boot messages (weight-loading bars, processing notices) silenced: the
    chapters' pages show the model's banner instead."""
    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()


def _from_pretrained(name_or_path: str, local_only: bool = False) -> GPT2LMHeadModel:
    """``GPT2LMHeadModel.from_pretrained`` without its per-load progress bar (a widget in a
    notebook, which a static page cannot draw), the caller's setting restored afterwards.

    Refuses, with a :class:`ModelLoadError`, a checkpoint whose weights do not all load (Hugging
    Face would initialise the missing ones at random and report it at a log level TransformerLens
    silences) and one with non-finite weights."""
    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        hf_model, info = GPT2LMHeadModel.from_pretrained(
            name_or_path, output_loading_info=True, local_files_only=local_only)
    finally:
        if shown:
            hf_logging.enable_progress_bar()
    tied = {"lm_head.weight"} if hf_model.config.tie_word_embeddings else set()
    missing = sorted(set(info.get("missing_keys", ())) - tied)
    unexpected = sorted(info.get("unexpected_keys", ()))
    mismatched = sorted(str(k) for k in info.get("mismatched_keys", ()))
    if missing or unexpected or mismatched or info.get("error_msgs"):
        raise ModelLoadError(
            f"{name_or_path} is not a complete GPT-2 checkpoint: {len(missing)} GPT-2 weights are "
            f"missing from it {missing[:3]}, {len(unexpected)} of its weights are not GPT-2's "
            f"{unexpected[:3]}, {len(mismatched)} have another shape {mismatched[:3]}. Loading it "
            "would leave those weights random: give a GPT-2-architecture checkpoint (saved with "
            "GPT2LMHeadModel.save_pretrained)."
        )
    bad = [name for name, tensor in hf_model.state_dict().items()
           if tensor.is_floating_point() and not torch.isfinite(tensor).all()]
    if bad:
        raise ModelLoadError(
            f"{name_or_path} has non-finite weights (NaN or infinity) in {len(bad)} tensors, "
            f"e.g. {bad[:3]}: the checkpoint is corrupt (a diverged run?); use another one."
        )
    return hf_model


def load_checkpoint(directory: str | Path) -> GPT2LMHeadModel:
    """A GPT-2-architecture Hugging Face checkpoint from a local directory (anything else, a
    truncated weights file and non-finite weights are refused with a :class:`ModelLoadError`)."""
    path = Path(directory).expanduser()
    config_file = path / "config.json"
    if not config_file.is_file():
        raise ModelLoadError(
            f"No Hugging Face checkpoint in {path} (config.json missing). Save one with "
            f"GPT2LMHeadModel.from_pretrained('gpt2').save_pretrained('{path}') on a machine with "
            "internet access, or give another directory."
        )
    try:
        hf_config = json.loads(config_file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ModelLoadError(
            f"{config_file} is not valid JSON ({err}): the checkpoint is damaged; save or copy "
            "it again."
        ) from None
    architectures = hf_config.get("architectures") or ["GPT2LMHeadModel"]
    if hf_config.get("model_type") != "gpt2" or not all(
        a in ("GPT2LMHeadModel", "GPT2Model") for a in architectures
    ):
        raise ModelLoadError(
            f"The checkpoint in {path} is not a GPT-2-architecture model (model_type "
            f"{hf_config.get('model_type')!r}, architectures {architectures}): the method and "
            "TransformerLens's GPT-2 loader need GPT2LMHeadModel weights."
        )
    try:
        return _from_pretrained(str(path))
    except (OSError, ValueError, SafetensorError) as err:
        weights = [p.name for p in sorted(path.glob("*.safetensors")) + sorted(path.glob("*.bin"))]
        raise ModelLoadError(
            f"The checkpoint in {path} could not be loaded ({', '.join(weights) or 'no weights'}"
            f": {err}). The weights file is probably truncated or corrupt: copy or save the "
            "checkpoint again."
        ) from err


def checkpoint_context(directory: str | Path) -> int | None:
    """The context (``n_positions``) a checkpoint directory's ``config.json`` gives, read without
    loading the weights (GPT-2's 1024 when it gives none, as Hugging Face reads it); None when the
    file cannot be read (:func:`load_checkpoint` then says why)."""
    try:
        hf_config = json.loads((Path(directory) / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(hf_config, dict):
        return None
    n_ctx = hf_config.get("n_positions", GPT2Config().n_positions)
    return n_ctx if isinstance(n_ctx, int) else None


def load_hf_gpt2(name: str = "gpt2", weights: str | Path | None = None) -> tuple[GPT2LMHeadModel, str]:
    """A GPT-2 family model from a local directory, the local cache, or the hub."""
    from_environment = not weights and name == "gpt2" and config.gpt2_weights() is not None
    weights = weights or (config.gpt2_weights() if name == "gpt2" else None)
    if weights is not None:
        if from_environment and not Path(weights).expanduser().is_dir():
            raise ModelLoadError(
                f"{config.GPT2_WEIGHTS.name} is {str(weights)!r}, which is not a directory: point "
                "it at a directory saved with GPT2LMHeadModel.save_pretrained, or unset it."
            )
        return load_checkpoint(weights), f"local directory {Path(weights).expanduser()}"
    if not config.hf_offline() and not hub_reachable():
        if not _cached(name):
            raise ModelLoadError(
                f"{GPT2_FAMILY[name]}'s weights could not be loaded: the Hugging Face hub "
                f"({HUB_HOST}) cannot be reached from this machine and no local copy was found. "
                "Either run online (Colab works), point "
                f"{config.GPT2_WEIGHTS.name} at a directory saved with save_pretrained (or pass "
                f"the directory as the model name), or use an offline model: "
                f"{config.MODEL.name}=planted or trained."
            )
        return _from_pretrained(name, local_only=True), "Hugging Face cache (hub unreachable)"
    try:
        hf_model = _from_pretrained(name)
    except OSError as err:
        raise ModelLoadError(
            f"{GPT2_FAMILY[name]}'s weights could not be loaded: the Hugging Face hub is "
            "unreachable and no local copy was found. Either run online (Colab works), set "
            "HF_HUB_OFFLINE=1 with a populated Hugging Face cache, point "
            f"{config.GPT2_WEIGHTS.name} at a directory saved with save_pretrained (or pass the "
            f"directory as the model name), or use an offline model: {config.MODEL.name}=planted "
            "or trained."
        ) from err
    where = "Hugging Face cache (offline)" if config.hf_offline() else f"Hugging Face hub '{name}'"
    return hf_model, where


#: The host of the Hugging Face hub, and how long a connection to it may take before the hub
#: counts as unreachable (a fast answer instead of the hub client's retries, about 30 s).
HUB_HOST = "huggingface.co"
HUB_TIMEOUT_S = 3.0


def hub_reachable(host: str = HUB_HOST, timeout: float = HUB_TIMEOUT_S) -> bool:
    """Whether a TCP connection to the hub opens within ``timeout`` seconds. Behind a proxy
    (:func:`~context_neurons.config.behind_proxy`) the answer is True: only the hub client,
    through the proxy, can tell."""
    if config.behind_proxy():
        return True
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


def _cached(name: str) -> bool:
    """Whether the Hugging Face cache holds ``name``'s configuration (its weights come with it)."""
    return isinstance(try_to_load_from_cache(name, "config.json"), str)


def resolve_model_name(name: str | None) -> str:
    """A known model name, or a checkpoint directory (as a resolved path string); ``None`` reads
    ``$CONTEXT_NEURONS_MODEL``. An empty name is refused (it used to mean GPT-2 silently, and a
    blank one the working directory)."""
    name = (config.model_name() if name is None else name).strip()
    if not name:
        raise ModelLoadError(
            f"The model name is empty: choose one of {', '.join(MODEL_NAMES)}, or give a "
            "directory holding a GPT-2-architecture Hugging Face checkpoint."
        )
    if name.lower() in MODEL_NAMES:
        return name.lower()
    path = Path(name).expanduser()
    if path.is_dir():
        return str(path.resolve())
    raise ModelLoadError(
        f"Unknown model {name!r}: choose one of {', '.join(MODEL_NAMES)}, or give a directory "
        "holding a GPT-2-architecture Hugging Face checkpoint."
    )


def load_model(
    name: str | None = None,
    *,
    weights: str | Path | None = None,
    tokenizer_dir: str | Path | None = None,
    device: str | torch.device | None = "auto",
    processing: WeightProcessing = WeightProcessing(),
    seed: int | None = None,
    variant: str = "standard",
) -> LoadedModel:
    """Get a model by name (module docstring), cached per arguments.

    Args:
        name: a model name or a checkpoint directory; ``None`` reads ``$CONTEXT_NEURONS_MODEL``
            (default ``"gpt2"``).
        weights: for the GPT-2 family, a local directory of Hugging Face files (else cache or hub).
        tokenizer_dir: directory with GPT-2's ``vocab.json`` and ``merges.txt``.
        device: ``"cpu"``, ``"cuda"`` or ``"auto"`` (CUDA when present).
        processing: TransformerLens weight processing (defaults: TransformerLens's own).
        seed: for ``planted``, the seed the weights are built from (default
            ``$CONTEXT_NEURONS_SEED``, else 0).
        variant: for ``planted``, ``"standard"`` or a negative control of
            :data:`~context_neurons.models.planted.VARIANTS`.

    Returns:
        A :class:`LoadedModel` (the planted model's carries its :class:`PlantedTruth`).
    """
    name = resolve_model_name(name)
    if variant != "standard" and name != "planted":
        raise InputError(f"Variant {variant!r} exists only for the planted model, not {name!r}.")
    seed = config.planted_seed() if seed is None else check_seed(seed)
    from_environment = config.gpt2_weights() if name == "gpt2" and not weights else None
    if name == "planted" or name in GPT2_FAMILY:  # $CONTEXT_NEURONS_TOKENIZER, in the cache's key
        tokenizer_dir = tokenizer_dir or config.tokenizer_root()
    return _load_model_cached(
        name,
        str(weights) if weights else None,
        str(tokenizer_dir) if tokenizer_dir else None,
        str(config.resolve_device(device)),
        processing,
        seed if name == "planted" else 0,
        variant,
        str(from_environment) if from_environment else None,
    )


@functools.lru_cache(maxsize=4)
def _load_model_cached(
    name: str,
    weights: str | None,
    tokenizer_dir: str | None,
    device: str,
    processing: WeightProcessing,
    seed: int,
    variant: str,
    gpt2_environment: str | None = None,
) -> LoadedModel:
    # gpt2_environment: $CONTEXT_NEURONS_GPT2 where it decides GPT-2's weights (load_hf_gpt2
    # reads it): part of the cache's key, so another directory is loaded, not the cached model.
    truth, directory = None, None
    if name == "planted":
        tokenizer = load_tokenizer(tokenizer_dir)
        state, truth = planted_state(tokenizer, seed=seed, variant=variant)  # cached on disk
        hf_model = planted_gpt2(state)
        source = f"planted ground truth, seed {seed}" + (
            f", variant {variant}" if variant != "standard" else ""
        )
    elif name == "trained":
        hf_model, tokenizer, source = _load_trained()
        directory = TRAINED_DIR
    elif name in GPT2_FAMILY:
        tokenizer = load_tokenizer(tokenizer_dir)
        hf_model, source = load_hf_gpt2(name, weights)
    else:
        hf_model = load_checkpoint(name)
        tokenizer = checkpoint_tokenizer(Path(name))
        if (Path(name) / "training.json").is_file():
            directory = Path(name)
        source, name = f"local directory {name}", "checkpoint"
    model = bridge_from_hf(hf_model, tokenizer, name, processing, device)
    return LoadedModel(
        model=model, name=name, source=source, processing=processing, truth=truth,
        directory=directory,
    )


def _load_trained() -> tuple[GPT2LMHeadModel, PreTrainedTokenizerBase, str]:
    if not (TRAINED_DIR / "config.json").is_file():
        raise ModelLoadError(
            f"The trained model is missing from {TRAINED_DIR}: reinstall the package, or train it "
            "with `python -m context_neurons train`."
        )
    record = json.loads((TRAINED_DIR / "training.json").read_text())
    source = f"seed {record['seed']}, {record['tokens_seen'] / 1e6:.1f}M tokens"
    return load_checkpoint(TRAINED_DIR), AutoTokenizer.from_pretrained(str(TRAINED_DIR)), source


def save_gpt2_shaped_checkpoint(
    path: str | Path, seed: int = 0, n_layer: int = 12, **sizes: int
) -> Path:
    """Write a GPT-2-shaped Hugging Face checkpoint with seeded random weights (for tests).

    ``sizes`` override GPT-2 Small's configuration (e.g. ``n_embd=1024, n_head=16`` with
    ``n_layer=24`` for GPT-2 Medium's shape). Users load real GPT-2 from such a directory exactly
    as they would load this one.
    """
    torch.manual_seed(seed)
    hf_model = GPT2LMHeadModel(GPT2Config(n_layer=n_layer, **sizes))
    path = Path(path)
    hf_model.save_pretrained(path)
    record = {"seed": seed, "n_layer": n_layer, **sizes}
    (path / "context_neurons.json").write_text(json.dumps(record))
    return path
