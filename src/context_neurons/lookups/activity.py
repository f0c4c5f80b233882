"""When is a head active? This module builds the explanation data set of a head (prompts
labelled active or not, split by document), lists the words that mark its active training prompts
(:func:`word_odds`) and scores an explainer on it (step 4, chapter 7)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from context_neurons.checks import InputError, check_layer_neuron, check_upstream_head
from context_neurons.lookups.attribution import NeuronAttribution, attribute_neuron, head_name
from context_neurons.lookups.explainers import (
    Explainer,
    Explanation,
    NoExplanation,
    OfflineExplainer,
    examples_from_prompts,
)
from context_neurons.lookups.prompts import Prompt, top_activating_prompts
from context_neurons.text.windows import document_of, is_held_out

ACTIVE_FRACTION = 0.25  # a head is "active" at >= this fraction of its attribution on top prompts
HELD_OUT_FRACTION = 0.5  # documents whose id hashes below this fraction are held out


@dataclass
class HeadActivity:
    """Prompts labelled by whether one head drives the neuron (for explaining and classifying)."""

    layer: int
    neuron: int
    head: tuple[int, int]
    threshold: float
    prompts: list[Prompt]
    attribution: Float[Tensor, " prompt"]
    active: Bool[Tensor, " prompt"]
    train: Bool[Tensor, " prompt"]

    @property
    def base_rate(self) -> float:
        """Fraction of active prompts."""
        return float(self.active.float().mean())

    def split(self, train: bool) -> tuple[list[Prompt], list[bool]]:
        """The training (``train=True``) or held-out prompts, and whether each is active."""
        mask = self.train if train else ~self.train
        idx = torch.nonzero(mask).flatten().tolist()
        active = self.active.tolist()
        return [self.prompts[i] for i in idx], [active[i] for i in idx]

    def split_findings(self) -> list[str]:
        """How the split by document fell (chapter 7, section 7.4): prompts and documents on each
        side, and how many ``domain|corpus`` pairs have documents on both sides."""
        n_train = int(self.train.sum())
        documents = {document_of(p.source) for p in self.prompts}
        held = {d for d in documents if is_held_out(d)}
        sides: dict[str, set[bool]] = {}
        for prompt, train in zip(self.prompts, self.train.tolist()):
            corpus = document_of(prompt.source).split(":")[0]
            sides.setdefault(f"{prompt.source.split('|')[0]}|{corpus}", set()).add(train)
        both = sum(len(v) == 2 for v in sides.values())
        return [f"{len(self.prompts)} prompts from {len(documents)} documents: {n_train} training "
                f"prompts, {len(self.prompts) - n_train} held out ({len(held)} documents held "
                "out)",
                f"domain|corpus pairs with documents on both sides: {both} of {len(sides)}"]


def _train_threshold(
    model: TransformerBridge,
    windows: list[Tensor],
    layer: int,
    neuron: int,
    pre: Float[Tensor, "batch pos"],
    head_attr: Float[Tensor, "batch pos"],
    train_windows: list[int],
    k: int = 10,
) -> float:
    """:data:`ACTIVE_FRACTION` of the head's mean attribution over the neuron's ``k`` most
    activating prompts among the training windows."""
    if not train_windows:
        raise InputError("No training window: every document hashed into the held-out split.")
    index = torch.tensor(train_windows, device=pre.device)
    top = top_activating_prompts(
        model, [windows[i] for i in train_windows], layer, neuron, k=k, acts=pre[index]
    )
    values = [head_attr[train_windows[p.window], p.end] for p in top]
    return ACTIVE_FRACTION * float(torch.stack(values).mean())


def explanation_dataset(
    model: TransformerBridge,
    windows: list[Int[Tensor, " _pos"]],
    layer: int,
    neuron: int,
    head: tuple[int, int],
    attribution: NeuronAttribution | None = None,
    threshold: float | None = None,
    every: int = 8,
    labels: list[str] | None = None,
    held_out_fraction: float = HELD_OUT_FRACTION,
) -> HeadActivity:
    """Prompts ``window[: p + 1]`` at every ``every``-th position, labelled active or not.

    A prompt is *active* for the head when the head's direct attribution to the neuron at its final
    token is at least ``threshold``; the default threshold is :data:`ACTIVE_FRACTION` of the head's
    mean attribution over the neuron's 10 most activating *training* prompts, so "active" means
    "doing what it does when the neuron fires" and nothing about the held-out prompts is used.

    The split is by document (:func:`document_of` of each window's label, so all prompts of one
    document stay together): a document is held out when its hash says so (:func:`is_held_out`,
    about ``held_out_fraction`` of the documents, deterministic). Held-out prompts never share
    text with training prompts. Without ``labels`` each window is its own document.
    """
    layer, neuron = check_layer_neuron(model, layer, neuron)
    head = check_upstream_head(model, head[0], head[1], layer)
    if every < 1:
        raise InputError(f"every must be >= 1, got {every}.")
    if labels is not None and len(labels) != len(windows):
        raise InputError(f"{len(labels)} labels for {len(windows)} windows: pass one per window.")
    if attribution is None:
        attribution = attribute_neuron(model, windows, layer, neuron)
    head_attr = attribution.heads[..., head[0], head[1]]  # [batch, pos]
    names = (
        [document_of(label) for label in labels]
        if labels
        else [str(w) for w in range(len(windows))]
    )
    held_out = [is_held_out(name, held_out_fraction) for name in names]
    if threshold is None:
        train_windows = [w for w, out in enumerate(held_out) if not out]
        threshold = _train_threshold(
            model, windows, layer, neuron, attribution.pre, head_attr, train_windows
        )
    # Every prompt (w, p) with p = every, 2 every, ... inside window w, in window-major order.
    device = head_attr.device
    lengths = torch.tensor([len(window) for window in windows], device=device)
    positions = torch.arange(every, head_attr.shape[1], every, device=device)
    w_index, p_index = torch.nonzero(positions[None] < lengths[:, None], as_tuple=True)
    p_index = positions[p_index]
    values = head_attr[w_index, p_index].cpu()
    pre = attribution.pre[w_index, p_index].tolist()
    w_list, p_list = w_index.tolist(), p_index.tolist()
    cpu_windows = [window.cpu() for window in windows]
    prompts = [
        Prompt(cpu_windows[w][: p + 1], a, labels[w] if labels else str(w), w, p)
        for w, p, a in zip(w_list, p_list, pre)
    ]
    train = torch.tensor([not held_out[w] for w in w_list], dtype=torch.bool)
    return HeadActivity(
        layer, neuron, head, float(threshold), prompts, values, values >= threshold, train
    )


@dataclass(frozen=True)
class ExplainerScore:
    """An explanation of one head, scored as a classifier of its held-out prompts (step 4).

    Attributes:
        explanation: the explanation written from the training prompts; ``None`` when the data
            admit none (``error`` says why).
        accuracy: the fraction of held-out prompts classified right (``nan`` without one).
        balanced_accuracy: the mean of the true-positive and true-negative rates.
        chance: the majority guess's accuracy on the held-out prompts.
        base_rate: the fraction of held-out prompts active (without an explanation: of all).
        n_test: the held-out prompts classified.
        error: why no explanation was written (``""`` when one was).
    """

    explanation: Explanation | None
    accuracy: float
    balanced_accuracy: float
    chance: float
    base_rate: float
    n_test: int
    error: str = ""

    @classmethod
    def unexplained(cls, error: str, base_rate: float) -> ExplainerScore:
        """The score of a head whose data admit no explanation (``error`` says why)."""
        nan = float("nan")
        return cls(None, nan, nan, nan, base_rate, 0, error)

    @property
    def beats_chance(self) -> bool:
        """An explanation more accurate than the majority guess, with balanced accuracy over
        one half."""
        return (
            self.explanation is not None
            and self.accuracy > self.chance
            and self.balanced_accuracy > 0.5
        )


def evaluate_explainer(explainer: Explainer, activity: HeadActivity, tokenizer) -> ExplainerScore:
    """Explain on the training prompts; classify the held-out prompts with the explanation alone.

    Raises:
        NoExplanation: when the training prompts are all active or all inactive, or no prompt is
            held out.
    """
    train_prompts, train_labels = activity.split(train=True)
    test_prompts, test_labels = activity.split(train=False)
    if not any(train_labels) or all(train_labels):
        raise NoExplanation(
            "The training prompts are all active or all inactive: nothing to explain "
            "(use more windows, or a lower threshold)."
        )
    if not test_labels:
        raise NoExplanation("No held-out prompt to evaluate on: use more windows.")
    train = examples_from_prompts(train_prompts, tokenizer)
    test = examples_from_prompts(test_prompts, tokenizer)
    explanation = explainer.explain(
        [e for e, a in zip(train, train_labels) if a],
        [e for e, a in zip(train, train_labels) if not a],
    )
    predicted = torch.tensor(explainer.predict(explanation, test), dtype=torch.bool)
    truth = torch.tensor(test_labels, dtype=torch.bool)
    accuracy = float((predicted == truth).float().mean())
    tpr = float(predicted[truth].float().mean()) if truth.any() else float("nan")
    tnr = float((~predicted[~truth]).float().mean()) if (~truth).any() else float("nan")
    base_rate = float(truth.float().mean())
    return ExplainerScore(
        explanation,
        accuracy,
        balanced_accuracy=(tpr + tnr) / 2,
        chance=max(base_rate, 1 - base_rate),
        base_rate=base_rate,
        n_test=len(test_labels),
    )


@dataclass(frozen=True)
class WordOdds:
    """The words that mark a head's active training prompts (chapter 7, section 7.4).

    Attributes:
        head: the head, ``(layer, head)``.
        n_active: the active training prompts.
        n_train: all training prompts.
        table: the words of largest log-odds ratio, highest first: ``word``, ``log-odds``,
            ``active with`` and ``inactive with`` (the active and inactive training prompts that
            contain it); ``None`` without a contrast (every prompt active, or none).
    """

    head: tuple[int, int]
    n_active: int
    n_train: int
    table: pd.DataFrame | None

    @property
    def summary(self) -> str:
        """``L<layer>H<head>: <n> active of <m> training prompts``."""
        return f"{head_name(*self.head)}: {self.n_active} active of {self.n_train} training prompts"


def word_odds(activity: HeadActivity, tokenizer, k: int = 10) -> WordOdds:
    """:class:`WordOdds` of the ``k`` words with the largest log-odds ratio of appearing in an
    active training prompt rather than an inactive one (the offline explainer's statistics,
    :meth:`~context_neurons.lookups.explainers.OfflineExplainer.word_log_odds`)."""
    prompts, active = activity.split(train=True)
    n_active = sum(active)
    table = None
    if 0 < n_active < len(active):  # a contrast to explain
        examples = examples_from_prompts(prompts, tokenizer)
        odds = OfflineExplainer(tokenizer).word_log_odds(
            [e for e, a in zip(examples, active) if a],
            [e for e, a in zip(examples, active) if not a],
        )
        table = pd.DataFrame(odds[:k], columns=["word", "log-odds", "active with", "inactive with"])
    return WordOdds(activity.head, n_active, len(active), table)
