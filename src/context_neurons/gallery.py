"""Neurons on real text, and the gallery. This module reads discovered neurons on domain texts.

Chapter 5 reads a context neuron from its token contributions; activations on real texts of the
domain test that reading. :func:`domain_texts` takes a few windows of every case-study domain
(``data.domain_documents``); :func:`text_activations` runs the model's first layer and the
circuit's approximation (chapter 6's :func:`context_neurons.evaluation.approximator`) on all of
them at once, for all neurons at once, and marks where each neuron's strongest tokens occur
(robust z-score of the contribution at least ``theta``, as in the score). From those,
:func:`domain_evidence` tabulates how much a domain moves a neuron against how often the domain's
texts use the neuron's tokens.

Where a domain's texts rarely use a neuron's tokens, a controlled experiment tests the reading at
fixed text: :func:`respelled_texts` respells American texts into British spelling
(``topics.swap_spellings``), keeping only texts whose two versions align token by token, and
:func:`respelling_effect` measures the difference of the pre-activations, British minus
American, near the respelled words and away from them (chapter 5, neurons 300 and 704).

The gallery page of the book shows every discovered neuron: :func:`gallery_table` (one row per
neuron), :func:`index_markdown` and :func:`neuron_markdown` (the page's Markdown, one heading per
neuron) and :func:`plot_gallery` (a grid of token-contribution bars, for a preview).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

import matplotlib.pyplot as plt
import pandas as pd
import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Int
from torch import Tensor
from transformer_lens import HookedTransformer

from context_neurons import data
from context_neurons.circuit import ContextualCircuit
from context_neurons.evaluation import domain_windows
from context_neurons.neurons import (
    THETA,
    NeuronScores,
    check_neurons,
    contributions,
    planted_topic_share,
    token_tables,
)
from context_neurons.plotting_neurons import plot_token_bars

#: First position of the means over a text: before it the bag of tokens is still filling up.
START = 100

# ----------------------------------------------------------------------------------------------
# Domain texts and activations
# ----------------------------------------------------------------------------------------------


@dataclass
class DomainTexts:
    """Token windows of several domains, one entry per window.

    Attributes:
        windows: 1-D token tensors, ``<|endoftext|>`` first.
        labels: each window's source (``corpus:document``).
        domains: each window's domain.
    """

    windows: list[Int[Tensor, "_pos"]]
    labels: list[str]
    domains: list[str]

    def others(self, domain: str) -> list[int]:
        """The windows of other domains, leaving out any text that ``domain`` also has."""
        own = {self.labels[i] for i in self.indices(domain)}
        return [i for i, label in enumerate(self.labels) if label not in own]

    def indices(self, domain: str) -> list[int]:
        """The windows of ``domain``."""
        found = [i for i, d in enumerate(self.domains) if d == domain]
        if not found:
            raise data.DataError(
                f"No texts of domain {domain!r}; these texts cover {sorted(set(self.domains))}."
            )
        return found


def domain_texts(
    tokenizer, domains=None, n: int = 4, interleave: bool = True, n_ctx: int = 1024
) -> DomainTexts:
    """``n`` windows of up to ``n_ctx`` tokens from each domain (``data.domain_documents``).

    Documents shorter than a window are concatenated, separated by ``<|endoftext|>``; longer ones
    are truncated (one window per document). With ``interleave`` the documents alternate between
    a domain's corpora (for ``"british"``: UK medicine leaflets and Australian news).

    Args:
        tokenizer: the model's tokenizer.
        domains: domain names (default ``data.DOMAINS``).
        n: windows per domain.
        interleave: alternate between a domain's corpora.
        n_ctx: the window length (BOS included).
    """
    domains = data.DOMAINS if domains is None else tuple(domains)
    if n < 1 or not domains:
        raise data.DataError(f"Ask for at least one window of at least one domain (n = {n}).")
    windows, labels, names = [], [], []
    for domain in domains:
        got, got_labels = domain_windows(
            tokenizer, domain, n=n, min_tokens=n_ctx - 1, interleave=interleave, n_ctx=n_ctx
        )
        windows += got
        labels += got_labels
        names += [domain] * len(got)
    return DomainTexts(windows, labels, names)


@dataclass
class TextActivations:
    """Pre-activations of neurons along domain texts, true and approximate (on the CPU).

    Attributes:
        neurons: the neurons, in the order of the last axis.
        texts: the texts, in the order of the first axis.
        tokens: the texts right-padded with ``<|endoftext|>``.
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
    lengths: Int[Tensor, "batch"]
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
            raise ValueError(f"Neuron {j} was not computed; these activations have {self.neurons}.")
        return self.neurons.index(j)

    def valid(self, start: int | None = None) -> Bool[Tensor, "batch pos"]:
        """Positions from ``start`` (default :attr:`start`) to each text's end."""
        start = self.start if start is None else start
        positions = torch.arange(self.tokens.shape[1])
        return (positions[None] >= start) & (positions[None] < self.lengths[:, None])

    def window_means(self, which: str = "true") -> Float[Tensor, "batch n_neurons"]:
        """Each neuron's mean pre-activation over each text (positions ``>= start``; computed
        once per ``which``: the gallery asks for it once per neuron)."""
        if which not in self._means:
            values, mask = self._values(which), self.valid()[..., None]
            self._means[which] = (values * mask).sum(1) / mask.sum(1)
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
            raise ValueError(f"which must be 'true' or 'approx', got {which!r}.")
        return self.true if which == "true" else self.approx


