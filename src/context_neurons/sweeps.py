"""Open questions. This module measures what the method fixes and the paper leaves open (chapter 9;
the book's notation page ``book/notation.md``, sections 2, 3 and 5).

1. **The destination token.** The circuit fixes the destination token to ``' the'``; the blog names
   this "the main source of error". :func:`destination_classes` chooses other destinations from
   token counts of texts (stop words: the most frequent words of general text; keywords: frequent
   longer words beyond the stop words; topic words: each domain's most over-represented word), never
   from a word list. :class:`DestinationSweep` rebuilds the circuit for another destination, reusing
   everything that does not depend on it (token values, mean keys and values, the LayerNorm-2
   scale, the keys of every token at ``n_ref``), and :func:`sweep_destinations` measures how the
   extended embeddings, the found neurons and the accuracy change. :func:`actual_destination_terms`
   is the approximation in which every position ``n`` queries with its own token ``t_n`` (its own
   kernel, content weights and calibrated denominator) instead of ``' the'``: the error of the
   fixed destination itself.
2. **The head closest to contextual** (the paper's head 11 of GPT-2, "close to contextual"):
   :func:`contextual_distance` reads the taxonomy's margins as how far each head is from the
   contextual group's rules; :func:`circuit_attention_tv` measures the attention weights the
   circuit implies for each of its heads against the true ones.
The third open question, calibration texts clustered by their denominators, is
:mod:`context_neurons.clusters`.
"""

from __future__ import annotations

import math
import re
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
from context_neurons.checks import (
    InputError,
    TokenError,
    check_neurons,
    check_tokens,
    token_id,
)
from context_neurons.hooks import run_until
from context_neurons.text.windows import DomainTexts, pad_windows

#: A word token: a space followed by letters only (``' church'``).
WORD = re.compile(r"^ [A-Za-z]+$")
#: The stop words are among this many most frequent word tokens of general text.
STOP_RANKS = 50
#: Keywords: word tokens with at least this many letters, beyond the stop-word ranks.
KEYWORD_MIN_LETTERS = 5
#: A topic word occurs at least this many times in its domain's texts.
TOPIC_MIN_COUNT = 5
#: Classes of destination tokens, in the order tables list them.
CLASSES = ("reference", "stop word", "keyword", "topic word")


# ----------------------------------------------------------------------------------------------
# 1. Destination tokens
# ----------------------------------------------------------------------------------------------


def token_counts(windows: list[Int[Tensor, " _pos"]], d_vocab: int) -> Int[Tensor, " d_vocab"]:
    """How often each token occurs in the windows (position 0, the BOS, left out)."""
    counts = torch.zeros(d_vocab, dtype=torch.long)
    for window in windows:
        counts += torch.bincount(torch.as_tensor(window)[1:].cpu(), minlength=d_vocab)
    return counts


def word_token(model: TransformerBridge, token: int, min_letters: int = 1) -> str | None:
    """The token's text when it is a word token (:data:`WORD`) that is one token of the model's
    tokenizer (checked with :func:`~context_neurons.checks.token_id`), else ``None``."""
    text = model.tokenizer.decode([int(token)])
    if not WORD.match(text) or len(text) - 1 < min_letters:
        return None
    try:
        return text if token_id(model, text) == int(token) else None
    except TokenError:
        return None


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


@torch.no_grad()
def circuit_mean_keys(
    circuit: cc.ContextualCircuit, model: TransformerBridge
) -> Float[Tensor, "n_ctx head_index d_head"]:
    """The mean keys ``M`` of a circuit, recomputed from its calibration text's tokens (BOS left
    out), as :func:`~context_neurons.circuit.build_circuit` takes them by default.

    Raises:
        InputError: when the circuit's mean values were not taken from those tokens (a circuit
            built with other ``reference_tokens``), so that its mean keys cannot be recomputed.
    """
    reference = circuit.calibration.tokens[1:]
    values = dec.mean_positional_keys(model, reference, model.cfg.n_ctx, which="V")[
        :, circuit.heads
    ]
    scale = circuit.mean_values.abs().max().clamp(min=1e-12)
    if float((values - circuit.mean_values).abs().max() / scale) > 1e-4:
        raise InputError(
            "This circuit's mean values were not computed from its calibration text's tokens "
            "(built with other reference_tokens?): build it with the default reference tokens."
        )
    return dec.mean_positional_keys(model, reference, model.cfg.n_ctx, which="K")


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
        """The circuit of :func:`~context_neurons.circuit.build_circuit` for destination ``dest``
        (same calibration text, heads and reference position)."""
        base, model = self.base, self.model
        dest = token_id(model, dest)
        heads, calib = base.heads, base.calibration
        log_d = cc.calibration_log_denominators(model, calib.tokens, heads, self.mean_keys, dest)
        calibration = replace(
            calib, log_denominators=log_d, log_dhat=log_d[:, calib.n_min :].median(-1).values
        )
        kernels = cc.head_kernels(model, heads, self.mean_keys, dest, model.cfg.n_ctx)
        where = torch.tensor([base.n_ref], device=model.cfg.device)
        query = dec.destination_queries(model, dest, where)[0, heads]  # [head, d_head]
        log_content = torch.einsum("he,the->ht", query, self.reference_keys) / model.cfg.d_head**0.5
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


