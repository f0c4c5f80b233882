"""Context neurons from the weights. This module implements discovery (chapter 5; the book's
notation page ``book/notation.md``, section 5).

Gibson's paper, section "Finding context-sensitive neurons": the contextual heads write
``sum_i K[n, i] e(t_i)`` (chapter 4), so a layer-0 MLP neuron ``j`` receives, through LayerNorm 2
linearised, the decaying average of the *token contributions*

    contribution[j, t] = s2 * (gamma2 * (e(t) - mean(e(t)))) . W_in[:, j]
                       = e(t) . w_j,      w_j = s2 * centred(gamma2 * W_in[:, j]),

where ``s2`` is the median ``1 / std`` of LN2's input on the calibration text and ``gamma2`` LN2's
weight (ones when TransformerLens folded it into ``W_in``; centring ``e`` is the same as centring
the read vector). For all 3072 neurons and 50257 tokens this is **one matrix product**
``E [d_vocab, d_model] @ W [d_model, d_mlp]`` (:func:`contributions`; chunked over neurons only to
bound memory).

**Score.** A neuron is context-sensitive when a few tokens move it much more than the rest. With
``med_j`` and ``MAD_j`` the median and median absolute deviation of ``contribution[j, :]`` over the
vocabulary, the robust z-score of a token is ``z[j, t] = (contribution[j, t] - med_j) / (1.4826
MAD_j)`` (1.4826 makes the MAD a standard deviation for Gaussian data), and

    top[j] = mean of the k = 20 largest |z[j, t]|.

``<|endoftext|>`` is left out of the vocabulary: it sits at position 0 of every text (an attention
sink with a huge content weight), so it is part of no context. If no token stands out (Gaussian
contributions over the ``N`` scored tokens) ``top`` is the mean of the ``k`` largest of ``N``
Gaussian ``|z|`` (:func:`gaussian_null_score`: 3.79 for GPT-2's 50,256 tokens, 3.31 for 8,191;
it grows like ``sqrt(2 ln N)``, slowly). We call a neuron context-sensitive when
``top[j] >= theta`` with ``theta = 6`` by default, for every model: a z-score is in units of the
neuron's own spread, so ``theta`` means the same on every model (twenty tokens six ordinary
spreads out on average), and it stays well above the null for any vocabulary from a few thousand
to a few hundred thousand tokens. The whole sweep over ``theta`` is reported beside it. The
paper's score is on a different scale (about 100 neurons at its theta of 5 on GPT-2 Small); only
the shape of the sweep compares.

**Bounded sets.** ``theta`` can select hundreds or thousands of neurons on a large model. Analyses
that cost per neuron (evaluation, the gallery's plots, sub-latents) take the :data:`MAX_NEURONS`
highest-scoring of them (:func:`carried`), and say so (:func:`selection_note`).

**Sub-latents.** A neuron may read two topics at once (the paper's neuron 1621: "war" minus
"21st century"). :func:`sub_latents` clusters the extended embeddings of a neuron's top tokens,
after removing their common component along the neuron's read vector, with spherical k-means: tokens
of one topic share a direction, tokens of two topics fall into two clusters.
:func:`centroid_cosines` says how clearly each neuron splits. :func:`neuron_pair` compares two
neurons: what they read (their contributions' correlation) and what they write (their output
weights' cosine).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from context_neurons import decomposition as dec
from context_neurons.caching import IdentityCache
from context_neurons.checks import InputError, check_neuron, check_neurons, check_token_ids
from context_neurons.circuit import ContextualCircuit
from context_neurons.models.weights import Model, as_weights

#: Default number of extreme tokens averaged by the score.
TOP_K = 20
#: Default threshold on the score (robust standard deviations).
THETA = 6.0
#: MAD to standard deviation for Gaussian data.
MAD_TO_SD = 1.4826
#: At most this many found neurons (the highest-scoring) are carried into the analyses that cost
#: per neuron: evaluation, the gallery's plots, sub-latents.
MAX_NEURONS = 200


# ----------------------------------------------------------------------------------------------
# Contributions
# ----------------------------------------------------------------------------------------------


@torch.no_grad()
def read_vectors(
    circuit: ContextualCircuit, model: Model, neurons=None
) -> Float[Tensor, "d_model n_neurons"]:
    """``w_j = s2 * centred(gamma2 * W_in[:, j])``: what neuron ``j`` reads through a linear LN2."""
    neurons = check_neurons(model, neurons)
    weights = as_weights(model)
    w = weights.ln2_w[:, None] * weights.W_in[:, neurons]
    return circuit.ln2_scale * (w - w.mean(0, keepdim=True))


@torch.no_grad()
def contributions(
    circuit: ContextualCircuit,
    model: Model,
    neurons=None,
    token_ids: Int[Tensor, " n_tokens"] | None = None,
) -> Float[Tensor, "n_neurons n_tokens"]:
    """``contribution[j, t] = e(t) . w_j``: one GEMM of extended embeddings and read vectors.

    Args:
        circuit: the contextual circuit (its extended embeddings ``e``).
        model: the model (LN2 and ``W_in``).
        neurons: layer-0 neuron indices (``None``: all).
        token_ids: the tokens (``None``: the whole vocabulary, in id order).

    Returns:
        ``[n_neurons, n_tokens]`` contributions, in pre-activation units.
    """
    w = read_vectors(circuit, model, neurons)
    if token_ids is None:
        return (circuit.extended @ w).T
    token_ids = check_token_ids(token_ids, len(circuit.extended)).to(circuit.extended.device)
    if 2 * len(token_ids) < len(circuit.extended):
        return (circuit.extended[token_ids] @ w).T  # a few rows of e: cheap to copy
    return (circuit.extended @ w)[token_ids].T  # most of the vocabulary: never copy e


def scoring_vocabulary(model: Model, exclude=(None,)) -> Bool[Tensor, " d_vocab"]:
    """The tokens the score ranges over: every token but ``<|endoftext|>`` (module docstring)."""
    keep = torch.ones(model.cfg.d_vocab, dtype=torch.bool, device=model.cfg.device)
    bos = model.tokenizer.bos_token_id if model.tokenizer is not None else None
    for token in exclude:
        token = bos if token is None else token
        if token is not None:
            keep[int(token)] = False
    return keep


def gaussian_null_score(n_tokens: int, k: int = TOP_K) -> float:
    """The score of a neuron whose contributions are Gaussian: mean of the k largest ``|z|``.

    Uses the expected order statistics ``|z|_(r) ~ Phi^-1(1 - (r - 1/2) / (2 N))``.

    Args:
        n_tokens: ``N``, the number of tokens scored (the model's vocabulary without
            ``<|endoftext|>``: ``NeuronScores.n_tokens``).
        k: the number of extreme tokens averaged.
    """
    if not 1 <= k <= n_tokens:
        raise InputError(f"Need 1 <= k <= n_tokens, got k = {k}, n_tokens = {n_tokens}.")
    r = torch.arange(1, k + 1, dtype=torch.float64)
    return float(torch.special.ndtri(1 - (r - 0.5) / (2 * n_tokens)).mean())


@dataclass
class NeuronScores:
    """The discovery score of every neuron and the statistics behind it.

    Attributes:
        top: ``top[j]``, the mean of the ``k`` largest robust ``|z|`` (module docstring).
        median: ``med_j``, the median contribution over the vocabulary.
        spread: ``1.4826 * MAD_j``, the robust standard deviation.
        sign: +1 when the neuron's ``k`` most extreme tokens push it up on balance, else -1.
        k: the number of extreme tokens averaged.
        vocabulary: the tokens scored.
        extreme_tokens: each neuron's ``k`` tokens of largest ``|z|`` (token ids), largest first.
    """

    top: Float[Tensor, " d_mlp"]
    median: Float[Tensor, " d_mlp"]
    spread: Float[Tensor, " d_mlp"]
    sign: Float[Tensor, " d_mlp"]
    k: int
    vocabulary: Bool[Tensor, " d_vocab"]
    extreme_tokens: Int[Tensor, "d_mlp k"]

    def found(self, theta: float | int = THETA) -> list[int]:
        """Neurons with ``top >= theta``, best first."""
        if isinstance(theta, bool) or not math.isfinite(float(theta)):
            raise InputError(f"theta must be a finite number, got {theta!r}.")
        idx = (self.top >= theta).nonzero().flatten()
        return idx[self.top[idx].argsort(descending=True)].tolist()

    def ranking(self) -> list[int]:
        return self.top.argsort(descending=True).tolist()

    @property
    def n_tokens(self) -> int:
        """The number of tokens scored (the vocabulary without ``<|endoftext|>``)."""
        return int(self.vocabulary.sum())

    def null(self) -> float:
        """:func:`gaussian_null_score` for this vocabulary and ``k``."""
        return gaussian_null_score(self.n_tokens, self.k)


def carried(found, limit: int = MAX_NEURONS) -> list[int]:
    """The ``limit`` highest-scoring of the found neurons (``found`` is best first)."""
    if limit < 1:
        raise InputError(f"limit must be at least 1, got {limit}.")
    return [int(j) for j in found][:limit]


def selection_note(chosen, found) -> str:
    """How a bounded set relates to all found neurons, for text and tables.

    ``"all 20 found neurons"`` or ``"the 200 highest-scoring of 1234 found neurons"``.
    """
    if len(chosen) >= len(found):
        return f"all {len(found)} found neurons"
    return f"the {len(chosen)} highest-scoring of {len(found)} found neurons"


#: Vocabulary sizes whose Gaussian null chapter 5 prints beside the model's own.
OTHER_VOCABULARIES = (8191, 50256, 200_000)


@dataclass(frozen=True)
class ScoreSummary:
    """Where the threshold sits against the scores of one model (chapter 5, section 5.2).

    Attributes:
        n_tokens: the tokens scored (the vocabulary without ``<|endoftext|>``).
        null: the Gaussian null score for that vocabulary (:func:`gaussian_null_score`).
        theta: the threshold.
        n_found: the neurons with a score of at least ``theta``.
        n_neurons: all neurons scored (``d_mlp``).
        median: the median score over all neurons.
        other_nulls: vocabulary size -> its Gaussian null (:data:`OTHER_VOCABULARIES`).
    """

    n_tokens: int
    null: float
    theta: float
    n_found: int
    n_neurons: int
    median: float
    other_nulls: dict[int, float]

    @property
    def saturated(self) -> bool:
        """Whether the typical neuron already scores at or above ``theta``."""
        return self.median >= self.theta

    def findings(self) -> list[str]:
        """The null against ``theta``, the null of other vocabularies, how many neurons pass, and
        (when :attr:`saturated`) that the threshold separates little on this model."""
        out = [
            f"{self.n_tokens} scored tokens: Gaussian null {self.null:.2f}; theta = "
            f"{self.theta:g} ({self.theta - self.null:.2f} above the null)",
            "the null for other vocabularies: "
            + ", ".join(f"{n} tokens {v:.2f}" for n, v in self.other_nulls.items()),
            f"neurons found: {self.n_found} of {self.n_neurons} "
            f"({self.n_found / self.n_neurons:.1%}); median score over all neurons: "
            f"{self.median:.2f}",
        ]
        if self.saturated:
            out.append("the typical neuron of this model scores above theta: the threshold "
                       "separates little here, and the bounded set below (the highest scores) "
                       "decides what is studied")
        return out


def score_summary(scores: NeuronScores, theta: float = THETA,
                  vocabularies=OTHER_VOCABULARIES) -> ScoreSummary:
    """:class:`ScoreSummary` of ``scores`` at ``theta``, with the null of ``vocabularies``."""
    return ScoreSummary(
        n_tokens=scores.n_tokens,
        null=scores.null(),
        theta=theta,
        n_found=len(scores.found(theta)),
        n_neurons=len(scores.top),
        median=float(scores.top.median()),
        other_nulls={n: gaussian_null_score(n, scores.k) for n in vocabularies},
    )


@torch.no_grad()
def score_neurons(
    circuit: ContextualCircuit,
    model: Model,
    k: int = TOP_K,
    vocabulary: Bool[Tensor, " d_vocab"] | None = None,
    chunk: int = 512,
) -> NeuronScores:
    """Score every neuron (module docstring): the contribution GEMM, chunked over neurons."""
    if not 1 <= k:
        raise InputError(f"k must be at least 1, got {k}.")
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise InputError(f"chunk must be a whole number of at least 1, got {chunk!r}.")
    vocabulary = scoring_vocabulary(model) if vocabulary is None else vocabulary
    ids = vocabulary.nonzero().flatten()
    if len(ids) < 2 * k:
        raise InputError(f"The vocabulary has {len(ids)} tokens, too few for k = {k}.")
    tops, medians, spreads, signs, extremes = [], [], [], [], []
    for start in range(0, model.cfg.d_mlp, chunk):
        neurons = list(range(start, min(start + chunk, model.cfg.d_mlp)))
        x = contributions(circuit, model, neurons, ids)  # [chunk, n_tokens]
        top, med, spread, sign, extreme = _top_statistics(x, k)
        tops.append(top)
        extremes.append(ids[extreme])
        signs.append(sign)
        medians.append(med)
        spreads.append(spread)
    return NeuronScores(
        top=torch.cat(tops),
        median=torch.cat(medians),
        spread=torch.cat(spreads),
        sign=torch.cat(signs),
        k=k,
        vocabulary=vocabulary,
        extreme_tokens=torch.cat(extremes),
    )


def _top_statistics(x: Float[Tensor, "n_neurons n_tokens"], k: int):
    """``top``, median, robust spread, sign and the extreme tokens' columns of each row."""
    med, spread = robust_location_scale(x)
    z = (x - med[:, None]) / spread[:, None]
    extreme = z.abs().topk(k, dim=-1)
    sign = torch.sign(z.gather(-1, extreme.indices).sum(-1))
    return extreme.values.mean(-1), med, spread, sign, extreme.indices