@torch.no_grad()
def token_marks(
    circuit: ContextualCircuit,
    model: HookedTransformer,
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
    model: HookedTransformer,
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
    from context_neurons import evaluation as ev

    neurons = check_neurons(model, neurons)
    if not texts.windows:
        raise data.DataError("No texts: give at least one window.")
    tokens, lengths = data.pad_windows(texts.windows)
    if int(lengths.min()) <= start:
        raise data.DataError(f"Every text needs more than start = {start} tokens.")
    approx_fn = ev.approximator(circuit, model, neurons)
    true, approx = [], []
    for b in range(0, len(tokens), batch_size):
        batch = tokens[b : b + batch_size].to(model.cfg.device)
        true.append(ev.true_pre_activations(model, batch, neurons).cpu())
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


def token_matched_neuron(acts: TextActivations, domain: str, neurons=None) -> int:
    """The neuron whose up-tokens the domain's texts use most, relative to the other texts.

    Chosen from the weights and the texts' tokens only (:attr:`TextActivations.marks`), not from
    the activations, so that the activations are a fair test of the choice.
    """
    neurons = acts.neurons if neurons is None else [int(j) for j in neurons]
    up, _ = acts.marks_per_1000()
    inside, outside = acts.texts.indices(domain), acts.texts.others(domain)
    gap = up[inside].mean(0) - up[outside].mean(0)
    return max(neurons, key=lambda j: float(gap[acts.column(j)]))


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
            raise ValueError("domain_evidence needs texts of at least one other domain.")
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
    model: HookedTransformer,
    neuron,
    tokens: Int[Tensor, "pos"],
    start: int = START,
) -> dict[str, float]:
    """Standard deviation along one text of each term of a neuron's approximate pre-activation.

    The terms are those of :meth:`evaluation.NeuronApproximator.terms` (the bag of tokens, the
    direct path of the current token, the other heads, ...), over positions ``>= start``.
    """
    from context_neurons import evaluation as ev

    terms = ev.approximator(circuit, model, [neuron]).terms(tokens[None].to(model.cfg.device))
    return {name: float(t[0, start:, 0].std()) for name, t in terms.items()}


# ----------------------------------------------------------------------------------------------
# A controlled experiment: respelling
# ----------------------------------------------------------------------------------------------

#: Positions after a respelled word that count as "near" it (the bag's effect decays over tens).
NEAR = 50


