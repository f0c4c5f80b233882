"""Why the approximation fails on a model: the denominators' frame, then the pieces that remain
(chapter 8, section 8.11; issue 50).

Two measurements on the same texts and neurons:

1. **The frame.** The circuit's calibrated denominators read in the destination frame (content
   weights at each ``n``; :mod:`context_neurons.circuit.build`, what this package did before
   issue 50) against the reference frame (at ``n_ref``, as the extended embeddings take them):
   the approximation's median r and FVU with each, and each head's *drift*, the range over the
   calibration text's positions of ``log D_ref(n) - log D_dest(n)``, the factor by which the
   destination frame's bag weights miss summing to 1.
2. **The pieces** (:mod:`context_neurons.evaluation.error_terms`), in the reference frame: the
   median FVU as is, and with one piece at a time made exact through the hooks (the other heads,
   LN2's scale), or with each text's own denominators in the bag's frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from context_neurons.circuit import FRAMES, build_circuit
from context_neurons.evaluation.error_terms import error_terms

#: The variants of :attr:`ApproximationFailure.pieces`: (pieces made exact, bag denominators).
VARIANTS = {
    "constant denominators": ((), "median"),
    "each text's own denominators": ((), "text_at_reference"),
    "other heads exact": (("other heads",), "per_position"),
    "LN2 exact": (("ln2",), "per_position"),
    "other heads and LN2 exact": (("other heads", "ln2"), "per_position"),
}
#: Position bands of :attr:`ApproximationFailure.bands`: ``[first, last)``.
BANDS = {"1-31": (1, 32), "32-99": (32, 100), ">= 100": (100, 1 << 30)}


@dataclass(frozen=True)
class ApproximationFailure:
    """The frame comparison and the pieces of one model (module docstring).

    Attributes:
        label: the model, in words.
        heads: the contextual heads.
        n_texts, n_neurons: what was measured.
        frames: ``{frame: (median r, median FVU)}`` with per-position denominators.
        drift: each head's drift in nats: the range over the calibration text's positions of
            ``log D_ref(n) - log D_dest(n)``.
        per_head: ``{frame: {head: median FVU}}`` with every piece exact but that head's bag.
        bands: ``{frame: {band: median FVU}}`` of the approximation as is, per position band.
        pieces: ``{variant: median FVU}`` in the reference frame (:data:`VARIANTS`; the
            approximation as is is ``frames["reference"]``).
        shift: ``log D_ref(n) - log D_dest(n)`` on the calibration text, ``[ctx_head, pos]``
            (whose range is ``drift``; chapter 8's figure).
    """

    label: str
    heads: list[int]
    n_texts: int
    n_neurons: int
    frames: dict[str, tuple[float, float]]
    drift: dict[int, float]
    per_head: dict[str, dict[int, float]]
    bands: dict[str, dict[str, float]]
    pieces: dict[str, float]
    shift: Float[Tensor, "ctx_head pos"] = field(repr=False, compare=False)

    def findings(self) -> list[str]:
        """One line per frame (with its bands and each head alone), the drifts, the pieces."""
        lines = [f"{self.label}: {self.n_neurons} neurons x {self.n_texts} texts, contextual "
                 f"heads {self.heads}; median FVU unless said"]
        for frame, (r, fvu) in self.frames.items():
            bands = ", ".join(f"{b} {v:,.3g}" for b, v in self.bands[frame].items())
            alone = ", ".join(f"{h} {v:,.3g}" for h, v in self.per_head[frame].items())
            lines += [f"  {frame} frame: median r {r:.3f}, FVU {fvu:,.4g}; by position {bands}",
                      f"    only one head approximated, the rest exact: {alone}"]
        drifts = ", ".join(f"head {h} {d:.1f}" for h, d in self.drift.items())
        lines.append(f"  drift of the destination frame (nats, calibration text): {drifts}")
        lines += [f"  reference frame, {name}: FVU {fvu:.3g}" for name, fvu in self.pieces.items()]
        return lines


def _medians(terms, exact=(), denominators="per_position", positions=None) -> tuple[float, float]:
    """Median r and FVU over the neuron-text pairs, NaN left out (as ``Evaluation.median``)."""
    pearson, fvu = terms.accuracy(exact, denominators, positions)
    return float(pearson.flatten().nanmedian()), float(fvu.flatten().nanmedian())


def _median_fvu(terms, exact=(), denominators="per_position", positions=None) -> float:
    return _medians(terms, exact, denominators, positions)[1]


@torch.no_grad()
def approximation_failure(
    model: TransformerBridge,
    heads: list[int],
    windows: list[Int[Tensor, " _pos"]],
    neurons: list[int],
    label: str,
) -> ApproximationFailure:
    """Measure the module docstring's two parts on ``windows`` (full-length texts) for
    ``neurons``, with circuits of ``heads`` built from the default calibration text."""
    circuits = {frame: build_circuit(model, "prose", heads, frame=frame) for frame in FRAMES}
    tokens = torch.stack(windows)
    frames, per_head, bands, terms = {}, {}, {}, {}
    for frame, circuit in circuits.items():
        terms[frame] = error_terms(circuit, model, tokens, neurons)
        frames[frame] = _medians(terms[frame])  # the approximation as is (evaluate's numbers)
        everything = terms[frame].pieces
        per_head[frame] = {h: _median_fvu(terms[frame], [p for p in everything if p != f"head {h}"])
                           for h in heads}
        bands[frame] = {name: _median_fvu(terms[frame], positions=span)
                        for name, span in BANDS.items() if span[0] < tokens.shape[1]}
    shift = (circuits["reference"].calibration.log_denominators
             - circuits["destination"].calibration.log_denominators)  # [ctx_head, pos]
    drift = {h: float(d.max() - d.min()) for h, d in zip(heads, shift[:, 1:])}
    pieces = {name: _median_fvu(terms["reference"], exact, denominators)
              for name, (exact, denominators) in VARIANTS.items()}
    return ApproximationFailure(label, list(heads), len(windows), len(neurons), frames, drift,
                                per_head, bands, pieces, shift.cpu())
