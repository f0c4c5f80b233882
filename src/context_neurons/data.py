"""Data. This module reads documents and turns them into token windows for the model.

Offline, documents come from a directory of JSONL corpora (one ``{"id", "text", ...}`` per line),
by default ``../shared/corpora`` beside the repository, or ``$CONTEXT_NEURONS_CORPORA``. Online,
:func:`openwebtext_documents` streams OpenWebText through the ``datasets`` library.

Windowing policy (:func:`tokenize_windows`): every window starts with ``<|endoftext|>`` (BOS, as
TransformerLens prepends it) followed by up to ``n_ctx - 1`` text tokens. A document longer than
that is cut at the window length (``long="truncate"``, the default: one window per document, so
texts stay independent) or split into consecutive windows (``long="split"``). A document shorter
than ``min_tokens`` is dropped (``short="drop"``) or concatenated with the next ones, separated
by ``<|endoftext|>`` (``short="concat"``), for corpora of short items; a concatenation longer
than a window carries its remainder into the next window. Nothing is skipped silently: the
:class:`WindowReport` counts the documents and the tokens that were dropped, and why.

Domains (:func:`domain_documents`): the case studies read texts of a domain (Bible, Spanish,
medical, ...). Offline they are corpus folders (:data:`DOMAIN_CORPORA`); programming text is the
running Python's standard library everywhere. Online, without the corpora, a domain's documents are
the OpenWebText documents in which the domain's keywords (:mod:`context_neurons.topics`) are
densest, a stand-in that the documents' labels name.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Literal

import torch
from jaxtyping import Int
from torch import Tensor

from context_neurons.models import EOT_ID, find_shared_dir

CORPORA_ENV = "CONTEXT_NEURONS_CORPORA"
OPENWEBTEXT_ENV = "CONTEXT_NEURONS_OPENWEBTEXT"

#: Where OpenWebText is streamed from, tried in order: the dataset's main branch, then the hub's
#: Parquet conversion (``datasets>=4`` refuses the script the main branch long held).
#: ``$CONTEXT_NEURONS_OPENWEBTEXT`` (``"repo"`` or ``"repo@revision"``) is tried first.
OPENWEBTEXT_SOURCES: tuple[tuple[str, str | None], ...] = (
    ("Skylion007/openwebtext", None),
    ("Skylion007/openwebtext", "refs/convert/parquet"),
)

#: Named calibration texts: corpus, document id, and why.
CALIBRATION_TEXTS: dict[str, tuple[str, str, str]] = {
    "prose": ("nltk_brown_us", "cf01", "Brown corpus popular lore: general English prose"),
    "news": ("nltk_brown_us", "ca01", "Brown corpus press reportage"),
    "bible": ("bible_kjv", "Genesis 1", "King James Bible, Genesis 1"),
    "spanish": ("nltk_spanish", "10017_20000413.tbf", "Spanish newswire (CESS-ESP)"),
    "legal": ("spdx_license_texts", "Apache-2.0", "Apache License 2.0"),
    "code": ("python_stdlib", "textwrap.py", "Python standard library, textwrap.py"),
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

#: Programming text: modules of the running Python's standard library (the corpora's README).
CODE_CORPUS = "python_stdlib"
CODE_MODULES = ("textwrap.py", "fractions.py", "heapq.py", "bisect.py", "graphlib.py", "shlex.py")

#: Every domain :func:`domain_documents` knows: the corpus domains and ``"code"``.
DOMAINS: tuple[str, ...] = (*DOMAIN_CORPORA, "code")

#: Keyword lists (topics of :mod:`context_neurons.topics`) that select a domain's documents from
#: OpenWebText when the offline corpora are absent; domains without keywords take the stream as is.
DOMAIN_KEYWORDS: dict[str, tuple[str, ...]] = {
    "british": ("british",),
    "american": ("american",),
    "bible": ("religion", "bible_archaic"),
    "spanish": ("spanish",),
    "medical": ("medicine",),
    "legal": ("law",),
    "astronomy": ("astronomy",),
    "war": ("war",),
    "pokemon": ("pokemon",),
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
    n_tokens: int = 0
    n_tokens_dropped: int = 0

    def __str__(self) -> str:
        return (
            f"{self.n_documents} documents -> {self.n_windows} windows "
            f"({self.n_truncated} truncated, {self.n_split} split, "
            f"{self.n_dropped_short} dropped as too short, {self.n_concatenated} concatenated; "
            f"{self.n_tokens - self.n_tokens_dropped} of {self.n_tokens} text tokens kept)"
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


def get_document(corpus: str, doc_id: str, root: str | Path | None = None) -> Document:
    """One document by corpus and id."""
    for doc in iter_documents(corpus, root):
        if doc.id == doc_id:
            return doc
    raise DataError(f"No document {doc_id!r} in corpus {corpus!r}.")


def calibration_text(name: str = DEFAULT_CALIBRATION, root: str | Path | None = None) -> Document:
    """A named calibration text (see :data:`CALIBRATION_TEXTS`).

    Without the offline corpora (in Colab, say) the ``prose`` calibration text falls back to the
    first long document of the seeded OpenWebText stream; ``code`` needs no corpora.
    """
    if name not in CALIBRATION_TEXTS:
        raise DataError(f"Unknown calibration text {name!r}: choose from {list(CALIBRATION_TEXTS)}.")
    corpus, doc_id, _ = CALIBRATION_TEXTS[name]
    if corpus == CODE_CORPUS:
        return next(doc for doc in code_documents((doc_id,)))
    if corpora_dir(root, required=False) is None and name == DEFAULT_CALIBRATION:
        return _openwebtext_calibration()
    return get_document(corpus, doc_id, root)


@functools.lru_cache(maxsize=1)
def _openwebtext_calibration() -> Document:
    for doc in openwebtext_documents(50, seed=0):
        if len(doc.text) > 8000:
            return doc
    raise DataError("No OpenWebText document long enough for calibration.")


def _openwebtext_sources() -> list[tuple[str, str | None]]:
    """``OPENWEBTEXT_SOURCES``, after ``$CONTEXT_NEURONS_OPENWEBTEXT`` (``repo[@revision]``)."""
    sources = list(OPENWEBTEXT_SOURCES)
    if os.environ.get(OPENWEBTEXT_ENV):
        repo, _, revision = os.environ[OPENWEBTEXT_ENV].partition("@")
        sources.insert(0, (repo, revision or None))
    return sources


def _stream_openwebtext(seed: int):
    """A shuffled streaming OpenWebText split, from the first source that opens."""
    try:
        from datasets import load_dataset
    except ImportError as err:
        raise DataError("OpenWebText needs the 'datasets' package: pip install datasets") from err
    errors = []
    for repo, revision in _openwebtext_sources():
        try:
            if revision and revision.startswith("refs/convert/parquet"):
                # The hub's Parquet conversion: read its files directly, whatever the split names.
                url = f"hf://datasets/{repo}@{revision.replace('/', '%2F')}/*/*/*.parquet"
                stream = load_dataset("parquet", data_files={"train": url}, split="train",
                                      streaming=True)
            else:
                stream = load_dataset(repo, revision=revision, split="train", streaming=True)
            return stream.shuffle(seed=seed, buffer_size=10_000)
        except Exception as err:  # noqa: BLE001  (network and format errors come in many types)
            errors.append(f"  {repo}@{revision or 'main'}: {type(err).__name__}: {err}")
    raise DataError(
        "OpenWebText could not be streamed from any source:\n" + "\n".join(errors) + "\n"
        f"Online, set {OPENWEBTEXT_ENV}=owner/dataset[@revision] to another copy of OpenWebText; "
        f"offline, use the corpora: set {CORPORA_ENV} or pass source='corpora'."
    )


def openwebtext_documents(n: int, seed: int = 0) -> list[Document]:
    """``n`` OpenWebText documents through ``datasets`` (online; streamed, shuffled by ``seed``)."""
    if n < 1:
        raise DataError(f"Ask for at least one OpenWebText document, got n = {n}.")
    return list(_openwebtext_documents_cached(n, seed))


@functools.lru_cache(maxsize=4)
def _openwebtext_documents_cached(n: int, seed: int) -> tuple[Document, ...]:
    docs = []
    for i, record in enumerate(_stream_openwebtext(seed)):
        docs.append(Document("openwebtext", str(i), record["text"]))
        if len(docs) >= n:
            break
    return tuple(docs)


# ----------------------------------------------------------------------------------------------
# Domains
# ----------------------------------------------------------------------------------------------


def code_documents(modules: Iterable[str] = CODE_MODULES) -> list[Document]:
    """Programming text: modules of the running Python's standard library, as documents."""
    root = Path(sysconfig.get_paths()["stdlib"])
    docs = [
        Document(CODE_CORPUS, name, (root / name).read_text(encoding="utf-8"))
        for name in modules
        if (root / name).is_file()
    ]
    if not docs:
        raise DataError(f"None of the standard-library modules {list(modules)} is in {root}.")
    return docs


