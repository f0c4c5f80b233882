"""Protocol discovery-verdict-gpt2 (issue 52), registered before any GPT-2 number: the file parses,
every required section is there, every value it carries over from v3 equals v3's, its seeds and
hash prefixes are new, its models are the GPT-2 family with Small primary, its data are folders
of the corpora dataset's version, and its frozen exclusion list agrees with its inventory (and,
where the corpora are present, with the documents themselves: counts only, no model)."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from context_neurons import config as settings
from context_neurons.discovery import THETA, TOP_K
from context_neurons.models.loading import GPT2_FAMILY
from context_neurons.reproduce.paper import PAPER_CONTEXTUAL_HEADS
from context_neurons.taxonomy import PREVIOUS_TOKEN_MIN
from context_neurons.text.corpora import CALIBRATION_TEXTS, CODE_MODULES
from context_neurons.text.dataset import load_manifest
from context_neurons.training.config import DOMAINS
from context_neurons.verdict.protocol import protocol_file, read_protocol_file
from context_neurons.verdict.v3_data import CONFIRM_PREFIX

NAME = "discovery-verdict-gpt2.json"
EXCLUDED = "discovery-verdict-gpt2-excluded.json"
RATIONALE = "discovery-verdict-gpt2.md"


@pytest.fixture(scope="module")
def gpt2() -> dict:
    return read_protocol_file(NAME)


@pytest.fixture(scope="module")
def v3() -> dict:
    return read_protocol_file("discovery-verdict-v3.json")


@pytest.fixture(scope="module")
def excluded() -> dict:
    return read_protocol_file(EXCLUDED)


def test_file_parses_and_is_indented_as_v3():
    text = protocol_file(NAME).read_text(encoding="utf-8")
    assert text == json.dumps(json.loads(text), indent=1, ensure_ascii=False) + "\n"


REQUIRED = ("name", "registered", "kind", "question", "primary_comparison", "paper_claim",
            "models", "context_set", "data", "truth", "scores", "baselines", "statistics",
            "bootstrap", "secondary", "verdict", "controls", "when_corpora_absent",
            "where_computed", "runtime", "reporting", "changes_from_v3")


@pytest.mark.parametrize("section", REQUIRED)
def test_every_required_section_exists(gpt2, section):
    assert section in gpt2 and gpt2[section], section


def test_name_registration_and_rationale(gpt2):
    assert gpt2["name"] == "discovery-verdict-gpt2"
    assert gpt2["registered"].startswith("2026-11-28")
    assert "before any GPT-2 number" in gpt2["registered"]
    assert "cannot be loaded" in gpt2["registered"]
    assert protocol_file(RATIONALE).read_text(encoding="utf-8").startswith("# Protocol")
    assert gpt2["rationale"].startswith(RATIONALE)
    changes = gpt2["changes_from_v3"]
    assert isinstance(changes, list) and len(changes) >= 5
    assert all(isinstance(change, str) and ": " in change for change in changes)


def test_the_question_is_v3s_on_gpt2_small(gpt2):
    question = gpt2["question"]
    for words in ("frequency-aware score", "GPT-2 Small", "layer-0 context neurons",
                  "bag of tokens", "|d| without the share", "direct path", "top[j]"):
        assert words in question, words
    assert gpt2["primary_comparison"]["model"] == "gpt2"


def test_truth_thresholds_equal_v3s(gpt2, v3):
    for key in ("min_cohens_d", "min_context_part", "removes_almost_none_below"):
        assert gpt2["truth"][key] == v3["truth"][key], key
    assert gpt2["truth"]["min_cohens_d"] == 1.0 and gpt2["truth"]["min_context_part"] == 0.5


def test_bootstrap_equals_v3s(gpt2, v3):
    for key in ("resamples", "level"):
        assert gpt2["bootstrap"][key] == v3["bootstrap"][key], key
    assert (gpt2["bootstrap"]["resamples"], gpt2["bootstrap"]["level"]) == (2000, 0.95)


def test_verdict_thresholds_equal_v3s(gpt2, v3):
    assert gpt2["verdict"]["min_truth"] == v3["verdict"]["min_truth"] == 30
    for key in ("positive", "negative", "anti_ranking"):
        assert gpt2["verdict"][key] == v3["verdict"][key], key
    primary, primary_v3 = gpt2["primary_comparison"]["verdict"], v3["primary_comparison"]["verdict"]
    assert primary == primary_v3  # labels, their rules and the equivalence margin, word for word
    claim = gpt2["paper_claim"]["verdict"]
    assert (claim["precision_over_base_at_least"]
            == v3["verdict"]["positive"]["precision_over_base_at_least"])


def test_the_four_baselines_are_v3s(gpt2, v3):
    names_v3 = [k for k in v3["baselines"] if k != "registered_with_the_score"]
    assert gpt2["baselines"]["names"] == names_v3
    assert set(names_v3) == {"bag_of_tokens", "d_without_share", "direct_path", "top"}
    for name in names_v3:
        assert gpt2["baselines"][name], name
    assert gpt2["scores"]["primary"] == v3["scores"]["primary"] == "frequency_aware"


def test_data_rules_carried_from_v3(gpt2, v3):
    data, confirm = gpt2["data"], v3["data"]["confirm"]
    assert data["pooling"]["min_units"] == confirm["pooling"]["min_units"] == 20
    assert data["confirm"]["tokens_per_domain"] == confirm["tokens_per_domain"]
    assert data["confirm"]["window_mean_start"] == confirm["window_mean_start"] == 32
    assert data["confirm"]["windows_per_unit"] == max(1, 1024 // data["units"]["n_ctx"])
    assert data["confirm"]["windows_per_domain"] == (data["confirm"]["tokens_per_domain"]
                                                     // data["units"]["n_ctx"])
    assert data["units"]["n_ctx"] == 1024
    assert data["unigram"]["windows_per_domain"] == v3["data"]["cal"]["cal_windows_per_domain"]
    threshold_v3 = v3["context_set"]["taxonomy_fix"]["threshold"]
    assert gpt2["context_set"]["previous_token_threshold"] == threshold_v3 == PREVIOUS_TOKEN_MIN


def test_the_confirmatory_fields_read_this_files_registered_values(gpt2):
    """What the shared v3 machinery reads of this protocol (its
    :class:`~context_neurons.verdict.protocol.ConfirmatoryProtocol` fields) comes from this file,
    those values registered only in words included (issue 51): the sensitivity's thresholds on
    d, the bag's length, the previous-token threshold and the equivalence margin."""
    from context_neurons.verdict.gpt2_protocol import load_protocol_gpt2

    view = load_protocol_gpt2()
    assert "min_cohens_d 0.5 and 2.0" in gpt2["truth"]["sensitivity"]
    assert view.truth.sensitivity_cohens_d == (0.5, 2.0)
    assert (view.truth.min_cohens_d, view.truth.min_context_part) == (
        gpt2["truth"]["min_cohens_d"], gpt2["truth"]["min_context_part"])
    assert "L = min(128, n_ctx)" in gpt2["baselines"]["bag_of_tokens"]
    assert view.bag_length == 128
    assert view.previous_token_threshold == gpt2["context_set"]["previous_token_threshold"]
    assert view.primary.equivalence_margin == gpt2["primary_comparison"]["verdict"][
        "equivalence_margin"] == 0.05
    assert view.primary_score == gpt2["scores"]["primary"] == "frequency_aware"


