"""Models. This module loads the two models every chapter runs on, through one code path.

* ``gpt2``: GPT-2 Small, from the Hugging Face hub, a local Hugging Face cache
  (``HF_HUB_OFFLINE=1``) or a local directory of Hugging Face files.
* ``planted``: the offline ground-truth model of METHOD.md section 8 (see
  :mod:`context_neurons.planted`), a Hugging Face GPT-2 checkpoint built from a seed.

Both become a TransformerLens ``HookedTransformer`` through :func:`hooked_from_hf`, which uses
TransformerLens's own GPT-2 weight conversion and weight processing (the same functions that
``HookedTransformer.from_pretrained("gpt2")`` calls), so the planted model goes through exactly the
loader that real GPT-2 uses. We pin TransformerLens 3.x (``HookedTransformer``) rather than the 4.x
``TransformerBridge``; the README says why.

Weight processing (:class:`WeightProcessing`) defaults to TransformerLens's defaults: LayerNorm
weights folded into the next matrices (``fold_ln``), writing weights centred, unembedding centred,
value biases folded into the output bias. Each is an exact re-parametrisation: logits are unchanged
(tested). The decomposition code reads LayerNorms through the model's own modules, so it is exact
arithmetic on the weights actually run, whatever the processing.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from transformer_lens import HookedTransformer, HookedTransformerConfig
from transformer_lens.pretrained.weight_conversions.gpt2 import convert_gpt2_weights

if TYPE_CHECKING:
    from transformers import GPT2LMHeadModel, PreTrainedTokenizerBase

    from context_neurons.planted import PlantedTruth

MODEL_NAMES = ("gpt2", "planted")
MODEL_ENV = "CONTEXT_NEURONS_MODEL"
TOKENIZER_ENV = "CONTEXT_NEURONS_TOKENIZER"
GPT2_WEIGHTS_ENV = "CONTEXT_NEURONS_GPT2"
CACHE_ENV = "CONTEXT_NEURONS_CACHE"
EOT_ID = 50256  # <|endoftext|>, GPT-2's BOS, EOS and padding token


class ModelLoadError(RuntimeError):
    """A model, its weights or its tokenizer could not be found; the message says what to do."""


@dataclass(frozen=True)
class WeightProcessing:
    """TransformerLens weight processing applied when loading (all exact re-parametrisations)."""

    fold_ln: bool = True
    center_writing_weights: bool = True
    center_unembed: bool = True
    fold_value_biases: bool = True


@dataclass
class LoadedModel:
    """A model ready for the chapters: the HookedTransformer, its name and, if planted, its truth."""

    model: HookedTransformer
    name: str
    source: str
    processing: WeightProcessing = field(default_factory=WeightProcessing)
    truth: "PlantedTruth | None" = None

    @property
    def is_planted(self) -> bool:
        return self.truth is not None

    def banner(self) -> str:
        """One paragraph naming the model that produced a page's outputs."""
        if self.is_planted:
            return (
                f"Outputs on this page were produced by the PLANTED ground-truth model "
                f"(GPT-2 Small architecture and tokenizer, weights built from seed "
                f"{self.truth.seed}, structure planted and known; see the appendix). They are "
                f"not GPT-2's. Set {MODEL_ENV}=gpt2 to run this page on GPT-2 Small."
            )
        return (
            f"Outputs on this page were produced by GPT-2 Small ({self.source}) through "
            f"TransformerLens."
        )


# ----------------------------------------------------------------------------------------------
# Locating shared resources
# ----------------------------------------------------------------------------------------------


def find_shared_dir(name: str, env_var: str | None = None) -> Path | None:
    """Find ``shared/<name>`` (tokenizer, corpora) without copying it into the repository.

    Order: the environment variable, then ``../shared/<name>`` beside the repository checkout this
    package was installed from, then ``shared/<name>`` or ``../shared/<name>`` from the working
    directory and its parents. Returns None when nothing exists.
    """
    if env_var and os.environ.get(env_var):
        return Path(os.environ[env_var]).expanduser()
    candidates: list[Path] = []
    repo_root = Path(__file__).resolve().parents[2]  # src/context_neurons/models.py -> repo
    candidates.append(repo_root.parent / "shared" / name)
    here = Path.cwd().resolve()
    for parent in [here, *here.parents]:
        candidates += [parent / "shared" / name, parent.parent / "shared" / name]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return None


