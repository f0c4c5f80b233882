"""Accuracy of the approximation. This module compares true and approximate pre-activations
text by text: Pearson r, the fraction of variance unexplained, and the context part alone."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor
from tqdm.auto import tqdm
from transformer_lens.model_bridge import TransformerBridge

from context_neurons.checks import check_neurons, check_tokens
from context_neurons.circuit import ContextualCircuit, true_head_output
from context_neurons.discovery import read_vectors
from context_neurons.evaluation.approximation import (
    CONTEXT_TERMS,
    DENOMINATORS,
    LOCAL_TERMS,
    START,
    EvaluationError,
    NeuronApproximator,
    approximator,
    true_pre_activations,
)
from context_neurons.text.windows import pad_windows


def pearson_and_fvu(
    true: Float[Tensor, "batch pos n_neurons"],
    approx: Float[Tensor, "batch pos n_neurons"],
    mask: Bool[Tensor, "batch pos"],
) -> tuple[Float[Tensor, "batch n_neurons"], Float[Tensor, "batch n_neurons"]]:
    """Pearson r and FVU over the positions where ``mask`` is 1, per text and neuron."""
    m = mask[..., None].to(true.dtype)
    count = m.sum(1)
    mean_t = (true * m).sum(1) / count
    mean_a = (approx * m).sum(1) / count
    dt, da = (true - mean_t[:, None]) * m, (approx - mean_a[:, None]) * m
    var_t, var_a = (dt**2).sum(1), (da**2).sum(1)
    pearson = (dt * da).sum(1) / torch.sqrt(var_t * var_a).clamp(min=1e-30)
    fvu = (((true - approx) * m) ** 2).sum(1) / var_t.clamp(min=1e-30)
    return pearson, fvu


def masked_variance(
    values: Float[Tensor, "batch pos n_neurons"], mask: Bool[Tensor, "batch pos"]
) -> Float[Tensor, "batch n_neurons"]:
    """Sum of squared deviations from the mean over the positions where ``mask`` is 1."""
    m = mask[..., None].to(values.dtype)
    return (((values - masked_mean(values, mask)[:, None]) * m) ** 2).sum(1)


@dataclass
class Evaluation:
    """Accuracy of the approximation over a set of texts.

    Attributes:
        neurons: the neurons evaluated (columns).
        labels: the texts (rows).
        pearson: Pearson r per text and neuron, ``[n_texts, n_neurons]``.
        fvu: fraction of variance unexplained per text and neuron.
        true_max: the largest true pre-activation of each neuron in each text.
        approx_max: the same for the approximation.
        context_pearson: Pearson r of the context part, ``true - local`` against
            ``bag + positional`` (module docstring).
        context_fvu: FVU of the same comparison.
        context_share: the variance of ``true - local`` over the variance of ``true``.
        true_mean: the mean true pre-activation of each neuron in each text.
    """

    neurons: list[int]
    labels: list[str]
    pearson: Float[Tensor, "n_texts n_neurons"]
    fvu: Float[Tensor, "n_texts n_neurons"]
    true_max: Float[Tensor, "n_texts n_neurons"]
    approx_max: Float[Tensor, "n_texts n_neurons"]
    context_pearson: Float[Tensor, "n_texts n_neurons"]
    context_fvu: Float[Tensor, "n_texts n_neurons"]
    context_share: Float[Tensor, "n_texts n_neurons"]
    true_mean: Float[Tensor, "n_texts n_neurons"]

    def median(self, measure: str) -> float:
        """The median of a per-pair measure (``"pearson"``, ``"fvu"``, ``"context_share"``, ...)
        over all neuron-text pairs, NaN left out."""
        return float(getattr(self, measure).flatten().nanmedian())

    median_pearson = property(lambda self: self.median("pearson"))
    median_fvu = property(lambda self: self.median("fvu"))
    median_context_pearson = property(lambda self: self.median("context_pearson"))
    median_context_fvu = property(lambda self: self.median("context_fvu"))
    median_context_share = property(lambda self: self.median("context_share"))

    def per_neuron(self) -> pd.DataFrame:
        """Median r and FVU of each neuron over the texts, of the whole and of the context part."""
        return pd.DataFrame(
            {
                "median r": self.pearson.nanmedian(0).values.tolist(),
                "median FVU": self.fvu.nanmedian(0).values.tolist(),
                "context share": self.context_share.nanmedian(0).values.tolist(),
                "context r": self.context_pearson.nanmedian(0).values.tolist(),
                "context FVU": self.context_fvu.nanmedian(0).values.tolist(),
                "max true pre-activation": self.true_max.max(0).values.tolist(),
            },
            index=pd.Index(self.neurons, name="neuron"),
        )

    def context_view(self) -> "Evaluation":
        """A copy whose ``pearson`` and ``fvu`` are the context part's (for the same plots)."""
        return replace(self, pearson=self.context_pearson, fvu=self.context_fvu)

    def select(self, pairs: Bool[Tensor, "n_texts n_neurons"]) -> dict[str, float]:
        """Medians of every measure over the neuron-text pairs where ``pairs`` is true."""
        if not bool(pairs.any()):
            raise EvaluationError("No neuron-text pair selected.")
        return {name: float(v[pairs].nanmedian()) for name, v in _pair_measures(self).items()}


