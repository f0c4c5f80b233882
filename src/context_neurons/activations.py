"""Truth from activations. This module defines context neurons by what they do on labelled text.

Discovery (chapter 5) finds context neurons from the weights. On a model whose structure nobody
wrote (the trained model, GPT-2) there is no planted list to check it against, so the truth must
be measured, from activations alone and without the discovery's own rule:

1. **Separation.** On held-out windows whose domain is known (a corpus label), take each layer-0
   neuron's mean pre-activation over a window's positions ``>= start`` (the first tokens have no
   context yet). For each domain, the one-vs-rest AUC of those window means: the probability that
   a window of the domain has a higher mean than a window of another domain (0.5: no separation;
   1 or 0: perfect). A neuron's domain is where ``|AUC - 0.5|`` is largest, its *separation*.
2. **Through the contextual heads.** Mean-ablate the contextual heads (their ``hook_z`` replaced by
   its mean over the same windows' positions) and measure the AUC again for that domain. The share
   of the separation the ablation removes is ``1 - |AUC_ablated - 0.5| / |AUC - 0.5|``.

A neuron is a **context neuron by activation** when its separation is at least
:data:`MIN_SEPARATION` (AUC >= 0.9 or <= 0.1) and the ablation removes at least
:data:`MIN_REMOVED` of it. Both thresholds are fixed here, before any comparison with discovery.
A neuron that separates a domain through the current token alone (the direct path) fails the
second test: its separation survives the ablation.

The pre-registered protocols ablate several head sets on the same windows. Everything before a
head's ``hook_z`` is the same in each, so :class:`LayerZeroPasses` computes it once per window and
each ablation's rest of layer 0 from the weights (:func:`ln2_output`, then ``W_in``). Layer 0 is
computed from the weights (:func:`attention_from_weights`, several times faster than the
bridge's hooked attention), tested against the hooks; every pass checks its first batch against
the model's own hooks up to the MLP's input, so weights read wrongly raise instead of giving a
truth.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd
import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Int
from torch import Tensor
from tqdm.auto import tqdm
from transformer_lens.model_bridge import TransformerBridge

from context_neurons.checks import InputError, ModelLoadError, check_heads
from context_neurons.evaluation import masked_mean, position_mask
from context_neurons.hooks import run_until
from context_neurons.models.weights import ModelWeights, as_weights
from context_neurons.taxonomy import PREVIOUS_TOKEN_MIN  # noqa: F401  (the protocols' name)
from context_neurons.text.windows import pad_windows

#: A neuron separates a domain when its one-vs-rest AUC is at least 0.5 + this (or at most 0.5 -).
MIN_SEPARATION = 0.4
#: ... and it does so through the contextual heads when their ablation removes this share of it.
MIN_REMOVED = 0.5
#: First position of a window's mean (the bag of tokens is empty at the start of a text).
START = 32


@torch.no_grad()
def window_means(
    model: TransformerBridge,
    windows: list[Int[Tensor, " _pos"]],
    start: int = START,
    ablate: list[int] | None = None,
    mean_z: Float[Tensor, "head_index d_head"] | None = None,
    batch_size: int = 8,
    progress: bool = False,
) -> Float[Tensor, "n_windows d_mlp"]:
    """Each layer-0 neuron's mean pre-activation over each window's positions ``>= start``.

    Args:
        model: the model.
        windows: token windows, BOS first.
        start: first position averaged.
        ablate: layer-0 heads to mean-ablate (their ``hook_z`` replaced by ``mean_z``).
        mean_z: the value each ablated head's ``hook_z`` is set to (:func:`mean_head_z`).
        batch_size: windows per batch of :class:`LayerZeroPasses`.
        progress: show a progress bar.
    """
    passes, z = _passes(model, windows, start, ablate, mean_z, batch_size, progress)
    return passes.means(z)


@torch.no_grad()
def window_moments(
    model: TransformerBridge,
    windows: list[Int[Tensor, " _pos"]],
    start: int = START,
    ablate: list[int] | None = None,
    mean_z: Float[Tensor, "head_index d_head"] | None = None,
    batch_size: int = 8,
    progress: bool = False,
) -> tuple[Float[Tensor, "n_windows d_mlp"], Float[Tensor, "n_windows d_mlp"]]:
    """:func:`window_means` and each window's mean of *squared* pre-activations (same positions),
    from the same pass (:class:`LayerZeroPasses`): the single-position spread of protocol v2."""
    passes, z = _passes(model, windows, start, ablate, mean_z, batch_size, progress)
    return passes.moments(z)


def _passes(model, windows, start, ablate, mean_z, batch_size, progress) -> tuple[
        LayerZeroPasses, list[Tensor] | None]:
    """The windows' :class:`LayerZeroPasses` and its ``z`` with ``ablate`` mean-ablated (None:
    none ablated)."""
    if ablate and mean_z is None:
        raise InputError("Mean-ablation needs mean_z (see mean_head_z).")
    heads = check_heads(model, ablate) if ablate else []
    passes = LayerZeroPasses.run(model, windows, start, batch_size, progress)
    return passes, passes.mean_ablated_z(heads, mean_z) if heads else None


def ln2_output(
    weights: ModelWeights,
    resid: Float[Tensor, "batch pos d_model"],
    z: Float[Tensor, "batch pos head_index d_head"],
) -> Float[Tensor, "batch pos d_model"]:
    """LayerNorm 2's output from ``blocks.0.hook_resid_pre`` and ``blocks.0.attn.hook_z``: the
    output projection, the residual and LayerNorm 2 (``@ W_in + b_in`` gives
    ``blocks.0.mlp.hook_pre``, tested against the hook through the window means)."""
    x = resid + z.flatten(-2) @ weights.W_O.flatten(0, 1) + weights.b_O  # every head's output
    return F.layer_norm(x, x.shape[-1:], weights.ln2_w, weights.ln2_b, weights.cfg.eps)


def causal_attention(
    q: Float[Tensor, "batch head pos d_head"],
    k: Float[Tensor, "batch head pos d_head"],
    v: Float[Tensor, "batch head pos d_head"],
    scale: float,
) -> tuple[Float[Tensor, "batch head pos d_head"], Float[Tensor, "batch head pos"]]:
    """Causal attention's output and each query's attention on the key before it (position 0:
    0). On a CPU one fused kernel gives both (the kernel ``scaled_dot_product_attention`` runs
    there, and its log-sum-exp of the scores); elsewhere the log-sum-exp is computed from the
    scores. ``A[n, n-1] = exp(q_n . k_{n-1} * scale - logsumexp_m(q_n . k_m * scale))``."""
    fused = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    if q.device.type == "cpu" and q.dtype == torch.float32 and fused is not None:
        z, lse = fused(q, k, v, 0.0, True, attn_mask=None, scale=scale)
    else:
        z = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
        scores = (q @ k.transpose(-1, -2)) * scale  # [batch, head, query, key]
        later = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).triu(1)
        lse = scores.masked_fill_(later, float("-inf")).logsumexp(-1)
    adjacent = (q[:, :, 1:] * k[:, :, :-1]).sum(-1) * scale  # [batch, head, pos - 1]
    return z, F.pad(torch.exp(adjacent - lse[:, :, 1:]), (1, 0))


class LayerZeroAttention(NamedTuple):
    """Layer 0 up to its heads' outputs, for a batch of token sequences."""

    resid: Float[Tensor, "batch pos d_model"]  # blocks.0.hook_resid_pre
    z: Float[Tensor, "batch pos head_index d_head"]  # blocks.0.attn.hook_z
    previous: Float[Tensor, "batch head_index pos"]  # hook_pattern[:, :, n, n - 1] (0 at n = 0)