@torch.no_grad()
def top_of_read_vectors(
    circuit: ContextualCircuit,
    read: Float[Tensor, "d_model n_read"],
    vocabulary: Bool[Tensor, " d_vocab"],
    k: int = TOP_K,
    chunk: int = 512,
) -> Float[Tensor, " n_read"]:
    """``top`` of arbitrary read vectors (chapter 8's control: random directions with each
    neuron's norm), the same statistic as :func:`score_neurons`."""
    ids = vocabulary.nonzero().flatten().to(circuit.extended.device)
    rows = circuit.extended[ids]
    out = []
    for start in range(0, read.shape[1], chunk):
        x = (rows @ read[:, start : start + chunk].to(rows)).T
        out.append(_top_statistics(x, k)[0])
    return torch.cat(out)


def robust_location_scale(
    x: Float[Tensor, "n_neurons n_tokens"],
) -> tuple[Float[Tensor, " n_neurons"], Float[Tensor, " n_neurons"]]:
    """Each row's median and robust standard deviation ``1.4826 * MAD`` (at least ``1e-12``)."""
    med = x.median(dim=-1).values
    spread = MAD_TO_SD * (x - med[:, None]).abs().median(dim=-1).values
    return med, spread.clamp(min=1e-12)


#: The loudest tokens: this fraction of the scored vocabulary, by extended-embedding norm.
LOUD_FRACTION = 0.01


