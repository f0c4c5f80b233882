"""Explorer panels. This module holds what the three explorers share: the mode (widgets or a
static figure and table), the :class:`Explorer` they return, the static view, the one widget panel
that wires every explorer's controls, and the captioned result table.

Widgets are drawn only in a live front end that a reader can click in: Colab, a notebook opened
through a Jupyter server (JupyterLab, Notebook 7; they set ``JPY_SESSION_NAME`` for its kernel) or
VS Code. Everywhere else the explorers are static (:func:`interactive_mode`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from context_neurons import config
from context_neurons.checks import InputError
from context_neurons.printing import Table, ipython_shell


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
# Helpers of the neuron explorers
# ----------------------------------------------------------------------------------------------


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
