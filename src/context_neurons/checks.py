"""Input checks. This module validates what readers pass in, with one error type per kind of mistake.

As scikit-learn's ``utils.validation`` and TransformerLens's ``utils``, every function of the
package that takes a head, a neuron, a layer, a position, a token or a batch of tokens checks it
here, so the same mistake gets the same error and the same message everywhere:

* :class:`OutOfRangeError`: an index outside the model's range, or not an integer (``3.0`` is
  refused: round or cast it yourself if that is what you mean);
* :class:`TokenError`: token ids the model cannot take (empty, wrong shape, longer than the
  context, ids outside the vocabulary, a string that is not one token);
* :class:`InputError`: any other argument outside its options (the base of the two above);
* :class:`DataError`: a corpus, document or text that cannot be used;
* :class:`ModelLoadError`: weights or a tokenizer that cannot be found or loaded;
* :class:`NoContextualHeadsError`: the model's own taxonomy found no contextual head, so there is
  no contextual circuit to build (never replaced by the paper's heads).

Every message says what to do. A command reports them the same way (:func:`report_errors`: one
line on stderr, exit status 2), and checks its output paths and device here before any work.
"""

from __future__ import annotations

import operator
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterable

import torch
from jaxtyping import Int
from torch import Tensor

#: The four groups of layer-0 heads (Gibson 2025's taxonomy). Named once here, below both the
#: taxonomy that assigns them (:mod:`context_neurons.taxonomy`) and the planted model that plants
#: them (:mod:`context_neurons.models.planted`).
HEAD_GROUPS = ("contextual", "detokenization", "duplicate", "miscellaneous")

#: Exit status of a mistake in the input (argparse's convention); a bug still raises.
EXIT_INPUT = 2
#: Exit status of an interrupted command (128 + SIGINT).
EXIT_INTERRUPTED = 130


class ContextNeuronsError(Exception):
    """Base of the package's errors."""


class InputError(ContextNeuronsError, ValueError):
    """An argument outside its options."""


class OutOfRangeError(InputError, IndexError):
    """A head, neuron, layer, position or token index outside the model's range."""


class TokenError(InputError):
    """Token ids the model cannot take."""


class DataError(ContextNeuronsError, RuntimeError):
    """A corpus, document or text could not be used; the message says what to do."""


class ModelLoadError(ContextNeuronsError, RuntimeError):
    """A model, its weights or its tokenizer could not be found; the message says what to do."""


class NoContextualHeadsError(ContextNeuronsError, RuntimeError):
    """The model's taxonomy classified no layer-0 head as contextual."""


class NoNeuronsFoundError(ContextNeuronsError, RuntimeError):
    """Discovery found no neuron a chapter's study needs (none above theta, or none with a domain
    of its own); the message says which and what to do."""


def as_index(value: Any, what: str) -> int:
    """``value`` as a Python int (ints, NumPy integers, 0-d integer tensors); floats are refused."""
    if isinstance(value, bool):
        raise OutOfRangeError(f"{what} must be an integer, got {value!r}.")
    try:
        return operator.index(value)
    except TypeError:
        raise OutOfRangeError(
            f"{what} must be an integer, got {value!r} ({type(value).__name__}): pass an int "
            "(round or cast it yourself if that is what you mean)."
        ) from None


def _in_range(value: Any, what: str, stop: int, where: str) -> int:
    index = as_index(value, what)
    if not 0 <= index < stop:
        raise OutOfRangeError(f"{what} {index} out of range: {where} {what.lower()}s 0..{stop - 1}.")
    return index


def check_layer(model, layer: Any, min_layer: int = 0) -> int:
    """A layer index in ``min_layer..n_layers-1``."""
    index = as_index(layer, "Layer")
    n_layers = model.cfg.n_layers
    if not min_layer <= index < n_layers:
        raise OutOfRangeError(
            f"Layer {index} out of range: this model's layers are {min_layer}..{n_layers - 1}."
        )
    return index


def check_head(model, head: Any, layer: int = 0) -> int:
    """One attention head index of ``layer``."""
    return _in_range(head, "Head", model.cfg.n_heads, f"layer {layer} has")


def check_heads(model, heads: Any, layer: int = 0) -> list[int]:
    """Head indices of ``layer`` (one index, several, or ``None`` for all); at least one, each
    once (a repeated head would be counted twice in every group and sum)."""
    checked = _check_many(heads, model.cfg.n_heads, lambda h: check_head(model, h, layer), "head")
    repeated = sorted({h for h in checked if checked.count(h) > 1})
    if repeated:
        raise InputError(f"Heads {repeated} are given more than once: give each head once.")
    return checked


