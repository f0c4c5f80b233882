"""Models: one loader for GPT-2, its larger siblings, any GPT-2-architecture checkpoint, the
trained model and the planted model (:mod:`.loading`); the planted ground-truth model
(:mod:`.planted`); small toy models for tests and exercises (:mod:`.toy`); the plain value the
method reads a model into (:mod:`.weights`)."""

from context_neurons.models.loading import (  # noqa: F401  (the package's public loader)
    LoadedModel,
    WeightProcessing,
    bridge_from_hf,
    load_model,
    load_tokenizer,
)
from context_neurons.models.weights import ModelWeights, as_weights, read_weights  # noqa: F401
