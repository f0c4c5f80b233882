"""Token windows. This module turns documents into the token windows every chapter feeds the model.

Windowing policy (:func:`tokenize_windows`): every window starts with the tokenizer's BOS token
(GPT-2's ``<|endoftext|>``, as TransformerLens prepends it) followed by up to ``n_ctx - 1`` text
tokens. A document longer than that is cut at the window length (``long="truncate"``, the default:
one window per document, so texts stay independent) or split into consecutive windows
(``long="split"``). A document shorter than ``min_tokens`` is dropped (``short="drop"``) or
concatenated with the next ones, separated by BOS (``short="concat"``), for corpora of short
items; a concatenation longer than a window carries its remainder into the next window. Nothing is
skipped silently: the :class:`WindowReport` counts the documents and the tokens that were dropped,
and why.

The context length ``n_ctx`` defaults to the tokenizer's ``model_max_length``, which
:func:`context_neurons.models.load_model` sets to the model's context. Named sets of windows:
:func:`evaluation_windows` (general text), :func:`domain_windows` and :func:`domain_texts` (the
case-study domains), :func:`lookup_windows` (short windows of many documents, chapter 7) and
:func:`calibration_tokens` (the one calibration text every chapter shares).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable, Literal, Sequence

import torch
from jaxtyping import Int
from torch import Tensor

from context_neurons.caching import IdentityCache
from context_neurons.checks import DataError, InputError
from context_neurons.text.corpora import (
    DEFAULT_CALIBRATION,
    DOMAINS,
    EVAL_CORPORA,
    Document,
    Source,
    calibration_text,
    check_domain,
    corpora_documents,
    domain_documents,
    openwebtext_documents,
    resolve_source,
)

#: Above this, a tokenizer's ``model_max_length`` is Hugging Face's "unset" sentinel.
_MAX_SANE_CONTEXT = 1 << 20


@dataclass
class WindowReport:
    """What :func:`tokenize_windows` did with each document."""

    n_documents: int = 0
    n_windows: int = 0
    n_truncated: int = 0
    n_split: int = 0
    n_dropped_short: int = 0
    n_concatenated: int = 0
    n_tokens: int = 0
    n_tokens_dropped: int = 0

    def __str__(self) -> str:
        return (
            f"{self.n_documents} documents -> {self.n_windows} windows "
            f"({self.n_truncated} truncated, {self.n_split} split, "
            f"{self.n_dropped_short} dropped as too short, {self.n_concatenated} concatenated; "
            f"{self.n_tokens - self.n_tokens_dropped} of {self.n_tokens} text tokens kept)"
        )


def bos_id(tokenizer) -> int:
    """The tokenizer's BOS id (``<|endoftext|>`` for GPT-2), which starts every window."""
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is None:
        raise DataError("The tokenizer has no BOS token: windows start with it (as GPT-2's do).")
    return int(bos)


def context_length(tokenizer, n_ctx: int | None = None) -> int:
    """``n_ctx``, else the tokenizer's ``model_max_length`` (the model's context after loading)."""
    n_ctx = n_ctx or getattr(tokenizer, "model_max_length", None)
    if not n_ctx or n_ctx >= _MAX_SANE_CONTEXT:
        raise DataError("Pass n_ctx: the tokenizer does not know the model's context length.")
    return int(n_ctx)


def tokenize_text(
    tokenizer, text: str, n_ctx: int | None = None, truncate: bool = False
) -> Int[Tensor, " pos"]:
    """One text as ``[BOS, tokens...]``; over-long text raises unless ``truncate``."""
    if not text or not text.strip():
        raise DataError("The text is empty: give at least one non-blank character.")
    n_ctx = context_length(tokenizer, n_ctx)
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(ids) + 1 > n_ctx:
        if not truncate:
            raise DataError(
                f"The text has {len(ids)} tokens; with BOS the model takes at most {n_ctx}. "
                f"Shorten it, or pass truncate=True to keep the first {n_ctx - 1} tokens."
            )
        ids = ids[: n_ctx - 1]
    return torch.tensor([bos_id(tokenizer), *ids], dtype=torch.long)


