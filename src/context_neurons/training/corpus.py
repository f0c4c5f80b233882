"""Documents of the offline corpora and their document-level train / held-out split.

A document is held out when the SHA-256 hash of ``corpus:id``, read as a number in [0, 1), is
below the held-out fraction: deterministic, independent of file order and of every other
document, and the same on every machine. Documents that share ``corpus:id`` (the English and
Spanish versions of a Stellarium sky culture) fall in the same split. The split is written as a
manifest of keys, not texts (:func:`write_manifest`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from context_neurons import config as settings
from context_neurons.checks import DataError
from context_neurons.text.corpora import read_jsonl
from context_neurons.text.dataset import CODE_FOLDER, NOT_CODE
from context_neurons.training.config import CODE_CORPUS

#: Folders of the Python standard library that are not ordinary library code.
_SKIPPED_STDLIB_PARTS = (*NOT_CODE, "test", "tests")


@dataclass(frozen=True)
class Doc:
    """One document: its corpus (the label the held-out analysis keeps), id and text."""

    corpus: str
    id: str
    text: str

    @property
    def key(self) -> str:
        return f"{self.corpus}:{self.id}"


def split_value(key: str) -> float:
    """The SHA-256 hash of ``key`` read as a number in [0, 1)."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def is_heldout(key: str, fraction: float) -> bool:
    """Whether the document ``corpus:id`` is in the held-out split."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"The held-out fraction must be in (0, 1), got {fraction}.")
    return split_value(key) < fraction


def stdlib_dir() -> Path:
    """The code corpus's root: ``$CONTEXT_NEURONS_CODE``, else the corpora dataset's folder of
    it (``python_stdlib``, CPython 3.11.7's library, when fetched into the corpora directory),
    else the running Python's standard library (a machine with another Python reads the
    shipped models' code corpus by fetching that folder or setting the variable)."""
    root = settings.code_corpus_root()
    if root is None:
        corpora = _corpora_or_none()
        fetched = corpora / CODE_FOLDER if corpora is not None else None
        return fetched if fetched is not None and fetched.is_dir() else Path(
            sysconfig.get_paths()["stdlib"])
    if not root.is_dir():
        raise DataError(f"{settings.CODE.name} is {str(root)!r}, which is not a directory.")
    return root


def _corpora_or_none() -> Path | None:
    try:
        return settings.corpora_root()
    except DataError:  # a bad corpora setting is reported where the corpora are read
        return None


def iter_code_documents(root: Path | None = None) -> Iterator[Doc]:
    """The standard library's ``*.py`` files (no tests, no site-packages), sorted by path."""
    root = root or stdlib_dir()
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if any(p in _SKIPPED_STDLIB_PARTS or p.startswith("test_") for p in parts):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if text.strip():
            yield Doc(CODE_CORPUS, path.relative_to(root).as_posix(), text)


def iter_documents(corpus: str, corpora_dir: str | Path) -> Iterator[Doc]:
    """Documents of one corpus folder (JSONL files in name order) or of the standard library."""
    if corpus == CODE_CORPUS:
        yield from iter_code_documents()
        return
    folder = Path(corpora_dir) / corpus
    files = sorted(folder.glob("*.jsonl"))
    if not files:
        raise DataError(
            f"No JSONL files in corpus folder {folder}. Pass --corpora DIR (or set "
            f"{settings.CORPORA.name}) to the directory of the offline corpora."
        )
    for file in files:
        for record in read_jsonl(file):
            text = record.get("text") or ""
            if text.strip():
                yield Doc(corpus, str(record.get("id", "")), text)


def heldout_documents(corpus: str, corpora_dir: str | Path, fraction: float) -> tuple[Doc, ...]:
    """The documents of one corpus in the held-out split (:func:`is_heldout`), in file order.

    Read once per process: the main job's truth, protocols v1 and v2 and protocol v3 all read
    the held-out split (cached by corpus, directory and fraction; the code corpus by its root).
    """
    root = str(stdlib_dir()) if corpus == CODE_CORPUS else ""
    return _heldout_documents(corpus, str(Path(corpora_dir)), root, fraction)


@functools.lru_cache(maxsize=64)
def _heldout_documents(corpus: str, corpora_dir: str, code_root: str,
                       fraction: float) -> tuple[Doc, ...]:
    return tuple(d for d in iter_documents(corpus, corpora_dir) if is_heldout(d.key, fraction))


def corpus_names(corpora_dir: str | Path) -> list[str]:
    """The corpora a run can weigh: the folders of ``corpora_dir`` that hold JSONL files, and the
    code corpus."""
    folder = Path(corpora_dir)
    found = [p.name for p in folder.iterdir() if p.is_dir() and any(p.glob("*.jsonl"))]
    return sorted({*found, CODE_CORPUS})


@dataclass
class Split:
    """Documents of each corpus, split into train and held-out (in file order within each)."""

    train: dict[str, list[Doc]]
    heldout: dict[str, list[Doc]]
    fraction: float

    def counts(self) -> dict[str, dict[str, int]]:
        return {c: {"train": len(self.train[c]), "heldout": len(self.heldout[c])}
                for c in self.train}


def split_corpora(corpora: Iterable[str], corpora_dir: str | Path, fraction: float) -> Split:
    """Read ``corpora`` and split each document by the hash of its key."""
    train: dict[str, list[Doc]] = {}
    heldout: dict[str, list[Doc]] = {}
    for corpus in corpora:
        train[corpus], heldout[corpus] = [], []
        for doc in iter_documents(corpus, corpora_dir):
            (heldout if is_heldout(doc.key, fraction) else train)[corpus].append(doc)
    return Split(train, heldout, fraction)


def manifest(split: Split) -> dict:
    """The split as document ids per corpus (the corpus being the held-out label), not texts:
    ``{"heldout": {corpus: [id, ...]}, "train": {corpus: [id, ...]}}``, in file order, each
    ``corpus:id`` once."""

    def ids(part: dict[str, list[Doc]]) -> dict[str, list[str]]:
        return {corpus: list(dict.fromkeys(doc.id for doc in docs)) for corpus, docs in part.items()}

    return {
        "rule": "held out iff int.from_bytes(sha256('corpus:id')[:8], 'big') / 2**64 < fraction",
        "fraction": split.fraction,
        "counts": split.counts(),
        "heldout": ids(split.heldout),
        "train": ids(split.train),
    }


def manifest_keys(data: dict, part: str = "heldout") -> list[str]:
    """``corpus:id`` keys of one part (``"heldout"`` or ``"train"``) of a manifest."""
    return [f"{corpus}:{doc_id}" for corpus, ids in data[part].items() for doc_id in ids]


def write_manifest(split: Split, path: str | Path) -> Path:
    path = Path(path)
    text = json.dumps(manifest(split), ensure_ascii=False, separators=(",", ":"))
    path.write_text(text + "\n", encoding="utf-8")
    return path


def read_manifest(path: str | Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))
