"""Which neurons are context-sensitive: the token contributions and the score (chapter 5, sections
5.1 and 5.2; the book's notation page ``book/notation.md``, section 5).

**Contributions.** For all 3072 neurons and 50257 tokens, ``contribution[j, t] = e(t) . w_j``
(:mod:`context_neurons.discovery`) is **one matrix product** ``E [d_vocab, d_model] @ W [d_model,
d_mlp]`` (:func:`contributions`; chunked over neurons only to bound memory).

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
to a few hundred thousand tokens. The whole sweep over ``theta`` is reported beside it
(:func:`theta_sweep`, with precision and recall against a known set). The paper's score is on a
different scale (about 100 neurons at its theta of 5 on GPT-2 Small); only the shape of the sweep
compares.

**Bounded sets.** ``theta`` can select hundreds or thousands of neurons on a large model. Analyses
that cost per neuron (evaluation, the gallery's plots, sub-latents) take the :data:`MAX_NEURONS`
highest-scoring of them (:func:`carried`), and say so (:func:`selection_note`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from context_neurons.caching import IdentityCache
from context_neurons.checks import InputError, NoNeuronsFoundError, check_neurons, check_token_ids
from context_neurons.circuit.build import ContextualCircuit
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


def require_found(found: list[int], theta: float, needs: str) -> list[int]:
    """``found`` itself, or :class:`~context_neurons.checks.NoNeuronsFoundError` when it is
    empty (``needs``: what cannot go on without a found neuron, for the message)."""
    if len(found) == 0:
        raise NoNeuronsFoundError(
            f"No layer-0 neuron reaches top[j] >= theta = {theta:g} on this model, and {needs} "
            "needs at least one. Chapter 5's sweep shows how many neurons each threshold finds; "
            "pass a lower theta, or run the chapter on another model.")
    return found


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


_SCORES = IdentityCache(size=4)


def get_scores(circuit: ContextualCircuit, model: Model) -> NeuronScores:
    """:func:`score_neurons` with default options, cached per circuit and model (by identity)."""
    return _SCORES.get((circuit, model), (), lambda: score_neurons(circuit, model))


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