def sample_vocabulary(
    model: TransformerBridge, fraction: float, seed: int = 0
) -> Bool[Tensor, " d_vocab"]:
    """A fixed random share of the scoring vocabulary (:func:`~context_neurons.discovery.
    scoring_vocabulary`), to score many circuits quickly."""
    if not 0 < fraction <= 1:
        raise InputError(f"fraction must be in (0, 1], got {fraction}.")
    keep = disc.scoring_vocabulary(model).cpu()
    draw = torch.rand(len(keep), generator=torch.Generator().manual_seed(seed)) < fraction
    return (keep & draw).to(model.cfg.device)


def jaccard(a, b) -> float:
    """``|a & b| / |a | b|`` of two sets of neurons (1 when both are empty)."""
    a, b = {int(x) for x in a}, {int(x) for x in b}
    return len(a & b) / len(a | b) if a | b else 1.0


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


# ----------------------------------------------------------------------------------------------
# 1b. The approximation with each position's own destination token
# ----------------------------------------------------------------------------------------------


@torch.no_grad()
def actual_destination_terms(
    circuit: cc.ContextualCircuit,
    model: TransformerBridge,
    tokens: Int[Tensor, "batch pos"],
    neurons,
    destinations: Int[Tensor, "batch pos"] | None = None,
    mean_keys: Float[Tensor, "n_ctx head_index d_head"] | None = None,
) -> dict[str, Float[Tensor, "batch pos n_neurons"]]:
    """The terms of the approximate pre-activation when position ``n`` queries with its own token.

    The terms of :meth:`~context_neurons.evaluation.NeuronApproximator.terms` (per-position
    denominators), with the bag and the positional part recomputed for destination
    ``d_n = destinations[b, n]`` (default: the token at ``n``) at every position: the kernels
    ``pos^{d_n}_{h,n}(i)`` and their median, the content weights ``c^{d_n}_h(t_i)`` at ``n_ref``,
    and the denominators ``D^{d_n}_h(n)`` of the calibration text with ``d_n`` placed at ``n``:

        bag(n) = sum_i K^{d_n}[n, i] sum_h c^{d_n}_h(t_i) / D^{d_n}_h(n) v_h(t_i) W_O^h . w_j .

    With ``destinations`` all equal to the circuit's destination this is the circuit's own
    approximation (tested). One text at a time: ``[head, pos, pos]`` tensors.

    Raises:
        InputError: texts longer than the calibration text (no calibrated denominator there).
    """
    tokens = check_tokens(model, tokens)
    neurons = check_neurons(model, neurons)
    destinations = tokens if destinations is None else check_tokens(model, destinations)
    if destinations.shape != tokens.shape:
        raise InputError("destinations must have the shape of tokens (one per position).")
    calibration = circuit.calibration.tokens
    n = tokens.shape[1]
    if n > len(calibration):
        raise InputError(
            f"The texts have {n} positions, the calibration text {len(calibration)}: cut them."
        )
    mean_keys = circuit_mean_keys(circuit, model) if mean_keys is None else mean_keys
    approx = ev.approximator(circuit, model, neurons, "per_position")
    terms = approx.terms(tokens)
    read = disc.read_vectors(circuit, model, neurons)
    token_read = torch.einsum("the,hej->thj", circuit.token_values, circuit.w_o @ read)
    value_read = torch.einsum("ihe,hej->ihj", circuit.mean_values[:n], circuit.w_o @ read)
    bags, positional = [], []
    for text, dest in zip(tokens, destinations):
        log_kernels, log_c, log_d = _destination_tables(circuit, model, text, dest, mean_keys)
        kernels = log_kernels.exp()
        shared = cc.median_kernel(kernels)
        weights = shared[None] * torch.exp(log_c - log_d[:, :, None])  # [head, pos, pos]
        bags.append(torch.einsum("hni,ihj->nj", weights, token_read[text]))
        positional.append(torch.einsum("hni,ihj->nj", kernels, value_read))
    terms["bag"], terms["positional"] = torch.stack(bags), torch.stack(positional)
    return terms