@torch.no_grad()
def evaluate(
    circuit: ContextualCircuit,
    model: TransformerBridge,
    windows: list[Int[Tensor, " _pos"]],
    neurons,
    labels: list[str] | None = None,
    batch_size: int = 8,
    start: int = START,
    progress: bool = False,
    truth_cache: dict | None = None,
    denominators: str = DENOMINATORS,
) -> Evaluation:
    """True against approximate pre-activations of ``neurons`` on every window, in batches.

    Args:
        circuit: the contextual circuit (chapter 4).
        model: the model.
        windows: 1-D token tensors, ``<|endoftext|>`` first (``data.tokenize_windows``).
        neurons: layer-0 neuron indices.
        labels: one name per window (default ``text 0``, ``text 1``, ...).
        batch_size: texts per batch (right-padded; causal attention makes padding harmless).
        start: first position evaluated.
        progress: show a progress bar.
        truth_cache: a dict in which true pre-activations are kept per batch (keyed by the
            batch's tokens and the neurons, held on the CPU and moved to the model's device one
            batch at a time), so that several circuits, denominators or start positions can be
            evaluated against one model run.
        denominators: ``"per_position"`` or ``"median"`` (:func:`approximator`).
    """
    _check_windows(windows, start)
    neurons = check_neurons(model, neurons)
    approx_fn = approximator(circuit, model, neurons, denominators)
    return _evaluate_with(
        approx_fn, model, windows, labels, batch_size, start, progress, truth_cache
    )


@torch.no_grad()
def evaluate_sets(
    circuit: ContextualCircuit,
    model: TransformerBridge,
    window_sets: dict[str, list[Int[Tensor, " _pos"]]],
    neurons,
    batch_size: int = 8,
    start: int = START,
    truth_cache: dict | None = None,
    denominators: str = DENOMINATORS,
) -> dict[str, Evaluation]:
    """:func:`evaluate` on each named set of texts, projecting the approximation only once."""
    if not window_sets:
        raise EvaluationError("No sets of texts to evaluate: give at least one named set.")
    for windows in window_sets.values():
        _check_windows(windows, start)
    neurons = check_neurons(model, neurons)
    approx_fn = approximator(circuit, model, neurons, denominators)
    return {
        name: _evaluate_with(
            approx_fn, model, windows, None, batch_size, start, False, truth_cache
        )
        for name, windows in window_sets.items()
    }


def _check_windows(windows: list[Int[Tensor, " _pos"]], start: int) -> None:
    if not windows:
        raise EvaluationError("No texts to evaluate: give at least one token window.")
    for w in windows:
        if len(w) < start + 2:
            raise EvaluationError(
                f"A text has {len(w)} tokens; evaluation needs at least {start + 2} (BOS and two "
                f"positions) to compute a correlation."
            )


