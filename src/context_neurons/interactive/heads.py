"""Head explorer. This module shows a layer-0 head's positional kernel ``pos_n(i)`` (chapter 1,
:func:`context_neurons.decomposition.positional_pattern`): pick a head, a destination position and
a destination token, and see the kernel's last weights and the numbers of its shape.
"""

from __future__ import annotations

import numbers
from typing import Any, Callable

import numpy as np
import pandas as pd
from jaxtyping import Float
from transformer_lens.model_bridge import TransformerBridge

from context_neurons import decomposition as dec
from context_neurons.checks import check_head, check_position
from context_neurons.interactive.panel import (
    Explorer,
    ExplorerError,
    interactive_mode,
    result_table,
    static_view,
    widget_panel,
)
from context_neurons.plotting.decomposition import plot_kernel


def kernel_frame(pattern: Float[np.ndarray, "key_pos"], n: int, window: int = 60) -> pd.DataFrame:
    """The last ``window`` weights of a positional pattern ``pos_n(i)``, ``i <= n``.

    Args:
        pattern: ``pos_n(i)`` for ``i = 0..n`` (length ``n + 1``).
        n: the destination position.
        window: how many source positions before and at ``n`` to keep.

    Returns:
        Columns ``source position``, ``distance`` (``n - i``), ``weight``, ``cumulative weight``
        (summed from ``n`` backwards), in increasing source position.
    """
    weights = np.asarray(pattern, dtype=float).ravel()
    if weights.size != n + 1:
        raise ExplorerError(
            f"A pattern at destination {n} has {n + 1} weights, got {weights.size}."
        )
    start = max(0, n - window + 1)
    positions = np.arange(start, n + 1)
    kept = weights[start:]
    cumulative = np.cumsum(kept[::-1])[::-1]
    return pd.DataFrame({"source position": positions, "distance": n - positions,
                         "weight": kept, "cumulative weight": cumulative})


def kernel_summary(pattern: Float[np.ndarray, "key_pos"]) -> dict[str, float]:
    """Shape of a positional pattern: effective width, mean distance, mass on the last 50 tokens.

    ``effective width`` is ``1 / sum_i pos_n(i)^2`` (the number of equally weighted positions with
    the same concentration); ``mean distance`` is ``sum_i pos_n(i) (n - i)``; ``self weight`` is
    ``pos_n(n)``.
    """
    weights = np.asarray(pattern, dtype=float).ravel()
    total = weights.sum()
    if not np.isfinite(total) or total <= 0:
        raise ExplorerError("A positional pattern must have positive, finite weights.")
    weights = weights / total
    distance = np.arange(weights.size)[::-1]
    return {
        "effective width": float(1.0 / np.square(weights).sum()),
        "mean distance": float((weights * distance).sum()),
        "mass on last 50": float(weights[-50:].sum()),
        "self weight": float(weights[-1]),
    }


class HeadKernels:
    """Positional patterns of a model's layer-0 heads, with the mean keys computed once.

    Args:
        model: the TransformerBridge.
        reference_tokens: the token distribution of the mean keys ``M[i]`` (default: the
            calibration text, as in chapter 1).
    """

    def __init__(self, model: TransformerBridge, reference_tokens=None):
        self.model = model
        self.n_heads = model.cfg.n_heads
        self.n_ctx = model.cfg.n_ctx
        self.mean_keys = (
            dec.default_mean_keys(model) if reference_tokens is None
            else dec.mean_positional_keys(model, reference_tokens, self.n_ctx)
        )

    def __call__(
        self, head: int, n: int, dest_token: str | int = dec.DEFAULT_DESTINATION
    ) -> Float[np.ndarray, "key_pos"]:
        """``pos_n(i)`` for ``i = 0..n`` of one head."""
        head, n = check_head(self.model, head), check_position(self.model, n)
        pattern = dec.positional_pattern(
            self.model, n, dest_token=dest_token, heads=[head], mean_keys=self.mean_keys
        )
        return pattern[0].detach().cpu().numpy()