def length_preserving_pairs(pairs, tokenizer) -> list[tuple[str, str]]:
    """The spelling pairs whose two forms have equal token counts after a space.

    Checked lower-case and capitalised (`` colour`` and `` color``, `` Colour`` and `` Color``),
    the forms of running text: respelling with these pairs leaves a text's token count unchanged,
    so the two versions align position by position. Words at the start of a line or after a
    bracket are tokenized without the space; :func:`respelled_texts` checks every text.

    Args:
        pairs: ``(british, american)`` spelling pairs (``topics.read_gb_us_pairs``).
        tokenizer: the model's tokenizer.
    """
    kept = []
    for british, american in pairs:
        forms = [(f" {british}", f" {american}")]
        forms.append(
            (f" {british[:1].upper()}{british[1:]}", f" {american[:1].upper()}{american[1:]}")
        )
        if all(_n_tokens(tokenizer, gb) == _n_tokens(tokenizer, us) for gb, us in forms):
            kept.append((british, american))
    return kept


def _n_tokens(tokenizer, text: str) -> int:
    return len(tokenizer.encode(text, add_special_tokens=False))


def _respelled_words(
    text: str, offsets: list[tuple[int, int]], changed: Bool[Tensor, "pos"]
) -> list[str]:
    """The words of ``text`` (letter runs) that overlap a token marked in ``changed``."""
    spans = [(m.start(), m.end()) for m in re.finditer(r"[A-Za-z]+", text)]
    starts = [a for a, _ in spans]
    touched = set()
    for i in changed.nonzero().flatten().tolist():
        begin, end = offsets[i]
        k = bisect.bisect_right(starts, end - 1) - 1  # the last word starting inside the token
        while k >= 0 and spans[k][1] > begin:
            touched.add(k)
            k -= 1
    return [text[slice(*spans[k])] for k in sorted(touched)]


@dataclass
class Respelling:
    """American texts and their British respellings, aligned position by position.

    Attributes:
        labels: each text's source (``corpus:id``).
        american: the original texts, ``<|endoftext|>`` first, right-padded.
        british: the same texts respelled; every token equal except at respelled words.
        lengths: each text's length (BOS included).
        respelled: True at the positions whose token the respelling changed.
        words: the number of words respelled in each text.
        n_examined: candidate texts tokenized; ``n_dropped`` of them were left out because
            the respelling changed their token count or tokens outside the respelled words.
        pairs_source: where the spelling pairs came from.
    """

    labels: list[str]
    american: Int[Tensor, "batch pos"]
    british: Int[Tensor, "batch pos"]
    lengths: Int[Tensor, "batch"]
    respelled: Bool[Tensor, "batch pos"]
    words: list[int]
    n_examined: int
    n_dropped: int
    pairs_source: str = ""

    def per_1000(self) -> float:
        """Respelled words per 1000 tokens over all the texts (BOS not counted)."""
        return 1000 * sum(self.words) / float((self.lengths - 1).sum())


