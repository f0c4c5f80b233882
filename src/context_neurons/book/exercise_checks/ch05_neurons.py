"""Checks of chapter 5's exercises (context neurons found from the weights)."""

from __future__ import annotations

import pandas as pd
import torch

from context_neurons import casestudies
from context_neurons import discovery as disc
from context_neurons.book.exercise_checks.registry import PROPERTY, VALUE, close, holds, number
from context_neurons.book.exercise_checks.registry import register, tensor


@register("ex-ch05-score", VALUE,
          {"c": "contributions of neuron j over the scoring vocabulary",
           "top_j": "mean of the 20 largest robust |z|"},
          "c against disc.contributions over the scoring vocabulary, top_j against scores.top[j] "
          "(relative 1e-4)")
def score(ns: dict) -> str:
    circuit, model, scores, j = ns["circuit"], ns["model"], ns["scores"], ns["found"][0]
    vocabulary = disc.scoring_vocabulary(model).nonzero().flatten()
    reference = disc.contributions(circuit, model, [j], vocabulary)[0]
    close("c", ns["c"], reference, rtol=1e-4, atol=1e-5 * float(reference.abs().max()),
          hint="one contribution per token of the scoring vocabulary, in its order.")
    top_j = number("top_j", ns["top_j"])
    close("top_j", top_j, scores.top[j], rtol=1e-4,
          hint="a robust z-score uses the median and 1.4826 times the median absolute deviation.")
    return f"neuron {j}: top[j] = {top_j:.3f}, as scores.top."


@register("ex-ch05-word-list", VALUE,
          {"ids": "token ids over-represented in the astronomy texts",
           "mean_z": "one number per carried neuron"},
          "every id is in the scoring vocabulary and at least twice as frequent in the astronomy "
          "texts as in the others; mean_z against the z-scores of disc.contributions for those ids")
def word_list(ns: dict) -> str:
    circuit, model, scores, texts = ns["circuit"], ns["model"], ns["scores"], ns["texts"]
    carried, ids = ns["carried"], [int(t) for t in ns["ids"]]
    holds(bool(ids), "`ids` is empty: lower your thresholds until some word tokens are kept.")
    counts = casestudies.token_counts(texts.windows, model.cfg.d_vocab)
    inside = counts[texts.indices("astronomy")].sum(0)
    outside = counts[texts.others("astronomy")].sum(0)
    rate_in, rate_out = inside / inside.sum(), outside / outside.sum()
    vocabulary = scores.vocabulary.cpu()
    bad = [t for t in ids if not (vocabulary[t] and rate_in[t] >= 2 * rate_out[t] > 0
                                  or vocabulary[t] and rate_out[t] == 0 < rate_in[t])]
    holds(not bad, f"{len(bad)} of your ids (e.g. {bad[0] if bad else None}) are not "
                   "over-represented in the astronomy texts (or not in the scoring vocabulary): "
                   "compare each token's rate inside with its rate outside.")
    c = disc.contributions(circuit, model, carried, torch.tensor(ids, device=model.cfg.device))
    z = (c - scores.median[carried][:, None]) / scores.spread[carried][:, None]
    close("mean_z", ns["mean_z"], z.mean(dim=1), rtol=1e-3, atol=1e-3,
          hint="standardise with each neuron's own median and spread (scores.median, "
               "scores.spread), then average over your tokens.")
    best = carried[int(z.mean(dim=1).argmax())]
    return f"{len(ids)} astronomy tokens; the neuron that reads them most is {best}."


@register("ex-ch05-predict", PROPERTY,
          {"predictions": "neuron -> (domain, +1 or -1)",
           "measured": "casestudies.domain_evidence of your predictions (optional)"},
          "three carried neurons outside the case studies, each with a domain of `texts` and a "
          "direction of +1 or -1, and measured equal to domain_evidence recomputed",
          website="Whether a prediction holds is the model's answer; whether your reasoning "
                  "from the token table was sound only the solution on the website can judge.")
def predict(ns: dict) -> str:
    predictions, carried, texts = dict(ns["predictions"]), ns["carried"], ns["texts"]
    studied = {j for j, _ in ns["cases"]}
    left = len([j for j in carried if j not in studied])
    holds(len(predictions) >= min(3, left), "predict three neurons (fewer only when fewer "
                                            "carried neurons are not case studies).")
    for j, (domain, direction) in predictions.items():
        holds(j in carried and j not in studied,
              f"neuron {j} should be carried and not one of the case studies of section 5.4.")
        holds(domain in set(texts.domains), f"{domain!r} is not a domain of `texts`.")
        holds(direction in (1, -1), f"the direction of neuron {j} should be +1 or -1.")
    fresh = casestudies.domain_evidence(ns["acts"], [(j, d) for j, (d, _) in predictions.items()])
    if "measured" in ns:  # the stub's table; a solution may measure one neuron at a time
        measured = ns["measured"]
        holds(isinstance(measured, pd.DataFrame) and len(measured) == len(predictions),
              "`measured` should be domain_evidence's table, one row per prediction.")
        close("measured['excess']", torch.tensor(measured["excess"].to_numpy(dtype=float)),
              torch.tensor(fresh["excess"].to_numpy(dtype=float)), rtol=1e-4, atol=1e-6)
    held = sum(d * row["excess / SD"] >= casestudies.WEAK
               for (_, d), (_, row) in zip(predictions.values(), fresh.iterrows()))
    return f"{held} of {len(predictions)} predictions hold (at least {casestudies.WEAK} SD)."
