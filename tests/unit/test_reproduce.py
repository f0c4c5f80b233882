"""The main job: ``python -m context_neurons reproduce`` end to end on the planted model."""

from __future__ import annotations

import json

import pytest
from test_reference import readme_excerpt  # tests/unit/test_reference.py: the README quotes the table

from context_neurons.__main__ import main
from context_neurons.verdict.statistics import Verdict
from verdict_cases import (  # tests/unit/verdict_cases.py
    evaluation_of,
    score_result,
    truth_case,
    v3_case,
)

#: The keys the issues ask the main job to report (foundation, chapters 2-7).
REQUIRED_KEYS = {
    "model", "n_texts", "seconds", "tv_distance_median",
    "head_groups", "contextual_heads", "n_eff", "denominator_cv",
    "theta", "neurons_found", "median_pearson_r", "median_fvu",
    "neuron_precision", "neuron_recall", "lookups", "band_coverage",
    "band_coverage_per_head_group",
}


@pytest.mark.slow
def test_reproduce_planted_writes_every_key_and_prints_the_table(tmp_path, capsys,
                                                                computations, monkeypatch,
                                                                planted):
    """The planted main job end to end: its table, JSON and counts; and the four planted
    look-ups, recovered by the run's one ``examine_best_neurons`` (its minutes are spent once
    for both checks)."""
    import context_neurons.reproduce as package

    runs = []
    original = package.reproduce
    monkeypatch.setattr(package, "reproduce", lambda *a, **k: runs.append(original(*a, **k))
                        or runs[-1])
    out = tmp_path / "results.json"
    assert main(["reproduce", "--model", "planted", "--texts", "2", "--no-progress",
                 "--explain", "--out", str(out)]) == 0
    (run,) = runs
    check_planted_lookups(run.lookups, run.row("lookups"), planted.truth)
    # computed once (issue 33): the heads classified, the circuit built, the neurons scored and
    # the weights read once in the whole run
    assert computations == {"classify_heads": 1, "build_circuit": 1, "score_neurons": 1,
                            "read_weights": 1}, computations
    table = capsys.readouterr().out
    assert "| quantity" in table and "paper (GPT-2 Small)" in table and "planted truth" in table
    assert readme_excerpt() in table, "the README's excerpt is not what the planted run prints"
    legend = table[table.index("columns:"):]  # --explain: every row of the table is explained
    assert "planted truth: what was planted" in legend
    assert "  tv_distance_median: TV distance" in legend and "  seconds: " in legend
    results = json.loads(out.read_text())
    assert REQUIRED_KEYS <= set(results), REQUIRED_KEYS - set(results)
    assert results["model"] == "planted" and results["n_texts"] == 2 and results["seconds"] > 0
    # the first general window is a calibration document: left out, and said (issue 52)
    assert results["texts"]["left_out_calibration"] == ["nltk_brown_us:ca01"]
    assert 0 <= results["tv_distance_median"] < 0.08  # the paper: ~0.05 on GPT-2
    assert set(results["tv_distance_median_per_head"]) == {"0", "2", "6", "8", "9", "10"}
    assert results["contextual_heads"] == results["planted_truth"]["contextual_heads"]
    assert results["neuron_precision"] >= 0.8 and results["neuron_recall"] >= 0.8
    for key in results["paper"]:  # paper values are labelled and never stand in for a result
        assert key in results
    check_band_rows(results, table)


def check_band_rows(results: dict, table: str) -> None:
    """Issue 56: the band's coverage in the run, per band and per head group of the contextual
    heads (the taxonomy's groups), each finite with the nominal rate beside it, in the table,
    the JSON and the legend."""
    import math

    bands = results["band_coverage"]
    assert "all contextual heads" in bands
    for band in bands.values():
        low, high = band["coverage_ci95"]
        assert all(math.isfinite(x) for x in (band["coverage"], low, high, band["vacuous"]))
        assert low <= band["coverage"] <= high and band["nominal"] == 0.9 and band["reading"]
    contextual = set(results["contextual_heads"])
    groups = {g for g, heads in results["head_groups"].items() if contextual & set(heads)}
    per_group = results["band_coverage_per_head_group"]
    assert set(per_group) == groups
    for group in per_group.values():
        assert math.isfinite(group["coverage"]) and 0.9 < group["nominal"] < 1
    for key in ("band_coverage", "band_coverage_per_head_group"):
        assert f"\n{key}:\n| " in table and f"  {key}: " in table[table.index("columns:"):]
    assert "  vacuous: " in table


def check_planted_lookups(found: dict, row, truth) -> None:
    """Right neuron, token and head; an explanation that beats chance. The hard look-up's head
    shares its signal with a second head. The main job's row reports the same look-ups."""
    import context_neurons.lookups as lk

    assert set(found) == {(d.layer, d.neuron) for d in truth.lookups}
    for planted in truth.lookups:
        lookup = found[(planted.layer, planted.neuron)]
        assert lookup.token == planted.target
        assert lookup.top_heads[0][:2] == (planted.layer, planted.head)
        if planted.hard:  # two heads carry the signal
            assert lookup.top_heads[1][:2] == (planted.layer, planted.second_head)
            assert lookup.top_heads[0][2] < 5 * abs(lookup.top_heads[1][2])
        else:
            assert lookup.top_heads[0][2] > 5 * abs(lookup.top_heads[1][2])  # it stands out
        assert lookup.explanation is not None and lookup.explanation.tokens
        evaluation = lookup.evaluation
        assert evaluation.accuracy > evaluation.chance, (planted.topic, evaluation)
        assert evaluation.balanced_accuracy > 0.65, (planted.topic, evaluation)
        assert evaluation.n_test > 1000

    assert row.key == "lookups" and row.paper == ""  # no paper value to compare with
    assert [(t["layer"], t["neuron"], t["top_heads"]) for t in row.truth] == [
        (d.layer, d.neuron, [lk.head_name(d.layer, d.head)])
        for d in sorted(truth.lookups, key=lambda d: (d.layer, d.neuron))
    ]
    # both tables number their rows by layer and neuron: '# k' is one neuron in both (issue 54)
    assert [(r["layer"], r["neuron"]) for r in row.value] == [
        (t["layer"], t["neuron"]) for t in row.truth]
    by_key = {(r["layer"], r["neuron"]): r for r in row.value}
    for planted in truth.lookups:
        result = by_key[(planted.layer, planted.neuron)]
        assert result["token"] == planted.target
        assert result["top_heads"][0] == lk.head_name(planted.layer, planted.head)
        assert result["explanation"]
        assert result["explanation_accuracy"] > result["majority_chance"]
        assert result["balanced_accuracy"] > 0.65
        evaluation = found[(planted.layer, planted.neuron)].evaluation
        assert result["balanced_accuracy"] == round(evaluation.balanced_accuracy, 3)


@pytest.mark.slow
def test_reproduce_on_the_negative_control_finds_nothing_and_says_why(tmp_path, capsys,
                                                                      monkeypatch):
    """Shuffled kernels: no contextual head, no neuron, and a row that says so (issue 13). The
    look-ups (chapter 7, about 80 s here) are left out of this run to save time: nothing was
    asserted of them on the control, and the planted main job above checks them. Its look-ups
    row is then empty."""
    from context_neurons.reproduce import pipeline

    monkeypatch.setattr(pipeline, "examine_best_neurons", lambda *args, **kwargs: {})
    out = tmp_path / "control.json"
    assert main(["reproduce", "--model", "planted", "--variant", "shuffled-kernels", "--texts",
                 "1", "--no-progress", "--out", str(out)]) == 0
    table = capsys.readouterr().out
    results = json.loads(out.read_text())
    assert results["contextual_heads"] == [] and results["neurons_found"] == 0
    assert "no contextual head" in table
    assert "variant shuffled-kernels" in results["model_source"]
    assert results["lookups"] == []  # left out here, as the docstring says


def test_variant_exists_only_for_the_planted_model():
    from context_neurons.checks import InputError
    from context_neurons.models import load_model

    with pytest.raises(InputError, match="only for the planted model"):
        load_model("gpt2", variant="shuffled-kernels")


@pytest.mark.parametrize("texts", ["0", "-3", "two"])
def test_reproduce_rejects_a_bad_text_count(texts, capsys):
    with pytest.raises(SystemExit):
        main(["reproduce", "--model", "planted", "--texts", texts])
    assert "--texts" in capsys.readouterr().err


def test_reproduce_rejects_an_unknown_model(capsys):
    with pytest.raises(SystemExit):
        main(["reproduce", "--model", "gpt3"])
    assert "invalid choice" in capsys.readouterr().err


def test_verdict_rows_summarise_scores_controls_and_the_secondary_set():
    """Both protocols' ``discovery_scores`` rows come from one summary: every score, every
    control (with an AUC, or its note as it is), and every score on the secondary head set."""
    from dataclasses import replace

    from context_neurons.reproduce.verdict_rows import _scores
    from context_neurons.verdict.results import Controls, RandomDirections

    score = score_result()
    controls = Controls(score_result(verdict=Verdict.INCONCLUSIVE),
                        {"top": RandomDirections(1.5, 3, 0.25)})
    primary_only = evaluation_of({"frequency_aware": score})
    primary = replace(primary_only.primary, controls=controls)
    result = replace(primary_only, results={"primary": primary,
                                            "secondary": replace(primary, controls=None)})
    scores = _scores(result)
    assert list(scores) == ["frequency_aware", "frequency_aware_vocabulary_permuted",
                            "top_random_directions",
                            "frequency_aware (secondary: all non-local heads)"]
    assert set(scores["frequency_aware"]) == {"auc", "auc_ci95", "spearman", "spearman_ci95",
                                              "precision", "base_rate", "verdict"}
    assert scores["frequency_aware_vocabulary_permuted"]["verdict"] == "inconclusive"
    assert scores["top_random_directions"] == {"random_99th_percentile": 1.5,
                                               "honest_found": 3, "honest_found_share": 0.25}
    assert list(_scores(primary_only)) == ["frequency_aware"]


def test_verdict_rows_without_documents_say_why_and_measure_no_previous_token_heads(monkeypatch):
    """Online (no corpora), protocols v1 and v2's rows are NaN with the reason, and the run has
    no previous-token heads to show (None, never a stand-in)."""
    import math

    from context_neurons.method import MethodValues
    from context_neurons.models import load_model
    from context_neurons.reproduce import verdict_rows as vr
    from context_neurons.reproduce.results import PreviousTokenHeads
    from context_neurons.training.summary import training_run

    monkeypatch.setenv("CONTEXT_NEURONS_CORPORA", "none")
    loaded = load_model("trained")
    rows, previous, v1, v2 = vr.verdict_rows(loaded, training_run(loaded.directory),
                                             MethodValues(loaded.model))
    assert previous is None and v1 is None and v2 is None
    assert [r.key for r in rows] == list(vr.KEYS)
    assert all(math.isnan(r.value) and r.label.startswith("not computed: ") for r in rows)
    found = PreviousTokenHeads([0.05, 0.91, 0.2], [1])
    assert found.findings() == [
        "mean attention to the previous token on EVAL windows, per head: [0.05,\n  0.91, 0.2]",
        "previous-token heads (>= 0.4): [1]"]


def _results(rows: list, planted: bool, model: str, protocols=None):
    """A table's results built by hand (no model, no method; ``protocols``: a
    :class:`~context_neurons.reproduce.results.ProtocolResults`, none by default)."""
    from context_neurons.reproduce.results import ProtocolResults, Results

    return Results(model=model, model_source="test", planted=planted, n_texts=1, texts={},
                   device="cpu", rows=rows, seconds=1.0,
                   protocols=protocols or ProtocolResults())


def _unwrapped(text: str) -> list[str]:
    """The lines of ``text``, each wrapped line joined again (its continuations are indented by
    four spaces more than any line's own indent)."""
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith("    ") and lines:
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
    return lines


def test_table_prints_the_verdicts_of_every_protocol_with_its_status():
    """Under the main job's table, each protocol the run evaluated gives its verdicts in words,
    under a line saying which protocol it is and whether it is the one to believe (v3 first)."""
    from context_neurons.reproduce import Row, format_table

    from context_neurons.checks import InputError
    from context_neurons.reproduce.results import ProtocolResults
    from context_neurons.verdict.entries import Pending
    from context_neurons.verdict.results import Evaluation

    score = score_result()
    entry = score.to_json()
    evaluation = evaluation_of({"frequency_aware": score,
                                "top": score_result(verdict=Verdict.INCONCLUSIVE)})
    stopped = Evaluation(protocol="v2", head_sets={"primary": []}, domains=[], eval_windows={},
                         eval_documents={}, n_resamples=0, stopped="no contextual head")
    v3 = {"trained-seed0": v3_case(truth=truth_case(), secondary={"frequency_aware": score}),
          "trained-seed1": Pending("not trained")}
    rows = [Row("x", 1.0, "a row"), Row("discovery_evaluation", evaluation, show="json"),
            Row("discovery_evaluation_v2", stopped, show="json"),
            Row("discovery_evaluation_v3", v3, show="json")]
    results = _results(rows, planted=False, model="trained",
                       protocols=ProtocolResults(v1=evaluation, v2=stopped, v3=v3))
    written = json.loads(results.to_json())  # typed results enter the JSON as their to_json()
    assert written["discovery_evaluation"]["primary"]["scores"]["frequency_aware"] == entry
    assert written["discovery_evaluation_v2"]["stopped"] == "no contextual head"
    assert written["discovery_evaluation_v3"]["trained-seed0"] == v3["trained-seed0"].to_json()
    assert results.evaluation("v1") is evaluation and results.evaluation("gpt2") is None
    with pytest.raises(InputError, match="Unknown protocol 'v4'"):
        results.evaluation("v4")
    text = format_table(results)
    assert max(len(line) for line in text.splitlines()) <= 100  # long verdicts are wrapped
    lines = _unwrapped(text)
    start = next(k for k, line in enumerate(lines) if line.startswith("verdict"))
    verdicts = lines[start:]
    assert verdicts[0].startswith("verdict, protocol v3 (confirmatory")
    assert verdicts[1].startswith("  trained-seed0: context set [1, 6]; 40 context neurons")
    assert verdicts[2].startswith("  trained-seed0: PRIMARY: NO DIFFERENCE SHOWN (equivalent "
                                  "within 0.05): AUC(frequency-aware) minus the best baseline's "
                                  "AUC = 0.010 [-0.020, 0.030] (best baseline: bag of tokens")
    assert verdicts[3].startswith("  trained-seed0: secondary, frequency-aware: POSITIVE (AUC "
                                  "0.900 [0.800, 0.950]")
    assert verdicts[4] == "  trained-seed1: pending: not trained"
    assert verdicts[5].startswith("verdict, protocol v2 (registered after v1's verdicts")
    assert verdicts[6] == "  not testable: no contextual head"
    assert verdicts[7].startswith("verdict, protocol v1 (registered before any verdict; "
                                  "superseded by v3)")
    assert verdicts[8].startswith("  frequency-aware score (primary): POSITIVE")
    assert "AUC 0.90 [0.80, 0.95]" in verdicts[8]
    assert verdicts[9].startswith("  the paper's top[j]: INCONCLUSIVE")
    assert len(verdicts) == 10


def test_table_shows_per_head_values_sweeps_and_records_as_tables_of_their_own():
    """No cell is cut with '...': values per head, sweeps and lists of records get their own
    small tables under the main one, and tokens keep their spaces."""
    from context_neurons.reproduce import Row, format_table

    groups = {"contextual": [0, 2], "miscellaneous": [1]}
    rows = [
        Row("head_groups", groups, "groups", truth=groups, show="groups"),
        Row("n_eff", {"0": 91.5, "1": 495.6, "2": 93.8}, "widths", show="per_head"),
        Row("found_sweep", {"12.0": 13, "4.0": 3072}, "found per threshold", show="sweep",
            index="theta"),
        Row("lookups", [{"neuron": 7, "token": " the\n", "top_heads": ["L1H2", "L1H1"]}], "x",
            show="records", index="#"),
        Row("scores", {"top": {"auc": 0.5, "auc_ci95": [0.4, 0.6]}}, "y", show="records"),
        Row("nested", {"top": {"auc": {"a": 1}}}, "z", show="records"),
        Row("whole", {"primary": {}}, "w", show="json"),
    ]
    text = format_table(_results(rows, planted=True, model="planted"))
    assert "..." not in text
    main, *tables = text.split("\n\n")
    cells = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
             for line in main.splitlines() if line.startswith("|")}
    # the groups, per head; the paper's groups (60 characters) in a note under the table
    assert cells["head_groups"] == ["[^1]", "table: per head", "table: per head"]
    assert "[^1] head_groups (paper): 0,2,6,8,9,10 contextual;" in main
    assert cells["found_sweep"][1] == cells["lookups"][1] == "table below"
    per_head = next(t for t in tables if t.startswith("per head:")).splitlines()
    assert per_head[1].split("|")[1:-1] == [
        " head ", " head_groups   ", " head_groups (planted) ", " n_eff "]
    assert per_head[4].split("|")[1:-1] == [
        " 1    ", " miscellaneous ", " miscellaneous         ", " 495.6 "]
    sweep = next(t for t in tables if t.startswith("found_sweep:")).splitlines()
    assert [line.split("|")[1].strip() for line in sweep[3:]] == ["4.0", "12.0"]  # numeric order
    assert "| 1 | 7      | ' the\\n' | [L1H2, L1H1] |" in text
    assert "| top  | 0.5 | [0.4, 0.6] |" in text
    assert "| nested " in main and "| whole " in main  # nested records and JSON: the JSON's
    assert main.count("see the JSON") == 2


def _tables(text: str) -> list[list[str]]:
    """The blocks of a table's text (separated by blank lines), each as its lines unwrapped; a
    block that starts with a table's line continues the block above (a table split by width)."""
    blocks: list[list[str]] = []
    for block in text.split("\n\n"):
        lines = _unwrapped(block)
        if lines[0].startswith("|") and blocks:
            blocks[-1] += lines
        else:
            blocks.append(lines)
    return blocks


def test_every_line_fits_in_100_columns_and_long_cells_are_noted_under_their_table():
    """Issue 34: a table per section, every line within 100 columns; a cell longer than the cap
    is a marker, and the note under the same table holds it in full, one note per marker."""
    import re

    from context_neurons.reproduce import Row, format_table
    from context_neurons.reproduce.paper import PAPER
    from context_neurons.reproduce.table import fmt

    groups = {"contextual": [0, 2, 6, 8, 9, 10], "detokenization": [3, 4, 7],
              "duplicate": [1, 5], "miscellaneous": [11]}
    attention = [0.441, 0.221, 0.032, 0.02, 0.014, 0.017, 0.113, 0.076]
    words = ["sky", "ell", "star", "ok", "traditional", "babylon", "pole", "planet"]
    lookup = {"layer": 1, "neuron": 777, "token": " telescope", "top_heads": ["L1H2", "L1H1"],
              "explanation_accuracy": 0.927, "majority_chance": 0.89, "balanced_accuracy": 0.714,
              "prompts": 10, "prompts_skipped_not_firing": 0, "explanation": words}
    verdict, reading = "no difference shown (equivalent within 0.05)", " ".join(["saturated"] * 20)
    heads, protocols, accuracy, lookups = ("heads (chapters 1-3)", "protocols (chapter 8)",
                                           "the approximation's accuracy (chapter 6)",
                                           "context look-ups (chapter 7)")
    long_key = "median_contextual_heads_pearson_r_constant_denominator"
    rows = [  # head_groups' paper text is 60 characters; the keys up to 54
        Row("head_groups", groups, "groups", truth=groups, show="groups", section=heads),
        Row("n_eff", {h: 50.5 + h for h in range(12)}, "w", show="per_head", section=heads),
        Row("tv_distance_median_per_head", {0: 0.05, 2: 0.06}, "tv", show="per_head",
            section=heads),
        Row("denominator_cv_predicted", {h: 0.1 for h in range(12)}, "cv", show="per_head",
            section=heads),
        Row("contextual_heads", [0, 2, 6], "heads", truth=list(range(12)), section=heads),
        Row("previous_token_attention", attention, "attention", section=protocols),
        Row("discovery_verdict_v3", verdict, "v3", reading=reading, section=protocols),
        Row(long_key, 0.4284, "r", section=accuracy),
        Row("median_pearson_r_constant_denominator", 0.5647, "r", section=accuracy),
        Row("lookups", [lookup, lookup], "look-ups", truth=[{"neuron": 777, "topic": "sky"}],
            show="records", index="#", section=lookups),
    ]
    for planted in (True, False):
        text = format_table(_results(rows, planted=planted, model="gpt2-medium"))
        assert max(len(line) for line in text.splitlines()) <= 100
        tables = _tables(text)
        titles = [table[0] for table in tables]
        assert titles[:5] == [f"{heads}:", f"{protocols}:", f"{accuracy}:", f"{lookups}:",
                              "seconds: 1.0"]
        assert ("planted truth" in "".join(tables[0])) == planted
        assert "planted truth" not in "".join(tables[1] + tables[2])  # no row with a truth
        assert any(line.startswith(f"| {long_key} |") for line in tables[2])
        notes: dict[str, dict[str, str]] = {}  # title -> label -> the note's text
        seen: set[str] = set()
        for table in tables:
            cells = [c.strip() for line in table if line.startswith("|")
                     for c in line.split("|")[1:-1]]
            markers = {c for c in cells if re.fullmatch(r"\[\^\d+\]", c)}
            found = [re.match(r"(\[\^\d+\]) (.+?): (.+)", line) for line in table]
            found = [m for m in found if m]
            # each marker has exactly one note, under its own table; markers are never reused
            assert sorted(m[1] for m in found) == sorted(markers) and not markers & seen
            seen |= markers
            notes[table[0]] = {m[2]: m[3] for m in found}
        assert notes[f"{heads}:"]["head_groups (paper)"] == PAPER["head_groups"]
        assert notes[f"{protocols}:"]["previous_token_attention"] == fmt(attention)
        assert notes[f"{protocols}:"]["discovery_verdict_v3"] == verdict
        assert (notes[f"{accuracy}:"]["median_pearson_r_constant_denominator (paper)"]
                == PAPER["median_pearson_r_constant_denominator"])
        assert notes["lookups:"]["lookups, # 2, explanation"] == fmt(words)
        assert ("contextual_heads (planted)" in notes[f"{heads}:"]) == planted
        if planted:
            assert notes[f"{heads}:"]["contextual_heads (planted)"] == fmt(list(range(12)))
            assert "lookups (planted):" in titles
        per_head = tables[titles.index("per head:")]
        assert "| head | head_groups " in per_head[1] and "denominator_cv_predicted" in "".join(
            per_head)  # the heads' table, split by width, each part with the head column
        assert sum(line.startswith("| head |") for line in per_head) == (2 if planted else 1)
        assert f"reading: discovery_verdict_v3: {reading}" in _unwrapped(text)


