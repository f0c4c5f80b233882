"""Checks of chapter 6's exercises (how good the approximation is)."""

from __future__ import annotations

import math

import torch

from context_neurons import evaluation as ev
from context_neurons.book.exercise_checks.registry import PROPERTY, VALUE, Differs, close, first
from context_neurons.book.exercise_checks.registry import holds, number, register

CHOICES = ("median", "per_position")


@register("ex-ch06-early-positions", VALUE,
          {"early_share": "denominator choice -> share of the squared error in n = 1..99"},
          "both shares against ev.activation_curves recomputed for carried[0] on windows[0], "
          "to 1e-4")
def early_positions(ns: dict) -> str:
    model, circuit, text, j = ns["model"], ns["circuit"], ns["windows"][0], ns["carried"][0]
    shares = dict(ns["early_share"])
    holds(set(shares) == set(CHOICES), f"`early_share` should have the keys {list(CHOICES)}.")
    for choice in CHOICES:
        curves = ev.activation_curves(circuit, model, text, j, denominators=choice)
        squared = ((curves["true"] - curves["approximation"])[1:] ** 2).double()
        close(f"early_share[{choice!r}]", number("early_share", shares[choice]),
              squared[:99].sum() / squared.sum(), rtol=0.0, atol=1e-4,
              hint="positions 1..99 over positions 1..end: leave out position 0 (BOS).")
    return ", ".join(f"{c} {float(shares[c]):.2f}" for c in CHOICES) + "."


@register("ex-ch06-fitted-fvu", VALUE,
          {"fitted_fvu": "FVU of the fitted line a * yhat + b for one pair"},
          "the fitted FVU of carried[0] on windows[0] (per-position denominators, n >= 1) "
          "against 1 - r^2 of the same pair, to 1e-4",
          )
def fitted_fvu(ns: dict) -> str:
    model, circuit, text, j = ns["model"], ns["circuit"], ns["windows"][0], ns["carried"][0]
    curves = ev.activation_curves(circuit, model, text, j, denominators="per_position")
    y, yhat = curves["true"][1:].double(), curves["approximation"][1:].double()
    r = float(torch.corrcoef(torch.stack([y, yhat]))[0, 1])
    raw = float(((y - yhat) ** 2).sum() / ((y - y.mean()) ** 2).sum())
    value = number("fitted_fvu", ns["fitted_fvu"])
    if abs(value - raw) < 1e-6 and abs(raw - (1 - r**2)) > 1e-4:
        raise Differs("`fitted_fvu` is the FVU of the approximation as it is: fit a and b first.")
    close("fitted_fvu", value, 1 - r**2, rtol=0.0, atol=1e-4,
          hint="fit y by a * yhat + b with least squares (positions n >= 1 of the per-position "
               "curves of carried[0] on windows[0]).")
    return f"fitted FVU {value:.4f} = 1 - r^2, below the raw FVU {raw:.4f}."


@register("ex-ch06-calibration", PROPERTY,
          {"prediction": "+1 or -1", "D": "the domain", "C": "the calibration text",
           "median_fvu": "calibration text -> median FVU of D's own neurons on D's texts"},
          "the prediction is +1 or -1, D is a domain with own neurons, and the median FVU on C "
          "equals the sensitivity table's of section 6.6",
          website="Your reasoning for the prediction only the solution on the website can judge; "
                  "whether it holds is the model's answer.")
def calibration(ns: dict) -> str:
    holds(ns["prediction"] in (1, -1), "`prediction` should be +1 or -1.")
    own, sensitivity, domain, text = ns["own_neurons"], ns["sensitivity"], ns["D"], ns["C"]
    holds(domain in own, f"{domain!r} is not a domain of section 6.6 ({sorted(own)}).")
    name, fvu = first(ns, "calibrated", "median_fvu")
    value = fvu.median_fvu if name == "calibrated" else fvu[text]
    if own[domain] and text in sensitivity["own neurons' FVU"].index:
        close(f"the median FVU on {text}", number(name, value),
              sensitivity["own neurons' FVU"].loc[text, domain], rtol=1e-4, atol=1e-6,
              hint="evaluate own_neurons[D] on domain_sets[D] with the circuit of C.")
    holds(math.isfinite(float(value)), "the median FVU should be a finite number.")
    return f"{domain} texts calibrated on {text}: median FVU {float(value):.4f}."


@register("ex-ch06-capstone", PROPERTY,
          {"predicted": "the predicted raise of the neuron on D's texts",
           "measured": "the measured raise", "ratio": "measured / predicted"},
          "predicted and measured are finite numbers and ratio is their quotient",
          website="The capstone is graded by its rubric (the instructors' page): the criterion "
                  "(same sign, within a factor of 2) is the model's answer, the reasoning "
                  "is yours.")
def capstone(ns: dict) -> str:
    predicted, measured = number("predicted", ns["predicted"]), number("measured", ns["measured"])
    holds(math.isfinite(predicted) and math.isfinite(measured) and predicted != 0,
          "`predicted` and `measured` should be finite numbers, `predicted` not zero.")
    close("ratio", number("ratio", ns["ratio"]), measured / predicted, rtol=1e-6)
    passes = 0.5 <= measured / predicted <= 2
    return f"ratio {measured / predicted:.2f}: the criterion {'passes' if passes else 'fails'}."


@register("ex-ch06-band-tau", VALUE,
          {"tau": "min(Hoeffding, Chebyshev) deviation of head circuit.heads[0]'s D at n = 200"},
          "tau against the band's own deviation band.denominators.tau at (first head, n = 200), "
          "to 1e-6 relative")
def band_tau(ns: dict) -> str:
    band = ns["band"]
    expected = float(band.denominators.tau[0, 200])
    value = number("tau", ns["tau"])
    close("tau", value, expected, rtol=1e-6, atol=1e-9,
          hint="only positions 0 < i < n are random (BOS and destination are fixed); the range "
               "and variance are those of c / mean on the calibration distribution's support.")
    return f"tau = {value:.4f}, the band's own."
