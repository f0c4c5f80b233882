"""What a training run did. This module reads a trained model's ``training.json`` into
:class:`TrainingRun`, the facts chapter 8.1 reports: the model's size, the seed, threads and
device, the tokens and steps, the mean held-out loss, the time and the command."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from context_neurons.printing import wrapped
from context_neurons.training.heldout import read_record

#: What a record without a CPU estimate (written before the estimate was recorded) says.
NO_CPU_ESTIMATE = "no CPU estimate recorded"


@dataclass(frozen=True)
class TrainingRun:
    """A training run, from its record (:func:`training_run`)."""

    parameters: int
    seed: int
    threads: int
    device: str
    device_name: str
    tokens_seen: int
    steps_done: int
    heldout_loss: float  # mean over the corpora, nats per token
    wall_seconds: float
    cpu_estimate: str
    command: str

    def findings(self, cfg) -> list[str]:
        """The run in sentences, with the architecture read from the model's ``cfg``."""
        return [
            wrapped(f"{cfg.n_layers} layers, {cfg.n_heads} heads, d_model {cfg.d_model}, d_mlp "
                    f"{cfg.d_mlp}, context {cfg.n_ctx}, vocabulary {cfg.d_vocab}; "
                    f"{self.parameters:,} parameters"),
            wrapped(f"seed {self.seed}, {self.threads} threads on {self.device}: "
                    f"{self.tokens_seen:,} tokens in {self.steps_done} steps"),
            f"held-out loss (mean over corpora): {self.heldout_loss:.2f} nats/token",
            wrapped(f"trained on {self.device_name} in {self.wall_seconds / 60:.0f} minutes; "
                    f"{self.cpu_estimate}"),
            wrapped(f"command: {self.command}"),
        ]


def training_run(directory: str | Path) -> TrainingRun:
    """The :class:`TrainingRun` of a trained model's directory (its ``training.json``)."""
    record = read_record(directory)
    return TrainingRun(
        parameters=record["model"]["parameters"], seed=record["seed"],
        threads=record["threads"], device=record["device"], device_name=record["device_name"],
        tokens_seen=record["tokens_seen"], steps_done=record["steps_done"],
        heldout_loss=record["heldout_loss"]["mean"], wall_seconds=record["wall_seconds"],
        cpu_estimate=record.get("cpu_estimate", NO_CPU_ESTIMATE), command=record["command"])


__all__ = ["NO_CPU_ESTIMATE", "TrainingRun", "training_run"]