def attention_from_weights(weights: ModelWeights, tokens: Int[Tensor, "batch pos"]
                           ) -> LayerZeroAttention:
    """``blocks.0.hook_resid_pre``, ``blocks.0.attn.hook_z`` and each head's attention from
    position ``n`` to ``n - 1`` (``hook_pattern[:, :, n, n - 1]``; 0 at ``n = 0``) from the
    weights: embeddings, LN1, the projections and causal attention (:func:`causal_attention`),
    several times faster than the bridge's hooked attention. Padding after a window's end changes
    none of its positions."""
    resid = weights.W_E[tokens] + weights.W_pos[: tokens.shape[1]]
    x = F.layer_norm(resid, resid.shape[-1:], weights.ln1_w, weights.ln1_b, weights.cfg.eps)
    q, k, v = (torch.einsum("bpd,hde->bhpe", x, w) + b[:, None]
               for w, b in map(weights.projection, "QKV"))
    z, previous = causal_attention(q, k, v, 1 / weights.cfg.attn_scale)
    return LayerZeroAttention(resid, z.transpose(1, 2), previous)


#: How far :func:`attention_from_weights` may be from the hooks, relative to the largest value
#: (or 1).
HOOK_TOLERANCE = 1e-4


@torch.no_grad()
def layer_zero_inputs(
    model: TransformerBridge, tokens: Int[Tensor, "batch pos"], check: bool = False
) -> LayerZeroAttention:
    """:func:`attention_from_weights` of the model; ``check``: also run the model to
    ``blocks.0.mlp.hook_pre`` and raise :class:`~context_neurons.checks.ModelLoadError` unless
    the residual, every head's ``z`` and previous-token attention and the pre-activations
    computed from the weights (:func:`ln2_output`, ``W_in``) all agree with the hooks on the
    batch's first sequence. Every pass below checks its first batch, so weights read wrongly,
    anywhere in layer 0, raise instead of giving a truth."""
    weights = as_weights(model)
    mine = attention_from_weights(weights, tokens)
    if check:
        _check_against_hooks(model, tokens[:1], LayerZeroAttention(*(x[:1] for x in mine)))
    return mine


