"""The main job. This module reproduces the paper's numbers: ``python -m context_neurons reproduce``.

One explicit pipeline, in the order of the chapters, each step taking the typed results of the
steps before it: load the model and the evaluation texts; classify the layer-0 heads (chapter 2);
measure the decomposition's accuracy on the heads the taxonomy calls contextual (chapter 1); the
denominators' spread (chapter 3); build the contextual circuit, score every neuron and evaluate the
approximation, its assumptions per head and the coverage of its certified band on these texts
(chapters 4-6, :mod:`.band_rows`); the context look-ups (chapter 7). Every figure is computed in the
run, for the heads and neurons the model's own analysis found; when the taxonomy finds no
contextual head, the steps that need them say so instead of running on anything else.
"""

from __future__ import annotations

import math
import time

import torch
from jaxtyping import Int
from torch import Tensor
from tqdm.auto import tqdm
from transformer_lens.model_bridge import TransformerBridge

from context_neurons.activations import activation_truth, precision_recall_curve, score_auc
from context_neurons.assumptions import LIMITS, AssumptionsCheck, measure_assumptions
from context_neurons.checks import DataError, InputError
from context_neurons.circuit import ContextualCircuit
from context_neurons.decomposition import decompose_attention, default_mean_keys
from context_neurons.discovery import MAX_NEURONS, THETA, NeuronScores, carried, loud_token_share
from context_neurons.discovery import precision_recall, selection_note
from context_neurons.evaluation import contextual_heads_accuracy, evaluate, held_out_general_windows
from context_neurons.lookups import NeuronLookup, NotFiring, examine_best_neurons, head_name
from context_neurons.method import MethodValues, check_run_context
from context_neurons.models import LoadedModel, load_model
from context_neurons.models.loading import GPT2_FAMILY
from context_neurons.models.planted import PlantedTruth
from context_neurons.progress import Phases
from context_neurons.reproduce.band_rows import band_rows
from context_neurons.reproduce.paper import PAPER_CONTEXTUAL_HEADS
from context_neurons.reproduce.results import HeldOutTruth, ProtocolResults, Results, Row
from context_neurons.reproduce.verdict_rows import verdict_rows
from context_neurons.reproduce.verdict_rows_gpt2 import gpt2_rows
from context_neurons.reproduce.verdict_rows_v3 import v3_rows
from context_neurons.stability import bootstrap_standard_error, coefficient_of_variation
from context_neurons.stability import DenominatorStudy, denominator_study
from context_neurons.taxonomy import GROUPS, HeadTaxonomy
from context_neurons.training.heldout import labelled_windows
from context_neurons.training.summary import TrainingRun, training_run
from context_neurons.verdict.gpt2_protocol import load_protocol_gpt2
from context_neurons.verdict.registry import GPT2, TRAINED, of_family

#: Thresholds of the sweep reported beside the chosen one.
SWEEP_THETAS = (4.0, 5.0, 8.0, 12.0)
#: Titles of the table's sections that two steps share (:func:`in_section`).
DISCOVERY = "discovery (chapters 4-5)"
PROTOCOLS = f"protocols {', '.join(p.version for p in of_family(TRAINED))} (chapter 8)"
#: The GPT-2 family's protocols' section.
PROTOCOLS_GPT2 = f"protocol {', '.join(p.name for p in of_family(GPT2))} (chapter 8, section 8.12)"


def taxonomy_rows(taxonomy: HeadTaxonomy, truth: PlantedTruth | None) -> list[Row]:
    """Chapter 2: head groups, contextual heads and kernel widths."""
    planted = {g: truth.head_groups.get(g, []) for g in GROUPS} if truth else None
    at = f"n={taxonomy.n}, {taxonomy.destinations[0]!r}"
    return [
        Row("head_groups", taxonomy.groups,
            f"Layer-0 head groups computed from positional kernels and content weights ({at})",
            truth=planted, show="groups"),
        Row("contextual_heads", sorted(taxonomy.groups["contextual"]),
            "Heads with slowly decaying kernels, weak content dependence and a previous-token "
            "share below 0.4",
            truth=planted["contextual"] if planted else None),
        Row("n_eff", {h: round(taxonomy.width(h), 1) for h in taxonomy.heads},
            f"Kernel width n_eff = 1/sum pos^2 per head ({at})", show="per_head"),
    ]


