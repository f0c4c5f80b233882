"""Data. This module reads documents and turns them into token windows for the model.

Offline, documents come from a directory of JSONL corpora (one ``{"id", "text", ...}`` per line),
by default ``../shared/corpora`` beside the repository, or ``$CONTEXT_NEURONS_CORPORA``. Online,
:func:`openwebtext_documents` streams OpenWebText through the ``datasets`` library.

Windowing policy (:func:`tokenize_windows`): every window starts with ``<|endoftext|>`` (BOS, as
TransformerLens prepends it) followed by up to ``n_ctx - 1`` text tokens. A document longer than
that is cut at the window length (``long="truncate"``, the default: one window per document, so
texts stay independent) or split into consecutive windows (``long="split"``). A document shorter
than ``min_tokens`` is dropped (``short="drop"``) or concatenated with the next ones, separated
by ``<|endoftext|>`` (``short="concat"``), for corpora of short items. Nothing is skipped
silently: the :class:`WindowReport` counts what was dropped and why.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Literal

import torch
from jaxtyping import Int
from torch import Tensor

from context_neurons.models import EOT_ID, find_shared_dir

CORPORA_ENV = "CONTEXT_NEURONS_CORPORA"

#: Named calibration texts: corpus, document id, and why.
CALIBRATION_TEXTS: dict[str, tuple[str, str, str]] = {
    "prose": ("nltk_brown_us", "cf01", "Brown corpus popular lore: general English prose"),
    "news": ("nltk_brown_us", "ca01", "Brown corpus press reportage"),
    "bible": ("bible_kjv", "Genesis 1", "King James Bible, Genesis 1"),
    "spanish": ("nltk_spanish", "10017_20000413.tbf", "Spanish newswire (CESS-ESP)"),
    "legal": ("spdx_license_texts", "Apache-2.0", "Apache License 2.0"),
}
DEFAULT_CALIBRATION = "prose"

#: Domains of the case studies: corpus folders whose documents are long enough for 1024 tokens.
DOMAIN_CORPORA: dict[str, list[str]] = {
    "general": ["nltk_brown_us", "nltk_masc"],
    "encyclopedic": ["wikitext2_pytorch_examples"],
    "british": ["nltk_pil_uk_medical", "nltk_abc_au_news"],
    "american": ["nltk_brown_us", "nltk_state_union_us"],
    "bible": ["bible_kjv", "bible_web"],
    "spanish": ["nltk_spanish", "bible_es_rv1909"],
    "medical": ["medical_abstracts", "nltk_pil_uk_medical"],
    "legal": ["spdx_license_texts"],
    "astronomy": ["stellarium_skycultures"],
    "war": ["nltk_state_union_us", "wikitext2_pytorch_examples"],
    "pokemon": ["pokemon_showdown"],
}


class DataError(RuntimeError):
    """A corpus, document or text could not be used; the message says what to do."""


@dataclass(frozen=True)
class Document:
    """One text with its provenance."""

    corpus: str
    id: str
    text: str
    meta: dict = field(default_factory=dict, compare=False)


@dataclass
class WindowReport:
    """What :func:`tokenize_windows` did with each document."""

    n_documents: int = 0
    n_windows: int = 0
    n_truncated: int = 0
    n_split: int = 0
    n_dropped_short: int = 0
    n_concatenated: int = 0

    def __str__(self) -> str:
        return (
            f"{self.n_documents} documents -> {self.n_windows} windows "
            f"({self.n_truncated} truncated, {self.n_split} split, "
            f"{self.n_dropped_short} dropped as too short, {self.n_concatenated} concatenated)"
        )


def corpora_dir(path: str | Path | None = None, required: bool = True) -> Path | None:
    """The offline corpora directory: ``path``, ``$CONTEXT_NEURONS_CORPORA`` or ``shared/corpora``."""
    found = Path(path).expanduser() if path else find_shared_dir("corpora", CORPORA_ENV)
    if found is not None and found.is_dir():
        return found
    if required:
        raise DataError(
            f"Corpora directory not found ({found or 'none configured'}). Set {CORPORA_ENV} to a "
            f"directory of JSONL corpora (the project's shared/corpora), or pass source="
            f"'openwebtext' when online."
        )
    return None


def list_corpora(root: str | Path | None = None) -> list[str]:
    """Names of the corpus folders that hold JSONL files."""
    root = corpora_dir(root)
    return sorted(p.name for p in root.iterdir() if p.is_dir() and any(p.glob("*.jsonl")))


def iter_documents(
    corpus: str, root: str | Path | None = None, min_chars: int = 1
) -> Iterator[Document]:
    """Documents of one corpus folder, in file order, skipping texts shorter than ``min_chars``."""
    folder = corpora_dir(root) / corpus
    files = sorted(folder.glob("*.jsonl"))
    if not files:
        raise DataError(f"No JSONL files in corpus {corpus!r} ({folder}); see list_corpora().")
    for file in files:
        with file.open(encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    continue
                record = json.loads(line)
                text = record.pop("text", "")
                if len(text) >= min_chars:
                    yield Document(corpus, str(record.pop("id", "")), text, record)


def load_documents(
    corpora: str | Iterable[str], root: str | Path | None = None, min_chars: int = 1,
    limit: int | None = None,
) -> list[Document]:
    """Documents from one or several corpus folders, in a fixed order, at most ``limit``."""
    names = [corpora] if isinstance(corpora, str) else list(corpora)
    docs: list[Document] = []
    for name in names:
        for doc in iter_documents(name, root, min_chars):
            docs.append(doc)
            if limit is not None and len(docs) >= limit:
                return docs
    return docs


def get_document(corpus: str, doc_id: str, root: str | Path | None = None) -> Document:
    """One document by corpus and id."""
    for doc in iter_documents(corpus, root):
        if doc.id == doc_id:
            return doc
    raise DataError(f"No document {doc_id!r} in corpus {corpus!r}.")


def calibration_text(name: str = DEFAULT_CALIBRATION, root: str | Path | None = None) -> Document:
    """A named calibration text (see :data:`CALIBRATION_TEXTS`).

    Without the offline corpora (in Colab, say) the ``prose`` calibration text falls back to the
    first document of the seeded OpenWebText stream.
    """
    if name not in CALIBRATION_TEXTS:
        raise DataError(f"Unknown calibration text {name!r}: choose from {list(CALIBRATION_TEXTS)}.")
    corpus, doc_id, _ = CALIBRATION_TEXTS[name]
    if corpora_dir(root, required=False) is None and name == DEFAULT_CALIBRATION:
        return _openwebtext_calibration()
    return get_document(corpus, doc_id, root)


@functools.lru_cache(maxsize=1)
def _openwebtext_calibration() -> Document:
    for doc in openwebtext_documents(50, seed=0):
        if len(doc.text) > 8000:
            return doc
    raise DataError("No OpenWebText document long enough for calibration.")


def openwebtext_documents(n: int, seed: int = 0) -> list[Document]:
    """``n`` OpenWebText documents through ``datasets`` (online; streamed, shuffled by ``seed``)."""
    try:
        from datasets import load_dataset
    except ImportError as err:
        raise DataError("OpenWebText needs the 'datasets' package: pip install datasets") from err
    try:
        stream = load_dataset("Skylion007/openwebtext", split="train", streaming=True)
        stream = stream.shuffle(seed=seed, buffer_size=10_000)
    except Exception as err:  # noqa: BLE001  (network errors come in many types)
        raise DataError(
            "OpenWebText could not be streamed (no network?). Use the offline corpora instead: "
            f"set {CORPORA_ENV} or pass source='corpora'."
        ) from err
    docs = []
    for i, record in enumerate(stream):
        docs.append(Document("openwebtext", str(i), record["text"]))
        if len(docs) >= n:
            break
    return docs


def tokenize_text(
    tokenizer, text: str, n_ctx: int = 1024, truncate: bool = False
) -> Int[Tensor, "pos"]:
    """One text as ``[BOS, tokens...]``; over-long text raises unless ``truncate``."""
    if not text or not text.strip():
        raise DataError("The text is empty: give at least one non-blank character.")
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(ids) + 1 > n_ctx:
        if not truncate:
            raise DataError(
                f"The text has {len(ids)} tokens; with BOS the model takes at most {n_ctx}. "
                f"Shorten it, or pass truncate=True to keep the first {n_ctx - 1} tokens."
            )
        ids = ids[: n_ctx - 1]
    return torch.tensor([EOT_ID, *ids], dtype=torch.long)


def tokenize_windows(
    tokenizer,
    documents: Iterable[Document],
    n_ctx: int = 1024,
    min_tokens: int = 256,
    long: Literal["truncate", "split"] = "truncate",
    short: Literal["drop", "concat"] = "drop",
    max_windows: int | None = None,
) -> tuple[list[Int[Tensor, "_pos"]], list[str], WindowReport]:
    """Token windows ``[BOS, ...]`` of at most ``n_ctx`` tokens (policy in the module docstring).

    Returns:
        windows (1-D LongTensors), their labels (``corpus:id`` and window index), and a report.
    """
    if min_tokens < 1 or min_tokens > n_ctx - 1:
        raise DataError(f"min_tokens must be in [1, {n_ctx - 1}], got {min_tokens}.")
    body = n_ctx - 1
    report = WindowReport()
    windows: list[Tensor] = []
    labels: list[str] = []
    pending: list[int] = []
    pending_labels: list[str] = []

    def emit(ids: list[int], label: str) -> bool:
        windows.append(torch.tensor([EOT_ID, *ids], dtype=torch.long))
        labels.append(label)
        report.n_windows += 1
        return max_windows is not None and report.n_windows >= max_windows

    for doc in documents:
        report.n_documents += 1
        ids = tokenizer.encode(doc.text, add_special_tokens=False)
        label = f"{doc.corpus}:{doc.id}"
        if len(ids) < min_tokens:
            if short == "drop":
                report.n_dropped_short += 1
                continue
            report.n_concatenated += 1
            pending += ([EOT_ID] if pending else []) + ids
            pending_labels.append(label)
            if len(pending) >= body:
                if emit(pending[:body], "+".join(pending_labels[:3]) + ("+..." if len(pending_labels) > 3 else "")):
                    return windows, labels, report
                pending, pending_labels = [], []
            continue
        if len(ids) > body:
            if long == "truncate":
                report.n_truncated += 1
                if emit(ids[:body], label):
                    return windows, labels, report
                continue
            report.n_split += 1
            for k, start in enumerate(range(0, len(ids), body)):
                chunk = ids[start : start + body]
                if len(chunk) < min_tokens:
                    break
                if emit(chunk, f"{label}#{k}"):
                    return windows, labels, report
            continue
        if emit(ids, label):
            return windows, labels, report
    if pending and len(pending) >= min_tokens:
        emit(pending, "+".join(pending_labels[:3]) + ("+..." if len(pending_labels) > 3 else ""))
    return windows, labels, report


def pad_windows(
    windows: list[Int[Tensor, "_pos"]], pad_id: int = EOT_ID
) -> tuple[Int[Tensor, "batch pos"], Int[Tensor, "batch"]]:
    """Right-pad windows into one batch; returns the batch and each window's length."""
    if not windows:
        raise DataError("No windows to batch: the documents gave none (see the WindowReport).")
    lengths = torch.tensor([len(w) for w in windows])
    batch = torch.full((len(windows), int(lengths.max())), pad_id, dtype=torch.long)
    for i, window in enumerate(windows):
        batch[i, : len(window)] = window
    return batch, lengths


