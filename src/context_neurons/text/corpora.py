"""Corpora. This module reads documents: the offline corpora, OpenWebText, and the case-study domains.

Offline, documents come from a directory of JSONL corpora (one ``{"id", "text", ...}`` per line),
by default ``../shared/corpora`` beside the repository (:mod:`context_neurons.config`). Online,
:func:`openwebtext_documents` streams OpenWebText through the ``datasets`` library (from the hub,
or from a local copy named by ``$CONTEXT_NEURONS_OPENWEBTEXT``, read through the same calls).

Domains (:func:`domain_documents`): the case studies read texts of a domain (Bible, Spanish,
medical, ...). Offline they are corpus folders (:data:`DOMAIN_CORPORA`) (for naming a neuron's
domain, WikiText without its ``<unk>`` and ``@-@`` markup: :func:`strip_markup`); programming
text is the running Python's
standard library everywhere. Online, without the corpora, a domain's documents are
the OpenWebText documents in which the domain's keywords (:mod:`context_neurons.text.topics`) are
densest: a weak stand-in (OpenWebText is English-filtered, so its "Spanish" documents are English
texts that mention Spanish words), and every such document's corpus reads ``openwebtext~<domain>``
so that tables and plots say what was used.

Calibration texts (:data:`CALIBRATION_TEXTS`) are named documents; online each has a stand-in of
the same kind (:func:`calibration_text`): nothing is silently replaced, the returned document's
corpus and id say what it is.
"""

from __future__ import annotations

import functools
import json
import re
import sysconfig
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Iterator, Literal

from context_neurons import config
from context_neurons.checks import DataError
from context_neurons.text.topics import BUILTIN_TOPICS, read_gb_us_pairs

#: Where OpenWebText is streamed from, tried in order: the dataset's main branch, then the hub's
#: Parquet conversion (``datasets>=4`` refuses the script the main branch long held).
#: ``$CONTEXT_NEURONS_OPENWEBTEXT`` (``repo[@revision]`` or a local path) is tried first.
OPENWEBTEXT_SOURCES: tuple[tuple[str, str | None], ...] = (
    ("Skylion007/openwebtext", None),
    ("Skylion007/openwebtext", "refs/convert/parquet"),
)


@dataclass(frozen=True)
class CalibrationText:
    """A named calibration text: the offline document, what it is, and its online domain."""

    corpus: str
    doc_id: str
    description: str
    domain: str  # the domain whose OpenWebText stand-in replaces it online ("general": any text)


