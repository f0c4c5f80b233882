"""Hand-built typed results of protocols v1 and v2 for the tests of their words and tables
(``tests/unit/test_verdict.py``, ``test_reproduce.py``): a score with made-up numbers, and an
evaluation that holds only a primary head set's scores."""

from __future__ import annotations

from context_neurons.verdict.results import Evaluation, HeadSetResult, ScoreResult


def score_result(**changes) -> ScoreResult:
    """A positive score (AUC 0.9 [0.8, 0.95], rho 0.5 [0.4, 0.6], precision 0.6 at |T| = 10 of
    50) with ``changes``."""
    values = dict(auc=0.9, auc_ci95=[0.8, 0.95], spearman=0.5, spearman_ci95=[0.4, 0.6],
                  precision=0.6, base_rate=0.2, n_truth=10, verdict="positive", criteria={})
    return ScoreResult(**{**values, **changes})


def evaluation_of(scores: dict[str, ScoreResult], heads: list[int] = (1,)) -> Evaluation:
    """An evaluation whose primary head set ``heads`` has ``scores`` and an empty truth."""
    primary = HeadSetResult(heads=list(heads), truth_neurons=[], truth_domains={},
                            truth_count_resample_ablation=None, truth_count_ci95=[0.0, 0.0],
                            scores=scores, frequency_aware_highest=[])
    return Evaluation(protocol="test", head_sets={"primary": list(heads)}, domains=[],
                      eval_windows={}, eval_documents={}, n_resamples=0,
                      results={"primary": primary})