def test_numbers_print_at_the_precision_they_carry_and_head_lists_as_lists():
    """Issue 34: no ``theta 6.0000`` or ``n_eff 91.5000``; ``[0]`` is head 0, not a count."""
    from context_neurons.reproduce.table import fmt

    assert [fmt(x) for x in (6.0, 91.5, 1235077.75, 0.123, 0.05, -3e-9, 2e-9)] == [
        "6", "91.5", "1.235e+06", "0.123", "0.05", "0", "0"]
    # a large float prints alike whether or not it happens to be whole (a GPU gave 4703769.0
    # where the CPU gave 4703769.25)
    assert fmt(4703769.0) == fmt(4703769.25) == "4.704e+06" and fmt(1024.0) == "1024"
    assert fmt([0]) == "[0]" and fmt([]) == "none" and fmt(float("nan")) == "NaN"


def test_a_saturated_or_unexplained_row_gets_a_reading_under_the_table():
    from context_neurons.reproduce import Row, format_table

    rows = [Row("neurons_found", 4, "found", reading="every one of the 4 neurons is found"),
            Row("theta", 6.0, "threshold")]
    text = format_table(_results(rows, planted=False, model="trained"))
    assert "reading: neurons_found: every one of the 4 neurons is found" in text
    assert "reading: theta" not in text


def test_a_row_says_how_it_is_shown():
    from context_neurons.reproduce import Row

    with pytest.raises(ValueError, match="show must be one of"):
        Row("x", 1.0, show="chart")


def test_a_threshold_that_finds_nearly_every_neuron_is_read_as_such():
    from context_neurons.reproduce.pipeline import found_reading

    assert found_reading(19, 3072) == ""
    assert found_reading(3072, 3072).startswith("every one of the 3072 neurons found")
    nearly = found_reading(2900, 3072)
    assert nearly.startswith("2900 (94%) of the 3072 neurons found") and "200 highest" in nearly


def test_the_nearly_every_neuron_reading_counts_the_neurons_its_rows_are_over():
    """Issue 52: the rows are over the 200 highest-scoring found neurons, or over all of them on
    a layer where fewer are found (d_mlp at most 222); the reading said 200 on both."""
    from context_neurons.reproduce.pipeline import found_reading

    assert found_reading(3072, 3072).endswith(
        "over the 200 highest-scoring neurons, not over context neurons")
    small = found_reading(150, 150)
    assert small.startswith("every one of the 150 neurons found"), small
    assert small.endswith("over the 150 highest-scoring neurons, not over context neurons"), small
    assert "over the 195 highest-scoring" in found_reading(195, 210)