@functools.lru_cache(maxsize=1)
def _domain_keywords() -> dict[str, frozenset[str]]:
    """Lower-case keywords per domain, from :mod:`context_neurons.topics`."""
    from context_neurons.topics import BUILTIN_TOPICS, read_gb_us_pairs

    pairs, _ = read_gb_us_pairs(None)
    topics = {**BUILTIN_TOPICS, "british": [gb for gb, _ in pairs],
              "american": [us for _, us in pairs]}
    return {
        domain: frozenset(word.lower() for topic in names for word in topics[topic])
        for domain, names in DOMAIN_KEYWORDS.items()
    }


def keyword_density(text: str, keywords: Iterable[str]) -> float:
    """Keywords per 1000 words of ``text`` (case-insensitive, whole words)."""
    words = re.findall(r"\w+", text.lower())
    keywords = keywords if isinstance(keywords, (set, frozenset)) else set(keywords)
    return 1000 * sum(word in keywords for word in words) / max(len(words), 1)


def openwebtext_domain_documents(domain: str, n_candidates: int = 2000, seed: int = 0):
    """OpenWebText documents standing in for a domain: the densest in the domain's keywords.

    Of ``n_candidates`` streamed documents, those containing the domain's keywords, densest
    first (domains without keywords: the stream in order). Each document's ``meta`` records the
    density, and its corpus is ``openwebtext~<domain>`` so tables and plots say what it is.
    """
    candidates = openwebtext_documents(n_candidates, seed=seed)
    keywords = _domain_keywords().get(domain)
    if keywords is None:
        return candidates
    scored = [(keyword_density(doc.text, keywords), doc) for doc in candidates]
    scored = sorted((pair for pair in scored if pair[0] > 0), key=lambda pair: -pair[0])
    return [
        Document(f"openwebtext~{domain}", doc.id, doc.text, {"keyword_density": round(d, 2)})
        for d, doc in scored
    ]


