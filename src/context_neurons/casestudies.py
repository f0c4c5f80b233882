"""Neurons on real text. This module reads discovered neurons on texts of their domains (chapter 5).

Chapter 5 reads a context neuron from its token contributions; activations on real texts of the
domain test that reading. :func:`text_activations` runs the model's first layer and the circuit's
approximation (:func:`context_neurons.evaluation.approximator`) on texts of several domains
(:func:`context_neurons.text.windows.domain_texts`) at once, for all neurons at once, and marks
where each neuron's strongest tokens occur (robust z-score of the contribution at least ``theta``,
as in the score). From those, :func:`domain_evidence` tabulates how much a domain moves a neuron
against how often the domain's texts use the neuron's tokens, and :func:`verdict` says whether the
measurement confirms the reading from the weights. A controlled experiment at fixed text is in
:mod:`context_neurons.respelling`.

**Choices made before looking at activations.** :func:`token_densities` counts, without running
the model, how often each text uses each neuron's up-tokens and down-tokens (robust z of the
contribution at least ``theta`` above or below the median). From those counts alone,
:func:`domain_from_weights` gives each neuron its *own domain* (the domain whose texts use the
tokens that drive it, on its dominant side, most often relative to the other domains' texts, or
none), :func:`token_matched_neuron` gives each domain a neuron, and :func:`case_studies` chooses
the case-study neurons: the paper's GPT-2 neuron numbers on GPT-2 Small and on the planted model
(planted there by construction), and on any other model the found neurons whose up-tokens each
case-study domain's texts use most.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import NamedTuple

import pandas as pd
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from context_neurons.checks import DataError, InputError, check_neurons
from context_neurons.circuit import ContextualCircuit
from context_neurons.discovery import THETA, NeuronScores, contributions
from context_neurons.evaluation import approximator, masked_mean, position_mask, true_pre_activations
from context_neurons.text.windows import DomainTexts, pad_windows

#: First position of the means over a text: before it the bag of tokens is still filling up.
START = 100


@dataclass
class TextActivations:
    """Pre-activations of neurons along domain texts, true and approximate (on the CPU).

    Attributes:
        neurons: the neurons, in the order of the last axis.
        texts: the texts, in the order of the first axis.
        tokens: the texts right-padded with BOS.
        lengths: each text's length.
        true: the model's pre-activations (hook ``blocks.0.mlp.hook_pre``).
        approx: the circuit's approximation (chapter 6).
        marks: +1 where the token is one of the neuron's *up-tokens* (robust z of its
            contribution ``>= theta``), -1 for *down-tokens* (``<= -theta``), else 0.
        theta: the threshold of the marks.
        start: the first position of the means.
    """

    neurons: list[int]
    texts: DomainTexts
    tokens: Int[Tensor, "batch pos"]
    lengths: Int[Tensor, " batch"]
    true: Float[Tensor, "batch pos n_neurons"]
    approx: Float[Tensor, "batch pos n_neurons"]
    marks: Int[Tensor, "batch pos n_neurons"]
    theta: float
    start: int = START
    _means: dict[str, Tensor] = field(default_factory=dict, repr=False, compare=False)

    def column(self, neuron) -> int:
        """The position of ``neuron`` on the last axis."""
        j = int(neuron)
        if j not in self.neurons:
            raise InputError(f"Neuron {j} was not computed; these activations have {self.neurons}.")
        return self.neurons.index(j)

    def valid(self, start: int | None = None) -> Bool[Tensor, "batch pos"]:
        """Positions from ``start`` (default :attr:`start`) to each text's end."""
        return position_mask(self.tokens, self.lengths, self.start if start is None else start)

    def window_means(self, which: str = "true") -> Float[Tensor, "batch n_neurons"]:
        """Each neuron's mean pre-activation over each text (positions ``>= start``; computed
        once per ``which``: the gallery asks for it once per neuron)."""
        if which not in self._means:
            self._means[which] = masked_mean(self._values(which), self.valid())
        return self._means[which]

    def window_spreads(self) -> Float[Tensor, "batch n_neurons"]:
        """The standard deviation of the true pre-activation along each text."""
        mask = self.valid()[..., None]
        deviation = (self.true - self.window_means()[:, None]) * mask
        return ((deviation**2).sum(1) / (mask.sum(1) - 1)).sqrt()

    def marks_per_1000(self) -> tuple[Float[Tensor, "batch n_neurons"], ...]:
        """Up-tokens and down-tokens per 1000 tokens of each text (all positions but BOS)."""
        mask = self.valid(start=1)[..., None]
        count = mask.sum(1)
        up = ((self.marks > 0) & mask).sum(1) / count
        down = ((self.marks < 0) & mask).sum(1) / count
        return 1000 * up, 1000 * down

    def departures(self, which: str = "true") -> Float[Tensor, "batch n_neurons"]:
        """Each text's mean minus the neuron's median over all texts."""
        means = self.window_means(which)
        return means - means.median(0).values

    def best_window(self, neuron, domain: str | None = None) -> int:
        """The text (of ``domain``, if given) whose mean departs most from the neuron's median."""
        candidates = range(len(self.lengths)) if domain is None else self.texts.indices(domain)
        departure = self.departures()[:, self.column(neuron)]
        return max(candidates, key=lambda i: abs(float(departure[i])))

    def panel(self, neuron, window: int, title: str = "") -> dict:
        """What :func:`plotting_neurons.plot_activation_grid` draws for one neuron and text."""
        col, length = self.column(neuron), int(self.lengths[window])
        return {
            "curves": {
                "true": self.true[window, :length, col],
                "approximation": self.approx[window, :length, col],
            },
            "marks": self.marks[window, :length, col],
            "baseline": float(self.window_means().median(0).values[col]),
            "title": title,
        }

    def _values(self, which: str) -> Float[Tensor, "batch pos n_neurons"]:
        if which not in ("true", "approx"):
            raise InputError(f"which must be 'true' or 'approx', got {which!r}.")
        return self.true if which == "true" else self.approx