def loud_tokens(
    circuit: ContextualCircuit,
    vocabulary: Bool[Tensor, " d_vocab"],
    fraction: float = LOUD_FRACTION,
) -> Int[Tensor, " n_loud"]:
    """The ``fraction`` of the scored vocabulary with the largest ``|e(t)|``, loudest first."""
    if not 0 < fraction < 1:
        raise InputError(f"fraction must be in (0, 1), got {fraction}.")
    ids = vocabulary.nonzero().flatten().to(circuit.extended.device)
    norms = circuit.extended[ids].norm(dim=-1)
    return ids[norms.topk(max(1, round(fraction * len(ids)))).indices]


def loud_slot_shares(
    scores: NeuronScores, circuit: ContextualCircuit, fraction: float = LOUD_FRACTION
) -> Float[Tensor, " d_mlp"]:
    """Each neuron's share of its ``k`` extreme tokens that are among the loudest tokens.

    Every contribution is ``e(t) . w_j``, so a token with a large ``|e(t)|`` stands out for *any*
    read vector. When the loudest 1% of tokens fill most of every neuron's extreme slots, the score
    measures a loudness all neurons share, not a neuron's own set of tokens; if loudness played no
    part, the shares would be about ``fraction``.

    Args:
        scores: the neurons' scores (their :attr:`NeuronScores.extreme_tokens`).
        circuit: the circuit the scores were computed from (its extended embeddings).
        fraction: the share of the vocabulary called loud (:func:`loud_tokens`), in (0, 1).
    """
    return _shares_among(scores, loud_tokens(circuit, scores.vocabulary, fraction))