def paper_heads_rows(loaded: LoadedModel, heads: list[int]) -> list[Row]:
    """On GPT-2 Small, the paper's six heads beside the computed ones, and where they differ."""
    if loaded.name != "gpt2":
        return []
    computed, paper = set(heads), set(PAPER_CONTEXTUAL_HEADS)
    difference = {"computed only": sorted(computed - paper), "paper only": sorted(paper - computed)}
    label = (
        "contextual heads: the taxonomy's own (used everywhere below) against the paper's six; "
        + ("they AGREE" if computed == paper else "they DIFFER: every figure uses the computed set")
    )
    return [Row("contextual_heads_vs_paper", difference, label, show="groups")]


def decomposition_rows(
    model: TransformerBridge, windows: list[Int[Tensor, " _pos"]], heads: list[int], progress: bool
) -> list[Row]:
    """Chapter 1: TV distance between exact and reconstructed patterns of the contextual heads."""
    if not heads:
        return [Row("tv_distance_median", math.nan, "not computed: no contextual head was found")]
    mean_keys = default_mean_keys(model)
    tv = [
        decompose_attention(model, tokens, heads=heads, mean_keys=mean_keys).tv_distance().cpu()
        for tokens in tqdm(windows, desc="TV distance", disable=not progress)
    ]
    pooled = torch.cat(tv, dim=-1)  # [head, all positions of all texts]
    per_head = {h: round(float(v), 4) for h, v in zip(heads, pooled.median(dim=-1).values)}
    return [
        Row("tv_distance_median", float(pooled.median()),
            "TV distance, exact vs reconstructed patterns: median over the contextual heads "
            f"{','.join(map(str, heads))} and every position of every text"),
        Row("tv_distance_median_per_head", per_head, "the same median, per head",
            show="per_head"),
    ]


def stability_rows(study: DenominatorStudy) -> list[Row]:
    """Chapter 3: spread of the denominators at ``n = n_ctx / 2`` across the texts."""
    n_texts = len(study.labels)
    if n_texts < 2:  # a spread across texts needs two of them
        return [Row("denominator_cv", math.nan, f"not computed: {n_texts} text (a spread across "
                    "texts needs at least 2; pass --texts 2 or more)")]
    cv, se, predicted = {}, {}, {}
    for head in study.heads:
        measured = study.measured(head)
        cv[head] = round(coefficient_of_variation(measured), 3)
        se[head] = round(bootstrap_standard_error(measured, coefficient_of_variation), 3)
        predicted[head] = round(study.predicted_cv(head), 3)
    return [
        Row("denominator_cv", cv,
            f"Coefficient of variation of D_h at n={study.n} (destination ' the') across "
            f"{n_texts} texts, per head (standard errors: denominator_cv_se)",
            show="per_head"),
        Row("denominator_cv_se", se,
            f"Bootstrap standard error of denominator_cv ({n_texts} texts, 1000 resamples)",
            show="per_head"),
        Row("denominator_cv_predicted", predicted,
            "Independent-token prediction of that coefficient of variation, per head "
            "(rho sigma / (mu sqrt(n_eff over the random positions)); chapter 3)",
            show="per_head"),
    ]


def found_reading(n_found: int, d_mlp: int) -> str:
    """What a count of found neurons needs said beside it: nothing, or that the threshold
    separates (almost) nothing and what that does to the rows computed over found neurons.

    "Almost nothing" is the GPT-2 protocol's rule, read from it: at least
    ``paper_claim.separates_nothing_fraction`` of the ``d_mlp`` neurons found (a reading only
    here, on every model). The rows are over the :data:`MAX_NEURONS` highest-scoring found
    neurons, or all of them where fewer are found (a small layer)."""
    if n_found < load_protocol_gpt2().paper_claim.separates_nothing_fraction * d_mlp:
        return ""
    which = "every one" if n_found == d_mlp else f"{n_found} ({n_found / d_mlp:.0%})"
    return (f"{which} of the {d_mlp} neurons found: the threshold separates almost nothing on "
            "this model (chapter 8, 'the score saturates'), so the accuracy rows below are over "
            f"the {min(MAX_NEURONS, n_found)} highest-scoring neurons, not over context neurons")


def discovery_rows(
    scores: NeuronScores, circuit: ContextualCircuit, theta: float, truth: PlantedTruth | None
) -> list[Row]:
    """Chapter 5: neurons found at ``theta``, how much of the score the loudest tokens hold (and
    precision and recall on the planted model)."""
    found = scores.found(theta)
    planted = sorted(truth.context_neurons) if truth is not None else None
    d_mlp = len(scores.top)
    sweep = {t: len(scores.found(t)) for t in SWEEP_THETAS}
    saturated = [f"{t:g}" for t, n in sweep.items() if n == d_mlp]
    rows = [
        Row("theta", theta, "threshold on top[j] = mean of the 20 largest robust |z| of a "
            "neuron's token contributions"),
        Row("neurons_found", len(found), f"layer-0 neurons with top[j] >= {theta:g}",
            truth=len(planted) if planted else None,
            reading=found_reading(len(found), d_mlp)),
        Row("neurons_found_sweep", sweep, "neurons found at other thresholds", show="sweep",
            index="theta", reading=(f"every neuron is found at theta {', '.join(saturated)}"
                                    if saturated else "")),
        Row("loud_token_share", loud_token_share(scores, circuit),
            f"share of all neurons' {scores.k} extreme-token slots held by the 1% of tokens with "
            "the largest extended embeddings (about 0.01 if loudness played no part; near 1: the "
            "score ranks loudness shared by every neuron)"),
    ]
    if planted is not None:
        precision, recall = precision_recall(found, planted)
        rows += [
            Row("neuron_precision", precision, f"found neurons that were planted / {len(found)} "
                f"found ({len(planted)} context neurons planted)"),
            Row("neuron_recall", recall,
                f"planted neurons found / {len(planted)} planted context neurons"),
        ]
    return rows


def activation_rows(
    loaded: LoadedModel, run: TrainingRun, scores: NeuronScores, theta: float, heads: list[int],
    progress: bool
) -> tuple[list[Row], HeldOutTruth | None]:
    """Discovery from the weights scored against truth from activations (a trained model only).

    The truth (:mod:`context_neurons.activations`) is measured on the training run's held-out
    documents (``run``: its record), labelled by their corpus's domain, with thresholds fixed
    before any comparison. Returns the rows and the truth (None without the held-out documents).
    """
    try:
        windows, labels = labelled_windows(loaded.model.tokenizer, run)
    except DataError as error:  # online: the training split's documents are not here
        return [Row(key, math.nan, f"not computed: {error}") for key in (
            "neuron_precision_vs_activations", "neuron_recall_vs_activations")], None
    windows = [w.to(loaded.model.cfg.device) for w in windows]
    truth = activation_truth(loaded.model, windows, labels, heads, progress=progress)
    heldout = HeldOutTruth(windows, labels, heads, truth)
    context = truth.context_neurons()
    found = scores.found(theta)
    precision, recall = precision_recall(found, context) if context else (math.nan, math.nan)
    auc = score_auc(scores.top, context)
    curve = precision_recall_curve(scores.top, context, [*SWEEP_THETAS, theta])
    return [
        Row("heldout_windows", len(windows), f"held-out windows of the training split, "
            f"{len(set(labels))} domains (corpus labels)"),
        Row("separating_neurons", len(truth.separating_neurons()),
            "layer-0 neurons whose window mean separates a domain (one-vs-rest AUC >= 0.9 or "
            "<= 0.1), through any path"),
        Row("context_neurons_by_activation", len(context),
            "separating neurons whose separation the mean-ablation of the contextual heads "
            "halves at least: the truth discovery is scored against"),
        Row("neuron_precision_vs_activations", precision,
            f"found neurons that are context neurons by activation / {len(found)} found"),
        Row("neuron_recall_vs_activations", recall,
            f"context neurons by activation found / {len(context)}"),
        Row("score_auc_vs_activations", auc,
            "P(a context neuron by activation scores higher than another neuron): how well "
            "top[j] ranks the truth whatever theta (0.5: no better than chance)"),
        Row("precision_recall_sweep_vs_activations",
            {float(t): {k: (None if isinstance(v, float) and math.isnan(v) else v)
                        for k, v in row.items()} for t, row in curve.iterrows()},
            "neurons found, precision and recall against the activation truth, per theta",
            show="records", index="theta"),
    ], heldout


def evaluation_rows(
    circuit: ContextualCircuit,
    model: TransformerBridge,
    windows: list[Int[Tensor, " _pos"]],
    labels: list[str],
    found: list[int],
    progress: bool,
) -> list[Row]:
    """Chapter 6: median Pearson r and FVU of the discovered neurons over the evaluation texts,
    with per-position and with constant calibrated denominators."""
    if not found:
        return [
            Row("median_pearson_r", math.nan, "not computed: no neuron was found"),
            Row("median_fvu", math.nan, "not computed: no neuron was found"),
        ]
    chosen = carried(found)  # the highest-scoring, as chapter 6 (a threshold may find thousands)
    cache: dict = {}
    ev = evaluate(circuit, model, windows, chosen, labels=labels, progress=progress,
                  truth_cache=cache)
    constant = evaluate(circuit, model, windows, chosen, truth_cache=cache, denominators="median")
    pairs = f"{selection_note(chosen, found)} x {len(windows)} texts"
    heads = contextual_heads_accuracy(
        circuit, model, windows, chosen, denominators=("per_position", "median")
    )
    (heads_r, heads_fvu), (heads_r_constant, heads_fvu_constant) = heads.values()
    return [
        Row("median_pearson_r", ev.median_pearson,
            f"true vs approximate pre-activations, {pairs} (median over neuron-text pairs; "
            "per-position calibrated denominators)"),
        Row("median_fvu", ev.median_fvu, "fraction of variance unexplained, same pairs (median)",
            reading=("above 1: the approximation explains less of the variance than a constant "
                     "would (the paper's 0.14 is on GPT-2 Small)" if ev.median_fvu > 1 else "")),
        Row("median_pearson_r_constant_denominator", constant.median_pearson,
            "same, with one median denominator per head at every position"),
        Row("median_fvu_constant_denominator", constant.median_fvu,
            "FVU, one median denominator per head"),
        Row("median_context_share", ev.median_context_share,
            "variance of (true - local terms) / variance of true, same pairs (median)"),
        Row("median_context_pearson_r", ev.median_context_pearson,
            "Pearson r of the context part: true - local terms vs bag + positional part"),
        Row("median_context_fvu", ev.median_context_fvu,
            "FVU of the context part, same pairs (median)"),
        Row("median_contextual_heads_pearson_r", heads_r,
            "the contextual heads' true output vs bag + positional part, read by the neurons "
            "through linear LN2 (the circuit alone, no local terms), same pairs (median)"),
        Row("median_contextual_heads_fvu", heads_fvu, "FVU of the same comparison (median)"),
        Row("median_contextual_heads_pearson_r_constant_denominator", heads_r_constant,
            "same, with one median denominator per head"),
        Row("median_contextual_heads_fvu_constant_denominator", heads_fvu_constant,
            "FVU, one median denominator per head"),
    ]


#: What each per-head row of :func:`assumptions_rows` is.
LABELS_ASSUMPTIONS = {
    "sink_share": "mean attention to position 0 at positions >= 32 (reported, not judged)",
    "self_share": "mean attention to the current token (non-contextual heads: >= 0.5 assumed)",
    "destination_tv": "median TV, exact pattern vs the exact pattern with ' the''s query",
    "denominator_factor": "median factor between each text's D_h(n) and the calibration's "
                          "(contextual heads; per-position denominators)",
    "denominator_cv_ratio": "spread of D at n_ctx/2 across texts over chapter 3's prediction",
}


def assumptions_rows(check: AssumptionsCheck) -> list[Row]:
    """What the approximation assumes of each layer-0 head, measured on the evaluation texts
    (:mod:`context_neurons.assumptions`), with a verdict per head, before its accuracy."""
    limits = "; ".join(limit.text() for limit in LIMITS.values() if limit.judged)
    per_head = {q: {h: round(check.row(h)[q], 3) for h in check.heads if q in check.row(h)}
                for q in ("sink_share", "self_share", "destination_tv", "denominator_factor",
                          "denominator_cv_ratio")}
    verdicts = check.verdicts()
    failing = [v.head for v in verdicts if v.contextual and v.meets is False]
    return [
        Row("assumptions_limits", limits, "limits fixed before any measurement (issue 50); post "
            "hoc: the sink share left the verdict, destination_tv compares exact patterns "
            "(assumptions.LIMITS says why)"),
        *[Row(f"assumption_{q}", values, LABELS_ASSUMPTIONS[q], show="per_head")
          for q, values in per_head.items()],
        Row("assumption_ln2_scale_cv", check.ln2_scale_cv,
            "coefficient of variation of LN2's 1/std over positions (one scale linearises LN2)"),
        Row("assumption_verdicts",
            [{"head": v.head, "group": v.group,
              "assumes": "the bag" if v.contextual else "attends to itself",
              "verdict": {True: "meets", False: "does NOT meet", None: "not measured"}[v.meets],
              "because": "; ".join(v.failures)} for v in verdicts],
            "per head: whether it meets what the approximation assumes of its role (a "
            "contextual head: the bag; any other: attending to the current token)",
            show="records", index="#"),
        Row("contextual_heads_meeting_assumptions",
            sorted(v.head for v in verdicts if v.contextual and v.meets),
            "contextual heads within every limit (denominator_factor, destination_tv, "
            "denominator_cv_ratio)",
            reading=(f"contextual heads {failing} miss the bag's assumptions: read the accuracy "
                     "below with that in mind" if failing else "")),
    ]



def lookup_row(examined: dict[tuple[int, int], NeuronLookup | NotFiring],
               truth: PlantedTruth | None) -> list[Row]:
    """Chapter 7's row: the examined token-predicting neurons
    (:func:`~context_neurons.lookups.examine_best_neurons`; one that did not fire: its reason),
    their heads and the heads' explanations, with the planted look-ups as its truth."""
    found = [lookup.summary() if isinstance(lookup, NeuronLookup)
             else {"layer": layer, "neuron": neuron, "error": str(lookup)}
             for (layer, neuron), lookup in sorted(examined.items())]  # numbered as the truth
    planted = None
    if truth is not None:
        planted = [
            {"layer": plan.layer, "neuron": plan.neuron, "token": plan.target,
             "top_heads": [head_name(plan.layer, plan.head)], "topic": plan.topic}
            for plan in sorted(truth.lookups, key=lambda plan: (plan.layer, plan.neuron))
        ]
    return [
        Row("lookups", found,
            "context look-ups: token-predicting neurons (top 4 by score, later half of the "
            "layers; rows by layer and neuron, as the planted truth's), predicted token, top "
            "heads by direct attribution, the offline explanation's held-out accuracy beside "
            "the majority guess's (majority_chance), and its balanced accuracy (0.5 for any "
            "constant guess)",
            truth=planted, show="records", index="#")
    ]


def in_section(title: str, rows: list[Row]) -> list[Row]:
    """``rows``, each stamped with the title of the table that prints it (:attr:`Row.section`)."""
    for row in rows:
        row.section = title
    return rows


#: Quantities computed from the model's outputs that are finite for any usable model: NaN or
#: infinity there means a broken model or run (other rows may be NaN when undefined, labelled).
FINITE_KEYS = ("tv_distance_median", "median_pearson_r", "median_fvu")


def check_finite(rows: list[Row]) -> None:
    """A :class:`DataError` naming the rows whose values are infinite, or NaN in
    :data:`FINITE_KEYS` without a not-computed note: such results are not printed."""

    def bad(row: Row) -> bool:
        if isinstance(row.value, bool) or not isinstance(row.value, (int, float)):
            return False
        if math.isinf(row.value):
            return True
        return (math.isnan(row.value) and row.key in FINITE_KEYS
                and not row.skipped)

    keys = [row.key for row in rows if bad(row)]
    if keys:
        raise DataError(f"The run produced non-finite results for {', '.join(keys)}: the model's "
                        "outputs overflow or are undefined (check its weights and --device).")


def reproduce(
    model: str = "planted",
    n_texts: int = 20,
    device: str = "auto",
    progress: bool = True,
    source: str = "auto",
    seed: int | None = None,
    theta: float = THETA,
    variant: str = "standard",
) -> Results:
    """Run the pipeline and return its :class:`~context_neurons.reproduce.results.Results`.

    Args:
        model: a model name (:data:`~context_neurons.models.loading.MODEL_NAMES`) or directory.
        n_texts: evaluation texts (full-context windows); at least 1.
        device: ``"cpu"``, ``"cuda"`` or ``"auto"``.
        progress: show progress bars.
        source: evaluation texts from the offline ``"corpora"``, ``"openwebtext"``, or ``"auto"``.
        seed: the planted model's seed (default ``$CONTEXT_NEURONS_SEED``, else 0).
        theta: the discovery threshold.
        variant: the planted model's variant (``"shuffled-kernels"``: the negative control).

    Returns:
        The run, its rows, and the typed values they were computed from (the taxonomy, circuit
        and scores each computed once, :class:`~context_neurons.method.MethodValues`, and handed
        to every protocol; each protocol's whole result,
        :class:`~context_neurons.reproduce.results.ProtocolResults`); JSON through
        :meth:`~context_neurons.reproduce.results.Results.to_json`.
    """
    if n_texts < 1:
        raise InputError(f"n_texts must be at least 1, got {n_texts}.")
    start = time.perf_counter()
    torch.set_grad_enabled(False)
    loaded = load_model(model, device=device, seed=seed, variant=variant)
    hooked, truth = loaded.model, loaded.truth
    check_run_context(hooked.cfg.n_ctx, loaded.source)
    # never a calibration document: the circuit would be evaluated on what it was fitted to
    windows, labels, report, left_out = held_out_general_windows(hooked.tokenizer, n_texts,
                                                                 source=source)
    if len(windows) < n_texts:
        print(f"note: only {len(windows)} full-length windows available ({report}).")
    windows = [w.to(hooked.cfg.device) for w in windows]

    step = Phases("main job", announce=progress, say_seconds=True)  # each step on stderr
    method = MethodValues(hooked)  # the taxonomy, circuits and scores: computed once, passed on
    with step("the taxonomy of the layer-0 heads (chapter 2)"):
        taxonomy = method.taxonomy()
    heads = method.contextual_heads()
    rows = taxonomy_rows(taxonomy, truth) + paper_heads_rows(loaded, heads)
    rows += decomposition_rows(hooked, windows, heads, progress)
    with step("the denominators across texts (chapter 3)"):
        study = denominator_study(hooked, windows, labels=labels)
        rows += stability_rows(study)
    rows = in_section("heads (chapters 1-3)", rows)
    heldout = previous = check = None
    v1 = v2 = v3 = gpt2 = None  # each protocol's whole result, where the run computes it
    # the training record of a trained model's directory, read once for every protocol
    run = training_run(loaded.directory) if loaded.directory is not None else None
    if heads:
        with step("the contextual circuit and every neuron's score (chapters 4 and 5)"):
            circuit, scores = method.circuit(heads), method.scores(heads)
            rows += in_section(DISCOVERY, discovery_rows(scores, circuit, theta, truth))
        if run is not None:
            with step("truth from activations on held-out text (chapter 8)"):
                found_rows, heldout = activation_rows(loaded, run, scores, theta, heads, progress)
            rows += in_section("truth from held-out text (chapter 8)", found_rows)
    if run is not None:  # each protocol chooses its own heads, or says it cannot
        with step("protocols v1 and v2 (chapter 8)"):
            protocol_rows, previous, v1, v2 = verdict_rows(loaded, run, method,
                                                           progress=progress)
            rows += in_section(PROTOCOLS, protocol_rows)
        with step("protocol v3, the confirmatory test (chapter 8)"):
            protocol_rows, v3 = v3_rows(loaded, run, method, progress)
            rows += in_section(PROTOCOLS, protocol_rows)
    if loaded.name in GPT2_FAMILY:  # its result, or the protocol's line: never nothing
        with step("protocol discovery-verdict-gpt2 (issue 52)"):
            protocol_rows, gpt2 = gpt2_rows(loaded, method, progress)
            rows += in_section(PROTOCOLS_GPT2, protocol_rows)
    if heads:
        with step("the approximation's assumptions, per head (chapter 6)"):
            check = measure_assumptions(hooked, circuit, taxonomy.groups, windows, study,
                                        progress)
            rows += in_section("the approximation's assumptions (chapter 6)",
                               assumptions_rows(check))
        with step("the approximation's accuracy (chapter 6)"):
            rows += in_section("the approximation's accuracy (chapter 6)", evaluation_rows(
                circuit, hooked, windows, labels, scores.found(theta), progress))
        with step("the band's coverage on these texts (chapter 6)"):
            rows += in_section("the approximation's error band (chapter 6)",
                               band_rows(hooked, circuit, scores.ranking(), windows, check))
    else:
        rows += in_section(DISCOVERY, [Row(
            "neurons_found", 0, "no contextual head: there is no contextual circuit, so no "
            "neuron can be discovered from it (nothing stands in for it)")])
    with step("context look-ups (chapter 7)"):
        lookups = examine_best_neurons(hooked, n=4, progress=progress)
        rows += in_section("context look-ups (chapter 7)", lookup_row(lookups, truth))
    check_finite(rows)
    return Results(
        model=loaded.name, model_source=loaded.source, planted=loaded.is_planted,
        n_texts=len(windows), texts={**report.__dict__, "left_out_calibration": left_out},
        device=str(hooked.cfg.device), rows=rows,
        seconds=round(time.perf_counter() - start, 1), method=method, heldout=heldout,
        lookups=lookups, previous_token=previous, assumptions=check,
        protocols=ProtocolResults(v1=v1, v2=v2, v3=v3, gpt2=gpt2),
    )