def _check_against_hooks(model: TransformerBridge, tokens: Int[Tensor, "1 pos"],
                         mine: LayerZeroAttention) -> None:
    """Raise :class:`~context_neurons.checks.ModelLoadError` unless ``mine`` (one sequence: the
    hooked pass is the slow one) and the pre-activations from it agree with the model's hooks."""
    weights = as_weights(model)
    names = ["blocks.0.hook_resid_pre", "blocks.0.attn.hook_z", "blocks.0.attn.hook_pattern"]
    hooked = run_until(model, tokens, "blocks.0.mlp.hook_pre", names=names)
    n = torch.arange(1, tokens.shape[1], device=tokens.device)
    pairs = {names[0]: (mine.resid, hooked[names[0]]), names[1]: (mine.z, hooked[names[1]]),
             names[2]: (mine.previous[:, :, 1:], hooked[names[2]][:, :, n, n - 1]),
             "blocks.0.mlp.hook_pre": (ln2_output(weights, mine.resid, mine.z) @ weights.W_in
                                       + weights.b_in, hooked["blocks.0.mlp.hook_pre"])}
    for name, (ours, theirs) in pairs.items():
        error = float((ours - theirs).abs().max())
        if error > HOOK_TOLERANCE * max(float(theirs.abs().max()), 1.0):
            raise ModelLoadError(f"Layer 0 computed from the weights is {error:.2g} away "
                                 f"from the model's {name}: its weights are not read right.")


def _checked_batches(model: TransformerBridge, windows: list[Int[Tensor, " _pos"]],
                     batch_size: int, progress: bool = False) -> Iterator[tuple[
                         Int[Tensor, "batch pos"], Tensor, LayerZeroAttention]]:
    """Per batch of windows: the padded tokens, their lengths and layer 0's attention
    (:func:`layer_zero_inputs`, the first batch checked against the hooks)."""
    for b in tqdm(range(0, len(windows), batch_size), desc="windows", disable=not progress):
        tokens, lengths = pad_windows(windows[b : b + batch_size])
        tokens = tokens.to(model.cfg.device)
        yield tokens, lengths, layer_zero_inputs(model, tokens, check=b == 0)


