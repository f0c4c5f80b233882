"""Activating prompts. This module finds the prompts on which a neuron fires most and truncates
each to its shortest suffix that keeps most of the activation (step 2, chapter 7)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

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
#: A batch of sequences of different lengths holds at most this many padded tokens per real one
#: (on a CPU a pass costs its padded tokens; see ``benchmarks/RESULTS.md``, part lookups).
PADDING_SLACK = 1.25


def as_batch(model: TransformerBridge, tokens) -> tuple[Int[Tensor, "batch pos"], Tensor]:
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
    model: TransformerBridge,
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

    tokens: Int[Tensor, " pos"]
    activation: float
    source: str = ""
    window: int = -1
    end: int = -1  # index in the window of the final token
    start: int = 1  # index in the window of the first token after BOS
    full_activation: float | None = None  # before truncation

    def text(self, tokenizer) -> str:
        return tokenizer.decode(self.tokens[1:].tolist())


def prompts_table(prompts: Sequence[Prompt], tokenizer) -> pd.DataFrame:
    """The prompts as chapter 7 shows them: activation, source and the prompt's last 50
    characters, one row each."""
    return pd.DataFrame({
        "activation": [p.activation for p in prompts],
        "source": [p.source for p in prompts],
        "end of the prompt": ["..." + repr(p.text(tokenizer)[-50:]) for p in prompts],
    })


def truncation_table(cuts: Sequence[Prompt], tokenizer) -> pd.DataFrame:
    """Truncated prompts (:func:`truncate_prompts`) as chapter 7 shows them: the prompt's length
    and the tokens kept (BOS not counted), the activation before and after, and the kept text's
    last 60 characters, one row each."""
    return pd.DataFrame({
        "prompt tokens": [cut.end for cut in cuts],
        "kept tokens": [len(cut.tokens) - 1 for cut in cuts],
        "activation": [cut.full_activation for cut in cuts],
        "kept activation": [cut.activation for cut in cuts],
        "kept text (last 60 characters)": [repr(cut.text(tokenizer)[-60:]) for cut in cuts],
    })


def top_activating_prompts(
    model: TransformerBridge,
    windows: list[Int[Tensor, " _pos"]],
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
    lengths = torch.tensor([len(w) for w in windows], device=acts.device)
    acts[torch.arange(acts.shape[1], device=acts.device)[None] >= lengths[:, None]] = float("nan")
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


TOKENS_PER_PASS = 4096  # padded tokens per forward pass of the batched final-token reads


@torch.no_grad()
def final_activations(
    model: TransformerBridge,
    sequences: Sequence[Int[Tensor, " _pos"]],
    layer: int,
    neuron: int,
    tokens_per_pass: int = TOKENS_PER_PASS,
) -> Float[Tensor, " seq"]:
    """The neuron's pre-activation at the final token of each of many sequences of any length.

    The sequences are sorted by length and packed into right-padded batches of at most
    ``tokens_per_pass`` padded tokens, a batch closing early once padding would exceed
    :data:`PADDING_SLACK` of its real tokens (plus a few positions): short sequences share a pass,
    and a short one is never padded to a long one's length. Each pass stops at
    ``blocks.{layer}.mlp.hook_pre``. Causal attention makes the padding invisible to the real
    positions.

    Returns:
        One value per sequence, in the order given.
    """
    layer, neuron = check_layer_neuron(model, layer, neuron)
    if not len(sequences):
        return torch.zeros(0)
    lengths = [len(s) for s in sequences]
    order = sorted(range(len(sequences)), key=lambda i: lengths[i])
    hook = f"blocks.{layer}.mlp.hook_pre"
    out = torch.empty(len(sequences))
    start = 0
    while start < len(order):
        stop, real = start + 1, lengths[order[start]]  # grow the batch while it fits
        while stop < len(order):
            longest = lengths[order[stop]]  # sorted: the batch's padded length
            padded = (stop + 1 - start) * longest
            if padded > tokens_per_pass or padded > PADDING_SLACK * (real + longest) + 64:
                break
            real += longest
            stop += 1
        chosen = order[start:stop]
        batch, ends = as_batch(model, [sequences[i] for i in chosen])
        pre = run_until(model, batch, hook)[hook]
        rows = torch.arange(len(chosen), device=pre.device)
        out[chosen] = pre[rows, ends - 1, neuron].float().cpu()
        start = stop
    return out


def suffix_activations(
    model: TransformerBridge, tokens: Int[Tensor, " pos"], layer: int, neuron: int
) -> Float[Tensor, " n_suffix"]:
    """The neuron's pre-activation at the final token for every suffix ``[BOS] + tokens[s:]``.

    Entry ``s - 1`` is for the suffix starting at ``tokens[s]``, ``s = 1..len-1`` (entry 0 is the
    whole prompt). The suffixes run batched (:func:`final_activations`).
    """
    layer, neuron = check_layer_neuron(model, layer, neuron)
    tokens = check_prompt(model, tokens)
    suffixes = [torch.cat([tokens[:1], tokens[s:]]) for s in range(1, len(tokens))]
    return final_activations(model, suffixes, layer, neuron)


class NotFiring(InputError):
    """A prompt on which the neuron does not fire: there is no activation to keep a part of."""


def check_prompt(model: TransformerBridge, tokens) -> Int[Tensor, " pos"]:
    """A prompt: a 1-D tensor ``[BOS, token, ...]`` of at least two tokens."""
    tokens = torch.as_tensor(tokens)
    bos = getattr(model.tokenizer, "bos_token_id", None)
    if tokens.ndim != 1 or len(tokens) < 2 or (bos is not None and int(tokens[0]) != bos):
        raise TokenError("A prompt is a 1-D tensor [BOS, token, ...] of length >= 2.")
    return tokens


def truncate_prompts(
    model: TransformerBridge,
    prompts: Sequence[Prompt | Tensor],
    layer: int,
    neuron: int,
    keep: float = KEEP_FRACTION,
    chunk: int = 8,
) -> tuple[list[Prompt], list[Prompt]]:
    """The shortest suffix of each prompt that keeps ``keep`` of the activation at its final token.

    Every prompt's suffixes ``[BOS] + tokens[s:]`` are checked with the model, shortest first, in
    groups of ``chunk`` suffixes, until one keeps enough: the kept activation is measured, not
    assumed. All prompts advance together: each round is one batched read
    (:func:`final_activations`) of every unfinished prompt's next group (the first round also
    reads the whole prompts), so ten prompts cost the rounds of the longest, not ten times as many.
    Groups do not grow: a suffix costs its length, so reading far past the kept one (as doubling
    groups would) costs more on a CPU than the passes it saves (``benchmarks/RESULTS.md``).

    A prompt whose pre-activation at its final token is not positive has no activation to keep a
    part of: it is not truncated but returned in the second list (with ``full_activation`` set).

    Returns:
        ``(truncated, not_firing)``: the truncated prompts, in the order given (each with its own
        ``activation`` and the whole prompt's ``full_activation``), and the prompts left out.
    """
    layer, neuron = check_layer_neuron(model, layer, neuron)
    if not 0 < keep <= 1:
        raise InputError(f"keep must be in (0, 1], got {keep}.")
    if chunk < 1:
        raise InputError(f"chunk must be >= 1, got {chunk}.")
    items = [Prompt(p.cpu(), float("nan")) if isinstance(p, Tensor) else p for p in prompts]
    tokens = [check_prompt(model, p.tokens).cpu() for p in items]
    full: list[float | None] = [None] * len(items)
    cut: dict[int, tuple[int, float]] = {}  # prompt -> (start s, kept activation)
    done = [0] * len(items)  # suffixes checked so far (shortest first)
    pending = list(range(len(items)))
    while pending:
        sequences, owners = [], []
        for i in pending:
            if full[i] is None:
                sequences.append(tokens[i])
                owners.append((i, 0))
            n = len(tokens[i]) - 1  # suffixes s = n, n - 1, ..., 1 (shortest first)
            for s in range(n - done[i], max(n - done[i] - chunk, 0), -1):
                sequences.append(torch.cat([tokens[i][:1], tokens[i][s:]]))
                owners.append((i, s))
        acts = final_activations(model, sequences, layer, neuron).tolist()
        read: dict[int, list[tuple[int, float]]] = {i: [] for i in pending}
        for (i, s), value in zip(owners, acts):
            if s == 0:
                full[i] = value
            else:
                read[i].append((s, value))
        unfinished = []
        for i in pending:
            if full[i] <= 0:
                continue
            hit = next(((s, v) for s, v in read[i] if v >= keep * full[i]), None)
            done[i] += len(read[i])
            if hit is not None:
                cut[i] = hit
            elif done[i] >= len(tokens[i]) - 1:  # float rounding only: the whole prompt keeps it
                cut[i] = (1, full[i])
            else:
                unfinished.append(i)
        pending = unfinished
    truncated, not_firing = [], []
    for i, prompt in enumerate(items):
        if i not in cut:
            not_firing.append(replace(prompt, full_activation=full[i]))
            continue
        s, kept = cut[i]
        truncated.append(
            Prompt(
                torch.cat([tokens[i][:1], tokens[i][s:]]),
                kept,
                prompt.source,
                prompt.window,
                prompt.end,
                prompt.start + s - 1,
                full[i],
            )
        )
    return truncated, not_firing


def truncate_prompt(
    model: TransformerBridge,
    prompt: Prompt | Tensor,
    layer: int,
    neuron: int,
    keep: float = KEEP_FRACTION,
    chunk: int = 8,
) -> Prompt:
    """:func:`truncate_prompts` for one prompt.

    Raises:
        NotFiring: the pre-activation at the prompt's final token is not positive.
    """
    truncated, not_firing = truncate_prompts(model, [prompt], layer, neuron, keep, chunk)
    if not_firing:
        raise NotFiring(
            f"The neuron's pre-activation at the prompt's final token is "
            f"{not_firing[0].full_activation:.3f} <= 0: truncation keeps a fraction of a positive "
            f"activation (skip such prompts: truncate_prompts returns them apart)."
        )
    return truncated[0]
