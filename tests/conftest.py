"""Shared fixtures: the planted model (built once per session) and small seeded models."""

from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("CONTEXT_NEURONS_MODEL", "planted")
torch.set_grad_enabled(False)


@pytest.fixture(scope="session")
def planted():
    """The planted ground-truth model (GPT-2 Small shapes, 2 layers); about 10 s to build."""
    from context_neurons.models import load_model

    return load_model("planted")


@pytest.fixture(scope="session")
def small_model():
    from context_neurons.models.toy import make_small_model

    return make_small_model()[0]