def _evaluate_with(
    approx_fn: NeuronApproximator,
    model: TransformerBridge,
    windows: list[Int[Tensor, " _pos"]],
    labels: list[str] | None,
    batch_size: int,
    start: int,
    progress: bool,
    truth_cache: dict | None,
) -> Evaluation:
    """The batches of :func:`evaluate`, with the neurons' approximator already projected."""
    neurons = approx_fn.neurons
    out: dict[str, list[Tensor]] = {name: [] for name in _EVALUATION_TENSORS}
    batches = range(0, len(windows), batch_size)
    for b in tqdm(batches, desc="evaluating", disable=not progress):
        tokens, lengths = pad_windows(windows[b : b + batch_size])
        tokens = check_tokens(model, tokens)
        key = (tuple(neurons), tuple(tokens.shape), hash(tokens.cpu().numpy().tobytes()))
        if truth_cache is not None and key in truth_cache:
            true = truth_cache[key].to(tokens.device)
        else:
            true = true_pre_activations(model, tokens, neurons)
            if truth_cache is not None:  # kept on the CPU: ~4 MB per neuron per 1000 texts
                truth_cache[key] = true.cpu()
        mask = position_mask(tokens, lengths, start)
        for name, values in _measures(true, approx_fn.terms(tokens), mask).items():
            out[name].append(values)
    return Evaluation(
        neurons=neurons,
        labels=list(labels or [f"text {i}" for i in range(len(windows))]),
        **{name: torch.cat(values).cpu() for name, values in out.items()},
    )


_EVALUATION_TENSORS = (
    "pearson",
    "fvu",
    "true_max",
    "approx_max",
    "context_pearson",
    "context_fvu",
    "context_share",
    "true_mean",
)


def _measures(
    true: Float[Tensor, "batch pos n_neurons"],
    terms: dict[str, Float[Tensor, "batch pos n_neurons"]],
    mask: Bool[Tensor, "batch pos"],
) -> dict[str, Float[Tensor, "batch n_neurons"]]:
    """Every per-text measure of :class:`Evaluation` for one batch."""
    local = sum(terms[name] for name in LOCAL_TERMS)
    context = sum(terms[name] for name in CONTEXT_TERMS)
    approx = local + context
    r, f = pearson_and_fvu(true, approx, mask)
    context_r, context_f = pearson_and_fvu(true - local, context, mask)
    share = masked_variance(true - local, mask) / masked_variance(true, mask).clamp(min=1e-30)
    neg = torch.tensor(float("-inf"), device=true.device)
    return {
        "pearson": r,
        "fvu": f,
        "true_max": torch.where(mask[..., None], true, neg).amax(1),
        "approx_max": torch.where(mask[..., None], approx, neg).amax(1),
        "context_pearson": context_r,
        "context_fvu": context_f,
        "context_share": share,
        "true_mean": masked_mean(true, mask),
    }


@torch.no_grad()
def activation_curves(
    circuit: ContextualCircuit,
    model: TransformerBridge,
    tokens: Int[Tensor, " pos"],
    neuron,
    denominators: str = DENOMINATORS,
    parts: bool = False,
) -> dict[str, Float[Tensor, " pos"]]:
    """True and approximate pre-activation of one neuron along one text, and the bag term alone.

    Args:
        circuit: the contextual circuit.
        model: the model.
        tokens: one text, ``<|endoftext|>`` first.
        neuron: a layer-0 neuron index.
        denominators: ``"per_position"`` or ``"median"`` (:func:`approximator`).
        parts: also return ``"local terms"`` (direct path, other heads, constant),
            ``"true minus local"`` and ``"bag + positional"`` (the context part, true and
            approximate; their difference is the approximation's error).

    Returns:
        CPU curves, each ``[pos]``: ``"true"``, ``"approximation"``, ``"bag only"`` (and the parts).
    """
    if torch.as_tensor(tokens).numel() == 0:
        raise EvaluationError("The text is empty: give at least one token.")
    tokens = check_tokens(model, tokens)
    approx_fn = approximator(circuit, model, [neuron], denominators)
    terms = {name: values[0, :, 0].cpu() for name, values in approx_fn.terms(tokens).items()}
    true = true_pre_activations(model, tokens, [neuron])[0, :, 0].cpu()
    curves = {"true": true, "approximation": sum(terms.values()), "bag only": terms["bag"]}
    if parts:
        local = sum(terms[name] for name in LOCAL_TERMS)
        curves["local terms"] = local
        curves["true minus local"] = true - local
        curves["bag + positional"] = sum(terms[name] for name in CONTEXT_TERMS)
    return curves


