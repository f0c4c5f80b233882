"""Token windows for training and evaluation, and the seeded mixture of corpora.

Documents are tokenized, every document preceded by ``<|endoftext|>``, and joined into streams;
a stream is cut into windows of ``n_ctx`` tokens that all start with
``<|endoftext|>`` (BOS at position 0, as in evaluation): a window that begins at a document's
start already has it, one that begins inside a document gets it prepended. Short-item corpora
(fortunes, Pokemon, snippets) are concatenated with their ``<|endoftext|>`` separators into units
of at least half a window (:func:`group_short`).

Training windows come from :class:`DocumentMixture`: streams of whole documents drawn from the
corpora with the mixture weights, so that documents of different domains meet inside a window,
as in GPT-2's training data (held-out windows for evaluation are packed per corpus, one domain
each, with :func:`pack_windows`).
"""

from __future__ import annotations

import numpy as np
import torch

from context_neurons.text.token_store import encode_texts
from context_neurons.training.corpus import Doc


def tokenize_corpus(docs: list[Doc], tokenizer, eot_id: int) -> np.ndarray:
    """``[EOT, doc_1..., EOT, doc_2..., ...]`` as one int32 array."""
    parts = tokenize_documents(docs, tokenizer, eot_id)
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)


def pack_windows(stream: np.ndarray, n_ctx: int, eot_id: int, keep_last: bool = False) -> np.ndarray:
    """Cut ``stream`` into ``[n_windows, n_ctx]`` windows that each start with ``eot_id``.

    A window starting at an ``<|endoftext|>`` of the stream takes ``n_ctx`` stream tokens; any
    other takes ``n_ctx - 1`` after a prepended ``<|endoftext|>``. A final partial window is
    dropped unless ``keep_last`` (then it is padded with ``<|endoftext|>``, for tests only).
    """
    windows = []
    p, n = 0, len(stream)
    while p < n:
        if stream[p] == eot_id:
            take = n_ctx
            chunk = stream[p:p + take]
        else:
            take = n_ctx - 1
            chunk = np.concatenate([[eot_id], stream[p:p + take]])
        p += take
        if len(chunk) < n_ctx:
            if not keep_last:
                break
            chunk = np.concatenate([chunk, np.full(n_ctx - len(chunk), eot_id)])
        windows.append(chunk)
    if not windows:
        return np.zeros((0, n_ctx), dtype=np.int32)
    return np.stack(windows).astype(np.int32)


def tokenize_documents(docs: list[Doc], tokenizer, eot_id: int) -> list[np.ndarray]:
    """Each document as ``[EOT, tokens...]`` (int32; the ids kept on disk once computed:
    :func:`~context_neurons.text.token_store.encode_texts`)."""
    if not docs:
        return []
    eot = np.array([eot_id], dtype=np.int32)
    return [np.concatenate([eot, ids]) for ids in encode_texts([d.text for d in docs], tokenizer)]


def group_short(documents: list[np.ndarray], min_tokens: int) -> list[np.ndarray]:
    """Consecutive documents concatenated into units of at least ``min_tokens`` tokens (their
    ``<|endoftext|>`` separators kept); the last unit may be shorter."""
    units, current, n = [], [], 0
    for doc in documents:
        current.append(doc)
        n += len(doc)
        if n >= min_tokens:
            units.append(np.concatenate(current))
            current, n = [], 0
    if current:
        units.append(np.concatenate(current))
    return units


