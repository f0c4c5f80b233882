"""Checks of chapter 4's exercises (the contextual circuit)."""

from __future__ import annotations

import torch

from context_neurons import circuit as cc
from context_neurons.book.exercise_checks.registry import PROPERTY, VALUE, Differs, close, first
from context_neurons.book.exercise_checks.registry import holds, number, register, tensor
from context_neurons.models.toy import exact_toy_model
from context_neurons.text.windows import calibration_tokens


@register("ex-ch04-exact-circuit", VALUE,
          {"error": "the largest relative error of the toy circuit (or `exact_error`)"},
          "your toy circuit is checked on six new random texts of an unchanged toy model: the "
          "relative error must stay below 1e-5, and so must your number")
def exact_circuit(ns: dict) -> str:
    name, value = first(ns, "exact_error", "error")
    value = number(name, value)
    holds(0 <= value < 1e-5, f"`{name}` is {value:.3g}: on the exact toy model the error is float "
          "rounding (below 1e-5). Was the circuit built from the unchanged model, and is it "
          "compared with the same model?")
    toy, _ = exact_toy_model(seed=0)
    texts = torch.randint(0, toy.cfg.d_vocab, (6, toy.cfg.n_ctx),
                          generator=torch.Generator().manual_seed(7))
    fresh = float(cc.circuit_error(ns["toy_circuit"], toy, texts).relative_error.max())
    holds(fresh < 1e-5, f"`toy_circuit` is off by {fresh:.3g} on other texts of the exact toy "
          "model: build it from the model before you change W_Q.")
    return f"largest relative error {value:.1e}, and {fresh:.1e} on six other texts."


@register("ex-ch04-extended", VALUE,
          {"probe": "[1, n_ref + 1] tokens, the word last", "v": "[ctx_head, d_head] values",
           "e_word": "[d_model] extended embedding of the word"},
          "the probe's shape and last token, then e_word against circuit.extended of that word, "
          "to a relative 1e-3")
def extended(ns: dict) -> str:
    circuit = ns["circuit"]
    probe = torch.as_tensor(ns["probe"])
    holds(tuple(probe.shape) == (1, circuit.n_ref + 1),
          f"`probe` has shape {tuple(probe.shape)}; expected (1, {circuit.n_ref + 1}): the word "
          "sits at position n_ref.")
    word = int(probe[0, -1])
    tensor("v", ns["v"], (len(circuit.heads), ns["model"].cfg.d_head))
    reference = circuit.extended[word]
    scale = float(reference.norm())
    e_word = tensor("e_word", ns["e_word"], tuple(reference.shape))
    error = float((e_word - reference.double().cpu()).norm()) / scale
    if error > 1e-3:
        raise Differs(f"`e_word` is off by {error:.2%} of circuit.extended[{word}]'s norm (1e-3 "
                      "allowed). Hint: subtract the mean value at n_ref, and weight each head by "
                      "c_h(t) / Dhat_h before W_O.")
    return f"relative difference {error:.1e} from circuit.extended[{word}]."


@register("ex-ch04-calibration", PROPERTY,
          {"news": "the circuit calibrated on the news text", "predicted": "your prediction "
           "of news.extended from the prose circuit", "measured_better": "'prose' or 'news'"},
          "news is calibrated on the news text and shares the prose circuit's heads and "
          "kernels, your predicted embeddings equal news.extended "
          "to float precision, and measured_better has the lower median error (n >= 100), "
          "measured again",
          website="Whether the denominators predicted it, and why, only the solution on the "
                  "website can judge.")
def calibration(ns: dict) -> str:
    circuit, news, model = ns["circuit"], ns["news"], ns["model"]
    text = calibration_tokens(model.tokenizer, "news", model.cfg.n_ctx)
    holds(torch.equal(news.calibration.tokens.cpu(), text.cpu()) and news.heads == circuit.heads,
          "`news` should be calibrated on the news text, with the prose circuit's heads.")
    holds(torch.allclose(news.kernel, circuit.kernel, atol=1e-6), "`news` has other kernels: "
          "keep the prose text's tokens for the mean keys (reference_tokens).")
    scale = float(news.extended.abs().max())
    close("predicted", ns["predicted"], news.extended, rtol=1e-4, atol=1e-6 * scale,
          hint="only Dhat_h changes: how does it enter each head's share of e(t)?")
    errors = {name: float(cc.circuit_error(c, model, ns["tokens"], true=ns["true"])
                          .relative_error[:, 100:].median())
              for name, c in (("prose", circuit), ("news", news))}
    better = min(errors, key=errors.get)
    holds(ns["measured_better"] == better, f"`measured_better` is {ns['measured_better']!r}; "
          "measure the median relative error at n >= 100 of both circuits again.")
    return f"the prediction is exact; {better} calibrates these texts better."
