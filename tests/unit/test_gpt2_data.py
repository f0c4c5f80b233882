"""Protocol discovery-verdict-gpt2's typed rules and data source (issue 52): the rules parsed
once from the registered file equal its values; the split, the exclusions and the units follow
the registered rules on small documents; the corpora absent give the protocol's one line; a code
folder other than the manifest's is a data error; on the offline corpora (slow) every domain's
units, windows and status equal the registered inventory's."""

from __future__ import annotations

import numpy as np
import pytest

from context_neurons import config as settings
from context_neurons.checks import DataError
from context_neurons.verdict.gpt2_data import (
    CONFIRM,
    UNIGRAM,
    code_documents,
    corpora_absent,
    hash_value,
    side_of,
    split_units,
)
from context_neurons.verdict.gpt2_protocol import excluded_keys, load_protocol_gpt2
from context_neurons.verdict.protocol import read_protocol_file


@pytest.fixture(scope="module")
def raw() -> dict:
    return read_protocol_file("discovery-verdict-gpt2.json")


def test_rules_equal_the_file(raw):
    p = load_protocol_gpt2()
    data = raw["data"]
    assert p.data.folders == tuple(data["corpora"]["folders"])
    assert p.data.code_folder == "python_stdlib" and p.data.version == "1"
    assert (p.data.split_prefix, p.data.unigram_below) == ("gpt2-split:", 0.5)
    assert p.data.confirm.order_prefix == data["confirm"]["order_prefix"] == "confirm-gpt2:"
    assert p.data.unigram.order_prefix == data["unigram"]["order_prefix"] == "unigram-gpt2:"
    assert (p.data.confirm.windows_per_domain, p.data.unigram.windows_per_domain) == (50, 64)
    assert p.data.unigram.tokens_per_domain == data["unigram"]["tokens_per_domain"] == 262144
    assert (p.data.n_ctx, p.data.windows_per_unit, p.data.min_units) == (1024, 1, 20)
    assert p.seeds.units == raw["bootstrap"]["seeds"]["unit_draws"] == 5201
    assert p.seeds.neurons == raw["bootstrap"]["seeds"]["neuron_draws"] == 5202
    assert (p.seeds.permutation, p.seeds.random_directions, p.seeds.vocabulary) == tuple(
        raw["controls"]["seeds"][k] for k in ("neurons_permuted", "random_read_directions",
                                              "vocabulary_permuted"))
    assert (p.bootstrap.resamples, p.bootstrap.level) == (raw["bootstrap"]["resamples"],
                                                          raw["bootstrap"]["level"])
    assert p.verdict.min_truth == raw["verdict"]["min_truth"]
    assert p.truth.min_cohens_d == raw["truth"]["min_cohens_d"]
    assert p.paper_claim.theta == raw["paper_claim"]["theta"]
    assert p.paper_claim.count_matched_n == raw["paper_claim"]["count_matched"]["n"]
    assert p.paper_claim.thetas == (3, 4, 5, 6, 8, 10, 15, 20, 30, 50)
    assert p.paper_claim.paper_heads == (0, 2, 6, 8, 9, 10)
    assert p.models == ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl")
    assert p.primary_model == "gpt2"
    assert len(excluded_keys()) == raw["data"]["excluded"]["count"]


def test_split_hash_is_the_registered_one():
    rules = load_protocol_gpt2().data
    import hashlib

    key = "bible_kjv:Genesis 2"
    value = int.from_bytes(hashlib.sha256(b"gpt2-split:" + key.encode()).digest()[:8],
                           "big") / 2**64
    assert hash_value("gpt2-split:", key) == value
    assert side_of(key, rules) == (UNIGRAM if value < 0.5 else CONFIRM)


def _doc(n: int) -> np.ndarray:
    return np.array([50256] + [1] * (n - 1), dtype=np.int32)


def test_units_leave_out_excluded_keys_and_keep_shared_keys_together():
    rules = load_protocol_gpt2().data
    keys = [f"f:{i:03d}" for i in range(40)]
    confirm = [k for k in keys if side_of(k, rules) == CONFIRM]
    shared = confirm[0]
    documents = [(k, _doc(600)) for k in keys] + [(shared, _doc(600))]
    excluded = frozenset({confirm[1]})
    units = split_units(documents, excluded, rules)
    confirm_keys_in_units = [u.key for u in units[CONFIRM]]
    assert confirm[1] not in confirm_keys_in_units
    assert all(side_of(u.key, rules) == CONFIRM for u in units[CONFIRM])
    assert all(side_of(u.key, rules) == UNIGRAM for u in units[UNIGRAM])
    # the shared key's two documents (1200 tokens) make one unit of their own
    assert units[CONFIRM][0].key == shared and len(units[CONFIRM][0].tokens) == 1200
    assert all(len(u.tokens) >= rules.n_ctx for side in units.values() for u in side)