def respelled_texts(
    tokenizer,
    documents,
    pairs,
    n: int = 8,
    n_ctx: int = 1024,
    min_tokens: int = 256,
    max_chars: int = 8000,
    examine: int = 4,
    pairs_source: str = "",
) -> Respelling:
    """The ``n`` documents with most respelled words, in American and in British spelling.

    Each document's first ``max_chars`` characters are respelled with ``topics.swap_spellings``.
    The ``examine * n`` documents with most respelled words are tokenized in both versions, and
    a pair is kept only if both versions have the same number of tokens and the tokens that
    differ touch exactly the respelled words, each of them respellable (nothing else changed).
    Both versions are cut to a window of at most ``n_ctx`` tokens, ``<|endoftext|>`` first, and
    the ``n`` windows with most respelled words are returned.

    Args:
        tokenizer: the model's (fast) tokenizer.
        documents: an iterable of ``data.Document`` (e.g. ``data.domain_documents("american")``).
        pairs: ``(british, american)`` spelling pairs; :func:`length_preserving_pairs` keeps
            most texts aligned.
        n: texts wanted.
        n_ctx: the window length (BOS included).
        min_tokens: shortest text kept (tokens, BOS excluded).
        max_chars: characters of each document read (enough for a window of ``n_ctx`` tokens).
        examine: documents tokenized per text wanted.
        pairs_source: recorded in the result.

    Raises:
        DataError: if no document gives an aligned respelling.
    """
    from context_neurons.topics import swap_spellings

    if n < 1 or examine < 1:
        raise data.DataError(f"Ask for at least one text (n = {n}, examine = {examine}).")
    candidates = []
    for index, doc in enumerate(documents):
        head = doc.text[:max_chars]
        british, count = swap_spellings(head, pairs, to="british")
        if count:
            candidates.append((-count, index, f"{doc.corpus}:{doc.id}", head, british, count))
    candidates = sorted(candidates, key=lambda c: c[:2])[: examine * n]
    kept, dropped = [], 0
    for _, index, label, head, british, count in candidates:
        encoded = tokenizer(head, add_special_tokens=False, return_offsets_mapping=True)
        us = encoded["input_ids"]
        gb = tokenizer.encode(british, add_special_tokens=False)
        if len(us) < min_tokens:
            continue
        if len(us) != len(gb):
            dropped += 1
            continue
        changed = torch.tensor(us) != torch.tensor(gb)
        words = _respelled_words(head, encoded["offset_mapping"], changed)
        if len(words) != count or any(swap_spellings(w, pairs)[1] != 1 for w in words):
            dropped += 1  # a token changed outside the respelled words: not a minimal pair
            continue
        body = min(len(us), n_ctx - 1)
        in_window = len(_respelled_words(head, encoded["offset_mapping"], changed[:body]))
        kept.append((-in_window, index, label, us[:body], gb[:body], in_window))
    kept = sorted(kept, key=lambda k: k[:2])[:n]
    if not kept:
        raise data.DataError(
            "No document gave an aligned respelling: give documents that use American spellings "
            "of the pairs (e.g. data.domain_documents('american'))."
        )
    american, lengths = data.pad_windows([torch.tensor([data.EOT_ID, *k[3]]) for k in kept])
    british, _ = data.pad_windows([torch.tensor([data.EOT_ID, *k[4]]) for k in kept])
    return Respelling(
        labels=[k[2] for k in kept],
        american=american,
        british=british,
        lengths=lengths,
        respelled=american != british,
        words=[k[5] for k in kept],
        n_examined=len(candidates),
        n_dropped=dropped,
        pairs_source=pairs_source,
    )