def _shares_among(scores: NeuronScores, loud: Int[Tensor, " n_loud"]) -> Float[Tensor, " d_mlp"]:
    """Each neuron's share of its extreme tokens among ``loud``."""
    return torch.isin(scores.extreme_tokens.to(loud.device), loud).double().mean(-1)


def loud_token_share(
    scores: NeuronScores, circuit: ContextualCircuit, fraction: float = LOUD_FRACTION
) -> float:
    """The share of all neurons' extreme-token slots held by the loudest tokens
    (the mean of :func:`loud_slot_shares`)."""
    return float(loud_slot_shares(scores, circuit, fraction).mean())


@dataclass(frozen=True)
class Loudness:
    """How far the loudest tokens fill the neurons' extreme-token slots (chapter 8.6).

    Attributes:
        loud: the loudest ``fraction`` of the scored vocabulary (:func:`loud_tokens`), loudest
            first.
        shares: each neuron's share of its extreme tokens among them (:func:`loud_slot_shares`).
        fraction: the share of the vocabulary called loud.
    """

    loud: Int[Tensor, " n_loud"]
    shares: Float[Tensor, " d_mlp"]
    fraction: float

    def findings(self, tokenizer, shown: int = 12) -> list[str]:
        """The ``shown`` loudest tokens, and the share of the slots the loud tokens hold."""
        loudest = [tokenizer.decode([int(t)]) for t in self.loud[:shown]]
        return [f"the {shown} loudest tokens: {loudest}",
                f"the loudest {self.fraction:.0%} of tokens ({len(self.loud)}) hold "
                f"{float(self.shares.mean()):.0%} of all neurons' extreme-token slots "
                f"(median neuron: {float(self.shares.median()):.0%})"]

    def among(self, neurons: list[int], label: str) -> str:
        """The loud tokens' share of all slots against the median share of ``neurons``'s slots
        (``label``: what those neurons are)."""
        return (f"the loudest {self.fraction:.0%} hold {float(self.shares.mean()):.0%} of all "
                f"extreme slots, and a median {float(self.shares[neurons].median()):.0%} of "
                f"{label}' slots")


