"""Token-predicting neurons. This module scores every MLP neuron of the later layers by how
strongly its output promotes one token (step 1 of the look-up method, chapter 7)."""

from __future__ import annotations

from typing import Iterable, SupportsIndex

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from context_neurons.checks import OutOfRangeError, as_index, check_layer, check_layer_neuron
from context_neurons.hooks import run_until
from context_neurons.models.weights import layer_norm_affine
from context_neurons.text.windows import calibration_tokens


@torch.no_grad()
def typical_final_scale(
    model: TransformerBridge, tokens: Int[Tensor, " pos"] | None = None
) -> float:
    """Median ``ln_final`` scale ``sqrt(var(x) + eps)`` of the final residual stream on real text.

    Args:
        model: the model.
        tokens: a text (``[BOS, ...]``); default: the calibration text.

    Returns:
        The median scale over positions 1.. (the BOS position is an outlier and is skipped).
    """
    if tokens is None:
        tokens = calibration_tokens(model.tokenizer, n_ctx=model.cfg.n_ctx)
    final = f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"  # the input of ln_final
    resid = run_until(model, tokens.to(model.cfg.device)[None], final)[final][0]
    centred = resid - resid.mean(-1, keepdim=True)
    scale = torch.sqrt(centred.pow(2).mean(-1) + model.cfg.eps)
    return float(scale[1:].median()) if len(scale) > 1 else float(scale[0])


@torch.no_grad()
def neuron_logit_effect(
    model: TransformerBridge, layer: int, neuron: int, final_scale: float = 1.0
) -> Float[Tensor, " d_vocab"]:
    """Direct effect on the logits of one unit of activation of a neuron (ln_final linearised).

    ``(w_out - mean(w_out)) * gamma_final @ W_U / final_scale``, where ``gamma_final`` is
    ``ln_final``'s weight (ones when TransformerLens folded it into ``W_U``).
    """
    layer, neuron = check_layer_neuron(model, layer, neuron)
    index = torch.tensor([neuron], device=model.cfg.device)
    return _logit_effects(model, layer, index, final_scale)[0]


def _logit_effects(model, layer, neurons, final_scale) -> Float[Tensor, "n d_vocab"]:
    w_out = model.W_out[layer][neurons.to(model.cfg.device)]
    w_out = w_out - w_out.mean(-1, keepdim=True)
    gamma, _ = layer_norm_affine(model.ln_final, model.cfg.d_model, w_out.device)
    return (w_out * gamma) @ model.W_U / final_scale


def later_layers(model: TransformerBridge, n_last_layers: SupportsIndex | None = None) -> list[int]:
    """The last ``n_last_layers`` MLP layers (default: the later half, at least one layer).

    Neo et al. score only late layers, where the best neuron of each token concentrates (their
    Figure 3: the last five of GPT-2 Large's 36 layers). The default keeps the later half: layer
    1 of a 2-layer model, layers 6..11 of GPT-2 Small.
    """
    n_layers = model.cfg.n_layers
    n_last = (
        max(1, n_layers // 2) if n_last_layers is None else as_index(n_last_layers, "n_last_layers")
    )
    if not 1 <= n_last <= n_layers:
        raise OutOfRangeError(
            f"n_last_layers must be in 1..{n_layers} (this model's layer count), got {n_last}."
        )
    return list(range(n_layers - n_last, n_layers))


@torch.no_grad()
def token_prediction_scores(
    model: TransformerBridge,
    layers: Iterable[int] | None = None,
    final_scale: float | None = None,
    chunk: int = 512,
    n_last_layers: int | None = None,
) -> pd.DataFrame:
    """Score every MLP neuron of ``layers`` by how strongly it promotes one token.

    Args:
        model: the model.
        layers: MLP layers to score (default: :func:`later_layers` with ``n_last_layers``).
        final_scale: the frozen ``ln_final`` scale (default :func:`typical_final_scale`); it sets
            the units of the ``logit`` column only, not the scores.
        chunk: neurons per matrix product (memory: ``chunk * d_vocab`` floats).
        n_last_layers: without ``layers``, score the last this many layers (default: the later
            half of the model, as in :func:`later_layers`).

    Returns:
        One row per neuron: ``layer, neuron, token_id, token`` (its top token), ``score`` (the top
        logit effect minus the mean over the vocabulary, in standard deviations), ``gap`` (top-1
        minus top-2, in standard deviations), ``logit`` (top-1 logit effect per unit activation,
        centred) and ``runner_up`` (the second token).
    """
    if layers is None:
        layers = later_layers(model, n_last_layers)
    elif n_last_layers is not None:
        raise OutOfRangeError("Pass either layers or n_last_layers, not both.")
    layers = list(layers)
    if not layers:
        raise OutOfRangeError("No layers to score: pass at least one MLP layer index.")
    layers = [check_layer(model, layer) for layer in layers]
    if final_scale is None:
        final_scale = typical_final_scale(model)
    frames = []
    for layer in layers:
        for start in range(0, model.cfg.d_mlp, chunk):
            neurons = torch.arange(
                start, min(start + chunk, model.cfg.d_mlp), device=model.cfg.device
            )
            effect = _logit_effects(model, layer, neurons, final_scale)
            mean, std = effect.mean(-1), effect.std(-1)
            top = effect.topk(2, dim=-1)
            frames.append(
                pd.DataFrame(
                    {
                        "layer": layer,
                        "neuron": neurons.cpu().numpy(),
                        "token_id": top.indices[:, 0].cpu().numpy(),
                        "score": ((top.values[:, 0] - mean) / std).double().cpu().numpy(),
                        "gap": ((top.values[:, 0] - top.values[:, 1]) / std).double().cpu().numpy(),
                        "logit": (top.values[:, 0] - mean).double().cpu().numpy(),
                        "runner_up_id": top.indices[:, 1].cpu().numpy(),
                    }
                )
            )
    table = pd.concat(frames, ignore_index=True)
    table.insert(3, "token", [model.tokenizer.decode([int(t)]) for t in table["token_id"]])
    table["runner_up"] = [model.tokenizer.decode([int(t)]) for t in table.pop("runner_up_id")]
    return table


def best_neurons(scores: pd.DataFrame, per_layer: int = 5) -> pd.DataFrame:
    """The ``per_layer`` highest-scoring neurons of each layer, best first within a layer."""
    ranked = scores.sort_values(["layer", "score"], ascending=[True, False], kind="stable")
    return ranked.groupby("layer", sort=True).head(per_layer).reset_index(drop=True)


def best_neuron_per_token(scores: pd.DataFrame) -> pd.DataFrame:
    """For each predicted token, its highest-scoring neuron (the paper's Figure 3 population)."""
    ranked = scores.sort_values("score", ascending=False, kind="stable")
    return ranked.drop_duplicates("token_id").reset_index(drop=True)


def select_neurons(scores: pd.DataFrame, n: int = 4) -> list[tuple[int, int]]:
    """The ``n`` highest-scoring neurons with distinct predicted tokens, as ``(layer, neuron)``."""
    best = best_neuron_per_token(scores).head(n)
    return [(int(r.layer), int(r.neuron)) for r in best.itertuples()]