def _destination_tables(circuit, model, text, dest, mean_keys):
    """Log kernels, log content weights at ``n_ref`` and calibrated log denominators of one text
    whose position ``n`` holds destination ``dest[n]`` (``[head, pos, pos]``, ``[head, pos]``)."""
    heads, n = circuit.heads, len(text)
    positions = torch.arange(n, device=text.device)
    queries = _queries(model, dest, positions)  # [pos, head_index, d_head]
    scores = dec.positional_scores(model, queries, positions, n, mean_keys, heads)
    mask = dec.causal_mask(n, text.device)
    log_kernels = torch.log_softmax(scores.masked_fill(~mask, -math.inf), dim=-1)
    at_ref = torch.full_like(positions, circuit.n_ref)
    log_c = dec.content_scores(model, _queries(model, dest, at_ref), at_ref, text, heads)
    calib = circuit.calibration.tokens[:n]
    log_c_calib = dec.content_scores(model, queries, positions, calib, heads)
    own = dec.content_scores(model, queries, positions, dest, heads)  # d_n at its own n
    log_c_calib[:, positions[1:], positions[1:]] = own[:, positions[1:], positions[1:]]
    log_d = torch.logsumexp(log_kernels + log_c_calib.masked_fill(~mask, -math.inf), dim=-1)
    return log_kernels, log_c, log_d


def _queries(model, tokens, positions) -> Tensor:
    """Exact layer-0 queries of ``tokens[k]`` placed at ``positions[k]``, every head."""
    attn = model.blocks[0].attn
    x = dec.ln1_apply(model, model.W_E[tokens] + model.W_pos[positions])
    return torch.einsum("pd,hde->phe", x, attn.W_Q) + attn.b_Q


@dataclass
class DestinationRules:
    """Accuracy of the approximation with the fixed destination and with each position's own.

    Attributes:
        pearson, fvu: per rule (``"fixed"``, ``"actual"``), ``[n_texts, n_neurons]``.
        context_pearson, context_fvu: the same for the context part (true minus the local terms
            against bag plus positional part).
    """

    neurons: list[int]
    pearson: dict[str, Float[Tensor, "n_texts n_neurons"]]
    fvu: dict[str, Float[Tensor, "n_texts n_neurons"]]
    context_pearson: dict[str, Float[Tensor, "n_texts n_neurons"]]
    context_fvu: dict[str, Float[Tensor, "n_texts n_neurons"]]

    def table(self) -> pd.DataFrame:
        """Medians over neuron-text pairs, one row per rule."""
        measures = {
            "median r": self.pearson,
            "median FVU": self.fvu,
            "context r": self.context_pearson,
            "context FVU": self.context_fvu,
        }
        return pd.DataFrame(
            {
                name: {rule: float(v.nanmedian()) for rule, v in m.items()}
                for name, m in measures.items()
            }
        )


@torch.no_grad()
def compare_destination_rules(
    circuit: cc.ContextualCircuit,
    model: TransformerBridge,
    windows: list[Int[Tensor, " _pos"]],
    neurons,
    start: int = ev.START,
) -> DestinationRules:
    """r and FVU of the fixed-destination approximation and of :func:`actual_destination_terms`
    on the same texts (one text at a time)."""
    neurons = check_neurons(model, neurons)
    mean_keys = circuit_mean_keys(circuit, model)
    approx = ev.approximator(circuit, model, neurons, "per_position")
    out = {name: {"fixed": [], "actual": []} for name in ("r", "fvu", "cr", "cfvu")}
    for window in windows:
        tokens, lengths = pad_windows([window])
        tokens = tokens.to(model.cfg.device)
        mask = ev.position_mask(tokens, lengths, start)
        true = ev.true_pre_activations(model, tokens, neurons)
        rules = {
            "fixed": approx.terms(tokens),
            "actual": actual_destination_terms(circuit, model, tokens, neurons, None, mean_keys),
        }
        for rule, terms in rules.items():
            local = sum(terms[name] for name in ev.LOCAL_TERMS)
            context = sum(terms[name] for name in ev.CONTEXT_TERMS)
            r, f = ev.pearson_and_fvu(true, local + context, mask)
            cr, cf = ev.pearson_and_fvu(true - local, context, mask)
            for name, value in zip(("r", "fvu", "cr", "cfvu"), (r, f, cr, cf)):
                out[name][rule].append(value.cpu())
    cat = {name: {rule: torch.cat(v) for rule, v in rules.items()} for name, rules in out.items()}
    return DestinationRules(neurons, cat["r"], cat["fvu"], cat["cr"], cat["cfvu"])


