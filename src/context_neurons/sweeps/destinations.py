"""Other destination tokens. This module answers how the circuit, its found neurons and its
accuracy change when the destination is not ``' the'`` (chapter 9, first open question): it
chooses destinations by class from token counts of texts (stop words, keywords, topic words;
:func:`destination_classes`), rebuilds the circuit for each, reusing all that does not depend on
the destination (:class:`DestinationSweep`), and measures the extended embeddings, the found
neurons and the accuracy for every one of them (:func:`sweep_destinations`;
:meth:`SweepResult.by_class` and :meth:`SweepResult.findings` summarise it)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pandas as pd
import torch
from einops import rearrange
from jaxtyping import Bool, Float, Int
from torch import Tensor
from tqdm.auto import tqdm
from transformer_lens.model_bridge import TransformerBridge

from context_neurons import circuit as cc
from context_neurons import decomposition as dec
from context_neurons import discovery as disc
from context_neurons import evaluation as ev
from context_neurons import taxonomy as tx
from context_neurons.checks import InputError, TokenError, check_neurons, token_id
from context_neurons.sweeps.shared import circuit_mean_keys, jaccard, token_counts, word_token
from context_neurons.text.windows import DomainTexts


#: The stop words are among this many most frequent word tokens of general text.
STOP_RANKS = 50
#: Keywords: word tokens with at least this many letters, beyond the stop-word ranks.
KEYWORD_MIN_LETTERS = 5
#: A topic word occurs at least this many times in its domain's texts.
TOPIC_MIN_COUNT = 5
#: Classes of destination tokens, in the order tables list them.
CLASSES = ("reference", "stop word", "keyword", "topic word")


@dataclass
class DestinationClasses:
    """Destination tokens by class, chosen from token counts (:func:`destination_classes`).

    Attributes:
        table: one row per token: ``token`` (its text), ``class``, ``id``, ``count`` in the general
            texts, and for topic words the ``domain`` and the log ``ratio`` of its frequency there
            to its frequency in general text.
    """

    table: pd.DataFrame

    @property
    def tokens(self) -> list[str | int]:
        """The destinations (their text, or ids when the table was made of ids), reference first."""
        return list(self.table["token"])

    def class_of(self, token: str | int) -> str:
        return str(self.table.set_index("token").loc[token, "class"])


def destination_classes(
    model: TransformerBridge,
    general: list[Int[Tensor, " _pos"]],
    domains: DomainTexts,
    per_class: int = 3,
    reference: str = dec.DEFAULT_DESTINATION,
) -> DestinationClasses:
    """Stop words, keywords and topic words of the model's tokenizer, from counts in texts.

    * stop words: the ``per_class`` most frequent word tokens of ``general`` (the reference left
      out), all within its :data:`STOP_RANKS` most frequent word tokens;
    * keywords: the most frequent word tokens of at least :data:`KEYWORD_MIN_LETTERS` letters
      beyond those ranks;
    * topic words: for each domain of ``domains`` in turn (``general`` left out), the word token of
      at least four letters, seen at least :data:`TOPIC_MIN_COUNT` times there, most
      characteristic of the domain: with the largest term ``f_d log(f_d / f_g)`` of the divergence
      of the domain's token frequencies ``f_d`` from those of ``general``, ``f_g`` (add-one
      smoothing), one per domain.

    Args:
        model: the model (its tokenizer decides what is one token).
        general: windows of general text.
        domains: windows of several domains (:func:`~context_neurons.text.windows.domain_texts`).
        per_class: tokens per class.
        reference: the circuit's destination, first row of the table.

    Raises:
        TokenError: when a class cannot be filled (too few word tokens in the texts).
    """
    d_vocab = model.cfg.d_vocab
    counts = token_counts(general, d_vocab)
    reference_id = token_id(model, reference)
    order = torch.sort(counts, descending=True, stable=True).indices
    rows = [{"token": reference, "class": "reference", "id": reference_id}]
    stop, keywords, rank = [], [], 0
    for token in order[counts[order] > 0].tolist():
        text = word_token(model, token)
        if text is None:
            continue
        rank += 1
        if token == reference_id:
            continue
        if rank <= STOP_RANKS and len(stop) < per_class:
            stop.append((text, token))
        elif rank > STOP_RANKS and len(text) - 1 >= KEYWORD_MIN_LETTERS:
            keywords.append((text, token))
        if len(keywords) == per_class:
            break
    topics = _topic_words(model, counts, domains, per_class, {t for _, t in stop + keywords})
    for name, chosen in (("stop word", stop), ("keyword", keywords)):
        rows += [{"token": text, "class": name, "id": token} for text, token in chosen]
    rows += topics
    table = pd.DataFrame(rows)
    short = [c for c in CLASSES[1:] if (table["class"] == c).sum() < per_class]
    if short:
        raise TokenError(
            f"Too few word tokens of this tokenizer in the texts for the classes {short}: give "
            "more texts, or a smaller per_class."
        )
    table["count"] = counts[torch.tensor(table["id"].tolist())].tolist()
    return DestinationClasses(table)


def _topic_words(model, general_counts, domains: DomainTexts, per_class, taken) -> list[dict]:
    """One word per domain: the largest term ``f_d log(f_d / f_g)`` (see destination_classes)."""
    d_vocab = model.cfg.d_vocab
    general_freq = (general_counts + 1) / (general_counts.sum() + d_vocab)
    rows = []
    for domain in dict.fromkeys(domains.domains):
        if domain == "general" or len(rows) == per_class:
            continue
        own = token_counts([domains.windows[i] for i in domains.indices(domain)], d_vocab)
        own_freq = (own + 1) / (own.sum() + d_vocab)
        ratio = torch.log(own_freq / general_freq)
        keyness = (own_freq * ratio).masked_fill(own < TOPIC_MIN_COUNT, -math.inf)
        for token in torch.sort(keyness, descending=True, stable=True).indices.tolist():
            if keyness[token] == -math.inf:
                break
            text = word_token(model, token, min_letters=4)
            if text is not None and token not in taken:
                taken.add(token)
                rows.append(
                    {
                        "token": text,
                        "class": "topic word",
                        "id": token,
                        "domain": domain,
                        "ratio": float(ratio[token]),
                    }
                )
                break
    return rows


class DestinationSweep:
    """The circuit for other destination tokens, sharing everything that does not depend on them.

    What depends on the destination: the calibrated denominators, the kernels, the content weights
    at ``n_ref``, and through them the extended embeddings and the positional part. What does not,
    and is computed once: the mean keys and values, the token values, the LayerNorm-2 scale and
    the exact key of every token placed at ``n_ref``.
    """

    @torch.no_grad()
    def __init__(self, circuit: cc.ContextualCircuit, model: TransformerBridge):
        self.base, self.model = circuit, model
        self.mean_keys = circuit_mean_keys(circuit, model)
        heads, n_ref = circuit.heads, circuit.n_ref
        vocab = torch.arange(model.cfg.d_vocab, device=model.cfg.device)
        where = torch.tensor([n_ref], device=model.cfg.device)
        parts = dec.ln1_parts(model, "K", vocab, where, heads)
        inverse = dec.ln1_inverse_scale(model, vocab, where)  # [d_vocab, 1]
        self.reference_keys = (parts.token_part + parts.position_part) * inverse[
            :, :, None
        ] + parts.bias  # k(t, n_ref) for every token: [d_vocab, head, d_head]
        self.value_out = torch.einsum("ihe,hed->hid", circuit.mean_values, circuit.w_o)

    @torch.no_grad()
    def circuit(self, dest: str | int) -> cc.ContextualCircuit:
        """The circuit of :func:`~context_neurons.circuit.build.build_circuit` for destination
        ``dest`` (same calibration text, heads and reference position)."""
        base, model = self.base, self.model
        dest = token_id(model, dest)
        heads, calib = base.heads, base.calibration
        kernels = cc.head_kernels(model, heads, self.mean_keys, dest, model.cfg.n_ctx)
        where = torch.tensor([base.n_ref], device=model.cfg.device)
        query = dec.destination_queries(model, dest, where)[0, heads]  # [head, d_head]
        log_content = torch.einsum("he,the->ht", query, self.reference_keys) / model.cfg.d_head**0.5
        if base.frame == "reference":  # the frame of the base circuit (build_circuit's frame)
            log_d = cc.reference_log_denominators(kernels, log_content, calib.tokens, dest)
        else:
            log_d = cc.calibration_log_denominators(model, calib.tokens, heads, self.mean_keys,
                                                    dest)
        calibration = replace(
            calib, log_denominators=log_d, log_dhat=log_d[:, calib.n_min :].median(-1).values
        )
        weights = torch.exp(log_content - calibration.log_dhat[:, None])  # c_h(t) / Dhat_h
        weighted = base.token_values * rearrange(weights, "h t -> t h 1")
        extended = rearrange(weighted, "t h e -> t (h e)") @ rearrange(base.w_o, "h e d -> (h e) d")
        return replace(
            base,
            dest_token=dest,
            calibration=calibration,
            head_kernels=kernels,
            kernel=cc.median_kernel(kernels),
            log_content=log_content,
            extended=extended,
            positional_part=torch.einsum("hni,hid->nd", kernels, self.value_out),
            notes={},
        )


@dataclass
class SweepResult:
    """What :func:`sweep_destinations` measured, one row of ``table`` per destination.

    Attributes:
        table: ``class``, ``n_eff`` (of the shared kernel at ``position``), ``cosine to <ref>`` and
            ``norm ratio`` (of ``e_d(t)`` against the reference's, averaged over the token
            occurrences of the texts), ``found`` (neurons with ``top >= theta``), ``Jaccard`` of the
            found sets with the reference's, ``median r`` and ``median FVU`` of the fixed neurons.
        cosines: the averaged cosine of ``e_d(t)`` and ``e_d'(t)`` for every pair of destinations.
        found: the found neurons of each destination.
    """

    table: pd.DataFrame
    cosines: pd.DataFrame
    found: dict[str | int, list[int]]

    def by_class(self) -> pd.DataFrame:
        """The means of :attr:`table`'s numbers over each class of destination (classes in table
        order; the cosine column named ``cosine``)."""
        cosine = self.table.columns[2]
        numeric = ["n_eff", cosine, "norm ratio", "found", "Jaccard", "median r", "median FVU"]
        numbers = self.table.astype({c: float for c in numeric})
        means = numbers.groupby("class", sort=False)[numeric].mean()
        return means.rename(columns={cosine: "cosine"})

    def findings(self) -> list[str]:
        """The destination whose found set changes most (lowest Jaccard, the reference left out)
        and the range of the median FVU over destinations."""
        jaccard = self.table["Jaccard"].astype(float)
        worst = jaccard.iloc[1:].idxmin()
        fvu = self.table["median FVU"].astype(float)
        return [
            f"largest change of the found set: {worst!r} (Jaccard {jaccard[worst]:.2f}); FVU "
            f"range over destinations {fvu.min():.3f} to {fvu.max():.3f}"
        ]


@torch.no_grad()
def sweep_destinations(
    circuit: cc.ContextualCircuit,
    model: TransformerBridge,
    classes: DestinationClasses,
    windows: list[Int[Tensor, " _pos"]],
    neurons,
    vocabulary: Bool[Tensor, " d_vocab"] | None = None,
    k: int = disc.TOP_K,
    theta: float = disc.THETA,
    position: int | None = None,
    progress: bool = False,
) -> SweepResult:
    """The circuit, its found neurons and its accuracy for every destination of ``classes``.

    Args:
        circuit: the circuit of the reference destination (first row of ``classes``).
        model: the model.
        classes: the destinations (:func:`destination_classes`).
        windows: texts for the extended embeddings' token weights and for the accuracy.
        neurons: the fixed neurons whose accuracy is measured.
        vocabulary: the tokens scored (default :func:`~context_neurons.discovery.
            scoring_vocabulary`; a :func:`sample_vocabulary` is faster).
        k, theta: the score's number of extreme tokens and the threshold.
        position: where the kernel width is read (default :func:`~context_neurons.taxonomy.
            default_position`).
        progress: show a progress bar.
    """
    neurons = check_neurons(model, neurons)
    if token_id(model, classes.tokens[0]) != circuit.dest_token:
        raise InputError("The first destination of `classes` must be the circuit's own.")
    position = tx.default_position(model) if position is None else position
    sweep = DestinationSweep(circuit, model)
    counts = token_counts(windows, model.cfg.d_vocab)
    present = counts.nonzero().flatten()
    weight = (counts[present] / counts[present].sum()).to(circuit.extended.device)
    present = present.to(circuit.extended.device)
    truth_cache: dict = {}
    rows, extended, found = {}, {}, {}
    for token in tqdm(classes.tokens, desc="destinations", disable=not progress):
        this = circuit if token == classes.tokens[0] else sweep.circuit(token)
        scores = disc.score_neurons(this, model, k=k, vocabulary=vocabulary)
        found[token] = scores.found(theta)
        result = ev.evaluate(this, model, windows, neurons, truth_cache=truth_cache)
        extended[token] = this.extended[present]
        rows[token] = {
            "class": classes.class_of(token),
            "n_eff": cc.effective_tokens(this.kernel[position, : position + 1]),
            "found": len(found[token]),
            "median r": result.median_pearson,
            "median FVU": result.median_fvu,
        }
    tokens = list(rows)
    cosines = pd.DataFrame(
        [[_mean_cosine(extended[a], extended[b], weight) for b in tokens] for a in tokens],
        index=tokens,
        columns=tokens,
    )
    reference = tokens[0]
    table = pd.DataFrame(rows).T
    table.insert(2, f"cosine to {reference!r}", cosines[reference])
    norms = {t: extended[t].norm(dim=-1) / extended[reference].norm(dim=-1) for t in tokens}
    table.insert(3, "norm ratio", [float((norms[t] * weight).sum()) for t in tokens])
    table.insert(5, "Jaccard", [jaccard(found[t], found[reference]) for t in tokens])
    table.index.name = "destination"
    return SweepResult(table.infer_objects(), cosines, found)


def _mean_cosine(a: Float[Tensor, "n d"], b: Float[Tensor, "n d"], weight: Float[Tensor, " n"]):
    return float((torch.nn.functional.cosine_similarity(a, b, dim=-1) * weight).sum())