class DocumentMixture:
    """Training windows cut from ``n_streams`` streams of documents drawn from several corpora.

    Each stream is a sequence of units (a document, or a group of short documents) whose corpus
    is drawn at random with probability proportional to ``weight / mean unit length``, so that
    each corpus's expected share of the training *tokens* is its weight; within a corpus the
    units follow a seeded permutation, a new one each epoch. Documents of different corpora
    therefore meet inside a window, as web documents do in GPT-2's training windows. Row ``r`` of
    every batch continues stream ``r``; every window starts with ``<|endoftext|>`` (see
    :func:`pack_windows`). Deterministic for a seed.
    """

    def __init__(self, units: dict[str, list[np.ndarray]], weights: dict[str, float], seed: int,
                 n_ctx: int, eot_id: int, n_streams: int):
        self.names = [c for c in sorted(units) if weights.get(c, 0) > 0 and units[c]]
        missing = [c for c in weights if weights[c] > 0 and c not in self.names]
        if missing:
            raise ValueError(f"Corpora with a weight but no training document: {missing}")
        mean_len = np.array([np.mean([len(u) for u in units[c]]) for c in self.names])
        w = np.array([weights[c] for c in self.names], dtype=np.float64)
        self.token_share = w / w.sum()
        p = w / mean_len
        self.probs = p / p.sum()
        self.units = units
        self.n_ctx, self.eot_id, self.n_streams = n_ctx, eot_id, n_streams
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.order = {c: self.rng.permutation(len(units[c])) for c in self.names}
        self.cursor = {c: 0 for c in self.names}
        self.units_drawn = {c: 0 for c in self.names}
        self.tokens_drawn = {c: 0 for c in self.names}
        self.buffers = [np.zeros(0, dtype=np.int32) for _ in range(n_streams)]

    def _next_unit(self) -> np.ndarray:
        corpus = self.names[self.rng.choice(len(self.names), p=self.probs)]
        if self.cursor[corpus] >= len(self.order[corpus]):
            self.order[corpus] = self.rng.permutation(len(self.units[corpus]))
            self.cursor[corpus] = 0
        unit = self.units[corpus][self.order[corpus][self.cursor[corpus]]]
        self.cursor[corpus] += 1
        self.units_drawn[corpus] += 1
        self.tokens_drawn[corpus] += len(unit)
        return unit

    def _window(self, row: int) -> np.ndarray:
        buffer = self.buffers[row]
        while len(buffer) < self.n_ctx:
            buffer = np.concatenate([buffer, self._next_unit()])
        if buffer[0] == self.eot_id:
            window, buffer = buffer[:self.n_ctx], buffer[self.n_ctx:]
        else:
            window = np.concatenate([[self.eot_id], buffer[:self.n_ctx - 1]])
            buffer = buffer[self.n_ctx - 1:]
        self.buffers[row] = buffer
        return window

    def batch(self, batch_size: int) -> torch.Tensor:
        if batch_size != self.n_streams:
            raise ValueError(f"This mixture has {self.n_streams} streams, not {batch_size}.")
        rows = [self._window(r) for r in range(self.n_streams)]
        return torch.from_numpy(np.stack(rows).astype(np.int64))

    def state_dict(self) -> dict:
        """Everything that moves as batches are drawn (the generator, each corpus's permutation
        and position, the streams' pending tokens, the counts; arrays as tensors, so that
        ``torch.load(weights_only=True)`` reads it): with :meth:`load_state_dict` on a
        mixture built from the same units, the batches continue exactly as without a pause."""
        return {
            "rng": self.rng.bit_generator.state,
            "order": {c: torch.from_numpy(self.order[c].copy()) for c in self.names},
            "cursor": dict(self.cursor),
            "units_drawn": dict(self.units_drawn),
            "tokens_drawn": dict(self.tokens_drawn),
            "buffers": [torch.from_numpy(b.copy()) for b in self.buffers],
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue from :meth:`state_dict` (same corpora, units and number of streams)."""
        if sorted(state["order"]) != self.names or len(state["buffers"]) != self.n_streams:
            raise ValueError("This mixture state belongs to other corpora or another batch size.")
        self.rng.bit_generator.state = state["rng"]
        self.order = {c: np.asarray(state["order"][c].numpy()) for c in self.names}
        self.cursor = dict(state["cursor"])
        self.units_drawn = dict(state["units_drawn"])
        self.tokens_drawn = dict(state["tokens_drawn"])
        self.buffers = [b.numpy().astype(np.int32) for b in state["buffers"]]

    def epochs_seen(self) -> dict[str, float]:
        """Units drawn from each corpus, in epochs of that corpus."""
        return {c: self.units_drawn[c] / len(self.units[c]) for c in self.names}

    def tokens_seen_share(self) -> dict[str, float]:
        """Each corpus's share of the tokens drawn so far (the weights, up to sampling noise)."""
        total = max(sum(self.tokens_drawn.values()), 1)
        return {c: self.tokens_drawn[c] / total for c in self.names}


def eval_windows(windows: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """``k`` windows spread over a held-out stream (a fixed seeded choice, sorted)."""
    if len(windows) <= k:
        return windows
    rng = np.random.Generator(np.random.PCG64(seed))
    return windows[np.sort(rng.choice(len(windows), size=k, replace=False))]