@torch.no_grad()
def token_marks(
    circuit: ContextualCircuit,
    model: TransformerBridge,
    neurons,
    tokens: Int[Tensor, "batch pos"],
    scores: NeuronScores,
    theta: float = THETA,
) -> Int[Tensor, "batch pos n_neurons"]:
    """+1 / -1 where a token's robust z-score for a neuron is ``>= theta`` / ``<= -theta``.

    The z-score is the score's (:func:`neurons.score_neurons`); tokens outside its vocabulary
    (``<|endoftext|>``) are never marked.
    """
    neurons = check_neurons(model, neurons)
    unique, inverse = torch.unique(tokens.cpu(), return_inverse=True)
    unique = unique.to(circuit.extended.device)
    c = contributions(circuit, model, neurons, unique)  # [n_neurons, n_unique]
    z = (c - scores.median[neurons, None]) / scores.spread[neurons, None]
    sign = (z >= theta).to(torch.int64) - (z <= -theta).to(torch.int64)
    sign = sign * scores.vocabulary[unique].to(torch.int64)
    return sign.T.cpu()[inverse]


@torch.no_grad()
def text_activations(
    circuit: ContextualCircuit,
    model: TransformerBridge,
    neurons,
    texts: DomainTexts,
    scores: NeuronScores,
    theta: float = THETA,
    start: int = START,
    batch_size: int = 8,
) -> TextActivations:
    """True and approximate pre-activations of ``neurons`` on every text, in batches.

    The model runs its first layer only (:func:`evaluation.true_pre_activations`); the
    approximation is :func:`evaluation.approximator` with its default per-position denominators.
    """
    neurons = check_neurons(model, neurons)
    if not texts.windows:
        raise DataError("No texts: give at least one window.")
    tokens, lengths = pad_windows(texts.windows)
    if int(lengths.min()) <= start:
        raise DataError(f"Every text needs more than start = {start} tokens.")
    approx_fn = approximator(circuit, model, neurons)
    true, approx = [], []
    for b in range(0, len(tokens), batch_size):
        batch = tokens[b : b + batch_size].to(model.cfg.device)
        true.append(true_pre_activations(model, batch, neurons).cpu())
        approx.append(approx_fn(batch).cpu())
    return TextActivations(
        neurons=neurons,
        texts=texts,
        tokens=tokens,
        lengths=lengths,
        true=torch.cat(true),
        approx=torch.cat(approx),
        marks=token_marks(circuit, model, neurons, tokens, scores, theta),
        theta=float(theta),
        start=start,
    )


