"""Chapter set-up. This module holds the one call every chapter starts with."""

from __future__ import annotations

import torch

from context_neurons import config
from context_neurons.printing import ipython_shell, wrapped
from context_neurons.models import LoadedModel, load_model


def setup_chapter(
    seed: int = 0, show_banner: bool = True, model: str | None = None
) -> LoadedModel:
    """Fix seeds and threads, disable gradients, load the chapter's model and show its banner.

    The model comes from ``$CONTEXT_NEURONS_MODEL`` (default ``gpt2``; CI uses ``planted`` and
    ``trained``); the device is CUDA when available. Threads default to 2 so stored outputs are
    reproducible. ``model`` names another model for a chapter about that model (chapter 8 is
    about the trained model whatever the variable says).
    """
    torch.manual_seed(seed)
    torch.set_grad_enabled(False)
    torch.set_num_threads(config.threads())
    sharp_figures()
    loaded = load_model(model, device="auto")
    if show_banner:
        show_model_banner(loaded)
    return loaded


def sharp_figures() -> None:
    """Inline figures at twice their pixel density (``retina`` PNG), shown at the same size, so
    they stay sharp on a laptop screen; nothing outside IPython."""
    if ipython_shell() is None:  # not in a notebook: no inline figures to set
        return
    from matplotlib_inline.backend_inline import set_matplotlib_formats  # comes with IPython

    set_matplotlib_formats("retina")


def show_model_banner(loaded: LoadedModel) -> None:
    """Print the banner naming the model that produced this page's outputs."""
    print(wrapped(f"{loaded.title.upper()} -- {loaded.banner()}", indent=""))
