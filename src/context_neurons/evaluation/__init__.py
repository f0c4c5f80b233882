"""How good is the circuit? This subpackage implements the paper's evaluation of context neurons
(chapter 6; the book's notation page ``book/notation.md``, section 6): the approximate
pre-activation of a neuron (:mod:`.approximation`), its accuracy against the model's own
pre-activations text by text (:mod:`.accuracy`), its dependence on the calibration text
(:mod:`.calibration`), and the evaluation texts, which leave out every calibration text
(:mod:`.texts`)."""

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
from context_neurons.evaluation.calibration import (  # noqa: F401
    MATCHED,
    QUIET_FRACTION,
    STRONG_OUTPUT,
    IngredientSwap,
    MatchedCalibration,
    calibration_constants,
    calibration_sensitivity,
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
    held_out_domain_windows,
    held_out_general_windows,
)