def tokenize_windows(
    tokenizer,
    documents: Iterable[Document],
    n_ctx: int | None = None,
    min_tokens: int = 256,
    long: Literal["truncate", "split"] = "truncate",
    short: Literal["drop", "concat"] = "drop",
    max_windows: int | None = None,
) -> tuple[list[Int[Tensor, " _pos"]], list[str], WindowReport]:
    """Token windows ``[BOS, ...]`` of at most ``n_ctx`` tokens (policy in the module docstring).

    Returns:
        windows (1-D LongTensors), their labels (``corpus:id`` and window index), and a report.
    """
    n_ctx = context_length(tokenizer, n_ctx)
    if min_tokens < 1 or min_tokens > n_ctx - 1:
        raise DataError(f"min_tokens must be in [1, {n_ctx - 1}], got {min_tokens}.")
    if max_windows is not None and max_windows < 1:
        raise DataError(f"max_windows must be at least 1 (or None for all), got {max_windows}.")
    bos, body = bos_id(tokenizer), n_ctx - 1
    report = WindowReport()
    windows: list[Tensor] = []
    labels: list[str] = []
    pending: list[int] = []
    pending_labels: list[str] = []

    def concat_label(names: list[str]) -> str:
        return "+".join(names[:3]) + ("+..." if len(names) > 3 else "")

    def emit(ids: list[int], label: str) -> bool:
        """Add a window; True once ``max_windows`` are reached."""
        windows.append(torch.tensor([bos, *ids], dtype=torch.long))
        labels.append(label)
        report.n_windows += 1
        return max_windows is not None and report.n_windows >= max_windows

    def finish() -> tuple[list[Tensor], list[str], WindowReport]:
        kept = sum(len(w) - 1 for w in windows)
        separators = sum(int((w[1:] == bos).sum()) for w in windows) if report.n_concatenated else 0
        report.n_tokens_dropped = report.n_tokens - (kept - separators)
        return windows, labels, report

    for doc in documents:
        report.n_documents += 1
        ids = tokenizer.encode(doc.text, add_special_tokens=False)
        report.n_tokens += len(ids)
        if len(ids) < min_tokens:
            if short == "drop":
                report.n_dropped_short += 1
                continue
            report.n_concatenated += 1
            pending += ([bos] if pending else []) + ids
            pending_labels.append(doc.name)
            while len(pending) >= body:  # full windows; the remainder starts the next one
                if emit(pending[:body], concat_label(pending_labels)):
                    return finish()
                pending, pending_labels = pending[body:], pending_labels[-1:]
            continue
        if len(ids) > body:
            if long == "truncate":
                report.n_truncated += 1
                if emit(ids[:body], doc.name):
                    return finish()
                continue
            report.n_split += 1
            for k, start in enumerate(range(0, len(ids), body)):
                chunk = ids[start : start + body]
                if len(chunk) < min_tokens:
                    break  # a short tail: counted in n_tokens_dropped
                if emit(chunk, f"{doc.name}#{k}"):
                    return finish()
            continue
        if emit(ids, doc.name):
            return finish()
    if pending and len(pending) >= min_tokens:
        emit(pending, concat_label(pending_labels))
    return finish()


def pad_windows(
    windows: Sequence[Int[Tensor, " _pos"]], pad_id: int | None = None
) -> tuple[Int[Tensor, "batch pos"], Int[Tensor, " batch"]]:
    """Right-pad windows into one batch; returns the batch and each window's length.

    The padding id defaults to the first window's first token (its BOS); causal attention makes
    padding harmless to the real positions, which is all that is ever read.
    """
    if not len(windows):
        raise DataError("No windows to batch: the documents gave none (see the WindowReport).")
    if any(len(w) == 0 for w in windows):
        raise DataError("An empty window cannot be batched: every window holds at least BOS.")
    pad_id = int(windows[0][0]) if pad_id is None else pad_id
    lengths = torch.tensor([len(w) for w in windows])
    batch = torch.full((len(windows), int(lengths.max())), pad_id, dtype=torch.long)
    for i, window in enumerate(windows):
        batch[i, : len(window)] = torch.as_tensor(window).cpu()
    return batch, lengths