def domain_means(acts: TextActivations, which: str = "true") -> pd.DataFrame:
    """Mean pre-activation of each neuron (rows) over each domain's texts (columns)."""
    means = acts.window_means(which)
    domains = list(dict.fromkeys(acts.texts.domains))
    columns = {d: means[acts.texts.indices(d)].mean(0).tolist() for d in domains}
    return pd.DataFrame(columns, index=pd.Index(acts.neurons, name="neuron"))


#: ``|excess| / within-text SD`` from which a domain's effect counts as confirmed, or as weak.
CONFIRMED, WEAK = 1.0, 0.5


def token_matched_neuron(densities: "TokenDensities", domain: str, neurons=None, exclude=()) -> int:
    """The neuron whose up-tokens the domain's texts use most, relative to the other texts.

    Chosen from the weights and the texts' tokens only (:func:`token_densities`), not from the
    activations, so that the activations are a fair test of the choice.

    Args:
        densities: token densities of the neurons on texts of several domains.
        domain: the domain.
        neurons: the candidates (default: all of ``densities``).
        exclude: neurons not to choose (e.g. one already chosen for another role).
    """
    neurons = densities.neurons if neurons is None else [int(j) for j in neurons]
    candidates = [j for j in neurons if j not in set(int(e) for e in exclude)]
    if not candidates:
        raise InputError(f"No candidate neuron for domain {domain!r}: give at least one.")
    gap = densities.gap(domain, "up")
    return max(candidates, key=lambda j: float(gap[densities.column(j)]))


def verdict(separation: float, predicted: float) -> str:
    """Whether a domain's measured effect on a neuron confirms the reading from the weights.

    Args:
        separation: the measured excess over the within-text SD (:func:`domain_evidence`).
        predicted: the excess the circuit predicts from the weights and the texts' tokens.

    Returns:
        ``"confirmed"`` (at least :data:`CONFIRMED` SDs, in the predicted direction), ``"weak"``
        (at least :data:`WEAK`), ``"contradicted"`` (at least :data:`WEAK`, against the
        prediction), or ``"not shown"`` (smaller: these texts cannot tell).
    """
    size = abs(separation)
    if size < WEAK:
        return "not shown"
    if separation * predicted < 0:
        return "contradicted"
    return "confirmed" if size >= CONFIRMED else "weak"


def domain_evidence(acts: TextActivations, cases) -> pd.DataFrame:
    """How much a domain moves a neuron, and how often the domain's texts use its tokens.

    Args:
        acts: activations on texts of several domains.
        cases: ``(neuron, domain)`` pairs.

    Returns:
        One row per case: the mean true pre-activation on the domain's texts and on the other
        domains' texts (:meth:`DomainTexts.others`: a text two domains share, such as a UK
        medicine leaflet that is both *british* and *medical*, is left out), their difference
        (``excess``), the same difference for the approximation (``predicted excess``), the mean
        standard deviation along the domain's texts
        (``within-text SD``), ``excess / within-text SD``, and the neuron's up- and down-tokens
        per 1000 tokens in the domain's texts and in the others, and the :func:`verdict`.
    """
    means, approx = acts.window_means(), acts.window_means("approx")
    spreads = acts.window_spreads()
    up, down = acts.marks_per_1000()
    rows = []
    for neuron, domain in cases:
        col, inside = acts.column(neuron), acts.texts.indices(domain)
        outside = acts.texts.others(domain)
        if not outside:
            raise InputError("domain_evidence needs texts of at least one other domain.")
        excess = float(means[inside, col].mean() - means[outside, col].mean())
        predicted = float(approx[inside, col].mean() - approx[outside, col].mean())
        spread = float(spreads[inside, col].mean())
        rows.append(
            {
                "neuron": int(neuron),
                "domain": domain,
                "mean, domain": float(means[inside, col].mean()),
                "mean, others": float(means[outside, col].mean()),
                "excess": excess,
                "predicted excess": predicted,
                "within-text SD": spread,
                "excess / SD": excess / spread,
                "verdict": verdict(excess / spread, predicted),
                "up-tokens /1000, domain": float(up[inside, col].mean()),
                "up-tokens /1000, others": float(up[outside, col].mean()),
                "down-tokens /1000, domain": float(down[inside, col].mean()),
                "down-tokens /1000, others": float(down[outside, col].mean()),
            }
        )
    return pd.DataFrame(rows).set_index(["neuron", "domain"])


