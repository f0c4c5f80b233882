"""What a training run did. This module reads a trained model's ``training.json`` once into
:class:`TrainingRun`: the facts chapter 8.1 reports (the model's size, the seed, threads and
device, the tokens and steps, the mean held-out loss, the time and the command) and what the
protocols and the development view read (the configuration: corpus weights, held-out fraction,
context; the vocabulary; the tokens per step). Every reader gets this value, never the dict."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from context_neurons.checks import DataError
from context_neurons.printing import wrapped
from context_neurons.training.config import TrainConfig

#: What a record without a CPU estimate (written before the estimate was recorded) says.
NO_CPU_ESTIMATE = "no CPU estimate recorded"


def read_record(directory: str | Path) -> dict:
    """The ``training.json`` of a trained model's directory, as written (the typed value is
    :func:`training_run`; this is for what copies or checks the file itself)."""
    path = Path(directory) / "training.json"
    if not path.is_file():
        raise DataError(f"{path} not found: held-out text is defined by a training run's record.")
    return json.loads(path.read_text())


@dataclass(frozen=True)
class TrainingRun:
    """A training run, from its record (:func:`training_run`, :meth:`from_record`)."""

    parameters: int
    seed: int
    threads: int
    device: str
    device_name: str
    tokens_seen: int
    steps_done: int
    heldout_loss: float  # mean over the corpora, nats per token
    wall_seconds: float
    cpu_estimate: str  # NO_CPU_ESTIMATE: a record written before the estimate was recorded
    command: str
    #: The run's whole configuration (corpus weights, held-out fraction, sizes, seed).
    config: TrainConfig
    vocab_size: int  # the model's vocabulary (a ``--tokenizer`` run's is not in ``config``)
    eot_id: int
    tokens_per_step: int
    versions: dict[str, str]  # the libraries of the run (python, torch, ...)

    @classmethod
    def from_record(cls, record: dict) -> "TrainingRun":
        """The typed value of a ``training.json``'s contents."""
        known = {f.name for f in dataclasses.fields(TrainConfig)}
        unknown = sorted(set(record["config"]) - known)
        if unknown:
            raise DataError(f"training.json's config has fields this version does not know: "
                            f"{unknown}.")
        model = record["model"]
        return cls(
            parameters=model["parameters"], seed=record["seed"],
            threads=record["threads"], device=record["device"], device_name=record["device_name"],
            tokens_seen=record["tokens_seen"], steps_done=record["steps_done"],
            heldout_loss=record["heldout_loss"]["mean"], wall_seconds=record["wall_seconds"],
            cpu_estimate=record.get("cpu_estimate", NO_CPU_ESTIMATE), command=record["command"],
            config=TrainConfig(**{"seed": record["seed"], **record["config"]}),
            vocab_size=model["vocab_size"], eot_id=model["eot_id"],
            tokens_per_step=record["tokens_per_step"], versions=record["versions"])

    @property
    def trained_on(self) -> set[str]:
        """The corpora of the run's mixture (its configuration's corpus weights)."""
        return set(self.config.corpus_weights)

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
    return TrainingRun.from_record(read_record(directory))


__all__ = ["NO_CPU_ESTIMATE", "TrainingRun", "read_record", "training_run"]
