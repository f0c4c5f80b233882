"""Attribution to heads. This module splits a neuron's pre-activation exactly into one term per
upstream attention head, and checks it against ablating the heads (step 3, chapter 7)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Mapping, Sequence

import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from context_neurons.checks import (
    InputError,
    check_layer,
    check_layer_neuron,
    check_neurons,
    check_upstream_head,
)
from context_neurons.models.weights import layer_norm_affine
from context_neurons.hooks import run_until
from context_neurons.lookups.prompts import Prompt, as_batch


@dataclass
class NeuronAttribution:
    """Exact split of a neuron's pre-activation with ``ln2`` linearised at its actual scale.

    ``pre = heads.sum((-2, -1)) + embed + pos_embed + mlp.sum(-1) + bias`` at every position.
    """

    layer: int
    neuron: int
    pre: Float[Tensor, "batch pos"]
    heads: Float[Tensor, "batch pos layer head_index"]
    embed: Float[Tensor, "batch pos"]
    pos_embed: Float[Tensor, "batch pos"]
    mlp: Float[Tensor, "batch pos mlp_layer"]  # earlier MLP layers' outputs, bias included
    bias: Float[Tensor, "batch pos"]  # attention output biases, ln2 bias, b_in

    def total(self) -> Float[Tensor, "batch pos"]:
        """The sum of all parts (equals ``pre`` up to float rounding)."""
        return self.heads.sum((-2, -1)) + self.embed + self.pos_embed + self.mlp.sum(-1) + self.bias

    def excluded(self) -> Float[Tensor, "batch pos"]:
        """What is not attributed to heads: embeddings, MLP outputs and biases."""
        return self.embed + self.pos_embed + self.mlp.sum(-1) + self.bias

    def at(self, batch_index: int, position: int) -> "NeuronAttribution":
        """One position, kept as a ``[1, 1]`` batch."""
        sl = (slice(batch_index, batch_index + 1), slice(position, position + 1))
        return NeuronAttribution(
            self.layer,
            self.neuron,
            self.pre[sl],
            self.heads[sl],
            self.embed[sl],
            self.pos_embed[sl],
            self.mlp[sl],
            self.bias[sl],
        )


@dataclass
class _Reader:
    """What the attribution of one layer's neurons reads from the residual stream."""

    layer: int
    neurons: list[int]
    index: Tensor  # the neurons, as a tensor on the model's device
    columns: slice  # their columns among all read vectors
    v: Float[Tensor, "d_model neuron"]  # gamma * W_in[:, j], centred over d_model
    bias: Float[Tensor, " neuron"]  # (sum of b_O up to the layer) . v
    constant: Float[Tensor, " neuron"]  # ln2's beta . W_in[:, j] + b_in[j]


def _readers(model: TransformerBridge, neurons: Mapping[int, Sequence[int]]) -> list[_Reader]:
    """One :class:`_Reader` per layer, shallowest first, columns numbered in that order."""
    readers, start = [], 0
    for layer in sorted(neurons):
        chosen = neurons[layer]
        index = torch.tensor(chosen, device=model.cfg.device)
        block = model.blocks[layer]
        w_in = model.W_in[layer][:, index]  # [d_model, neuron]
        v = layer_norm_affine(block.ln2, model.cfg.d_model, w_in.device)[0][:, None] * w_in
        v = v - v.mean(0, keepdim=True)
        beta = getattr(block.ln2, "b", None)
        constant = model.b_in[layer][index] + (0.0 if beta is None else beta @ w_in)
        b_o = sum(model.blocks[l].attn.b_O for l in range(layer + 1)) @ v
        columns = slice(start, start + len(chosen))
        readers.append(_Reader(layer, chosen, index, columns, v, b_o, constant))
        start = columns.stop
    return readers


