"""Evaluation texts. This module chooses the texts the approximation is evaluated on, leaving out
every calibration text (chapter 6).

The circuit takes its denominators, its LayerNorm 2 scale and its mean keys and values from one
calibration text (:data:`~context_neurons.text.corpora.CALIBRATION_TEXTS`). Evaluating it on that
very text would test it on what it was fitted to, so every set of evaluation texts leaves out the
calibration documents, by name (:func:`calibration_keys`): general text
(:func:`held_out_general_windows`) and each domain (:func:`held_out_domain_windows`), whose short
documents are concatenated *after* the calibration documents are removed, so none hides inside a
concatenated window. Online, a document's name is ``openwebtext~<domain>:<index>`` or
``openwebtext:<index>`` for the same streamed document, so names are compared without the
``~<domain>`` part (:func:`document_key`).
"""

from __future__ import annotations

import torch
from jaxtyping import Int
from torch import Tensor

from context_neurons.checks import DataError
from context_neurons.text.corpora import (
    CALIBRATION_TEXTS,
    DOMAINS,
    Source,
    calibration_text,
    check_domain,
    domain_documents,
)
from context_neurons.text.windows import (
    DomainTexts,
    WindowReport,
    context_length,
    evaluation_windows,
    tokenize_text,
    tokenize_windows,
)

#: Tokens of a calibration text's beginning that identify it inside a window.
IDENTIFYING_TOKENS = 64


def document_key(name: str) -> tuple[str, str]:
    """``(corpus, id)`` of a document name ``corpus:id``, the corpus without a ``~domain`` part."""
    corpus, sep, doc_id = name.partition(":")
    if not sep:
        raise DataError(f"A document name is 'corpus:id', got {name!r}.")
    return corpus.split("~", 1)[0], doc_id


def calibration_keys(names=tuple(CALIBRATION_TEXTS)) -> set[tuple[str, str]]:
    """The :func:`document_key` of every named calibration text (the documents to leave out)."""
    return {document_key(calibration_text(name).name) for name in names}


def _window_keys(label: str) -> set[tuple[str, str]]:
    """The documents of a window label (``corpus:id``, or several joined by ``+``)."""
    return {document_key(part) for part in label.split("+") if ":" in part}


def held_out_general_windows(
    tokenizer,
    n: int,
    exclude: set[tuple[str, str]] | None = None,
    n_ctx: int | None = None,
    source: Source = "auto",
) -> tuple[list[Int[Tensor, " _pos"]], list[str], WindowReport, list[str]]:
    """``n`` full-length windows of general text (:func:`evaluation_windows`), none of them a
    calibration text.

    General windows hold one document each (long documents are truncated, short ones dropped),
    so a window's label names its document exactly.

    Args:
        tokenizer: the model's tokenizer.
        n: windows wanted.
        exclude: document keys to leave out (default: :func:`calibration_keys`).
        n_ctx: the window length (default: the model's context).
        source: ``"auto"``, ``"corpora"`` or ``"openwebtext"``.

    Returns:
        windows, labels, the windowing report, and the labels of the windows left out.
    """
    exclude = calibration_keys() if exclude is None else exclude
    windows, labels, report = evaluation_windows(tokenizer, n + len(exclude), n_ctx, source)
    kept = _apart(labels, exclude)[:n]
    left_out = [label for label in labels if _window_keys(label) & exclude]
    return [windows[i] for i in kept], [labels[i] for i in kept], report, left_out


def _apart(labels: list[str], keys: set[tuple[str, str]]) -> list[int]:
    """The indices of the windows none of whose documents is one of ``keys``."""
    return [i for i, label in enumerate(labels) if not _window_keys(label) & keys]


def without_documents(
    windows: list[Int[Tensor, " _pos"]], labels: list[str], others: list[str]
) -> tuple[list[Int[Tensor, " _pos"]], list[str]]:
    """The windows (and their labels) whose documents are none of ``others``' documents: two sets
    drawn from one stream (online, chapter 3's prose and its Bible stand-in are both OpenWebText)
    then share no document."""
    kept = _apart(labels, set().union(*(_window_keys(label) for label in others)))
    return [windows[i] for i in kept], [labels[i] for i in kept]


