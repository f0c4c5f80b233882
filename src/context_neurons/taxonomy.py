"""Head taxonomy. This module classifies layer-0 heads from their decomposed attention (chapter 2).

``book/notation.md``, section 3 (Gibson 2025, Figure 2 and the taxonomy table). With the decomposition of
chapter 1, a head's attention from a destination ``n`` factorises as
``A_{n,i} = pos_n(i) c_n(t_i) / D_n``. Two ingredients characterise a head, and both are computed
from the weights, not typed in:

* its **positional kernel** ``pos_n(i)`` (the attention if every token were identical), summarised
  by its width ``n_eff = 1 / sum_i pos_n(i)^2``: the number of tokens the head effectively averages
  over (1 for a head that looks at one token, ``n + 1`` for a uniform one). The kernel's *shape* is
  ``local`` (``n_eff < LOCAL_MAX_N_EFF``: about a sentence or less), ``uniform``
  (``n_eff > UNIFORM_MIN_FRACTION * (n + 1)``: flat over the whole context) or ``slowly decaying``
  (in between: tens to hundreds of tokens);
* its **content weights** ``c_n(t)``: how much a source token's identity matters. Two numbers:
  the spread (standard deviation of ``log c_n(t)`` over a text's tokens) and the *self-preference*
  (how many standard deviations the destination token's own weight ``log c_n(t_n)`` stands above
  the weights of the other tokens, for several destination tokens).

A third number reads the real attention pattern rather than its parts: the **previous-token
share**, each head's mean attention ``A[n, n-1]`` to the token just before the destination on the
calibration text (positions ``n >= PREVIOUS_SHARE_START``). A head whose positional kernel decays
slowly can still attend mostly to the previous token when the previous token's *content* weight
makes it local, and such a head carries local (bigram) information, not context.

The groups then follow in order: **duplicate** heads prefer their own token by far (median
self-preference ``>= DUPLICATE_MIN_Z``); **detokenization** heads have local kernels or a
previous-token share ``>= PREVIOUS_TOKEN_MIN`` (a previous-token head is a detokenization head
whatever its kernel: the fix registered with protocol v3, chapter 8); **contextual** heads have
slowly decaying kernels and weak content dependence (spread ``<= CONTEXTUAL_MAX_CONTENT_SD``); everything else is **miscellaneous**. The thresholds are choices,
named here so the chapter can state them. They were chosen on the planted model, whose heads sit far
from most of them (:meth:`HeadTaxonomy.margins` and :meth:`HeadTaxonomy.closest_calls` print how
far each head is from each threshold, so a run on GPT-2 shows how robust its classification is).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor

from context_neurons.checks import HEAD_GROUPS, OutOfRangeError, TokenError, check_heads
from context_neurons.checks import check_position, token_id
from context_neurons.decomposition import (
    DEFAULT_DESTINATION,
    causal_mask,
    content_log_weights,
    default_mean_keys,
    default_reference_tokens,
    masked_softmax,
    mean_positional_keys,
    positional_pattern,
    project_exact,
)
from context_neurons.models.weights import Model, as_weights
from context_neurons.text.windows import calibration_tokens

#: Destination position of Figure 2 on GPT-2 Small (about half its context of 1024).
PAPER_POSITION = 500
#: Destination tokens for the duplicate-token test and the destination-dependence table (those
#: that are one token in a model's tokenizer are used: :func:`destinations_for`).
DESTINATIONS = (" the", " and", " war", " church", " water", " said", " government", " time")
#: At least this many of :data:`DESTINATIONS` must be single tokens of a model's tokenizer.
MIN_DESTINATIONS = 3

#: A kernel is local when it averages over fewer tokens than this (about one long sentence).
LOCAL_MAX_N_EFF = 32.0
#: A kernel is uniform when it averages over more than this fraction of the ``n + 1`` positions.
UNIFORM_MIN_FRACTION = 0.5
#: A head is a duplicate-token head when its own token's log-weight stands this many standard
#: deviations above the other tokens' (median over :data:`DESTINATIONS`).
DUPLICATE_MIN_Z = 4.0
#: A slowly decaying head is contextual when the spread of ``log c`` is below this (in nats).
CONTEXTUAL_MAX_CONTENT_SD = 1.5
#: A head whose mean attention to the previous token is at least this is a previous-token head,
#: and so a detokenization head whatever its kernel (the value fixed since protocol v1).
PREVIOUS_TOKEN_MIN = 0.4
#: The previous-token share averages over destinations ``n >= PREVIOUS_SHARE_START`` (the first
#: positions, with few keys to choose from, left out).
PREVIOUS_SHARE_START = 32

GROUPS = HEAD_GROUPS  # the group names, defined with the input checks (both layers use them)


def default_position(model: Model) -> int:
    """The destination position of the taxonomy: the paper's 500 where the context allows it,
    else the model's last position."""
    return min(PAPER_POSITION, model.cfg.n_ctx - 1)


