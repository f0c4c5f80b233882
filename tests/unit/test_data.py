"""Documents, windows and their policies."""

from __future__ import annotations

import itertools
import sys
import types

import pytest

from context_neurons.checks import DataError
from context_neurons.models import load_tokenizer
from context_neurons.text import corpora as data
from context_neurons.text.corpora import Document, calibration_text, corpora_dir, list_corpora
from context_neurons.text.windows import tokenize_text, tokenize_windows

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


def test_windows_report_counts_dropped_tokens(tokenizer):
    docs = [doc(3000, 0), doc(10, 1), doc(500, 2)]
    _, _, report = tokenize_windows(tokenizer, docs, min_tokens=100)
    assert report.n_tokens == 3510
    assert report.n_tokens_dropped == (3000 - 1023) + 10  # truncated tail and the short document
    _, _, report = tokenize_windows(tokenizer, docs, min_tokens=100, long="split")
    assert report.n_tokens_dropped == 10  # the split tail (954 tokens) is kept
    _, _, report = tokenize_windows(tokenizer, [doc(2100, 0)], min_tokens=100, long="split")
    assert report.n_windows == 2 and report.n_tokens_dropped == 2100 - 2 * 1023
    assert "kept" in str(report)


def test_concatenation_carries_the_remainder(tokenizer):
    short_docs = [doc(60, i) for i in range(40)]  # 40 x 60 tokens + 39 separators = 2439
    windows, labels, report = tokenize_windows(tokenizer, short_docs, min_tokens=100, short="concat")
    assert [len(w) for w in windows] == [1024, 1024, 1 + 2439 - 2 * 1023]
    assert report.n_tokens_dropped == 0
    assert labels[1].startswith("test:")  # a window names the documents it holds


def test_max_windows_must_be_positive(tokenizer):
    with pytest.raises(DataError, match="max_windows"):
        tokenize_windows(tokenizer, [doc(500)], max_windows=0)


def test_domain_documents_offline_and_code():
    from context_neurons.text.corpora import DOMAINS, domain_documents

    first = [d.corpus for d in itertools.islice(domain_documents("bible"), 3)]
    assert first == ["bible_kjv"] * 3
    mixed = [d.corpus for d in itertools.islice(domain_documents("bible", interleave=True), 4)]
    assert mixed == ["bible_kjv", "bible_web"] * 2
    code = list(domain_documents("code"))
    assert code and all(d.corpus == "python_stdlib" and "def " in d.text for d in code)
    assert calibration_text("code").id == "textwrap.py"
    assert "code" in DOMAINS
    with pytest.raises(DataError, match="Unknown domain"):
        domain_documents("klingon")


def test_keyword_density_counts_whole_words_case_insensitively():
    words = {"war", "army"}
    assert data.keyword_density("War, war and the ARMY; warfare is not war.", words) == (
        1000 * 4 / 9)
    assert data.keyword_density("", words) == 0.0
    assert data.keyword_density("the army", ["army"]) == 500.0  # any iterable of keywords


def test_a_shorter_openwebtext_request_is_the_start_of_a_longer_one(monkeypatch, tmp_path):
    """A local Parquet stand-in read through datasets, as the online run reads it: the first
    n documents of a longer read are what a fresh stream of n gives, and a shorter request after
    a longer one opens no stream."""
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    from context_neurons import config

    standin = tmp_path / "openwebtext.parquet"
    pq.write_table(pa.table({"text": [f"document {i} " * (1 + i % 7) for i in range(300)]}),
                   standin, row_group_size=40)
    monkeypatch.setattr(data, "DOMAIN_CANDIDATES", 20)  # the fewest a stream reads
    monkeypatch.setattr(datasets.config, "SLEEP_TIME_ON_THREADS_SHUTDOWN", 0,  # 5 s a stream
                        raising=False)
    monkeypatch.setenv(config.OPENWEBTEXT.name, str(standin))
    opened = []
    load = datasets.load_dataset
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: opened.append(1) or load(*a, **k))
    data.forget_openwebtext()
    try:
        fresh = [d.text for d in data.openwebtext_documents(25, seed=3)]
        data.forget_openwebtext()
        longer = [d.text for d in data.openwebtext_documents(200, seed=3)]
        assert longer[:25] == fresh and len(set(longer)) == 200
        assert [d.text for d in data.openwebtext_documents(25, seed=3)] == fresh
        assert len(opened) == 2  # the last request was a slice
        data.forget_openwebtext()
        assert [d.text for d in data.openwebtext_documents(5, seed=3)] == fresh[:5]
        assert [d.text for d in data.openwebtext_documents(20, seed=3)] == fresh[:20]
        assert len(opened) == 3  # a stream reads DOMAIN_CANDIDATES at least
        everything = data.openwebtext_documents(400, seed=3)  # the stand-in has 300
        assert len(everything) == 300 and len(data.openwebtext_documents(350, seed=3)) == 300
        assert len(opened) == 4  # a stream that ended is not opened again
        assert [d.text for d in data.openwebtext_documents(25, seed=4)] != fresh
        other = tmp_path / "other.parquet"  # another source: its own documents, not a slice
        pq.write_table(pa.table({"text": [f"other {i}" for i in range(50)]}), other)
        monkeypatch.setenv(config.OPENWEBTEXT.name, str(other))
        assert all(d.text.startswith("other") for d in data.openwebtext_documents(25, seed=3))
    finally:
        data.forget_openwebtext()


