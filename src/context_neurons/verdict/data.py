"""The pre-registered protocol's data: the trained model's held-out documents split into CAL and
EVAL halves, unigram distributions from CAL, and EVAL windows that remember their document."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor

from context_neurons import config as settings
from context_neurons.checks import DataError
from context_neurons.training.config import DOMAINS, EOT
from context_neurons.training.corpus import heldout_documents
from context_neurons.training.stream import pack_windows
from context_neurons.training.summary import TrainingRun
from context_neurons.verdict.documents import Unit, corpora_by_domain, corpus_units, hash_value
from context_neurons.verdict.documents import ordered, take_windows
from context_neurons.verdict.protocol import ProtocolV1, load_protocol


#: The CAL/EVAL split's hash prefix (independent of the training split's hash).
CAL_PREFIX = "cal-eval:"


def cal_fraction_value(key: str) -> float:
    """The document's position in ``[0, 1)`` for the CAL/EVAL split (and the EVAL order)."""
    return hash_value(CAL_PREFIX, key)


def is_cal(key: str) -> bool:
    return cal_fraction_value(key) < 0.5


@dataclass
class DomainData:
    """One domain's CAL tokens and EVAL windows.

    Attributes:
        cal_tokens: the CAL documents' tokens (no separators), one tensor.
        cal_windows: up to ``cal_windows_per_domain`` CAL windows (ablation means).
        eval_windows: EVAL windows, ``n_ctx`` tokens, BOS first.
        eval_documents: each EVAL window's document key.
    """

    cal_tokens: Int[Tensor, " n"]
    cal_windows: list[Int[Tensor, " n_ctx"]] = field(default_factory=list)
    eval_windows: list[Int[Tensor, " n_ctx"]] = field(default_factory=list)
    eval_documents: list[str] = field(default_factory=list)


def cal_data(units: list[Unit], n_ctx: int, eot_id: int, n_windows: int) -> DomainData:
    """A domain's CAL tokens (separators left out) and its first ``n_windows`` CAL windows,
    ``units`` concatenated and packed (protocols v1, v2 and v3)."""
    tokens = torch.from_numpy(np.concatenate([u.tokens[1:] for u in units]).astype("int64"))
    packed = pack_windows(np.concatenate([u.tokens for u in units]), n_ctx, eot_id)
    return DomainData(cal_tokens=tokens, cal_windows=[torch.from_numpy(w.astype("int64"))
                                                      for w in packed[:n_windows]])


def protocol_data(
    tokenizer,
    run: TrainingRun,
    protocol: ProtocolV1 | None = None,
    corpora_dir: str | Path | None = None,
    domains: dict[str, tuple[str, ...]] = DOMAINS,
) -> dict[str, DomainData]:
    """Every domain's CAL tokens and windows and EVAL windows (the protocol's ``data``)."""
    spec = (protocol or load_protocol()).data
    corpora_dir = Path(corpora_dir) if corpora_dir else settings.corpora_root()
    if corpora_dir is None or not corpora_dir.is_dir():
        raise DataError(
            "The pre-registered evaluation reads the trained model's held-out documents from the "
            f"offline corpora, not found here (set {settings.CORPORA.name}); online there are none."
        )
    n_ctx = run.config.n_ctx
    eot_id = tokenizer.convert_tokens_to_ids(EOT)
    out: dict[str, DomainData] = {}
    for domain, corpora in sorted(corpora_by_domain(run.trained_on, domains).items()):
        cal, evaluated = [], []
        for corpus in sorted(corpora):
            held = list(heldout_documents(corpus, corpora_dir, run.config.heldout_fraction))
            for unit in corpus_units(corpus, held, tokenizer, eot_id, n_ctx):
                (cal if is_cal(unit.key) else evaluated).append(unit)
        if not cal or not evaluated:
            continue
        data = cal_data(cal, n_ctx, eot_id, spec.cal_windows_per_domain)
        data.eval_windows, data.eval_documents, _ = take_windows(  # units by the hash
            ordered(evaluated, CAL_PREFIX), n_ctx, eot_id, spec.eval_windows_per_document,
            spec.eval_windows_per_domain)
        if data.eval_windows:
            out[domain] = data
    if len(out) < 2:
        raise DataError(f"EVAL windows of fewer than two domains found in {corpora_dir}.")
    return out


def unigram_distributions(
    data: dict[str, DomainData], d_vocab: int
) -> dict[str, Float[Tensor, " d_vocab"]]:
    """``p_D``: each domain's token frequencies in its CAL documents."""
    out = {}
    for domain, item in data.items():
        counts = torch.bincount(item.cal_tokens, minlength=d_vocab).double()
        out[domain] = counts / counts.sum()
    return out


def eval_arrays(data: dict[str, DomainData]) -> tuple[list[Tensor], list[str], list[str]]:
    """All EVAL windows, their domains and their documents, domain by domain."""
    windows, labels, documents = [], [], []
    for domain, item in data.items():
        windows += item.eval_windows
        labels += [domain] * len(item.eval_windows)
        documents += item.eval_documents
    return windows, labels, documents