def held_out_domain_windows(
    tokenizer,
    domain: str,
    n: int = 4,
    exclude: set[tuple[str, str]] | None = None,
    n_ctx: int | None = None,
    interleave: bool = False,
) -> tuple[list[Int[Tensor, " _pos"]], list[str]]:
    """``n`` windows of a domain's texts, as :func:`~context_neurons.text.windows.domain_windows`
    makes them, from the domain's documents without the calibration texts.

    Documents shorter than a window are concatenated (separated by BOS) after the excluded ones
    are removed, so no window holds a calibration document.
    """
    check_domain(domain)
    exclude = calibration_keys() if exclude is None else exclude
    n_ctx = context_length(tokenizer, n_ctx)
    documents = (
        doc
        for doc in domain_documents(domain, interleave=interleave)
        if document_key(doc.name) not in exclude
    )
    windows, labels, _ = tokenize_windows(
        tokenizer, documents, n_ctx, min_tokens=n_ctx - 1, short="concat", max_windows=n
    )
    if not windows:
        raise DataError(f"Domain {domain!r} gave no windows of {n_ctx} tokens.")
    return windows, labels


def held_out_domain_sets(
    tokenizer,
    domains=DOMAINS,
    n: int = 4,
    exclude: set[tuple[str, str]] | None = None,
    n_ctx: int | None = None,
) -> tuple[dict[str, list[Int[Tensor, " _pos"]]], dict[str, list[str]]]:
    """:func:`held_out_domain_windows` of each domain: ``({domain: windows}, {domain: labels})``."""
    exclude = calibration_keys() if exclude is None else exclude
    sets, labels = {}, {}
    for domain in domains:
        sets[domain], labels[domain] = held_out_domain_windows(
            tokenizer, domain, n, exclude, n_ctx
        )
    return sets, labels


def held_out_domain_texts(
    tokenizer,
    domains=DOMAINS,
    n: int = 4,
) -> tuple[dict[str, list[Int[Tensor, " _pos"]]], DomainTexts]:
    """:func:`held_out_domain_sets` of each domain, and the same windows as one
    :class:`~context_neurons.text.windows.DomainTexts` (domain by domain, in order)."""
    sets, labels = held_out_domain_sets(tokenizer, domains, n=n)
    texts = DomainTexts(
        windows=[w for d in sets for w in sets[d]],
        labels=[label for d in sets for label in labels[d]],
        domains=[d for d in sets for _ in sets[d]],
    )
    return sets, texts


def contains_run(window: Int[Tensor, " pos"], run: Int[Tensor, " n"]) -> bool:
    """Whether ``run`` occurs in ``window`` as consecutive tokens."""
    window, run = torch.as_tensor(window).cpu(), torch.as_tensor(run).cpu()
    if len(run) == 0 or len(window) < len(run):
        return False
    return bool((window.unfold(0, len(run), 1) == run).all(1).any())


def calibration_leaks(
    tokenizer, window_sets: dict[str, list[Int[Tensor, " _pos"]]], names=tuple(CALIBRATION_TEXTS)
) -> list[str]:
    """Which calibration texts occur in which sets of windows, by content, not by name.

    A calibration text occurs in a window when its first :data:`IDENTIFYING_TOKENS` tokens do,
    consecutively (a check independent of the names the exclusion uses).

    Returns:
        ``"<set>: <calibration name>"`` for each hit (empty when no set holds one).
    """
    runs = {
        name: tokenize_text(tokenizer, calibration_text(name).text, truncate=True)[1:][
            :IDENTIFYING_TOKENS
        ]
        for name in names
    }
    return [
        f"{set_name}: {name}"
        for set_name, windows in window_sets.items()
        for name, run in runs.items()
        if any(contains_run(w, run) for w in windows)
    ]