def domain_documents(
    domain: str,
    root: str | Path | None = None,
    source: Literal["auto", "corpora", "openwebtext"] = "auto",
    interleave: bool = False,
) -> Iterator[Document]:
    """The documents of a case-study domain (one of :data:`DOMAINS`).

    Args:
        domain: e.g. ``"bible"``, ``"spanish"``, ``"code"``.
        root: the corpora directory (default: ``$CONTEXT_NEURONS_CORPORA`` or ``shared/corpora``).
        source: ``"corpora"``, ``"openwebtext"`` (keyword-selected stand-ins, online), or
            ``"auto"``: the corpora when they are found, else OpenWebText.
        interleave: alternate between the domain's corpora instead of reading them in turn.

    Returns:
        An iterator of documents, in a fixed order.

    Raises:
        DataError: for an unknown domain, at the call (not at the first document).
    """
    if domain not in DOMAINS:
        raise DataError(f"Unknown domain {domain!r}: choose from {list(DOMAINS)}.")
    return _domain_documents(domain, root, source, interleave)


def _domain_documents(domain: str, root, source: str, interleave: bool) -> Iterator[Document]:
    if domain == "code":
        yield from code_documents()
        return
    if source == "auto":
        source = "corpora" if corpora_dir(root, required=False) is not None else "openwebtext"
    if source == "openwebtext":
        yield from openwebtext_domain_documents(domain)
        return
    yield from corpora_documents(DOMAIN_CORPORA[domain], root, interleave)