def test_domain_documents_online_fall_back_to_keyword_dense_openwebtext(monkeypatch):
    fake = [
        data.Document("openwebtext", "0", "The weather was fine and the market rose again today."),
        data.Document("openwebtext", "1", "The troops and the army fought a long battle in the war."),
        data.Document("openwebtext", "2", "Soldiers marched on; the weather was cold."),
    ]
    monkeypatch.setattr(data, "openwebtext_documents", lambda n, seed=0: fake)
    war = list(data.domain_documents("war", source="openwebtext"))
    assert [d.id for d in war] == ["1", "2"]  # densest first, documents without keywords left out
    assert war[0].corpus == "openwebtext~war" and war[0].meta["keyword_density"] > 0
    general = list(data.domain_documents("general", source="openwebtext"))
    assert [d.id for d in general] == ["0", "1", "2"]  # no keywords: the stream as it is


def test_openwebtext_falls_back_to_the_parquet_conversion(monkeypatch):
    calls = []

    class Stream(list):
        def shuffle(self, seed, buffer_size):
            return self

    def load_dataset(path, **kwargs):
        calls.append((path, kwargs))
        if path == "Skylion007/openwebtext":
            raise RuntimeError("Dataset scripts are no longer supported, but found openwebtext.py")
        return Stream([{"text": "one"}, {"text": "two"}])

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    data.forget_openwebtext()
    docs = data.openwebtext_documents(2, seed=123)
    assert [d.text for d in docs] == ["one", "two"]
    assert calls[1][0] == "parquet" and "refs%2Fconvert%2Fparquet" in calls[1][1]["data_files"]["train"]

    def unreachable(path, **kwargs):
        raise ConnectionError("no network")

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=unreachable))
    data.forget_openwebtext()
    with pytest.raises(DataError, match="(?s)no network.*CONTEXT_NEURONS_OPENWEBTEXT"):
        data.openwebtext_documents(2, seed=124)
    data.forget_openwebtext()


def test_strip_markup():
    strip = data.strip_markup
    assert strip("Robert <unk> is an English actor.") == "Robert is an English actor."
    assert strip("<unk> starred in the <unk> <unk> Factory.") == "starred in the Factory."
    assert strip("line\n<unk> Ward was born") == "line\nWard was born"
    assert strip("the M @-@ 82, 1 @.@ 5 m, 5 @,@ 000 men in 1932 @,@\n") == (
        "the M-82, 1.5 m, 5,000 men in 1932,\n"
    )
    assert strip("A plain text, with - and @ signs.") == "A plain text, with - and @ signs."


@pytest.mark.skipif(corpora_dir(required=False) is None, reason="needs the offline corpora")
def test_domain_texts_have_no_wikitext_markup(tokenizer):
    """The domain texts (chapter 5) read WikiText without its markup; every other reader of the
    corpus (the planted model's topics, training, the look-ups) keeps the raw text."""
    from context_neurons.text.windows import domain_texts
    from context_neurons.training.corpus import iter_documents as training_documents

    texts = domain_texts(tokenizer, n=4)
    assert any(label.startswith(data.MARKUP_CORPORA[0]) for label in texts.labels)
    for window, label in zip(texts.windows, texts.labels):
        text = tokenizer.decode(window[1:])
        assert "<unk>" not in text and "@-@" not in text and "@,@" not in text, label
    raw = next(data.iter_documents(data.MARKUP_CORPORA[0]))
    assert "<unk>" in raw.text
    assert next(training_documents(data.MARKUP_CORPORA[0], corpora_dir())).text == raw.text
    stripped = next(data.domain_documents("encyclopedic", without_markup=True))
    assert stripped.id == raw.id and stripped.text == data.strip_markup(raw.text)
    assert next(data.domain_documents("encyclopedic")).text == raw.text  # raw unless asked
