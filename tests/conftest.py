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


@pytest.fixture
def computations(monkeypatch):
    """A Counter of the method's computations during a test: every call of ``classify_heads``,
    ``build_circuit`` and ``score_neurons`` through any reference the package holds, and every
    read of a model's weights (issue 33: one main-job run computes each once)."""
    from collections import Counter

    from context_neurons import circuit, discovery, method, taxonomy
    from context_neurons.models import weights

    counts: Counter = Counter()

    def counted(name, function):
        def wrapper(*args, **kwargs):
            counts[name] += 1
            return function(*args, **kwargs)
        return wrapper

    for name, holders in {"classify_heads": (taxonomy, method),
                          "build_circuit": (circuit, method),
                          "score_neurons": (discovery, method)}.items():
        original = getattr(holders[0], name)
        for holder in holders:
            monkeypatch.setattr(holder, name, counted(name, original))
    monkeypatch.setattr(weights, "_read", counted("read_weights", weights._read))
    weights._READ.clear()  # every model is read again while counted
    return counts