def corpora_documents(
    corpora: str | Iterable[str], root: str | Path | None = None, interleave: bool = False
) -> Iterator[Document]:
    """The documents of corpus folders: one folder after another, or alternating between them."""
    names = [corpora] if isinstance(corpora, str) else list(corpora)
    streams = [iter_documents(name, root) for name in names]
    if not interleave:
        for stream in streams:
            yield from stream
        return
    while streams:
        for stream in list(streams):
            document = next(stream, None)
            if document is None:
                streams.remove(stream)
            else:
                yield document


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
    if max_windows is not None and max_windows < 1:
        raise DataError(f"max_windows must be at least 1 (or None for all), got {max_windows}.")
    body = n_ctx - 1
    report = WindowReport()
    windows: list[Tensor] = []
    labels: list[str] = []
    pending: list[int] = []
    pending_labels: list[str] = []

    def concat_label(names: list[str]) -> str:
        return "+".join(names[:3]) + ("+..." if len(names) > 3 else "")

    def emit(ids: list[int], label: str) -> bool:
        """Add a window; True once ``max_windows`` are reached."""
        windows.append(torch.tensor([EOT_ID, *ids], dtype=torch.long))
        labels.append(label)
        report.n_windows += 1
        return max_windows is not None and report.n_windows >= max_windows

    def finish() -> tuple[list[Tensor], list[str], WindowReport]:
        kept = sum(len(w) - 1 for w in windows)
        separators = sum(int((w[1:] == EOT_ID).sum()) for w in windows) if report.n_concatenated else 0
        report.n_tokens_dropped = report.n_tokens - (kept - separators)
        return windows, labels, report

    for doc in documents:
        report.n_documents += 1
        ids = tokenizer.encode(doc.text, add_special_tokens=False)
        report.n_tokens += len(ids)
        label = f"{doc.corpus}:{doc.id}"
        if len(ids) < min_tokens:
            if short == "drop":
                report.n_dropped_short += 1
                continue
            report.n_concatenated += 1
            pending += ([EOT_ID] if pending else []) + ids
            pending_labels.append(label)
            while len(pending) >= body:  # full windows; the remainder starts the next one
                if emit(pending[:body], concat_label(pending_labels)):
                    return finish()
                pending, pending_labels = pending[body:], pending_labels[-1:]
            continue
        if len(ids) > body:
            if long == "truncate":
                report.n_truncated += 1
                if emit(ids[:body], label):
                    return finish()
                continue
            report.n_split += 1
            for k, start in enumerate(range(0, len(ids), body)):
                chunk = ids[start : start + body]
                if len(chunk) < min_tokens:
                    break  # a short tail: counted in n_tokens_dropped
                if emit(chunk, f"{label}#{k}"):
                    return finish()
            continue
        if emit(ids, label):
            return finish()
    if pending and len(pending) >= min_tokens:
        emit(pending, concat_label(pending_labels))
    return finish()


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
    interleave: bool = False,
) -> tuple[list[Int[Tensor, "_pos"]], list[str], WindowReport]:
    """Evaluation windows: full-length windows from offline corpora, or OpenWebText online.

    ``source="auto"`` uses the offline corpora when they are found, else OpenWebText.
    ``interleave`` takes one document from each corpus in turn, so every corpus is represented
    whatever ``n``; otherwise the corpora are read one after another.
    """
    if source == "auto":
        source = "corpora" if corpora_dir(root, required=False) is not None else "openwebtext"
    if source == "openwebtext":
        # Most OpenWebText documents are shorter than a window: stream several per window wanted.
        documents: Iterable[Document] = openwebtext_documents(max(64, 8 * (n or 1000)), seed=seed)
    else:
        documents = corpora_documents(corpora, root, interleave)
    windows, labels, report = tokenize_windows(
        tokenizer, documents, n_ctx=n_ctx, min_tokens=min_tokens, max_windows=n
    )
    if not windows:
        raise DataError(f"No document of at least {min_tokens} tokens in {source} ({report}).")
    return windows, labels, report


def available_threads() -> int:
    """CPU threads torch will use (set ``OMP_NUM_THREADS`` for reproducible timings)."""
    return int(os.environ.get("OMP_NUM_THREADS", torch.get_num_threads()))
