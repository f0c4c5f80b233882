"""Whether a neuron reads one topic or several: its sub-latents (chapter 5, section 5.5).

A neuron may read two topics at once (the paper's neuron 1621: "war" minus "21st century").
:func:`sub_latents` clusters the extended embeddings of a neuron's top tokens, after removing their
common component along the neuron's read vector, with spherical k-means: tokens of one topic share
a direction, tokens of two topics fall into two clusters. :func:`centroid_cosines` says how clearly
each neuron splits.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor

from context_neurons import decomposition as dec
from context_neurons.checks import InputError, check_neuron
from context_neurons.circuit.build import ContextualCircuit
from context_neurons.discovery.scores import read_vectors
from context_neurons.discovery.tokens import token_str, top_tokens
from context_neurons.models.weights import Model


@dataclass
class SubLatents:
    """Clusters of a neuron's top tokens (:func:`sub_latents`).

    Attributes:
        table: one row per token: token, contribution, cluster.
        centroid_cosine: cosine similarity between the cluster centroids (near 1: one latent).
        within_cosine: mean cosine of each token to its own centroid.
        singular_values: of the residual embeddings (how many directions the tokens span).
    """

    table: pd.DataFrame
    centroid_cosine: Float[Tensor, "n_clusters n_clusters"]
    within_cosine: Float[Tensor, " n_clusters"]
    singular_values: Float[Tensor, " k"]


def spherical_kmeans(
    x: Float[Tensor, "n d"], n_clusters: int, n_iter: int = 50
) -> tuple[Int[Tensor, " n"], Float[Tensor, "n_clusters d"]]:
    """Deterministic spherical k-means (farthest-point initialisation from the first row)."""
    x = torch.nn.functional.normalize(x, dim=-1)
    centres = [x[0]]
    for _ in range(1, n_clusters):
        sim = torch.stack([x @ c for c in centres]).max(0).values
        centres.append(x[sim.argmin()])
    centres = torch.stack(centres)
    labels = torch.full((len(x),), -1, dtype=torch.long, device=x.device)
    for _ in range(n_iter):
        new = (x @ centres.T).argmax(-1)
        for c in range(n_clusters):
            if (new == c).any():
                centres[c] = torch.nn.functional.normalize(x[new == c].sum(0), dim=0)
        if torch.equal(new, labels):
            break
        labels = new
    return labels, centres


@torch.no_grad()
def sub_latents(
    circuit: ContextualCircuit,
    model: Model,
    neuron,
    k: int = 60,
    n_clusters: int = 2,
    side: str = "top",
) -> SubLatents:
    """Cluster the extended embeddings of a neuron's ``k`` top tokens into sub-latents.

    Every top token's embedding has a large component along the neuron's read vector ``w_j`` (that
    is why it is a top token), so we remove that component and cluster what remains: the direction
    *within* the tokens that feed the neuron. Tokens are ordered by cluster, then contribution.
    """
    j = check_neuron(model, neuron)
    if n_clusters < 1 or k < n_clusters:
        raise InputError(f"Need 1 <= n_clusters <= k, got n_clusters={n_clusters}, k={k}.")
    ids, values = top_tokens(circuit, model, j, k, side)
    w = read_vectors(circuit, model, [j])[:, 0]
    w = w / w.norm()
    e = dec.centred(circuit.extended[ids])
    residual = e - (e @ w)[:, None] * w[None]
    labels, centres = spherical_kmeans(residual, n_clusters)
    unit = torch.nn.functional.normalize(residual, dim=-1)
    nan = torch.full((), float("nan"), device=unit.device)
    within = torch.stack(
        [
            (unit[labels == c] @ centres[c]).mean() if (labels == c).any() else nan
            for c in range(n_clusters)
        ]
    )
    table = pd.DataFrame(
        {
            "token": [token_str(model, t) for t in ids.tolist()],
            "contribution": values.cpu().tolist(),
            "cluster": labels.cpu().tolist(),
        }
    ).sort_values(["cluster", "contribution"], ascending=[True, side == "bottom"])
    return SubLatents(
        table=table.reset_index(drop=True),
        centroid_cosine=(centres @ centres.T).cpu(),
        within_cosine=within.cpu(),
        singular_values=torch.linalg.svdvals(residual).cpu(),
    )


def centroid_cosines(split: dict[int, SubLatents]) -> pd.Series:
    """The cosine of the two cluster centroids of each neuron's :class:`SubLatents` (the first
    two clusters), by neuron: clearly below 0, two topics; near or above 0, one."""
    return pd.Series(
        {j: float(s.centroid_cosine[0, 1]) for j, s in split.items()}, name="centroid cosine"
    )
