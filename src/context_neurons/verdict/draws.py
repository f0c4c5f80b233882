"""The random draws of every protocol, each from its own seeded generator (issue 51: v1/v2's
``evaluate`` and v3's ``v3`` drew them with copies of the same lines): the paired bootstrap's
cluster weights and neuron draws, the neurons-permuted control's permutation, and random read
directions with the read vectors' norms. Each draw has a generator of its own, so the order in
which they are made does not change them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor

import context_neurons.verdict.statistics as st


@dataclass(frozen=True)
class Draws:
    """The paired draws shared by the score and every baseline: cluster weights ``[resample,
    window]``, neuron draws ``[resample, neuron]`` and the neurons permutation of the control."""

    weights: Float[np.ndarray, "resample window"]
    neurons: Int[np.ndarray, "resample neuron"]
    permutation: Int[np.ndarray, " neuron"]


def _generator(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


def paired_draws(domain_index: Int[np.ndarray, " window"], clusters: list[str],
                 n_resamples: int, d_mlp: int, units_seed: int, neurons_seed: int,
                 permutation_seed: int) -> Draws:
    """:class:`Draws`: clusters (v1/v2's documents, v3's units) drawn with replacement within
    each domain (:func:`~.statistics.cluster_weights`), neurons drawn with replacement, and one
    permutation of the neurons, each from its seed."""
    return Draws(st.cluster_weights(domain_index, clusters, n_resamples, units_seed),
                 _generator(neurons_seed).integers(0, d_mlp, size=(n_resamples, d_mlp)),
                 _generator(permutation_seed).permutation(d_mlp))


def random_read_directions(read: Float[Tensor, "d_model d_mlp"],
                           seed: int) -> Float[Tensor, "d_model d_mlp"]:
    """Gaussian directions from ``seed`` (drawn on the CPU), each scaled to its read vector's
    norm, on ``read``'s device: the random-direction control's read vectors."""
    generator = torch.Generator().manual_seed(seed)
    random = torch.randn(read.shape, generator=generator, dtype=read.dtype)
    random = random / random.norm(dim=0, keepdim=True) * read.norm(dim=0, keepdim=True).cpu()
    return random.to(read.device)


__all__ = ["Draws", "paired_draws", "random_read_directions"]