def _integers(text: str) -> set[int]:
    return {int(n) for n in re.findall(r"\b\d+\b", text)}


def test_seeds_are_new(gpt2, v3):
    ours = set(gpt2["bootstrap"]["seeds"].values()) | set(gpt2["controls"]["seeds"].values())
    assert len(ours) == 5, "five distinct seeds"
    assert f"PCG64({gpt2['bootstrap']['seeds']['unit_draws']})" in gpt2["bootstrap"]["unit_draws"]
    assert (f"PCG64({gpt2['bootstrap']['seeds']['neuron_draws']})"
            in gpt2["bootstrap"]["neuron_draws"])
    for name, seed in gpt2["controls"]["seeds"].items():
        assert str(seed) in gpt2["controls"][name], name
    theirs = (_integers(v3["bootstrap"]["unit_draws"]) | _integers(v3["bootstrap"]["neuron_draws"])
              | _integers(v3["controls"]["neurons_permuted"])
              | _integers(v3["controls"]["random_read_directions"])
              | _integers(v3["controls"]["vocabulary_permuted"])
              | set(range(40, 50)) | {0})  # the label-free arm's restarts; v2's PCG64(0)
    assert {32, 33, 34, 35, 36} <= theirs
    assert not ours & theirs


def test_models_are_the_gpt2_family_small_primary(gpt2):
    models = gpt2["models"]
    named = [k for k, v in models.items() if isinstance(v, dict)]
    assert named == ["gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"] == list(GPT2_FAMILY)
    assert models["primary"] == "gpt2"
    assert [models[m]["role"] for m in named] == ["primary"] + ["replication"] * 3
    assert "not computed here" in models["not_run"]
    assert "never pooled" in models["rule"].lower() or "never pooled" in gpt2["kind"]