@dataclass
class RespellingEffect:
    """British minus American pre-activations of some neurons along respelled texts (CPU).

    Attributes:
        neurons: the neurons, in the order of the last axis.
        respelling: the texts.
        true: the model's pre-activation on the British version minus that on the American one.
        approx: the same difference for the circuit's approximation.
        spread: each neuron's standard deviation along the American texts (positions ``>=
            start``, averaged over texts): the scale of :func:`verdict`.
        start: first position of the means.
        near: positions counted as near a respelled word.
    """

    neurons: list[int]
    respelling: Respelling
    true: Float[Tensor, "batch pos n_neurons"]
    approx: Float[Tensor, "batch pos n_neurons"]
    spread: Float[Tensor, "n_neurons"]
    start: int = START
    near: int = NEAR

    def masks(self) -> dict[str, Bool[Tensor, "batch pos"]]:
        """Positions ``>= start``: at a respelled token, within ``near`` after one (not at one),
        elsewhere, and all of them."""
        positions = torch.arange(self.true.shape[1])
        valid = (positions[None] >= self.start) & (
            positions[None] < self.respelling.lengths[:, None]
        )
        respelled = self.respelling.respelled
        count = F.pad(respelled.cumsum(1), (self.near + 1, 0))  # count[:, n + near + 1] = cum[n]
        recent = count[:, self.near : -1] - count[:, : -self.near - 1]  # among n - near .. n - 1
        at = respelled & valid
        near = (recent > 0) & ~respelled & valid
        return {"at word": at, self.near_name: near, "elsewhere": valid & ~at & ~near, "all": valid}

    @property
    def near_name(self) -> str:
        """The name of the positions near a respelled word."""
        return f"next {self.near}"

    def differences(self) -> pd.DataFrame:
        """Mean difference per neuron (rows) over each set of :meth:`masks` (columns: the set,
        then ``true`` or ``approx``)."""
        columns = {}
        for name, mask in self.masks().items():
            m = mask[..., None]
            for which, values in (("true", self.true), ("approx", self.approx)):
                mean = (values * m).sum((0, 1)) / m.sum((0, 1)).clamp(min=1)
                columns[(name, which)] = mean.tolist()
        return pd.DataFrame(columns, index=pd.Index(self.neurons, name="neuron"))

    def before_first(self) -> float:
        """The largest ``|true difference|`` before each text's first respelled token."""
        first = self.respelling.respelled.to(torch.int64).argmax(1)
        before = torch.arange(self.true.shape[1])[None] < first[:, None]
        return float((self.true.abs() * before[..., None]).max())

    def summary(self) -> pd.DataFrame:
        """One row per neuron: the effect near respelled words and over all positions, in units
        of the within-text SD, and the :func:`verdict` of the true effect near respelled words
        against the approximate one (the scale and thresholds of :func:`domain_evidence`)."""
        differences, near = self.differences(), self.near_name
        spread = pd.Series(self.spread.tolist(), index=differences.index)
        return pd.DataFrame(
            {
                f"{near}, true": differences[(near, "true")],
                f"{near}, approx": differences[(near, "approx")],
                "within-text SD": spread,
                f"{near} / SD": differences[(near, "true")] / spread,
                "all / SD": differences[("all", "true")] / spread,
                "verdict": [
                    verdict(float(t / s), float(a))
                    for t, a, s in zip(
                        differences[(near, "true")], differences[(near, "approx")], spread
                    )
                ],
            }
        )

    def panel(self, neuron, text: int, title: str = "") -> dict:
        """What :func:`plotting_neurons.plot_activation_grid` draws: both differences, one text."""
        col, length = self.neurons.index(int(neuron)), int(self.respelling.lengths[text])
        return {
            "curves": {
                "true": self.true[text, :length, col],
                "approximation": self.approx[text, :length, col],
            },
            "marks": self.respelling.respelled[text, :length].to(torch.int64),
            "mark_names": {1: "respelled word"},
            "baseline": 0.0,
            "baseline_label": "no difference",
            "ylabel": "British - American",
            "title": title,
        }


@torch.no_grad()
def respelling_effect(
    circuit: ContextualCircuit,
    model: HookedTransformer,
    neurons,
    respelling: Respelling,
    start: int = START,
    near: int = NEAR,
) -> RespellingEffect:
    """True and approximate pre-activations on both versions of every text, and their difference.

    The true pre-activations come from the model's first layer
    (:func:`evaluation.true_pre_activations`), the approximation from
    :func:`evaluation.approximator`, both on the British and the American version in one batch.
    """
    from context_neurons import evaluation as ev

    neurons = check_neurons(model, neurons)
    if near < 1:
        raise ValueError(f"near must be at least 1 position, got {near}.")
    if int(respelling.lengths.min()) <= start:
        raise data.DataError(f"Every text needs more than start = {start} tokens.")
    tokens = torch.cat([respelling.american, respelling.british]).to(model.cfg.device)
    true = ev.true_pre_activations(model, tokens, neurons).cpu()
    approx = ev.approximator(circuit, model, neurons)(tokens).cpu()
    b = len(respelling.american)
    positions = torch.arange(tokens.shape[1])
    valid = ((positions[None] >= start) & (positions[None] < respelling.lengths[:, None]))[
        ..., None
    ]
    american = true[:b]
    means = (american * valid).sum(1) / valid.sum(1)
    spread = ((((american - means[:, None]) * valid) ** 2).sum(1) / (valid.sum(1) - 1)).sqrt()
    pad = ~(positions[None] < respelling.lengths[:, None])[..., None]
    return RespellingEffect(
        neurons=neurons,
        respelling=respelling,
        true=(true[b:] - true[:b]).masked_fill(pad, 0.0),
        approx=(approx[b:] - approx[:b]).masked_fill(pad, 0.0),
        spread=spread.mean(0),
        start=start,
        near=near,
    )


