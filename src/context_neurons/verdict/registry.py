"""The registered protocols. This module lists each pre-registered protocol once (issue 51).

A protocol is its file in ``assets/protocol/`` (read into typed fields by
:func:`~context_neurons.verdict.protocol.load_protocol`), its standing as the main job's table
states it, and the main job's row that holds its whole result. Every reader of the list (the
loader, :class:`~context_neurons.reproduce.results.Results`, the main job's table) takes it from
:data:`PROTOCOLS`: a new protocol is one entry here and its file, nothing restated elsewhere.
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
    """

    version: str
    file: str
    status: str
    result_key: str


#: The protocols in the order they were registered: v1 (before any verdict), v2 (after v1's),
#: v3 (the confirmatory test, after v2's).
PROTOCOLS = (
    RegisteredProtocol("v1", "discovery-verdict.json",
                       "v1 (registered before any verdict; superseded by v3)",
                       "discovery_evaluation"),
    RegisteredProtocol("v2", "discovery-verdict-v2.json",
                       "v2 (registered after v1's verdicts were seen; superseded by v3)",
                       "discovery_evaluation_v2"),
    RegisteredProtocol("v3", "discovery-verdict-v3.json",
                       "v3 (confirmatory: registered before any of its numbers, on documents "
                       "no earlier evaluation read)", "discovery_evaluation_v3"),
)


def registered(version: str) -> RegisteredProtocol:
    """The protocol ``version`` (an :class:`~context_neurons.checks.InputError` for another)."""
    for protocol in PROTOCOLS:
        if protocol.version == version:
            return protocol
    raise InputError(f"Unknown protocol {version!r}; there are "
                     f"{[p.version for p in PROTOCOLS]}.")


__all__ = ["PROTOCOLS", "RegisteredProtocol", "registered"]