def corpus_windows(
    tokenizer,
    corpora: str | Iterable[str] | None = None,
    n: int | None = None,
    min_tokens: int | None = None,
    n_ctx: int | None = None,
    root=None,
    source: Source = "auto",
    seed: int = 0,
    interleave: bool = False,
) -> tuple[list[Int[Tensor, " _pos"]], list[str], WindowReport]:
    """Windows of general text: named offline corpora, or OpenWebText.

    Args:
        tokenizer: the model's tokenizer.
        corpora: offline corpus folders; ``None``: general English text (offline
            :data:`~context_neurons.text.corpora.EVAL_CORPORA`, interleaved; online OpenWebText).
        n: windows wanted (fewer when the documents run out).
        min_tokens: documents shorter than this are dropped (default ``n_ctx - 1``: full windows).
        n_ctx: the window length, BOS included (default: the model's context).
        root: the corpora directory.
        source: ``"auto"`` (the corpora when found, else OpenWebText), ``"corpora"`` or
            ``"openwebtext"``.
        seed: OpenWebText's shuffle seed.
        interleave: take one document from each corpus in turn, so every corpus is represented.

    Raises:
        DataError: named corpora without the offline corpora (nothing else is silently read in
            their place: use :func:`domain_windows` for a domain's online stand-in), or no window.
    """
    n_ctx = context_length(tokenizer, n_ctx)
    min_tokens = n_ctx - 1 if min_tokens is None else min_tokens
    source = resolve_source(source, root)
    if source == "openwebtext":
        if corpora is not None:
            raise DataError(
                f"Corpora {corpora!r} need the offline corpora directory, which was not found: set "
                "CONTEXT_NEURONS_CORPORA, or ask for general text (corpora=None) or a domain "
                "(domain_windows), which have online stand-ins."
            )
        # Most OpenWebText documents are shorter than a window: stream several per window wanted.
        documents: Iterable[Document] = openwebtext_documents(max(64, 8 * (n or 1000)), seed=seed)
    else:
        if corpora is None:
            corpora, interleave = EVAL_CORPORA, True
        documents = corpora_documents(corpora, root, interleave)
    windows, labels, report = tokenize_windows(
        tokenizer, documents, n_ctx=n_ctx, min_tokens=min_tokens, max_windows=n
    )
    if not windows:
        raise DataError(f"No document of at least {min_tokens} tokens in {source} ({report}).")
    return windows, labels, report


def evaluation_windows(
    tokenizer, n: int, n_ctx: int | None = None, source: Source = "auto"
) -> tuple[list[Int[Tensor, " _pos"]], list[str], WindowReport]:
    """``n`` full-length windows of general text, one document from each corpus in turn offline.

    Offline, the documents of the evaluation corpora are interleaved so that every genre is
    represented whatever ``n``; documents shorter than a window are dropped (one window per
    document). Without the corpora, OpenWebText.
    """
    if n < 1:
        raise DataError(f"Ask for at least one evaluation text, got n = {n}.")
    return corpus_windows(tokenizer, None, n=n, n_ctx=n_ctx, source=source)


