"""The protocol's planted control (chapter 8): both discovery scores against the planted truth.

On the planted model, whose context neurons we wrote, the frequency-aware score must recover what
the paper's ``top[j]`` recovers. Its domains are the planted topics: ``p_D`` is uniform over each
topic's *label* half, the word-list half never used to plant
(:mod:`context_neurons.models.planted_topics`), so the check does not reuse what built the model.
Pass rule, fixed before it was first computed: the frequency-aware score's precision among the
|T| highest-scoring neurons is at least ``top[j]``'s minus :data:`PRECISION_MARGIN`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from jaxtyping import Float
from torch import Tensor

import context_neurons.verdict.statistics as st
from context_neurons import circuit as cc
from context_neurons import discovery as disc
from context_neurons.domain_shift import path_pieces, predict_path_shifts, uniform_distributions
from context_neurons.models.loading import LoadedModel

#: The frequency-aware score may miss at most this share of |T| more than ``top[j]`` (two of the
#: twenty planted context neurons).
PRECISION_MARGIN = 0.10


def planted_truth(planted: LoadedModel) -> np.ndarray:
    """The planted context neurons as a mask over the layer-0 neurons."""
    truth = np.zeros(planted.model.cfg.d_mlp, dtype=bool)
    truth[sorted(planted.truth.context_neurons)] = True
    return truth


@dataclass(frozen=True)
class ScoreAgainstPlanted:
    """One discovery score against the planted context neurons.

    Attributes:
        auc: the AUC of the score as a classifier of the planted context neurons.
        precision_at_truth_size: the share of planted neurons among the |T| highest-scoring.
    """

    auc: float
    precision_at_truth_size: float


@dataclass(frozen=True)
class PlantedControl:
    """The protocol's planted control: both scores against the planted context neurons.

    Attributes:
        contextual_heads: the heads the taxonomy classified contextual on the planted model.
        planted_context_neurons: |T|, the planted context neurons.
        domains: the domains whose ``p_D`` the frequency-aware score read.
        frequency_aware: the frequency-aware score against the planted neurons.
        top: the paper's ``top[j]`` against them.
    """

    contextual_heads: list[int]
    planted_context_neurons: int
    domains: list[str]
    frequency_aware: ScoreAgainstPlanted
    top: ScoreAgainstPlanted

    @property
    def recovers_what_top_recovers(self) -> bool:
        """The pass rule: precision at |T| at least ``top[j]``'s minus :data:`PRECISION_MARGIN`."""
        return bool(self.frequency_aware.precision_at_truth_size
                    >= self.top.precision_at_truth_size - PRECISION_MARGIN)

    def findings(self) -> list[str]:
        """The control in lines, as chapter 8.4 prints it."""
        lines = [f"planted model, {self.planted_context_neurons} planted context neurons, "
                 f"{len(self.domains)} topic domains:"]
        lines += [f"  {name}: AUC {score.auc:.3f}, precision at |T| "
                  f"{score.precision_at_truth_size:.2f}"
                  for name, score in (("frequency_aware", self.frequency_aware), ("top", self.top))]
        answer = "yes" if self.recovers_what_top_recovers else "NO"
        return lines + [f"the frequency-aware score recovers what top[j] recovers: {answer}"]

    def reading(self) -> str:
        """The control in one sentence (chapter 8.10)."""
        verb = "recovers" if self.recovers_what_top_recovers else "does NOT recover"
        return (f"- Planted control (planted model, label-half domains): the frequency-aware "
                f"score {verb} what top[j] recovers (precision at |T| "
                f"{self.frequency_aware.precision_at_truth_size:.2f} against "
                f"{self.top.precision_at_truth_size:.2f}).")

    def to_json(self) -> dict:
        """The control as the v3 result and ``scripts/planted_control.py`` write it."""
        out = {"contextual_heads": self.contextual_heads,
               "planted_context_neurons": self.planted_context_neurons,
               "domains": self.domains}
        for name, score in (("frequency_aware", self.frequency_aware), ("top", self.top)):
            out[name] = {"auc": score.auc,
                         "precision_at_truth_size": score.precision_at_truth_size}
        out["recovers_what_top_recovers"] = self.recovers_what_top_recovers
        return out


def planted_control(
    planted: LoadedModel,
    distributions: dict[str, Float[Tensor, " d_vocab"]] | None = None,
) -> PlantedControl:
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
    return PlantedControl(circuit.heads, int(truth.sum()), list(distributions),
                          _against(frequency, truth), _against(top, truth))


def _against(score: np.ndarray, truth: np.ndarray) -> ScoreAgainstPlanted:
    return ScoreAgainstPlanted(float(st.auc(score, truth)),
                               st.precision_at_truth_size(score, truth))


__all__ = ["PRECISION_MARGIN", "PlantedControl", "ScoreAgainstPlanted", "planted_control",
           "planted_truth"]