# ----------------------------------------------------------------------------------------------
# The gallery
# ----------------------------------------------------------------------------------------------


def gallery_table(
    circuit: ContextualCircuit,
    model: HookedTransformer,
    neurons,
    scores: NeuronScores,
    truth=None,
    k: int = 5,
) -> pd.DataFrame:
    """One row per neuron: score, sign, top and bottom tokens (and the planted plan, if any).

    Columns: ``score``, ``direction`` (``+`` when its extreme tokens push it up on balance),
    ``top tokens``, ``bottom tokens``; on the planted model also ``planted as`` (the planted
    description, or ``-``) and the share of its ``scores.k`` most extreme tokens (largest
    ``|z|``, the tokens behind the score) that belong to the topics planted there.
    """
    neurons = check_neurons(model, neurons)
    tables = token_tables(circuit, model, neurons, k=max(k, scores.k), scores=scores)
    rows = []
    for j in neurons:
        table = tables[j]
        row = {
            "neuron": j,
            "score": round(float(scores.top[j]), 1),
            "direction": "+" if scores.sign[j] > 0 else "-",
            "top tokens": " ".join(table["top token"].iloc[:k]),
            "bottom tokens": " ".join(table["bottom token"].iloc[:k]),
        }
        if truth is not None:
            plan = truth.context_neurons.get(j)
            row["planted as"] = plan["description"] if plan else "-"
            row["planted-topic share"] = round(
                planted_topic_share(truth, j, _extreme_ids(table, scores.k)), 2
            )
        rows.append(row)
    return pd.DataFrame(rows).set_index("neuron")


def _extreme_ids(table: pd.DataFrame, k: int) -> list[int]:
    """The ``k`` tokens of a token table with the largest ``|z|``, either side."""
    both = pd.concat(
        [
            table[["top id", "top z"]].set_axis(["id", "z"], axis=1),
            table[["bottom id", "bottom z"]].set_axis(["id", "z"], axis=1),
        ]
    )
    order = (-both["z"].abs().to_numpy()).argsort(kind="stable")[:k]
    return [int(t) for t in both["id"].iloc[order]]