def single_tokens(model: Model, candidates) -> list[str]:
    """The strings of ``candidates`` that are one token of the model's tokenizer, in order.

    Tokenizers differ (GPT-2's 50k tokens, a small trained model's 8k), so a chapter that names
    example words keeps only those this model can look up as one token.
    """
    kept = []
    for token in candidates:
        try:
            token_id(model, token)
        except TokenError:
            continue
        kept.append(token)
    return kept


def destinations_for(model: Model, candidates=DESTINATIONS) -> tuple[str, ...]:
    """The destination tokens of ``candidates`` that are one token of the model's tokenizer
    (``' the'`` first: it defines the kernels)."""
    kept = single_tokens(model, candidates)
    if DEFAULT_DESTINATION not in kept or len(kept) < MIN_DESTINATIONS:
        raise TokenError(
            f"The model's tokenizer has only {kept} of the destination tokens {list(candidates)} "
            f"as single tokens; the taxonomy needs {DEFAULT_DESTINATION!r} and at least "
            f"{MIN_DESTINATIONS} in all: pass destinations=... of single tokens."
        )
    return tuple(kept)


SHAPES = ("slowly decaying", "local", "uniform")


def threshold_rules(n: int) -> pd.DataFrame:
    """The taxonomy's rules at destination ``n``: threshold, unit, and why each transfers.

    A rule transfers to another model when its threshold is stated in units that mean the same
    thing there: tokens of language, a fraction of the positions the kernel can spread over,
    standard deviations, or nats of attention logit.
    """
    rows = [
        (
            "local kernel",
            f"n_eff < {LOCAL_MAX_N_EFF:g}",
            "tokens",
            "a length in tokens of language (about one long sentence), not a fraction of the "
            "model's context: a previous-token or local head is local in any model",
        ),
        (
            "previous-token head",
            f"prev. share >= {PREVIOUS_TOKEN_MIN:g}",
            "share of attention",
            "a share of the head's real attention on the calibration text, so it means 'mostly "
            "the token before' in any model: such a head is a detokenization head whatever its "
            "kernel",
        ),
        (
            "uniform kernel",
            f"n_eff > {UNIFORM_MIN_FRACTION:g} x (n + 1) = {UNIFORM_MIN_FRACTION * (n + 1):g}",
            "positions",
            "relative to the n + 1 positions the kernel can spread over, so it means 'flat over "
            "the context' at any n and any context length",
        ),
        (
            "duplicate head",
            f"self z >= {DUPLICATE_MIN_Z:g}",
            "standard deviations",
            "standardised by the spread of the other tokens' log-weights, so it does not depend "
            "on the scale of the model's attention logits",
        ),
        (
            "contextual head",
            f"content sd <= {CONTEXTUAL_MAX_CONTENT_SD:g}",
            "nats",
            "nats of attention logit: a spread of s nats moves a typical token's weight by a "
            "factor e^s in any model, so 'weak content dependence' means the same everywhere",
        ),
    ]
    return pd.DataFrame(rows, columns=["rule", "threshold", "unit", "why it transfers"]).set_index(
        "rule"
    )


# ----------------------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------------------


def kernel_width(pattern: Float[Tensor, "... key_pos"]) -> Float[Tensor, "..."]:
    """``n_eff = 1 / sum_i pos(i)^2``: the number of tokens a kernel averages over.

    Args:
        pattern: attention or positional patterns, each row summing to one over key positions.

    Returns:
        The effective number of tokens of each row.
    """
    return 1.0 / (pattern.double() ** 2).sum(-1)


def mean_distance(pattern: Float[Tensor, "... key_pos"]) -> Float[Tensor, "..."]:
    """Expected distance ``n - i`` under each row's kernel (the destination is the last key)."""
    n = pattern.shape[-1] - 1
    distance = n - torch.arange(n + 1, device=pattern.device, dtype=torch.float64)
    return (pattern.double() * distance).sum(-1)


def exponential_width(decay: float, n_keys: int) -> float:
    """``n_eff`` of the exponential kernel ``pos(i) ~ exp(-(n - i) / decay)`` on ``n_keys`` keys.

    For a long context this is ``(1 + r) / (1 - r) ~ 2 * decay`` with ``r = exp(-1 / decay)``.

    Args:
        decay: the decay length in tokens (positive).
        n_keys: the number of key positions ``n + 1``.
    """
    if decay <= 0 or n_keys < 1:
        raise ValueError(f"Need a positive decay length and n_keys >= 1, got {decay}, {n_keys}.")
    distance = torch.arange(n_keys, dtype=torch.float64)
    kernel = torch.exp(-distance / decay)
    return float(kernel_width(kernel / kernel.sum()))


def width_thresholds(n_keys: int) -> dict[str, float]:
    """The width thresholds of :func:`classify_kernel`: ``local`` below one, ``uniform`` above
    the other (``UNIFORM_MIN_FRACTION`` of the ``n_keys`` positions a kernel spreads over)."""
    return {"local": LOCAL_MAX_N_EFF, "uniform": UNIFORM_MIN_FRACTION * n_keys}


def classify_kernel(n_eff: float, n_keys: int) -> str:
    """Kernel shape from its width: ``local``, ``uniform`` or ``slowly decaying``.

    Args:
        n_eff: the kernel's width (see :func:`kernel_width`).
        n_keys: the number of positions it spreads over (``n + 1``).
    """
    thresholds = width_thresholds(n_keys)
    if n_eff < thresholds["local"]:
        return "local"
    if n_eff > thresholds["uniform"]:
        return "uniform"
    return "slowly decaying"


@torch.no_grad()
def layer0_patterns(
    model: Model,
    n: int | None = None,
    destinations: tuple[str | int, ...] = (DEFAULT_DESTINATION,),
    heads: Sequence[int] | None = None,
    mean_keys: Float[Tensor, "mean_pos head_index d_head"] | None = None,
) -> Float[Tensor, "dest selected_head key_pos"]:
    """Positional patterns ``pos_n(i)`` of layer-0 heads for several destination tokens.

    Args:
        model: a GPT-2-architecture model or its
            :class:`~context_neurons.models.weights.ModelWeights`.
        n: destination position (default :func:`default_position`).
        destinations: destination tokens (strings of one token, or ids).
        heads: heads to keep (default all).
        mean_keys: precomputed ``M`` (default: from the calibration text's tokens).

    Returns:
        One ``[head, n + 1]`` pattern per destination token.
    """
    n = check_position(model, default_position(model) if n is None else n)
    heads = check_heads(model, heads)
    if mean_keys is None:
        mean_keys = default_mean_keys(model, n + 1)
    return torch.stack(
        [positional_pattern(model, n, d, heads=heads, mean_keys=mean_keys) for d in destinations]
    )


# ----------------------------------------------------------------------------------------------
# Content weights
# ----------------------------------------------------------------------------------------------


