"""The planted model's topics: word lists split into a planting half and a label half, and graded
topic loadings of the whole vocabulary from the offline corpora.

Planting uses one half of each word list (a fixed hash split, :func:`split_word`); every label,
measurement and exercise uses the other half. A label word carries a topic only as far as the
corpora tie it to the planting words (:func:`corpus_topic_association`).
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import torch

from context_neurons.models.planted_plan import (
    CHUNK_TOKENS,
    CORPUS_CHARS,
    D_VOCAB,
    RATIO_FULL,
    RATIO_START,
)
from context_neurons.text.corpora import iter_documents
from context_neurons.text.topics import (
    BUILTIN_TOPICS,
    read_gb_us_pairs,
    single_token_variants,
)


def split_word(topic: str, word: str) -> str:
    """``"planting"`` or ``"label"``: a fixed hash of the topic and the lower-cased word."""
    digest = hashlib.sha256(f"{topic}|{word.lower()}".encode()).digest()
    return "label" if digest[0] % 2 else "planting"


def topic_word_halves(tokenizer, corpora=None) -> tuple[dict, str]:
    """The planting and label halves of every word list: ``{half: {topic: {variant: id}}}``.

    British and American spellings are split by pair (hash of the British spelling), so each half
    holds whole pairs; a pair is kept when both spellings (in one case) are single tokens. A token
    planted in any topic is removed from every label half, so labels are never planted directly.

    Returns:
        ``(halves, gb_us_source)``.
    """
    pairs, source = read_gb_us_pairs(Path(corpora) / "wordlists_en_gb_us" if corpora else None)
    halves: dict[str, dict[str, dict[str, int]]] = {"planting": {}, "label": {}}
    for half in halves.values():
        half["british"], half["american"] = {}, {}
    for gb, us in pairs:
        half = halves[split_word("gb_us", gb)]
        for case in (str, str.capitalize):
            gb_ids = tokenizer.encode(f" {case(gb)}", add_special_tokens=False)
            us_ids = tokenizer.encode(f" {case(us)}", add_special_tokens=False)
            if len(gb_ids) == 1 and len(us_ids) == 1 and gb_ids != us_ids:
                half["british"][f" {case(gb)}"] = gb_ids[0]
                half["american"][f" {case(us)}"] = us_ids[0]
    for topic, words in BUILTIN_TOPICS.items():
        for half in halves.values():
            half.setdefault(topic, {})
        for word in words:
            halves[split_word(topic, word)][topic].update(single_token_variants([word], tokenizer))
    planted_ids = {i for topic in halves["planting"].values() for i in topic.values()}
    for topic, words in halves["label"].items():
        halves["label"][topic] = {w: i for w, i in words.items() if i not in planted_ids}
    return halves, source


# ----------------------------------------------------------------------------------------------
# Corpus association (the label half's only route to a topic)
# ----------------------------------------------------------------------------------------------

_CORPUS_CACHE: dict[tuple, torch.Tensor] = {}


def corpus_tokens(tokenizer, corpora) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens of the first :data:`CORPUS_CHARS` characters of every corpus folder, in chunks.

    Returns ``(tokens, chunk_of_token)``; cached per tokenizer and directory.
    """
    key = (id(tokenizer), str(corpora))
    if key in _CORPUS_CACHE:
        return _CORPUS_CACHE[key]
    texts = []
    for folder in sorted(Path(corpora).iterdir()):
        if not folder.is_dir() or folder.name.startswith("wordlists"):
            continue
        n_chars = 0
        for document in iter_documents(folder.name, corpora):
            texts.append(document.text[: CORPUS_CHARS - n_chars])
            n_chars += len(texts[-1])
            if n_chars >= CORPUS_CHARS:
                break
    encoded = tokenizer(texts, add_special_tokens=False)["input_ids"]
    tokens, chunks, n_chunks = [], [], 0
    for ids in encoded:
        for start in range(0, len(ids), CHUNK_TOKENS):
            piece = ids[start : start + CHUNK_TOKENS]
            if len(piece) >= 16:
                tokens.append(torch.tensor(piece))
                chunks.append(torch.full((len(piece),), n_chunks))
                n_chunks += 1
    result = (torch.cat(tokens), torch.cat(chunks))
    _CORPUS_CACHE[key] = result
    return result


def corpus_topic_association(
    tokenizer, corpora, seeds: dict[str, list[int]], exclude: list[int]
) -> tuple[torch.Tensor, dict[str, dict]]:
    """Graded topic loadings of the whole vocabulary from the corpora, ``[d_vocab, n_topics]``.

    For each chunk of :data:`CHUNK_TOKENS` tokens, the density of a topic's planting tokens; a
    token's association is the mean density of the chunks it occurs in (its own occurrences not
    counted) over the mean density of all chunks. The loading rises from 0 at a ratio of
    :data:`RATIO_START` to 1 at the median ratio of the topic's planting words (at most
    :data:`RATIO_FULL`; log scale), shrunk for rare tokens (``count / (count + 4)``).
    """
    topics = list(seeds)
    if corpora is None or not Path(corpora).is_dir():
        return torch.zeros(D_VOCAB, len(topics), dtype=torch.float64), {}
    tokens, chunk = corpus_tokens(tokenizer, corpora)
    mask = torch.zeros(D_VOCAB, len(topics))
    for k, topic in enumerate(topics):
        mask[seeds[topic], k] = 1.0
    n_chunks = int(chunk.max()) + 1
    length = torch.zeros(n_chunks).index_add_(0, chunk, torch.ones(len(tokens)))
    density = torch.zeros(n_chunks, len(topics)).index_add_(0, chunk, mask[tokens])
    density = density / length[:, None]
    own = mask[tokens] / length[chunk][:, None]
    value = density[chunk] - own
    count = torch.zeros(D_VOCAB).index_add_(0, tokens, torch.ones(len(tokens)))
    total = torch.zeros(D_VOCAB, len(topics)).index_add_(0, tokens, value)
    mean_density = (density * length[:, None]).sum(0) / length.sum()
    ratio = (total / count.clamp(min=1)[:, None]) / mean_density.clamp(min=1e-9)
    # Full loading at the association of a typical planting word of the topic (a topic whose
    # corpora are a large share of the text, like Spanish, cannot reach high ratios).
    full = torch.tensor([
        float(ratio[seeds[t], k][count[seeds[t]] >= 3].median()) if (count[seeds[t]] >= 3).any()
        else RATIO_FULL for k, t in enumerate(topics)]).nan_to_num(RATIO_FULL)
    full = full.clamp(min=RATIO_START + 1, max=RATIO_FULL)
    start = math.log(RATIO_START)
    ramp = (ratio.clamp(min=1e-9).log() - start) / (full.log() - start)
    loading = ramp.clamp(0, 1) * (count / (count + 4.0))[:, None]
    loading[count < 2] = 0.0
    loading[exclude] = 0.0
    loading = loading.double()
    stats = {
        topic: {"tokens with loading > 0.1": int((loading[:, k] > 0.1).sum()),
                "mean chunk density": float(mean_density[k]), "full ratio": float(full[k])}
        for k, topic in enumerate(topics)
    }
    stats["corpus"] = {"tokens": len(tokens), "chunks": n_chunks}
    return loading, stats