def test_hash_prefixes_are_new(gpt2, v3):
    data = gpt2["data"]
    ours = [data["split"]["prefix"], data["confirm"]["order_prefix"],
            data["unigram"]["order_prefix"]]
    assert len(set(ours)) == 3
    assert ours[0] == "gpt2-split:"
    assert f"sha256('{ours[0]}' + document key)" in data["split"]["hash"]
    theirs = {CONFIRM_PREFIX, "cal-eval:"}
    assert CONFIRM_PREFIX in v3["data"]["confirm"]["order"]
    assert "'cal-eval:'" in v3["data"]["cal"]["documents"]
    assert not set(ours) & theirs
    assert data["split"]["unigram_below"] == 0.5


def test_paper_claim_theta_and_rules(gpt2):
    claim = gpt2["paper_claim"]
    assert claim["theta"] == THETA == 6.0
    assert "k 20" in claim["score"] and TOP_K == 20
    assert claim["verdict"]["separates_nothing_fraction"] == 0.9
    assert "base rate by construction" in claim["verdict"]["separates_nothing"]
    assert claim["count_matched"]["n"] == 100
    assert "0, 2, 6, 8, 9, 10" in claim["also_reported"]
    assert tuple(PAPER_CONTEXTUAL_HEADS) == (0, 2, 6, 8, 9, 10)


def test_folders_are_the_corpora_datasets(gpt2):
    corpora = gpt2["data"]["corpora"]
    manifest = load_manifest()
    assert corpora["version"] == manifest["version"] == "1"
    assert set(corpora["folders"]) <= set(manifest["folders"])
    single = {}
    for domain, names in DOMAINS.items():
        for name in names:
            single.setdefault(name, []).append(domain)
    assert sorted(corpora["folders"]) == sorted(c for c, ds in single.items() if len(ds) == 1)


def test_fetch_command_covers_the_folders(gpt2):
    from context_neurons.book.colab import protocol_folders

    absent = gpt2["when_corpora_absent"]
    assert absent["command"] == "python -m context_neurons fetch-corpora --verdicts"
    assert absent["command"] in absent["line"]
    assert set(gpt2["data"]["corpora"]["folders"]) <= set(protocol_folders())


def test_runtime_targets(gpt2):
    assert gpt2["runtime"]["targets"] == {"cpu_2_cores_s": 300, "gpu_s": 60}
    assert "no rule" in gpt2["runtime"]["rule"]


def test_exclusion_list_agrees_with_the_inventory(gpt2, excluded):
    folders = gpt2["data"]["corpora"]["folders"]
    inventory = gpt2["data"]["inventory"]["per_folder"]
    assert list(excluded["documents"]) == folders == list(inventory)
    assert excluded["corpora_version"] == gpt2["data"]["corpora"]["version"]
    total = 0
    for folder, keys in excluded["documents"].items():
        assert keys == sorted(set(keys)) and all(k.startswith(f"{folder}:") for k in keys)
        row = inventory[folder]
        assert len(keys) == row["excluded_read_on_gpt2"], folder
        assert (row["excluded_read_on_gpt2"] + row["unigram_documents"]
                + row["confirm_documents"]) == row["distinct_keys"], folder
        total += len(keys)
    assert total == gpt2["data"]["excluded"]["count"]
    every = {k for keys in excluded["documents"].values() for k in keys}
    for spec in CALIBRATION_TEXTS.values():
        assert f"{spec.corpus}:{spec.doc_id}" in every
    for module in CODE_MODULES:
        assert f"python_stdlib:{module}" in every