def loudness(
    scores: NeuronScores, circuit: ContextualCircuit, fraction: float = LOUD_FRACTION
) -> Loudness:
    """:class:`Loudness` of the neurons ``scores`` scored on ``circuit``."""
    loud = loud_tokens(circuit, scores.vocabulary, fraction)  # ranked once, for both
    return Loudness(loud, _shares_among(scores, loud), fraction)


_SCORES = IdentityCache(size=4)


def get_scores(circuit: ContextualCircuit, model: Model) -> NeuronScores:
    """:func:`score_neurons` with default options, cached per circuit and model (by identity)."""
    return _SCORES.get((circuit, model), (), lambda: score_neurons(circuit, model))


# ----------------------------------------------------------------------------------------------
# Reading a neuron
# ----------------------------------------------------------------------------------------------


def token_str(model: Model, token: int | Tensor) -> str:
    """A token as a quoted string (``repr`` of its text), so spaces and newlines show."""
    return repr(model.tokenizer.decode([int(token)]))


@torch.no_grad()
def token_tables(
    circuit: ContextualCircuit,
    model: Model,
    neurons,
    k: int = 12,
    scores: NeuronScores | None = None,
    chunk: int = 256,
) -> dict[int, pd.DataFrame]:
    """The ``k`` top (positive) and bottom (negative) token contributions of each neuron.

    One contribution GEMM per ``chunk`` neurons, then ``topk`` on each side (no full sort).

    Args:
        circuit: the contextual circuit.
        model: the model.
        neurons: layer-0 neuron indices.
        k: tokens on each side.
        scores: the scores whose vocabulary to use (default :func:`scoring_vocabulary`).
        chunk: neurons per GEMM (bounds memory at ``chunk * d_vocab`` floats).

    Returns:
        neuron -> DataFrame indexed by ``rank`` with columns ``top id``, ``top token``, ``top
        contribution``, ``top z`` and the same for ``bottom`` (z: robust z-score over the
        vocabulary, as in the score). A contribution is in pre-activation units: what the token
        would add if the kernel put all its weight on it (a token at kernel weight ``K[n, i]``
        adds ``K[n, i]`` times this).
    """
    neurons = check_neurons(model, neurons)
    vocab = scoring_vocabulary(model) if scores is None else scores.vocabulary
    ids = vocab.nonzero().flatten()
    if not 1 <= k <= len(ids):
        raise InputError(f"k must be in 1..{len(ids)}, got {k}.")
    tables = {}
    for start in range(0, len(neurons), chunk):
        block = neurons[start : start + chunk]
        c = contributions(circuit, model, block, ids)  # [chunk, n_tokens]
        med, spread = robust_location_scale(c)
        sides = {"top": c.topk(k, dim=-1), "bottom": c.topk(k, dim=-1, largest=False)}
        for row, j in enumerate(block):
            frame = {}
            for side, extreme in sides.items():
                values = extreme.values[row]
                side_ids = ids[extreme.indices[row]].tolist()
                frame[f"{side} id"] = side_ids
                frame[f"{side} token"] = [token_str(model, t) for t in side_ids]
                frame[f"{side} contribution"] = values.tolist()
                frame[f"{side} z"] = ((values - med[row]) / spread[row]).tolist()
            tables[j] = pd.DataFrame(frame, index=pd.RangeIndex(1, k + 1, name="rank"))
    return tables


