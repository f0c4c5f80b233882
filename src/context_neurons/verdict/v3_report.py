"""Protocol v3's report (``reporting``): every registered model's entry (:func:`.v3_stored.
model_entries`) in words, in the protocol's order: the report's lines, the verdict sentences,
the replication table and the readings."""

from __future__ import annotations

from context_neurons.printing import fixed
from context_neurons.verdict.entries import NoResult
from context_neurons.verdict.comparison import PrimaryComparison, PrimaryVerdict, bounds_text
from context_neurons.verdict.comparison import interval_text, number_text
from context_neurons.verdict.context_set import ContextSet
from context_neurons.verdict.v3_models import primary_model
from context_neurons.verdict.v3_result import Sensitivity, V3Controls, V3Evaluation
from context_neurons.verdict.v3_stored import Entries, stored_words
from context_neurons.verdict.truth import TruthSummary

def _heads_line(cs: ContextSet) -> str:
    return (f"context set {list(cs.heads)} (taxonomy contextual {list(cs.taxonomy_contextual)}, "
            f"left out by the fix {cs.left_out_by_fix}, by the CAL windows "
            f"{cs.left_out_by_cal_windows}); non-local set {list(cs.non_local)}")


def report_lines(name: str, result: V3Evaluation | NoResult) -> list[str]:
    """One model's result in the protocol's reporting order (``reporting.order``)."""
    if isinstance(result, NoResult):
        return [f"{name}: {result}"]
    lines = [f"== {name} ({result.protocol}) =="]
    if result.stored:
        lines.append(stored_words(result))
    lines.append(_heads_line(result.context_set))
    for h in result.context_set.measures:
        lines.append(f"  head {h.head}: {h.group} -> {h.fixed_group}, n_eff "
                     f"{h.kernel_n_eff:.1f} ({h.kernel}), content sd {h.content_sd:.2f}, "
                     f"self z {h.self_z:.2f}, prev. share calibration "
                     f"{h.previous_share_calibration:.3f} / CAL "
                     f"{h.previous_share_cal_windows:.3f}, in set: {h.in_context_set}")
    if result.stopped:
        return lines + [f"STOPPED: {result.stopped}"]
    truth, primary = result.truth, result.primary
    lines.append(f"truth: {truth.sentence()}; domains {truth.domains}; "
                 f"|T| 95% {bounds_text(truth.n_truth_ci95)}")
    lines.append(f"PRIMARY: {primary.words()}; undefined resamples "
                 f"{primary.undefined_resamples} of {primary.n_resamples}")
    lines.append(f"  {primary.score}: AUC "
                 f"{interval_text(primary.score_auc, primary.score_auc_ci95)}")
    for b in primary.baselines:
        lines.append(f"  {b.name}: AUC {interval_text(b.auc, b.auc_ci95)}, score - it "
                     f"{interval_text(b.difference, b.difference_ci95)}, best in "
                     f"{b.best_in_resamples} resamples")
    for score, entry in result.secondary.items():
        lines.append(f"secondary {score}: {entry.verdict.upper()}: AUC "
                     f"{interval_text(entry.auc, entry.auc_ci95)}, rho "
                     f"{interval_text(entry.spearman, entry.spearman_ci95)}, precision "
                     f"{number_text(entry.precision)} (base {number_text(entry.base_rate)})")
    lines.append(f"controls: {_controls_line(result.controls)}")
    for label, entry in result.sensitivities.items():
        lines.append(f"sensitivity {label}: {sensitivity_line(entry)}")
    for domain, entry in result.non_pooled.items():
        lines.append(f"non-pooled {domain}: {entry.units} units, {entry.windows} windows, "
                     f"rho {entry.spearman_context_shift}, {_criterion(result.truth, 'part')}: "
                     f"{entry.n_effect_and_context}")
    lines.append(f"no CONFIRM data: {result.data.no_confirm_data}")
    if result.label_free:
        lines.append(f"label-free arm ({result.label_free.label}):")
        for pool, entry in result.label_free.pools.items():
            lines.append(f"  {pool}: AUC {entry.auc} {entry.auc_ci95}, minus "
                         f"frequency-aware {entry.difference_vs_frequency_aware} "
                         f"{entry.difference_ci95}, ARI {entry.adjusted_rand_index}")
    lines.append(f"runtime (s): {result.runtime}")
    return lines