def donor_windows(labels: list[str]) -> list[int]:
    """The resample ablation's donors: window ``i`` takes its heads' ``hook_z`` from window
    ``(i + offset) mod n``, the first offset that leaves its label (domain)."""
    n = len(labels)
    return [next(((i + k) % n for k in range(1, n) if labels[(i + k) % n] != labels[i]), -1)
            for i in range(n)]


@dataclass(frozen=True)
class LayerZeroPasses:
    """One pass over windows up to ``blocks.0.attn.hook_z`` (:func:`layer_zero_inputs`, the first
    batch checked against the hooks): each window's residual stream entering layer 0 and every
    head's ``z``. Any head set's ablation then costs the rest of layer 0 up to the MLP's input
    (:func:`ln2_output`, then ``W_in``), not another pass."""

    weights: ModelWeights
    # One entry per batch of windows (their sizes differ: the last batch, the padded lengths).
    resid: list[Tensor]  # [batch, pos, d_model]
    z: list[Tensor]  # [batch, pos, head_index, d_head]
    mask: list[Tensor]  # [batch, pos], bool: the real positions >= start
    real: list[Tensor]  # [batch, pos], bool: every real position

    @classmethod
    @torch.no_grad()
    def run(cls, model: TransformerBridge, windows: list[Int[Tensor, " _pos"]],
            start: int = START, batch_size: int = 8, progress: bool = False) -> LayerZeroPasses:
        resid, zs, masks, reals = [], [], [], []
        for tokens, lengths, layer in _checked_batches(model, windows, batch_size, progress):
            resid.append(layer.resid)
            zs.append(layer.z)
            masks.append(position_mask(tokens, lengths, start))
            reals.append(position_mask(tokens, lengths, 0))
        return cls(as_weights(model), resid, zs, masks, reals)

    def _normed(self, z: list[Tensor] | None) -> Iterator[tuple[Tensor, Tensor]]:
        """Per batch: LayerNorm 2's output with ``z`` in place of the pass's, and the mask."""
        for resid, own, mask in zip(self.resid, z or self.z, self.mask):
            yield ln2_output(self.weights, resid, own), mask

    def _pre_mean(self, normed: Tensor, mask: Tensor) -> Tensor:
        # A window mean commutes with W_in: the mean of LayerNorm 2's outputs, then W_in.
        return masked_mean(normed, mask) @ self.weights.W_in + self.weights.b_in

    @torch.no_grad()
    def moments(self, z: list[Tensor] | None = None) -> tuple[
        Float[Tensor, "n_windows d_mlp"], Float[Tensor, "n_windows d_mlp"]
    ]:
        """Each window's mean pre-activation and mean squared pre-activation over its positions
        ``>= start`` (:func:`window_moments`), with ``z`` in place of the pass's (per batch)."""
        means, squares = [], []
        for normed, mask in self._normed(z):
            pre = normed @ self.weights.W_in + self.weights.b_in
            means.append(self._pre_mean(normed, mask).cpu())
            squares.append(masked_mean(pre.square_(), mask).cpu())
        return torch.cat(means), torch.cat(squares)

    @torch.no_grad()
    def means(self, z: list[Tensor] | None = None) -> Float[Tensor, "n_windows d_mlp"]:
        """The first of :meth:`moments` alone (the same numbers, without the squares' work)."""
        return torch.cat([self._pre_mean(normed, mask).cpu() for normed, mask in self._normed(z)])

    def mean_z(self) -> Float[Tensor, "head_index d_head"]:
        """:func:`mean_head_z` of the pass's windows (the same batches: the same number),
        without another forward pass."""
        return _mean_z(zip(self.z, self.real))

    def mean_ablated_z(self, heads: list[int], mean_z: Float[Tensor, "head_index d_head"]
                       ) -> list[Tensor]:
        """The pass's ``z`` with ``heads``' set to ``mean_z`` (per batch, for :meth:`moments`)."""
        heads = check_heads(self.weights, heads)
        z = [own.clone() for own in self.z]
        for own in z:
            own[:, :, heads] = mean_z[heads].to(own)
        return z

    def ablated(self, heads: list[int], mean_z: Float[Tensor, "head_index d_head"]
                ) -> Float[Tensor, "n_windows d_mlp"]:
        """Window means with ``heads`` mean-ablated (their ``z`` set to ``mean_z``)."""
        return self.means(self.mean_ablated_z(heads, mean_z))

    def resampled(self, heads: list[int], donors: list[int]) -> Float[Tensor, "n_windows d_mlp"]:
        """Window means with ``heads``' ``z`` taken from window ``donors[i]`` (equal lengths)."""
        heads = check_heads(self.weights, heads)
        flat = [own[r] for own in self.z for r in range(len(own))]
        if len({w.shape[0] for w in flat}) > 1 or min(donors) < 0:
            raise InputError("The resample ablation needs windows of one length and a donor of "
                             "another domain for each.")
        z, i = [own.clone() for own in self.z], 0
        for own in z:
            for r in range(len(own)):
                own[r, :, heads] = flat[donors[i]][:, heads]
                i += 1
        return self.means(z)


