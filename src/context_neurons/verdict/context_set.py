"""The context set (``context_set``): the non-local contextual heads, those every protocol from
v3 on ablates (v3 and the GPT-2 family, each on its model's own taxonomy).

A head is in the context set iff (a) its group is ``contextual`` under chapter 2's taxonomy with
v3's fix (a head whose *previous-token share* on the calibration text is at least 0.4, the
protocol's ``previous_token_threshold``, is a detokenization head whatever its kernel) and (b) its
previous-token attention on the CAL windows is below 0.4 too. The fix's new order (duplicate, detokenization, contextual, miscellaneous)
changes only heads the unchanged taxonomy calls contextual, so (a) is the taxonomy's contextual
heads whose calibration-text share is below 0.4 (:func:`fixed_group` keeps the whole order).
The rule itself lives in :mod:`context_neurons.taxonomy` (``assign_group``, chapter 2), which
applies it by default since protocol v3; the column ``group`` here is the taxonomy without it
(``previous_token_rule=False``), as v1 and v2 computed it. The shares are those of the hook
``blocks.0.attn.hook_pattern``, as the protocol registers it: computed from the weights in the
pass that gives the mean ``z`` (the first batch checked against the hook), not read from it.

The non-local set (a sensitivity, no verdict) is every head whose kernel is not local and whose
previous-token share is below 0.4 on both measures.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from context_neurons.activations import previous_token_attention
from context_neurons.method import MethodValues
from context_neurons.taxonomy import HeadTaxonomy, assign_group
from context_neurons.text.windows import calibration_tokens
from context_neurons.verdict.formatting import read_json_fields


def fixed_group(shape: str, content_sd: float, self_z: float, previous_share: float,
                threshold: float) -> str:
    """A head's group in v3's order, which is chapter 2's taxonomy with the previous-token rule
    (:func:`context_neurons.taxonomy.assign_group`): duplicate (self z >= 4), detokenization
    (local kernel or previous-token share >= the protocol's ``threshold``), contextual (slowly
    decaying, content sd <= 1.5 nats), miscellaneous."""
    return assign_group(shape, content_sd, self_z, previous_share, threshold)


def calibration_previous_share(model: TransformerBridge, start: int,
                               tokens: Int[Tensor, " pos"] | None = None) -> Float[Tensor, " head"]:
    """Each layer-0 head's mean ``A[n, n-1]`` over positions ``start <= n < L`` of the
    calibration text (``'prose'``, cut to ``n_ctx`` tokens, BOS first; the attention pattern
    ``blocks.0.attn.hook_pattern`` itself)."""
    if tokens is None:
        tokens = calibration_tokens(model.tokenizer, n_ctx=model.cfg.n_ctx)
    return previous_token_attention(model, [tokens], start)


@dataclass(frozen=True)
class HeadMeasures:
    """What the protocol reports of one layer-0 head (``context_set.reported``)."""

    head: int
    group: str  # the taxonomy's group, unchanged (as v2 computes it)
    fixed_group: str  # the group with v3's fix
    kernel: str
    kernel_n_eff: float
    content_sd: float
    self_z: float
    previous_share_calibration: float
    previous_share_cal_windows: float
    in_context_set: bool
    in_non_local_set: bool


@dataclass(frozen=True)
class ContextSet:
    """The v3 context set and every head's measures.

    Attributes:
        heads: the context set.
        non_local: the non-local set (sensitivity).
        taxonomy_contextual: the unchanged taxonomy's contextual heads.
        fixed_contextual: the contextual heads with v3's fix (before the CAL-window test).
        measures: one row per head.
        threshold: the previous-token threshold (0.4).
    """

    heads: tuple[int, ...]
    non_local: tuple[int, ...]
    taxonomy_contextual: tuple[int, ...]
    fixed_contextual: tuple[int, ...]
    measures: tuple[HeadMeasures, ...]
    threshold: float

    @property
    def left_out_by_fix(self) -> list[int]:
        """Taxonomy-contextual heads the previous-token fix leaves out."""
        return sorted(set(self.taxonomy_contextual) - set(self.fixed_contextual))

    @property
    def left_out_by_cal_windows(self) -> list[int]:
        """Heads left out by the previous-token share on the CAL windows."""
        return sorted(set(self.fixed_contextual) - set(self.heads))

    def to_json(self) -> dict:
        return {"heads": list(self.heads), "non_local_set": list(self.non_local),
                "taxonomy_contextual": list(self.taxonomy_contextual),
                "contextual_with_fix": list(self.fixed_contextual),
                "left_out_by_the_fix": self.left_out_by_fix,
                "left_out_by_cal_windows": self.left_out_by_cal_windows,
                "previous_token_threshold": self.threshold,
                "per_head": [asdict(m) for m in self.measures]}

    @classmethod
    def from_json(cls, data: dict) -> "ContextSet":
        """The value :meth:`to_json` wrote (a stored result read back)."""
        return cls(heads=tuple(data["heads"]), non_local=tuple(data["non_local_set"]),
                   taxonomy_contextual=tuple(data["taxonomy_contextual"]),
                   fixed_contextual=tuple(data["contextual_with_fix"]),
                   measures=tuple(HeadMeasures(**read_json_fields(HeadMeasures, m))
                                  for m in data["per_head"]),
                   threshold=data["previous_token_threshold"])


def build_context_set(taxonomy: HeadTaxonomy, share_calibration: Float[Tensor, " head"],
                      share_cal: Float[Tensor, " head"], threshold: float) -> ContextSet:
    """The context set from the taxonomy and the two previous-token measures (pure), at the
    protocol's previous-token ``threshold`` (its ``previous_token_threshold``)."""
    table = taxonomy.table()
    measures = []
    for head in taxonomy.heads:
        row = table.loc[head]
        calibration, cal = float(share_calibration[head]), float(share_cal[head])
        fixed = fixed_group(row["kernel"], float(row["content sd"]), float(row["self z"]),
                            calibration, threshold)
        measures.append(HeadMeasures(
            head=int(head), group=str(row["group"]), fixed_group=fixed, kernel=str(row["kernel"]),
            kernel_n_eff=float(row["n_eff"]), content_sd=float(row["content sd"]),
            self_z=float(row["self z"]), previous_share_calibration=calibration,
            previous_share_cal_windows=cal,
            in_context_set=fixed == "contextual" and cal < threshold,
            in_non_local_set=(row["kernel"] != "local" and calibration < threshold
                              and cal < threshold)))
    return ContextSet(
        heads=tuple(m.head for m in measures if m.in_context_set),
        non_local=tuple(m.head for m in measures if m.in_non_local_set),
        taxonomy_contextual=tuple(int(h) for h in taxonomy.groups["contextual"]),
        fixed_contextual=tuple(m.head for m in measures if m.fixed_group == "contextual"),
        measures=tuple(measures), threshold=threshold)


def context_set(method: MethodValues, share_cal: Float[Tensor, " head"], start: int,
                threshold: float) -> ContextSet:
    """The model's v3 context set: the taxonomy (as v2 computes it), the previous-token share on
    the calibration text and ``share_cal``, the share on the CAL windows (positions ``>= start``:
    :func:`~context_neurons.activations.head_statistics`, one pass with the mean ``z``)."""
    unchanged = method.taxonomy(previous_token_rule=False)  # "group": as v2 computed it
    return build_context_set(unchanged, calibration_previous_share(method.model, start),
                             share_cal, threshold)


__all__ = ["ContextSet", "HeadMeasures", "build_context_set", "calibration_previous_share",
           "context_set", "fixed_group"]