def token_table(
    circuit: ContextualCircuit,
    model: Model,
    neuron,
    k: int = 12,
    scores: NeuronScores | None = None,
) -> pd.DataFrame:
    """The ``k`` top and bottom token contributions of one neuron (see :func:`token_tables`)."""
    j = check_neuron(model, neuron)
    return token_tables(circuit, model, [j], k, scores)[j]


@torch.no_grad()
def top_tokens(
    circuit: ContextualCircuit,
    model: Model,
    neuron,
    k: int = 20,
    side: str = "top",
) -> tuple[Int[Tensor, " k"], Float[Tensor, " k"]]:
    """Token ids and contributions of the ``k`` largest (``side='top'``) or smallest ones."""
    if side not in ("top", "bottom"):
        raise InputError(f"side must be 'top' or 'bottom', got {side!r}.")
    j = check_neuron(model, neuron)
    ids = scoring_vocabulary(model).nonzero().flatten()
    c = contributions(circuit, model, [j], ids)[0]
    values, idx = c.topk(k, largest=(side == "top"))
    return ids[idx], values


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


@dataclass(frozen=True)
class NeuronPair:
    """Two neurons compared by what they read and what they write (chapter 5, section 5.3).

    Attributes:
        neurons: the two neurons.
        input_r: the correlation of their token contributions over the vocabulary (near 1: they
            read the same context).
        output_cosine: the cosine of their output weights, rows of layer 0's ``W_out`` (near -1:
            they write opposite outputs).
    """

    neurons: tuple[int, int]
    input_r: float
    output_cosine: float

    def findings(self) -> list[str]:
        """The two neurons, the correlation of their contributions and the cosine of their
        output weights, one line each."""
        a, b = self.neurons
        return [
            f"neurons {a} and {b}:",
            f"correlation of their token contributions: {self.input_r:.3f}",
            f"cosine of their output weights W_out[{a}], W_out[{b}]: {self.output_cosine:.3f}",
        ]


