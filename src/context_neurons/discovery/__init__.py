"""Context neurons from the weights. This subpackage implements discovery (chapter 5; the book's
notation page ``book/notation.md``, section 5).

Gibson's paper, section "Finding context-sensitive neurons": the contextual heads write
``sum_i K[n, i] e(t_i)`` (chapter 4, :mod:`context_neurons.circuit`), so a layer-0 MLP neuron
``j`` receives, through LayerNorm 2 linearised, the decaying average of the *token contributions*

    contribution[j, t] = s2 * (gamma2 * (e(t) - mean(e(t)))) . W_in[:, j]
                       = e(t) . w_j,      w_j = s2 * centred(gamma2 * W_in[:, j]),

where ``s2`` is the median ``1 / std`` of LN2's input on the calibration text and ``gamma2`` LN2's
weight (ones when TransformerLens folded it into ``W_in``; centring ``e`` is the same as centring
the read vector).

One module per question:

* :mod:`.scores`: which neurons are context-sensitive: the contributions, the score ``top[j]``
  against ``theta`` and its Gaussian null, the bounded set carried into costly analyses;
* :mod:`.tokens`: what a neuron reads: its top and bottom tokens;
* :mod:`.sublatents`: whether a neuron reads one topic or several;
* :mod:`.pairs`: how alike two neurons are, in what they read and what they write;
* :mod:`.loudness`: how far the loudest tokens fill every neuron's extreme tokens (chapter 8);
* :mod:`.planted`: what the planted model planted at a neuron (labels, the planted model only).
"""

from context_neurons.discovery.loudness import (  # noqa: F401  (the chapter's namespace: disc.*)
    LOUD_FRACTION,
    Loudness,
    loud_slot_shares,
    loud_token_share,
    loud_tokens,
    loudness,
)
from context_neurons.discovery.pairs import (  # noqa: F401
    NeuronPair,
    neuron_pair,
    pair_similarity,
)
from context_neurons.discovery.planted import (  # noqa: F401
    planted_description,
    planted_topic_share,
    planted_topics,
)
from context_neurons.discovery.scores import (  # noqa: F401
    MAD_TO_SD,
    MAX_NEURONS,
    OTHER_VOCABULARIES,
    THETA,
    TOP_K,
    NeuronScores,
    ScoreSummary,
    carried,
    contributions,
    gaussian_null_score,
    get_scores,
    precision_recall,
    read_vectors,
    require_found,
    robust_location_scale,
    score_neurons,
    score_summary,
    scoring_vocabulary,
    selection_note,
    theta_sweep,
    top_of_read_vectors,
)
from context_neurons.discovery.sublatents import (  # noqa: F401
    SubLatents,
    centroid_cosines,
    spherical_kmeans,
    sub_latents,
)
from context_neurons.discovery.tokens import (  # noqa: F401
    token_str,
    token_table,
    token_tables,
    top_tokens,
)
