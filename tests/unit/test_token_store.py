"""Token ids kept on disk (:mod:`context_neurons.text.token_store`): read back only for the same
texts and tokenizer, equal to tokenizing again, and computed again when the file is damaged."""

from __future__ import annotations

import numpy as np
import pytest

from context_neurons import config
from context_neurons.text import token_store as ts
from context_neurons.models.loading import load_tokenizer

TEXTS = ["The Lord is my shepherd; I shall not want. " * 2000, "", "def f(x):\n    return x\n" * 2000]


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(config.CACHE.name, str(tmp_path))
    return tmp_path


def fresh(texts, tokenizer):
    return [np.array(e.ids, dtype=np.int32) for e in
            tokenizer.backend_tokenizer.encode_batch(texts, add_special_tokens=False)]


def test_stored_ids_equal_tokenizing_again_and_are_read_back(cache, tokenizer, monkeypatch):
    first = ts.encode_texts(TEXTS, tokenizer)
    path = ts.store_path(TEXTS, tokenizer)
    assert path.exists() and path.parent.parent == cache
    expected = fresh(TEXTS, tokenizer)
    assert len(first) == 3 and all(np.array_equal(a, b) for a, b in zip(first, expected))
    monkeypatch.setattr(ts, "_encode", lambda texts, tok: pytest.fail("tokenized again"))
    again = ts.encode_texts(TEXTS, tokenizer)
    assert all(np.array_equal(a, b) and a.dtype == np.int32 for a, b in zip(again, expected))


def test_other_texts_or_order_use_another_file(cache, tokenizer):
    assert ts.store_path(TEXTS, tokenizer) != ts.store_path(TEXTS[::-1], tokenizer)
    assert ts.store_path(TEXTS, tokenizer) != ts.store_path([TEXTS[0] + TEXTS[1], TEXTS[2]],
                                                           tokenizer)
    assert ts.texts_digest(["ab", "c"]) != ts.texts_digest(["a", "bc"])


@pytest.mark.parametrize("damage", [b"", b"not a zip file", "wrong count"])
def test_a_damaged_file_is_computed_again(cache, tokenizer, damage):
    path = ts.store_path(TEXTS, tokenizer)
    path.parent.mkdir(parents=True, exist_ok=True)
    if damage == "wrong count":
        ts._write(path, fresh(TEXTS[:2], tokenizer))
    else:
        path.write_bytes(damage)
    out = ts.encode_texts(TEXTS, tokenizer)
    assert all(np.array_equal(a, b) for a, b in zip(out, fresh(TEXTS, tokenizer)))
    assert ts._read(path, len(TEXTS)) is not None  # replaced whole


def test_short_texts_are_not_stored(cache, tokenizer):
    out = ts.encode_texts(["a short text"], tokenizer)
    assert np.array_equal(out[0], fresh(["a short text"], tokenizer)[0])
    assert not (cache / "tokens").exists()
