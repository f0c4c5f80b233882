"""Calibration. This module measures how the approximation depends on its one calibration text
(whether a domain's own text helps it, which ingredient matters), and which neurons are quiet on
it (chapter 6; the quiet ones are listed by :mod:`.quiet`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import torch
from jaxtyping import Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from context_neurons.checks import check_neurons
from context_neurons.circuit import ContextualCircuit, build_circuit, get_circuit
from context_neurons.models.weights import as_weights
from context_neurons.evaluation.accuracy import (
    PAIR_MEASURES,
    Evaluation,
    _pair_measures,
    evaluate,
    evaluate_sets,
)
from context_neurons.evaluation.approximation import (
    DENOMINATORS,
    START,
    EvaluationError,
    true_pre_activations,
)
from context_neurons.evaluation.texts import calibration_leaks
from context_neurons.text.corpora import CALIBRATION_TEXTS


@torch.no_grad()
def calibration_sensitivity(
    model: TransformerBridge,
    window_sets: dict[str, list[Int[Tensor, " _pos"]]],
    neurons,
    calibrations=tuple(CALIBRATION_TEXTS),
    batch_size: int = 8,
    denominators: str = DENOMINATORS,
    truth_cache: dict | None = None,
    own_neurons: dict[str, list[int]] | None = None,
) -> pd.DataFrame:
    """Median r, FVU and context-part FVU for each calibration text and set of texts.

    The true pre-activations of each set are computed once and shared by all calibrations (and
    kept in ``truth_cache`` when given, for later :func:`evaluate` calls).

    Args:
        model: the model.
        window_sets: named sets of texts.
        neurons: layer-0 neuron indices.
        calibrations: names of ``data.CALIBRATION_TEXTS``.
        batch_size: texts per batch.
        denominators: ``"per_position"`` or ``"median"`` (:func:`approximator`).
        truth_cache: see :func:`evaluate`.
        own_neurons: for some sets, the neurons of that set's domain (:func:`matched_domains`):
            adds the measure ``"own neurons' FVU"``, the median FVU over those neurons only
            (NaN where a set has none).

    Returns:
        A DataFrame: rows calibration texts, columns ``(measure, text set)`` with the measures
        ``"median r"``, ``"median FVU"`` and ``"median context FVU"`` (and ``"own neurons' FVU"``).
    """
    neurons = check_neurons(model, neurons)
    cache = {} if truth_cache is None else truth_cache
    rows = {}
    for calib in calibrations:
        circuit = get_circuit(model, calib)
        evaluations = evaluate_sets(
            circuit,
            model,
            window_sets,
            neurons,
            batch_size=batch_size,
            truth_cache=cache,
            denominators=denominators,
        )
        row = {}
        for name, ev in evaluations.items():
            row[("median r", name)] = ev.median_pearson
            row[("median FVU", name)] = ev.median_fvu
            row[("median context FVU", name)] = ev.median_context_fvu
            if own_neurons is not None:
                own = [neurons.index(j) for j in own_neurons.get(name, []) if j in neurons]
                row[("own neurons' FVU", name)] = (
                    float(ev.fvu[:, own].nanmedian()) if own else float("nan")
                )
        rows[calib] = row
    table = pd.DataFrame(rows).T
    table.columns = pd.MultiIndex.from_tuples(table.columns)
    table.index.name = "calibration text"
    return table


#: A neuron is quiet on the calibration text when its largest output there (after the MLP's
#: activation function) is below this fraction of its largest output on its best set of texts...
QUIET_FRACTION = 0.1
#: ... and it counts as firing strongly there when that largest output is at least this.
STRONG_OUTPUT = 1.0


@torch.no_grad()
def silent_on_calibration(
    circuit: ContextualCircuit,
    model: TransformerBridge,
    neurons,
    evaluations: dict[str, Evaluation] | None = None,
    quiet: float = QUIET_FRACTION,
    strong: float = STRONG_OUTPUT,
) -> pd.DataFrame:
    """Each neuron's largest activation on the calibration text, beside its best set of texts.

    Without ``evaluations``: the largest true pre-activation on the calibration text only. With
    them (:func:`evaluate_sets` on named sets of texts, domains say, for the same neurons): its
    largest pre-activation on each set, the set where it is largest, and a relative criterion on
    the outputs, the MLP's activation function (GELU) of the pre-activations. A neuron is
    ``quiet on calibration`` when its largest output on the calibration text is below ``quiet``
    times its largest output on its best set, and that output is at least ``strong``: it is much
    quieter on the text that calibrates the circuit than in its domain, where it fires strongly.
    Quiet is relative: ``fires clearly on calibration`` says where the largest output on the
    calibration text still reaches ``strong``.

    Every column names its unit: ``pre-activation`` (before the MLP's activation function) or
    ``output`` (after it).

    Returns:
        A DataFrame, rows neurons: ``max pre-activation, calibration text``, then with
        ``evaluations`` the ``max pre-activation, <set>`` columns, ``best set``, ``max
        pre-activation, best set``, ``max output, calibration text``, ``max output, best set``,
        ``output ratio`` (calibration over best set), ``quiet on calibration`` and ``fires
        clearly on calibration``.
    """
    neurons = check_neurons(model, neurons)
    tokens = circuit.calibration.tokens
    pre = true_pre_activations(model, tokens[None], neurons)[0, START:]
    calibration = "max pre-activation, calibration text"
    table = pd.DataFrame(
        {calibration: pre.max(0).values.cpu().tolist()},
        index=pd.Index(neurons, name="neuron"),
    )
    if not evaluations:
        return table
    prefix = "max pre-activation, "
    for name, ev in evaluations.items():
        if ev.neurons != neurons:
            raise EvaluationError(
                f"The evaluation of {name!r} is of neurons {ev.neurons[:5]}..., not of the "
                f"neurons asked for: evaluate every set with the same neurons."
            )
        table[prefix + name] = ev.true_max.max(0).values.tolist()
    per_set = table[[prefix + name for name in evaluations]]
    table["best set"] = per_set.idxmax(axis=1).str.removeprefix(prefix)
    table[prefix + "best set"] = per_set.max(axis=1)
    act = as_weights(model).activation
    calib_out = act(torch.tensor(table[calibration].to_numpy()))
    best_out = act(torch.tensor(table[prefix + "best set"].to_numpy()))
    table["max output, calibration text"] = calib_out.tolist()
    table["max output, best set"] = best_out.tolist()
    table["output ratio"] = (calib_out / best_out).tolist()
    table["quiet on calibration"] = ((calib_out < quiet * best_out) & (best_out >= strong)).tolist()
    table["fires clearly on calibration"] = (calib_out >= strong).tolist()
    return table


def matched_domains(
    evaluations: dict[str, Evaluation], domains: dict[int, str | None]
) -> tuple[pd.DataFrame, dict[str, float]]:
    """Each neuron on the texts of its own domain, the domain chosen beforehand from its weights.

    The own domain must not be chosen on the outcome (e.g. the set where the neuron's mean
    activation is highest): give it from the weights
    (:func:`context_neurons.casestudies.domain_from_weights`). Neurons whose domain is ``None``
    (their tokens suggest no domain) or not among the sets are left out of the pooled medians.

    Args:
        evaluations: :func:`evaluate_sets` on named sets of texts (domains), same neurons.
        domains: neuron -> its own domain (a name of ``evaluations``) or ``None``.

    Returns:
        A per-neuron DataFrame (``domain``, and the medians of :meth:`Evaluation.select` over that
        domain's texts; NaN without a domain), and the medians over all matched neuron-text pairs
        pooled (NaN when no neuron has a domain).
    """
    if not evaluations:
        raise EvaluationError("No evaluations: give at least one named set of texts.")
    names = list(evaluations)
    neurons = evaluations[names[0]].neurons
    rows, pooled = {}, {}
    for k, neuron in enumerate(neurons):
        domain = domains.get(neuron)
        if domain is None or domain not in evaluations:
            rows[neuron] = {"domain": None}
            continue
        ev = evaluations[domain]
        pairs = torch.zeros_like(ev.pearson, dtype=torch.bool)
        pairs[:, k] = True
        rows[neuron] = {"domain": domain, **ev.select(pairs)}
        for measure, values in _pair_measures(ev).items():
            pooled.setdefault(measure, []).append(values[:, k])
    table = pd.DataFrame(rows).T.reindex(columns=["domain", *PAIR_MEASURES])
    table.index.name = "neuron"
    table = table.astype({name: float for name in PAIR_MEASURES})
    table["domain"] = pd.Series({n: rows[n]["domain"] for n in table.index}, dtype=object)
    medians = {
        measure: float(torch.cat(pooled[measure]).nanmedian()) if measure in pooled else math.nan
        for measure in PAIR_MEASURES
    }
    return table, medians


#: The domains with a calibration text of their own (section 6.6's comparison).
MATCHED = ("bible", "spanish", "legal", "code")

#: The measures of :func:`calibration_sensitivity` that chapter 6 tabulates -> what each shows.
SENSITIVITY_TABLES = {
    "median r": "median r of the carried neurons",
    "median FVU": "median FVU of the carried neurons",
    "own neurons' FVU": "own neurons' FVU: median FVU of each set's own neurons (NaN: none)",
}


@dataclass(frozen=True)
class CalibrationStudy:
    """The neurons evaluated with every calibration text on general texts and on the domains
    with a calibration text of their own (section 6.6).

    Attributes:
        own_neurons: each set's own neurons (those whose own domain, from the weights, it is).
        sensitivity: :func:`calibration_sensitivity` on the sets, with their own neurons' FVU.
        leaks: calibration texts found inside the sets, by content (none expected).
    """

    own_neurons: dict[str, list[int]]
    sensitivity: pd.DataFrame
    leaks: list[str]

    def findings(self) -> list[str]:
        """Whether a calibration text hides in the sets, and each set's own neurons."""
        return [
            f"calibration texts found inside these sets: {self.leaks or 'none'}",
            "own neurons: " + "; ".join(f"{d} {js}" for d, js in self.own_neurons.items()),
        ]


def calibration_study(model: TransformerBridge, general: list[Int[Tensor, " _pos"]],
                      domain_sets: dict[str, list[Int[Tensor, " _pos"]]], matched: pd.DataFrame,
                      neurons, truth_cache: dict | None = None, domains=MATCHED,
                      calibrations=tuple(CALIBRATION_TEXTS)) -> CalibrationStudy:
    """:class:`CalibrationStudy` of ``neurons`` on the ``general`` texts and the texts of
    ``domains`` (from ``domain_sets``); ``matched``: each neuron's own domain
    (:func:`matched_domains`); ``truth_cache``: see :func:`evaluate`."""
    sets = {"general": general}
    for domain in domains:
        sets[domain] = domain_sets[domain]
    own_neurons = {d: list(matched.index[matched["domain"] == d]) for d in sets}
    sensitivity = calibration_sensitivity(
        model, sets, neurons, calibrations=calibrations, truth_cache=truth_cache,
        own_neurons=own_neurons,
    )
    leaks = calibration_leaks(model.tokenizer, sets)  # by content, not by name
    return CalibrationStudy(own_neurons, sensitivity, leaks)


@dataclass(frozen=True)
class MatchedCalibration:
    """Does a domain's own calibration text help its domain (section 6.6)?

    Attributes:
        table: per domain, the median FVU with the matched calibration text and with prose,
            which is better, the best calibration text, and the same for the domain's own
            neurons (NaN where it has none).
        helps: on how many of the domains the matched text lowers the median FVU.
    """

    table: pd.DataFrame
    helps: int

    def finding(self) -> str:
        """The answer in one sentence, computed from the table."""
        share = self.helps / len(self.table)
        words = ("never helps" if self.helps == 0 else "rarely helps" if share < 0.5
                 else "helps on half the domains" if share == 0.5 else "mostly helps")
        return (f"The matched calibration text lowers the median FVU on {self.helps} of "
                f"{len(self.table)} domains: on this model it {words}.")


def matched_calibration(sensitivity: pd.DataFrame, own_neurons: dict[str, list[int]],
                        domains: tuple[str, ...] = MATCHED) -> MatchedCalibration:
    """:class:`MatchedCalibration` from :func:`calibration_sensitivity` (with ``own_neurons``)."""
    fvu = sensitivity["median FVU"]
    own_fvu = sensitivity["own neurons' FVU"]
    helps = 0
    versus = {}
    for domain in domains:
        matched_fvu, prose_fvu = fvu.loc[domain, domain], fvu.loc["prose", domain]
        helps += matched_fvu < prose_fvu
        versus[domain] = {
            "matched": matched_fvu,
            "prose": prose_fvu,
            "matched is": "better" if matched_fvu < prose_fvu else "worse",
            "best": fvu[domain].idxmin(),
            # own neurons' median FVU (NaN where the domain has no own neurons)
            "own, matched": own_fvu.loc[domain, domain] if own_neurons[domain] else float("nan"),
            "own, prose": own_fvu.loc["prose", domain] if own_neurons[domain] else float("nan"),
        }
    table = pd.DataFrame(versus).T.astype({c: float for c in ("matched", "prose",
                                                               "own, matched", "own, prose")})
    return MatchedCalibration(table, int(helps))


def calibration_constants(model: TransformerBridge,
                          calibrations=tuple(CALIBRATION_TEXTS)) -> pd.DataFrame:
    """Each calibration text's constants relative to prose's: the LN2 scale, and the geometric
    mean over the contextual heads of the calibrated denominators."""
    prose = get_circuit(model, "prose").calibration
    return pd.DataFrame(
        {
            calib: {
                "LN2 scale s2 / prose": c.ln2_scale / prose.ln2_scale,
                "Dhat_h / prose (geometric mean)": float(
                    (c.log_dhat - prose.log_dhat).mean().exp()),
            }
            for calib in calibrations
            for c in [get_circuit(model, calib).calibration]
        }
    ).T


@dataclass(frozen=True)
class IngredientSwap:
    """Which ingredient of the circuit matters on one domain (section 6.6): the median FVU and
    context r of the domain's own neurons on its texts, with the calibration text (denominators
    and LN2 scale) and the reference distribution of the mean keys and values each taken from
    prose or from the domain."""

    domain: str
    neurons: list[int]
    table: pd.DataFrame  # index (denominators and LN2 scale from, mean keys and values from)

    def finding(self) -> str:
        """Which ingredient moves the FVU more, in one sentence."""
        base = self.table.loc[("prose", "prose"), "FVU"]
        by_reference = abs(self.table.loc[("prose", self.domain), "FVU"] - base)
        by_calibration = abs(self.table.loc[(self.domain, "prose"), "FVU"] - base)
        return ("The reference distribution changes the FVU "
                + ("more" if by_reference > by_calibration else "less")
                + f" than the denominators and LN2 scale ({by_reference:.4f} vs "
                f"{by_calibration:.4f}).")


def ingredient_swap(model: TransformerBridge, circuit: ContextualCircuit,
                    sensitivity: pd.DataFrame,
                    domain_sets: dict[str, list[Int[Tensor, " _pos"]]],
                    own_neurons: dict[str, list[int]], truth_cache: dict | None = None,
                    domains: tuple[str, ...] = MATCHED) -> IngredientSwap | None:
    """:class:`IngredientSwap` on the domain where the matched calibration text changes its own
    neurons' FVU most (None when no domain has neurons of its own)."""
    own_fvu = sensitivity["own neurons' FVU"]
    change = {d: own_fvu.loc[d, d] / own_fvu.loc["prose", d] for d in domains if own_neurons[d]}
    if not change:
        return None
    domain = max(change, key=lambda d: abs(math.log(change[d])))
    tokens = {name: get_circuit(model, name).calibration.tokens for name in ("prose", domain)}
    rows = {}
    for calib in ("prose", domain):
        for reference in ("prose", domain):
            swapped = build_circuit(
                model, calib, heads=circuit.heads, reference_tokens=tokens[reference][1:]
            )
            res = evaluate(
                swapped, model, domain_sets[domain], own_neurons[domain], truth_cache=truth_cache
            )
            rows[(calib, reference)] = {
                "FVU": res.median_fvu,
                "context r": res.median_context_pearson,
            }
    swap = pd.DataFrame(rows).T
    swap.index.names = ["denominators and LN2 scale from", "mean keys and values from"]
    return IngredientSwap(domain, list(own_neurons[domain]), swap)
