"""What the book found: protocol v3's results on every registered model, read from the results the
package ships, as a table (the README's) and as sentences (the website's first page).

Nothing here computes a verdict or types in a number. Each model's entry is its stored v3 result
(``verdict-v3.json`` beside the model, written by ``python -m context_neurons v3 --model NAME
--store``, refused when the weights or the protocol changed since: :mod:`..verdict.v3_stored`).
The main job and chapter 8 compute seed 0's result again in every run; CI checks that the stored
one says what chapter 8 prints (``tests/unit/test_reference.py``). GPT-2 Small, the paper's model,
has a registered protocol that nothing computes yet: its row says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from context_neurons.verdict.entries import NoResult
from context_neurons.verdict.protocol import load_protocol_v3
from context_neurons.verdict.comparison import PrimaryVerdict
from context_neurons.verdict.comparison import interval_text
from context_neurons.verdict.v3_models import primary_model
from context_neurons.verdict.v3_result import V3Evaluation
from context_neurons.verdict.v3_stored import Entries, model_entries, stored_entry

#: How each registered model is named for a reader.
READER_NAMES = {"trained-seed0": "trained here, seed 0 (primary)",
                "trained-seed1": "trained here, seed 1 (replication)",
                "gpt2-layer0-shape": "trained here, GPT-2 Small's layer-0 shape (replication)"}
GPT2 = "GPT-2 Small (the paper's model)"
GPT2_WHY = ("not judged here: its protocol (discovery-verdict-gpt2) was registered before any "
            "GPT-2 number; it is computed where the book runs on GPT-2 with the corpora (the "
            "published website, chapter 8's section 8.12, `reproduce --model gpt2`), never on "
            "the machines that build this repository, which cannot load GPT-2")
#: The scores the table shows, by their names in the protocol's results.
TOP, FREQUENCY_AWARE = "top", "frequency_aware"


#: How a reader knows each baseline of the protocol.
BASELINE_WORDS = {"bag_of_tokens": "the model run on each token alone",
                  "d_without_share": "|d| without the context share",
                  "direct_path": "the direct path", "top": "the paper's `top[j]`"}
#: What each primary verdict says of the best baseline, in a sentence.
VERDICT_WORDS = {PrimaryVerdict.ADDS_SOMETHING: "does less well",
                 PrimaryVerdict.BASELINE_BETTER: "does better",
                 PrimaryVerdict.NO_DIFFERENCE: "does as well"}


@dataclass(frozen=True)
class Finding:
    """One model's answer to protocol v3's question, or why it has none.

    Attributes:
        model: the protocol's name of the model (``trained-seed0``).
        reader_name: how a reader knows it.
        n_truth: context neurons by activation on the CONFIRM documents (None: no result).
        top_auc, frequency_aware_auc: each score's AUC against that truth, ``0.382 [0.343, 0.443]``
            (``-`` where the protocol judges nothing).
        top_verdict: the paper's ``top[j]``'s secondary verdict (``anti-ranking``).
        verdict: the primary verdict (``no difference shown (equivalent within 0.05)``), or
            ``not testable: why`` / why there is no result.
        difference: AUC(score) minus the best baseline's AUC with its interval.
        best_baseline: the best baseline, in words.
        replicates: whether a replication's verdict is seed 0's (None: not a replication, or
            not judged).
        primary_verdict: the primary verdict itself (None where the protocol judges nothing).
    """

    model: str
    reader_name: str
    n_truth: int | None
    top_auc: str = "-"
    frequency_aware_auc: str = "-"
    top_verdict: str = "-"
    verdict: str = "-"
    difference: str = "-"
    best_baseline: str = "-"
    replicates: bool | None = None
    primary_verdict: PrimaryVerdict | None = None

    @property
    def testable(self) -> bool:
        return self.primary_verdict is not None

    def verdict_cell(self) -> str:
        """The README's verdict column."""
        if not self.testable:
            return self.verdict
        suffix = ("" if self.replicates is None else
                  f"; {'replicates' if self.replicates else 'does not replicate'} seed 0")
        return f"{self.verdict}: {self.difference} against {self.best_baseline}{suffix}"