@pytest.fixture
def corpora():
    """The offline corpora directory (skipped without it)."""
    root = settings.corpora_root()
    if root is None or not root.is_dir():
        pytest.skip("the offline corpora are not here")
    return root


def _another_library(folder, monkeypatch):
    """Point the code folder (``$CONTEXT_NEURONS_CODE``) at a library of one file, not the
    manifest's 1790."""
    folder.mkdir()
    (folder / "textwrap.py").write_text("x = 1\n")
    monkeypatch.setenv(settings.CODE.name, str(folder))


def test_corpora_absent_is_the_protocols_line(tmp_path, monkeypatch):
    rules = load_protocol_gpt2().data
    _another_library(tmp_path / "library", monkeypatch)
    (tmp_path / "corpora").mkdir()
    absent = corpora_absent("gpt2-medium", rules, root=tmp_path / "corpora")
    assert absent is not None
    line = absent.line()
    assert absent.folders == rules.folders  # the code folder too: another file list there
    assert "<" not in line and ">" not in line
    expected = (f"gpt2-medium: discovery-verdict-gpt2 not computed: the offline corpora (corpora "
                f"dataset version 1, folders {', '.join(rules.folders)}) were not found in "
                f"{tmp_path / 'corpora'} ($CONTEXT_NEURONS_CORPORA); fetch them with `python -m "
                "context_neurons fetch-corpora --verdicts` (or `--only "
                f"{' '.join(rules.folders)}`) and run again")
    assert line == expected == str(absent)


def test_corpora_present_are_not_absent(corpora):
    assert corpora_absent("gpt2", load_protocol_gpt2().data, root=corpora) is None


def test_another_code_folder_is_named_with_its_fetch_command(corpora, tmp_path, monkeypatch):
    """The code folder is checked as :func:`code_documents` reads it (another file list there
    stopped the evaluation mid-run with a DataError before): it is named, and fetched by the
    line's ``--only``."""
    rules = load_protocol_gpt2().data
    _another_library(tmp_path / "library", monkeypatch)
    absent = corpora_absent("gpt2", rules, root=corpora)
    assert absent is not None and absent.folders == (rules.code_folder,) == ("python_stdlib",)
    assert absent.line().endswith("(or `--only python_stdlib`) and run again")


def test_one_folder_missing_only_it_is_named(corpora, tmp_path):
    """A corpora directory of the real one's folders (symlinked) without one small folder."""
    rules = load_protocol_gpt2().data
    gone = "pokemon_showdown"
    root = tmp_path / "corpora"
    root.mkdir()
    for folder in corpora.iterdir():
        if folder.is_dir() and folder.name != gone:
            (root / folder.name).symlink_to(folder, target_is_directory=True)
    absent = corpora_absent("gpt2", rules, root=root)
    assert absent is not None and absent.folders == (gone,)
    assert f"were not found in {root} " in absent.line()
    assert absent.line().endswith(f"(or `--only {gone}`) and run again")


def test_another_standard_library_is_a_data_error(tmp_path, monkeypatch):
    _another_library(tmp_path / "library", monkeypatch)
    with pytest.raises(DataError, match=r"has 1 files, not the manifest's 1790"):
        code_documents(load_protocol_gpt2().data)


@pytest.mark.slow
def test_domains_match_the_registered_inventory(raw):
    """About two minutes on one core (tokenizing every registered folder)."""
    root = settings.corpora_root()
    if root is None or not root.is_dir():
        pytest.fail("the offline corpora are needed: python -m context_neurons fetch-corpora "
                    "--verdicts")
    from context_neurons.models.loading import load_tokenizer
    from context_neurons.verdict.gpt2_data import gpt2_data

    rules = load_protocol_gpt2().data
    data = gpt2_data(load_tokenizer(), rules)
    inventory = raw["data"]["inventory"]["per_domain"]
    assert set(data.confirm) == set(inventory)
    for name, row in inventory.items():
        c = data.confirm[name]
        assert (c.own_units, data.unigram_units[name], len(c.windows), c.status) == (
            row["confirm_units"], row["unigram_units"], row["confirm_windows"], row["status"]), name
    assert data.pooled == raw["data"]["inventory"]["pooled"]
    excluded = excluded_keys()
    for name in data.pooled:
        assert all(w.shape == (rules.n_ctx,) and int(w[0]) == 50256
                   for w in data.confirm[name].windows)
        assert not set(data.confirm[name].window_units) & excluded
        assert all(side_of(k, rules) == CONFIRM for k in data.confirm[name].window_units)
        assert all(side_of(u.key, rules) == UNIGRAM for u in data.cal_units[name])
        assert len(data.cal[name].cal_windows) <= rules.unigram.windows_per_domain
        tokens = data.unigram_tokens[name]
        assert tokens >= rules.unigram.tokens_per_domain or len(data.cal_units[name]) == \
            data.unigram_units[name], name
        assert not (data.cal[name].cal_tokens == 50256).any()