@torch.no_grad()
def term_spreads(
    circuit: ContextualCircuit,
    model: TransformerBridge,
    neuron,
    tokens: Int[Tensor, " pos"],
    start: int = START,
) -> dict[str, float]:
    """Standard deviation along one text of each term of a neuron's approximate pre-activation.

    The terms are those of :meth:`evaluation.NeuronApproximator.terms` (the bag of tokens, the
    direct path of the current token, the other heads, ...), over positions ``>= start``.
    """
    terms = approximator(circuit, model, [neuron]).terms(tokens[None].to(model.cfg.device))
    return {name: float(t[0, start:, 0].std()) for name, t in terms.items()}


# ----------------------------------------------------------------------------------------------
# Before the activations: token densities, a neuron's own domain, the case-study neurons
# ----------------------------------------------------------------------------------------------


def token_counts(
    windows: list[Int[Tensor, " _pos"]], d_vocab: int
) -> Float[Tensor, "batch d_vocab"]:
    """How often each token occurs in each window (all positions but the first, BOS)."""
    counts = torch.zeros(len(windows), d_vocab)
    for i, window in enumerate(windows):
        ids = torch.as_tensor(window).cpu()[1:]
        counts[i].index_add_(0, ids, torch.ones(len(ids)))
    return counts


@dataclass
class TokenDensities:
    """Up-tokens and down-tokens of neurons per 1000 tokens of each text (no model run).

    Attributes:
        neurons: the neurons, in the order of the last axis.
        texts: the texts, in the order of the first axis.
        up: per 1000 tokens of each text (BOS not counted), tokens whose robust z for the neuron
            is at least ``theta`` (:func:`token_marks`).
        down: the same for z at most ``-theta``.
        n_up, n_down: how many vocabulary tokens are up-tokens / down-tokens of each neuron.
        theta: the threshold.
    """

    neurons: list[int]
    texts: DomainTexts
    up: Float[Tensor, "batch n_neurons"]
    down: Float[Tensor, "batch n_neurons"]
    n_up: Int[Tensor, " n_neurons"]
    n_down: Int[Tensor, " n_neurons"]
    theta: float

    def column(self, neuron) -> int:
        """The position of ``neuron`` on the last axis."""
        j = int(neuron)
        if j not in self.neurons:
            raise InputError(f"Neuron {j} was not counted; these densities have {self.neurons}.")
        return self.neurons.index(j)

    def domains(self) -> list[str]:
        """The domains of the texts, in order of first appearance."""
        return list(dict.fromkeys(self.texts.domains))

    def side(self, which: str) -> Float[Tensor, "batch n_neurons"]:
        if which not in ("up", "down"):
            raise InputError(f"which must be 'up' or 'down', got {which!r}.")
        return self.up if which == "up" else self.down

    def inside(self, domain: str, which: str = "up") -> Float[Tensor, " n_neurons"]:
        """Mean density over the domain's texts."""
        return self.side(which)[self.texts.indices(domain)].mean(0)

    def outside(self, domain: str, which: str = "up") -> Float[Tensor, " n_neurons"]:
        """Mean density over the other domains' texts (:meth:`DomainTexts.others`)."""
        others = self.texts.others(domain)
        if not others:
            raise InputError(f"No texts outside domain {domain!r}: add another domain's texts.")
        return self.side(which)[others].mean(0)

    def gap(self, domain: str, which: str = "up") -> Float[Tensor, " n_neurons"]:
        """Density in the domain's texts minus density in the other domains' texts."""
        return self.inside(domain, which) - self.outside(domain, which)

    def subset(self, indices: list[int]) -> "TokenDensities":
        """The same neurons on the texts at ``indices`` only (densities are per text)."""
        return replace(
            self, texts=self.texts.subset(indices), up=self.up[indices], down=self.down[indices]
        )