def _auc(entry: V3Evaluation, score: str) -> str:
    result = entry.secondary[score]
    return interval_text(result.auc, result.auc_ci95)


def _neurons(n: int) -> str:
    return f"{n} neuron{'' if n == 1 else 's'}"


def finding(name: str, entry: V3Evaluation | NoResult, min_truth: int) -> Finding:
    """One registered model's finding from its v3 entry (a result, or why there is none)."""
    reader = READER_NAMES.get(name, name)
    if isinstance(entry, NoResult):
        return Finding(name, reader, None, verdict=str(entry))
    n_truth = entry.truth.n_truth if entry.truth is not None else None
    if entry.primary is None:
        return Finding(name, reader, n_truth, verdict=f"not testable: {entry.stopped}")
    if n_truth is not None and n_truth < min_truth:
        return Finding(name, reader, n_truth, verdict=(
            f"not testable: the truth holds {_neurons(n_truth)}, fewer than the protocol's "
            f"{min_truth}"))
    primary = entry.primary
    return Finding(name, reader, n_truth, _auc(entry, TOP), _auc(entry, FREQUENCY_AWARE),
                   entry.secondary[TOP].verdict, primary.label(),
                   interval_text(primary.delta, primary.delta_ci95),
                   BASELINE_WORDS.get(primary.best_baseline, primary.best_baseline),
                   entry.replicates, primary.verdict)


def findings_of(entries: Entries) -> list[Finding]:
    """Each model's finding from protocol v3's entries
    (:func:`..verdict.v3_stored.model_entries`)."""
    min_truth = load_protocol_v3().verdict.min_truth
    return [finding(name, entry, min_truth) for name, entry in entries.items()]


def shipped_findings() -> list[Finding]:
    """Every registered model's finding from the shipped (stored) results, in the protocol's
    order; seed 0's stored result stands in for a run, so a replication says whether it
    replicates it."""
    primary = primary_model().name
    seed0 = stored_entry(primary)
    return findings_of(model_entries({primary: seed0} if seed0 is not None else {}))


def findings_table(findings: list[Finding]) -> str:
    """The README's table: one row per model, GPT-2 Small's last."""
    lines = ["| model | context neurons (by activation) | paper's `top[j]`: AUC | "
             "frequency-aware score: AUC | protocol v3's primary verdict: AUC difference |",
             "|---|---|---|---|---|"]
    for f in findings:
        n = "-" if f.n_truth is None else str(f.n_truth)
        cells = [f.reader_name, n, f.top_auc, f.frequency_aware_auc, f.verdict_cell()]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    lines.append(f"| {GPT2} | - | - | - | {GPT2_WHY} |")
    return "\n".join(lines)


def finding_sentence(f: Finding, emphasis: str = "**") -> str:
    """One model's finding in sentences a student can repeat (``emphasis``: Markdown's bold
    around the model's name; ``""`` for printed text)."""
    name = emphasis + f.reader_name[0].upper() + f.reader_name[1:] + emphasis
    if not f.testable:
        truth = "" if f.n_truth is None else f", {_neurons(f.n_truth)} by activation"
        return f"{name}{truth}: protocol v3 judges nothing here ({f.verdict})."
    replicates = ("" if f.replicates is None else
                  f" This {'replicates' if f.replicates else 'does not replicate'} seed 0.")
    return (f"{name}, {f.n_truth} context neurons by activation: the paper's `top[j]` ranks "
            f"them at AUC {f.top_auc} ({f.top_verdict}); the frequency-aware score at "
            f"{f.frequency_aware_auc}. The best baseline, {f.best_baseline}, "
            f"{VERDICT_WORDS.get(f.primary_verdict, 'is compared')}: the difference in "
            f"AUC is {f.difference}, {f.verdict}.{replicates}")


__all__ = ["BASELINE_WORDS", "FREQUENCY_AWARE", "GPT2", "GPT2_WHY", "READER_NAMES", "TOP",
           "VERDICT_WORDS", "Finding", "finding", "finding_sentence", "findings_of",
           "findings_table", "shipped_findings"]
