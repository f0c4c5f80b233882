"""Context look-ups. This module implements METHOD.md section 7 (chapter 7), after Neo, Cohen and
Barez (2024), "Interpreting Context Look-ups in Transformers".

A *context look-up* is an attention head that recognises a context and switches on a later MLP
neuron that predicts one token in that context. The method has four steps:

1. **Token-predicting neurons** (:func:`token_prediction_scores`), in the later layers only
   (:func:`later_layers`: the later half by default, as the paper kept the last layers of its
   models). The direct effect of neuron
   ``j`` of layer ``l`` on the logits is its output weight read through the final LayerNorm and the
   unembedding. TransformerLens's ``fold_ln`` folds ``ln_final``'s weight (and bias) into ``W_U``/
   ``b_U`` and leaves a bare normalisation ``(x - mean(x)) / scale``; we linearise it with the
   scale frozen at the typical value on real text (:func:`typical_final_scale`), so the logit
   effect of one unit of activation is ``(W_out[l][j] - mean) @ W_U / scale`` (with an unfolded
   ``ln_final`` its weight multiplies first). The score is ``(max - mean) / std`` of that vector
   over the vocabulary (scale-free: the frozen scale only sets the units of the logit column); we
   also report the gap between the top two tokens in the same units.
2. **Activating prompts** (:func:`top_activating_prompts`, :func:`truncate_prompt`). Batched
   forward passes over windows of the domain texts (:func:`lookup_windows`), reading
   ``blocks.{l}.mlp.hook_pre``; the
   best prompt of each window ends at its most activating token and is truncated to its shortest
   suffix (after ``<|endoftext|>``) that keeps at least 80% of the pre-activation at that token,
   checked by running the suffixes through the model, shortest first.
3. **Responsible heads** (:func:`attribute_neuron`). The pre-activation is linear in the residual
   stream once ``ln2``'s scale is fixed at its *actual* value at that position, so it splits
   exactly into one term per upstream head (``hook_z @ W_O`` dotted with the centred, ``ln2``-
   weighted ``W_in[:, j]``, over the scale) plus the parts we do not attribute: token and position
   embeddings, earlier MLP outputs (with their biases) and biases (attention output biases,
   ``ln2``'s bias and ``b_in``). The sum is the pre-activation to float precision (tested).
   :func:`ablation_drops` checks the direct attribution against zero- or mean-ablating each head.
4. **Explanations** (:mod:`context_neurons.explainers`). When is a head active? An explainer reads
   prompts where the head's attribution is high and prompts where it is not and writes an
   explanation; the explanation is scored as a zero-shot classifier of prompts from held-out
   documents (:func:`explanation_dataset`, split by a hash of the document, :func:`is_held_out`;
   :func:`evaluate_explainer`).

:func:`examine_neuron` runs all four steps for one neuron; :func:`reproduce_section` adds the
``lookups`` row to ``python -m context_neurons reproduce``.
"""

from __future__ import annotations

import functools
import hashlib
import operator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Sequence, SupportsIndex

import pandas as pd
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor
from transformer_lens import HookedTransformer

from context_neurons.circuit import IdentityCache
from context_neurons.data import DOMAINS, DataError, domain_documents, pad_windows
from context_neurons.models import EOT_ID

if TYPE_CHECKING:
    from context_neurons.explainers import Explainer, Explanation
    from context_neurons.reproduce import ReproContext, Row

KEEP_FRACTION = 0.8  # truncation keeps at least this fraction of the activation (the paper's 80%)
ACTIVE_FRACTION = 0.25  # a head is "active" at >= this fraction of its attribution on top prompts
HELD_OUT_FRACTION = 0.5  # documents whose id hashes below this fraction are held out


class LookupIndexError(ValueError):
    """A layer, neuron, head or position index out of range; the message gives the valid range."""


# ----------------------------------------------------------------------------------------------
# Index checks
# ----------------------------------------------------------------------------------------------


def _index(value, what: str) -> int:
    """``value`` as a Python int (ints, NumPy integers, 0-d integer tensors); floats are refused."""
    try:
        return operator.index(value)
    except TypeError:
        raise LookupIndexError(
            f"{what} must be an integer, got {value!r} ({type(value).__name__}): "
            f"pass an int (round or cast it yourself if that is what you mean)."
        ) from None


def check_layer(model: HookedTransformer, layer: SupportsIndex, min_layer: int = 0) -> int:
    """Validate an MLP layer index (``min_layer`` excludes early layers where asked)."""
    n_layers = model.cfg.n_layers
    layer = _index(layer, "Layer")
    if not min_layer <= layer < n_layers:
        raise LookupIndexError(
            f"Layer {layer} out of range: this model's MLP layers are {min_layer}..{n_layers - 1}."
        )
    return layer


def check_neuron(
    model: HookedTransformer, layer: SupportsIndex, neuron: SupportsIndex
) -> tuple[int, int]:
    """Validate a (layer, neuron) pair."""
    layer = check_layer(model, layer)
    neuron = _index(neuron, "Neuron")
    d_mlp = model.cfg.d_mlp
    if not 0 <= neuron < d_mlp:
        raise LookupIndexError(
            f"Neuron {neuron} out of range: layer {layer}'s MLP has neurons 0..{d_mlp - 1}."
        )
    return layer, neuron


def check_head(
    model: HookedTransformer, layer: SupportsIndex, head: SupportsIndex, max_layer: int
) -> tuple[int, int]:
    """Validate a (layer, head) pair upstream of (or in) ``max_layer``."""
    layer, head = _index(layer, "Head layer"), _index(head, "Head")
    if not 0 <= layer <= max_layer:
        raise LookupIndexError(
            f"Head layer {layer} out of range: heads upstream of the neuron are in layers "
            f"0..{max_layer}."
        )
    if not 0 <= head < model.cfg.n_heads:
        raise LookupIndexError(f"Head {head} out of range: heads are 0..{model.cfg.n_heads - 1}.")
    return layer, head