def plot_gallery(
    circuit: ContextualCircuit,
    model: HookedTransformer,
    neurons,
    scores: NeuronScores,
    k: int = 5,
    columns: int = 4,
):
    """A grid of small bar charts of top and bottom contributions, one per neuron (in order)."""
    neurons = check_neurons(model, neurons)
    tables = token_tables(circuit, model, neurons, k=k, scores=scores)
    rows = (len(neurons) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(3.1 * columns, 2.3 * rows), squeeze=False)
    for ax, j in zip(axes.flat, neurons):
        title = f"neuron {j} (score {float(scores.top[j]):.0f})"
        plot_token_bars(tables[j], j, k=k, ax=ax, title=title)
    for ax in list(axes.flat)[len(neurons) :]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def neuron_facts(
    acts: TextActivations, scores: NeuronScores, neuron, window: int, truth=None
) -> dict[str, str]:
    """The facts listed under a neuron's heading on the gallery page.

    Args:
        acts: activations on the gallery's texts (the neuron among them).
        scores: the discovery scores.
        neuron: the neuron.
        window: the text its plot shows.
        truth: the planted truth, or ``None`` (GPT-2).
    """
    j, col = int(neuron), acts.column(neuron)
    found = scores.found(acts.theta)
    rank = f" (rank {found.index(j) + 1} of {len(found)})" if j in found else ""
    push = "up" if scores.sign[j] > 0 else "down"
    marks = acts.marks[window, 1 : int(acts.lengths[window]), col]
    facts = {
        "score": f"top[j] = {float(scores.top[j]):.1f}{rank}; its {scores.k} most extreme "
        f"tokens push it {push} on balance",
    }
    if truth is not None:
        plan = truth.context_neurons.get(j)
        facts["planted as"] = plan["description"] if plan else "not planted"
    departure = float(acts.departures()[window, col])
    facts["plotted text"] = (
        f"{code_span(acts.texts.labels[window])} (domain *{acts.texts.domains[window]}*): its "
        f"mean pre-activation there is {departure:+.2f} from its median over the "
        f"{len(acts.lengths)} texts (up-tokens in it: {int((marks > 0).sum())}, down-tokens: "
        f"{int((marks < 0).sum())})"
    )
    return facts


def code_span(text: str, in_table: bool = False) -> str:
    """``text`` as a Markdown code span, shown verbatim (backticks inside are fenced around)."""
    run = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (run + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    span = f"{fence}{pad}{text}{pad}{fence}"
    return span.replace("|", "\\|") if in_table else span


def anchor(neuron) -> str:
    """The HTML id of a neuron's heading on the gallery page (``Neuron 300`` -> ``neuron-300``)."""
    return f"neuron-{int(neuron)}"


def index_markdown(
    neurons, scores: NeuronScores, tables: dict[int, pd.DataFrame], extra=None, k: int = 3
) -> str:
    """A Markdown table of all neurons, each linking to its heading on the page.

    Args:
        neurons: the neurons, in the order of the rows.
        scores: their scores.
        tables: neuron -> token table (:func:`neurons.token_tables`).
        extra: neuron -> {column: text}, further columns (e.g. what was planted there).
        k: tokens shown per side.
    """
    extra = extra or {}
    columns = list(dict.fromkeys(c for j in neurons for c in extra.get(j, {})))
    head = ["neuron", "score", "top tokens", "bottom tokens", *columns]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for j in neurons:
        table = tables[j]
        cells = [
            f'<a href="#{anchor(j)}">{j}</a>',
            f"{float(scores.top[j]):.1f}",
            " ".join(code_span(t, True) for t in table["top token"].iloc[:k]),
            " ".join(code_span(t, True) for t in table["bottom token"].iloc[:k]),
            *[str(extra.get(j, {}).get(c, "")).replace("|", "\\|") for c in columns],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def neuron_markdown(neuron: int, table: pd.DataFrame, facts: dict[str, str], k: int = 10) -> str:
    """One neuron's section of the gallery: a heading, facts, and its top and bottom tokens.

    Args:
        neuron: the neuron index (the heading is ``Neuron <j>``, its HTML id :func:`anchor`).
        table: its token table (:func:`neurons.token_tables`), at least ``k`` rows.
        facts: label -> text, shown as a list under the heading.
        k: rows of the token table shown.
    """
    lines = [f"### Neuron {int(neuron)}", ""]
    lines += [f"- **{label}**: {text}" for label, text in facts.items()]
    lines += [
        "",
        "| rank | top token | contribution | z | bottom token | contribution | z |",
        "|---:|---|---:|---:|---|---:|---:|",
    ]
    for rank, row in table.head(k).iterrows():
        lines.append(
            f"| {rank} | {code_span(row['top token'], True)} | {row['top contribution']:+.2f} "
            f"| {row['top z']:+.1f} | {code_span(row['bottom token'], True)} "
            f"| {row['bottom contribution']:+.2f} | {row['bottom z']:+.1f} |"
        )
    return "\n".join(lines)
