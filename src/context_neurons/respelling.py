"""Respelling. This module tests a spelling neuron at fixed text: American texts respelled British.

Where a domain's texts rarely use a neuron's tokens, a controlled experiment tests the reading at
fixed text: :func:`respelled_texts` respells American texts into British spelling
(:func:`context_neurons.text.topics.swap_spellings`), keeping only texts whose two versions align
token by token, and :func:`respelling_effect` measures the difference of the pre-activations,
British minus American, near the respelled words and away from them (chapter 5, neurons 300 and
704 of the planted model).

Around the experiment, chapter 5's findings: :func:`case_verdicts` lists the case studies'
verdicts on the texts of their domains and says which British-spelling cases the experiment has
to test; :meth:`Respelling.coverage` says how dense the respelled texts are in a neuron's tokens;
:func:`compare_with_texts` sets the experiment's verdicts beside those of the British texts.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

import pandas as pd
import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from context_neurons.casestudies import (
    START,
    TextActivations,
    domain_evidence,
    token_marks,
    verdict,
)
from context_neurons.checks import DataError, InputError, check_neurons
from context_neurons.circuit import ContextualCircuit
from context_neurons.discovery import NeuronScores
from context_neurons.evaluation import approximator, true_pre_activations
from context_neurons.printing import wrapped
from context_neurons.text.corpora import corpora_dir
from context_neurons.text.topics import read_gb_us_pairs, swap_spellings
from context_neurons.text.windows import bos_id, context_length, pad_windows


NEAR = 50
#: The corpora's folder of British and American spelling lists (SCOWL).
GB_US_WORDLISTS = "wordlists_en_gb_us"


def spelling_pairs() -> tuple[list[tuple[str, str]], str]:
    """``(british, american)`` spelling pairs and their source: the offline corpora's SCOWL lists
    when the corpora are found, else the short built-in list (``topics.read_gb_us_pairs``)."""
    corpora = corpora_dir(required=False)
    return read_gb_us_pairs(corpora / GB_US_WORDLISTS if corpora else None)


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
    text: str, offsets: list[tuple[int, int]], changed: Bool[Tensor, " pos"]
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
    lengths: Int[Tensor, " batch"]
    respelled: Bool[Tensor, "batch pos"]
    words: list[int]
    n_examined: int
    n_dropped: int
    pairs_source: str = ""

    def per_1000(self) -> float:
        """Respelled words per 1000 tokens over all the texts (BOS not counted)."""
        return 1000 * sum(self.words) / float((self.lengths - 1).sum())

    @torch.no_grad()
    def coverage(self, circuit: ContextualCircuit, model: TransformerBridge, neuron,
                 scores: NeuronScores, against: CaseVerdicts) -> RespellingCoverage:
        """:class:`RespellingCoverage` of ``neuron`` by these texts (its up- and down-tokens:
        ``scores``'s robust z-scores, :func:`~context_neurons.casestudies.token_marks`), with the
        density of the ``(neuron, "british")`` case of ``against`` beside it."""
        both = torch.cat([self.american, self.british])
        marks = token_marks(circuit, model, [neuron], both, scores)[..., 0]
        n_texts, changed = len(self.labels), self.respelled
        tokens = float((self.lengths - 1).sum())
        return RespellingCoverage(
            neuron=neuron,
            respelling=self,
            up_british=float((marks[n_texts:][changed] > 0).float().mean()),
            down_american=float((marks[:n_texts][changed] < 0).float().mean()),
            up_density=1000 * float((marks[n_texts:] > 0).sum()) / tokens,
            table_density=against.evidence.loc[(neuron, "british"), "up-tokens /1000, domain"],
        )


def respelled_texts(
    tokenizer,
    documents,
    pairs,
    n: int = 8,
    n_ctx: int | None = None,
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
        documents: an iterable of ``text.corpora.Document`` (e.g. ``domain_documents("american")``).
        pairs: ``(british, american)`` spelling pairs; :func:`length_preserving_pairs` keeps
            most texts aligned.
        n: texts wanted.
        n_ctx: the window length, BOS included (default: the model's context).
        min_tokens: shortest text kept (tokens, BOS excluded).
        max_chars: characters of each document read (enough for a window of ``n_ctx`` tokens).
        examine: documents tokenized per text wanted.
        pairs_source: recorded in the result.

    Raises:
        DataError: if no document gives an aligned respelling.
    """
    if n < 1 or examine < 1:
        raise DataError(f"Ask for at least one text (n = {n}, examine = {examine}).")
    n_ctx = context_length(tokenizer, n_ctx)
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
    bos = bos_id(tokenizer)
    if not kept:
        raise DataError(
            "No document gave an aligned respelling: give documents that use American spellings "
            "of the pairs (e.g. text.corpora.domain_documents('american'))."
        )
    american, lengths = pad_windows([torch.tensor([bos, *k[3]]) for k in kept])
    british, _ = pad_windows([torch.tensor([bos, *k[4]]) for k in kept])
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
    spread: Float[Tensor, " n_neurons"]
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
    model: TransformerBridge,
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
    neurons = check_neurons(model, neurons)
    if near < 1:
        raise InputError(f"near must be at least 1 position, got {near}.")
    if int(respelling.lengths.min()) <= start:
        raise DataError(f"Every text needs more than start = {start} tokens.")
    tokens = torch.cat([respelling.american, respelling.british]).to(model.cfg.device)
    true = true_pre_activations(model, tokens, neurons).cpu()
    approx = approximator(circuit, model, neurons)(tokens).cpu()
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
# The case studies on texts, and the experiment beside them (chapter 5)
# ----------------------------------------------------------------------------------------------

#: The verdicts of :func:`~context_neurons.casestudies.verdict`, in the order chapter 5 lists them.
VERDICTS = ("confirmed", "weak", "not shown", "contradicted")


@dataclass(frozen=True)
class CaseVerdicts:
    """The case studies against the texts of their domains, and what they leave to the respelling
    experiment (chapter 5, section 5.4).

    Attributes:
        evidence: :func:`~context_neurons.casestudies.domain_evidence` of the cases, one row per
            ``(neuron, domain)`` in their order.
        spelling: the British-spelling neurons (the first and the second), as given.
    """

    evidence: pd.DataFrame
    spelling: tuple

    def verdicts(self) -> dict[str, str]:
        """Each verdict of :data:`VERDICTS` -> its cases, ``"<neuron> on <domain>"`` separated by
        commas (``"-"`` for none)."""
        listed = {}
        for name in VERDICTS:
            chosen = self.evidence.index[self.evidence["verdict"] == name]
            listed[name] = ", ".join(f"{j} on {d}" for j, d in chosen) or "-"
        return listed

    def findings(self) -> list[str]:
        """The largest gap between the measured and the predicted excess, then each
        British-spelling case's verdict, the densities of its tokens behind it, and whether the
        respelling experiment tests the reading (a verdict other than confirmed) or measures it."""
        gap = (self.evidence["excess"] - self.evidence["predicted excess"]).abs()
        worst = gap.idxmax()
        out = [f"largest |excess - predicted excess|: {gap.max():.2f} "
               f"(neuron {worst[0]} on {worst[1]})"]
        spelling = [case for case in self.evidence.index if case[0] in self.spelling]
        for (j, domain), row in self.evidence.loc[spelling].iterrows():
            then = "tests it" if row["verdict"] != "confirmed" else "measures it"
            out.append(
                f"{j} on {domain}: {row['verdict']} with {row['up-tokens /1000, domain']:.1f} "
                f"up-tokens and {row['down-tokens /1000, domain']:.1f} down-tokens per 1000 "
                f"tokens; the respelling experiment {then} at fixed text"
            )
        return out


def case_verdicts(acts: TextActivations, cases, spelling) -> CaseVerdicts:
    """:class:`CaseVerdicts` of the ``(neuron, domain)`` ``cases`` on the texts of ``acts``;
    ``spelling``: the British-spelling neurons."""
    return CaseVerdicts(domain_evidence(acts, cases), tuple(spelling))


@dataclass(frozen=True)
class RespellingCoverage:
    """How the respelled texts cover a British-spelling neuron's tokens (chapter 5).

    Attributes:
        neuron: the neuron.
        respelling: the texts, in both spellings.
        up_british: the share of the respelled tokens that are the neuron's up-tokens in
            British spelling.
        down_american: the share of them that are its down-tokens in American spelling.
        up_density: its up-tokens per 1000 tokens of the British versions (BOS not counted).
        table_density: its up-tokens per 1000 tokens of the *british* texts of the case studies.
    """

    neuron: int
    respelling: Respelling
    up_british: float
    down_american: float
    up_density: float
    table_density: float

    def findings(self) -> list[str]:
        """The texts (how many, the respelled words), the coverage and the density against the
        british texts: the lines as printed, the two that can be long wrapped to the text width."""
        texts = self.respelling
        return [
            f"texts: {len(texts.labels)}, from {texts.n_examined} examined "
            f"({texts.n_dropped} left out: not aligned)",
            wrapped("respelled words per text: " + ", ".join(map(str, texts.words))),
            f"respelled words per 1000 tokens: {texts.per_1000():.1f}",
            f"respelled tokens: British up-tokens of {self.neuron} {self.up_british:.0%}, "
            f"American down-tokens {self.down_american:.0%}",
            wrapped(f"up-tokens of {self.neuron} per 1000 tokens: {self.up_density:.1f} in the "
                    f"respelled texts, {self.table_density:.1f} in the british texts of the "
                    "table"),
        ]


@dataclass(frozen=True)
class SpellingComparison:
    """The British-spelling neurons on British texts beside the respelling experiment (chapter 5).

    Attributes:
        table: per neuron, its verdict and ``excess / SD`` on the british texts, and the
            experiment's verdict, its effect near respelled words and over all positions (in
            within-text SDs).
        neurons: the two neurons (first, second), as given.
        ratio: the second's true effect near respelled words over the first's.
        output_cos: the cosine of their output weights.
        near: positions counted as near a respelled word.
    """

    table: pd.DataFrame
    neurons: tuple
    ratio: float
    output_cos: float
    near: int

    def findings(self) -> list[str]:
        """Each neuron's two verdicts, the ratio of their effects with the cosine of their
        outputs, and what the two do together."""
        rows = list(zip(self.neurons, self.table.to_dict("records")))
        out = [
            f"neuron {j}: british texts {row['british texts']} "
            f"({row['british texts, excess / SD']:+.2f} SD); respelling {row['respelling']} "
            f"({row['respelling, near / SD']:+.2f} SD within {self.near} tokens of a respelled "
            f"word, {row['respelling, all / SD']:+.2f} SD over the whole text)"
            for j, row in rows
        ]
        first, second = self.neurons
        out.append(f"{second}'s effect near respelled words is {self.ratio:+.2f} times "
                   f"{first}'s; cosine of their output weights: {self.output_cos:+.3f}")
        responds = {j: row["respelling"] in ("confirmed", "weak") for j, row in rows}
        if all(responds.values()) and self.ratio > 0 and self.output_cos < -0.5:
            out.append("both read British spelling the same way and write opposite outputs")
        elif all(responds.values()) and self.ratio > 0:
            out.append("both read British spelling the same way; their outputs are not opposite")
        else:
            shown = [j for j, r in responds.items() if r] or "neither"
            out.append(f"a response to the spelling is shown for: {shown}")
        return out


def compare_with_texts(against: CaseVerdicts, effect: RespellingEffect,
                       output_cos: float) -> SpellingComparison:
    """:class:`SpellingComparison` of the two British-spelling neurons of ``against`` (their
    ``"british"`` cases) and ``effect`` (:func:`respelling_effect` of both);
    ``output_cos``: the cosine of their output weights."""
    summary, near = effect.summary(), effect.near_name
    first, second = against.spelling
    rows = []
    for j in (first, second):
        on_texts, fixed = against.evidence.loc[(j, "british")], summary.loc[j]
        rows.append({
            "british texts": on_texts["verdict"],
            "british texts, excess / SD": on_texts["excess / SD"],
            "respelling": fixed["verdict"],
            "respelling, near / SD": fixed[f"{near} / SD"],
            "respelling, all / SD": fixed["all / SD"],
        })
    table = pd.DataFrame(rows, index=pd.Index([first, second], name="neuron"))
    ratio = summary.loc[second, f"{near}, true"] / summary.loc[first, f"{near}, true"]
    return SpellingComparison(table, (first, second), float(ratio), float(output_cos),
                              effect.near)