def baseline_records(primary: PrimaryComparison, decimals: int = 3) -> dict[str, dict[str, str]]:
    """The score and each baseline against the truth: AUC, and the score's AUC minus it, each
    with its paired 95% interval (a table's rows, one per score)."""
    rows = {primary.score: {
        "AUC": interval_text(primary.score_auc, primary.score_auc_ci95, decimals),
        "score minus it": "-", "best in resamples": "-"}}
    for b in primary.baselines:
        rows[b.name] = {"AUC": interval_text(b.auc, b.auc_ci95, decimals),
                        "score minus it": interval_text(b.difference, b.difference_ci95,
                                                        decimals),
                        "best in resamples": f"{b.best_in_resamples} of {primary.n_resamples}"}
    return rows


def truth_lines(entry: V3Evaluation) -> list[str]:
    """The truth in words (chapter 8.8): its sentence, then the truth neurons per best domain
    and which CONFIRM domains are pooled, too thin to pool, or missing."""
    per_domain = ", ".join(f"{d} {n}" for d, n in entry.truth.domains.items())
    return [f"truth: {entry.truth.sentence()}",
            f"best domains of the truth neurons: {per_domain}; pooled CONFIRM domains "
            f"{entry.data.pooled}, too few documents to pool {entry.data.not_pooled}, "
            f"none {entry.data.no_confirm_data}"]


def verdict_sentences_v3(models: Entries, decimals: int = 3) -> list[str]:
    """Protocol v3's verdicts in words: for each registered model
    (:func:`.v3_stored.model_entries`), its context set, truth, primary verdict and secondary
    verdicts, or why it has none."""
    out = []
    for name, entry in models.items():
        if isinstance(entry, NoResult):
            out.append(f"{name}: {entry}")
            continue
        heads = list(entry.context_set.heads)
        if entry.stopped:
            out.append(f"{name}: context set {heads}: {entry.stopped}")
            continue
        suffix = "" if name == primary_model().name or entry.replicates is None else (
            f" ({'replicates' if entry.replicates else 'does not replicate'} seed 0)")
        if entry.stored:
            out.append(f"{name}: {stored_words(entry)}")
        out.append(f"{name}: context set {heads}; {entry.truth.sentence()}")
        out.append(f"{name}: PRIMARY: {entry.primary.words(decimals)}{suffix}")
        for score, s in entry.secondary.items():
            out.append(f"{name}: secondary, {score.replace('_', '-')}: {s.verdict.upper()} "
                       f"(AUC {interval_text(s.auc, s.auc_ci95, decimals)}, rho "
                       f"{interval_text(s.spearman, s.spearman_ci95, decimals)})")
    return out


def _controls_line(controls: V3Controls) -> str:
    permuted = controls.neurons_permuted
    parts = [f"neurons permuted rho {permuted.frequency_aware_rho:.3f} "
             f"(void: {permuted.void})"]
    vocab = controls.vocabulary_permuted
    if vocab:
        parts.append(f"vocabulary permuted AUC {interval_text(vocab.auc, vocab.auc_ci95)}"
                     f", rho {number_text(vocab.spearman)}")
    random = controls.same_model.random_directions if controls.same_model else {}
    for name in ("frequency_aware", "top"):
        if name in random:
            parts.append(f"{name} above the random 99th percentile "
                         f"{random[name].honest_found}")
    return "; ".join(parts)


def _criterion(truth: TruthSummary, part: str) -> str:
    """The truth's two thresholds as the non-pooled lines say them (``|d| >= 1 and part >=
    0.5``): the result's own, which its protocol's truth rules set."""
    return f"|d| >= {truth.min_cohens_d:g} and {part} >= {truth.min_context_part:g}"


def sensitivity_line(entry: Sensitivity) -> str:
    """A sensitivity in words (no verdict): its truth size, comparison and note."""
    text = f"|T| = {entry.n_truth}"
    if entry.comparison:
        text += f"; {entry.words}"
    if entry.note:
        text += f"; {entry.note}"
    return text


def detail_lines(entry: V3Evaluation) -> list[str]:
    """One model's v3 details in words (chapter 8.8): each secondary verdict with its numbers,
    the vocabulary control, each sensitivity (no verdict) and each domain not pooled."""
    out = []
    for score, s in entry.secondary.items():
        out.append(f"secondary, {score.replace('_', '-')}: {s.verdict.upper()}; AUC "
                   f"{interval_text(s.auc, s.auc_ci95)}, rho "
                   f"{interval_text(s.spearman, s.spearman_ci95)}, precision "
                   f"{fixed(s.precision, 2)} (base rate {fixed(s.base_rate, 2)})")
    vocab = entry.controls.vocabulary_permuted
    out.append(f"control, token ids permuted in p_D: AUC "
               f"{interval_text(vocab.auc, vocab.auc_ci95)}, rho "
               f"{interval_text(vocab.spearman, vocab.spearman_ci95)}")
    out += [f"sensitivity {name.replace('_', ' ')} (no verdict): {sensitivity_line(sens)}"
            for name, sens in entry.sensitivities.items()]
    for domain, pooled in entry.non_pooled.items():
        rho = pooled.spearman_context_shift
        criterion = _criterion(entry.truth, "the context set's part")
        out.append(f"not pooled, {domain}: {pooled.units} documents, {pooled.windows} "
                   f"windows, rho {'undefined' if rho is None else fixed(rho, 2)}, neurons with "
                   f"{criterion}: {pooled.n_effect_and_context}")
    return out


#: The columns of :func:`replication_rows` after ``result``.
REPLICATION_COLUMNS = ("context set", "|T|", "primary verdict", "Delta [95%]",
                       "secondary (frequency-aware)", "replicates seed 0")


def replication_rows(models: Entries) -> dict[str, dict[str, str]]:
    """Every registered model side by side (a table's rows): where its result comes from, its
    context set, truth size, primary verdict with Delta and its interval, the frequency-aware
    score's secondary verdict, and whether it replicates seed 0's primary verdict; a model with
    no result shows the first words of why ("pending", "not evaluated in this run")."""
    rows = {}
    for name, entry in models.items():
        if isinstance(entry, NoResult):  # the reason is in source_lines
            rows[name] = {"result": entry.status.value,
                          **dict.fromkeys(REPLICATION_COLUMNS, "-")}
            continue
        primary, replicates = entry.primary, entry.replicates
        rows[name] = {
            "result": entry.status.value,
            "context set": str(list(entry.context_set.heads)),
            "|T|": str(entry.truth.n_truth) if primary else "-",
            "primary verdict": primary.label() if primary else entry.stopped or "-",
            "Delta [95%]": interval_text(primary.delta, primary.delta_ci95) if primary else "-",
            "secondary (frequency-aware)": entry.secondary["frequency_aware"].verdict
            if primary else "-",
            "replicates seed 0": "-" if replicates is None else ("yes" if replicates else "no"),
        }
    return rows


def source_lines(models: Entries) -> list[str]:
    """Where each registered model's v3 result comes from, one line each: computed in this run,
    stored (with its command and date) or why there is none."""
    return [f"{name}: " + (str(entry) if isinstance(entry, NoResult) else stored_words(entry)
                           if entry.stored else "computed in this run")
            for name, entry in models.items()]


#: Each primary verdict protocol v3 registers, in words about the decomposition.
MEANING = {
    PrimaryVerdict.ADDS_SOMETHING: "adds measurably to the ranking",
    PrimaryVerdict.NO_DIFFERENCE: "does not add measurably to the ranking",
    PrimaryVerdict.BASELINE_BETTER: "ranks the context neurons worse than the best baseline",
    PrimaryVerdict.NOT_TESTABLE: "could not be tested here",
}


def decomposition_readings(result: V3Evaluation) -> list[str]:
    """What one model's v3 result says about the method (chapter 8.10), in two sentences: the
    primary verdict about the decomposition, the secondary verdicts about the scores."""
    p3 = result.primary
    fa3, top3 = result.secondary["frequency_aware"], result.secondary["top"]
    return [
        f"- Protocol v3 (confirmatory), primary: {p3.verdict.upper()}. The decomposition's "
        f"context share {MEANING[p3.verdict]}: the score's AUC minus the best baseline's is "
        f"{interval_text(p3.delta, p3.delta_ci95)}, the best baseline at the point being "
        f"{p3.best_baseline.replace('_', ' ')}.",
        f"- Protocol v3, secondary: the frequency-aware score is {fa3.verdict.upper()} at "
        f"finding the context neurons (AUC {interval_text(fa3.auc, fa3.auc_ci95)}); the "
        f"paper's top[j] is {top3.verdict.upper()} (AUC "
        f"{interval_text(top3.auc, top3.auc_ci95)}).",
    ]


__all__ = ["MEANING", "REPLICATION_COLUMNS", "baseline_records", "decomposition_readings",
           "detail_lines", "replication_rows",
           "report_lines", "sensitivity_line", "source_lines", "truth_lines",
           "verdict_sentences_v3"]