def domain_windows(
    tokenizer,
    domain: str,
    n: int = 4,
    min_tokens: int | None = None,
    interleave: bool = False,
    n_ctx: int | None = None,
    without_markup: bool = False,
) -> tuple[list[Int[Tensor, " _pos"]], list[str]]:
    """``n`` windows of a domain's texts (:func:`~context_neurons.text.corpora.domain_documents`,
    with ``without_markup``).

    Documents shorter than ``min_tokens`` (default ``n_ctx - 1``) are concatenated, separated by
    BOS, so corpora of short items (Pokemon moves, abstracts, Bible chapters) give full windows.
    Labels name the documents actually used (``openwebtext~<domain>:id`` for an online stand-in).
    """
    check_domain(domain)
    n_ctx = context_length(tokenizer, n_ctx)
    min_tokens = n_ctx - 1 if min_tokens is None else min_tokens
    documents = domain_documents(domain, interleave=interleave, without_markup=without_markup)
    windows, labels, _ = tokenize_windows(
        tokenizer, documents, n_ctx, min_tokens=min_tokens, short="concat", max_windows=n
    )
    if not windows:
        raise DataError(f"Domain {domain!r} gave no windows of {n_ctx} tokens.")
    return windows, labels


@dataclass
class DomainTexts:
    """Token windows of several domains, one entry per window.

    Attributes:
        windows: 1-D token tensors, BOS first.
        labels: each window's source (``corpus:document``).
        domains: each window's domain.
    """

    windows: list[Int[Tensor, " _pos"]]
    labels: list[str]
    domains: list[str]

    def others(self, domain: str) -> list[int]:
        """The windows of other domains, leaving out any text that ``domain`` also has."""
        own = {self.labels[i] for i in self.indices(domain)}
        return [i for i, label in enumerate(self.labels) if label not in own]

    def subset(self, indices: Sequence[int]) -> "DomainTexts":
        """The windows at ``indices``, in that order."""
        return DomainTexts(
            [self.windows[i] for i in indices],
            [self.labels[i] for i in indices],
            [self.domains[i] for i in indices],
        )

    def indices(self, domain: str) -> list[int]:
        """The windows of ``domain``."""
        found = [i for i, d in enumerate(self.domains) if d == domain]
        if not found:
            raise DataError(
                f"No texts of domain {domain!r}; these texts cover {sorted(set(self.domains))}."
            )
        return found


def domain_texts(
    tokenizer, domains=None, n: int = 4, interleave: bool = True, n_ctx: int | None = None
) -> DomainTexts:
    """``n`` windows of up to ``n_ctx`` tokens from each domain (:func:`domain_windows`), WikiText
    without its markup: the texts chapter 5 names neurons' domains from."""
    domains = DOMAINS if domains is None else tuple(domains)
    if n < 1 or not domains:
        raise DataError(f"Ask for at least one window of at least one domain (n = {n}).")
    windows, labels, names = [], [], []
    for domain in domains:
        got, got_labels = domain_windows(tokenizer, domain, n=n, interleave=interleave,
                                         n_ctx=n_ctx, without_markup=True)
        windows += got
        labels += got_labels
        names += [domain] * len(got)
    return DomainTexts(windows, labels, names)


def calibration_tokens(
    tokenizer, name: str = DEFAULT_CALIBRATION, n_ctx: int | None = None
) -> Int[Tensor, " pos"]:
    """A named calibration text as ``[BOS, ...]``, cut to the context: the one tokenisation of the
    calibration text that every chapter shares (mean keys, denominators, LayerNorm scales)."""
    return tokenize_text(tokenizer, calibration_text(name).text, n_ctx=n_ctx, truncate=True)


# ----------------------------------------------------------------------------------------------
# Short windows of many documents (chapter 7)
# ----------------------------------------------------------------------------------------------


#: Tokens after BOS in each of chapter 7's look-up windows (:func:`lookup_windows`).
LOOKUP_TOKENS = 64


