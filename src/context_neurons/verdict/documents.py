"""Documents and units, for every protocol (issue 51: v1/v2's ``data``, v3's ``v3_data`` and the
GPT-2 adapter's ``gpt2_data`` each had their own copy): a document key's registered hash, the
corpora of each domain, documents grouped into units (the resampling clusters), units ordered by
a hash and the first windows of each unit taken until a cap."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Int
from torch import Tensor

from context_neurons.training.config import SHORT_DOCUMENT_CORPORA
from context_neurons.training.corpus import Doc
from context_neurons.training.heldout import domain_of_corpus
from context_neurons.training.stream import pack_windows, tokenize_documents

NO_DATA, POOLED, NOT_POOLED = "no CONFIRM data", "pooled", "not pooled"


def hash_value(prefix: str, key: str) -> float:
    """``sha256(prefix + key)``, first 8 bytes big-endian, over ``2**64``: in ``[0, 1)``."""
    digest = hashlib.sha256(f"{prefix}{key}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True)
class Unit:
    """A resampling cluster: consecutive documents of one corpus (``key``: the first one's),
    each ``[<|endoftext|>, tokens...]``, concatenated."""

    key: str
    tokens: Int[np.ndarray, " n"]


def ordered(units: Iterable[Unit], prefix: str) -> list[Unit]:
    """Units by ``hash_value(prefix, unit key)``, ties by key."""
    return sorted(units, key=lambda u: (hash_value(prefix, u.key), u.key))


def corpora_by_domain(trained_on: Iterable[str],
                      domains: dict[str, tuple[str, ...]]) -> dict[str, list[str]]:
    """Each domain's corpora among ``trained_on``, in the order of ``domains``."""
    trained, out = set(trained_on), {}
    for corpus, domain in domain_of_corpus(domains).items():
        if corpus in trained:
            out.setdefault(domain, []).append(corpus)
    return out


def group_units(documents: list[tuple[str, Int[np.ndarray, " _n"]]], n_ctx: int,
                keep_shared_keys: bool = True) -> list[Unit]:
    """``(key, tokens)`` documents, in the order given, grouped until a unit holds at least
    ``n_ctx`` tokens; a last, shorter group is dropped. ``keep_shared_keys``: documents sharing a
    key stay in one unit (v3 and GPT-2; v1/v2's units cut at ``n_ctx`` whatever the keys)."""
    units, current, key = [], [], None
    for i, (doc_key, tokens) in enumerate(documents):
        key = key or doc_key
        current.append(tokens)
        more_of_this_key = (keep_shared_keys and i + 1 < len(documents)
                            and documents[i + 1][0] == doc_key)
        if sum(len(t) for t in current) >= n_ctx and not more_of_this_key:
            units.append(Unit(key, np.concatenate(current)))
            current, key = [], None
    return units


def corpus_units(corpus: str, docs: list[Doc], tokenizer, eot_id: int, n_ctx: int) -> list[Unit]:
    """v1/v2's (and v3's CAL) units of one corpus's documents in key order: one document each,
    short-item corpora grouped into units of at least ``n_ctx`` tokens."""
    docs = sorted(docs, key=lambda d: d.key)
    encoded = tokenize_documents(docs, tokenizer, eot_id)
    if corpus not in SHORT_DOCUMENT_CORPORA:
        return [Unit(d.key, e) for d, e in zip(docs, encoded)]
    return group_units([(d.key, e) for d, e in zip(docs, encoded)], n_ctx, keep_shared_keys=False)


def take_windows(units: Iterable[Unit], n_ctx: int, eot_id: int, per_unit: int,
                 cap: int) -> tuple[list[Int[Tensor, " n_ctx"]], list[str], int]:
    """Units in the order given, each giving its first ``per_unit`` windows of
    :func:`~context_neurons.training.stream.pack_windows`, until ``cap`` windows.

    Returns:
        ``(windows, each window's unit key, units read)``; ``units`` is consumed lazily.
    """
    windows: list[Tensor] = []
    keys: list[str] = []
    read = 0
    for unit in units:
        if len(windows) >= cap:
            break
        packed = pack_windows(unit.tokens, n_ctx, eot_id)[: min(per_unit, cap - len(windows))]
        if len(packed):
            read += 1
        windows += [torch.from_numpy(w.astype("int64")) for w in packed]
        keys += [unit.key] * len(packed)
    return windows, keys, read


def domain_status(units_read: int, min_units: int) -> str:
    """A domain's CONFIRM status: no data, pooled (at least ``min_units`` units read) or not."""
    if units_read == 0:
        return NO_DATA
    return POOLED if units_read >= min_units else NOT_POOLED


__all__ = ["NOT_POOLED", "NO_DATA", "POOLED", "Unit", "corpora_by_domain", "corpus_units",
           "domain_status", "group_units", "hash_value", "ordered", "take_windows"]
