"""All steps for one neuron. This module scans a prompt pool once and runs the four steps of
the look-up method for a token-predicting neuron, and tabulates what they found for several
neurons: their top heads (:func:`top_heads_table`) and their explanations scored as classifiers
(:func:`explanation_results`) (chapter 7)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from context_neurons.checks import check_layer_neuron
from context_neurons.lookups.activity import (
    ExplainerScore,
    HeadActivity,
    evaluate_explainer,
    explanation_dataset,
)
from context_neurons.lookups.attribution import (
    NeuronAttribution,
    ablation_drops,
    attribute_layers,
    attribute_neuron,
    head_name,
    rank_heads,
)
from context_neurons.lookups.explainers import (
    Explainer,
    Explanation,
    NoExplanation,
    OfflineExplainer,
    examples_from_prompts,
    normalise_word,
)
from context_neurons.lookups.prompts import (
    NotFiring,
    Prompt,
    top_activating_prompts,
    truncate_prompts,
)
from context_neurons.lookups.scores import neuron_logit_effect, select_neurons
from context_neurons.lookups.scores import token_prediction_scores
from context_neurons.text.windows import lookup_windows


def _final_positions(prompts: Sequence[Prompt], device) -> tuple[Tensor, Tensor]:
    """Row indices and final-token positions of right-padded prompts, on ``device``."""
    rows = torch.arange(len(prompts), device=device)
    ends = torch.tensor([len(p.tokens) - 1 for p in prompts], device=device)
    return rows, ends


@dataclass
class LookupPool:
    """A prompt pool scanned once: windows, per-neuron attributions, per-layer mean ``hook_z``."""

    windows: list[Int[Tensor, " _pos"]]
    labels: list[str]
    attributions: dict[tuple[int, int], NeuronAttribution] = field(default_factory=dict)
    mean_z: dict[int, Float[Tensor, "layer head_index d_head"]] = field(default_factory=dict)


def scan_pool(
    model: TransformerBridge,
    windows: list[Int[Tensor, " _pos"]],
    labels: list[str],
    neurons: Sequence[tuple[int, int]],
    pool: LookupPool | None = None,
    batch_size: int = 32,
) -> LookupPool:
    """Attribute ``(layer, neuron)`` pairs over the windows: one forward pass over the pool, up to
    the deepest layer asked for, serves the neurons of every layer (:func:`attribute_layers`).

    Neurons already in ``pool`` are not scanned again.
    """
    pool = pool or LookupPool(windows, labels)
    by_layer: dict[int, list[int]] = {}
    for layer, neuron in neurons:
        layer, neuron = check_layer_neuron(model, layer, neuron)
        if (layer, neuron) not in pool.attributions:
            by_layer.setdefault(layer, []).append(neuron)
    if by_layer:
        pool.attributions.update(
            attribute_layers(model, pool.windows, by_layer, batch_size, mean_z=pool.mean_z)
        )
    return pool


def firing_windows(pool: LookupPool, layer: int, neuron: int) -> int:
    """How many windows of a scanned pool switch the neuron on (a positive pre-activation at some
    position after BOS): :func:`examine_neuron` has that many prompts at most."""
    pre = pool.attributions[(layer, neuron)].pre[:, 1:]
    lengths = torch.tensor([len(w) - 1 for w in pool.windows], device=pre.device)
    real = torch.arange(pre.shape[1], device=pre.device)[None] < lengths[:, None]
    return int(((pre > 0) & real).any(-1).sum())


@dataclass
class NeuronLookup:
    """What :func:`examine_neuron` found for one token-predicting neuron."""

    layer: int
    neuron: int
    token: str
    score: float
    prompts: list[Prompt]  # truncated top-activating prompts
    head_attribution: Float[Tensor, "prompt layer head_index"]  # at the prompts' final tokens
    excluded: Float[Tensor, " prompt"]  # embeddings, MLP outputs and biases
    pre: Float[Tensor, " prompt"]  # the pre-activation at the prompts' final tokens
    ablation: Float[Tensor, "prompt layer head_index"]  # mean-ablation drops (nan: not ablated)
    top_heads: list[tuple[int, int, float]]
    activity: HeadActivity
    evaluation: ExplainerScore
    prompt_attribution: NeuronAttribution | None = None  # of the truncated prompts, all positions
    skipped: int = 0  # top-activating windows left out because the neuron did not fire there

    @property
    def ablated(self) -> list[tuple[int, int]]:
        """The heads whose ablation was measured (the others' drops are ``nan``)."""
        done = ~self.ablation[0].isnan()
        return [(int(l), int(h)) for l, h in torch.nonzero(done).tolist()]

    @property
    def explanation(self) -> Explanation | None:
        """The top head's explanation (``None`` when none could be written: see ``evaluation``)."""
        return self.evaluation.explanation

    def contributions(self) -> dict[str, float]:
        """Mean contributions to the pre-activation at the prompts' final tokens, by part."""
        attr = self.prompt_attribution
        rows, ends = _final_positions(self.prompts, attr.pre.device)
        heads = attr.heads[rows, ends]  # [prompt, layer, head]
        layer, head, _ = self.top_heads[0]
        top = heads[:, layer, head]
        return {
            "top head": float(top.mean()),
            "other heads": float((heads.sum((-2, -1)) - top).mean()),
            "embeddings": float((attr.embed + attr.pos_embed)[rows, ends].mean()),
            "MLP outputs": float(attr.mlp.sum(-1)[rows, ends].mean()),
            "biases": float(attr.bias[rows, ends].mean()),
            "pre-activation": float(attr.pre[rows, ends].mean()),
        }

    def summary(self) -> dict[str, Any]:
        """The row the main job reports for this neuron."""
        return {
            "layer": self.layer,
            "neuron": self.neuron,
            "token": self.token,
            "top_heads": [head_name(l, h) for l, h, _ in self.top_heads],
            "explanation_accuracy": round(self.evaluation.accuracy, 3),
            "majority_chance": round(self.evaluation.chance, 3),  # beside the accuracy it bounds
            "balanced_accuracy": round(self.evaluation.balanced_accuracy, 3),  # chance: 0.5
            "prompts": len(self.prompts),
            "prompts_skipped_not_firing": self.skipped,
            "explanation": (
                self.explanation.tokens[:8]
                if self.explanation
                else self.evaluation.error
            ),
        }


def examine_neuron(
    model: TransformerBridge,
    layer: int,
    neuron: int,
    pool: LookupPool,
    explainer: Explainer | None = None,
    n_prompts: int = 10,
    n_heads: int = 3,
    scores: pd.DataFrame | None = None,
    n_ablate: int = 8,
) -> NeuronLookup:
    """Run the four steps for one neuron: prompts, truncation, heads (attribution and ablation),
    and an explanation of the top head evaluated on held-out prompts.

    Args:
        model: the model.
        layer, neuron: the neuron.
        pool: the prompt pool (from :func:`scan_pool`; the neuron is scanned if missing).
        explainer: default the offline explainer (deterministic; pass
            ``get_explainer("auto")`` to use an LLM when its key is set).
        n_prompts: top-activating prompts to truncate and attribute.
        n_heads: heads reported.
        n_ablate: heads ablated to check the attribution: the ``n_heads`` reported ones, then
            those with the largest mean ``|attribution|``, ``n_ablate`` in all (at least
            ``n_heads``). Attribution comes first, so only heads that matter are ablated, all of
            them in a few batched passes that stop at the neuron's layer.

    Prompts on which the neuron does not fire (the pool has fewer than ``n_prompts`` such
    windows, or the pre-activation is not positive) are skipped and counted in ``skipped``.

    Raises:
        NotFiring: the neuron fires on no window of the pool.
        scores: a :func:`token_prediction_scores` table, for the neuron's score (else computed).
    """
    layer, neuron = check_layer_neuron(model, layer, neuron)
    if scores is not None and ((scores.layer == layer) & (scores.neuron == neuron)).any():
        row = scores[(scores.layer == layer) & (scores.neuron == neuron)].iloc[0]
        token, score = str(row.token), float(row.score)
    else:
        effect = neuron_logit_effect(model, layer, neuron)
        token = model.tokenizer.decode([int(effect.argmax())])
        score = float((effect.max() - effect.mean()) / effect.std())
    scan_pool(model, pool.windows, pool.labels, [(layer, neuron)], pool)
    scanned = pool.attributions[(layer, neuron)]
    top = top_activating_prompts(
        model, pool.windows, layer, neuron, k=n_prompts, labels=pool.labels, acts=scanned.pre
    )
    # Prompts where the neuron does not fire have nothing to truncate: skipped and counted.
    prompts, _ = truncate_prompts(model, [p for p in top if p.activation > 0], layer, neuron)
    if not prompts:
        raise NotFiring(
            f"Neuron {layer}.{neuron} never has a positive pre-activation on these "
            f"{len(pool.windows)} windows: there is no prompt to truncate or explain "
            f"(examine another neuron, or scan more text)."
        )
    attr = attribute_neuron(model, [p.tokens for p in prompts], layer, neuron)
    rows, ends = _final_positions(prompts, attr.pre.device)
    head_attr = attr.heads[rows, ends].cpu()
    top_heads = rank_heads(head_attr, n_heads)
    # Attribute first, then ablate only the heads that matter: the reported ones and those with
    # the largest mean |attribution| (either sign), n_ablate in all, in one batched pass or few.
    chosen = [(l, h) for l, h, _ in top_heads]
    for l, h, _ in rank_heads(head_attr.abs(), head_attr[0].numel()):
        if len(chosen) >= n_ablate:
            break
        if (l, h) not in chosen:
            chosen.append((l, h))
    drops = ablation_drops(
        model, prompts, layer, neuron, heads=chosen, mode="mean", mean_z=pool.mean_z[layer]
    ).cpu()
    ablation = torch.full(head_attr.shape, float("nan"))
    for k, (l, h) in enumerate(chosen):
        ablation[:, l, h] = drops[:, k]
    activity = explanation_dataset(
        model,
        pool.windows,
        layer,
        neuron,
        top_heads[0][:2],
        attribution=scanned,
        labels=pool.labels,
    )
    explainer = explainer or OfflineExplainer(model.tokenizer)
    try:
        evaluation = evaluate_explainer(explainer, activity, model.tokenizer)
    except NoExplanation as err:  # the data admit none; service errors propagate
        evaluation = ExplainerScore.unexplained(str(err), activity.base_rate)
    return NeuronLookup(
        layer,
        neuron,
        token,
        score,
        prompts,
        head_attr,
        attr.excluded()[rows, ends].cpu(),
        attr.pre[rows, ends].cpu(),
        ablation,
        top_heads,
        activity,
        evaluation,
        attr,
        skipped=len(top) - len(prompts),
    )


def examine_best_neurons(
    model: TransformerBridge, n: int = 4, progress: bool = False
) -> dict[tuple[int, int], NeuronLookup | NotFiring]:
    """Chapter 7's look-ups as the main job runs them: the ``n`` best token-predicting neurons
    (:func:`~.scores.select_neurons`), one scan of the domain texts' windows
    (:func:`~context_neurons.text.windows.lookup_windows`: general prose rarely fires a topic
    look-up), each neuron examined (:func:`examine_neuron`) or, when it does not fire, the
    :class:`NotFiring` that says so (reported, never skipped)."""
    scores = token_prediction_scores(model)
    windows, labels = lookup_windows(model.tokenizer)
    chosen = select_neurons(scores, n=n)
    pool = scan_pool(model, [w.to(model.cfg.device) for w in windows], labels, chosen)
    out: dict[tuple[int, int], NeuronLookup | NotFiring] = {}
    for layer, neuron in chosen:
        try:
            out[(layer, neuron)] = examine_neuron(model, layer, neuron, pool, scores=scores)
        except NotFiring as err:
            out[(layer, neuron)] = err
        if progress:
            print(f"look-ups: examined neuron {layer}.{neuron}")
    return out


def topic_share(
    activity: HeadActivity, explanation: Explanation, topic_words: Iterable[str], tokenizer
) -> float:
    """Of the held-out active prompts an offline explanation detects, the fraction its topic words
    detect (its words in ``topic_words``, both normalised by
    :func:`~context_neurons.lookups.explainers.normalise_word`).

    1.0 means every held-out hit of the explanation comes from a topic word: other words in the
    explanation are training-set correlates that detect nothing new. ``nan`` without hits.
    """
    reader = OfflineExplainer(tokenizer)
    topic = {normalise_word(w) for w in topic_words}
    words = set(explanation.tokens)
    prompts, active = activity.split(train=False)
    hits = topic_hits = 0
    for example, is_active in zip(examples_from_prompts(prompts, tokenizer), active):
        present = reader.words(example) & words if is_active else set()
        hits += bool(present)
        topic_hits += bool(present & topic)
    return topic_hits / hits if hits else float("nan")


def _neuron_label(lookup: NeuronLookup) -> str:
    """``layer.neuron 'token'``: a neuron as chapter 7's tables name it."""
    return f"{lookup.layer}.{lookup.neuron} {lookup.token!r}"


def top_heads_table(lookups: Sequence[NeuronLookup]) -> pd.DataFrame:
    """The top heads of each examined neuron over its truncated prompts (chapter 7, section 7.3).

    Returns:
        One row per neuron: ``neuron`` (``layer.neuron 'token'``), ``prompt length`` (the mean
        length of its truncated prompts, BOS not counted), ``head 1..n`` (the heads of largest
        mean attribution), ``attribution 1`` (the first one's mean), ``ablation drop 1`` (the
        mean drop when it is mean-ablated) and ``attribution 2`` (the runner-up's mean).
    """
    return pd.DataFrame(
        [
            {
                "neuron": _neuron_label(lookup),
                "prompt length": sum(len(p.tokens) - 1 for p in lookup.prompts)
                / len(lookup.prompts),
                **{f"head {i + 1}": head_name(l, h)
                   for i, (l, h, _) in enumerate(lookup.top_heads)},
                "attribution 1": lookup.top_heads[0][2],
                "ablation drop 1": float(
                    lookup.ablation[:, lookup.top_heads[0][0], lookup.top_heads[0][1]].mean()
                ),
                "attribution 2": lookup.top_heads[1][2],
            }
            for lookup in lookups
        ]
    )


def explanation_results(lookups: Sequence[NeuronLookup]) -> pd.DataFrame:
    """Each examined neuron's top head and its explanation, scored as a classifier on the held-out
    prompts (chapter 7, section 7.4).

    Returns:
        One row per neuron: ``name`` (head and token, a figure's label), ``neuron``, ``head``,
        ``active`` (the base rate), ``accuracy``, ``chance`` (the majority guess's accuracy),
        ``balanced_accuracy`` and ``explanation`` (its words, or why there is none).
    """
    return pd.DataFrame(
        [
            {
                "name": f"{head_name(*lookup.activity.head)}\n{lookup.token!r}",
                "neuron": f"{lookup.layer}.{lookup.neuron}",
                "head": head_name(*lookup.activity.head),
                "active": lookup.activity.base_rate,
                "accuracy": lookup.evaluation.accuracy,
                "chance": lookup.evaluation.chance,
                "balanced_accuracy": lookup.evaluation.balanced_accuracy,
                "explanation": (
                    ", ".join(lookup.explanation.tokens)
                    if lookup.explanation
                    else lookup.evaluation.error
                ),
            }
            for lookup in lookups
        ]
    )
