"""The registered protocols. This module lists each pre-registered protocol once (issue 51).

A protocol is its file in ``assets/protocol/`` (read into typed fields by
:func:`~context_neurons.verdict.protocols.load`), its standing as the main job's table states it,
the main job's row that holds its whole result, and the family of models it judges (the models
trained here, or the GPT-2 family). Every reader of the list (the loader,
:class:`~context_neurons.reproduce.results.Results`, the main job's sections and table) takes it
from :data:`PROTOCOLS`: a new protocol is one entry here, its file and its adapter, nothing
restated elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from context_neurons.checks import InputError


@dataclass(frozen=True)
class RegisteredProtocol:
    """One protocol, as registered.

    Attributes:
        version: its name (``"v1"``).
        file: its file in ``assets/protocol/``, committed before any of its numbers.
        status: when it was registered and whether it is the one to believe, in words (the
            main job's table prints it above the protocol's verdicts).
        result_key: the main job's row (and JSON key) holding the protocol's whole result.
        family: the models it judges: :data:`TRAINED` (models trained here) or :data:`GPT2`.
    """

    version: str
    file: str
    status: str
    result_key: str
    family: str

    @property
    def name(self) -> str:
        """The name its file gives it (``discovery-verdict-v3``)."""
        return f"discovery-verdict-{self.version}"


#: The families of models a protocol judges.
TRAINED, GPT2 = "models trained here", "the GPT-2 family"


#: The protocols in the order they were registered: v1 (before any verdict), v2 (after v1's),
#: v3 (the confirmatory test, after v2's), gpt2 (the paper's model, before any GPT-2 number).
PROTOCOLS = (
    RegisteredProtocol("v1", "discovery-verdict.json",
                       "v1 (registered before any verdict; superseded by v3)",
                       "discovery_evaluation", TRAINED),
    RegisteredProtocol("v2", "discovery-verdict-v2.json",
                       "v2 (registered after v1's verdicts were seen; superseded by v3)",
                       "discovery_evaluation_v2", TRAINED),
    RegisteredProtocol("v3", "discovery-verdict-v3.json",
                       "v3 (confirmatory: registered before any of its numbers, on documents "
                       "no earlier evaluation read)", "discovery_evaluation_v3", TRAINED),
    RegisteredProtocol("gpt2", "discovery-verdict-gpt2.json",
                       "discovery-verdict-gpt2 (the GPT-2 family; registered before any GPT-2 "
                       "number)", "discovery_evaluation_gpt2", GPT2),
)


def of_family(family: str) -> tuple[RegisteredProtocol, ...]:
    """The protocols that judge ``family`` (:data:`TRAINED` or :data:`GPT2`), in order."""
    return tuple(p for p in PROTOCOLS if p.family == family)


def registered(version: str) -> RegisteredProtocol:
    """The protocol ``version`` (an :class:`~context_neurons.checks.InputError` for another)."""
    for protocol in PROTOCOLS:
        if protocol.version == version:
            return protocol
    raise InputError(f"Unknown protocol {version!r}; there are "
                     f"{[p.version for p in PROTOCOLS]}.")


__all__ = ["GPT2", "PROTOCOLS", "RegisteredProtocol", "TRAINED", "of_family", "registered"]