def document_windows(
    tokenizer,
    documents: Iterable[Document],
    n_tokens: int = LOOKUP_TOKENS,
    n_windows: int | None = None,
    prefix: str = "",
    skip: set[str] | None = None,
) -> tuple[list[Int[Tensor, " _pos"]], list[str]]:
    """Windows ``[BOS, n_tokens tokens]``: the opening of each document, short ones concatenated.

    Args:
        tokenizer: the model's tokenizer.
        documents: :class:`~context_neurons.text.corpora.Document` objects.
        n_tokens: tokens per window after BOS.
        n_windows: stop after this many windows.
        prefix: prepended to each label (``corpus:id``).
        skip: names ``corpus:id`` of documents to leave out; the names used are added to it
            (an OpenWebText stand-in ``openwebtext~domain`` counts as ``openwebtext``, so one
            document does not stand in for two domains).
    """
    if n_tokens < 1:
        raise DataError(f"n_tokens must be positive, got {n_tokens}.")
    bos, skip = bos_id(tokenizer), set() if skip is None else skip
    windows: list[Tensor] = []
    labels: list[str] = []
    pending: list[int] = []
    pending_label = ""
    for doc in documents:
        if n_windows is not None and len(windows) >= n_windows:
            break
        key = f"{doc.corpus.split('~', 1)[0]}:{doc.id}"
        if key in skip:
            continue
        skip.add(key)
        ids, name = tokenizer.encode(doc.text, add_special_tokens=False), doc.name
        if len(ids) < n_tokens:
            pending += ([bos] if pending else []) + ids
            pending_label = pending_label or name + "+"
            if len(pending) < n_tokens:
                continue
            ids, name, pending, pending_label = pending, pending_label, [], ""
        windows.append(torch.tensor([bos, *ids[:n_tokens]]))
        labels.append(prefix + name)
    return windows, labels


_LOOKUP_WINDOWS = IdentityCache(size=4)


def lookup_windows(
    tokenizer,
    domains: Sequence[str] | None = None,
    per_domain: int = 48,
    n_tokens: int = LOOKUP_TOKENS,
) -> tuple[list[Int[Tensor, " _pos"]], list[str]]:
    """Windows ``[BOS, n_tokens tokens]`` from every domain (cached per tokenizer and arguments).

    Each domain gives up to ``per_domain`` windows, the opening ``n_tokens`` tokens of as many
    documents (``interleave=True``: alternately from the domain's corpora; online, the
    keyword-selected OpenWebText stand-ins); documents shorter than a window are concatenated. A
    document used by one domain is not reused by another (several domains share corpora). Short
    windows of many documents give more varied prompts than long windows of few, which is what
    explaining a head needs.

    Returns:
        The windows and their labels ``domain|corpus:id``.
    """
    domains = tuple(DOMAINS) if domains is None else tuple(domains)
    for domain in domains:
        check_domain(domain)
    if per_domain < 1:
        raise DataError(f"per_domain must be positive, got {per_domain}.")

    def build() -> tuple[list[Tensor], list[str]]:
        used: set[str] = set()
        windows: list[Tensor] = []
        labels: list[str] = []
        for domain in domains:
            w, lab = document_windows(
                tokenizer, domain_documents(domain, interleave=True), n_tokens, per_domain,
                prefix=f"{domain}|", skip=used,
            )
            windows += w
            labels += lab
        if not windows:
            raise DataError("No windows: none of the domains gave a document.")
        return windows, labels

    return _LOOKUP_WINDOWS.get((tokenizer,), (domains, per_domain, n_tokens), build)


def document_of(label: str) -> str:
    """The document a window label names: ``domain|corpus:id[+][#k]`` -> ``corpus:id``."""
    name = label.split("|", 1)[-1].rsplit("#", 1)[0].rstrip("+")
    corpus, sep, doc_id = name.partition(":")
    return f"{corpus.split('~', 1)[0]}{sep}{doc_id}"


def is_held_out(document: str, fraction: float = 0.5) -> bool:
    """Whether a document is in the held-out split: its SHA-256 hash, read as a number in [0, 1),
    is below ``fraction``. Deterministic (unlike Python's ``hash``) and independent of the pool:
    a document lands in the same split whatever else is in the pool."""
    if not 0 < fraction < 1:
        raise InputError(f"The held-out fraction must be in (0, 1), got {fraction}.")
    digest = hashlib.sha256(document.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction
