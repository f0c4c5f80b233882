"""Context look-ups. This subpackage implements chapter 7 (``book/notation.md``, section 7), after
Neo, Cohen and Barez (2024), "Interpreting Context Look-ups in Transformers".

A *context look-up* is an attention head that recognises a context and switches on a later MLP
neuron that predicts one token in that context. The method has four steps:

1. **Token-predicting neurons** (:func:`token_prediction_scores`), in the later layers only
   (:func:`later_layers`: the later half by default, as the paper kept the last layers of its
   models). The direct effect of neuron
   ``j`` of layer ``l`` on the logits is its output weight read through the final LayerNorm and the
   unembedding. TransformerLens's ``fold_ln`` folds ``ln_final``'s weight (and bias) into ``W_U``/
   ``b_U`` and leaves a bare normalisation ``(x - mean(x)) / scale``; we linearise it with the
   scale frozen at the typical value on real text (:func:`typical_final_scale`), so the logit
   effect of one unit of activation is ``(W_out[l][j] - mean) @ W_U / scale`` (with an unfolded
   ``ln_final`` its weight multiplies first). The score is ``(max - mean) / std`` of that vector
   over the vocabulary (scale-free: the frozen scale only sets the units of the logit column); we
   also report the gap between the top two tokens in the same units.
2. **Activating prompts** (:func:`top_activating_prompts`, :func:`truncate_prompts`). One
   batched scan of the windows of the domain texts (:func:`lookup_windows`, :func:`scan_pool`)
   reads ``blocks.{l}.mlp.hook_pre``; the best prompt of each window ends at its most activating
   token and is truncated to its shortest suffix (after ``<|endoftext|>``) that keeps at least
   80% of the pre-activation at that token, checked by running the suffixes through the model,
   shortest first, all prompts' suffixes in shared batches (:func:`final_activations`). Prompts
   on which the neuron does not fire are skipped and counted (:class:`NotFiring` for one).
3. **Responsible heads** (:func:`attribute_neuron`). The pre-activation is linear in the residual
   stream once ``ln2``'s scale is fixed at its *actual* value at that position, so it splits
   exactly into one term per upstream head (``hook_z @ W_O`` dotted with the centred, ``ln2``-
   weighted ``W_in[:, j]``, over the scale) plus the parts we do not attribute: token and position
   embeddings, earlier MLP outputs (with their biases) and biases (attention output biases,
   ``ln2``'s bias and ``b_in``). The sum is the pre-activation to float precision (tested).
   :func:`attribute_layers` serves neurons of several layers from one forward pass, keeping only
   the projections (no cached activations). :func:`ablation_drops` checks the direct attribution
   against zero- or mean-ablating the heads whose attribution matters most (attribute first, then
   ablate those few; batched: one forward pass ablates several heads, and every pass stops at the
   neuron's layer).
4. **Explanations** (:mod:`.explainers`). When is a head active? An explainer reads
   prompts where the head's attribution is high and prompts where it is not and writes an
   explanation; the explanation is scored as a zero-shot classifier of prompts from held-out
   documents (:func:`explanation_dataset`, split by a hash of the document, :func:`is_held_out`;
   :func:`evaluate_explainer`).

:func:`examine_neuron` runs all four steps for one neuron, :func:`examine_best_neurons`
for the best token-predicting neurons (:mod:`.report`). Modules:
:mod:`.scores` (1), :mod:`.prompts` (2), :mod:`.attribution` (3), :mod:`.activity` and
:mod:`.explainers` (4); :mod:`.planted` checks the planted model's look-ups against what was
found.
"""

from context_neurons.lookups.activity import (  # noqa: F401  (the chapter's namespace: lk.*)
    ACTIVE_FRACTION,
    HELD_OUT_FRACTION,
    ExplainerScore,
    HeadActivity,
    WordOdds,
    evaluate_explainer,
    explanation_dataset,
    word_odds,
)
from context_neurons.lookups.attribution import (  # noqa: F401
    NeuronAttribution,
    ablation_drops,
    attended_tokens,
    attribute_layers,
    attribute_neuron,
    attribute_neurons,
    head_name,
    mean_head_outputs,
    rank_heads,
)
from context_neurons.lookups.prompts import (  # noqa: F401
    KEEP_FRACTION,
    TOKENS_PER_PASS,
    NotFiring,
    Prompt,
    as_batch,
    final_activations,
    neuron_activations,
    prompts_table,
    suffix_activations,
    top_activating_prompts,
    truncate_prompt,
    truncate_prompts,
    truncation_table,
)
from context_neurons.lookups.planted import (  # noqa: F401
    PlantedRecovery,
    planted_recovery,
    selection_against_plan,
)
from context_neurons.lookups.report import (  # noqa: F401
    LookupPool,
    NeuronLookup,
    examine_best_neurons,
    examine_neuron,
    explanation_results,
    firing_windows,
    scan_pool,
    top_heads_table,
    topic_share,
)
from context_neurons.lookups.scores import (  # noqa: F401
    best_neuron_per_token,
    best_neurons,
    later_layers,
    neuron_logit_effect,
    select_neurons,
    token_prediction_scores,
    typical_final_scale,
)
from context_neurons.text.windows import (  # noqa: F401  (windows of chapter 7)
    document_of,
    document_windows,
    is_held_out,
    lookup_windows,
)
