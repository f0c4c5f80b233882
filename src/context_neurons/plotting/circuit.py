"""Figures of chapter 4: the circuit's kernels and denominators, and how well it fits."""

from __future__ import annotations

import matplotlib.pyplot as plt
import matplotlib.ticker as ticker
import numpy as np
import torch

from context_neurons.plotting.style import head_colour, moving_average


def plot_kernels(circuit, n: int, window: int = 150, title: str = ""):
    """Each contextual head's positional pattern at destination ``n`` and the median kernel.

    ``title`` names the model (the figure's title adds what is drawn).
    """
    fig, ax = plt.subplots(figsize=(8, 3.4))
    lo = max(0, n - window + 1)
    x = np.arange(lo, n + 1)
    for row, head in enumerate(circuit.heads):
        ax.plot(
            x,
            circuit.head_kernels[row, n, lo : n + 1].cpu(),
            lw=1.0,
            color=head_colour(head),
            label=f"head {head}",
        )
    ax.plot(x, circuit.kernel[n, lo : n + 1].cpu(), "k--", lw=2.0, label="median kernel K")
    ax.set_xlabel("source position i")
    ax.set_ylabel(f"pos_n(i), n = {n}")
    what = "positional patterns of the contextual heads, destination ' the'"
    ax.set_title(f"{title}: {what}" if title else what, fontsize=10)
    ax.legend(ncol=4, fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


def plot_calibration_denominators(circuit, smooth: int = 1, title: str = ""):
    """``log D_h(n)`` along the calibration text, with the median ``log Dhat_h`` as dashed lines.

    ``title`` names the model (the figure's title adds what is drawn).
    """
    calib = circuit.calibration
    fig, ax = plt.subplots(figsize=(8, 3.4))
    for row, head in enumerate(circuit.heads):
        x, y = moving_average(calib.log_denominators[row], smooth)
        ax.plot(x, y, lw=1.0, color=head_colour(head), label=f"head {head}")
        ax.axhline(float(calib.log_dhat[row]), color=head_colour(head), ls="--", lw=0.8)
    ax.axvline(calib.n_min, color="grey", ls=":", lw=1.0)
    ax.text(calib.n_min, ax.get_ylim()[1], f" n_min = {calib.n_min}", va="top", fontsize=8)
    ax.set_xlabel("destination position n (calibration text)")
    ax.set_ylabel("log D_h(n)")
    what = f"denominators on the calibration text '{calib.name}', destination ' the'"
    ax.set_title(f"{title}: {what}" if title else what, fontsize=10)
    ax.legend(ncol=6, fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig


def plot_circuit_fit(
    errors: dict[str, torch.Tensor],
    smooth: int = 15,
    ylabel: str = "",
    title: str = "",
    log: bool = True,
):
    """Error measures along the positions (median over texts), one line per approximation.

    Args:
        errors: name -> ``[batch, pos]`` error (e.g. ``CircuitFit.relative_error``).
        smooth: moving-average width.
        ylabel: the vertical axis' label (default "relative error").
        title: the figure's title (name the model that produced it).
        log: a logarithmic vertical axis, so that errors of different sizes can be compared.
    """
    fig, ax = plt.subplots(figsize=(8, 3.6))
    for name, err in errors.items():
        x, y = moving_average(err[:, 1:].median(0).values, smooth)
        ax.plot(x + 1, y, lw=1.3, label=name)
    ax.set_xlabel("destination position n")
    ax.set_ylabel((ylabel or "relative error") + (" (log scale)" if log else ""))
    if log:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    else:
        ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_output_scatter(
    true: torch.Tensor, approx: torch.Tensor, n_points: int = 4000, seed: int = 0, title: str = ""
):
    """Coordinates of the true against the approximate output (a random sample of entries)."""
    t, a = true.flatten().cpu(), approx.flatten().cpu()
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randperm(len(t), generator=gen)[:n_points]
    fig, ax = plt.subplots(figsize=(4.2, 4.0))
    ax.scatter(t[idx], a[idx], s=3, alpha=0.4)
    lim = float(max(t[idx].abs().max(), a[idx].abs().max()))
    ax.plot([-lim, lim], [-lim, lim], "k--", lw=0.8)
    ax.set_xlabel("true output coordinate")
    ax.set_ylabel("approximation")
    ax.set_aspect("equal")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


def plot_frame_drift(shift: torch.Tensor, heads: list[int], title: str = ""):
    """``log D_ref(n) - log D_dest(n)`` along the calibration text, one line per head: the factor
    (in nats) by which the bag's weights miss summing to 1 when the denominators are read in the
    destination frame (:mod:`context_neurons.evaluation.failure`); 0 is the reference frame.

    ``title`` names the model (the figure's title adds what is drawn).
    """
    fig, ax = plt.subplots(figsize=(8, 3.4))
    x = np.arange(1, shift.shape[1])
    for row, head in enumerate(heads):
        ax.plot(x, shift[row, 1:].cpu(), lw=1.0, color=head_colour(head), label=f"head {head}")
    ax.axhline(0.0, color="black", lw=0.8)
    ax.set_xlabel("destination position n (calibration text)")
    ax.set_ylabel("log bag-weight total (nats)")
    what = "the bag's weights in the destination frame (0: they sum to 1)"
    ax.set_title(f"{title}: {what}" if title else what, fontsize=10)
    ax.legend(ncol=6, fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig
