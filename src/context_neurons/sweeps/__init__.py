"""Open questions. This subpackage measures what the method fixes and the paper leaves open (chapter
9; the book's notation page ``book/notation.md``, sections 2, 3 and 5), one module per study.

1. **The destination token.** The circuit fixes the destination token to ``' the'``; the blog names
   this "the main source of error".

   * :mod:`.destinations`: how do the circuit, its found neurons and its accuracy change with the
     destination? :func:`destination_classes` chooses other destinations from token counts of
     texts (stop words: the most frequent words of general text; keywords: frequent longer words
     beyond the stop words; topic words: each domain's most over-represented word), never from a
     word list. :class:`DestinationSweep` rebuilds the circuit for another destination, reusing
     everything that does not depend on it (token values, mean keys and values, the LayerNorm-2
     scale, the keys of every token at ``n_ref``), and :func:`sweep_destinations` measures how the
     extended embeddings, the found neurons and the accuracy change.
   * :mod:`.actual_destination`: what is the error of the fixed destination itself?
     :func:`actual_destination_terms` is the approximation in which every position ``n`` queries
     with its own token ``t_n`` (its own kernel, content weights and calibrated denominator)
     instead of ``' the'``.
   * :mod:`.destination_rules`: is that approximation more accurate?
     :func:`compare_destination_rules` measures r and FVU of both on the same texts
     (:class:`DestinationRules`).

2. **The head closest to contextual** (the paper's head 11 of GPT-2, "close to contextual").

   * :mod:`.closest_head`: which head misses the contextual group most narrowly?
     :func:`contextual_distance` reads the taxonomy's margins as how far each head is from the
     contextual group's rules; :func:`closest_to_contextual` picks the nearest other head.
   * :mod:`.attention_tv`: how close are the circuit's attention weights to the model's?
     :func:`circuit_attention_tv` measures the attention weights the circuit implies for each of
     its heads against the true ones.
   * :mod:`.added_head`: what changes when that head joins the circuit? :func:`add_head` rebuilds
     the circuit with it and measures the attention TV, the neurons found and the accuracy before
     and after (:class:`AddedHead`).

3. **The calibration text.** The method calibrates its denominators on one text.

   * :mod:`.calibration_clusters`: does calibrating each cluster of texts on a text of its own
     cluster help? Texts clustered by their denominators, one calibration text per cluster,
     scored against the default calibration (its names are read from the module:
     ``sweeps.calibration_clusters.X``).

:mod:`.shared` holds what several studies use: :func:`token_counts`, :func:`word_token`,
:func:`circuit_mean_keys`, :func:`sample_vocabulary` and :func:`jaccard`. Every public name of the
first two questions' modules is re-exported here (``sweeps.X``).
"""

from context_neurons.sweeps.actual_destination import actual_destination_terms
from context_neurons.sweeps.added_head import AddedHead, add_head
from context_neurons.sweeps.attention_tv import circuit_attention_tv
from context_neurons.sweeps.closest_head import closest_to_contextual, contextual_distance
from context_neurons.sweeps.destination_rules import DestinationRules, compare_destination_rules
from context_neurons.sweeps.destinations import (
    CLASSES,
    KEYWORD_MIN_LETTERS,
    STOP_RANKS,
    TOPIC_MIN_COUNT,
    DestinationClasses,
    DestinationSweep,
    SweepResult,
    destination_classes,
    sweep_destinations,
)
from context_neurons.sweeps.shared import (
    WORD,
    circuit_mean_keys,
    jaccard,
    sample_vocabulary,
    token_counts,
    word_token,
)

__all__ = [
    "AddedHead",
    "CLASSES",
    "KEYWORD_MIN_LETTERS",
    "STOP_RANKS",
    "TOPIC_MIN_COUNT",
    "WORD",
    "DestinationClasses",
    "DestinationRules",
    "DestinationSweep",
    "SweepResult",
    "actual_destination_terms",
    "add_head",
    "circuit_attention_tv",
    "circuit_mean_keys",
    "closest_to_contextual",
    "compare_destination_rules",
    "contextual_distance",
    "destination_classes",
    "jaccard",
    "sample_vocabulary",
    "sweep_destinations",
    "token_counts",
    "word_token",
]
