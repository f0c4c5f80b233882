"""How fast is it? This module times the approximation against the model's first layer, fused and
through TransformerLens's hooks, on the same texts (chapter 6, section 6.3)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import torch
from jaxtyping import Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from context_neurons.circuit import ContextualCircuit
from context_neurons.evaluation.approximation import approximator, true_pre_activations
from context_neurons.text.windows import pad_windows


def best_time(fn: Callable[[], object], device, repeats: int = 3) -> float:
    """Best wall-clock time of ``fn()`` over ``repeats`` runs, after one warm-up run (on a CUDA
    ``device``, synchronised before and after each run)."""
    cuda = torch.device(device).type == "cuda"
    fn()
    times = []
    for _ in range(repeats):
        if cuda:
            torch.cuda.synchronize()
        begin = time.perf_counter()
        fn()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - begin)
    return min(times)


@dataclass(frozen=True)
class Timings:
    """Seconds (best of a few runs) to get the pre-activations of some neurons on some texts.

    Attributes:
        n_texts: the texts, one batch.
        n_neurons: the neurons.
        approximation: the circuit's approximation (no model run).
        first_layer: the model's first layer, fused attention (``true_pre_activations``).
        hooks: the first layer through TransformerLens's hooks (``run_with_cache``).
    """

    n_texts: int
    n_neurons: int
    approximation: float
    first_layer: float
    hooks: float

    def finding(self) -> str:
        """The three times, the model's as multiples of the approximation's, and which is faster
        than the fused first layer."""
        t_approx, t_layer0, t_hooks = self.approximation, self.first_layer, self.hooks
        return (
            f"{self.n_texts} texts, {self.n_neurons} neurons: approximation {t_approx:.3f} s; "
            f"first layer, fused {t_layer0:.3f} s ({t_layer0 / t_approx:.1f}x); first layer "
            f"through hooks {t_hooks:.3f} s ({t_hooks / t_approx:.1f}x): here the approximation "
            f"is {'faster' if t_approx < t_layer0 else 'slower'} than the fused first layer"
        )


def time_approximation(circuit: ContextualCircuit, model: TransformerBridge,
                       windows: list[Int[Tensor, " _pos"]], neurons,
                       repeats: int = 3) -> Timings:
    """:class:`Timings` of ``neurons`` on ``windows`` (one padded batch), each the best of
    ``repeats`` runs after a warm-up run."""
    batch, _ = pad_windows(windows)
    batch = batch.to(model.cfg.device)
    approx_fn = approximator(circuit, model, neurons)
    device = model.cfg.device
    t_approx = best_time(lambda: approx_fn(batch), device, repeats)
    t_layer0 = best_time(lambda: true_pre_activations(model, batch, neurons), device, repeats)
    t_hooks = best_time(
        lambda: model.run_with_cache(batch, stop_at_layer=1, names_filter="blocks.0.mlp.hook_pre"),
        device, repeats,
    )
    return Timings(len(windows), len(neurons), t_approx, t_layer0, t_hooks)
