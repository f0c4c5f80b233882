"""Plotting style. This module holds what every figure shares: matplotlib's settings, one colour
per head, per head group and per sign, and small helpers of the figure modules."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import torch

plt.rcParams.update(
    {
        "figure.dpi": 90,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "font.size": 10,
    }
)

GROUP_COLOURS = {
    "contextual": "tab:blue",
    "detokenization": "tab:red",
    "duplicate": "tab:green",
    "miscellaneous": "tab:gray",
}
TRUE_COLOUR, APPROX_COLOUR = "black", "tab:orange"
#: Colours of what pushes a neuron up (positive contributions, up-tokens) and down.
UP_COLOUR, DOWN_COLOUR = "tab:red", "tab:blue"


def head_colour(head: int) -> tuple[float, float, float, float]:
    """The colour of a head, the same in every figure."""
    return plt.get_cmap("tab20")(head % 20)


def sign_colours(values) -> list[str]:
    """:data:`UP_COLOUR` for each positive value, :data:`DOWN_COLOUR` for the others."""
    return [UP_COLOUR if float(v) > 0 else DOWN_COLOUR for v in values]


def moving_average(values: torch.Tensor, width: int) -> tuple[np.ndarray, np.ndarray]:
    values = torch.as_tensor(values, dtype=torch.float32).cpu()
    if width <= 1:
        return np.arange(len(values)), values.numpy()
    kernel = torch.ones(width) / width
    out = torch.nn.functional.conv1d(values[None, None], kernel[None, None])[0, 0]
    return np.arange(len(out)) + (width - 1) / 2, out.numpy()


def panel_grid(n_panels: int, n_cols: int = 3, size: tuple[float, float] = (3.3, 2.6)):
    n_rows = math.ceil(n_panels / n_cols)
    fig, axes = plt.subplots(
        n_rows, n_cols, figsize=(size[0] * n_cols, size[1] * n_rows), squeeze=False
    )
    for ax in axes.flat[n_panels:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n_panels])


def head_column(heads: list[int], head: int) -> int:
    if head not in heads:
        raise ValueError(f"Head {head} is not among the heads given ({heads}); show only those.")
    return heads.index(head)


def unique_legend(ax, **kwargs) -> None:
    """A legend with one entry per label (scatter plots add one artist per point)."""
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    ax.legend(unique.values(), unique.keys(), **kwargs)
