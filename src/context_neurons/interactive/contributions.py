"""Contribution explorer. This module shows the tokens that contribute most to a neuron through
their extended embeddings (chapter 5), positively and negatively: pick a neuron and a number of
tokens, and see both sides as bars and a table.
"""

from __future__ import annotations

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
from context_neurons.plotting.discovery import plot_contributions


def as_contributions(result: Any) -> pd.Series:
    """Accept a Series (token strings -> contribution) or a ``(tokens, values)`` pair."""
    if isinstance(result, pd.Series):
        series = result.astype(float)
    else:
        tokens, values = result
        series = pd.Series(_numpy(values).astype(float).ravel(), index=list(tokens))
    if series.empty:
        raise ExplorerError("No token contributions to show.")
    return series


def contribution_frame(contributions: Any, k: int = 15) -> pd.DataFrame:
    """The ``k`` most positive and ``k`` most negative token contributions, side by side.

    Returns:
        Indexed by ``rank`` (1..k), columns ``top token``, ``top contribution``, ``bottom token``,
        ``bottom contribution``.
    """
    series = as_contributions(contributions)
    k = min(int(k), len(series))
    if k < 1:
        raise ExplorerError("k must be at least 1.")
    order = np.argsort(-series.to_numpy(), kind="stable")
    top, bottom = order[:k], order[::-1][:k]
    values, tokens = series.to_numpy(), [repr(token) for token in series.index]
    return pd.DataFrame(
        {"top token": [tokens[i] for i in top], "top contribution": values[top],
         "bottom token": [tokens[i] for i in bottom], "bottom contribution": values[bottom]},
        index=pd.Index(range(1, k + 1), name="rank"),
    )


def contribution_view(
    contributions_fn: Callable[[int], Any], neuron: int, k: int, model_title: str
):
    """Figure and table of one neuron's top and bottom token contributions (``model_title`` in
    the figure's title and the table's caption)."""
    frame = contribution_frame(contributions_fn(neuron), k=k)
    figure = plot_contributions(frame, neuron, model_title=model_title)
    caption = f"top and bottom token contributions of neuron {neuron}"
    return figure, result_table(frame.round(3), caption, model_title)


def model_contributions_fn(
    model, contributions: Callable[[list[int]], Any], token_ids=None
) -> Callable[[int], pd.Series]:
    """Build ``contributions_fn(neuron)`` for :func:`contribution_explorer`.

    Args:
        model: the TransformerBridge (its tokenizer names the tokens).
        contributions: ``contributions(neurons) -> [n_neurons, n_tokens]`` over ``token_ids``, e.g.
            ``lambda js: discovery.contributions(circuit, model, js, ids)``.
        token_ids: the token ids the columns stand for (default every token).
    """
    ids = np.arange(model.cfg.d_vocab) if token_ids is None else _numpy(token_ids).astype(int)
    names = [model.tokenizer.decode([int(t)]) for t in ids]

    def contributions_fn(neuron: int) -> pd.Series:
        values = _numpy(contributions([int(neuron)]))[0]
        return pd.Series(values, index=names)

    return contributions_fn


def contribution_explorer(
    contributions_fn: Callable[[int], Any],
    neurons: Sequence[int],
    neuron: int | None = None,
    k: int = 15,
    interactive: bool | None = None,
    *,
    model_title: str,
) -> Explorer:
    """Pick a neuron and see the tokens whose extended embeddings push it up or down.

    Args:
        contributions_fn: ``contributions_fn(neuron)`` returning a Series (token string ->
            contribution) or ``(token strings, values)``; see :func:`model_contributions_fn`.
        neurons: the neurons offered (the first is shown unless ``neuron`` is given).
        k: tokens shown on each side.
        interactive: force widgets or the static figure; None decides (:func:`interactive_mode`).
        model_title: the model's name for the figure's title (``loaded.title``).
    """
    neurons, neuron = _offered(neurons, neuron, "contribution_explorer")
    if not interactive_mode(interactive):
        return static_view(lambda: contribution_view(contributions_fn, neuron, k, model_title))

    import ipywidgets as widgets  # optional (the "book" extra): only reached in widget mode

    controls = [
        widgets.Dropdown(options=neurons, value=neuron, description="neuron"),
        widgets.IntSlider(value=k, min=3, max=50, description="tokens", continuous_update=False),
    ]
    return widget_panel(
        [controls],
        lambda neuron, k: contribution_view(contributions_fn, neuron, k, model_title),
        ["neuron", "k"],
    )