@torch.no_grad()
def attribute_layers(
    model: TransformerBridge,
    tokens,
    neurons: Mapping[int, Sequence[int]],
    batch_size: int = 32,
    mean_z: dict[int, Tensor] | None = None,
) -> dict[tuple[int, int], NeuronAttribution]:
    """Attribute neurons of several layers to every upstream head, in one forward pass.

    With ``ln2(x) = gamma * (x - mean(x)) / scale + beta`` and ``scale`` read from
    ``blocks.{layer}.ln2.hook_scale`` (so exact at each position),
    ``pre = sum_c (c - mean(c)) . v / scale + beta . W_in[:, j] + b_in[j]`` over the residual
    components ``c``, with ``v = gamma * W_in[:, j]``. Head ``(l, h)``'s component is
    ``hook_z[l][..., h, :] @ W_O[l, h]``; the centring moves onto ``v``.

    Each batch runs once, up to the deepest layer's ``hook_pre``. Hooks project every component
    onto the read vectors as it is computed (a head's ``hook_z`` onto ``W_O[l, h] @ v``, an MLP's
    output and the embeddings onto ``v``) and keep only those projections, one number per head,
    position and neuron: no activation of the model is cached.

    Args:
        model: the model.
        tokens: a ``[batch, pos]`` tensor, one sequence or a list of sequences (right-padded).
        neurons: ``{layer: [neuron, ...]}``.
        batch_size: sequences per forward pass.
        mean_z: a dict that, when given, receives ``mean_z[layer]`` for every layer of
            ``neurons``: the mean ``hook_z`` of the heads of layers ``0..layer`` over unpadded
            positions (for mean-ablation), from the same forward passes.

    Returns:
        ``{(layer, neuron): NeuronAttribution}`` over ``[batch, pos]``, heads of layers
        ``0..layer``.
    """
    neurons = {
        check_layer(model, l): list(dict.fromkeys(check_neurons(model, n, l)))
        for l, n in neurons.items()
    }
    if not neurons:
        raise InputError("No neurons to attribute: pass {layer: [neuron, ...]}.")
    readers = _readers(model, neurons)
    deepest = readers[-1].layer
    v_all = torch.cat([r.v for r in readers], dim=1)  # [d_model, all neurons]
    first = {l: next(r.columns.start for r in readers if r.layer >= l) for l in range(deepest + 1)}
    after = {
        l: next((r.columns.start for r in readers if r.layer > l), None) for l in range(deepest)
    }
    read_heads = {  # head layer l -> W_O[l] @ v for the neurons of layers >= l
        l: torch.einsum("hed,dn->hen", model.W_O[l], v_all[:, first[l] :])
        for l in range(deepest + 1)
    }
    batch, lengths = as_batch(model, tokens)
    real = (torch.arange(batch.shape[1], device=batch.device)[None] < lengths[:, None]).float()
    z_sum = torch.zeros(deepest + 1, model.cfg.n_heads, model.cfg.d_head, device=batch.device)
    chunks: dict[tuple[int, int], dict[str, list[Tensor]]] = {
        (r.layer, n): {k: [] for k in ("pre", "heads", "embed", "pos", "mlp", "bias")}
        for r in readers
        for n in r.neurons
    }
    for start in range(0, len(batch), batch_size):
        store: dict[str, Tensor] = {}
        rows = real[start : start + batch_size]

        # Each hook stores under the name it was attached by (TransformerBridge reports aliases
        # such as hook_embed or hook_mlp_out by their canonical names).
        def project(name, act):
            store[name] = act @ v_all

        def project_after(name, act, layer):
            store[name] = act @ v_all[:, after[layer] :]

        def heads(name, z, l):
            z_sum[l] += torch.einsum("bphe,bp->he", z, rows)
            store[name] = torch.einsum("bphe,hen->bpnh", z, read_heads[l])

        def keep(name, act):
            store[name] = act

        def attached(name, function, *args):
            return name, lambda act, hook: function(name, act, *args)

        hooks = [attached("hook_embed", project), attached("hook_pos_embed", project)]
        hooks += [attached(f"blocks.{l}.attn.hook_z", heads, l) for l in range(deepest + 1)]
        hooks += [attached(f"blocks.{l}.hook_mlp_out", project_after, l) for l in range(deepest)]
        hooks += [attached(f"blocks.{r.layer}.ln2.hook_scale", keep) for r in readers]
        hooks += [attached(f"blocks.{r.layer}.mlp.hook_pre", keep) for r in readers[:-1]]
        stop = f"blocks.{deepest}.mlp.hook_pre"
        store[stop] = run_until(model, batch[start : start + batch_size], stop, extra_hooks=hooks)[
            stop
        ]
        for r in readers:
            inv = 1.0 / store[f"blocks.{r.layer}.ln2.hook_scale"][..., 0]  # [batch, pos]
            pre = store[f"blocks.{r.layer}.mlp.hook_pre"][..., r.index]
            for k, neuron in enumerate(r.neurons):
                col = r.columns.start + k
                parts = chunks[(r.layer, neuron)]
                parts["pre"].append(pre[..., k])
                parts["heads"].append(
                    torch.stack(
                        [
                            store[f"blocks.{l}.attn.hook_z"][:, :, col - first[l]]
                            for l in range(r.layer + 1)
                        ],
                        dim=2,
                    )
                    * inv[..., None, None]
                )
                parts["embed"].append(store["hook_embed"][..., col] * inv)
                parts["pos"].append(store["hook_pos_embed"][..., col] * inv)
                mlp = [
                    store[f"blocks.{l}.hook_mlp_out"][..., col - after[l]] for l in range(r.layer)
                ]
                parts["mlp"].append(
                    torch.stack(mlp, -1) * inv[..., None] if mlp else inv[..., None][..., :0]
                )
                parts["bias"].append(r.bias[k] * inv + r.constant[k])
    if mean_z is not None:
        for r in readers:
            mean_z[r.layer] = z_sum[: r.layer + 1] / real.sum()
    return {
        key: NeuronAttribution(
            key[0],
            key[1],
            *(torch.cat(parts[k], dim=0) for k in ("pre", "heads", "embed", "pos", "mlp", "bias")),
        )
        for key, parts in chunks.items()
    }