#: The largest seed (NumPy's and torch's generators take 32-bit seeds).
MAX_SEED = 2**32 - 1


def check_seed(seed: Any, what: str = "seed") -> int:
    """A seed: a whole number in ``0..MAX_SEED`` (a float, a negative number or one past 32 bits
    would be cast or wrapped silently into another seed's weights)."""
    value = as_index(seed, what)
    if not 0 <= value <= MAX_SEED:
        raise InputError(f"{what} must be in 0..{MAX_SEED}, got {value}.")
    return value


def check_neuron(model, neuron: Any, layer: int = 0) -> int:
    """One MLP neuron index of ``layer``."""
    return _in_range(neuron, "Neuron", model.cfg.d_mlp, f"layer {layer}'s MLP has")


def check_neurons(model, neurons: Any, layer: int = 0) -> list[int]:
    """Neuron indices of ``layer`` (one index, several, or ``None`` for all); at least one."""
    return _check_many(neurons, model.cfg.d_mlp, lambda j: check_neuron(model, j, layer), "neuron")


def _check_many(values: Any, count: int, check_one, what: str) -> list[int]:
    """``values`` checked one by one (``None``: all ``count`` of them); at least one."""
    if values is None:
        return list(range(count))
    checked = [check_one(v) for v in _as_list(values)]
    if not checked:
        raise OutOfRangeError(f"Give at least one {what} index.")
    return checked


def check_position(model, n: Any) -> int:
    """A position in ``0..n_ctx-1``."""
    return _in_range(n, "Position", model.cfg.n_ctx, "this model has")


def _as_list(values: Any) -> list:
    if torch.is_tensor(values):
        return values.flatten().tolist() if values.ndim else [values.item()]
    if isinstance(values, (int, float)) or hasattr(values, "__index__"):
        return [values]
    return list(values)


def as_token_batch(tokens: Any) -> Int[Tensor, "batch pos"]:
    """Token ids as a non-empty ``[batch, pos]`` integer tensor (one sequence: batch 1)."""
    tokens = torch.as_tensor(tokens)
    if tokens.ndim == 1:
        tokens = tokens[None]
    if tokens.ndim != 2 or tokens.numel() == 0:
        raise TokenError(
            f"Expected a non-empty [batch, pos] (or [pos]) tensor of token ids, got shape "
            f"{tuple(tokens.shape)}."
        )
    if tokens.dtype.is_floating_point or tokens.dtype == torch.bool:
        raise TokenError(f"Token ids must be integers, got dtype {tokens.dtype}.")
    return tokens


def check_tokens(model, tokens: Any) -> Int[Tensor, "batch pos"]:
    """Token ids as a ``[batch, pos]`` tensor on the model's device (one sequence: batch 1).

    Raises:
        TokenError: for an empty batch or sequence, more than two dimensions, more positions than
            the context, or ids outside the vocabulary.
    """
    tokens = as_token_batch(tokens)
    if tokens.shape[1] > model.cfg.n_ctx:
        raise TokenError(
            f"{tokens.shape[1]} tokens exceed the context of {model.cfg.n_ctx}: cut the text."
        )
    if int(tokens.min()) < 0 or int(tokens.max()) >= model.cfg.d_vocab:
        raise TokenError(f"Token ids must be in 0..{model.cfg.d_vocab - 1}.")
    return tokens.to(model.cfg.device)


def check_sequence(model, tokens: Any) -> Int[Tensor, " pos"]:
    """One sequence of token ids (a 1-D tensor), checked as :func:`check_tokens` does."""
    tokens = torch.as_tensor(tokens)
    if tokens.ndim != 1:
        raise TokenError(f"Expected one sequence (a 1-D tensor), got shape {tuple(tokens.shape)}.")
    return check_tokens(model, tokens)[0]


def check_token_ids(token_ids: Any, d_vocab: int) -> Int[Tensor, " n_tokens"]:
    """A *set* of token ids (not a text: it may be empty, and has no context limit) as a 1-d
    integer tensor of ids in ``0..d_vocab-1`` (a negative id would silently read a token from
    the end of the vocabulary), else an :class:`InputError`."""
    try:
        ids = torch.as_tensor(token_ids)
    except (TypeError, ValueError, RuntimeError):
        raise InputError(f"token_ids must be integer token ids, got {token_ids!r}.") from None
    if ids.is_floating_point() or ids.dtype == torch.bool or ids.dim() != 1:
        raise InputError(f"token_ids must be a 1-d list of integer ids, got {token_ids!r}.")
    if len(ids) and not (0 <= int(ids.min()) and int(ids.max()) < d_vocab):
        raise InputError(f"token ids must be in 0..{d_vocab - 1}, got {int(ids.min())} to "
                         f"{int(ids.max())}.")
    return ids