@torch.no_grad()
def mean_head_z(
    model: TransformerBridge, windows: list[Int[Tensor, " _pos"]], batch_size: int = 8
) -> Float[Tensor, "head_index d_head"]:
    """The mean ``blocks.0.attn.hook_z`` of every layer-0 head over all real positions (one
    batch in memory at a time; :meth:`LayerZeroPasses.mean_z` for windows already passed):
    :func:`head_statistics`' ``mean_z``."""
    return head_statistics(model, windows, batch_size=batch_size).mean_z


def _mean_z(batches: Iterable[tuple[Tensor, Tensor]]) -> Float[Tensor, "head_index d_head"]:
    """The mean of ``z`` ``[batch, pos, head, d_head]`` over the positions its mask ``[batch,
    pos]`` keeps, batch after batch."""
    total, count = 0.0, 0
    for z, real in batches:
        total, count = _add_z(total, count, z, real)
    return total / count


def _add_z(total: Tensor | float, count: int, z: Float[Tensor, "batch pos head_index d_head"],
           real: Bool[Tensor, "batch pos"]) -> tuple[Tensor, int]:
    """The running sum and count of :func:`_mean_z` with one more batch."""
    return total + torch.einsum("bphe,bp->he", z, real.to(z.dtype)), count + int(real.sum())


def one_vs_rest_auc(
    values: Float[Tensor, "n_windows n_neurons"], labels: list[str], domains: list[str]
) -> Float[Tensor, "n_neurons n_domains"]:
    """AUC of each domain's windows against all others, per neuron (ties count one half)."""
    label_index = torch.tensor([domains.index(label) for label in labels])
    ranks = _average_ranks(values.double())  # [window, neuron], 1-based
    aucs = []
    for d in range(len(domains)):
        inside = label_index == d
        n_in, n_out = int(inside.sum()), int((~inside).sum())
        if n_in == 0 or n_out == 0:
            raise InputError(f"Domain {domains[d]!r} needs windows inside and outside it.")
        rank_sum = ranks[inside].sum(0)
        aucs.append((rank_sum - n_in * (n_in + 1) / 2) / (n_in * n_out))
    return torch.stack(aucs, dim=1).float()


def _average_ranks(x: Float[Tensor, "n m"]) -> Float[Tensor, "n m"]:
    """Ranks 1..n of each column, tied values given their average rank."""
    order = x.argsort(dim=0)
    ranks = torch.empty_like(x)
    positions = torch.arange(1, x.shape[0] + 1, dtype=x.dtype)[:, None].expand_as(x)
    ranks.scatter_(0, order, positions)
    sorted_x = x.gather(0, order)
    for col in range(x.shape[1]):  # average the ranks of ties (rare for real activations)
        values, inverse, counts = torch.unique(sorted_x[:, col], return_inverse=True,
                                               return_counts=True)
        if len(values) == x.shape[0]:
            continue
        mean_rank = torch.zeros(len(values), dtype=x.dtype).index_add_(0, inverse, positions[:, 0])
        mean_rank = mean_rank / counts
        ranks[order[:, col], col] = mean_rank[inverse]
    return ranks