@torch.no_grad()
def content_statistics(
    model: Model,
    n: int | None = None,
    destinations: tuple[str | int, ...] | None = None,
    reference_tokens: Int[Tensor, " n_ref"] | None = None,
    heads: Sequence[int] | None = None,
) -> tuple[Float[Tensor, "dest selected_head"], Float[Tensor, "dest selected_head"]]:
    """Content spread and self-preference of each head, for each destination token.

    The token distribution is a text's tokens (with repetitions, so frequent tokens count more);
    the destination token itself is left out of it.

    Args:
        model: a GPT-2-architecture model or its
            :class:`~context_neurons.models.weights.ModelWeights`.
        n: destination position (default :func:`default_position`).
        destinations: destination tokens (default :func:`destinations_for` the model).
        reference_tokens: the token distribution (default: the calibration text's tokens).
        heads: heads to keep (default all).

    Returns:
        ``(spread, self_z)``: the standard deviation of ``log c_n(t)`` over the other tokens, and
        ``(log c_n(dest) - mean) / spread``.
    """
    n = check_position(model, default_position(model) if n is None else n)
    destinations = destinations_for(model) if destinations is None else destinations
    heads = check_heads(model, heads)
    if reference_tokens is None:
        reference_tokens = default_reference_tokens(model)
    reference_tokens = reference_tokens.to(model.cfg.device)
    spreads, self_z = [], []
    for dest in destinations:
        dest_id = token_id(model, dest)
        ids = torch.cat([reference_tokens, torch.tensor([dest_id], device=reference_tokens.device)])
        log_c = content_log_weights(model, n, dest_id, token_ids=ids, heads=heads).double()
        others = log_c[:, :-1][:, reference_tokens != dest_id]
        spread = others.std(-1)
        spreads.append(spread)
        self_z.append((log_c[:, -1] - others.mean(-1)) / spread)
    return torch.stack(spreads), torch.stack(self_z)


@torch.no_grad()
def previous_token_share(
    model: Model,
    tokens: Int[Tensor, " pos"] | None = None,
    heads: Sequence[int] | None = None,
    start: int = PREVIOUS_SHARE_START,
) -> Float[Tensor, " selected_head"]:
    """Each head's mean attention to the previous token, ``A[n, n-1]`` over
    ``start <= n < len(tokens)``: the exact layer-0 pattern, ``pos_n(i) c_n(t_i) / D_n`` at the
    text's own tokens (equal to ``blocks.0.attn.hook_pattern``).

    Args:
        model: a GPT-2-architecture model or its ModelWeights.
        tokens: one sequence, BOS first (default: the calibration text cut to ``n_ctx``).
        heads: heads to measure (default all).
        start: the first destination averaged over; a sequence no longer than ``start`` is
            averaged from position 1 (models with a context of 32 tokens or less).
    """
    weights = as_weights(model)
    if tokens is None:
        tokens = calibration_tokens(weights.tokenizer, n_ctx=weights.cfg.n_ctx)
    tokens = tokens.to(weights.cfg.device)
    heads = check_heads(model, heads)
    if len(tokens) < 2:
        raise OutOfRangeError("The previous-token share needs a sequence of at least 2 tokens.")
    q = project_exact(model, "Q", tokens)[:, heads]  # [pos, head, d_head]
    k = project_exact(model, "K", tokens)[:, heads]
    scores = torch.einsum("qhe,khe->hqk", q, k) / weights.cfg.d_head**0.5
    pattern = masked_softmax(scores, causal_mask(len(tokens), tokens.device))
    n = torch.arange(start if start < len(tokens) else 1, len(tokens), device=tokens.device)
    return pattern[:, n, n - 1].double().mean(-1).float().cpu()


# ----------------------------------------------------------------------------------------------
# The taxonomy
# ----------------------------------------------------------------------------------------------