def head_view(kernels: Callable[[int, int, Any], np.ndarray], head: int, n: int,
              dest_token: str | int, window: int, model_title: str):
    """Figure and table (the kernel's shape, a captioned :class:`~context_neurons.printing.Table`)
    of one head; the explorer's core."""
    pattern = kernels(head, n, dest_token)
    frame = kernel_frame(pattern, n, window=min(window, n + 1))
    summary = pd.DataFrame([kernel_summary(pattern)], index=pd.Index([head], name="head"))
    figure = plot_kernel(frame, head, n, dest_token)
    caption = f"shape of head {head}'s positional kernel at n = {n}, destination {dest_token!r}"
    return figure, result_table(summary.round(3), caption, model_title)


def token_widget(dest_token: str | int):
    """The destination-token control: a text box for a token string, a number box for a token id.

    ipywidgets' ``Text`` accepts strings only, so a token id (an int, as chapters may pass) gets an
    ``IntText`` and stays an int for :func:`context_neurons.decomposition.positional_pattern`.
    """
    import ipywidgets as widgets  # optional (the "book" extra): only reached in widget mode

    if isinstance(dest_token, numbers.Integral) and not isinstance(dest_token, bool):
        return widgets.IntText(
            value=int(dest_token), description="dest. token id", continuous_update=False
        )
    if not isinstance(dest_token, str):
        raise ExplorerError(
            f"dest_token must be a token string such as ' the' or a token id, got {dest_token!r}."
        )
    return widgets.Text(value=dest_token, description="dest. token", continuous_update=False)


def head_explorer(
    model: TransformerBridge | None = None,
    kernels: Callable[[int, int, Any], np.ndarray] | None = None,
    head: int = 0,
    n: int | None = None,
    dest_token: str | int = dec.DEFAULT_DESTINATION,
    window: int = 60,
    interactive: bool | None = None,
    *,
    model_title: str,
) -> Explorer:
    """Pick a head, a destination position and a destination token; see the positional kernel.

    Args:
        model: the TransformerBridge (needed unless ``kernels`` is given).
        kernels: ``kernels(head, n, dest_token) -> pos_n(i) for i = 0..n``; default
            :class:`HeadKernels` of ``model``.
        head, n, dest_token: the selection shown first (and the static one); ``n`` defaults to
            the middle of the context.
        window: source positions shown, ending at ``n``.
        interactive: force widgets (True) or the static figure (False); None decides
            (:func:`interactive_mode`).
        model_title: the model's name for the table's caption (``loaded.title``).
    """
    if kernels is None:
        if model is None:
            raise ExplorerError("head_explorer needs a model or a kernels function.")
        kernels = HeadKernels(model)
    cfg = getattr(model, "cfg", None)
    n_heads = getattr(kernels, "n_heads", None) or getattr(cfg, "n_heads", None)
    n_ctx = getattr(kernels, "n_ctx", None) or getattr(cfg, "n_ctx", None)
    if n_heads is None or n_ctx is None:
        raise ExplorerError("head_explorer needs a model, or kernels with n_heads and n_ctx.")
    n = n_ctx // 2 if n is None else n
    if not interactive_mode(interactive):
        return static_view(lambda: head_view(kernels, head, n, dest_token, window, model_title))

    import ipywidgets as widgets  # optional (the "book" extra): only reached in widget mode

    controls = [
        widgets.Dropdown(options=list(range(n_heads)), value=head, description="head"),
        widgets.IntSlider(
            value=n, min=1, max=n_ctx - 1, description="position n", continuous_update=False
        ),
        token_widget(dest_token),
    ]
    return widget_panel(
        [controls],
        lambda head, n, dest_token: head_view(kernels, head, n, dest_token, window, model_title),
        ["head", "n", "dest_token"],
    )
