"""Quiet on the calibration text. This module lists the neurons that are much quieter on the text
that calibrates the circuit than on their best domain, though the circuit found them (chapter 6,
section 6.7)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from transformer_lens.model_bridge import TransformerBridge

from context_neurons.circuit import ContextualCircuit
from context_neurons.discovery import planted_description
from context_neurons.evaluation.accuracy import Evaluation
from context_neurons.evaluation.calibration import STRONG_OUTPUT, silent_on_calibration
from context_neurons.text.corpora import calibration_text, describe

#: The columns of :func:`~context_neurons.evaluation.calibration.silent_on_calibration` shown for
#: the quiet neurons.
QUIET_COLUMNS = [
    "max pre-activation, calibration text",
    "max output, calibration text",
    "best set",
    "max pre-activation, best set",
    "max output, best set",
    "output ratio",
]


@dataclass(frozen=True)
class QuietNeurons:
    """The neurons quiet on the calibration text that fire strongly in a domain (section 6.7).

    Attributes:
        quiet: their rows of :func:`~context_neurons.evaluation.calibration.silent_on_calibration`.
        table: what is shown of them: :data:`QUIET_COLUMNS` (``calibration text`` shortened to
            ``calibration``), and on the planted model what was planted there.
        n_neurons: the neurons asked about.
        calibration: the calibration text, described.
        strong: the output that counts as a clear firing.
    """

    quiet: pd.DataFrame
    table: pd.DataFrame
    n_neurons: int
    calibration: str
    strong: float = STRONG_OUTPUT

    @property
    def clear(self) -> list[int]:
        """The quiet neurons that still reach a clear firing somewhere in the calibration text."""
        return list(self.quiet.index[self.quiet["fires clearly on calibration"]])

    def summary(self) -> str:
        """How many neurons are quiet on the calibration text (the sentence over the table)."""
        return (f"{len(self.quiet)} of {self.n_neurons} carried neurons are quiet on the "
                f"calibration text ({self.calibration}) and fire strongly in a domain:")

    def findings(self) -> list[str]:
        """How quiet they are at most, and how many still fire clearly there (none without a
        quiet neuron)."""
        if not len(self.quiet):
            return []
        clear = self.clear
        return [
            f"their largest output on the calibration text is at most "
            f"{self.quiet['output ratio'].max():.0%} of their largest on the best set; "
            f"{len(clear)} of them still reach an output of {self.strong:g} (clear firing) "
            f"somewhere in the calibration text: {clear or 'none'}"
        ]


def quiet_on_calibration(circuit: ContextualCircuit, model: TransformerBridge, neurons,
                         evaluations: dict[str, Evaluation], truth=None) -> QuietNeurons:
    """:class:`QuietNeurons` among ``neurons``, their best set among ``evaluations``
    (:func:`~context_neurons.evaluation.accuracy.evaluate_sets` on the domains' texts);
    ``truth``: the planted truth, for a column describing what was planted."""
    silent = silent_on_calibration(circuit, model, neurons, evaluations)
    quiet = silent[silent["quiet on calibration"]]
    shown = quiet[QUIET_COLUMNS].copy()
    if truth is not None:
        shown["planted truth"] = [planted_description(truth, j) for j in shown.index]
    table = shown.rename(columns=lambda c: c.replace("calibration text", "calibration"))
    calibration = describe(calibration_text(circuit.calibration.name))
    return QuietNeurons(quiet, table, len(neurons), calibration)