@torch.no_grad()
def token_densities(
    circuit: ContextualCircuit,
    model: TransformerBridge,
    neurons,
    texts: DomainTexts,
    scores: NeuronScores,
    theta: float = THETA,
    chunk: int = 256,
) -> TokenDensities:
    """How often each text uses each neuron's up-tokens and down-tokens, per 1000 tokens.

    Only the weights (the contributions) and the texts' token counts: the model is not run, so
    a choice made from these numbers is not a choice made on the activations. The marks are those
    of :func:`token_marks` (the score's z and vocabulary).
    """
    neurons = check_neurons(model, neurons)
    if not texts.windows:
        raise DataError("No texts: give at least one window.")
    counts = token_counts(texts.windows, model.cfg.d_vocab)  # [batch, d_vocab], CPU
    n_tokens = counts.sum(1, keepdim=True).clamp(min=1)
    vocabulary = scores.vocabulary.cpu()
    up, down, n_up, n_down = [], [], [], []
    for start in range(0, len(neurons), chunk):
        block = neurons[start : start + chunk]
        z = contributions(circuit, model, block).cpu()  # [chunk, d_vocab]
        z = (z - scores.median[block, None].cpu()) / scores.spread[block, None].cpu()
        is_up = ((z >= theta) & vocabulary).float()
        is_down = ((z <= -theta) & vocabulary).float()
        up.append(1000 * counts @ is_up.T / n_tokens)
        down.append(1000 * counts @ is_down.T / n_tokens)
        n_up.append(is_up.sum(1).long())
        n_down.append(is_down.sum(1).long())
    return TokenDensities(
        neurons=neurons,
        texts=texts,
        up=torch.cat(up, 1),
        down=torch.cat(down, 1),
        n_up=torch.cat(n_up),
        n_down=torch.cat(n_down),
        theta=float(theta),
    )


#: A neuron's own domain must use its driving tokens at least this many times as often as the
#: other domains' texts do, and at least :data:`MIN_DENSITY_GAP` more per 1000 tokens.
MIN_DENSITY_RATIO = 2.0
MIN_DENSITY_GAP = 1.0


def density_rule(
    inside: float, outside: float, min_ratio: float = MIN_DENSITY_RATIO,
    min_gap: float = MIN_DENSITY_GAP,
) -> tuple[float, bool]:
    """``inside / outside`` (infinite when only the domain's texts use the tokens, 0 when they do
    not) and whether it is at least ``min_ratio`` with ``inside - outside`` at least ``min_gap``."""
    ratio = (inside / outside if outside > 0 else float("inf")) if inside > 0 else 0.0
    return ratio, inside - outside >= min_gap and ratio >= min_ratio


def domain_from_weights(
    densities: TokenDensities,
    scores: NeuronScores,
    min_ratio: float = MIN_DENSITY_RATIO,
    min_gap: float = MIN_DENSITY_GAP,
) -> pd.DataFrame:
    """Each neuron's own domain, chosen from its weights before any activation is looked at.

    A neuron's *driving tokens* are those on its dominant side (``scores.sign``): its up-tokens
    when its most extreme tokens push it up on balance, its down-tokens when they push it down (a
    "not Spanish" neuron is driven down by Spanish tokens, so its domain is Spanish). Its own
    domain is the domain whose texts use its driving tokens most often relative to the other
    domains' texts (:meth:`TokenDensities.gap`), provided they use them at least ``min_ratio``
    times as often and ``min_gap`` more per 1000 tokens (:func:`density_rule`); otherwise its
    tokens suggest none of the domains and the domain is ``None``. To name it from half the texts
    and check it on the other half: :func:`context_neurons.own_domain.held_out_domains`.

    Returns:
        One row per neuron: ``side`` (``"up"`` or ``"down"``), ``driving tokens`` (how many
        vocabulary tokens), ``domain`` (or ``None``), ``density, domain`` and ``density, others``
        (per 1000 tokens, of the best domain whether or not it qualifies), and ``ratio``.
    """
    domains = densities.domains()
    rows = {}
    for j in densities.neurons:
        col = densities.column(j)
        side = "up" if float(scores.sign[j]) > 0 else "down"
        inside = {d: float(densities.inside(d, side)[col]) for d in domains}
        outside = {d: float(densities.outside(d, side)[col]) for d in domains}
        best = max(domains, key=lambda d: inside[d] - outside[d])
        ratio, qualifies = density_rule(inside[best], outside[best], min_ratio, min_gap)
        rows[j] = {
            "side": side,
            "driving tokens": int((densities.n_up if side == "up" else densities.n_down)[col]),
            "domain": best if qualifies else None,
            "density, domain": inside[best],
            "density, others": outside[best],
            "ratio": ratio,
        }
    table = pd.DataFrame(rows).T
    table.index.name = "neuron"
    return table.astype(
        {"driving tokens": int, "density, domain": float, "density, others": float, "ratio": float}
    )