#: The per-pair measures of :meth:`Evaluation.select`, by name.
PAIR_MEASURES = ("median r", "median FVU", "context share", "context r", "context FVU")


@torch.no_grad()
def contextual_heads_accuracy(
    circuit: ContextualCircuit,
    model: TransformerBridge,
    windows: list[Int[Tensor, " _pos"]],
    neurons,
    denominators: tuple[str, ...] = (DENOMINATORS,),
    start: int = START,
    batch_size: int = 8,
) -> dict[str, tuple[float, float]]:
    """Median Pearson r and FVU of the contextual heads' own share of the neurons' input.

    :func:`evaluate` judges the whole approximation, whose local terms (the direct path, the other
    heads as if attending to the current token) are approximations too. This judges the circuit
    alone: the true combined output of the contextual heads (hook ``z``, through ``W_O``) against
    the circuit's bag plus positional part (each head's own kernel), both read by the neurons
    through the linearised LN2 (:func:`~context_neurons.discovery.scores.read_vectors`), text by
    text over positions ``>= start``. Good here and poor in :func:`evaluate` means the local terms
    fail.

    Args:
        denominators: the bag's denominators to judge (``"per_position"``, ``"median"``); the
            true output is computed once for all of them.

    Returns:
        ``{denominators: (median r, median FVU)}`` over neuron-text pairs.
    """
    neurons = check_neurons(model, neurons)
    read = read_vectors(circuit, model, neurons)  # [d_model, n_neurons]
    pearsons: dict[str, list[Tensor]] = {d: [] for d in denominators}
    fvus: dict[str, list[Tensor]] = {d: [] for d in denominators}
    for first in range(0, len(windows), batch_size):
        tokens, lengths = pad_windows(windows[first : first + batch_size])
        tokens = tokens.to(model.cfg.device)
        mask = position_mask(tokens, lengths, start)
        true = true_head_output(model, tokens, circuit.heads) @ read
        for d in denominators:
            approx = circuit.approximate_output(tokens, d, kernel="per_head") @ read
            pearson, fvu = pearson_and_fvu(true, approx, mask)
            pearsons[d].append(pearson.flatten())
            fvus[d].append(fvu.flatten())
    return {
        d: (float(torch.cat(pearsons[d]).median()), float(torch.cat(fvus[d]).median()))
        for d in denominators
    }


def _pair_measures(ev: Evaluation) -> dict[str, Float[Tensor, "n_texts n_neurons"]]:
    """The per-pair measures of an evaluation, by the names :meth:`Evaluation.select` uses."""
    values = (ev.pearson, ev.fvu, ev.context_share, ev.context_pearson, ev.context_fvu)
    return dict(zip(PAIR_MEASURES, values))


def position_mask(
    tokens: Int[Tensor, "batch pos"], lengths: Int[Tensor, " batch"], start: int
) -> Bool[Tensor, "batch pos"]:
    """True at the positions ``start <= n < length`` of each padded text (on the tokens' device)."""
    positions = torch.arange(tokens.shape[1], device=tokens.device)
    return (positions[None] >= start) & (positions[None] < lengths.to(tokens.device)[:, None])


def masked_mean(
    values: Float[Tensor, "batch pos n_neurons"], mask: Bool[Tensor, "batch pos"]
) -> Float[Tensor, "batch n_neurons"]:
    """Mean over the positions where ``mask`` is true, per text and neuron."""
    m = mask[..., None].to(values.dtype)
    return (values * m).sum(1) / m.sum(1)