def pair_similarity(
    neurons: tuple[int, int],
    contributions: Float[Tensor, "2 n_tokens"],
    w_out: Float[Tensor, "2 d_model"],
) -> NeuronPair:
    """:class:`NeuronPair` of two neurons from their token contributions and output weights."""
    input_r = float(torch.corrcoef(contributions)[0, 1])
    output_cosine = float(w_out[0] @ w_out[1] / (w_out[0].norm() * w_out[1].norm()))
    return NeuronPair(neurons, input_r, output_cosine)


@torch.no_grad()
def neuron_pair(circuit: ContextualCircuit, model: TransformerBridge, a, b) -> NeuronPair:
    """Neurons ``a`` and ``b`` compared: the correlation of their :func:`contributions` and the
    cosine of their rows of layer 0's ``W_out`` (:class:`NeuronPair`)."""
    a, b = check_neurons(model, [a, b])
    w_out = model.blocks[0].mlp.W_out
    return pair_similarity((a, b), contributions(circuit, model, [a, b]), w_out[[a, b]])


# ----------------------------------------------------------------------------------------------
# Against the planted truth
# ----------------------------------------------------------------------------------------------


def precision_recall(found, truth) -> tuple[float, float]:
    """Precision and recall of a set of found neurons against the true set."""
    found, truth = set(int(j) for j in found), set(int(j) for j in truth)
    hits = len(found & truth)
    precision = hits / len(found) if found else float("nan")
    recall = hits / len(truth) if truth else float("nan")
    return precision, recall


def theta_sweep(
    scores: NeuronScores, thetas=(3, 4, 5, 6, 8, 10, 15, 20, 30, 50), truth=None
) -> pd.DataFrame:
    """Number of neurons found against ``theta`` (with precision and recall when ``truth``)."""
    if len(thetas) == 0:
        raise InputError("thetas is empty: give at least one threshold.")
    rows = []
    for theta in thetas:
        found = scores.found(float(theta))
        row = {"theta": float(theta), "neurons found": len(found)}
        if truth is not None:
            row["precision"], row["recall"] = precision_recall(found, truth)
        rows.append(row)
    return pd.DataFrame(rows).set_index("theta")


def planted_topic_share(truth, neuron, token_ids) -> float:
    """Fraction of ``token_ids`` that belong to a topic the planted neuron reads (planted only).

    A topic's tokens are the *label half* of its word list (``truth.label_token_ids``), never the
    half that planted it.
    """
    plan = truth.context_neurons.get(int(neuron))
    if plan is None:
        return float("nan")
    topic_ids = set()
    for topic in plan.topics:
        topic_ids |= set(truth.label_token_ids.get(topic, ()))
    token_ids = [int(t) for t in token_ids]
    return sum(t in topic_ids for t in token_ids) / max(len(token_ids), 1)


def planted_topics(truth, neuron) -> dict[str, float]:
    """The topics a planted context neuron reads, with their signed weights (``{}`` for a neuron
    that is not a planted context neuron)."""
    plan = truth.context_neurons.get(int(neuron))
    return {} if plan is None else dict(plan.topics)


def planted_description(truth, neuron) -> str:
    """What the planted model planted at a layer-0 neuron (planted truth, for labels): a context
    neuron's description, a distractor's (a neuron that reads context through another route,
    which discovery should not return), or ``"not planted"``."""
    j = int(neuron)
    plan = truth.context_neurons.get(j)
    if plan is not None:
        return plan.description
    distractor = truth.distractor_neurons.get(j)
    if distractor is not None:
        return f"distractor: {distractor.description}"
    return "not planted"
