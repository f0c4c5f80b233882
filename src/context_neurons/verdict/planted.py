"""The protocol's planted control (chapter 8): both discovery scores against the planted truth.

On the planted model, whose context neurons we wrote, the frequency-aware score must recover what
the paper's ``top[j]`` recovers. Its domains are the planted topics: ``p_D`` is uniform over each
topic's *label* half, the word-list half never used to plant
(:mod:`context_neurons.models.planted_topics`), so the check does not reuse what built the model.
Pass rule, fixed before it was first computed: the frequency-aware score's precision among the
|T| highest-scoring neurons is at least ``top[j]``'s minus :data:`PRECISION_MARGIN`.
"""

from __future__ import annotations

import numpy as np
from jaxtyping import Float
from torch import Tensor

from context_neurons import circuit as cc
from context_neurons import discovery as disc
from context_neurons.domain_shift import path_pieces, predict_path_shifts, uniform_distributions
from context_neurons.models.loading import LoadedModel
from context_neurons.verdict import statistics as st

#: The frequency-aware score may miss at most this share of |T| more than ``top[j]`` (two of the
#: twenty planted context neurons).
PRECISION_MARGIN = 0.10


def planted_truth(planted: LoadedModel) -> np.ndarray:
    """The planted context neurons as a mask over the layer-0 neurons."""
    truth = np.zeros(planted.model.cfg.d_mlp, dtype=bool)
    truth[sorted(planted.truth.context_neurons)] = True
    return truth


def planted_control(
    planted: LoadedModel,
    distributions: dict[str, Float[Tensor, " d_vocab"]] | None = None,
) -> dict:
    """AUC and precision at |T| of both scores against the planted context neurons.

    Args:
        planted: ``load_model("planted")``.
        distributions: the domains' ``p_D`` (default: the label halves of the planted topics).
    """
    model = planted.model
    if distributions is None:
        distributions = uniform_distributions(planted.truth.label_token_ids, model.cfg.d_vocab)
    circuit = cc.get_circuit(model)
    truth = planted_truth(planted)
    pieces = path_pieces(model, circuit.calibration.tokens[1:])
    prediction = predict_path_shifts(pieces, disc.read_vectors(circuit, model),
                                     distributions).split(circuit.heads)
    frequency = prediction.score().double().cpu().numpy()
    top = disc.get_scores(circuit, model).top.double().cpu().numpy()
    out = {"contextual_heads": circuit.heads, "planted_context_neurons": int(truth.sum()),
           "domains": list(distributions)}
    for name, score in (("frequency_aware", frequency), ("top", top)):
        out[name] = {"auc": float(st.auc(score, truth)),
                     "precision_at_truth_size": st.precision_at_truth_size(score, truth)}
    out["recovers_what_top_recovers"] = bool(
        out["frequency_aware"]["precision_at_truth_size"]
        >= out["top"]["precision_at_truth_size"] - PRECISION_MARGIN)
    return out


def control_reading(control: dict) -> str:
    """The planted control (:func:`planted_control`) in one sentence."""
    return (f"- Planted control (planted model, label-half domains): the frequency-aware score "
            f"{'recovers' if control['recovers_what_top_recovers'] else 'does NOT recover'} what "
            f"top[j] recovers (precision at |T| "
            f"{control['frequency_aware']['precision_at_truth_size']:.2f} against "
            f"{control['top']['precision_at_truth_size']:.2f}).")


__all__ = ["PRECISION_MARGIN", "control_reading", "planted_control", "planted_truth"]