def corpus_windows(
    tokenizer,
    corpora: str | Iterable[str] = ("nltk_brown_us", "nltk_masc", "wikitext2_pytorch_examples"),
    n: int | None = None,
    min_tokens: int = 1023,
    n_ctx: int = 1024,
    root: str | Path | None = None,
    source: Literal["auto", "corpora", "openwebtext"] = "auto",
    seed: int = 0,
) -> tuple[list[Int[Tensor, "_pos"]], list[str], WindowReport]:
    """Evaluation windows: full-length windows from offline corpora, or OpenWebText online.

    ``source="auto"`` uses the offline corpora when they are found, else OpenWebText.
    """
    if source == "auto":
        source = "corpora" if corpora_dir(root, required=False) is not None else "openwebtext"
    if source == "openwebtext":
        documents: Iterable[Document] = openwebtext_documents(4 * (n or 1000), seed=seed)
    else:
        names = [corpora] if isinstance(corpora, str) else list(corpora)
        documents = (doc for name in names for doc in iter_documents(name, root))
    return tokenize_windows(
        tokenizer, documents, n_ctx=n_ctx, min_tokens=min_tokens, max_windows=n
    )


def available_threads() -> int:
    """CPU threads torch will use (set ``OMP_NUM_THREADS`` for reproducible timings)."""
    return int(os.environ.get("OMP_NUM_THREADS", torch.get_num_threads()))
