"""Protocol discovery-verdict-gpt2 end to end on the 12-layer GPT-2-shaped stand-in (issue 52):
GPT-2's tokenizer and GPT-2 Small's layer-0 sizes (planted layers 0-1, random layers above),
loaded as the website loads GPT-2 (``CONTEXT_NEURONS_MODEL=gpt2``) with its weights from
``$CONTEXT_NEURONS_GPT2``, on the offline corpora. Checked: the result's structure, the pooled
domains and their units equal the registered inventory's, the stand-in is labelled a plumbing
check everywhere (never GPT-2's result), the JSON round trip, the main job's rows, and the
protocol's line without the corpora.

To finish in a few minutes on one core, the evaluation reads three of the registered folders
(:data:`FOLDERS`: three pooled domains, every registered rule otherwise unchanged, 200
resamples): a plumbing check, as every stand-in result is. The whole data source on every
folder is checked against the inventory in ``test_gpt2_data.py`` and timed with the whole
evaluation in ``benchmarks/verdict_gpt2.py``."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from context_neurons import config as settings
from context_neurons.verdict.gpt2_data import CorporaAbsent
from context_neurons.verdict.gpt2_protocol import load_protocol_gpt2
from context_neurons.verdict.gpt2_result import PLUMBING, PRIMARY, REPLICATION, GPT2Evaluation
from context_neurons.verdict.gpt2_result import ModelIdentity, model_identity
from context_neurons.verdict.paper_claim import ClaimLabel
from context_neurons.verdict.baselines import BASELINES

REPO = Path(__file__).resolve().parents[2]
RESAMPLES = 200  # a quick look: the registered 2000 are the benchmark's (benchmarks/)
#: The folders read here, one domain each (Pokemon, speeches, Spanish), all of them pooled.
FOLDERS = ("pokemon_showdown", "nltk_inaugural_us", "fortunes_es")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    """The stand-in loaded as ``gpt2`` from ``$CONTEXT_NEURONS_GPT2``."""
    root = settings.corpora_root()
    if root is None or not root.is_dir():
        pytest.fail("the offline corpora are needed: python -m context_neurons fetch-corpora "
                    "--verdicts")
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from simulate_online import write_gpt2_standin
    finally:
        sys.path.remove(str(REPO / "scripts"))
    from context_neurons.models import load_model

    checkpoint = write_gpt2_standin(tmp_path_factory.mktemp("standin"))
    patch = pytest.MonkeyPatch()
    patch.setenv(settings.GPT2_WEIGHTS.name, str(checkpoint))
    yield load_model("gpt2", device="cpu")
    patch.undo()


@pytest.fixture(scope="module")
def result(standin) -> GPT2Evaluation:
    from context_neurons.verdict.gpt2 import evaluate_gpt2
    from context_neurons.verdict.gpt2_data import gpt2_data
    from context_neurons.verdict.options import RunOptions

    protocol = load_protocol_gpt2()
    rules = dataclasses.replace(protocol.data, folders=FOLDERS)
    data = gpt2_data(standin.model.tokenizer, rules)
    identity = model_identity(standin.name, standin.source, protocol)
    return evaluate_gpt2(standin.model, identity, protocol, data, RunOptions(RESAMPLES))


def test_the_stand_in_is_a_plumbing_check_never_gpt2s_result(standin, result):
    assert standin.name == "gpt2"  # asked for as GPT-2, as the website asks
    assert result.identity.role == PLUMBING and not result.identity.is_gpt2_result
    assert result.core.model.startswith("gpt2 (plumbing check: ")
    assert all(line.startswith("gpt2 (plumbing check: ") for line in result.sentences())


def test_pooled_domains_match_the_inventory(result):
    inventory = load_protocol_gpt2().document["data"]["inventory"]
    data = result.core.data
    assert data.pooled == ["pokemon", "spanish", "speeches"]
    for folder in FOLDERS:
        row = inventory["per_folder"][folder]
        summary = data.domains[row["domain"]]
        assert summary.own_units == row["confirm_units_1024"], folder
        assert summary.windows == min(row["confirm_units_1024"], 50), folder
        assert summary.status == "pooled"


def test_the_result_has_every_registered_part(result):
    core, protocol = result.core, load_protocol_gpt2()
    assert core.protocol == "discovery-verdict-gpt2"
    assert result.heads.paper == protocol.paper_claim.paper_heads
    assert result.heads.equal == (tuple(core.context_set.heads) == result.heads.paper)
    # the stand-in's planted layer 0 has contextual heads: a stopped run would check nothing
    assert not core.stopped and core.context_set.heads
    truth = core.truth
    assert truth.n_truth == len(truth.neurons) and truth.n_effect >= truth.n_truth
    primary = core.primary
    assert primary.n_resamples == RESAMPLES and primary.score == "frequency_aware"
    assert [b.name for b in primary.baselines] == list(BASELINES)
    assert primary.verdict is not None
    claim = result.paper_claim
    assert claim.d_mlp == 3072 and claim.theta == protocol.paper_claim.theta
    assert claim.count_matched.n_selected == protocol.paper_claim.count_matched_n
    assert [p.theta for p in claim.sweep] == list(protocol.paper_claim.thetas)
    theta_point = claim.sweep[list(protocol.paper_claim.thetas).index(6)]
    assert theta_point.n_found == claim.at_theta.n_selected
    assert np.isclose(claim.at_theta.base_rate, truth.n_truth / 3072)
    assert result.heads.top_with_paper_heads is not None  # asked for as gpt2: the sensitivity
    assert "bag of tokens" in " ".join(core.runtime)
    summary = result.score_summary  # chapter 5's lines on top[j] against the paper's theta
    assert summary.theta == protocol.paper_claim.theta and summary.n_neurons == 3072
    assert summary.n_found == claim.at_theta.n_selected
    assert any("Gaussian null" in line for line in result.sentences())
    # the planted control, timed apart, computed in this run (v3's rule: it passes on the
    # planted model, whose context neurons we wrote)
    assert result.planted["planted_context_neurons"] > 0 and not result.void
    assert "planted (timed apart)" in core.runtime
    assert "planted control (planted model" in result.sentences()[-1]


def test_a_failed_planted_control_voids_every_verdict(standin, result):
    import context_neurons.reproduce.verdict_rows_gpt2 as rows_module
    from context_neurons.verdict.gpt2_result import VOID

    assert not result.core.stopped  # a verdict to void (the stand-in has a context set)
    failed = {**result.planted, "recovers_what_top_recovers": False}
    controls = dataclasses.replace(result.core.controls, apart={"planted": failed})
    broken = dataclasses.replace(result, core=dataclasses.replace(result.core, controls=controls))
    assert broken.void and not result.void
    assert broken.primary_sentence().endswith(VOID) and broken.claim_sentence().endswith(VOID)
    assert "VOID" in broken.planted_sentence()
    assert rows_module.planted_status(broken) == "fails: verdicts void"
    assert rows_module.planted_status(result) == "passes"
    skipped = dataclasses.replace(result.core, controls=dataclasses.replace(controls, apart={}))
    quick = dataclasses.replace(result, core=skipped)
    assert quick.planted is None and not quick.void
    assert rows_module.planted_status(quick) == "not run" and "not run" in quick.planted_sentence()
    assert GPT2Evaluation.from_json(broken.to_json()).void


def test_json_round_trip(result):
    data = result.to_json()
    assert GPT2Evaluation.from_json(data).to_json() == data
    assert data["identity"]["role"] == PLUMBING


def test_main_job_rows_label_the_stand_in(standin, result, monkeypatch):
    import context_neurons.reproduce.verdict_rows_gpt2 as rows_module

    monkeypatch.setattr(rows_module, "gpt2_entry", lambda *a, **k: result)
    found, entry = rows_module.gpt2_rows(standin, method=None)
    rows = {row.key: row for row in found}
    assert rows_module.RESULT_KEY in rows and rows_module.VERDICT_KEY in rows
    assert entry is result and rows[rows_module.RESULT_KEY].value is result  # one value, typed
    models = rows["discovery_models_gpt2"].value
    assert list(models) == list(load_protocol_gpt2().models)
    assert models["gpt2"]["entry"].startswith("not computed here: gpt2 (plumbing check")
    assert "this run computes gpt2 only" in models["gpt2-xl"]["entry"]
    assert rows["planted_control_gpt2"].value == "passes"
    assert rows[rows_module.VERDICT_KEY].label == result.primary_sentence()


def _as(result: GPT2Evaluation, name: str, role: str, **changes) -> GPT2Evaluation:
    """The stand-in's result relabelled as a registered model's (the replication words' test:
    never printed as GPT-2's anywhere else)."""
    return dataclasses.replace(result, identity=ModelIdentity(name, "hub", role), **changes)


def test_replications_are_reported_beside_gpt2_from_the_main_jobs_files(result, tmp_path,
                                                                        capsys):
    """``gpt2-verdicts`` reads the main job's JSON files and prints each replication's verdicts
    with "replicates" or "does not replicate" against gpt2's, a model without a file as not
    computed here; Small's six heads are compared on gpt2 only."""
    from context_neurons.__main__ import main
    from context_neurons.reproduce.verdict_rows_gpt2 import RESULT_KEY

    other = next(label for label in ClaimLabel if label != result.paper_claim.answer)
    results = {"gpt2": _as(result, "gpt2", PRIMARY),
               "gpt2-medium": _as(result, "gpt2-medium", REPLICATION, heads=None),
               "gpt2-large": _as(result, "gpt2-large", REPLICATION, heads=None, paper_claim=(
                   dataclasses.replace(result.paper_claim, answer=other)))}
    paths = []
    for name, value in results.items():
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps({"model": name, RESULT_KEY: value.to_json()}))
    assert main(["gpt2-verdicts", *map(str, paths)]) == 0
    lines = capsys.readouterr().out.splitlines()
    by_model = {m: [x for x in lines if x.startswith(f"{m}: ")]
                for m in load_protocol_gpt2().models}
    assert not any("replicate" in line for line in by_model["gpt2"])
    assert by_model["gpt2"][0].startswith("gpt2: the context set ")
    medium, large = by_model["gpt2-medium"], by_model["gpt2-large"]
    assert "compared on gpt2 only" in medium[0] and "paper's six heads [" not in medium[0]
    assert any("primary (discovery-verdict-gpt2)" in x and x.endswith("(replicates)")
               for x in medium)
    assert sum(x.endswith("(replicates)") for x in medium) == 2
    assert any(x.endswith("(does not replicate)") for x in large)
    assert by_model["gpt2-xl"] == ["gpt2-xl: not computed here: no result of it was given "
                                   "(python -m context_neurons reproduce --model gpt2-xl --out "
                                   "gpt2-xl.json)"]
    # a plumbing check as the primary: neither word (a stand-in neither replicates nor is
    # replicated)
    assert main(["gpt2-verdicts", str(paths[1]), *_written(tmp_path, result)]) == 0
    assert "replicate" not in capsys.readouterr().out
    # a file without the protocol's result (the corpora were absent): the error says why
    absent = tmp_path / "absent.json"
    absent.write_text(json.dumps({"model": "gpt2", "labels": {
        "discovery_verdict_gpt2": "gpt2: discovery-verdict-gpt2 not computed: the corpora"}}))
    assert main(["gpt2-verdicts", str(absent)]) == 2
    assert "holds no discovery-verdict-gpt2 result: gpt2: discovery-verdict-gpt2 not computed" \
        in capsys.readouterr().err
    assert main(["gpt2-verdicts", str(paths[0]), str(paths[0])]) == 2
    assert "Two files hold gpt2's result" in capsys.readouterr().err


def _written(tmp_path: Path, result: GPT2Evaluation) -> list[str]:
    from context_neurons.reproduce.verdict_rows_gpt2 import RESULT_KEY

    path = tmp_path / "standin.json"
    path.write_text(json.dumps({"model": "gpt2", RESULT_KEY: result.to_json()}))
    return [str(path)]


def test_without_corpora_the_protocols_line(standin, monkeypatch):
    from context_neurons.verdict.gpt2 import gpt2_entry

    monkeypatch.setenv(settings.CORPORA.name, settings.NO_DIRECTORY)
    identity = model_identity("gpt2", standin.source, load_protocol_gpt2())
    entry = gpt2_entry(standin.model, identity)
    assert isinstance(entry, CorporaAbsent)
    assert entry.line().startswith("gpt2: discovery-verdict-gpt2 not computed: the offline "
                                   "corpora (corpora dataset version 1, folders ")
