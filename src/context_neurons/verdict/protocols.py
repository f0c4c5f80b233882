"""Every registered protocol as its typed value, by version (issue 51): the one loader that reads
:data:`~context_neurons.verdict.registry.PROTOCOLS`, whatever the protocol's family.

Each is a :class:`~.protocol.Protocol` (what every protocol registers alike), the type its
readers take: ``load("v1")`` and ``load("v2")`` a :class:`~.protocol.ProtocolV1`, ``load("v3")``
a :class:`~.protocol.ProtocolV3`, ``load("gpt2")`` a :class:`~.gpt2_protocol.ProtocolGPT2`;
another version is an :class:`~context_neurons.checks.InputError` naming the registered ones.
"""

from __future__ import annotations

from typing import Literal, overload

from context_neurons.verdict.gpt2_protocol import ProtocolGPT2, load_protocol_gpt2
from context_neurons.verdict.protocol import Protocol, ProtocolV1, ProtocolV3, load_protocol
from context_neurons.verdict.registry import GPT2, registered


@overload
def load(version: Literal["v1", "v2"]) -> ProtocolV1: ...


@overload
def load(version: Literal["v3"]) -> ProtocolV3: ...


@overload
def load(version: Literal["gpt2"]) -> ProtocolGPT2: ...


@overload
def load(version: str) -> Protocol: ...


def load(version: str) -> Protocol:
    """The registered protocol ``version``, parsed once from its file into typed fields."""
    if registered(version).family == GPT2:
        return load_protocol_gpt2()
    return load_protocol(version)


__all__ = ["Protocol", "load"]