@dataclass
class HeadTaxonomy:
    """Computed head classification of layer 0 (see the module docstring for the rules)."""

    n: int
    heads: list[int]
    destinations: list[str]
    patterns: Float[Tensor, "dest selected_head key_pos"]  # pos_n(i) for each destination token
    n_eff: Float[Tensor, "dest selected_head"]
    content_sd: Float[Tensor, "dest selected_head"]
    self_z: Float[Tensor, "dest selected_head"]
    shapes: dict[int, str] = field(default_factory=dict)
    groups: dict[str, list[int]] = field(default_factory=dict)
    previous_share: Float[Tensor, " selected_head"] | None = None  # on the calibration text
    previous_token_rule: bool = True  # whether the share was used (False: v1/v2's rules)

    def with_rule(self, previous_token_rule: bool) -> HeadTaxonomy:
        """This taxonomy with or without the previous-token rule: the groups assigned again from
        the same measures, nothing recomputed (protocols v1 and v2 read it without the rule)."""
        if previous_token_rule == self.previous_token_rule:
            return self
        groups = assign_groups(self.heads, self.shapes, self.content_sd, self.self_z,
                               self.previous_share, previous_token_rule)
        return replace(self, groups=groups, previous_token_rule=previous_token_rule)

    def column(self, head: int) -> int:
        """The column of ``head`` in the tensors of this taxonomy.

        Raises:
            OutOfRangeError: if the head was not classified.
        """
        if head not in self.heads:
            raise OutOfRangeError(
                f"Head {head} was not classified (heads: {self.heads}); pass one of those, or "
                f"classify it with classify_heads(model, heads=[...])."
            )
        return self.heads.index(head)

    def group_of(self, head: int) -> str:
        """The group a head was put in."""
        self.column(head)
        return next(group for group, members in self.groups.items() if head in members)

    def width(self, head: int) -> float:
        """``n_eff`` of a head for the first destination token (' the' by default)."""
        return float(self.n_eff[0, self.column(head)])

    def table(self) -> pd.DataFrame:
        """One row per head: width, shape, content spread, self-preference and group."""
        rows = []
        for k, head in enumerate(self.heads):
            rows.append(
                {
                    "head": head,
                    "n_eff": float(self.n_eff[0, k]),
                    "mean distance": float(mean_distance(self.patterns[0, k])),
                    "kernel": self.shapes[head],
                    "content sd": float(self.content_sd[:, k].median()),
                    "self z": float(self.self_z[:, k].median()),
                    "prev. share": (math.nan if self.previous_share is None
                                    else float(self.previous_share[k])),
                    "group": self.group_of(head),
                }
            )
        return pd.DataFrame(rows).set_index("head")

    def margins(self) -> pd.DataFrame:
        """How far every head is from every threshold of the rules, one row per head.

        Columns: the nearest width threshold (``local`` at :data:`LOCAL_MAX_N_EFF` or ``uniform``
        at ``UNIFORM_MIN_FRACTION * (n + 1)``) and the factor ``n_eff / threshold``; the
        self-preference minus :data:`DUPLICATE_MIN_Z` (standard deviations); the content spread
        over :data:`CONTEXTUAL_MAX_CONTENT_SD` (a factor); the previous-token share over
        :data:`PREVIOUS_TOKEN_MIN` (a factor). A factor near 1 or a difference near 0 is a close
        call.
        """
        thresholds = width_thresholds(self.n + 1)
        table, rows = self.table(), []
        for head, row in table.iterrows():
            name = min(thresholds, key=lambda t: abs(math.log(row["n_eff"] / thresholds[t])))
            rows.append(
                {
                    "head": head,
                    "group": row["group"],
                    "width threshold": f"{name} {thresholds[name]:g}",
                    "n_eff / threshold": row["n_eff"] / thresholds[name],
                    "self z - duplicate min": row["self z"] - DUPLICATE_MIN_Z,
                    "content sd / contextual max": row["content sd"] / CONTEXTUAL_MAX_CONTENT_SD,
                    "prev. share / 0.4": row["prev. share"] / PREVIOUS_TOKEN_MIN,
                }
            )
        return pd.DataFrame(rows).set_index("head")

    def closest_calls(self) -> pd.DataFrame:
        """For each rule, the head nearest its threshold among the heads whose label it sets.

        The width rule sets every head's kernel shape, and the group of every head that is not a
        duplicate head nor moved by the previous-token rule; the duplicate rule sets every head's
        group; the previous-token rule that of the heads that are neither duplicate nor local;
        the content rule only that of slowly decaying heads that are neither. Distances:
        ``|log(n_eff / threshold)|``, ``|self z - threshold|``, ``|log(share / 0.4)|`` and
        ``|log(content sd / threshold)|``.

        Returns:
            One row per rule and scope: the closest head (``None`` when the rule set nothing),
            its margin (the column of :meth:`margins` named in ``margin is``).
        """
        margins = self.margins()
        every = pd.Series(True, index=margins.index)
        not_duplicate = margins["group"] != "duplicate"
        slow = pd.Series({h: self.shapes[h] == "slowly decaying" for h in margins.index})
        local = pd.Series({h: self.shapes[h] == "local" for h in margins.index})
        ratio = margins["prev. share / 0.4"]
        # the heads the previous-token rule moved out of reach of the width and content rules
        by_share = (ratio >= 1) & ~local & not_duplicate & self.previous_token_rule
        width = margins["n_eff / threshold"].map(math.log).abs()
        rules = [
            ("kernel width -> shape", width, every, "n_eff / threshold"),
            ("kernel width -> group", width, not_duplicate & ~by_share, "n_eff / threshold"),
            (
                "self z -> duplicate",
                margins["self z - duplicate min"].abs(),
                every,
                "self z - duplicate min",
            ),
            (
                "prev. share -> detokenization",
                ratio.where(ratio > 0).map(math.log).abs(),  # a share of 0 is infinitely far
                not_duplicate & ~local & (ratio > 0) & self.previous_token_rule,
                "prev. share / 0.4",
            ),
            (
                "content sd -> contextual",
                margins["content sd / contextual max"].map(math.log).abs(),
                not_duplicate & slow & ~by_share,
                "content sd / contextual max",
            ),
        ]
        rows = []
        for rule, distance, applies, column in rules:
            scoped = distance[applies]
            head = int(scoped.idxmin()) if len(scoped) else None
            rows.append(
                {
                    "rule": rule,
                    "heads it decides": len(scoped),
                    "closest head": head,
                    "margin": margins.loc[head, column] if head is not None else math.nan,
                    "margin is": column,
                }
            )
        return pd.DataFrame(rows).set_index("rule")

    def width_windows(self) -> pd.DataFrame:
        """For each width threshold, the nearest head width on either side of it.

        A threshold anywhere in the window ``(below, above)`` gives the same kernel shapes, so the
        window's size says how much the shapes depend on where the threshold was put.
        """
        thresholds = width_thresholds(self.n + 1)
        widths = {h: self.width(h) for h in self.heads}
        rows = []
        for name, value in thresholds.items():
            # the sides as classify_kernel draws them: local is < its threshold, uniform > its
            below = [h for h, w in widths.items() if (w < value if name == "local" else w <= value)]
            above = [h for h in widths if h not in below]
            low = max(below, key=widths.get) if below else None
            high = min(above, key=widths.get) if above else None
            rows.append(
                {
                    "threshold": name,
                    "n_eff": value,
                    "head below": low,
                    "n_eff below": widths[low] if below else math.nan,
                    "head above": high,
                    "n_eff above": widths[high] if above else math.nan,
                }
            )
        return pd.DataFrame(rows).set_index("threshold")

    def destination_table(self) -> pd.DataFrame:
        """``n_eff`` of every head (columns) for every destination token (rows)."""
        return pd.DataFrame(
            self.n_eff.cpu().numpy(),
            index=self.destinations,
            columns=[f"head {h}" for h in self.heads],
        )


