"""Training a GPT-2-architecture model from scratch on the offline corpora.

GPT-2's weights cannot be downloaded everywhere, and the planted model's structure was written by
hand; this subpackage trains a second offline model whose structure nobody wrote: a small
``GPT2LMHeadModel`` (learned absolute positions, the architecture the decomposition is about) with
its own byte-level BPE tokenizer of about 8k ids, on a weighted mixture of the offline corpora
with a document-level held-out split.

Library: :func:`train` (a :class:`TrainConfig` -> the output directory). Command line:
:func:`main` (``python -m context_neurons train ...``). Structure checks of a trained model
(layer-0 positional kernels, per-domain neurons): :mod:`context_neurons.training.analysis`. What
a run did, from its record (chapter 8.1): :mod:`context_neurons.training.summary`.
"""

from context_neurons.training.cli import main
from context_neurons.training.config import (
    CORPUS_WEIGHTS,
    DOMAINS,
    EOT,
    SIZES,
    TrainConfig,
    default_corpora_dir,
)
from context_neurons.training.loop import train

__all__ = ["CORPUS_WEIGHTS", "DOMAINS", "EOT", "SIZES", "TrainConfig", "default_corpora_dir",
           "main", "train"]
