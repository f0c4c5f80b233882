"""Activating prompts. This module finds the prompts on which a neuron fires most and truncates
each to its shortest suffix that keeps most of the activation (step 2, chapter 7)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens import HookedTransformer

from context_neurons.checks import (
    InputError,
    TokenError,
    check_layer,
    check_layer_neuron,
    check_neurons,
    check_tokens,
)
from context_neurons.hooks import run_until
from context_neurons.text.windows import pad_windows

KEEP_FRACTION = 0.8  # truncation keeps at least this fraction of the activation (the paper's 80%)


def as_batch(model: HookedTransformer, tokens) -> tuple[Int[Tensor, "batch pos"], Tensor]:
    """A padded batch and lengths from a 1-D tensor, a 2-D tensor or a list of 1-D tensors."""
    if isinstance(tokens, Tensor) and tokens.ndim == 1:
        tokens = [tokens]
    if isinstance(tokens, Tensor):
        batch = tokens
        lengths = torch.full((tokens.shape[0],), tokens.shape[1], device=tokens.device)
    else:
        batch, lengths = pad_windows([torch.as_tensor(t) for t in tokens])
    return check_tokens(model, batch), lengths.to(model.cfg.device)


@torch.no_grad()
def neuron_activations(
    model: HookedTransformer,
    tokens,
    layer: int,
    neurons: int | Sequence[int],
    batch_size: int = 32,
) -> Float[Tensor, "batch pos neuron"]:
    """Pre-activations (``blocks.{layer}.mlp.hook_pre``) of some neurons at every position.

    Args:
        model: the model.
        tokens: a ``[batch, pos]`` tensor, one sequence, or a list of sequences (right-padded).
        layer: the MLP layer.
        neurons: one neuron index or several.
        batch_size: sequences per forward pass.

    Returns:
        ``[batch, pos, neuron]`` pre-activations; padded positions are ``nan``.
    """
    layer = check_layer(model, layer)
    neurons = check_neurons(model, neurons, layer)
    batch, lengths = as_batch(model, tokens)
    index = torch.tensor(neurons, device=batch.device)
    hook = f"blocks.{layer}.mlp.hook_pre"
    out = [
        run_until(model, batch[start : start + batch_size], hook)[hook][..., index]
        for start in range(0, len(batch), batch_size)
    ]
    acts = torch.cat(out)
    pad = torch.arange(batch.shape[1], device=batch.device)[None] >= lengths[:, None]
    return acts.masked_fill(pad[..., None], float("nan"))


@dataclass
class Prompt:
    """A prompt: ``[BOS, ...]`` tokens ending at the token whose activation matters."""

    tokens: Int[Tensor, "pos"]
    activation: float
    source: str = ""
    window: int = -1
    end: int = -1  # index in the window of the final token
    start: int = 1  # index in the window of the first token after BOS
    full_activation: float | None = None  # before truncation

    def text(self, tokenizer) -> str:
        return tokenizer.decode(self.tokens[1:].tolist())


def top_activating_prompts(
    model: HookedTransformer,
    windows: list[Int[Tensor, "_pos"]],
    layer: int,
    neuron: int,
    k: int = 10,
    labels: list[str] | None = None,
    acts: Float[Tensor, "batch pos"] | None = None,
) -> list[Prompt]:
    """The ``k`` windows where the neuron fires most, each cut at its most activating token.

    Args:
        model: the model.
        windows: token windows ``[BOS, ...]``.
        layer, neuron: the neuron.
        k: how many prompts (one per window, so they are not k near-copies).
        labels: the windows' labels (for the prompts' ``source``).
        acts: precomputed ``[batch, pos]`` pre-activations, to skip the forward pass.

    Returns:
        Prompts ``window[: end + 1]``, highest activation first.
    """
    layer, neuron = check_layer_neuron(model, layer, neuron)
    if acts is None:
        acts = neuron_activations(model, windows, layer, neuron)[..., 0]
    acts = acts.clone()
    acts[:, 0] = float("nan")  # the BOS position is not a prompt
    best, end = torch.nan_to_num(acts, nan=-torch.inf).max(-1)
    order = torch.argsort(best, descending=True, stable=True)[:k]
    return [
        Prompt(
            windows[i][: int(end[i]) + 1].cpu(),
            float(best[i]),
            labels[i] if labels else str(int(i)),
            int(i),
            int(end[i]),
        )
        for i in order.tolist()
    ]


@torch.no_grad()
def suffix_activations(
    model: HookedTransformer, tokens: Int[Tensor, "pos"], layer: int, neuron: int
) -> Float[Tensor, "n_suffix"]:
    """The neuron's pre-activation at the final token for every suffix ``[BOS] + tokens[s:]``.

    Entry ``s - 1`` is for the suffix starting at ``tokens[s]``, ``s = 1..len-1`` (entry 0 is the
    whole prompt). All suffixes run in one right-padded batch.
    """
    layer, neuron = check_layer_neuron(model, layer, neuron)
    tokens = check_prompt(model, tokens)
    suffixes = [torch.cat([tokens[:1], tokens[s:]]) for s in range(1, len(tokens))]
    acts = neuron_activations(model, suffixes, layer, neuron)[..., 0]
    lengths = torch.tensor([len(s) for s in suffixes], device=acts.device)
    return acts[torch.arange(len(suffixes), device=acts.device), lengths - 1]


class NotFiring(InputError):
    """A prompt on which the neuron does not fire: there is no activation to keep a part of."""


def check_prompt(model: HookedTransformer, tokens) -> Int[Tensor, "pos"]:
    """A prompt: a 1-D tensor ``[BOS, token, ...]`` of at least two tokens."""
    tokens = torch.as_tensor(tokens)
    bos = getattr(model.tokenizer, "bos_token_id", None)
    if tokens.ndim != 1 or len(tokens) < 2 or (bos is not None and int(tokens[0]) != bos):
        raise TokenError("A prompt is a 1-D tensor [BOS, token, ...] of length >= 2.")
    return tokens


def truncate_prompt(
    model: HookedTransformer,
    prompt: Prompt | Tensor,
    layer: int,
    neuron: int,
    keep: float = KEEP_FRACTION,
    chunk: int = 8,
) -> Prompt:
    """The shortest suffix of a prompt that keeps ``keep`` of the activation at its final token.

    Suffixes ``[BOS] + tokens[s:]`` are run through the model shortest first, in batches of
    ``chunk``, ``2 chunk``, ``4 chunk``, ... suffixes, until one keeps enough: the kept activation
    is measured, not assumed; a short answer costs one small batch, a long one a few passes. The
    returned prompt's ``activation`` is the suffix's own.

    Raises:
        NotFiring: the pre-activation at the prompt's final token is not positive.
    """
    layer, neuron = check_layer_neuron(model, layer, neuron)
    if not 0 < keep <= 1:
        raise InputError(f"keep must be in (0, 1], got {keep}.")
    if isinstance(prompt, Tensor):
        prompt = Prompt(prompt.cpu(), float("nan"))
    tokens = check_prompt(model, prompt.tokens)
    full = float(neuron_activations(model, tokens, layer, neuron)[0, -1, 0])
    if full <= 0:
        raise NotFiring(
            f"The neuron's pre-activation at the prompt's final token is {full:.3f} <= 0: "
            f"truncation keeps a fraction of a positive activation."
        )
    starts = list(range(len(tokens) - 1, 0, -1))  # shortest suffix first
    i = 0
    while i < len(starts):
        group = starts[i : i + chunk]
        i, chunk = i + chunk, 2 * chunk
        suffixes = [torch.cat([tokens[:1], tokens[s:]]) for s in group]
        acts = neuron_activations(model, suffixes, layer, neuron)[..., 0]
        ends = torch.tensor([len(x) - 1 for x in suffixes], device=acts.device)
        last = acts[torch.arange(len(group), device=acts.device), ends]
        ok = torch.nonzero(last >= keep * full).flatten()
        if len(ok):
            s, kept = group[int(ok[0])], float(last[int(ok[0])])
            break
    else:  # float rounding only: the whole prompt keeps all of its activation
        s, kept = 1, full
    return Prompt(
        torch.cat([tokens[:1], tokens[s:]]),
        kept,
        prompt.source,
        prompt.window,
        prompt.end,
        prompt.start + s - 1,
        full,
    )
