"""Chapter 2's findings about the head taxonomy (:mod:`context_neurons.taxonomy`), as typed
tables and sentences: each head's width and shape (:func:`width_table`), what the
previous-token rule changed (:func:`rule_effects`), how much room each rule had
(:func:`rule_room`), and the groups against what is known of the model
(:func:`compare_with_known`: the paper's for GPT-2, the planted truth, or a reference), and
whether a head's kernel shape depends on the destination token (:func:`destination_shapes`)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from context_neurons.taxonomy import CONTEXTUAL_MAX_CONTENT_SD, LOCAL_MAX_N_EFF
from context_neurons.taxonomy import HeadTaxonomy, classify_kernel, compare_groups
from context_neurons.taxonomy import exponential_width


def width_table(taxonomy: HeadTaxonomy, truth=None) -> pd.DataFrame:
    """Each head's width ``n_eff``, mean distance, kernel shape and previous-token share (chapter
    2, section 2.2), and with the planted model's ``truth`` (its
    :class:`~context_neurons.models.planted_plan.PlantedTruth`) the planted kernel beside it: its
    width as the planted model recorded it (or, for a truth that records only decay lengths
    ``w``, the width of the exponential kernel of that decay) and its shape."""
    widths = taxonomy.table()[["n_eff", "mean distance", "kernel", "prev. share"]].copy()
    if truth is None:
        return widths
    planted_widths = getattr(truth, "kernel_n_eff", None)
    if planted_widths:  # the planted kernels' own widths, as recorded by the planted model
        widths["planted n_eff"] = [planted_widths[h] for h in widths.index]
    else:  # exponential kernels of decay length w
        decay = truth.kernel_widths
        widths["planted w"] = [decay[h] for h in widths.index]
        widths["planted n_eff"] = [
            exponential_width(decay[h], taxonomy.n + 1) for h in widths.index
        ]
    widths["planted shape"] = [truth.kernel_shapes[h] for h in widths.index]
    return widths


#: What chapter 2 says when a model has no contextual head.
NO_CONTEXTUAL_HEAD = (
    "NO CONTEXTUAL HEAD: no head of this model has a slowly decaying kernel with weak content "
    "dependence and a previous-token share below 0.4. Chapter 3 still measures every head's "
    "denominators; the circuit of chapter 4 and the discovery of chapter 5 need contextual heads "
    "and stop there."
)


@dataclass(frozen=True)
class RuleEffects:
    """What the rules did to a model's heads (chapter 2, section 2.4).

    Attributes:
        miscellaneous: each miscellaneous head and why (a uniform kernel, or its content sd).
        by_share: the detokenization heads whose kernel is not local (put there by the
            previous-token share alone).
        moved: the groups that differ without the previous-token rule, with their heads then.
        contextual: the contextual heads.
    """

    miscellaneous: dict[int, str]
    by_share: list[int]
    moved: dict[str, list[int]]
    contextual: list[int]

    def findings(self) -> list[str]:
        """One sentence per miscellaneous head (or that there is none), the heads moved by the
        previous-token share, whether the groups change without that rule, and, on a model
        without contextual heads, what that means for the chapters after."""
        lines = [f"head {head} is miscellaneous: {reason}"
                 for head, reason in self.miscellaneous.items()]
        if not self.miscellaneous:
            lines.append("no head is miscellaneous")
        lines.append(f"detokenization heads by the previous-token share alone (kernel not local): "
                     f"{self.by_share or 'none'}")
        lines.append("groups without the previous-token rule: "
                     + (f"differ: {self.moved}" if self.moved else "the same, group for group"))
        if not self.contextual:
            lines.append(NO_CONTEXTUAL_HEAD)
        return lines


def rule_effects(taxonomy: HeadTaxonomy, without_rule: HeadTaxonomy) -> RuleEffects:
    """:class:`RuleEffects` of ``taxonomy``, against ``without_rule``: the same heads classified
    without the previous-token rule (``classify_heads(model, previous_token_rule=False)``)."""
    table = taxonomy.table()
    reasons = {
        head: "uniform kernel" if taxonomy.shapes[head] == "uniform"
        else f"content sd {table.loc[head, 'content sd']:.2f} > {CONTEXTUAL_MAX_CONTENT_SD:g}"
        for head in taxonomy.groups["miscellaneous"]
    }
    by_share = [h for h in taxonomy.groups["detokenization"] if taxonomy.shapes[h] != "local"]
    moved = {g: h for g, h in without_rule.groups.items() if h != taxonomy.groups[g]}
    return RuleEffects(reasons, by_share, moved, list(taxonomy.groups["contextual"]))


@dataclass(frozen=True)
class RuleRoom:
    """How much room the width and content rules had on a model (chapter 2, section 2.5).

    Attributes:
        head: the head nearest a width threshold (the closest call of the width rule).
        n_eff: its width.
        margin: its ``n_eff / threshold``.
        threshold: that threshold, as :meth:`HeadTaxonomy.margins` names it (``"local 32"``).
        group: its group.
        windows: :meth:`HeadTaxonomy.width_windows`.
        largest_sd: the largest content sd of a slowly decaying head (``None`` without one).
    """

    head: int
    n_eff: float
    margin: float
    threshold: str
    group: str
    windows: pd.DataFrame
    largest_sd: float | None

    def closest_call(self) -> str:
        """The width rule's closest call, and whether the head's group depends on it."""
        return (
            f"closest call on the width: head {self.head}, n_eff {self.n_eff:.1f}, "
            f"{self.margin:.2f} x the {self.threshold} threshold; its group ({self.group}) "
            + (
                "does not depend on it (the duplicate test comes first)"
                if self.group == "duplicate"
                else "depends on it"
            )
        )

    def findings(self) -> list[str]:
        """How far below its threshold the content spread of the slowly decaying heads is, and
        how wide the window of the local threshold is (or that every head is on one side)."""
        lines = []
        if self.largest_sd is not None:
            lines.append(
                f"largest content sd of a slowly decaying head: {self.largest_sd:.2f} nats, "
                f"{CONTEXTUAL_MAX_CONTENT_SD / self.largest_sd:.1f} x below the threshold "
                f"{CONTEXTUAL_MAX_CONTENT_SD:g}"
            )
        local = self.windows.loc["local"]
        if local[["n_eff below", "n_eff above"]].notna().all():
            lines.append(
                f"the local threshold {LOCAL_MAX_N_EFF:g} lies "
                f"{LOCAL_MAX_N_EFF / local['n_eff below'] - 1:.0%} above the widest narrower "
                f"kernel and {local['n_eff above'] / LOCAL_MAX_N_EFF - 1:.0%} below the "
                "narrowest wider one"
            )
        else:
            lines.append(f"every head lies on one side of the local threshold {LOCAL_MAX_N_EFF:g}")
        return lines


def rule_room(taxonomy: HeadTaxonomy) -> RuleRoom:
    """:class:`RuleRoom` of a taxonomy: the closest call of :meth:`HeadTaxonomy.closest_calls`'
    ``kernel width -> shape`` rule, :meth:`HeadTaxonomy.width_windows` and the content sd of its
    slowly decaying heads."""
    margins, calls, table = taxonomy.margins(), taxonomy.closest_calls(), taxonomy.table()
    width_call = calls.loc["kernel width -> shape"]
    head = int(width_call["closest head"])
    slow = [h for h in taxonomy.heads if taxonomy.shapes[h] == "slowly decaying"]
    return RuleRoom(
        head=head,
        n_eff=taxonomy.width(head),
        margin=float(width_call["margin"]),
        threshold=str(margins.loc[head, "width threshold"]),
        group=taxonomy.group_of(head),
        windows=taxonomy.width_windows(),
        largest_sd=float(table.loc[slow, "content sd"].max()) if slow else None,
    )


@dataclass(frozen=True)
class KnownGroups:
    """The computed groups beside what is known of them (chapter 2, section 2.5): GPT-2 Small's
    in the paper (on GPT-2 Small, where they can disagree), the planted ones (on the planted
    model, agreeing by construction), or, on any other model, the paper's for reference only.

    Attributes:
        known: ``"paper"``, ``"planted"`` or ``"reference"`` (nothing is known of this model).
        table: per group, the computed heads, the paper's, and whether they agree (the planted
            heads and their agreement instead, on the planted model; no agreement for
            ``"reference"``).
        computed_contextual: the computed contextual heads.
        paper_contextual: the paper's.
        shapes_agree: whether the kernel shapes are the planted ones (planted model only).
    """

    known: str
    table: pd.DataFrame
    computed_contextual: list[int]
    paper_contextual: list[int]
    shapes_agree: bool | None = None

    @property
    def caption(self) -> str:
        """The table's caption."""
        return {
            "paper": "computed groups and the paper's",
            "planted": "computed groups, the paper's and the planted ones",
            "reference": "computed groups and GPT-2 Small's (paper)",
        }[self.known]

    @property
    def differ(self) -> list[str]:
        """The groups that differ from the paper's (compared on GPT-2 Small only)."""
        if self.known != "paper":
            return []
        return self.table.index[~self.table["agrees with the paper"]].tolist()

    @property
    def indent(self) -> str:
        """The indent of the findings' continuation lines: ``!!!`` when they raise the alarm."""
        return "!!! " if self.differ else "  "

    def findings(self, model: str) -> list[str]:
        """What the comparison shows, on ``model`` (its title)."""
        if self.known == "paper":
            if not self.differ:
                return ["The computed groups are the paper's, group for group."]
            return [
                f"!!! THE COMPUTED GROUPS DIFFER FROM THE PAPER'S for: {', '.join(self.differ)}. "
                f"Computed contextual heads {self.computed_contextual}, the paper's "
                f"{self.paper_contextual}. The circuit (chapter 4) and everything after it use "
                "the COMPUTED heads; read the margins above to see which differences are close "
                "calls."
            ]
        if self.known == "planted":
            return [
                "kernel shapes agree with the planted shapes (by construction): "
                f"{self.shapes_agree}",
                "The planted model was built to this taxonomy, so agreement here shows that the "
                "code reads back what was planted; it is not evidence that the rules find "
                "GPT-2's groups.",
            ]
        return [
            f"The last column is GPT-2 Small's taxonomy in the paper, for reference only: the "
            f"{model} is another model, whose groups nobody wrote down."
        ]