@dataclass
class ActivationTruth:
    """Which layer-0 neurons separate a domain, and through which heads (module docstring).

    Attributes:
        domains: the domains (columns of ``auc``).
        heads: the contextual heads that were ablated.
        auc: one-vs-rest AUC of window means, ``[neuron, domain]``.
        auc_ablated: the same with the contextual heads mean-ablated.
        n_windows: windows per domain.
    """

    domains: list[str]
    heads: list[int]
    auc: Float[Tensor, "d_mlp n_domains"]
    auc_ablated: Float[Tensor, "d_mlp n_domains"]
    n_windows: dict[str, int]

    @functools.cached_property
    def best(self) -> Int[Tensor, " d_mlp"]:
        """Each neuron's domain: the column of its largest ``|AUC - 0.5|``."""
        return (self.auc - 0.5).abs().argmax(1)

    @property
    def separation(self) -> Float[Tensor, " d_mlp"]:
        """``|AUC - 0.5|`` at each neuron's domain."""
        return (self.auc - 0.5).abs().gather(1, self.best[:, None])[:, 0]

    @property
    def removed(self) -> Float[Tensor, " d_mlp"]:
        """The share of the separation the ablation removes (negative: ablation increases it)."""
        ablated = (self.auc_ablated - 0.5).abs().gather(1, self.best[:, None])[:, 0]
        return 1 - ablated / self.separation.clamp(min=1e-6)

    def domain_of(self, neuron: int) -> str:
        return self.domains[int(self.best[int(neuron)])]

    def mask(
        self, min_separation: float = MIN_SEPARATION, min_removed: float = MIN_REMOVED
    ) -> Bool[Tensor, " d_mlp"]:
        """Context neurons by activation: separating a domain, through the contextual heads."""
        return (self.separation >= min_separation) & (self.removed >= min_removed)

    def context_neurons(self, **thresholds: float) -> list[int]:
        """The context neurons by activation, most separating first."""
        idx = self.mask(**thresholds).nonzero().flatten()
        return idx[self.separation[idx].argsort(descending=True)].tolist()

    def separating_neurons(self, min_separation: float = MIN_SEPARATION) -> list[int]:
        """Neurons that separate a domain, through any path (the context test not applied)."""
        return (self.separation >= min_separation).nonzero().flatten().tolist()

    def table(self, neurons: list[int]) -> pd.DataFrame:
        """One row per neuron: its domain, AUC, AUC with the contextual heads ablated, share
        removed, and whether it is a context neuron by activation."""
        mask = self.mask()
        return pd.DataFrame(
            {
                "domain": [self.domain_of(j) for j in neurons],
                "AUC": [float(self.auc[j, self.best[j]]) for j in neurons],
                "AUC, contextual heads ablated": [
                    float(self.auc_ablated[j, self.best[j]]) for j in neurons
                ],
                "separation removed": [float(self.removed[j]) for j in neurons],
                "context neuron": [bool(mask[j]) for j in neurons],
            },
            index=pd.Index(neurons, name="neuron"),
        )


@torch.no_grad()
def activation_truth(
    model: TransformerBridge,
    windows: list[Int[Tensor, " _pos"]],
    labels: list[str],
    heads: list[int],
    start: int = START,
    batch_size: int = 8,
    progress: bool = False,
) -> ActivationTruth:
    """Measure :class:`ActivationTruth` on labelled windows (labels: each window's domain).

    Args:
        model: the model.
        windows: held-out windows, BOS first.
        labels: each window's domain (e.g. its corpus).
        heads: the contextual heads (the model's own taxonomy's), ablated in the second test.
        start: first position of a window's mean.
        batch_size: windows per batch of :class:`LayerZeroPasses`.
        progress: show progress bars.
    """
    if len(windows) != len(labels):
        raise InputError(f"{len(labels)} labels for {len(windows)} windows: give one per window.")
    domains = sorted(set(labels))
    if len(domains) < 2:
        raise InputError("Give windows of at least two domains.")
    heads = check_heads(model, heads)
    passes = LayerZeroPasses.run(model, windows, start, batch_size, progress)  # one pass
    means = passes.means()
    ablated = passes.ablated(heads, passes.mean_z())
    return ActivationTruth(
        domains=domains,
        heads=heads,
        auc=one_vs_rest_auc(means, labels, domains),
        auc_ablated=one_vs_rest_auc(ablated, labels, domains),
        n_windows={d: labels.count(d) for d in domains},
    )