#: Named calibration texts.
CALIBRATION_TEXTS: dict[str, CalibrationText] = {
    "prose": CalibrationText("nltk_brown_us", "cf01", "Brown corpus popular lore", "general"),
    "news": CalibrationText("nltk_brown_us", "ca01", "Brown corpus press reportage", "general"),
    "bible": CalibrationText("bible_kjv", "Genesis 1", "King James Bible, Genesis 1", "bible"),
    "spanish": CalibrationText(
        "nltk_spanish", "10017_20000413.tbf", "Spanish newswire (CESS-ESP)", "spanish"
    ),
    "legal": CalibrationText("spdx_license_texts", "Apache-2.0", "Apache License 2.0", "legal"),
    "code": CalibrationText("python_stdlib", "textwrap.py", "Python standard library", "code"),
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

#: Corpora whose raw text carries WikiText's markup, which :func:`domain_documents` removes when
#: asked (:func:`strip_markup`; chapter 5's domain names); the other readers keep the raw text.
MARKUP_CORPORA = ("wikitext2_pytorch_examples",)

#: Offline evaluation corpora: long documents of varied English prose.
EVAL_CORPORA = ("nltk_brown_us", "nltk_masc", "wikitext2_pytorch_examples", "nltk_state_union_us")

#: Programming text: modules of the running Python's standard library (the corpora's README).
CODE_CORPUS = "python_stdlib"
CODE_MODULES = ("textwrap.py", "fractions.py", "heapq.py", "bisect.py", "graphlib.py", "shlex.py")

#: Every domain :func:`domain_documents` knows: the corpus domains and ``"code"``.
DOMAINS: tuple[str, ...] = (*DOMAIN_CORPORA, "code")

#: Keyword lists (topics of :mod:`context_neurons.text.topics`) that select a domain's documents
#: from OpenWebText when the offline corpora are absent; "general" and "encyclopedic" take the
#: stream as it is.
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

Source = Literal["auto", "corpora", "openwebtext"]


@dataclass(frozen=True)
class Document:
    """One text with its provenance."""

    corpus: str
    id: str
    text: str
    meta: dict = field(default_factory=dict, compare=False)

    @property
    def name(self) -> str:
        """``corpus:id``: how labels and manifests name the document."""
        return f"{self.corpus}:{self.id}"


# ----------------------------------------------------------------------------------------------
# Offline corpora
# ----------------------------------------------------------------------------------------------


def corpora_dir(path: str | Path | None = None, required: bool = True) -> Path | None:
    """The offline corpora directory: ``path``, ``$CONTEXT_NEURONS_CORPORA`` or ``shared/corpora``."""
    found = Path(path).expanduser() if path else config.corpora_root()
    if found is not None and found.is_dir():
        return found
    if required:
        raise DataError(
            f"Corpora directory not found ({found or 'none configured'}). Set "
            f"{config.CORPORA.name} to a directory of JSONL corpora (the project's shared/corpora), "
            "or use source='openwebtext' when online."
        )
    return None


def resolve_source(source: Source, root: str | Path | None = None) -> str:
    """``"auto"``: the corpora when they are found, else OpenWebText."""
    if source not in ("auto", "corpora", "openwebtext"):
        raise DataError(f"source must be 'auto', 'corpora' or 'openwebtext', got {source!r}.")
    if source == "auto":
        return "corpora" if corpora_dir(root, required=False) is not None else "openwebtext"
    return source


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
        for record in read_jsonl(file):
            text = record.pop("text", "")
            if len(text) >= min_chars:
                yield Document(corpus, str(record.pop("id", "")), text, record)


def read_jsonl(file: Path) -> Iterator[dict]:
    """The JSON objects of a JSONL file, one a line (blank lines skipped). A line that is not
    UTF-8, not JSON or not an object is a :class:`DataError` naming the file and the line."""

    def damaged(number: int, what: str) -> DataError:
        return DataError(
            f"{file}, line {number}: {what}. The corpus file is damaged (truncated, or another "
            "encoding): re-create it as UTF-8 JSONL (one {\"id\": ..., \"text\": ...} object a "
            "line), or remove it from its corpus folder."
        )

    with Path(file).open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise damaged(number, f"not UTF-8 text (byte {raw[err.start]:#04x} at column "
                                      f"{err.start + 1})") from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise damaged(number, f"not valid JSON ({err.msg}, column {err.colno})") from None
            if not isinstance(record, dict):
                raise damaged(number, f"a JSON {type(record).__name__}, not an object")
            text = record.get("text", "")
            if not isinstance(text, str):
                raise damaged(number, f"its \"text\" is a {type(text).__name__}, not a string")
            yield record


def get_document(corpus: str, doc_id: str, root: str | Path | None = None) -> Document:
    """One document by corpus and id."""
    if corpus == CODE_CORPUS:
        return code_documents((doc_id,))[0]
    for doc in iter_documents(corpus, root):
        if doc.id == doc_id:
            return doc
    raise DataError(f"No document {doc_id!r} in corpus {corpus!r}.")


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


# ----------------------------------------------------------------------------------------------
# OpenWebText (online, or a local copy through the same `datasets` calls)
# ----------------------------------------------------------------------------------------------


def openwebtext_sources() -> list[tuple[str, str | None]]:
    """:data:`OPENWEBTEXT_SOURCES`, after ``$CONTEXT_NEURONS_OPENWEBTEXT`` when it is set."""
    sources = list(OPENWEBTEXT_SOURCES)
    chosen = config.openwebtext_source()
    if chosen:
        if Path(chosen).expanduser().exists():
            return [(str(Path(chosen).expanduser()), None)]  # a local copy: nothing else
        repo, _, revision = chosen.partition("@")
        sources.insert(0, (repo, revision or None))
    return sources


def _local_data_files(path: Path) -> tuple[str, list[str]]:
    """The ``datasets`` builder (``parquet`` or ``json``) and files of a local OpenWebText copy."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for builder, suffixes in (("parquet", {".parquet"}), ("json", {".jsonl", ".json"})):
        chosen = [str(p) for p in files if p.suffix in suffixes]
        if chosen:
            return builder, chosen
    raise DataError(f"No Parquet or JSONL files in {path} ({config.OPENWEBTEXT.name}).")


def _stream_openwebtext(seed: int):
    """A shuffled streaming OpenWebText split, from the first source that opens."""
    try:  # an optional dependency (the package's "online" extra), imported only when needed
        from datasets import load_dataset
    except ImportError as err:
        raise DataError("OpenWebText needs the 'datasets' package: pip install datasets") from err
    errors = []
    for repo, revision in openwebtext_sources():
        try:
            if Path(repo).exists():
                builder, files = _local_data_files(Path(repo))
                stream = load_dataset(builder, data_files={"train": files}, split="train",
                                      streaming=True)
            elif revision and revision.startswith("refs/convert/parquet"):
                # The hub's Parquet conversion: read its files directly, whatever the split names.
                url = f"hf://datasets/{repo}@{revision.replace('/', '%2F')}/*/*/*.parquet"
                stream = load_dataset("parquet", data_files={"train": url}, split="train",
                                      streaming=True)
            else:
                stream = load_dataset(repo, revision=revision, split="train", streaming=True)
            return stream.shuffle(seed=seed, buffer_size=10_000)
        except DataError:
            raise
        except Exception as err:  # noqa: BLE001  (network and format errors come in many types)
            errors.append(f"{repo}@{revision or 'main'}: {_first_line(err)}")
    raise openwebtext_error("; ".join(errors))


def _first_line(err: BaseException, width: int = 160) -> str:
    """An exception as ``Type: message`` on one line, cut to ``width`` characters."""
    text = " ".join(str(err).split()) or "no message"
    text = text if len(text) <= width else text[: width - 3] + "..."
    return f"{type(err).__name__}: {text}"


def openwebtext_error(why: str) -> DataError:
    """The one-line error of OpenWebText that cannot be read (``why``: each source's failure),
    saying what to do: the offline corpora, the network, or another copy."""
    return DataError(
        f"OpenWebText could not be read ({why}): offline, use the corpora (set "
        f"{config.CORPORA.name} to their directory); online, check the network, or set "
        f"{config.OPENWEBTEXT.name} to another copy (owner/dataset[@revision], or a local "
        "directory of Parquet or JSONL files)."
    )


def openwebtext_documents(n: int, seed: int = 0) -> list[Document]:
    """``n`` OpenWebText documents through ``datasets`` (streamed, shuffled by ``seed``)."""
    if n < 1:
        raise DataError(f"Ask for at least one OpenWebText document, got n = {n}.")
    return list(_openwebtext_prefix(n, seed))


#: Documents a domain's online stand-in is chosen from (:func:`openwebtext_domain_documents`),
#: and the fewest a stream reads: the shuffle fills a buffer of 10,000 documents before the
#: first comes out, so reading 2000 costs about what reading 64 does.
DOMAIN_CANDIDATES = 2000
#: The longest run of documents streamed so far for each source and seed, and whether it ended.
#: The shuffled stream's first ``n`` documents are the first ``n`` of any longer read (tested),
#: so a shorter request is a slice and does not open the stream again (each stream of Parquet
#: files closes with a 5-second wait in ``datasets``, a workaround for an Arrow shutdown bug).
_STREAMED: dict[tuple, tuple[tuple[Document, ...], bool]] = {}


def _openwebtext_prefix(n: int, seed: int) -> tuple[Document, ...]:
    key = (tuple(openwebtext_sources()), seed)  # another $CONTEXT_NEURONS_OPENWEBTEXT: another run
    docs, ended = _STREAMED.get(key, ((), False))
    if len(docs) < n and not ended:
        wanted = max(n, DOMAIN_CANDIDATES)
        docs = _stream_documents(wanted, seed)
        _STREAMED[key] = docs, len(docs) < wanted
    return docs[:n]


def forget_openwebtext() -> None:
    """Forget the documents streamed so far (tests that change the stream)."""
    _STREAMED.clear()


def _stream_documents(n: int, seed: int) -> tuple[Document, ...]:
    docs = []
    try:
        for i, record in enumerate(_stream_openwebtext(seed)):
            docs.append(Document("openwebtext", str(i), record["text"]))
            if len(docs) >= n:
                break
    except DataError:
        raise
    except Exception as err:  # noqa: BLE001  (a stream that opened can still fail while read)
        raise openwebtext_error(f"the stream failed after {len(docs)} documents: "
                                f"{_first_line(err)}") from err
    return tuple(docs)


# ----------------------------------------------------------------------------------------------
# Domains
# ----------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _domain_keywords() -> dict[str, frozenset[str]]:
    """Lower-case keywords per domain, from :mod:`context_neurons.text.topics`."""
    pairs, _ = read_gb_us_pairs(None)
    topics = {**BUILTIN_TOPICS, "british": [gb for gb, _ in pairs],
              "american": [us for _, us in pairs]}
    return {
        domain: frozenset(word.lower() for topic in names for word in topics[topic])
        for domain, names in DOMAIN_KEYWORDS.items()
    }


def keyword_density(text: str, keywords: Iterable[str]) -> float:
    """Keywords per 1000 words of ``text`` (case-insensitive, whole words)."""
    return _density(_word_counts(text), keywords)


def _word_counts(text: str) -> Counter:
    return Counter(re.findall(r"\w+", text.lower()))


def _density(counts: Counter, keywords: Iterable[str]) -> float:
    keywords = keywords if isinstance(keywords, (set, frozenset)) else set(keywords)
    found = sum(n for word, n in counts.items() if word in keywords)
    return 1000 * found / max(counts.total(), 1)


@functools.lru_cache(maxsize=8192)
def _domain_densities(text: str) -> dict[str, float]:
    """Every domain's keyword density of ``text`` from one count of its words (a few floats
    kept per document, read by each domain's stand-in in turn)."""
    counts = _word_counts(text)
    return {domain: _density(counts, keywords) for domain, keywords in _domain_keywords().items()}


def openwebtext_domain_documents(
    domain: str, n_candidates: int = DOMAIN_CANDIDATES, seed: int = 0
) -> list[Document]:
    """OpenWebText documents standing in for a domain: the densest in the domain's keywords.

    Of ``n_candidates`` streamed documents, those containing the domain's keywords, densest
    first (domains without keywords: the stream in order, relabelled). Each document's ``meta``
    records the density, and its corpus is ``openwebtext~<domain>`` so tables and plots say what
    it is.
    """
    candidates = openwebtext_documents(n_candidates, seed=seed)
    keywords = _domain_keywords().get(domain)
    if keywords is None:
        return [Document(f"openwebtext~{domain}", doc.id, doc.text) for doc in candidates]
    scored = [(_domain_densities(doc.text)[domain], doc) for doc in candidates]
    scored = sorted((pair for pair in scored if pair[0] > 0), key=lambda pair: -pair[0])
    if not scored:
        raise DataError(
            f"None of {n_candidates} OpenWebText documents contains a keyword of domain "
            f"{domain!r}; use the offline corpora ({config.CORPORA.name})."
        )
    return [
        Document(f"openwebtext~{domain}", doc.id, doc.text, {"keyword_density": round(d, 2)})
        for d, doc in scored
    ]


def check_domain(domain: str) -> str:
    """A known domain name (:data:`DOMAINS`)."""
    if domain not in DOMAINS:
        raise DataError(f"Unknown domain {domain!r}: choose from {list(DOMAINS)}.")
    return domain


def domain_documents(
    domain: str,
    root: str | Path | None = None,
    source: Source = "auto",
    interleave: bool = False,
    without_markup: bool = False,
) -> Iterator[Document]:
    """The documents of a case-study domain (one of :data:`DOMAINS`).

    Args:
        domain: e.g. ``"bible"``, ``"spanish"``, ``"code"``.
        root: the corpora directory (default: ``$CONTEXT_NEURONS_CORPORA`` or ``shared/corpora``).
        source: ``"corpora"``, ``"openwebtext"`` (keyword-selected stand-ins, online), or
            ``"auto"``: the corpora when they are found, else OpenWebText.
        interleave: alternate between the domain's corpora instead of reading them in turn.
        without_markup: the text of a corpus in :data:`MARKUP_CORPORA` (WikiText) without its
            markup (:func:`strip_markup`), so that ``<unk>`` never counts as a domain's token
            (chapter 5 names domains from token counts). The planted model's topics were
            associated on the raw text, so its experiments read the raw text.

    Returns:
        An iterator of documents, in a fixed order.

    Raises:
        DataError: for an unknown domain, at the call (not at the first document).
    """
    check_domain(domain)
    documents = _domain_documents(domain, root, resolve_source(source, root), interleave)
    return _without_markup(documents) if without_markup else documents


def _without_markup(documents: Iterator[Document]) -> Iterator[Document]:
    for document in documents:
        if document.corpus in MARKUP_CORPORA:
            document = replace(document, text=strip_markup(document.text))
        yield document


def _domain_documents(domain: str, root, source: str, interleave: bool) -> Iterator[Document]:
    if domain == "code":
        yield from code_documents()
    elif source == "openwebtext":
        yield from openwebtext_domain_documents(domain)
    else:
        yield from corpora_documents(DOMAIN_CORPORA[domain], root, interleave)


_UNK_AFTER_TEXT = re.compile(r"(?<=\S)[ \t]*<unk>")
_UNK_AT_LINE_START = re.compile(r"^[ \t]*<unk>[ \t]*", re.MULTILINE)
_AT_MARKUP = re.compile(r"[ \t]?@([-,.])@[ \t]?")


def strip_markup(text: str) -> str:
    """``text`` without WikiText's markup: every ``<unk>`` (a rare word the dataset replaced)
    deleted with the spaces before it (after it, at a line's start), and ``" @-@ "``,
    ``" @,@ "``, ``" @.@ "`` turned back into ``-``, ``,``, ``.``."""
    text = _AT_MARKUP.sub(r"\1", text)
    text = _UNK_AFTER_TEXT.sub("", text)
    return _UNK_AT_LINE_START.sub("", text)


def calibration_text(name: str = DEFAULT_CALIBRATION, root: str | Path | None = None) -> Document:
    """A named calibration text (:data:`CALIBRATION_TEXTS`).

    Offline it is the named document. Without the offline corpora (in Colab, say) it is a long
    document (8,000 characters or more) of its domain's OpenWebText stand-in
    (:func:`domain_documents`; for ``prose`` and ``news``, of the OpenWebText stream): the first
    for the first name of a domain, the second for the second (``prose`` and ``news`` share the
    general domain and must not be the same text); ``code`` needs no corpora. The returned
    document's corpus and id say which text it is.
    """
    if name not in CALIBRATION_TEXTS:
        raise DataError(f"Unknown calibration text {name!r}: choose from {list(CALIBRATION_TEXTS)}.")
    spec = CALIBRATION_TEXTS[name]
    if spec.corpus == CODE_CORPUS or corpora_dir(root, required=False) is not None:
        return get_document(spec.corpus, spec.doc_id, root)
    same_domain = [n for n, other in CALIBRATION_TEXTS.items() if other.domain == spec.domain]
    return _openwebtext_calibration(spec.domain, same_domain.index(name))


@functools.lru_cache(maxsize=8)
def _openwebtext_calibration(domain: str, rank: int = 0) -> Document:
    long_documents = (
        doc for doc in _domain_documents(domain, None, "openwebtext", False) if len(doc.text) > 8000
    )
    for k, doc in enumerate(long_documents):
        if k == rank:
            return doc
    raise DataError(
        f"Fewer than {rank + 1} OpenWebText documents of domain {domain!r} are long enough "
        f"(8,000 characters) to calibrate on; use the offline corpora ({config.CORPORA.name})."
    )


def describe(document: Document) -> str:
    """What a document is, for labels: ``corpus:id`` and, for a stand-in, that it is one."""
    if document.corpus.startswith("openwebtext~"):
        domain = document.corpus.split("~", 1)[1]
        return f"{document.name} (OpenWebText stand-in for {domain} text)"
    for name, spec in CALIBRATION_TEXTS.items():
        if (spec.corpus, spec.doc_id) == (document.corpus, document.id):
            return f"{document.name} ({spec.description})"
    return document.name
