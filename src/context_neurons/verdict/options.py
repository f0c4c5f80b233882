"""How one evaluation runs, as one value (issue 51: ``evaluate_v3`` took these as six parameters,
four of them flags, and passed them on one by one to the GPT-2 adapter, the step-0 control and
the controls): what is computed and how, never what the protocol registers."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunOptions:
    """One evaluation's options.

    Attributes:
        n_resamples: bootstrap resamples; None: the protocol's registered number (fewer only for
            a quick look).
        controls: the same-model controls (neurons permuted, random read directions, the
            vocabulary permuted).
        sensitivities: the registered sensitivities (and the non-local set's ablation they read).
        label_free: the EXPLORATORY label-free arm (protocol v3 only).
        batch_size: windows per forward pass.
        progress: each phase's name on stderr when it starts.
    """

    n_resamples: int | None = None
    controls: bool = True
    sensitivities: bool = True
    label_free: bool = False
    batch_size: int = 8
    progress: bool = False

    def resamples(self, registered: int) -> int:
        """The resamples to draw: :attr:`n_resamples`, or the protocol's ``registered``."""
        return self.n_resamples or registered


__all__ = ["RunOptions"]