def cache_dir() -> Path:
    """Directory for derived files (the offline tokenizer in Hugging Face format)."""
    root = Path(os.environ.get(CACHE_ENV, Path.home() / ".cache" / "context_neurons"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """``None`` or ``"auto"`` picks CUDA when available, else CPU; ``"cuda"`` without a GPU errors."""
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError("device='cuda' was asked for but no CUDA GPU is available; use 'cpu'.")
    return device


# ----------------------------------------------------------------------------------------------
# Tokenizer
# ----------------------------------------------------------------------------------------------


def build_offline_tokenizer(tokenizer_dir: str | Path) -> "PreTrainedTokenizerBase":
    """GPT-2's tokenizer from ``vocab.json`` and ``merges.txt``, with no network access.

    ``GPT2TokenizerFast(vocab_file=..., merges_file=...)`` returns empty encodings under
    transformers 5, so we build a byte-level BPE with ``tokenizers``, save it in Hugging Face
    format and reload it with ``AutoTokenizer`` (TransformerLens reloads tokenizers by their
    ``name_or_path``, so the tokenizer must live in a directory).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    tokenizer_dir = Path(tokenizer_dir)
    vocab, merges = tokenizer_dir / "vocab.json", tokenizer_dir / "merges.txt"
    if not (vocab.is_file() and merges.is_file()):
        raise ModelLoadError(
            f"GPT-2 tokenizer files not found in {tokenizer_dir} (need vocab.json and merges.txt). "
            f"Point {TOKENIZER_ENV} at a directory holding them, or run online so the tokenizer "
            f"can be downloaded."
        )
    digest = f"{vocab.stat().st_size}-{merges.stat().st_size}"
    saved = cache_dir() / f"gpt2-tokenizer-{digest}"
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
        tmp = saved.with_name(saved.name + f".tmp{os.getpid()}")
        fast.save_pretrained(tmp)
        try:
            os.replace(tmp, saved)  # atomic, so parallel test workers never see half a directory
        except OSError:  # another process won the race
            shutil.rmtree(tmp, ignore_errors=True)
    return AutoTokenizer.from_pretrained(str(saved))


def load_tokenizer(tokenizer_dir: str | Path | None = None) -> "PreTrainedTokenizerBase":
    """GPT-2's tokenizer: from ``tokenizer_dir`` (or ``shared/gpt2-tokenizer``), else the hub."""
    tokenizer_dir = tokenizer_dir or find_shared_dir("gpt2-tokenizer", TOKENIZER_ENV)
    if tokenizer_dir is not None:
        return build_offline_tokenizer(tokenizer_dir)
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained("gpt2")
    except OSError as err:
        raise ModelLoadError(
            "No GPT-2 tokenizer: none found locally and the Hugging Face hub is unreachable. "
            f"Set {TOKENIZER_ENV} to a directory with vocab.json and merges.txt."
        ) from err


# ----------------------------------------------------------------------------------------------
# Hugging Face GPT-2 -> HookedTransformer
# ----------------------------------------------------------------------------------------------


def config_from_hf(hf_config: Any, model_name: str) -> HookedTransformerConfig:
    """The HookedTransformerConfig TransformerLens derives for a GPT-2 checkpoint."""
    return HookedTransformerConfig(
        model_name=model_name,
        original_architecture="GPT2LMHeadModel",
        d_model=hf_config.n_embd,
        d_head=hf_config.n_embd // hf_config.n_head,
        n_heads=hf_config.n_head,
        d_mlp=hf_config.n_inner or 4 * hf_config.n_embd,
        n_layers=hf_config.n_layer,
        n_ctx=hf_config.n_positions,
        eps=hf_config.layer_norm_epsilon,
        d_vocab=hf_config.vocab_size,
        act_fn=hf_config.activation_function,
        use_attn_scale=getattr(hf_config, "scale_attn_weights", True),
        scale_attn_by_inverse_layer_idx=hf_config.scale_attn_by_inverse_layer_idx,
        normalization_type="LN",
        positional_embedding_type="standard",
        default_prepend_bos=True,
    )


def hooked_from_hf(
    hf_model: "GPT2LMHeadModel",
    tokenizer: "PreTrainedTokenizerBase | None",
    model_name: str,
    processing: WeightProcessing = WeightProcessing(),
    device: str | torch.device | None = "cpu",
) -> HookedTransformer:
    """Convert a Hugging Face GPT-2 model into a HookedTransformer, fully offline.

    ``tokenizer`` may be None for small test models that are only fed token ids.
    """
    cfg = config_from_hf(hf_model.config, model_name)
    cfg.device = str(resolve_device(device))
    model = HookedTransformer(cfg, tokenizer=tokenizer, move_to_device=False)
    state_dict = convert_gpt2_weights(hf_model, cfg)
    model.load_and_process_state_dict(
        state_dict,
        fold_ln=processing.fold_ln,
        center_writing_weights=processing.center_writing_weights,
        center_unembed=processing.center_unembed,
        fold_value_biases=processing.fold_value_biases,
    )
    model.to(cfg.device, print_details=False)
    model.eval()
    return model


def load_hf_gpt2(weights: str | Path | None = None) -> tuple["GPT2LMHeadModel", str]:
    """GPT-2 Small's Hugging Face model from a local directory, the local cache, or the hub."""
    from transformers import GPT2LMHeadModel

    weights = weights or os.environ.get(GPT2_WEIGHTS_ENV)
    if weights is not None:
        path = Path(weights).expanduser()
        if not (path / "config.json").is_file():
            raise ModelLoadError(
                f"No Hugging Face checkpoint in {path} (config.json missing). Save one with "
                f"GPT2LMHeadModel.from_pretrained('gpt2').save_pretrained('{path}') on a machine "
                f"with internet access, or unset {GPT2_WEIGHTS_ENV} to use the hub."
            )
        return GPT2LMHeadModel.from_pretrained(str(path)), f"local directory {path}"
    try:
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
    except OSError as err:
        raise ModelLoadError(
            "GPT-2 Small's weights could not be loaded: the Hugging Face hub is unreachable and "
            "no local copy was found. Either run online (Colab works), set HF_HUB_OFFLINE=1 with "
            f"a populated Hugging Face cache, point {GPT2_WEIGHTS_ENV} at a directory saved with "
            f"save_pretrained, or use the offline planted model: {MODEL_ENV}=planted."
        ) from err
    offline = os.environ.get("HF_HUB_OFFLINE") == "1"
    return hf_model, "Hugging Face cache (offline)" if offline else "Hugging Face hub 'gpt2'"


def load_model(
    name: str | None = None,
    *,
    weights: str | Path | None = None,
    tokenizer_dir: str | Path | None = None,
    device: str | torch.device | None = "cpu",
    processing: WeightProcessing = WeightProcessing(),
    seed: int = 0,
) -> LoadedModel:
    """Get a model by name: ``"gpt2"`` (GPT-2 Small) or ``"planted"`` (offline ground truth).

    Args:
        name: model name; ``None`` reads ``$CONTEXT_NEURONS_MODEL`` (default ``"gpt2"``).
        weights: for ``gpt2``, a local directory of Hugging Face files (else cache or hub).
        tokenizer_dir: directory with GPT-2's ``vocab.json`` and ``merges.txt``.
        device: ``"cpu"``, ``"cuda"`` or ``"auto"``.
        processing: TransformerLens weight processing (defaults: TransformerLens's own).
        seed: for ``planted``, the seed the weights are built from.

    Returns:
        A :class:`LoadedModel` (the planted model's carries its :class:`PlantedTruth`).
    """
    name = (name or os.environ.get(MODEL_ENV) or "gpt2").strip().lower()
    if name not in MODEL_NAMES:
        raise ModelLoadError(f"Unknown model {name!r}: choose one of {', '.join(MODEL_NAMES)}.")
    return _load_model_cached(
        name,
        str(weights) if weights else None,
        str(tokenizer_dir) if tokenizer_dir else None,
        str(resolve_device(device)),
        processing,
        seed,
    )


@functools.lru_cache(maxsize=4)
def _load_model_cached(
    name: str,
    weights: str | None,
    tokenizer_dir: str | None,
    device: str,
    processing: WeightProcessing,
    seed: int,
) -> LoadedModel:
    tokenizer = load_tokenizer(tokenizer_dir)
    truth = None
    if name == "planted":
        from context_neurons.planted import build_planted_gpt2

        hf_model, truth = build_planted_gpt2(tokenizer, seed=seed)
        source = f"planted ground truth, seed {seed}"
    else:
        hf_model, source = load_hf_gpt2(weights)
    model = hooked_from_hf(hf_model, tokenizer, name, processing, device)
    return LoadedModel(model=model, name=name, source=source, processing=processing, truth=truth)


def save_gpt2_shaped_checkpoint(path: str | Path, seed: int = 0, n_layer: int = 12) -> Path:
    """Write a GPT-2-Small-shaped Hugging Face checkpoint with seeded random weights (for tests).

    Users load real GPT-2 from such a directory exactly as they would load this one.
    """
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    hf_model = GPT2LMHeadModel(GPT2Config(n_layer=n_layer))
    path = Path(path)
    hf_model.save_pretrained(path)
    (path / "context_neurons.json").write_text(json.dumps({"seed": seed, "n_layer": n_layer}))
    return path
