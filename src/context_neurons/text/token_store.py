"""Token ids kept on disk. This module stores what a tokenizer made of a list of texts.

Tokenizing the corpora is the slow part of reading them (about 40 s of the GPT-2 protocol's data
on two cores), and every run of the main job, chapter 8 and the tests tokenizes the same texts
with the same tokenizer. :func:`encode_texts` keeps each result in the cache directory
(``$CONTEXT_NEURONS_CACHE``, :func:`~context_neurons.config.cache_dir`) under the SHA-256 of the
tokenizer (its whole serialised form) and of the texts, so a file is only ever read back for
exactly the texts and tokenizer that made it. Files are written whole; one that cannot be read
back, or does not match the texts' count and lengths it records, is computed again and replaced.
"""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import numpy as np

from context_neurons.caching import IdentityCache
from context_neurons.config import cache_dir
from context_neurons.files import write_whole

#: Texts shorter than this in all are tokenized every time (well under a second; no small files).
STORE_MIN_CHARS = 100_000
_DIGESTS = IdentityCache(size=8)


def tokenizer_digest(tokenizer) -> str:
    """SHA-256 of the fast tokenizer's serialised form (vocabulary, merges, normaliser...)."""
    return _DIGESTS.get((tokenizer,), (), lambda: hashlib.sha256(
        tokenizer.backend_tokenizer.to_str().encode()).hexdigest())


def texts_digest(texts: list[str]) -> str:
    """SHA-256 of the texts in order (each prefixed by its length, so none can run into the
    next)."""
    digest = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def store_path(texts: list[str], tokenizer) -> Path:
    """Where :func:`encode_texts` keeps the ids of ``texts`` under ``tokenizer``."""
    key = hashlib.sha256(f"{tokenizer_digest(tokenizer)}:{texts_digest(texts)}".encode())
    return cache_dir() / "tokens" / f"{key.hexdigest()[:32]}.npz"


def _read(path: Path, n_texts: int) -> list[np.ndarray] | None:
    """The stored ids, or None when the file is missing, unreadable or not of ``n_texts``."""
    try:
        with np.load(path, allow_pickle=False) as stored:
            ids, lengths = stored["ids"], stored["lengths"]
    except (OSError, EOFError, ValueError, KeyError, AttributeError, zipfile.BadZipFile):
        return None
    if len(lengths) != n_texts or int(lengths.sum()) != len(ids) or (lengths < 0).any():
        return None
    return np.split(ids, np.cumsum(lengths)[:-1]) if n_texts else []


def _write(path: Path, encoded: list[np.ndarray]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lengths = np.array([len(e) for e in encoded], dtype=np.int64)
    ids = np.concatenate(encoded).astype(np.int32) if encoded else np.zeros(0, np.int32)

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as handle:
            np.savez(handle, ids=ids, lengths=lengths)

    write_whole(path, write)


def encode_texts(texts: list[str], tokenizer) -> list[np.ndarray]:
    """Each text's token ids (int32, no special tokens added): the fast tokenizer's
    ``encode_batch``, read back from the cache directory when these texts were tokenized
    before by this tokenizer (texts of :data:`STORE_MIN_CHARS` characters or more in all)."""
    if sum(map(len, texts)) < STORE_MIN_CHARS:
        return _encode(texts, tokenizer)
    path = store_path(texts, tokenizer)
    stored = _read(path, len(texts))
    if stored is not None:
        return stored
    encoded = _encode(texts, tokenizer)
    _write(path, encoded)
    return encoded


def _encode(texts: list[str], tokenizer) -> list[np.ndarray]:
    """The ids of every text. ``encode_batch_fast`` (tokenizers >= 0.20, the package's floor)
    leaves out the character offsets nothing here reads: the same ids as ``encode_batch``."""
    batch = tokenizer.backend_tokenizer.encode_batch_fast(texts, add_special_tokens=False)
    return [np.array(e.ids, dtype=np.int32) for e in batch]


__all__ = ["STORE_MIN_CHARS", "encode_texts", "store_path", "texts_digest", "tokenizer_digest"]
