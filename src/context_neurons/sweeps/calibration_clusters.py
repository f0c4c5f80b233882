"""Calibration texts clustered by their denominators (chapter 9, section 9.3; the book's notation
page ``book/notation.md``, section 3).

:func:`denominator_profiles` (``log D_h`` at a few positions) is what a calibration takes from a
text; a deterministic :func:`kmeans` groups texts by it, :func:`cluster_calibrations` picks one
calibration text per cluster (never in its own evaluation set), :func:`recalibrate` rebuilds the
circuit with another text's denominators and LayerNorm-2 scale, and :func:`compare_calibrations`
scores each cluster's texts under their cluster's calibration and under the default one;
:func:`weighted_means` averages those scores over the clusters (:class:`CalibrationMeans`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd
import torch
from einops import rearrange
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from context_neurons import circuit as cc
from context_neurons import decomposition as dec
from context_neurons import evaluation as ev
from context_neurons import stability as st
from context_neurons.checks import (
    InputError,
    check_heads,
    check_neurons,
    token_id,
)
from context_neurons.sweeps.shared import circuit_mean_keys



def profile_positions(length: int, count: int = 6, n_min: int = cc.N_MIN) -> Int[Tensor, " count"]:
    """``count`` positions evenly spread over ``n_min .. length - 1`` (where ``D`` has settled)."""
    if length - 1 < n_min or count < 1:
        raise InputError(f"Texts of {length} tokens have no position >= {n_min} to profile.")
    return torch.linspace(n_min, length - 1, count).round().long().unique()


@torch.no_grad()
def denominator_profiles(
    model: TransformerBridge,
    windows: list[Int[Tensor, " _pos"]],
    heads,
    positions: Int[Tensor, " n_positions"],
    dest_token: str | int = dec.DEFAULT_DESTINATION,
    mean_keys: Float[Tensor, "n_ctx head_index d_head"] | None = None,
    log_content: Float[Tensor, "ctx_head d_vocab"] | None = None,
) -> Float[Tensor, "text ctx_head n_positions"]:
    """``log D_h(n)`` of every text at ``positions``, with ``dest_token`` at ``n``
    (:func:`context_neurons.stability.log_denominators`, the calibration's denominators; mean keys
    by default from the default calibration text, as the default circuit's). With
    ``log_content`` (a circuit's ``log_content``, the content weights at its reference position)
    the denominators are read in the circuit's reference frame, as it reads its calibration's
    (:func:`~context_neurons.circuit.build.reference_log_denominators`); without it, with the
    content weights at each ``n`` (the destination frame)."""
    heads = check_heads(model, heads)
    length = min(len(w) for w in windows)
    positions = positions.to(model.cfg.device)
    if int(positions.max()) >= length:
        raise InputError(f"Positions must be below the shortest text's length, {length}.")
    kernels = st.log_kernels(model, length, dest_token, heads, mean_keys)[:, positions]
    terms = st.destination_terms(model, positions, dest_token, heads)
    dest = token_id(model, dest_token)
    rows = torch.arange(len(positions), device=positions.device)
    profiles = []
    for window in windows:  # the arithmetic of stability.log_denominators, at a few positions
        text = torch.as_tensor(window)[:length].to(model.cfg.device)
        if log_content is not None:  # c_{n_ref}(t_i) at every destination: the reference frame
            log_c = log_content[:, text][:, None].expand(-1, len(positions), -1).clone()
            log_c[:, rows, positions] = log_content[:, dest][:, None]
            profiles.append(torch.logsumexp(kernels + log_c, dim=-1).float().cpu())
            continue
        unique, inverse = torch.unique(
            torch.cat([text, text.new_tensor([dest])]), return_inverse=True
        )
        table = st.log_content_table(model, positions, unique, terms=terms)  # [head, n, token]
        log_c = table[:, :, inverse[:-1]]  # log c_n(t_i)
        log_c[:, rows, positions] = table[:, :, inverse[-1]]  # the destination at i = n
        profiles.append(torch.logsumexp(kernels + log_c, dim=-1).float().cpu())
    return torch.stack(profiles)


def kmeans(
    x: Float[Tensor, "n d"], k: int, n_iter: int = 100
) -> tuple[Int[Tensor, " n"], Float[Tensor, "k d"]]:
    """Deterministic k-means (Lloyd's iterations). The initial centres are the means of ``k``
    equal groups of the points sorted along their first principal component (its sign fixed by
    its largest entry): no outlier takes a centre of its own at the start, as it does when the
    farthest points seed the centres.

    Returns:
        Each point's cluster and the centres (each the mean of its points).
    """
    if not 1 <= k <= len(x):
        raise InputError(f"Need 1 <= k <= {len(x)} points, got k = {k}.")
    x = x.double()
    centred = x - x.mean(0)
    axis = torch.linalg.svd(centred, full_matrices=False).Vh[0]
    axis = axis * torch.sign(axis[axis.abs().argmax()])
    groups = torch.tensor_split((centred @ axis).argsort(stable=True), k)
    centres = torch.stack([x[group].mean(0) for group in groups])
    labels = torch.full((len(x),), -1, dtype=torch.long)
    for _ in range(n_iter):
        new = torch.cdist(x, centres).argmin(-1)
        if torch.equal(new, labels):
            break
        labels = new
        for c in range(k):
            if (labels == c).any():
                centres[c] = x[labels == c].mean(0)
    return labels, centres.float()


@dataclass
class ClusterCalibration:
    """Clusters of texts and one calibration text per cluster (:func:`cluster_calibrations`).

    Attributes:
        labels: each text's cluster.
        centres: the clusters' centres in profile space.
        calibration: cluster -> the index of its member nearest its centre.
        evaluation: cluster -> the indices of its other members.
        control: cluster -> the calibration text of the cluster whose centre is farthest away.
    """

    labels: Int[Tensor, " n_texts"]
    centres: Float[Tensor, "k d"]
    calibration: dict[int, int]
    evaluation: dict[int, list[int]]
    control: dict[int, int]


def merge_small_clusters(
    x: Float[Tensor, "n d"], labels: Int[Tensor, " n"], min_size: int
) -> tuple[Int[Tensor, " n"], Float[Tensor, "k d"]]:
    """Dissolve clusters of fewer than ``min_size`` points, smallest first (ties: the lowest
    label), moving each point to the nearest remaining centre; clusters are renumbered 0, 1, ...
    in order of their lowest point. One cluster always remains.

    Returns:
        The new labels and centres (each the mean of its points).
    """
    x = x.double()
    labels = labels.clone()
    while True:
        kept = sorted(set(labels.tolist()))
        sizes = {c: int((labels == c).sum()) for c in kept}
        small = [c for c in kept if sizes[c] < min_size]
        if not small or len(kept) == 1:
            break
        drop = min(small, key=lambda c: (sizes[c], c))
        others = [c for c in kept if c != drop]
        centres = torch.stack([x[labels == c].mean(0) for c in others])
        moved = labels == drop
        labels[moved] = torch.tensor(others)[torch.cdist(x[moved], centres).argmin(-1)]
    order = list(dict.fromkeys(labels.tolist()))
    labels = torch.tensor([order.index(c) for c in labels.tolist()])
    centres = torch.stack([x[labels == c].mean(0) for c in range(len(order))])
    return labels, centres.float()


def cluster_calibrations(
    profiles: Float[Tensor, "n_texts d"], k: int, exclude: list[int] = (), min_size: int = 3
) -> ClusterCalibration:
    """Cluster texts by their profiles; calibrate each cluster with its member nearest the centre.

    Args:
        profiles: one feature vector per text (flattened :func:`denominator_profiles`).
        k: the number of clusters k-means looks for.
        exclude: texts never to evaluate on (e.g. the default calibration text's own window).
        min_size: smaller clusters are merged into the nearest others
            (:func:`merge_small_clusters`): a cluster needs a calibration text and texts to
            evaluate on, and an outlier text would otherwise take a cluster of its own.
    """
    labels, _ = kmeans(profiles, k)
    labels, centres = merge_small_clusters(profiles, labels, min_size)
    gaps = torch.cdist(profiles.double(), centres.double())
    calibration, evaluation = {}, {}
    for c in range(len(centres)):
        members = (labels == c).nonzero().flatten().tolist()
        if not members:
            continue
        calibration[c] = min(members, key=lambda i: (float(gaps[i, c]), i))
        evaluation[c] = [i for i in members if i != calibration[c] and i not in set(exclude)]
        assert calibration[c] not in evaluation[c], (
            "a calibration text is in its own evaluation set"
        )
    between = torch.cdist(centres.double(), centres.double())
    control = {
        c: calibration[max((o for o in calibration if o != c), key=lambda o: float(between[c, o]))]
        for c in calibration
        if len(calibration) > 1
    }
    return ClusterCalibration(labels, centres, calibration, evaluation, control)


@torch.no_grad()
def recalibrate(
    circuit: cc.ContextualCircuit,
    model: TransformerBridge,
    tokens: Int[Tensor, " pos"],
    name: str = "custom",
    mean_keys: Float[Tensor, "n_ctx head_index d_head"] | None = None,
) -> cc.ContextualCircuit:
    """The circuit with another calibration text: its denominators ``D_h(n)``, ``Dhat_h`` and
    LayerNorm-2 scale, and the extended embeddings they give. Kernels, content weights and mean
    keys and values stay those of ``circuit`` (the token distribution ``M`` is not recalibrated),
    so the calibration's effect is isolated: equal to ``build_circuit(model, tokens, heads,
    reference_tokens=<circuit's calibration tokens without BOS>)``."""
    tokens = torch.as_tensor(tokens).to(model.cfg.device)
    mean_keys = circuit_mean_keys(circuit, model) if mean_keys is None else mean_keys
    calib = circuit.calibration
    if len(tokens) <= calib.n_min + 1:
        raise InputError(f"The calibration text needs more than {calib.n_min + 1} tokens.")
    if circuit.frame == "reference":  # the circuit's own frame (build_circuit's frame)
        log_d = circuit.text_log_denominators(model, tokens)
    else:
        log_d = cc.calibration_log_denominators(
            model, tokens, circuit.heads, mean_keys, circuit.dest_token
        )
    scales = cc.ln2_inverse_scales(model, tokens)
    calibration = cc.Calibration(
        name=name,
        tokens=tokens,
        log_denominators=log_d,
        n_min=calib.n_min,
        log_dhat=log_d[:, calib.n_min :].median(-1).values,
        ln2_inverse_scales=scales,
        ln2_scale=float(scales[1:].median()),
    )
    weights = torch.exp(circuit.log_content - calibration.log_dhat[:, None])
    weighted = circuit.token_values * rearrange(weights, "h t -> t h 1")
    extended = rearrange(weighted, "t h e -> t (h e)") @ rearrange(circuit.w_o, "h e d -> (h e) d")
    return replace(circuit, calibration=calibration, extended=extended, notes={})


@torch.no_grad()
def compare_calibrations(
    circuit: cc.ContextualCircuit,
    model: TransformerBridge,
    windows: list[Int[Tensor, " _pos"]],
    clusters: ClusterCalibration,
    neurons,
    truth_cache: dict | None = None,
) -> pd.DataFrame:
    """Median r and FVU on each cluster's evaluation texts for three calibrations: the circuit's
    default, the cluster's own calibration text, and the control (another cluster's text).

    Returns:
        One row per cluster with at least one evaluation text: the cluster's size, its calibration
        text's index, and ``(measure, calibration)`` columns.
    """
    neurons = check_neurons(model, neurons)
    cache = {} if truth_cache is None else truth_cache
    mean_keys = circuit_mean_keys(circuit, model)
    own = {
        c: recalibrate(circuit, model, windows[i], f"text {i}", mean_keys)
        for c, i in clusters.calibration.items()
    }
    rows = {}
    for c, texts in clusters.evaluation.items():
        if not texts:
            continue
        assert clusters.calibration[c] not in texts, "a calibration text is in its evaluation set"
        choices = {"default": circuit, "own cluster": own[c]}
        if c in clusters.control:
            choices["other cluster"] = own[_cluster_of(clusters, clusters.control[c])]
        row = {("texts", ""): len(texts), ("calibration text", ""): clusters.calibration[c]}
        for label, this in choices.items():
            result = ev.evaluate(
                this, model, [windows[i] for i in texts], neurons, truth_cache=cache
            )
            row[("median r", label)] = result.median_pearson
            row[("median FVU", label)] = result.median_fvu
        rows[c] = row
    table = pd.DataFrame(rows).T
    table.columns = pd.MultiIndex.from_tuples(table.columns)
    table.index.name = "cluster"
    return table


#: The measures of :func:`compare_calibrations` that :func:`weighted_means` averages.
MEASURES = ("median r", "median FVU")


@dataclass(frozen=True)
class CalibrationMeans:
    """:func:`compare_calibrations` averaged over the clusters, each weighted by its evaluation
    texts (:func:`weighted_means`).

    Attributes:
        table: one row per measure (:data:`MEASURES`), one column per calibration (``default``,
            ``own cluster``, ``other cluster``).
    """

    table: pd.DataFrame

    def findings(self) -> list[str]:
        """One line per measure: its weighted mean under each calibration."""
        return [
            f"{measure}: " + ", ".join(f"{name} {value:.3f}" for name, value in row.items())
            for measure, row in self.table.iterrows()
        ]


def weighted_means(comparison: pd.DataFrame) -> CalibrationMeans:
    """The means of :func:`compare_calibrations`'s ``comparison`` over its clusters, weighted by
    each cluster's number of evaluation texts (:class:`CalibrationMeans`)."""
    weights = comparison[("texts", "")].astype(float)
    rows = {
        measure: {
            column: float((comparison[(measure, column)].astype(float) * weights).sum()
                          / weights.sum())
            for column in comparison[measure].columns
        }
        for measure in MEASURES
    }
    table = pd.DataFrame(rows).T.rename_axis(index="measure", columns="calibration")
    return CalibrationMeans(table)


def _cluster_of(clusters: ClusterCalibration, text: int) -> int:
    return next(c for c, i in clusters.calibration.items() if i == text)