class CaseStudy(NamedTuple):
    """One of the paper's case studies: a role, the domain of its texts, the paper's reading and
    the neuron number the paper gives on GPT-2 Small."""

    role: str
    domain: str
    reading: str
    paper_neuron: int


#: The paper's case studies (Gibson, section "Contextual neurons"), with GPT-2 Small's neuron
#: numbers as the paper gives them. The planted model plants neurons of these roles at the same
#: numbers (by construction); on other models :func:`case_studies` chooses from the weights.
PAPER_CASE_STUDIES: tuple[CaseStudy, ...] = (
    CaseStudy("British spelling", "british", "British versus American English", 300),
    CaseStudy("British spelling, second", "british", "British context, writes opposite", 704),
    CaseStudy("war", "war", "19th-20th century conflict", 1621),
    CaseStudy("religion", "bible", "religious text", 1710),
)


def uses_paper_neurons(loaded) -> bool:
    """Whether the paper's neuron numbers name the case studies on this model.

    True on GPT-2 Small (the paper's model) and on a planted model that planted every case-study
    neuron (by construction); False on any other model, whose neuron numbers mean nothing.
    """
    paper = [case.paper_neuron for case in PAPER_CASE_STUDIES]
    if getattr(loaded, "is_planted", False):
        return all(j in loaded.truth.context_neurons for j in paper)
    return getattr(loaded, "name", None) == "gpt2"


def case_studies(loaded, densities: TokenDensities, neurons) -> pd.DataFrame:
    """The case-study neurons on this model, and how each was chosen.

    On GPT-2 Small and the planted model (:func:`uses_paper_neurons`): the paper's neurons. On
    any other model: for each role, the neuron among ``neurons`` (the found ones) whose up-tokens
    the role's domain uses most relative to the other texts (:func:`token_matched_neuron`); the
    second British-spelling neuron is the next best for British texts. Chosen from the weights
    and the texts' tokens, before any activation is looked at.

    Returns:
        Indexed by ``role``: ``neuron``, ``domain``, ``paper's reading``, ``paper's neuron``
        (GPT-2 Small) and ``chosen by``.
    """
    paper = uses_paper_neurons(loaded)
    if paper:
        how = (
            "the paper's neuron (planted there by construction)"
            if getattr(loaded, "is_planted", False)
            else "the paper's neuron"
        )
    else:
        how = "from the weights: the found neuron whose up-tokens its domain's texts use most"
    rows, taken = [], {}
    for case in PAPER_CASE_STUDIES:
        if paper:
            j = case.paper_neuron
        else:
            exclude = taken.get(case.domain, [])
            pool = [int(k) for k in neurons if int(k) not in exclude] or list(neurons)
            j = token_matched_neuron(densities, case.domain, pool)
            taken.setdefault(case.domain, []).append(j)
        rows.append(
            {
                "role": case.role,
                "neuron": int(j),
                "domain": case.domain,
                "paper's reading": case.reading,
                "paper's neuron": case.paper_neuron,
                "chosen by": how,
            }
        )
    return pd.DataFrame(rows).set_index("role")


@torch.no_grad()
def frequent_driving_tokens(
    circuit: ContextualCircuit,
    model: TransformerBridge,
    neuron,
    texts: DomainTexts,
    domain: str,
    scores: NeuronScores,
    theta: float = THETA,
    k: int = 3,
) -> list[tuple[str, int]]:
    """The ``k`` driving tokens of a neuron (:func:`domain_from_weights`) that the domain's texts
    use most, with their counts: what a domain from the weights rests on."""
    j = check_neurons(model, [neuron])[0]
    c = contributions(circuit, model, [j])[0].cpu()
    z = (c - scores.median[j].cpu()) / scores.spread[j].cpu()
    sign = 1.0 if float(scores.sign[j]) > 0 else -1.0
    driving = (sign * z >= theta) & scores.vocabulary.cpu()
    windows = [texts.windows[i] for i in texts.indices(domain)]
    counts = token_counts(windows, model.cfg.d_vocab).sum(0) * driving
    top = counts.topk(min(k, int((counts > 0).sum())))
    return [
        (repr(model.tokenizer.decode([int(t)])), int(c))
        for t, c in zip(top.indices.tolist(), top.values.tolist())
    ]
