"""A GPT-2-like byte-level BPE tokenizer trained on the training split only.

Byte-level pre-tokenizer without a prefix space (GPT-2's regex), byte-level decoder, no
normaliser, and ``<|endoftext|>`` as the one special token, with the last id (as GPT-2's 50256 is
the last of its 50257). It is saved as a Hugging Face fast tokenizer whose ``bos_token``,
``eos_token`` and ``unk_token`` are ``<|endoftext|>``; like GPT-2's, it adds no BOS by itself.

A run can also reuse a tokenizer instead of training one (``--tokenizer DIR``): a saved one
(``tokenizer.json``), or GPT-2's own from its ``vocab.json`` and ``merges.txt`` (50,257 ids,
``<|endoftext|>`` the last), read into the same byte-level BPE and wrapper.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Iterator

from tokenizers import ByteLevelBPETokenizer
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from context_neurons.training.config import EOT
from context_neurons.training.corpus import Doc, split_value


def training_texts(train: dict[str, list[Doc]], chars_per_corpus: int) -> Iterator[str]:
    """Training documents of each corpus, in hash order, up to ``chars_per_corpus`` characters
    of each corpus, so that large corpora do not take the whole vocabulary."""
    for corpus in sorted(train):
        total = 0
        for doc in sorted(train[corpus], key=lambda d: split_value("tokenizer:" + d.key)):
            if total >= chars_per_corpus:
                break
            yield doc.text
            total += len(doc.text)


def train_tokenizer(texts: Iterable[str], vocab_size: int = 8192, model_max_length: int = 1024):
    """Train a byte-level BPE of ``vocab_size`` ids (the last one ``<|endoftext|>``); fewer when
    the texts do not hold enough pairs seen twice."""

    bpe = ByteLevelBPETokenizer(add_prefix_space=False, trim_offsets=True)
    bpe.train_from_iterator(texts, vocab_size=vocab_size - 1, min_frequency=2,
                            show_progress=False, special_tokens=[])
    tokenizer = _wrap(bpe, model_max_length)
    check_tokenizer(tokenizer, vocab_size)
    return tokenizer


def gpt2_files_tokenizer(directory: str | Path, model_max_length: int = 1024):
    """GPT-2's tokenizer from a directory holding its ``vocab.json`` and ``merges.txt`` (as
    ``shared/gpt2-tokenizer``), in the wrapper :func:`train_tokenizer` returns."""
    directory = Path(directory)
    bpe = ByteLevelBPETokenizer.from_file(str(directory / "vocab.json"),
                                          str(directory / "merges.txt"),
                                          add_prefix_space=False, trim_offsets=True)
    return _wrap(bpe, model_max_length)


def _wrap(bpe: ByteLevelBPETokenizer, model_max_length: int) -> PreTrainedTokenizerFast:
    """A byte-level BPE with ``<|endoftext|>`` as its one special token (added as the last id
    unless the vocabulary holds it), as a Hugging Face fast tokenizer."""
    bpe.add_special_tokens([EOT])
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe._tokenizer,
        bos_token=EOT, eos_token=EOT, unk_token=EOT,
        model_max_length=model_max_length, clean_up_tokenization_spaces=False,
    )


def check_tokenizer(tokenizer, vocab_size: int | None = None) -> None:
    """What the rest of the project relies on; raises ValueError otherwise."""
    eot = tokenizer.convert_tokens_to_ids(EOT)
    problems = []
    if tokenizer.bos_token != EOT or tokenizer.eos_token != EOT:
        problems.append(f"bos/eos are {tokenizer.bos_token!r}/{tokenizer.eos_token!r}")
    if eot != len(tokenizer) - 1:
        problems.append(f"{EOT} has id {eot}, not the last of {len(tokenizer)}")
    if vocab_size is not None and len(tokenizer) > vocab_size:
        problems.append(f"{len(tokenizer)} ids, more than {vocab_size}")
    if tokenizer.encode(EOT) != [eot]:
        problems.append(f"{EOT} encodes to {tokenizer.encode(EOT)}")
    if len(tokenizer.encode(" the")) != 1:
        problems.append(f"' the' is not one token: {tokenizer.encode(' the')}")
    if problems:
        raise ValueError("Tokenizer: " + "; ".join(problems))


def load_tokenizer(path: str | Path):
    """A saved tokenizer (``tokenizer.json``), else GPT-2's from ``vocab.json`` and
    ``merges.txt`` (:func:`gpt2_files_tokenizer`), checked for what the project relies on
    (:func:`check_tokenizer`)."""
    path = Path(path)
    is_gpt2_files = (not (path / "tokenizer.json").is_file() and (path / "vocab.json").is_file()
                     and (path / "merges.txt").is_file())
    tokenizer = gpt2_files_tokenizer(path) if is_gpt2_files else AutoTokenizer.from_pretrained(
        str(path))
    check_tokenizer(tokenizer)
    return tokenizer
