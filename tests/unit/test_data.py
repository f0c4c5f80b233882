"""Documents, windows and their policies."""

from __future__ import annotations

import pytest

from context_neurons.data import (
    DataError,
    Document,
    calibration_text,
    corpora_dir,
    list_corpora,
    tokenize_text,
    tokenize_windows,
)
from context_neurons.models import load_tokenizer

EOT = 50256


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


def doc(n_words: int, i: int = 0) -> Document:
    return Document("test", str(i), " ".join(["word"] * n_words))


def test_corpora_found_and_listed():
    assert "bible_kjv" in list_corpora()
    assert calibration_text().id == "cf01"


def test_missing_corpora_dir_is_a_clear_error(tmp_path):
    with pytest.raises(DataError, match="CONTEXT_NEURONS_CORPORA"):
        corpora_dir(tmp_path / "missing")


def test_unknown_calibration_text():
    with pytest.raises(DataError, match="Unknown calibration text"):
        calibration_text("klingon")


def test_tokenize_text_policy(tokenizer):
    tokens = tokenize_text(tokenizer, "Hello world")
    assert tokens.tolist() == [EOT, 15496, 995]
    with pytest.raises(DataError, match="empty"):
        tokenize_text(tokenizer, "   ")
    with pytest.raises(DataError, match="at most 1024"):
        tokenize_text(tokenizer, " word" * 2000)
    assert len(tokenize_text(tokenizer, " word" * 2000, truncate=True)) == 1024


def test_windows_truncate_split_drop_concat(tokenizer):
    docs = [doc(3000, 0), doc(10, 1), doc(500, 2)]
    windows, labels, report = tokenize_windows(tokenizer, docs, min_tokens=100)
    assert [len(w) for w in windows] == [1024, 501]
    assert all(w[0] == EOT for w in windows)
    assert report.n_truncated == 1 and report.n_dropped_short == 1 and report.n_windows == 2
    windows, labels, report = tokenize_windows(tokenizer, docs, min_tokens=100, long="split")
    assert [len(w) for w in windows] == [1024, 1024, 1 + 3000 - 2 * 1023, 501]
    assert report.n_split == 1 and labels[1] == "test:0#1"
    short_docs = [doc(60, i) for i in range(40)]
    windows, _, report = tokenize_windows(tokenizer, short_docs, min_tokens=100, short="concat")
    assert report.n_concatenated == 40 and len(windows[0]) == 1024
    assert EOT in windows[0][1:].tolist()  # documents separated by <|endoftext|>
    with pytest.raises(DataError, match="min_tokens"):
        tokenize_windows(tokenizer, docs, min_tokens=0)