def test_pooled_domains_follow_the_counts(gpt2):
    rules, inventory = gpt2["data"], gpt2["data"]["inventory"]
    for domain, row in inventory["per_domain"].items():
        assert row["confirm_windows"] == min(row["confirm_units"],
                                             rules["confirm"]["windows_per_domain"])
        expected = ("no CONFIRM data" if row["confirm_units"] == 0 else
                    "pooled" if row["confirm_units"] >= rules["pooling"]["min_units"]
                    else "not pooled")
        assert row["status"] == expected, domain
    assert set(inventory["per_domain"]) == set(DOMAINS)
    assert len(inventory["pooled"]) >= rules["pooling"]["min_pooled_domains"]


def _split_value(key: str) -> float:
    digest = hashlib.sha256(f"gpt2-split:{key}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def test_split_counts_on_the_documents(gpt2, excluded):
    """Where the corpora are present: the registered document counts of every JSONL folder, and
    the split of its documents by the registered hash (counts only, no tokenizer, no model)."""
    root = settings.corpora_root()
    if root is None or not root.is_dir():
        pytest.skip("the offline corpora are not here")
    from context_neurons.training.corpus import iter_documents

    inventory = gpt2["data"]["inventory"]["per_folder"]
    for folder in gpt2["data"]["corpora"]["folders"]:
        if folder == "python_stdlib" or not (root / folder).is_dir():
            continue
        keys = [doc.key for doc in iter_documents(folder, root)]
        row = inventory[folder]
        assert (len(keys), len(set(keys))) == (row["documents"], row["distinct_keys"]), folder
        free = set(keys) - set(excluded["documents"][folder])
        unigram = sum(_split_value(k) < gpt2["data"]["split"]["unigram_below"] for k in free)
        assert (unigram, len(free) - unigram) == (row["unigram_documents"],
                                                  row["confirm_documents"]), folder


def test_package_data_ships_the_registration():
    """The three files ship with the package: pyproject's package-data patterns match them."""
    import fnmatch
    import tomllib
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    patterns = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["context_neurons"]
    for name in (NAME, EXCLUDED, RATIONALE):
        relative = f"assets/protocol/{name}"
        assert (repo / "src" / "context_neurons" / relative).is_file(), relative
        assert any(fnmatch.fnmatch(relative, p) and p.count("/") == relative.count("/")
                   for p in patterns), (relative, patterns)


def test_readers_are_named_alike_everywhere(gpt2, excluded):
    named = sorted(gpt2["data"]["excluded"]["readers"])
    assert named == excluded["readers"] == sorted(gpt2["data"]["inventory"]["readers"])


def test_the_website_summary_prints_the_lines_chapter_8_recorded(tmp_path, monkeypatch):
    """``verdict_lines`` writes what it computed to ``$CONTEXT_NEURONS_VERDICT_RECORD``;
    ``recorded_lines`` (the job summary) reads them back for that model, without computing
    them again, and computes them for another model or without the record."""
    from context_neurons import config as settings
    from context_neurons.verdict import gpt2

    record = tmp_path / "gpt2-verdict.json"
    monkeypatch.setenv(settings.CORPORA.name, settings.NO_DIRECTORY)  # the quick path: one line
    monkeypatch.setenv(settings.VERDICT_RECORD.name, str(record))
    lines = gpt2.verdict_lines("gpt2")
    assert len(lines) == 1 and "not computed" in lines[0] and record.is_file()
    computed = gpt2.verdict_lines
    monkeypatch.setattr(gpt2, "verdict_lines", lambda name: pytest.fail("computed again"))
    assert gpt2.recorded_lines("gpt2") == lines
    monkeypatch.setattr(gpt2, "verdict_lines", lambda name: ["computed for " + name])
    assert gpt2.recorded_lines("gpt2-medium") == ["computed for gpt2-medium"]
    record.unlink()
    assert gpt2.recorded_lines("gpt2") == ["computed for gpt2"]
    assert computed("gpt2-medium")[0].startswith("gpt2-medium: ")