def attribute_neurons(
    model: TransformerBridge,
    tokens,
    layer: int,
    neurons: Sequence[int],
    batch_size: int = 32,
    mean_z: dict[int, Tensor] | None = None,
) -> list[NeuronAttribution]:
    """:func:`attribute_layers` for neurons of one layer, as a list in the order given.

    Raises:
        OutOfRangeError: for a layer or neuron outside the model.
    """
    layer = check_layer(model, layer)
    neurons = check_neurons(model, neurons, layer)
    found = attribute_layers(model, tokens, {layer: neurons}, batch_size, mean_z)
    return [found[(layer, n)] for n in neurons]


def attribute_neuron(
    model: TransformerBridge, tokens, layer: int, neuron: int, batch_size: int = 32
) -> NeuronAttribution:
    """:func:`attribute_neurons` for one neuron."""
    return attribute_neurons(model, tokens, layer, [neuron], batch_size)[0]


@torch.no_grad()
def mean_head_outputs(
    model: TransformerBridge, tokens, max_layer: int, batch_size: int = 32
) -> Float[Tensor, "layer head_index d_head"]:
    """Mean ``hook_z`` of every head of layers ``0..max_layer`` over all (unpadded) positions."""
    max_layer = check_layer(model, max_layer)
    batch, lengths = as_batch(model, tokens)
    names = [f"blocks.{l}.attn.hook_z" for l in range(max_layer + 1)]
    real = (torch.arange(batch.shape[1], device=batch.device)[None] < lengths[:, None]).float()
    total = 0.0
    for start in range(0, len(batch), batch_size):
        cache = run_until(model, batch[start : start + batch_size], names[-1], names)
        z = torch.stack([cache[name] for name in names], dim=0)
        total = total + torch.einsum("lbphe,bp->lhe", z, real[start : start + batch_size])
    return total / real.sum()


def _ablate_rows(z, hook, targets: list[tuple[int, int]], n_prompts: int, mean_z: Tensor | None):
    """Ablate head ``h`` of this layer in the ``k``-th block of ``n_prompts`` rows, per target."""
    layer = hook.layer()
    for k, head in targets:
        rows = slice(k * n_prompts, (k + 1) * n_prompts)
        z[rows, :, head] = 0.0 if mean_z is None else mean_z[layer, head]
    return z


