"""How good is the circuit? This subpackage implements the paper's evaluation of context neurons
(chapter 6; the book's notation page ``book/notation.md``, section 6): the approximate
pre-activation of a neuron (:mod:`.approximation`), its accuracy against the model's own
pre-activations text by text (:mod:`.accuracy`), its dependence on the calibration text
(:mod:`.calibration`), and the evaluation texts, which leave out every calibration text
(:mod:`.texts`). Chapter 6's findings, one module per section: the headline medians
(:mod:`.headline`), the timings (:mod:`.speed`), the pairs drawn (:mod:`.examples`), the error
by position (:mod:`.early_positions`) and the neurons quiet on the calibration text
(:mod:`.quiet`)."""

from context_neurons.evaluation.accuracy import (  # noqa: F401  (the chapter's namespace: ev.*)
    PAIR_MEASURES,
    Evaluation,
    activation_curves,
    contextual_heads_accuracy,
    evaluate,
    evaluate_sets,
    masked_mean,
    masked_variance,
    pearson_and_fvu,
    position_mask,
)
from context_neurons.evaluation.approximation import (  # noqa: F401
    CONTEXT_TERMS,
    DENOMINATORS,
    LOCAL_TERMS,
    START,
    EvaluationError,
    NeuronApproximator,
    approximator,
    layer0_resid_mid,
    true_pre_activations,
)
from context_neurons.evaluation.band import (  # noqa: F401
    BandError,
    BandResidual,
    CertifiedBand,
    certified_band,
)
from context_neurons.evaluation.calibration import (  # noqa: F401
    MATCHED,
    QUIET_FRACTION,
    SENSITIVITY_TABLES,
    STRONG_OUTPUT,
    CalibrationStudy,
    IngredientSwap,
    MatchedCalibration,
    calibration_constants,
    calibration_sensitivity,
    calibration_study,
    ingredient_swap,
    matched_calibration,
    matched_domains,
    silent_on_calibration,
)
from context_neurons.evaluation.texts import (  # noqa: F401
    calibration_keys,
    calibration_leaks,
    contains_run,
    document_key,
    held_out_domain_sets,
    held_out_domain_texts,
    held_out_domain_windows,
    held_out_general_windows,
    without_documents,
)
from context_neurons.evaluation.early_positions import (  # noqa: F401
    DENOMINATOR_CHOICES,
    POSITION_SPANS,
    error_by_position,
)
from context_neurons.evaluation.examples import (  # noqa: F401
    QUANTILES,
    ExamplePair,
    general_examples,
    own_domain_examples,
    quantile_pair,
)
from context_neurons.evaluation.headline import (  # noqa: F401
    HEADLINE_MEASURES,
    GeneralEvaluation,
    Headline,
    OwnDomainEvaluation,
    evaluate_general,
    evaluate_own_domains,
    headline_medians,
)
from context_neurons.evaluation.quiet import (  # noqa: F401
    QUIET_COLUMNS,
    QuietNeurons,
    quiet_on_calibration,
)
from context_neurons.evaluation.speed import Timings, best_time, time_approximation  # noqa: F401
