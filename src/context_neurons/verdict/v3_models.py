"""Protocol v3's registered models as one typed table: each model's name, where it lives in the
package, whether its weights are kept, what identifies its training run, and why it has no
result when none is stored.

The table is :data:`V3_MODELS`, in the order of the protocol file's ``models`` (the primary
model first; a test holds the two equal). Every reader goes through it: the stored results
(:mod:`.v3_stored`), the report (:mod:`.v3_report`), the command (:mod:`.v3`), the README's
findings, the band-coverage table and the device steps. :func:`model_key` names the registered
model a training record describes by the fields that define the model (its seed and its shape,
with its vocabulary), matched against the table, and refuses a run that is none of them
(:class:`UnregisteredModel`) rather than guess a name; :func:`comparability` says whether a
registered model's run is one the protocol compares (``models.comparable_when``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from context_neurons.checks import InputError
from context_neurons.models.loading import TRAINED_DIR, TRAINED_SEED1_DIR
from context_neurons.training.summary import TrainingRun, training_run
from context_neurons.verdict.entries import NoResult, NotEvaluated, Pending
from context_neurons.verdict.protocol import load_protocol_v3

#: A registered model that is not trained, or whose result has not come back (no reason beyond).
PENDING = Pending("not trained")
#: A registered model in the package, evaluated neither in this run nor stored.
NOT_EVALUATED = NotEvaluated("`python -m context_neurons reproduce --model trained` evaluates "
                             "seed 0; `python -m context_neurons v3` any model")


@dataclass(frozen=True)
class TrainingIdentity:
    """What makes a training run a registered model: its seed, its layers' shape and its
    vocabulary (the model's, which a ``--tokenizer`` run does not write into its configuration).
    The held-out fraction and the corpus weights are not part of it: a registered model trained
    otherwise is that model, reported 'not comparable' (the protocol's ``comparable_when``)."""

    seed: int
    n_layer: int
    d_model: int
    n_head: int
    d_mlp: int
    n_ctx: int
    vocab_size: int

    @classmethod
    def of(cls, run: TrainingRun) -> TrainingIdentity:
        """The identity of a training record."""
        config = run.config
        return cls(seed=config.seed, n_layer=config.n_layer, d_model=config.d_model,
                   n_head=config.n_head, d_mlp=config.d_mlp, n_ctx=config.n_ctx,
                   vocab_size=run.vocab_size)

    def words(self) -> str:
        return ", ".join(f"{f.name} {getattr(self, f.name)}" for f in fields(self))


@dataclass(frozen=True)
class RegisteredModel:
    """One model protocol v3 registers (its file's ``models``)."""

    name: str
    directory: Path  # in the package: its training record, and its stored result when any
    weights_kept: bool  # False: the weights stayed on the GPU that trained it (records only)
    identity: TrainingIdentity
    #: Why it has no result when none is stored and its weights are not here; None: not trained.
    pending: Pending | None = None

    def without_result(self) -> NoResult:
        """Its entry when it has no result in this run and none stored: a model in the package
        is not evaluated; one whose weights were not kept is pending, with its reason."""
        if self.weights_kept:
            return NOT_EVALUATED
        return self.pending or PENDING


_SMALL = {"n_layer": 2, "d_model": 256, "n_head": 8, "d_mlp": 1024, "n_ctx": 256,
          "vocab_size": 8192}

#: The registered models, in the protocol file's order (the primary model first).
V3_MODELS: tuple[RegisteredModel, ...] = (
    RegisteredModel("trained-seed0", TRAINED_DIR, True, TrainingIdentity(seed=0, **_SMALL)),
    RegisteredModel("trained-seed1", TRAINED_SEED1_DIR, True, TrainingIdentity(seed=1, **_SMALL)),
    RegisteredModel(
        "gpt2-layer0-shape", TRAINED_DIR.with_name("gpt2-layer0-shape"), False,
        TrainingIdentity(seed=0, n_layer=2, d_model=768, n_head=12, d_mlp=3072, n_ctx=1024,
                      vocab_size=50257),
        Pending("no v3 result from a lent GPU (scripts/device_jobs.sh step 2, then "
                "scripts/device_steps.py import-v3)")),
)


class UnregisteredModel(InputError):
    """A training run that is none of the models protocol v3 registers."""


def v3_models() -> tuple[RegisteredModel, ...]:
    """The table (read when called, so that a test may stand another in its place)."""
    return V3_MODELS


def model_names() -> tuple[str, ...]:
    """The registered models' names, in the protocol's order."""
    return tuple(m.name for m in v3_models())


def primary_model() -> RegisteredModel:
    """The protocol's primary model (seed 0): the table's first."""
    return v3_models()[0]


def registered_model(name: str) -> RegisteredModel | None:
    """The registered model of that name, or None."""
    return next((m for m in v3_models() if m.name == name), None)


def model_key(run: TrainingRun) -> str:
    """The protocol's name of the registered model a training record describes: the one whose
    :class:`TrainingIdentity` it has. A run that is none of them is refused, never named by
    guess."""
    identity = TrainingIdentity.of(run)
    found = [m.name for m in v3_models() if m.identity == identity]
    if len(found) != 1:
        raise UnregisteredModel(
            f"This training run ({identity.words()}) is not a model protocol v3 registers "
            f"({'; '.join(f'{m.name}: {m.identity.words()}' for m in v3_models())}): the "
            f"protocol is run on its registered models only.")
    return found[0]


#: The protocol's ``models``, read once: when a registered model is comparable (the models
#: themselves are the table :data:`V3_MODELS`).
REGISTERED = load_protocol_v3().models


def comparability(run: TrainingRun, reference: TrainingRun | None = None) -> str | None:
    """None when the model is comparable (the registered held-out fraction and the seed-0 run's
    corpus weights), else the reason (``models.comparable_when``)."""
    reference = reference or training_run(primary_model().directory)
    config = run.config
    if config.heldout_fraction != REGISTERED.heldout_fraction:
        return (f"held-out fraction {config.heldout_fraction}, not "
                f"{REGISTERED.heldout_fraction}")
    if config.corpus_weights != reference.config.corpus_weights:
        return "corpus weights differ from the seed-0 run's"
    return None


__all__ = ["NOT_EVALUATED", "PENDING", "REGISTERED", "RegisteredModel", "TrainingIdentity",
           "UnregisteredModel", "V3_MODELS", "comparability", "model_key", "model_names",
           "primary_model", "registered_model", "v3_models"]