# ----------------------------------------------------------------------------------------------
# 2. The head closest to contextual
# ----------------------------------------------------------------------------------------------


def contextual_distance(taxonomy: tx.HeadTaxonomy) -> pd.DataFrame:
    """How far each head is from the contextual group, read from :meth:`HeadTaxonomy.margins`.

    Each rule a contextual head obeys contributes how far the head breaks it, as a log factor (0
    when it obeys it): the kernel width beyond its nearest width threshold (a local kernel below
    the local one, a uniform kernel above the uniform one); the content spread above its maximum;
    the self-preference above the duplicate threshold (``log(z / z_min)``); the previous-token
    share at or above its threshold (``log(share / 0.4)``, when the taxonomy applies that rule).
    ``distance`` is their sum: 0 for the contextual heads, small for a head that misses the group
    narrowly.
    """
    margins = taxonomy.margins()
    rows = {}
    for head, row in margins.iterrows():
        factor = math.log(row["n_eff / threshold"])
        local = str(row["width threshold"]).startswith("local")
        width = max(0.0, -factor) if local else max(0.0, factor)
        content = max(0.0, math.log(row["content sd / contextual max"]))
        z = row["self z - duplicate min"] + tx.DUPLICATE_MIN_Z
        duplicate = max(0.0, math.log(z / tx.DUPLICATE_MIN_Z)) if z > 0 else 0.0
        share = row["prev. share / 0.4"]
        previous = math.log(share) if taxonomy.previous_token_rule and share >= 1 else 0.0
        rows[head] = {
            "group": row["group"],
            "width": width,
            "content": content,
            "duplicate": duplicate,
            "previous": previous,
            "distance": width + content + duplicate + previous,
        }
    table = pd.DataFrame(rows).T.infer_objects()
    table.index.name = "head"
    return table


def closest_to_contextual(taxonomy: tx.HeadTaxonomy) -> int:
    """The non-contextual head with the smallest :func:`contextual_distance`."""
    table = contextual_distance(taxonomy)
    others = table[table["group"] != "contextual"]
    if others.empty:
        raise InputError("Every classified head is contextual: there is no other head to add.")
    return int(others["distance"].astype(float).idxmin())


@torch.no_grad()
def circuit_attention_tv(
    circuit: cc.ContextualCircuit,
    model: TransformerBridge,
    tokens: Int[Tensor, "batch pos"],
    denominators: str = "per_position",
) -> Float[Tensor, "ctx_head batch pos"]:
    """``1/2 sum_i |A^h_{n,i} - K[n,i] c_h(t_i) / D_h(n)|``: the circuit's attention weights of each
    head against the true pattern (hook ``blocks.0.attn.hook_pattern``).

    The circuit's weights are those its bag gives each token (``sum_i`` of them times ``v_h(t_i)
    W_O^h`` is the head's share of :meth:`ContextualCircuit.bag`); they need not sum to one, so
    this is half the L1 distance, the total variation when they do.
    """
    tokens = check_tokens(model, tokens).to(circuit.kernel.device)
    n = tokens.shape[1]
    pattern = run_until(model, tokens, "blocks.0.attn.hook_pattern")["blocks.0.attn.hook_pattern"]
    true = pattern[:, circuit.heads]  # [batch, head, pos, pos]
    inverse = circuit.inverse_denominators(n, denominators)  # [head, pos]
    content = circuit.log_content.exp()[:, tokens]  # [head, batch, pos]
    approx = torch.einsum("ni,hbi,hn->bhni", circuit.kernel[:n, :n], content, inverse)
    return rearrange(dec.tv_distance(true, approx), "b h n -> h b n")