def assign_group(shape: str, content_sd: float, self_z: float,
                 previous_share: float = 0.0, previous_min: float = PREVIOUS_TOKEN_MIN) -> str:
    """A head's group from its kernel shape, content spread, self-preference and previous-token
    share (0 leaves the previous-token rule out: v1 and v2's taxonomy, chapter 9's schemes); a
    share of at least ``previous_min`` makes a head detokenization (a protocol passes its own)."""
    if self_z >= DUPLICATE_MIN_Z:
        return "duplicate"
    if shape == "local" or previous_share >= previous_min:
        return "detokenization"
    if shape == "slowly decaying" and content_sd <= CONTEXTUAL_MAX_CONTENT_SD:
        return "contextual"
    return "miscellaneous"


def assign_groups(
    heads: list[int],
    shapes: dict[int, str],
    content_sd: Float[Tensor, "dest selected_head"],
    self_z: Float[Tensor, "dest selected_head"],
    previous_share: Float[Tensor, " selected_head"],
    previous_token_rule: bool,
) -> dict[str, list[int]]:
    """Every head's group (:func:`assign_group`, the medians over destination tokens)."""
    groups: dict[str, list[int]] = {g: [] for g in GROUPS}
    for k, head in enumerate(heads):
        group = assign_group(
            shapes[head], float(content_sd[:, k].median()), float(self_z[:, k].median()),
            float(previous_share[k]) if previous_token_rule else 0.0,
        )
        groups[group].append(head)
    return groups