@torch.no_grad()
def ablation_drops(
    model: TransformerBridge,
    prompts: Sequence[Prompt | Tensor],
    layer: int,
    neuron: int,
    heads: Sequence[tuple[int, int]] | None = None,
    mode: str = "mean",
    mean_z: Float[Tensor, "layer head_index d_head"] | None = None,
    batch_size: int = 64,
) -> Float[Tensor, "prompt head"]:
    """Drop of the pre-activation at each prompt's final token when one head is ablated.

    The ablations run batched: the prompts are tiled once per ablated head, each copy with its own
    head ablated, about ``batch_size`` sequences per forward pass, and every pass stops at the
    neuron's layer. Ablating every head of a 12-layer model is then a dozen passes, not 144.

    Args:
        model: the model.
        prompts: prompts (their final token is where the neuron is read).
        layer, neuron: the neuron.
        heads: ``(layer, head)`` pairs (default: every head of layers ``0..layer``).
        mode: ``"zero"`` (set ``hook_z`` to zero) or ``"mean"`` (to ``mean_z``).
        mean_z: per-head mean ``hook_z`` for ``"mean"`` (default: over the prompts themselves).
        batch_size: sequences per forward pass (at least one tiled copy of the prompts).

    Returns:
        ``clean - ablated`` pre-activation, ``[prompt, head]`` in the order of ``heads``.
    """
    layer, neuron = check_layer_neuron(model, layer, neuron)
    if mode not in ("zero", "mean"):
        raise InputError(f"mode must be 'zero' or 'mean', got {mode!r}.")
    if heads is None:
        heads = [(l, h) for l in range(layer + 1) for h in range(model.cfg.n_heads)]
    heads = [check_upstream_head(model, l, h, layer) for l, h in heads]
    seqs = [p.tokens if isinstance(p, Prompt) else torch.as_tensor(p) for p in prompts]
    batch, lengths = as_batch(model, seqs)
    if mode == "mean" and mean_z is None:
        mean_z = mean_head_outputs(model, batch, layer)
    stop = f"blocks.{layer}.mlp.hook_pre"
    n_prompts = len(batch)

    def final_pre(tokens: Tensor, ends: Tensor, hooks) -> Tensor:
        pre = run_until(model, tokens, stop, extra_hooks=hooks)[stop]
        return pre[torch.arange(len(tokens), device=pre.device), ends - 1, neuron]

    clean = final_pre(batch, lengths, [])
    per_pass = max(1, batch_size // n_prompts)
    drops = []
    for start in range(0, len(heads), per_pass):
        chosen = heads[start : start + per_pass]
        hooks = []
        for l in sorted({l for l, _ in chosen}):
            targets = [(k, h) for k, (l_k, h) in enumerate(chosen) if l_k == l]
            hook = functools.partial(
                _ablate_rows,
                targets=targets,
                n_prompts=n_prompts,
                mean_z=None if mode == "zero" else mean_z,
            )
            hooks.append((f"blocks.{l}.attn.hook_z", hook))
        ablated = final_pre(batch.repeat(len(chosen), 1), lengths.repeat(len(chosen)), hooks)
        drops.append(clean[None] - ablated.view(len(chosen), n_prompts))
    return torch.cat(drops).T


@torch.no_grad()
def attended_tokens(
    model: TransformerBridge, tokens: Int[Tensor, " pos"], layer: int, head: int, k: int = 5
) -> list[tuple[int, str, float]]:
    """The ``k`` source tokens a head attends to most from the final token.

    Returns:
        ``(position, token, weight)`` triples, highest weight first.
    """
    layer, head = check_upstream_head(model, layer, head, model.cfg.n_layers - 1)
    batch, _ = as_batch(model, tokens)
    name = f"blocks.{layer}.attn.hook_pattern"
    pattern = run_until(model, batch, name)[name][0, head, -1]
    top = torch.topk(pattern, min(k, len(pattern)))
    return [
        (int(i), model.tokenizer.decode([int(batch[0, i])]), float(w))
        for w, i in zip(top.values, top.indices)
    ]


def head_name(layer: int, head: int) -> str:
    return f"L{layer}H{head}"


def rank_heads(
    attribution: Float[Tensor, "prompt layer head_index"], k: int = 3
) -> list[tuple[int, int, float]]:
    """The ``k`` heads with the largest mean attribution over prompts: ``(layer, head, mean)``."""
    mean = attribution.mean(0)
    flat = mean.flatten()
    order = torch.argsort(flat, descending=True, stable=True)[:k]
    n_heads = mean.shape[1]
    return [(int(i) // n_heads, int(i) % n_heads, float(flat[i])) for i in order]
