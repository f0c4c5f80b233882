"""Hooks. This module runs a model only as far as an activation that is needed.

TransformerLens's ``run_with_cache(..., stop_at_layer=l)`` stops before a whole block; many
measurements need an activation *inside* a block (an MLP's ``hook_pre``, the residual stream
``hook_resid_mid``) and nothing after it. :func:`run_until` attaches the hooks asked for, stores the
activations, and ends the forward pass at the ``stop`` hook by raising :class:`StopForward`. The
hooks are scoped to the call (``run_with_hooks`` removes them, also when the pass is cut short).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from jaxtyping import Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge


class StopForward(Exception):
    """Raised by a hook to end a forward pass once the needed activations are stored."""


def run_until(
    model: TransformerBridge,
    tokens: Int[Tensor, "batch pos"],
    stop: str,
    names: Iterable[str] = (),
    extra_hooks: Sequence[tuple[str, Any]] = (),
) -> dict[str, Tensor]:
    """Run ``model`` on ``tokens`` up to hook ``stop``; return it and the named activations.

    Args:
        model: the model.
        tokens: a batch of token ids.
        stop: the hook whose activation ends the pass (e.g. ``"blocks.1.mlp.hook_pre"``).
        names: further hooks to store (they must run before ``stop``).
        extra_hooks: ``(name, function)`` hooks that run first (ablations, patches).

    Returns:
        ``{hook name: activation}`` for ``stop`` and every name in ``names``.
    """
    store: dict[str, Tensor] = {}

    def saver(name: str, stop_here: bool):
        # Stored under the name asked for: TransformerBridge reports an alias such as
        # ``blocks.1.hook_resid_post`` by its canonical name (``blocks.1.hook_out``).
        def save(activation: Tensor, hook) -> None:
            store[name] = activation
            if stop_here:
                raise StopForward

        return save

    hooks = [
        *extra_hooks,
        *[(name, saver(name, False)) for name in names if name != stop],
        (stop, saver(stop, True)),
    ]
    try:
        model.run_with_hooks(tokens.to(model.cfg.device), fwd_hooks=hooks)  # a CPU batch on a GPU
    except StopForward:
        pass
    missing = [name for name in [stop, *names] if name not in store]
    if missing:
        raise KeyError(f"Hooks {missing} did not run before {stop!r}: name hooks upstream of it.")
    return store
