"""Labelled held-out windows of a trained model: the text on which truth is measured from activations.

The split is the training run's own (a document is held out iff the hash of ``corpus:id`` falls
below the run's ``heldout_fraction``, :func:`~context_neurons.training.corpus.is_heldout`), so it is
recomputed from the run's record (:class:`~context_neurons.training.summary.TrainingRun`) and the
corpora alone; no document the model trained on is used.
Each window's label is its corpus's domain (:data:`~context_neurons.training.config.DOMAINS`): a
label the corpora themselves carry, never a word list. A corpus listed under two domains (the
Spanish Bible is Bible and Spanish) is left out, since its windows would count against one of them.
"""

from __future__ import annotations

from pathlib import Path

import torch
from jaxtyping import Int
from torch import Tensor

from context_neurons import config as settings
from context_neurons.checks import DataError
from context_neurons.training.config import DOMAINS, EOT, default_corpora_dir
from context_neurons.training.corpus import heldout_documents
from context_neurons.training.stream import eval_windows, pack_windows, tokenize_corpus
from context_neurons.training.summary import TrainingRun

#: Held-out windows per domain (a fixed, seeded choice among the domain's windows).
PER_DOMAIN = 64


def domain_of_corpus(domains: dict[str, tuple[str, ...]] = DOMAINS) -> dict[str, str]:
    """Each corpus's domain, for the corpora that belong to exactly one domain."""
    owners: dict[str, list[str]] = {}
    for domain, corpora in domains.items():
        for corpus in corpora:
            owners.setdefault(corpus, []).append(domain)
    return {corpus: domains[0] for corpus, domains in owners.items() if len(domains) == 1}


def labelled_windows(
    tokenizer,
    run: TrainingRun,
    corpora_dir: str | Path | None = None,
    per_domain: int = PER_DOMAIN,
    n_ctx: int | None = None,
    domains: dict[str, tuple[str, ...]] = DOMAINS,
) -> tuple[list[Int[Tensor, " n_ctx"]], list[str]]:
    """Held-out windows of every domain (BOS first, ``n_ctx`` tokens) and each one's domain.

    Args:
        tokenizer: the trained model's tokenizer.
        run: the training run (its held-out fraction, corpora and ``n_ctx``).
        corpora_dir: the offline corpora (default: :func:`default_corpora_dir`).
        per_domain: windows per domain, at most.
        n_ctx: window length (default: the run's context).
        domains: domain -> its corpora (default: :data:`DOMAINS`).
    """
    config = run.config
    corpora_dir = Path(corpora_dir) if corpora_dir else default_corpora_dir()
    if not corpora_dir.is_dir():
        raise DataError(
            f"The held-out documents of a trained model are read from the offline corpora, not "
            f"found at {corpora_dir} (set {settings.CORPORA.name}); online there is no held-out "
            "text of this model's training split."
        )
    n_ctx = n_ctx or config.n_ctx
    eot_id = tokenizer.convert_tokens_to_ids(EOT)
    windows: list[Tensor] = []
    labels: list[str] = []
    by_domain: dict[str, list[str]] = {}
    for corpus, domain in domain_of_corpus(domains).items():
        if corpus in run.trained_on:
            by_domain.setdefault(domain, []).append(corpus)
    for domain, corpora in sorted(by_domain.items()):
        docs = [doc for corpus in corpora
                for doc in heldout_documents(corpus, corpora_dir, config.heldout_fraction)]
        packed = pack_windows(tokenize_corpus(docs, tokenizer, eot_id), n_ctx, eot_id)
        chosen = eval_windows(packed, per_domain)
        windows += [torch.from_numpy(w.astype("int64")) for w in chosen]
        labels += [domain] * len(chosen)
    if len(set(labels)) < 2:
        raise DataError(f"Held-out windows of fewer than two domains found in {corpora_dir}.")
    return windows, labels