def compare_with_known(
    taxonomy: HeadTaxonomy,
    paper: dict[str, list[int]],
    gpt2: bool = False,
    truth=None,
) -> KnownGroups:
    """:class:`KnownGroups`: ``taxonomy``'s groups beside the ``paper``'s (GPT-2 Small's), compared
    with them when the model is GPT-2 Small (``gpt2``), beside the planted ones with the planted
    model's ``truth`` (its :class:`~context_neurons.models.planted_plan.PlantedTruth`), else for
    reference."""
    comparison = compare_groups(taxonomy.groups, paper)
    comparison = comparison.rename(columns={"expected": "GPT-2 Small (paper)"})
    shapes_agree = None
    if gpt2:
        known = "paper"
        comparison = comparison.rename(columns={"agree": "agrees with the paper"})
    elif truth is not None:
        known = "planted"
        planted = compare_groups(taxonomy.groups, truth.head_groups)
        comparison = comparison.drop(columns="agree")
        comparison["planted truth"] = planted["expected"]
        comparison["agrees with the planted truth (by construction)"] = planted["agree"]
        shapes_agree = taxonomy.shapes == truth.kernel_shapes
    else:
        known = "reference"
        comparison = comparison.drop(columns="agree")
    return KnownGroups(known, comparison, taxonomy.groups["contextual"], paper["contextual"],
                       shapes_agree)