@torch.no_grad()
def classify_heads(
    model: Model,
    n: int | None = None,
    destinations: tuple[str | int, ...] | None = None,
    heads: Sequence[int] | None = None,
    reference_tokens: Int[Tensor, " n_ref"] | None = None,
    previous_token_rule: bool = True,
) -> HeadTaxonomy:
    """Classify layer-0 heads into kernel shapes and groups (``book/notation.md``, section 3).

    Kernel shapes use the first destination token (``' the'``, as in Figure 2); the duplicate
    test and the content spread take the median over all destination tokens.

    Args:
        model: a GPT-2-architecture model or its
            :class:`~context_neurons.models.weights.ModelWeights`.
        n: destination position (default :func:`default_position`: 500, the paper's, where the
            context allows).
        destinations: destination tokens, the first one defining the kernels (default
            :func:`destinations_for` the model).
        heads: heads to classify (default all).
        reference_tokens: token distribution for ``M`` and the content statistics (default: the
            calibration text's tokens).
        previous_token_rule: put a head whose previous-token share on the calibration text is
            ``>= PREVIOUS_TOKEN_MIN`` among the detokenization heads (False: the rules as protocols
            v1 and v2 registered them, without it; the share is measured either way).

    Returns:
        A :class:`HeadTaxonomy`.
    """
    n = check_position(model, default_position(model) if n is None else n)
    destinations = destinations_for(model) if destinations is None else destinations
    heads = check_heads(model, heads)
    mean_keys = (
        default_mean_keys(model, n + 1) if reference_tokens is None
        else mean_positional_keys(model, reference_tokens, n + 1)
    )
    patterns = layer0_patterns(model, n, destinations, heads, mean_keys).cpu()
    n_eff = kernel_width(patterns)
    spread, self_z = content_statistics(model, n, destinations, reference_tokens, heads)
    spread, self_z = spread.cpu(), self_z.cpu()
    shapes = {h: classify_kernel(float(n_eff[0, k]), n + 1) for k, h in enumerate(heads)}
    previous = previous_token_share(model, heads=heads)
    groups = assign_groups(heads, shapes, spread, self_z, previous, previous_token_rule)
    names = [d if isinstance(d, str) else model.tokenizer.decode([d]) for d in destinations]
    return HeadTaxonomy(n, heads, names, patterns, n_eff, spread, self_z, shapes, groups,
                        previous, previous_token_rule)


def compare_groups(computed: dict[str, list[int]], expected: dict[str, list[int]]) -> pd.DataFrame:
    """Side by side: computed and expected heads of each group, and whether they agree."""
    rows = []
    for group in GROUPS:
        mine, theirs = sorted(computed.get(group, [])), sorted(expected.get(group, []))
        rows.append({"group": group, "computed": mine, "expected": theirs, "agree": mine == theirs})
    return pd.DataFrame(rows).set_index("group")