def test_the_nearly_every_neuron_reading_uses_the_gpt2_protocols_fraction(monkeypatch):
    """Issue 52: "separates almost nothing" is the GPT-2 protocol's ``separates_nothing_fraction``
    (2765 or more of GPT-2's 3072, as the protocol says), read from it, not a copy of it."""
    from dataclasses import replace

    from context_neurons.reproduce import pipeline
    from context_neurons.verdict.gpt2_protocol import load_protocol_gpt2

    assert pipeline.found_reading(2764, 3072) == ""
    assert pipeline.found_reading(2765, 3072).startswith("2765 (90%) of the 3072 neurons found")
    protocol = load_protocol_gpt2()
    half = replace(protocol, paper_claim=replace(protocol.paper_claim,
                                                 separates_nothing_fraction=0.5))
    monkeypatch.setattr(pipeline, "load_protocol_gpt2", lambda: half)
    assert pipeline.found_reading(1536, 3072).startswith("1536 (50%) of the 3072 neurons found")
    assert pipeline.found_reading(1535, 3072) == ""


def test_the_gpt2_family_without_corpora_gets_the_protocols_line(monkeypatch):
    """Issue 52: on GPT-2 the protocol rows were silently absent; without the corpora one row
    now says what is missing, where it looked and the command that fetches it (the protocol's
    ``when_corpora_absent`` line), before any model work (no model is needed to say it)."""
    from context_neurons import config as settings
    from context_neurons.models import LoadedModel
    from context_neurons.reproduce.verdict_rows_gpt2 import gpt2_rows

    def loaded(name: str) -> LoadedModel:  # no model: the line comes before any model work
        value = object.__new__(LoadedModel)
        value.model, value.name, value.source = None, name, "hub"
        return value

    from context_neurons.reproduce import format_table

    monkeypatch.setenv(settings.CORPORA.name, settings.NO_DIRECTORY)
    for name in ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"):
        (row, models), entry = gpt2_rows(loaded(name), method=None)
        assert entry is None
        assert row.key == "discovery_verdict_gpt2" and row.value == "not computed"
        # printed under the table, not only in the JSON or under --explain
        text = format_table(_results([row, models], planted=False, model=name))
        printed = " ".join(line.strip() for line in text.splitlines())
        assert f"note: discovery_verdict_gpt2: {row.label}" in printed
        # every registered model said, this one with the line, none left out
        assert list(models.value) == ["gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"]
        assert models.value[name]["entry"] == row.label
        assert row.label.startswith(f"{name}: discovery-verdict-gpt2 not computed: the offline "
                                    "corpora (corpora dataset version 1, folders bible_kjv, ")
        assert "`python -m context_neurons fetch-corpora --verdicts`" in row.label
        assert "<" not in row.label
    for name in ("trained", "planted", "checkpoint"):
        assert gpt2_rows(loaded(name), method=None) == ([], None)


def test_chapter_8_names_every_registered_model_and_heads_what_it_computed(monkeypatch):
    """Chapter 8's section on the protocol (``page_lines``): on a GPT-2 model without the
    corpora, the protocol's line under a heading that does not claim a computation, and every
    other registered model as not computed here; on another model, that no GPT-2 number is on
    the page."""
    from context_neurons import config as settings
    from context_neurons.verdict.gpt2 import page_lines

    monkeypatch.setenv(settings.CORPORA.name, settings.NO_DIRECTORY)
    monkeypatch.delenv(settings.VERDICT_RECORD.name, raising=False)
    head, absent, *others = page_lines("gpt2-medium")
    assert head == "discovery-verdict-gpt2 on gpt2-medium, this page's model:"
    assert absent.startswith("gpt2-medium: discovery-verdict-gpt2 not computed: the offline")
    assert [line.split(":")[0] for line in others] == ["gpt2", "gpt2-large", "gpt2-xl"]
    assert all(": not computed here: this page computes gpt2-medium only" in x for x in others)
    (line,) = page_lines("planted")
    assert line.startswith("This page was built on 'planted', not a GPT-2 model")
