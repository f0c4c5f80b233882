"""Activation explorer. This module shows a neuron along a text a reader types: its true
pre-activation beside the circuit's approximation (chapter 6), and how well the two agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from context_neurons.interactive.panel import (
    Explorer,
    ExplorerError,
    _numpy,
    _offered,
    interactive_mode,
    result_table,
    static_view,
    widget_panel,
)
from context_neurons.plotting.evaluation import plot_activations


DEFAULT_TEXT = (
    "The colour of the harbour changed as the programme began: the neighbours gathered to watch "
    "the theatre company rehearse, and the organisers apologised for the delay."
)


@dataclass
class ActivationTrace:
    """One neuron along one text: the tokens and the true and approximate pre-activations."""

    tokens: list[str]
    true: np.ndarray
    approx: np.ndarray


def as_trace(result: Any) -> ActivationTrace:
    """Accept an :class:`ActivationTrace` or a ``(tokens, true, approx)`` tuple."""
    if isinstance(result, ActivationTrace):
        trace = result
    else:
        tokens, true, approx = result
        trace = ActivationTrace(
            list(tokens), np.asarray(true, float).ravel(), np.asarray(approx, float).ravel()
        )
    if not (len(trace.tokens) == trace.true.size == trace.approx.size) or not trace.tokens:
        raise ExplorerError(
            f"Expected as many tokens as activations, got {len(trace.tokens)} tokens, "
            f"{trace.true.size} true and {trace.approx.size} approximate values."
        )
    return trace


def activation_frame(trace: ActivationTrace | tuple) -> pd.DataFrame:
    """Per-token table: ``position``, ``token``, ``true``, ``approximate``, ``error``."""
    trace = as_trace(trace)
    return pd.DataFrame(
        {"token": trace.tokens, "true": trace.true, "approximate": trace.approx,
         "error": trace.approx - trace.true},
        index=pd.Index(np.arange(len(trace.tokens)), name="position"),
    )


def activation_summary(trace: ActivationTrace | tuple) -> dict[str, float]:
    """Agreement of the approximation: Pearson correlation and fraction of variance unexplained.

    ``FVU = sum (true - approx)^2 / sum (true - mean true)^2`` (NaN when the true values are
    constant); the correlation is NaN when either series is constant.
    """
    trace = as_trace(trace)
    true, approx = trace.true, trace.approx
    centred = true - true.mean()
    denom = float(np.square(centred).sum())
    fvu = float(np.square(true - approx).sum() / denom) if denom > 0 else math.nan
    if true.size > 1 and true.std() > 0 and approx.std() > 0:
        pearson = float(np.corrcoef(true, approx)[0, 1])
    else:
        pearson = math.nan
    return {"pearson": pearson, "fvu": fvu, "max |error|": float(np.abs(approx - true).max())}


def activation_view(
    activations_fn: Callable[[str, int], Any], text: str, neuron: int, model_title: str
):
    """Figure and summary table of one neuron along one text, both naming ``model_title``."""
    if not text.strip():
        raise ExplorerError("Type a text first.")
    trace = as_trace(activations_fn(text, neuron))
    summary = pd.DataFrame([activation_summary(trace)], index=pd.Index([neuron], name="neuron"))
    figure = plot_activations(
        trace.tokens, trace.true, trace.approx, neuron, model_title=model_title
    )
    caption = f"neuron {neuron} along the text, true against approximate pre-activation"
    return figure, result_table(summary.round(3), caption, model_title)


def model_activations_fn(
    model,
    true_fn: Callable[[Any, list[int]], Any],
    approx_fn: Callable[[Any, list[int]], Any],
    max_tokens: int | None = None,
) -> Callable[[str, int], ActivationTrace]:
    """Build ``activations_fn(text, neuron)`` for :func:`activation_explorer` from model functions.

    Args:
        model: the TransformerBridge (its tokenizer; ``to_tokens`` prepends BOS).
        true_fn: ``true_fn(tokens [1, pos], neurons) -> [1, pos, n_neurons]``, e.g.
            ``lambda t, js: evaluation.true_pre_activations(model, t, js)``.
        approx_fn: the same for the approximation, e.g.
            ``lambda t, js: evaluation.approximator(circuit, model, js)(t)``.
        max_tokens: cut texts to this many tokens (default the model's context).
    """
    limit = max_tokens or model.cfg.n_ctx

    def activations_fn(text: str, neuron: int) -> ActivationTrace:
        tokens = model.to_tokens(text)[:, :limit]
        strings = [model.tokenizer.decode([int(t)]) for t in tokens[0]]
        true = true_fn(tokens, [neuron])[0, :, 0]
        approx = approx_fn(tokens, [neuron])[0, :, 0]
        return ActivationTrace(strings, _numpy(true), _numpy(approx))

    return activations_fn


def activation_explorer(
    activations_fn: Callable[[str, int], Any],
    neurons: Sequence[int],
    text: str = DEFAULT_TEXT,
    neuron: int | None = None,
    interactive: bool | None = None,
    *,
    model_title: str,
) -> Explorer:
    """Type a text and see a neuron's true and approximate pre-activation along it.

    Args:
        activations_fn: ``activations_fn(text, neuron)`` returning an :class:`ActivationTrace` or
            ``(token strings, true values, approximate values)``; see :func:`model_activations_fn`.
        neurons: the neurons offered (the first is shown unless ``neuron`` is given).
        text: the text shown first (and the static one).
        interactive: force widgets or the static figure; None decides (:func:`interactive_mode`).
        model_title: the model's name for the figure's title (``loaded.title``).
    """
    neurons, neuron = _offered(neurons, neuron, "activation_explorer")
    if not interactive_mode(interactive):
        return static_view(lambda: activation_view(activations_fn, text, neuron, model_title))

    import ipywidgets as widgets  # optional (the "book" extra): only reached in widget mode

    neuron_w = widgets.Dropdown(options=neurons, value=neuron, description="neuron")
    text_w = widgets.Textarea(
        value=text,
        description="text",
        continuous_update=False,
        layout=widgets.Layout(width="90%", height="5em"),
    )
    return widget_panel(
        [[neuron_w], [text_w]],
        lambda neuron, text: activation_view(activations_fn, text, neuron, model_title),
        ["neuron", "text"],
    )