@dataclass(frozen=True)
class DestinationShapes:
    """Whether the kernels depend on the destination token (chapter 2, section 2.6).

    Attributes:
        table: ``n_eff`` of every head (columns ``head h``) for every destination token (rows):
            :meth:`HeadTaxonomy.destination_table`.
        spread: the largest relative change of a head's width across the destination tokens,
            ``max / min - 1`` over the tokens, largest over the heads.
        same_shapes: whether every head's width gives it its kernel shape for every token.
    """

    table: pd.DataFrame
    spread: float
    same_shapes: bool

    def findings(self) -> list[str]:
        """The largest relative change of a width, then whether the taxonomy is the head's."""
        if self.same_shapes:
            shapes = ("every head keeps its kernel shape for every destination token: the "
                      "taxonomy is a property of the head")
        else:
            shapes = ("some head changes kernel shape with the destination token: its group "
                      "depends on the token")
        return [f"largest relative change of a head's width across these tokens: "
                f"{self.spread:.1%}", shapes]


def destination_shapes(taxonomy: HeadTaxonomy) -> DestinationShapes:
    """:class:`DestinationShapes` of ``taxonomy``: each head's width for each destination token
    classified (:func:`~context_neurons.taxonomy.classify_kernel`) against its shape."""
    widths = taxonomy.destination_table()
    same = all(
        classify_kernel(float(taxonomy.n_eff[d, k]), taxonomy.n + 1) == taxonomy.shapes[head]
        for d in range(len(taxonomy.destinations))
        for k, head in enumerate(taxonomy.heads)
    )
    return DestinationShapes(widths, float((widths.max() / widths.min() - 1).max()), same)
