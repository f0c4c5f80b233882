"""Hand-built typed results of protocols v1, v2 and v3 for the tests of their words and tables
(``tests/unit/test_verdict.py``, ``test_verdict_v3.py``, ``test_reproduce.py``): a score with
made-up numbers, an evaluation that holds only a primary head set's scores, and a v3 result with
a context set, a truth, a primary comparison and the secondary verdicts."""

from __future__ import annotations

from context_neurons.verdict.protocol import load_protocol_v3
from context_neurons.verdict.results import Evaluation, HeadSetResult, ScoreResult
from context_neurons.verdict.statistics import Verdict
from context_neurons.verdict.comparison import BaselineResult, PrimaryComparison, PrimaryVerdict
from context_neurons.verdict.context_set import ContextSet
from context_neurons.verdict.v3_result import DataSummary, V3Evaluation
from context_neurons.verdict.truth import TruthSummary


def score_result(**changes) -> ScoreResult:
    """A positive score (AUC 0.9 [0.8, 0.95], rho 0.5 [0.4, 0.6], precision 0.6 at |T| = 10 of
    50) with ``changes``."""
    values = dict(auc=0.9, auc_ci95=[0.8, 0.95], spearman=0.5, spearman_ci95=[0.4, 0.6],
                  precision=0.6, base_rate=0.2, n_truth=10, verdict=Verdict.POSITIVE,
                  criteria={})
    return ScoreResult(**{**values, **changes})


def evaluation_of(scores: dict[str, ScoreResult], heads: list[int] = (1,)) -> Evaluation:
    """An evaluation whose primary head set ``heads`` has ``scores`` and an empty truth."""
    primary = HeadSetResult(heads=list(heads), truth_neurons=[], truth_domains={},
                            truth_count_resample_ablation=None, truth_count_ci95=[0.0, 0.0],
                            scores=scores, frequency_aware_highest=[])
    return Evaluation(protocol="test", head_sets={"primary": list(heads)}, domains=[],
                      eval_windows={}, eval_documents={}, n_resamples=0,
                      results={"primary": primary})


def baseline_case(name: str = "top", **changes) -> BaselineResult:
    """A baseline at AUC 0.43 [0.39, 0.49], the score 0.49 [0.42, 0.55] above it."""
    values = dict(name=name, auc=0.43, auc_ci95=[0.39, 0.49], difference=0.49,
                  difference_ci95=[0.42, 0.55], best_in_resamples=0, best_at_point=False)
    return BaselineResult(**{**values, **changes})


def primary_case(baselines: tuple[BaselineResult, ...] = (), **changes) -> PrimaryComparison:
    """'no difference shown' (equivalent within 0.05): Delta 0.010 [-0.020, 0.030] against the
    bag of tokens, the frequency-aware score at AUC 0.900 [0.800, 0.950]."""
    values = dict(score="frequency_aware", score_auc=0.9, score_auc_ci95=[0.8, 0.95],
                  delta=0.01, delta_ci95=[-0.02, 0.03], best_baseline="bag_of_tokens",
                  baselines=tuple(baselines), n_truth=40, n_resamples=2000,
                  undefined_resamples=0, verdict=PrimaryVerdict.NO_DIFFERENCE,
                  equivalent_within_margin=True,
                  equivalence_margin=load_protocol_v3().primary.equivalence_margin)
    return PrimaryComparison(**{**values, **changes})


def truth_case(**changes) -> TruthSummary:
    """40 context neurons of 45 with |d| >= 1 (the criterion removes 5, 11.1%)."""
    values = dict(min_cohens_d=1.0, min_context_part=0.5, n_effect=45, n_truth=40, removed=5,
                  removed_share=5 / 45, removes_almost_none=False, domains={"code": 40},
                  n_truth_ci95=[35.0, 44.0], resample_ablation_n_truth=None, neurons=[])
    return TruthSummary(**{**values, **changes})


def v3_case(heads: tuple[int, ...] = (1, 6), **changes) -> V3Evaluation:
    """A v3 result on the context set ``heads`` with :func:`truth_case`,
    :func:`primary_case` and both secondary verdicts (:func:`score_result`)."""
    heads = tuple(heads)
    context = ContextSet(heads=heads, non_local=heads, taxonomy_contextual=heads,
                         fixed_contextual=heads, measures=(), threshold=0.4)
    values = dict(protocol=load_protocol_v3().name, model="trained-seed0", comparable=None,
                  data=DataSummary({}, pooled=["code"], not_pooled=[], no_confirm_data=[]),
                  context_set=context, truth=truth_case(), primary=primary_case(),
                  secondary={"frequency_aware": score_result(),
                             "top": score_result(verdict=Verdict.NEGATIVE)})
    return V3Evaluation(**{**values, **changes})
