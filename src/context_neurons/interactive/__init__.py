"""Interactive explorers. This subpackage gives readers widgets to explore heads and neurons.

Three explorers, each an ipywidgets panel in a live notebook (Jupyter, Colab) and a static
matplotlib figure plus a table for one default selection everywhere else, one module each:

* :mod:`.heads`, :func:`head_explorer`: pick a layer-0 head, a destination position and a
  destination token, and see the head's positional kernel ``pos_n(i)`` (chapter 1,
  :func:`context_neurons.decomposition.positional_pattern`).
* :mod:`.activations`, :func:`activation_explorer`: type a text and see a neuron's true
  pre-activation along it beside the circuit's approximation.
* :mod:`.contributions`, :func:`contribution_explorer`: pick a neuron and see the tokens that
  contribute most to it, positively and negatively.

The last two take callables, so they work with whatever computes activations and contributions
(:mod:`context_neurons.evaluation`, :mod:`context_neurons.discovery`), and adapters
(:func:`model_activations_fn`, :func:`model_contributions_fn`) build those callables from the
package's objects. Everything the panels show is computed by pure functions (``*_frame``,
``*_summary``, and the figures of :mod:`context_neurons.plotting`) that the tests call without a
browser; :mod:`.panel` holds what the three share: the mode, the :class:`Explorer` they return,
the static view and one helper (:func:`widget_panel`) that wires the widgets of all three.

Widgets are drawn only in a live front end that a reader can click in: Colab, a notebook opened
through a Jupyter server (JupyterLab, Notebook 7; they set ``JPY_SESSION_NAME`` for its kernel) or
VS Code. Everywhere else the explorers are static: in scripts and tests, and in notebooks executed
headless (``regenerate-notebooks``, nbval, the website build), so stored outputs and the website
show figures rather than dead widgets. ``CONTEXT_NEURONS_STATIC=1`` forces static mode (the website
build sets it), ``CONTEXT_NEURONS_WIDGETS=1`` or ``interactive=True`` asks for widgets in another
front end, and without ipywidgets the explorers are always static. Each returns an
:class:`Explorer` holding what it drew, so it can be inspected.

Every name is re-exported here, so ``from context_neurons.interactive import head_explorer``
(the chapters' imports) keeps working. To replace a function the panels call (as the tests do
with ``in_kernel``), patch it in :mod:`.panel`, where it is looked up.
"""

from context_neurons.interactive.activations import (  # noqa: F401  (the chapters' imports)
    DEFAULT_TEXT,
    ActivationTrace,
    activation_explorer,
    activation_frame,
    activation_summary,
    activation_view,
    as_trace,
    model_activations_fn,
)
from context_neurons.interactive.contributions import (  # noqa: F401
    as_contributions,
    contribution_explorer,
    contribution_frame,
    contribution_view,
    model_contributions_fn,
)
from context_neurons.interactive.heads import (  # noqa: F401
    HeadKernels,
    head_explorer,
    head_view,
    kernel_frame,
    kernel_summary,
    token_widget,
)
from context_neurons.interactive.panel import (  # noqa: F401
    Explorer,
    ExplorerError,
    in_kernel,
    interactive_mode,
    live_frontend,
    result_table,
    static_view,
    widget_panel,
    widgets_available,
)
