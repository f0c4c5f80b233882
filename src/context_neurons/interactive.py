"""Interactive explorers. This module gives readers widgets to explore heads and neurons.

Three explorers, each an ipywidgets panel in a live notebook (Jupyter, Colab) and a static
matplotlib figure plus a table for one default selection everywhere else:

* :func:`head_explorer`: pick a layer-0 head, a destination position and a destination token, and
  see the head's positional kernel ``pos_n(i)`` (chapter 1,
  :func:`context_neurons.decomposition.positional_pattern`).
* :func:`activation_explorer`: type a text and see a neuron's true pre-activation along it beside
  the circuit's approximation.
* :func:`contribution_explorer`: pick a neuron and see the tokens that contribute most to it,
  positively and negatively.

The last two take callables, so they work with whatever computes activations and contributions
(:mod:`context_neurons.evaluation`, :mod:`context_neurons.discovery`), and adapters build those
callables from the package's objects. Everything the panels show is computed by pure functions
(``*_frame``, ``*_summary``, and the figures of :mod:`context_neurons.plotting`) that the
tests call without a browser; one helper (:func:`widget_panel`) wires the widgets of all three.

Widgets are drawn only in a live front end that a reader can click in: Colab, a notebook opened
through a Jupyter server (JupyterLab, Notebook 7; they set ``JPY_SESSION_NAME`` for its kernel) or
VS Code. Everywhere else the explorers are static: in scripts and tests, and in notebooks executed
headless (``regenerate-notebooks``, nbval, the website build), so stored outputs and the website
show figures rather than dead widgets. ``CONTEXT_NEURONS_STATIC=1`` forces static mode (the website
build sets it), ``CONTEXT_NEURONS_WIDGETS=1`` or ``interactive=True`` asks for widgets in another
front end, and without ipywidgets the explorers are always static. Each returns an
:class:`Explorer` holding what it drew, so it can be inspected.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from jaxtyping import Float
from transformer_lens.model_bridge import TransformerBridge

from context_neurons import config
from context_neurons import decomposition as dec
from context_neurons.checks import InputError, check_head, check_position
from context_neurons.plotting.decomposition import plot_kernel
from context_neurons.plotting.discovery import plot_contributions
from context_neurons.plotting.evaluation import plot_activations
from context_neurons.printing import Table, ipython_shell

DEFAULT_TEXT = (
    "The colour of the harbour changed as the programme began: the neighbours gathered to watch "
    "the theatre company rehearse, and the organisers apologised for the delay."
)


class ExplorerError(InputError):
    """A selection the explorer cannot show (unknown head, neuron or empty text)."""


def result_table(table: pd.DataFrame, caption: str, model_title: str) -> Table:
    """An explorer's table as displayed: a :class:`~context_neurons.printing.Table` captioned
    ``"<model>: <caption>"``; an empty ``model_title`` is refused."""
    if not model_title.strip():
        raise ExplorerError("an explorer names the model it shows: pass model_title=loaded.title")
    return Table(table, caption, model_title, decimals=3)


# ----------------------------------------------------------------------------------------------
# Mode, and the one widget panel all explorers use
# ----------------------------------------------------------------------------------------------


def widgets_available() -> bool:
    """Whether ipywidgets can be imported."""
    try:  # an optional dependency (the "book" extra), imported only to check
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def in_kernel() -> bool:
    """Whether an IPython kernel (a notebook front end) runs this code."""
    shell = ipython_shell()
    return shell is not None and getattr(shell, "kernel", None) is not None


def live_frontend() -> bool:
    """Whether the kernel serves a front end a reader clicks in (Colab, Jupyter server, VS Code).

    Headless executions (nbclient, nbval, myst-nb) set none of the markers, so they are static.
    """
    if config.in_colab() or config.jupyter_session() or config.flag(config.WIDGETS):
        return True
    shell = ipython_shell()
    return shell is not None and "__vsc_ipynb_file__" in getattr(shell, "user_ns", {})


def interactive_mode(interactive: bool | None = None) -> bool:
    """Whether explorers draw widgets (True) or a static figure and table (False).

    Args:
        interactive: force a mode; None decides: widgets when ipywidgets is importable and an
            IPython kernel serves a live front end (:func:`live_frontend`).
            ``CONTEXT_NEURONS_STATIC=1`` makes every explorer static whatever is asked.
    """
    if config.flag(config.STATIC) or not widgets_available():
        return False
    if interactive is not None:
        return bool(interactive)
    return in_kernel() and live_frontend()


@dataclass
class Explorer:
    """What an explorer drew: its mode, the figure and table of the current selection, widgets."""

    mode: str
    figure: Any = None
    table: pd.DataFrame | None = None
    widget: Any = None
    update: Callable[..., Any] | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        shown = "widgets" if self.mode == "widgets" else "figure and table"
        return f"<Explorer: {shown}>"

    def _ipython_display_(self) -> None:
        """Nothing: an explorer displays itself when it is created (also as a cell's last line)."""


def _display(*objects) -> None:
    from IPython.display import display  # optional: only reached inside a notebook kernel

    display(*objects)


def static_view(view: Callable[[], tuple[Any, Table]]) -> Explorer:
    """The static explorer: one figure and its captioned table (displayed inside a kernel)."""
    figure, shown = view()
    if in_kernel():
        _display(shown)
    return Explorer(mode="static", figure=figure, table=shown.data)


def widget_panel(
    rows: list[list[Any]], view: Callable[..., tuple[Any, Table]], names: list[str]
) -> Explorer:
    """Wire widgets to a view: each change redraws the figure and table below the controls.

    Args:
        rows: rows of ipywidgets controls (a row of several is shown side by side).
        view: ``view(**values) -> (figure, table)``, called with each control's value under the
            name at the same place in ``names`` (controls flattened row by row).
        names: the keyword of each control.
    """
    import ipywidgets as widgets  # optional (the "book" extra): only reached in widget mode

    controls = [control for row in rows for control in row]
    out = widgets.Output()
    explorer = Explorer(mode="widgets")

    def update(*_):
        out.clear_output(wait=True)
        with out:
            try:
                figure, shown = view(**{n: c.value for n, c in zip(names, controls)})
            except ValueError as error:  # ExplorerError and the package's InputErrors
                print(error)
                return
            explorer.figure, explorer.table = figure, shown.data
            _display(shown, figure)
            plt.close(figure)  # shown in the output area, not again by the inline backend

    for control in controls:
        control.observe(update, names="value")
    boxes = [row[0] if len(row) == 1 else widgets.HBox(row) for row in rows]
    explorer.widget = widgets.VBox(boxes + [out])
    explorer.update = update
    update()
    if in_kernel():
        _display(explorer.widget)
    return explorer


# ----------------------------------------------------------------------------------------------
# (a) Heads: positional kernels
# ----------------------------------------------------------------------------------------------


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


# ----------------------------------------------------------------------------------------------
# (b) A neuron along a text: true and approximate activations
# ----------------------------------------------------------------------------------------------


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


# ----------------------------------------------------------------------------------------------
# (c) A neuron's token contributions
# ----------------------------------------------------------------------------------------------


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


def _offered(neurons: Sequence[int], neuron: int | None, who: str) -> tuple[list[int], int]:
    """The neurons an explorer offers, and the one shown first (the first unless given)."""
    neurons = [int(j) for j in neurons]
    if not neurons:
        raise ExplorerError(f"{who} needs at least one neuron.")
    return neurons, neurons[0] if neuron is None else int(neuron)


def _numpy(values) -> np.ndarray:
    """A tensor, array or list as a NumPy array on the CPU."""
    if hasattr(values, "detach"):
        values = values.detach().cpu().numpy()
    return np.asarray(values)