def token_id(model, token: str | int) -> int:
    """A single token's id, from its id or its string (e.g. ``' the'``), in the model's tokenizer.

    Raises:
        TokenError: an id outside the vocabulary, a string that is not exactly one token of the
            model's tokenizer, or a model without a tokenizer.
    """
    if not isinstance(token, str):
        index = as_index(token, "Token id")
        if not 0 <= index < model.cfg.d_vocab:
            raise TokenError(f"Token id {index} out of range 0..{model.cfg.d_vocab - 1}.")
        return index
    if getattr(model, "tokenizer", None) is None:
        raise TokenError(f"This model has no tokenizer to look up {token!r}: pass a token id.")
    ids = model.tokenizer.encode(token, add_special_tokens=False)
    unknown = getattr(model.tokenizer, "unk_token_id", None)
    if ids == [unknown] and token != model.tokenizer.unk_token:
        raise TokenError(
            f"{token!r} is not in this model's vocabulary (its tokenizer maps it to the unknown "
            "token); choose another token, or pass an id."
        )
    if len(ids) != 1:
        raise TokenError(
            f"{token!r} is {len(ids)} tokens in this model's tokenizer, not one ({ids}); choose a "
            "token that is one token of this tokenizer, or pass its id."
        )
    return ids[0]


def check_choice(value: Any, options: Iterable[Any], what: str) -> Any:
    """``value`` if it is one of ``options``, else an :class:`InputError` naming them."""
    options = tuple(options)
    if value not in options:
        raise InputError(f"{what} must be one of {', '.join(map(repr, options))}; got {value!r}.")
    return value


def check_layer_neuron(model, layer: Any, neuron: Any) -> tuple[int, int]:
    """A ``(layer, neuron)`` pair: an MLP layer of the model and a neuron of it."""
    layer = check_layer(model, layer)
    return layer, check_neuron(model, neuron, layer)


def check_upstream_head(model, layer: Any, head: Any, max_layer: int) -> tuple[int, int]:
    """A ``(layer, head)`` pair in layers ``0..max_layer`` (upstream of, or in, ``max_layer``)."""
    index = as_index(layer, "Head layer")
    if not 0 <= index <= max_layer:
        raise OutOfRangeError(
            f"Head layer {index} out of range: heads upstream of the neuron are in layers "
            f"0..{max_layer}."
        )
    return index, check_head(model, head, index)


def writable_directory(path: Path, flag: str = "--out") -> Path:
    """``path`` as a writable directory, created now (before any computation), or an
    :class:`InputError` naming the command-line ``flag`` that gave it."""
    path = Path(path).expanduser()
    if path.exists() and not path.is_dir():
        raise InputError(f"{flag} {path} is a file, not a directory; choose another path.")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"{flag} {path} cannot be created ({err.strerror}); choose another "
                         "path.") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise InputError(f"{flag} {path} is not writable; choose another path.")
    return path


def check_output_file(path: Path, flag: str = "--out") -> Path:
    """``path`` if a file can be written there (its folder exists and is writable, it is not a
    directory); else an :class:`InputError` before any computation."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise InputError(f"{flag} {path} is a directory: give a file name, such as "
                         f"{path / 'results.json'}.")
    folder = path.parent.resolve()
    if not folder.is_dir():
        raise InputError(f"{flag} {path}: the folder {folder} does not exist; create it first "
                         "or choose another path.")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{flag} {path}: the folder {folder} is not writable; choose another "
                         "path.")
    if path.exists() and not os.access(path, os.W_OK):
        raise InputError(f"{flag} {path} exists and is not writable; choose another path.")
    return path


def check_device(device: str) -> None:
    """A command's ``--device``: ``cuda`` without a CUDA GPU is an :class:`InputError`."""
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda was asked for but no CUDA GPU is available: use "
                         "--device cpu (or auto).")


def report_errors(run: Callable[[], int]) -> int:
    """Run a command; the package's own errors (a mistake in the input, data or model that the
    message explains) are printed as ``error: ...`` on stderr with exit status 2, an interruption
    as one line with status 130. Anything else is a bug and keeps its traceback."""
    try:
        return run()
    except ContextNeuronsError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