def _as_batch(model: HookedTransformer, tokens) -> tuple[Int[Tensor, "batch pos"], Tensor]:
    """A padded batch and lengths from a 1-D tensor, a 2-D tensor or a list of 1-D tensors."""
    if isinstance(tokens, Tensor) and tokens.ndim == 1:
        tokens = [tokens]
    if isinstance(tokens, Tensor):
        batch = tokens
        lengths = torch.full((tokens.shape[0],), tokens.shape[1], device=tokens.device)
    else:
        batch, lengths = pad_windows([torch.as_tensor(t) for t in tokens])
    if batch.numel() == 0 or batch.shape[1] == 0:
        raise LookupIndexError("Expected at least one non-empty token sequence.")
    if batch.shape[1] > model.cfg.n_ctx:
        raise LookupIndexError(f"{batch.shape[1]} tokens exceed the context of {model.cfg.n_ctx}.")
    if int(batch.min()) < 0 or int(batch.max()) >= model.cfg.d_vocab:
        raise LookupIndexError(f"Token ids must be in 0..{model.cfg.d_vocab - 1}.")
    return batch.to(model.cfg.device), lengths.to(model.cfg.device)


# ----------------------------------------------------------------------------------------------
# 1. Token-predicting neurons
# ----------------------------------------------------------------------------------------------


def _ln_weight(ln_module, d_model: int, device) -> Float[Tensor, "d_model"]:
    """LayerNorm weight (ones for TransformerLens's folded ``LayerNormPre``)."""
    weight = getattr(ln_module, "w", None)
    return torch.ones(d_model, device=device) if weight is None else weight.detach()


@torch.no_grad()
def typical_final_scale(
    model: HookedTransformer, tokens: Int[Tensor, "pos"] | None = None
) -> float:
    """Median ``ln_final`` scale ``sqrt(var(x) + eps)`` of the final residual stream on real text.

    Args:
        model: the model.
        tokens: a text (``[BOS, ...]``); default: the first 256 tokens of the calibration text.

    Returns:
        The median scale over positions 1.. (the BOS position is an outlier and is skipped).
    """
    if tokens is None:
        from context_neurons.data import calibration_text, tokenize_text

        tokens = tokenize_text(model.tokenizer, calibration_text().text, truncate=True)[:256]
    resid = model(tokens.to(model.cfg.device)[None], stop_at_layer=model.cfg.n_layers)[0]
    centred = resid - resid.mean(-1, keepdim=True)
    scale = torch.sqrt(centred.pow(2).mean(-1) + model.cfg.eps)
    return float(scale[1:].median()) if len(scale) > 1 else float(scale[0])


@torch.no_grad()
def neuron_logit_effect(
    model: HookedTransformer, layer: int, neuron: int, final_scale: float = 1.0
) -> Float[Tensor, "d_vocab"]:
    """Direct effect on the logits of one unit of activation of a neuron (ln_final linearised).

    ``(w_out - mean(w_out)) * gamma_final @ W_U / final_scale``, where ``gamma_final`` is
    ``ln_final``'s weight (ones when TransformerLens folded it into ``W_U``).
    """
    layer, neuron = check_neuron(model, layer, neuron)
    index = torch.tensor([neuron], device=model.cfg.device)
    return _logit_effects(model, layer, index, final_scale)[0]


def _logit_effects(model, layer, neurons, final_scale) -> Float[Tensor, "n d_vocab"]:
    w_out = model.W_out[layer][neurons.to(model.cfg.device)]
    w_out = w_out - w_out.mean(-1, keepdim=True)
    gamma = _ln_weight(model.ln_final, model.cfg.d_model, w_out.device)
    return (w_out * gamma) @ model.W_U / final_scale