def score_auc(scores: Float[Tensor, " d_mlp"], truth: list[int]) -> float:
    """How well a score ranks a truth set of neurons above the rest, whatever the threshold.

    The probability that a truth neuron scores higher than another neuron (ties count one half):
    1 ranks every truth neuron first, 0.5 is no better than a random order. NaN when the truth is
    empty or holds every neuron.
    """
    truth_set = {int(j) for j in truth}
    if not 0 < len(truth_set) < len(scores):
        return float("nan")
    labels = ["truth" if j in truth_set else "rest" for j in range(len(scores))]
    return float(one_vs_rest_auc(scores.detach().cpu()[:, None], labels, ["rest", "truth"])[0, 1])


def precision_recall_curve(
    scores: Float[Tensor, " d_mlp"], truth: list[int], thetas: list[float]
) -> pd.DataFrame:
    """Discovery (``score >= theta``) against a truth set: found, precision and recall per theta."""
    truth_set = set(int(j) for j in truth)
    rows = []
    for theta in thetas:
        found = set((scores >= theta).nonzero().flatten().tolist())
        hits = len(found & truth_set)
        rows.append({
            "theta": float(theta),
            "neurons found": len(found),
            "precision": hits / len(found) if found else float("nan"),
            "recall": hits / len(truth_set) if truth_set else float("nan"),
        })
    return pd.DataFrame(rows).set_index("theta")


@torch.no_grad()
def previous_token_attention(
    model: TransformerBridge,
    windows: list[Int[Tensor, " _pos"]],
    start: int = START,
    batch_size: int = 8,
) -> Float[Tensor, " head_index"]:
    """Each layer-0 head's mean attention from position ``n`` to ``n - 1`` over the windows'
    positions ``start <= n < length`` (a previous-token head puts most of its attention there):
    :func:`head_statistics`' ``previous_share``."""
    return head_statistics(model, windows, start, batch_size).previous_share


@dataclass(frozen=True)
class HeadStatistics:
    """Two layer-0 measures of every head over the same windows, from one pass."""

    previous_share: Float[Tensor, " head_index"]  # mean A[n, n-1] over positions start <= n
    mean_z: Float[Tensor, "head_index d_head"]  # mean hook_z over every real position


@torch.no_grad()
def head_statistics(model: TransformerBridge, windows: list[Int[Tensor, " _pos"]],
                    start: int = START, batch_size: int = 8) -> HeadStatistics:
    """:func:`previous_token_attention` and :func:`mean_head_z` of the windows in one pass
    (:func:`layer_zero_inputs`, the first batch checked against ``hook_pattern`` and
    ``hook_z``)."""
    share_sum, share_count = torch.zeros(model.cfg.n_heads, dtype=torch.float64), 0
    z_sum, z_count = 0.0, 0  # summed as _mean_z sums them: LayerZeroPasses.mean_z's mean
    for tokens, lengths, layer in _checked_batches(model, windows, batch_size):
        mask = position_mask(tokens, lengths, start)[:, 1:].to(layer.previous.dtype)
        share_sum += torch.einsum("bhn,bn->h", layer.previous[:, :, 1:], mask).double().cpu()
        share_count += int(mask.sum())
        z_sum, z_count = _add_z(z_sum, z_count, layer.z, position_mask(tokens, lengths, 0))
    return HeadStatistics((share_sum / max(share_count, 1)).float(), z_sum / z_count)
