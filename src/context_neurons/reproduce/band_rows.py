"""The main job's rows of the certified band's coverage (issue 56; chapter 6, section 6.10).

The band of :mod:`context_neurons.evaluation.band`, measured in the run on the model the main job
runs, with the rules of :mod:`context_neurons.band_coverage` (its :func:`~context_neurons.
band_coverage.measure_coverage`, which the stored table calls too): ``delta``
:data:`~context_neurons.band_coverage.DELTA`, positions ``1..LENGTH-1``, the model's own
:data:`~context_neurons.band_coverage.N_NEURONS` highest-scoring neurons, both bands ("all
contextual heads", and "heads the check passes" when the check fails one), a percentile bootstrap
over documents and the reading rule. What differs from the stored table (that module's docstring,
"The main job"): the texts are the run's held-out general windows, the check is the run's, and
step 1 is also pooled per head group.

Keys: ``band_neurons``; ``band_coverage`` (per band: coverage, its interval, the nominal rate, the
reading, and the fraction of pairs whose band is *vacuous*, infinite or at least the neuron's
range); ``band_coverage_per_head_group`` (per taxonomy group of the contextual heads: step 1's
pooled coverage, nominal beside it, and the heads the check fails); ``band_coverage_table`` (the
whole measurement in the stored table's form, in the JSON only).
"""

from __future__ import annotations

import math

from jaxtyping import Int
from torch import Tensor

from context_neurons.assumptions import AssumptionsCheck
from context_neurons.band_coverage import (
    DELTA,
    LENGTH,
    N_NEURONS,
    POSITION_BUCKETS,
    RANGE_KEY,
    measure_coverage,
    rounded,
)
from context_neurons.circuit import ContextualCircuit
from context_neurons.models.weights import Model
from context_neurons.reproduce.results import Row

#: Above this fraction of vacuous pairs a reading line says the band certifies nothing. Chosen
#: after the stored table (band-coverage.json) showed the trained models' bands almost wholly
#: infinite: post hoc, and it decides only whether a line of words is printed.
VACUOUS_SAID = 0.5
#: The keys of :func:`band_rows`, in the table's order.
KEYS = ("band_neurons", "band_coverage", "band_coverage_per_head_group", "band_coverage_table")


def _interval(row: dict) -> dict:
    """A coverage row's numbers as the table shows them (four decimals)."""
    return rounded({"coverage": row["coverage"], "coverage_ci95": [row["low"], row["high"]],
                    "nominal": row["nominal"]}) | {"reading": row["reading"]}


def _texts(n: int) -> str:
    return (f"positions 1-{LENGTH - 1} of this run's {n} held-out general windows (cut to "
            f"{LENGTH} tokens; no domain windows), a document each")


def _reading(measured: dict, bands: dict) -> str:
    """Words under the table where a band falls short (with what the per-head and per-position
    rows name, as the reading rule asks) or is vacuous on more than half of its pairs."""
    out = []
    for name, band in bands.items():
        if band["reading"] == "falls short":
            heads = [r["head"] for r in measured["denominators"] if r["reading"] == "falls short"]
            positions = [r["set"] for r in measured["coverage"]
                         if r["heads"] == name and r["by"] == "positions"
                         and r["reading"] == "falls short"]
            out.append(f"the band of {name} falls short of nominal (denominators that miss their "
                       f"interval: heads {heads or 'none'}; positions that fall short: "
                       f"{', '.join(positions) or 'none'})")
        if band["vacuous"] > VACUOUS_SAID:
            out.append(f"the band of {name} is vacuous on {band['vacuous']:.1%} of its pairs: "
                       "there it holds and certifies nothing (this line is printed above "
                       f"{VACUOUS_SAID:.0%}, a cut written after the stored table was seen: post "
                       "hoc, words only, no verdict)")
    return "; ".join(out)


def band_rows(
    model: Model,
    circuit: ContextualCircuit,
    ranking: list[int],
    windows: list[Int[Tensor, " _pos"]],
    check: AssumptionsCheck,
) -> list[Row]:
    """The band's coverage on ``windows`` (module docstring), from the run's circuit, its
    neurons' ranking by score (``NeuronScores.ranking()``) and its assumptions check (nothing
    computed twice); rows that say why when it cannot be measured."""
    why = ""
    if len(windows) < 2:
        why = (f"not computed: {len(windows)} text{'' if len(windows) == 1 else 's'} (a bootstrap "
               "interval over documents needs at least 2; pass --texts 2 or more)")
    elif (shortest := min(len(w) for w in windows)) < LENGTH:
        why = (f"not computed: the windows hold {shortest} tokens and the band is measured on "
               f"{LENGTH} (it needs a model with a context of at least {LENGTH} tokens)")
    if why:
        return [Row(key, math.nan, why) for key in KEYS[1:3]]
    neurons = list(ranking[:N_NEURONS])
    measured = measure_coverage(model, circuit, neurons, windows, ["general"] * len(windows),
                                check)
    widths = {w["heads"]: w for w in measured["widths"]}
    bands = {row["heads"]: _interval(row) | {"vacuous": round(widths[row["heads"]][RANGE_KEY], 4)}
             for row in measured["coverage"] if row["by"] == "all"}
    heads_of = {row["group"]: row["heads"] for row in measured["denominators by group"]}
    groups = {row["group"]: _interval(row) | {"check_fails": row["check fails"]}
              for row in measured["denominators by group"]}
    reading = _reading(measured, bands)
    failed = sorted(set(circuit.heads) - set(measured["heads the check passes"]))
    check_words = (f"this run's assumptions check (on its {check.n_texts} windows) fails "
                   f"contextual heads {failed}: the band of the heads the check passes bounds "
                   "them by their values' range" if failed else
                   "this run's assumptions check passes every contextual head: one band")
    buckets = ", ".join(f"{a}-{b - 1}" for a, b in POSITION_BUCKETS)
    return [
        Row("band_neurons", neurons, f"the {N_NEURONS} highest-scoring neurons (top[j]) whose "
            "band is measured below"),
        Row("band_coverage", bands,
            f"per band (the contextual heads written as bags): the fraction of (neuron, "
            f"position) pairs whose true pre-activation lies in the band, delta {DELTA:g}, "
            f"{_texts(len(windows))}; interval: percentile bootstrap over documents; nominal "
            f"1 - delta; reading by the stored table's rule (context_neurons.band_coverage); "
            f"vacuous: the fraction of pairs whose band is infinite or at least the neuron's "
            f"range (those certify nothing); {check_words}",
            show="records", index="heads", reading=reading),
        Row("band_coverage_per_head_group", groups,
            "step 1 per head group of the taxonomy: the fraction of (contextual head, position "
            "n >= 2) pairs of the group whose text denominator D_h(n) lies in the band's "
            "interval, pooled over the group's heads (head_groups above; band_coverage_table "
            "lists them), same texts and interval; nominal 1 - delta_head; check_fails: the "
            "group's heads this run's check fails",
            show="records", index="group",
            reading="; ".join(f"step 1 falls short of nominal in group {name} (heads "
                              f"{heads_of[name]}): a denominator there leaves its interval more "
                              "often than the band allows"
                              for name, group in groups.items()
                              if group["reading"] == "falls short")),
        Row("band_coverage_table", rounded(measured),
            f"the whole measurement in the stored table's form: coverage per position bucket "
            f"({buckets}), widths, step 1 per head and per group", show="json"),
    ]