def later_layers(model: HookedTransformer, n_last_layers: SupportsIndex | None = None) -> list[int]:
    """The last ``n_last_layers`` MLP layers (default: the later half, at least one layer).

    Neo et al. score only late layers, where the best neuron of each token concentrates (their
    Figure 3: the last five of GPT-2 Large's 36 layers). The default keeps the later half: layer
    1 of a 2-layer model, layers 6..11 of GPT-2 Small.
    """
    n_layers = model.cfg.n_layers
    n_last = (
        max(1, n_layers // 2) if n_last_layers is None else _index(n_last_layers, "n_last_layers")
    )
    if not 1 <= n_last <= n_layers:
        raise LookupIndexError(
            f"n_last_layers must be in 1..{n_layers} (this model's layer count), got {n_last}."
        )
    return list(range(n_layers - n_last, n_layers))


@torch.no_grad()
def token_prediction_scores(
    model: HookedTransformer,
    layers: Iterable[int] | None = None,
    final_scale: float | None = None,
    chunk: int = 512,
    n_last_layers: int | None = None,
) -> pd.DataFrame:
    """Score every MLP neuron of ``layers`` by how strongly it promotes one token.

    Args:
        model: the model.
        layers: MLP layers to score (default: :func:`later_layers` with ``n_last_layers``).
        final_scale: the frozen ``ln_final`` scale (default :func:`typical_final_scale`); it sets
            the units of the ``logit`` column only, not the scores.
        chunk: neurons per matrix product (memory: ``chunk * d_vocab`` floats).
        n_last_layers: without ``layers``, score the last this many layers (default: the later
            half of the model, as in :func:`later_layers`).

    Returns:
        One row per neuron: ``layer, neuron, token_id, token`` (its top token), ``score`` (the top
        logit effect minus the mean over the vocabulary, in standard deviations), ``gap`` (top-1
        minus top-2, in standard deviations), ``logit`` (top-1 logit effect per unit activation,
        centred) and ``runner_up`` (the second token).
    """
    if layers is None:
        layers = later_layers(model, n_last_layers)
    elif n_last_layers is not None:
        raise LookupIndexError("Pass either layers or n_last_layers, not both.")
    layers = list(layers)
    if not layers:
        raise LookupIndexError("No layers to score: pass at least one MLP layer index.")
    layers = [check_layer(model, layer) for layer in layers]
    if final_scale is None:
        final_scale = typical_final_scale(model)
    frames = []
    for layer in layers:
        for start in range(0, model.cfg.d_mlp, chunk):
            neurons = torch.arange(
                start, min(start + chunk, model.cfg.d_mlp), device=model.cfg.device
            )
            effect = _logit_effects(model, layer, neurons, final_scale)
            mean, std = effect.mean(-1), effect.std(-1)
            top = effect.topk(2, dim=-1)
            frames.append(
                pd.DataFrame(
                    {
                        "layer": layer,
                        "neuron": neurons.cpu().numpy(),
                        "token_id": top.indices[:, 0].cpu().numpy(),
                        "score": ((top.values[:, 0] - mean) / std).double().cpu().numpy(),
                        "gap": ((top.values[:, 0] - top.values[:, 1]) / std).double().cpu().numpy(),
                        "logit": (top.values[:, 0] - mean).double().cpu().numpy(),
                        "runner_up_id": top.indices[:, 1].cpu().numpy(),
                    }
                )
            )
    table = pd.concat(frames, ignore_index=True)
    table.insert(3, "token", [model.tokenizer.decode([int(t)]) for t in table["token_id"]])
    table["runner_up"] = [model.tokenizer.decode([int(t)]) for t in table.pop("runner_up_id")]
    return table


def best_neurons(scores: pd.DataFrame, per_layer: int = 5) -> pd.DataFrame:
    """The ``per_layer`` highest-scoring neurons of each layer, best first within a layer."""
    ranked = scores.sort_values(["layer", "score"], ascending=[True, False], kind="stable")
    return ranked.groupby("layer", sort=True).head(per_layer).reset_index(drop=True)


def best_neuron_per_token(scores: pd.DataFrame) -> pd.DataFrame:
    """For each predicted token, its highest-scoring neuron (the paper's Figure 3 population)."""
    ranked = scores.sort_values("score", ascending=False, kind="stable")
    return ranked.drop_duplicates("token_id").reset_index(drop=True)


def select_neurons(scores: pd.DataFrame, n: int = 4) -> list[tuple[int, int]]:
    """The ``n`` highest-scoring neurons with distinct predicted tokens, as ``(layer, neuron)``."""
    best = best_neuron_per_token(scores).head(n)
    return [(int(r.layer), int(r.neuron)) for r in best.itertuples()]


# ----------------------------------------------------------------------------------------------
# 2. Activating prompts and truncation
# ----------------------------------------------------------------------------------------------


#: Pools of :func:`lookup_windows`, by tokenizer (identity) and arguments.
_WINDOWS = IdentityCache(size=4)


def document_windows(
    tokenizer,
    documents: Iterable,
    n_tokens: int = 64,
    n_windows: int | None = None,
    prefix: str = "",
    skip: set[str] | None = None,
) -> tuple[list[Int[Tensor, "_pos"]], list[str]]:
    """Windows ``[BOS, n_tokens tokens]``: the opening of each document, short ones concatenated.

    Args:
        tokenizer: GPT-2's tokenizer.
        documents: :class:`~context_neurons.data.Document` objects (offline corpora or
            :func:`~context_neurons.data.openwebtext_documents` online).
        n_tokens: tokens per window after ``<|endoftext|>``.
        n_windows: stop after this many windows.
        prefix: prepended to each label (``corpus:id``).
        skip: names ``corpus:id`` of documents to leave out; the names used are added to it
            (an OpenWebText stand-in ``openwebtext~domain`` counts as ``openwebtext``, so one
            document does not stand in for two domains).

    Returns:
        The windows and their labels.
    """
    if n_tokens < 1:
        raise DataError(f"n_tokens must be positive, got {n_tokens}.")
    skip = set() if skip is None else skip
    windows: list[Tensor] = []
    labels: list[str] = []
    pending: list[int] = []
    pending_label = ""
    for doc in documents:
        if n_windows is not None and len(windows) >= n_windows:
            break
        name = f"{doc.corpus}:{doc.id}"
        key = f"{doc.corpus.split('~', 1)[0]}:{doc.id}"
        if key in skip:
            continue
        skip.add(key)
        ids = tokenizer.encode(doc.text, add_special_tokens=False)
        if len(ids) < n_tokens:
            pending += ([EOT_ID] if pending else []) + ids
            pending_label = pending_label or name + "+"
            if len(pending) < n_tokens:
                continue
            ids, name, pending, pending_label = pending, pending_label, [], ""
        windows.append(torch.tensor([EOT_ID, *ids[:n_tokens]]))
        labels.append(prefix + name)
    return windows, labels


def lookup_windows(
    tokenizer,
    domains: Sequence[str] | None = None,
    per_domain: int = 48,
    n_tokens: int = 64,
) -> tuple[list[Int[Tensor, "_pos"]], list[str]]:
    """Windows ``[BOS, n_tokens tokens]`` from every domain of :data:`~context_neurons.data.DOMAINS`
    (cached).

    Each domain gives up to ``per_domain`` windows, the opening ``n_tokens`` tokens of as many
    documents of :func:`~context_neurons.data.domain_documents` (``interleave=True``: alternately
    from the domain's corpora; online without the corpora, keyword-selected OpenWebText stand-ins);
    documents shorter than a window are concatenated (separated by ``<|endoftext|>``). A document
    used by one domain is not reused by another (several domains share corpora). Short windows of
    many documents give more varied prompts than long windows of few, which is what explaining a
    head needs.

    Returns:
        The windows and their labels ``domain|corpus:id``.
    """
    domains = tuple(DOMAINS) if domains is None else tuple(domains)
    unknown = [d for d in domains if d not in DOMAINS]
    if unknown:
        raise DataError(f"Unknown domain(s) {unknown}: choose from {list(DOMAINS)}.")
    if per_domain < 1:
        raise DataError(f"per_domain must be positive, got {per_domain}.")

    def build() -> tuple[list[Tensor], list[str]]:
        used: set[str] = set()
        windows: list[Tensor] = []
        labels: list[str] = []
        for domain in domains:
            w, lab = document_windows(
                tokenizer,
                domain_documents(domain, interleave=True),
                n_tokens,
                per_domain,
                prefix=f"{domain}|",
                skip=used,
            )
            windows += w
            labels += lab
        if not windows:
            raise DataError("No windows: none of the domains gave a document.")
        return windows, labels

    return _WINDOWS.get((tokenizer,), (domains, per_domain, n_tokens), build)


def document_of(label: str) -> str:
    """The document a window label names: ``domain|corpus:id[+][#k]`` -> ``corpus:id``."""
    name = label.split("|", 1)[-1].rsplit("#", 1)[0].rstrip("+")
    corpus, sep, doc_id = name.partition(":")
    return f"{corpus.split('~', 1)[0]}{sep}{doc_id}"


def is_held_out(document: str, fraction: float = HELD_OUT_FRACTION) -> bool:
    """Whether a document is in the held-out split: its SHA-256 hash, read as a number in [0, 1),
    is below ``fraction``. Deterministic (unlike Python's ``hash``) and independent of the pool:
    a document lands in the same split whatever else is in the pool."""
    if not 0 < fraction < 1:
        raise ValueError(f"The held-out fraction must be in (0, 1), got {fraction}.")
    digest = hashlib.sha256(document.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


class _StopForward(Exception):
    """Raised by a hook to end a forward pass once the neuron's pre-activation is read."""


def _run_to_pre(
    model: HookedTransformer,
    batch: Int[Tensor, "batch pos"],
    layer: int,
    names: Iterable[str] = (),
    extra_hooks: Sequence[tuple[str, Any]] = (),
) -> dict[str, Tensor]:
    """Forward pass up to ``blocks.{layer}.mlp.hook_pre``; returns it and the named activations.

    Nothing after the pre-activation is computed (not even the layer's MLP output);
    ``extra_hooks`` (e.g. ablations) run first. The hooks are scoped to this call
    (``run_with_hooks`` removes them, also when the pass is cut short).
    """
    pre_name = f"blocks.{layer}.mlp.hook_pre"
    store: dict[str, Tensor] = {}

    def save(act, hook):
        store[hook.name] = act

    def stop(act, hook):
        store[hook.name] = act
        raise _StopForward

    hooks = [*extra_hooks, *[(name, save) for name in names if name != pre_name], (pre_name, stop)]
    try:
        model.run_with_hooks(batch, fwd_hooks=hooks)
    except _StopForward:
        pass
    return store


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
    neurons = list(neurons) if isinstance(neurons, (list, tuple, Tensor)) else [neurons]
    for neuron in neurons:
        check_neuron(model, layer, neuron)
    batch, lengths = _as_batch(model, tokens)
    index = torch.tensor(neurons, device=batch.device)
    out = [
        _run_to_pre(model, batch[start : start + batch_size], layer)[
            f"blocks.{layer}.mlp.hook_pre"
        ][..., index]
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
    layer, neuron = check_neuron(model, layer, neuron)
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
    layer, neuron = check_neuron(model, layer, neuron)
    tokens = torch.as_tensor(tokens)
    if tokens.ndim != 1 or len(tokens) < 2 or int(tokens[0]) != EOT_ID:
        raise LookupIndexError(
            "A prompt is a 1-D tensor [<|endoftext|>, token, ...] of length >= 2."
        )
    suffixes = [torch.cat([tokens[:1], tokens[s:]]) for s in range(1, len(tokens))]
    acts = neuron_activations(model, suffixes, layer, neuron)[..., 0]
    lengths = torch.tensor([len(s) for s in suffixes], device=acts.device)
    return acts[torch.arange(len(suffixes), device=acts.device), lengths - 1]


def truncate_prompt(
    model: HookedTransformer,
    prompt: Prompt | Tensor,
    layer: int,
    neuron: int,
    keep: float = KEEP_FRACTION,
    chunk: int = 8,
) -> Prompt:
    """The shortest suffix of a prompt that keeps ``keep`` of the activation at its final token.

    Suffixes ``[BOS] + tokens[s:]`` are run through the model shortest first, ``chunk`` at a time,
    until one keeps enough: the kept activation is measured, not assumed, and long prompts cost
    only as much as their answer. The returned prompt's ``activation`` is the suffix's own.
    """
    layer, neuron = check_neuron(model, layer, neuron)
    if not 0 < keep <= 1:
        raise ValueError(f"keep must be in (0, 1], got {keep}.")
    if isinstance(prompt, Tensor):
        prompt = Prompt(prompt.cpu(), float("nan"))
    tokens = prompt.tokens
    if tokens.ndim != 1 or len(tokens) < 2 or int(tokens[0]) != EOT_ID:
        raise LookupIndexError(
            "A prompt is a 1-D tensor [<|endoftext|>, token, ...] of length >= 2."
        )
    full = float(neuron_activations(model, tokens, layer, neuron)[0, -1, 0])
    if full <= 0:
        raise ValueError(
            f"The neuron's pre-activation at the prompt's final token is {full:.3f} <= 0: "
            f"truncation keeps a fraction of a positive activation."
        )
    starts = list(range(len(tokens) - 1, 0, -1))  # shortest suffix first
    for i in range(0, len(starts), chunk):
        group = starts[i : i + chunk]
        suffixes = [torch.cat([tokens[:1], tokens[s:]]) for s in group]
        acts = neuron_activations(model, suffixes, layer, neuron)[..., 0]
        ends = torch.tensor([len(x) - 1 for x in suffixes], device=acts.device)
        last = acts[torch.arange(len(group), device=acts.device), ends]
        ok = torch.nonzero(last >= keep * full).flatten()
        if len(ok):
            s, kept = group[int(ok[0])], float(last[int(ok[0])])
            break
    else:  # unreachable: the whole prompt keeps all of its activation
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


# ----------------------------------------------------------------------------------------------
# 3. Attribution to heads, and ablation
# ----------------------------------------------------------------------------------------------


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


@torch.no_grad()
def attribute_neurons(
    model: HookedTransformer,
    tokens,
    layer: int,
    neurons: Sequence[int],
    batch_size: int = 32,
    mean_z: dict[int, Tensor] | None = None,
) -> list[NeuronAttribution]:
    """Attribute neurons' pre-activations to every upstream attention head, at every position.

    With ``ln2(x) = gamma * (x - mean(x)) / scale + beta`` and ``scale`` read from
    ``blocks.{layer}.ln2.hook_scale`` (so exact at each position),
    ``pre = sum_c (c - mean(c)) . v / scale + beta . W_in[:, j] + b_in[j]`` over the residual
    components ``c``, with ``v = gamma * W_in[:, j]``. Head ``(l, h)``'s component is
    ``hook_z[l][..., h, :] @ W_O[l, h]``; the centring moves onto ``v``. One forward pass serves
    all ``neurons`` (all in ``layer``).

    Args:
        model: the model.
        tokens: a ``[batch, pos]`` tensor, one sequence or a list of sequences (right-padded).
        layer: the neurons' MLP layer.
        neurons: neuron indices.
        batch_size: sequences per forward pass.
        mean_z: a dict that, when given, receives ``mean_z[layer]``: the mean ``hook_z`` of the
            heads of layers ``0..layer`` over unpadded positions (for mean-ablation), from the
            same forward passes.

    Returns:
        One :class:`NeuronAttribution` per neuron over ``[batch, pos]``, heads of layers
        ``0..layer``.
    """
    neurons = [check_neuron(model, layer, n)[1] for n in neurons]
    if not neurons:
        raise LookupIndexError("No neurons to attribute.")
    batch, lengths = _as_batch(model, tokens)
    real = (torch.arange(batch.shape[1], device=batch.device)[None] < lengths[:, None]).float()
    z_sum = 0.0
    block = model.blocks[layer]
    index = torch.tensor(neurons, device=batch.device)
    w_in = model.W_in[layer][:, index]  # [d_model, neuron]
    v = _ln_weight(block.ln2, model.cfg.d_model, batch.device)[:, None] * w_in
    v = v - v.mean(0, keepdim=True)
    read_heads = torch.einsum("lhed,dn->nlhe", model.W_O[: layer + 1], v)
    beta = getattr(block.ln2, "b", None)
    constant = model.b_in[layer][index] + (0.0 if beta is None else beta @ w_in)  # [neuron]
    b_o = sum(model.blocks[l].attn.b_O for l in range(layer + 1)) @ v  # [neuron]
    names = ["hook_embed", "hook_pos_embed", f"blocks.{layer}.ln2.hook_scale"]
    names += [f"blocks.{l}.attn.hook_z" for l in range(layer + 1)]
    names += [f"blocks.{l}.hook_mlp_out" for l in range(layer)]
    parts: dict[str, list[Tensor]] = {
        k: [] for k in ("pre", "heads", "embed", "pos", "mlp", "bias")
    }
    for start in range(0, len(batch), batch_size):
        cache = _run_to_pre(model, batch[start : start + batch_size], layer, names)
        inv = 1.0 / cache[f"blocks.{layer}.ln2.hook_scale"]  # [batch, pos, 1]
        z = torch.stack([cache[f"blocks.{l}.attn.hook_z"] for l in range(layer + 1)], dim=2)
        z_sum = z_sum + torch.einsum("bplhe,bp->lhe", z, real[start : start + batch_size])
        parts["heads"].append(
            torch.einsum("bplhe,nlhe->nbplh", z, read_heads) * inv.permute(2, 0, 1)[..., None, None]
        )
        parts["embed"].append((cache["hook_embed"] @ v * inv).permute(2, 0, 1))
        parts["pos"].append((cache["hook_pos_embed"] @ v * inv).permute(2, 0, 1))
        mlp = [cache[f"blocks.{l}.hook_mlp_out"] @ v * inv for l in range(layer)]
        mlp = torch.stack(mlp, -1) if mlp else (inv * v[0])[..., None][..., :0]
        parts["mlp"].append(mlp.permute(2, 0, 1, 3))
        parts["bias"].append((b_o * inv + constant).permute(2, 0, 1))
        parts["pre"].append(cache[f"blocks.{layer}.mlp.hook_pre"][..., index].permute(2, 0, 1))
    cat = {k: torch.cat(v_, dim=1) for k, v_ in parts.items()}
    if mean_z is not None:
        mean_z[layer] = z_sum / real.sum()
    return [
        NeuronAttribution(
            layer,
            neuron,
            cat["pre"][i],
            cat["heads"][i],
            cat["embed"][i],
            cat["pos"][i],
            cat["mlp"][i],
            cat["bias"][i],
        )
        for i, neuron in enumerate(neurons)
    ]


def attribute_neuron(
    model: HookedTransformer, tokens, layer: int, neuron: int, batch_size: int = 32
) -> NeuronAttribution:
    """:func:`attribute_neurons` for one neuron."""
    return attribute_neurons(model, tokens, layer, [neuron], batch_size)[0]


@torch.no_grad()
def mean_head_outputs(
    model: HookedTransformer, tokens, max_layer: int, batch_size: int = 32
) -> Float[Tensor, "layer head_index d_head"]:
    """Mean ``hook_z`` of every head of layers ``0..max_layer`` over all (unpadded) positions."""
    max_layer = check_layer(model, max_layer)
    batch, lengths = _as_batch(model, tokens)
    names = [f"blocks.{l}.attn.hook_z" for l in range(max_layer + 1)]
    real = (torch.arange(batch.shape[1], device=batch.device)[None] < lengths[:, None]).float()
    total = 0.0
    for start in range(0, len(batch), batch_size):
        cache = _run_to_pre(model, batch[start : start + batch_size], max_layer, names)
        z = torch.stack([cache[name] for name in names], dim=0)
        total = total + torch.einsum("lbphe,bp->lhe", z, real[start : start + batch_size])
    return total / real.sum()


def _ablate_hook(z, hook, head: int, value: Tensor | None):
    z[:, :, head] = 0.0 if value is None else value
    return z


@torch.no_grad()
def ablation_drops(
    model: HookedTransformer,
    prompts: Sequence[Prompt | Tensor],
    layer: int,
    neuron: int,
    heads: Sequence[tuple[int, int]] | None = None,
    mode: str = "mean",
    mean_z: Float[Tensor, "layer head_index d_head"] | None = None,
) -> Float[Tensor, "prompt head"]:
    """Drop of the pre-activation at each prompt's final token when one head is ablated.

    Args:
        model: the model.
        prompts: prompts (their final token is where the neuron is read).
        layer, neuron: the neuron.
        heads: ``(layer, head)`` pairs (default: every head of layers ``0..layer``).
        mode: ``"zero"`` (set ``hook_z`` to zero) or ``"mean"`` (to ``mean_z``).
        mean_z: per-head mean ``hook_z`` for ``"mean"`` (default: over the prompts themselves).

    Returns:
        ``clean - ablated`` pre-activation, ``[prompt, head]`` in the order of ``heads``.
    """
    layer, neuron = check_neuron(model, layer, neuron)
    if mode not in ("zero", "mean"):
        raise ValueError(f"mode must be 'zero' or 'mean', got {mode!r}.")
    if heads is None:
        heads = [(l, h) for l in range(layer + 1) for h in range(model.cfg.n_heads)]
    heads = [check_head(model, l, h, layer) for l, h in heads]
    seqs = [p.tokens if isinstance(p, Prompt) else torch.as_tensor(p) for p in prompts]
    batch, lengths = _as_batch(model, seqs)
    if mode == "mean" and mean_z is None:
        mean_z = mean_head_outputs(model, batch, layer)
    rows = torch.arange(len(batch), device=batch.device)

    def read(fwd_hooks) -> Tensor:
        pre = _run_to_pre(model, batch, layer, extra_hooks=fwd_hooks)[
            f"blocks.{layer}.mlp.hook_pre"
        ]
        return pre[rows, lengths - 1, neuron]

    clean = read([])
    drops = []
    for l, h in heads:
        value = None if mode == "zero" else mean_z[l, h]
        hook = functools.partial(_ablate_hook, head=h, value=value)
        drops.append(clean - read([(f"blocks.{l}.attn.hook_z", hook)]))
    return torch.stack(drops, dim=-1)


@torch.no_grad()
def attended_tokens(
    model: HookedTransformer, tokens: Int[Tensor, "pos"], layer: int, head: int, k: int = 5
) -> list[tuple[int, str, float]]:
    """The ``k`` source tokens a head attends to most from the final token.

    Returns:
        ``(position, token, weight)`` triples, highest weight first.
    """
    check_head(model, layer, head, model.cfg.n_layers - 1)
    batch, _ = _as_batch(model, tokens)
    name = f"blocks.{layer}.attn.hook_pattern"
    pattern = _run_to_pre(model, batch, layer, [name])[name][0, head, -1]
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


# ----------------------------------------------------------------------------------------------
# 4. Explanation data set: when is a head active?
# ----------------------------------------------------------------------------------------------


@dataclass
class HeadActivity:
    """Prompts labelled by whether one head drives the neuron (for explaining and classifying)."""

    layer: int
    neuron: int
    head: tuple[int, int]
    threshold: float
    prompts: list[Prompt]
    attribution: Float[Tensor, "prompt"]
    active: Bool[Tensor, "prompt"]
    train: Bool[Tensor, "prompt"]

    @property
    def base_rate(self) -> float:
        """Fraction of active prompts."""
        return float(self.active.float().mean())

    def split(self, train: bool) -> tuple[list[Prompt], list[bool]]:
        """The training (``train=True``) or held-out prompts, and whether each is active."""
        mask = self.train if train else ~self.train
        idx = torch.nonzero(mask).flatten().tolist()
        active = self.active.tolist()
        return [self.prompts[i] for i in idx], [active[i] for i in idx]


def _train_threshold(
    model: HookedTransformer,
    windows: list[Tensor],
    layer: int,
    neuron: int,
    pre: Float[Tensor, "batch pos"],
    head_attr: Float[Tensor, "batch pos"],
    train_windows: list[int],
    k: int = 10,
) -> float:
    """:data:`ACTIVE_FRACTION` of the head's mean attribution over the neuron's ``k`` most
    activating prompts among the training windows."""
    if not train_windows:
        raise ValueError("No training window: every document hashed into the held-out split.")
    index = torch.tensor(train_windows, device=pre.device)
    top = top_activating_prompts(
        model, [windows[i] for i in train_windows], layer, neuron, k=k, acts=pre[index]
    )
    values = [head_attr[train_windows[p.window], p.end] for p in top]
    return ACTIVE_FRACTION * float(torch.stack(values).mean())


def explanation_dataset(
    model: HookedTransformer,
    windows: list[Int[Tensor, "_pos"]],
    layer: int,
    neuron: int,
    head: tuple[int, int],
    attribution: NeuronAttribution | None = None,
    threshold: float | None = None,
    every: int = 8,
    labels: list[str] | None = None,
    held_out_fraction: float = HELD_OUT_FRACTION,
) -> HeadActivity:
    """Prompts ``window[: p + 1]`` at every ``every``-th position, labelled active or not.

    A prompt is *active* for the head when the head's direct attribution to the neuron at its final
    token is at least ``threshold``; the default threshold is :data:`ACTIVE_FRACTION` of the head's
    mean attribution over the neuron's 10 most activating *training* prompts, so "active" means
    "doing what it does when the neuron fires" and nothing about the held-out prompts is used.

    The split is by document (:func:`document_of` of each window's label, so all prompts of one
    document stay together): a document is held out when its hash says so (:func:`is_held_out`,
    about ``held_out_fraction`` of the documents, deterministic). Held-out prompts never share
    text with training prompts. Without ``labels`` each window is its own document.
    """
    layer, neuron = check_neuron(model, layer, neuron)
    head = check_head(model, head[0], head[1], layer)
    if every < 1:
        raise ValueError(f"every must be >= 1, got {every}.")
    if labels is not None and len(labels) != len(windows):
        raise ValueError(f"{len(labels)} labels for {len(windows)} windows: pass one per window.")
    if attribution is None:
        attribution = attribute_neuron(model, windows, layer, neuron)
    head_attr = attribution.heads[..., head[0], head[1]]  # [batch, pos]
    names = (
        [document_of(label) for label in labels]
        if labels
        else [str(w) for w in range(len(windows))]
    )
    held_out = [is_held_out(name, held_out_fraction) for name in names]
    if threshold is None:
        train_windows = [w for w, out in enumerate(held_out) if not out]
        threshold = _train_threshold(
            model, windows, layer, neuron, attribution.pre, head_attr, train_windows
        )
    # Every prompt (w, p) with p = every, 2 every, ... inside window w, in window-major order.
    device = head_attr.device
    lengths = torch.tensor([len(window) for window in windows], device=device)
    positions = torch.arange(every, head_attr.shape[1], every, device=device)
    w_index, p_index = torch.nonzero(positions[None] < lengths[:, None], as_tuple=True)
    p_index = positions[p_index]
    values = head_attr[w_index, p_index].cpu()
    pre = attribution.pre[w_index, p_index].tolist()
    w_list, p_list = w_index.tolist(), p_index.tolist()
    cpu_windows = [window.cpu() for window in windows]
    prompts = [
        Prompt(cpu_windows[w][: p + 1], a, labels[w] if labels else str(w), w, p)
        for w, p, a in zip(w_list, p_list, pre)
    ]
    train = torch.tensor([not held_out[w] for w in w_list], dtype=torch.bool)
    return HeadActivity(
        layer, neuron, head, float(threshold), prompts, values, values >= threshold, train
    )


def evaluate_explainer(explainer: "Explainer", activity: HeadActivity, tokenizer) -> dict[str, Any]:
    """Explain on the training prompts; classify the held-out prompts with the explanation alone.

    Returns:
        ``explanation`` (an :class:`~context_neurons.explainers.Explanation`), ``accuracy``,
        ``balanced_accuracy``, ``chance`` (the majority-class accuracy on held-out prompts),
        ``base_rate`` (fraction active on held-out prompts) and ``n_test``.
    """
    from context_neurons.explainers import NoExplanation, examples_from_prompts

    train_prompts, train_labels = activity.split(train=True)
    test_prompts, test_labels = activity.split(train=False)
    if not any(train_labels) or all(train_labels):
        raise NoExplanation(
            "The training prompts are all active or all inactive: nothing to explain "
            "(use more windows, or a lower threshold)."
        )
    if not test_labels:
        raise NoExplanation("No held-out prompt to evaluate on: use more windows.")
    train = examples_from_prompts(train_prompts, tokenizer)
    test = examples_from_prompts(test_prompts, tokenizer)
    explanation = explainer.explain(
        [e for e, a in zip(train, train_labels) if a],
        [e for e, a in zip(train, train_labels) if not a],
    )
    predicted = torch.tensor(explainer.predict(explanation, test), dtype=torch.bool)
    truth = torch.tensor(test_labels, dtype=torch.bool)
    accuracy = float((predicted == truth).float().mean())
    tpr = float(predicted[truth].float().mean()) if truth.any() else float("nan")
    tnr = float((~predicted[~truth]).float().mean()) if (~truth).any() else float("nan")
    base_rate = float(truth.float().mean())
    return {
        "explanation": explanation,
        "accuracy": accuracy,
        "balanced_accuracy": (tpr + tnr) / 2,
        "chance": max(base_rate, 1 - base_rate),
        "base_rate": base_rate,
        "n_test": len(test_labels),
    }


# ----------------------------------------------------------------------------------------------
# All steps for one neuron
# ----------------------------------------------------------------------------------------------


def _final_positions(prompts: Sequence[Prompt], device) -> tuple[Tensor, Tensor]:
    """Row indices and final-token positions of right-padded prompts, on ``device``."""
    rows = torch.arange(len(prompts), device=device)
    ends = torch.tensor([len(p.tokens) - 1 for p in prompts], device=device)
    return rows, ends


@dataclass
class LookupPool:
    """A prompt pool scanned once: windows, per-neuron attributions, per-layer mean ``hook_z``."""

    windows: list[Int[Tensor, "_pos"]]
    labels: list[str]
    attributions: dict[tuple[int, int], NeuronAttribution] = field(default_factory=dict)
    mean_z: dict[int, Float[Tensor, "layer head_index d_head"]] = field(default_factory=dict)


def scan_pool(
    model: HookedTransformer,
    windows: list[Int[Tensor, "_pos"]],
    labels: list[str],
    neurons: Sequence[tuple[int, int]],
    pool: LookupPool | None = None,
) -> LookupPool:
    """Attribute ``(layer, neuron)`` pairs over the windows, one forward pass per layer."""
    pool = pool or LookupPool(windows, labels)
    by_layer: dict[int, list[int]] = {}
    for layer, neuron in neurons:
        layer, neuron = check_neuron(model, layer, neuron)
        if (layer, neuron) not in pool.attributions:
            by_layer.setdefault(layer, []).append(neuron)
    for layer, layer_neurons in sorted(by_layer.items()):
        for attribution in attribute_neurons(
            model, pool.windows, layer, layer_neurons, mean_z=pool.mean_z
        ):
            pool.attributions[(layer, attribution.neuron)] = attribution
    return pool


@dataclass
class NeuronLookup:
    """What :func:`examine_neuron` found for one token-predicting neuron."""

    layer: int
    neuron: int
    token: str
    score: float
    prompts: list[Prompt]  # truncated top-activating prompts
    head_attribution: Float[Tensor, "prompt layer head_index"]  # at the prompts' final tokens
    excluded: Float[Tensor, "prompt"]  # embeddings, MLP outputs and biases
    pre: Float[Tensor, "prompt"]  # the pre-activation at the prompts' final tokens
    ablation: Float[Tensor, "prompt layer head_index"]  # mean-ablation drops
    top_heads: list[tuple[int, int, float]]
    activity: HeadActivity
    evaluation: dict[str, Any] = field(default_factory=dict)
    prompt_attribution: NeuronAttribution | None = None  # of the truncated prompts, all positions

    @property
    def explanation(self) -> "Explanation | None":
        """The top head's explanation (``None`` when none could be written: see ``evaluation``)."""
        return self.evaluation.get("explanation")

    def contributions(self) -> dict[str, float]:
        """Mean contributions to the pre-activation at the prompts' final tokens, by part."""
        attr = self.prompt_attribution
        rows, ends = _final_positions(self.prompts, attr.pre.device)
        heads = attr.heads[rows, ends]  # [prompt, layer, head]
        layer, head, _ = self.top_heads[0]
        top = heads[:, layer, head]
        return {
            "top head": float(top.mean()),
            "other heads": float((heads.sum((-2, -1)) - top).mean()),
            "embeddings": float((attr.embed + attr.pos_embed)[rows, ends].mean()),
            "MLP outputs": float(attr.mlp.sum(-1)[rows, ends].mean()),
            "biases": float(attr.bias[rows, ends].mean()),
            "pre-activation": float(attr.pre[rows, ends].mean()),
        }

    def summary(self) -> dict[str, Any]:
        """The row reported by :func:`reproduce_section`."""
        return {
            "layer": self.layer,
            "neuron": self.neuron,
            "token": self.token,
            "top_heads": [head_name(l, h) for l, h, _ in self.top_heads],
            "explanation_accuracy": round(self.evaluation["accuracy"], 3),
            "balanced_accuracy": round(self.evaluation["balanced_accuracy"], 3),
            "chance": round(self.evaluation["chance"], 3),
            "explanation": (
                self.explanation.tokens[:8]
                if self.explanation
                else self.evaluation.get("error", "")
            ),
        }


def examine_neuron(
    model: HookedTransformer,
    layer: int,
    neuron: int,
    pool: LookupPool,
    explainer: "Explainer | None" = None,
    n_prompts: int = 10,
    n_heads: int = 3,
    scores: pd.DataFrame | None = None,
) -> NeuronLookup:
    """Run the four steps for one neuron: prompts, truncation, heads (attribution and ablation),
    and an explanation of the top head evaluated on held-out prompts.

    Args:
        model: the model.
        layer, neuron: the neuron.
        pool: the prompt pool (from :func:`scan_pool`; the neuron is scanned if missing).
        explainer: default the offline explainer (deterministic; pass
            ``get_explainer("auto")`` to use an LLM when its key is set).
        n_prompts: top-activating prompts to truncate and attribute.
        n_heads: heads reported.
        scores: a :func:`token_prediction_scores` table, for the neuron's score (else computed).
    """
    from context_neurons.explainers import NoExplanation, OfflineExplainer

    layer, neuron = check_neuron(model, layer, neuron)
    if scores is not None and ((scores.layer == layer) & (scores.neuron == neuron)).any():
        row = scores[(scores.layer == layer) & (scores.neuron == neuron)].iloc[0]
        token, score = str(row.token), float(row.score)
    else:
        effect = neuron_logit_effect(model, layer, neuron)
        token = model.tokenizer.decode([int(effect.argmax())])
        score = float((effect.max() - effect.mean()) / effect.std())
    scan_pool(model, pool.windows, pool.labels, [(layer, neuron)], pool)
    scanned = pool.attributions[(layer, neuron)]
    top = top_activating_prompts(
        model, pool.windows, layer, neuron, k=n_prompts, labels=pool.labels, acts=scanned.pre
    )
    top = [p for p in top if p.activation > 0]
    if not top:
        raise ValueError(f"Neuron {layer}.{neuron} never has a positive pre-activation here.")
    prompts = [truncate_prompt(model, p, layer, neuron) for p in top]
    attr = attribute_neuron(model, [p.tokens for p in prompts], layer, neuron)
    rows, ends = _final_positions(prompts, attr.pre.device)
    ablation = ablation_drops(
        model, prompts, layer, neuron, mode="mean", mean_z=pool.mean_z[layer]
    ).cpu()
    head_attr = attr.heads[rows, ends].cpu()
    top_heads = rank_heads(head_attr, n_heads)
    activity = explanation_dataset(
        model,
        pool.windows,
        layer,
        neuron,
        top_heads[0][:2],
        attribution=scanned,
        labels=pool.labels,
    )
    explainer = explainer or OfflineExplainer(model.tokenizer)
    try:
        evaluation = evaluate_explainer(explainer, activity, model.tokenizer)
    except NoExplanation as err:  # the data admit none; service errors propagate
        evaluation = {
            "explanation": None,
            "error": str(err),
            "accuracy": float("nan"),
            "balanced_accuracy": float("nan"),
            "chance": float("nan"),
            "base_rate": activity.base_rate,
            "n_test": 0,
        }
    return NeuronLookup(
        layer,
        neuron,
        token,
        score,
        prompts,
        head_attr,
        attr.excluded()[rows, ends].cpu(),
        attr.pre[rows, ends].cpu(),
        ablation.reshape(len(prompts), layer + 1, -1),
        top_heads,
        activity,
        evaluation,
        attr,
    )


def topic_share(
    activity: HeadActivity, explanation: "Explanation", topic_words: Iterable[str], tokenizer
) -> float:
    """Of the held-out active prompts an offline explanation detects, the fraction its topic words
    detect (its words in ``topic_words``, both normalised by
    :func:`~context_neurons.explainers.normalise_word`).

    1.0 means every held-out hit of the explanation comes from a topic word: other words in the
    explanation are training-set correlates that detect nothing new. ``nan`` without hits.
    """
    from context_neurons.explainers import OfflineExplainer, examples_from_prompts, normalise_word

    reader = OfflineExplainer(tokenizer)
    topic = {normalise_word(w) for w in topic_words}
    words = set(explanation.tokens)
    prompts, active = activity.split(train=False)
    hits = topic_hits = 0
    for example, is_active in zip(examples_from_prompts(prompts, tokenizer), active):
        present = reader.words(example) & words if is_active else set()
        hits += bool(present)
        topic_hits += bool(present & topic)
    return topic_hits / hits if hits else float("nan")


def planted_summary(truth) -> list[dict[str, Any]]:
    """The planted look-ups in the row format of :func:`reproduce_section`."""
    return [
        {
            "layer": d["layer"],
            "neuron": d["neuron"],
            "token": d["target"],
            "top_heads": [head_name(d["layer"], d["head"])],
            "topic": d["topic"],
        }
        for d in truth.lookups
    ]


def reproduce_section(ctx: "ReproContext") -> list["Row"]:
    """Chapter 7: token-predicting neurons, their heads and the heads' explanations.

    Prompts come from the domain corpora (:func:`lookup_windows`), not from ``ctx.windows``: the
    evaluation texts are general prose, where topic look-ups rarely fire.
    """
    from context_neurons.reproduce import Row

    model = ctx.model
    truth = ctx.loaded.truth
    scores = ctx.shared.get("token_prediction_scores")
    if scores is None:
        scores = token_prediction_scores(model)
        ctx.shared["token_prediction_scores"] = scores
    windows, labels = lookup_windows(model.tokenizer)
    chosen = select_neurons(scores, n=4)
    pool = scan_pool(model, [w.to(model.cfg.device) for w in windows], labels, chosen)
    found = []
    for layer, neuron in chosen:
        try:
            found.append(examine_neuron(model, layer, neuron, pool, scores=scores).summary())
        except ValueError as err:  # a neuron that never fires on these texts
            found.append({"layer": layer, "neuron": neuron, "error": str(err)})
        if ctx.progress:
            print(f"look-ups: examined neuron {layer}.{neuron}")
    return [
        Row(
            "lookups",
            found,
            "",  # the paper reports distributions over many heads (its Figure 5), no single value
            truth=planted_summary(truth) if truth is not None else None,
            label="context look-ups: token-predicting neurons (top 4 by score, later half of the "
            "layers), predicted token, top heads by direct attribution, held-out accuracy and "
            "balanced accuracy of the offline explanation, majority-class chance",
        )
    ]
