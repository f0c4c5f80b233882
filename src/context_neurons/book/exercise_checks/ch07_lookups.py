"""Checks of chapter 7's exercises (context look-ups)."""

from __future__ import annotations

from context_neurons import lookups as lk
from context_neurons.book.exercise_checks.registry import VALUE, Differs, close, number, register
from context_neurons.book.exercise_checks.registry import tensor


@register("ex-ch07-attribution", VALUE, {"head_term": "the top head's direct attribution"},
          "against lookups[0].head_attribution of the top head on the first prompt, to a "
          "relative 1e-3")
def attribution(ns: dict) -> str:
    lookup = ns["lookups"][0]
    layer, head, _ = lookup.top_heads[0]
    reference = float(lookup.head_attribution[0, layer, head])
    value = number("head_term", ns["head_term"])
    close("head_term", value, reference, rtol=1e-3, atol=1e-3,
          hint="centre the read-out vector W_in[:, j] and divide by ln2's scale at the last token.")
    return f"head L{layer}H{head}: {value:+.4f}, as the package's attribution."


@register("ex-ch07-logit-effect", VALUE,
          {"predicted": "delta * the neuron's logit effect", "frozen_change": "the logits' "
           "change with the scale frozen"},
          "predicted against lk.neuron_logit_effect at the clean final scale, frozen_change "
          "against predicted, to 1e-3 of the largest entry")
def logit_effect(ns: dict) -> str:
    model, lookup = ns["model"], ns["lookups"][0]
    delta = float(ns.get("delta", 1.0))
    tokens = lookup.prompts[0].tokens[None].to(model.cfg.device)
    _, cache = model.run_with_cache(tokens, names_filter="ln_final.hook_scale")
    scale = float(cache["ln_final.hook_scale"][0, -1, 0])
    reference = delta * lk.neuron_logit_effect(model, lookup.layer, lookup.neuron,
                                               final_scale=scale)
    size = float(reference.abs().max())
    close("predicted", ns["predicted"], reference, rtol=0.0, atol=1e-4 * size,
          hint="use the clean scale of ln_final at the prompt's last token.")
    change = tensor("frozen_change", ns["frozen_change"], tuple(reference.shape))
    error = float((change - reference.double().cpu()).abs().max()) / size
    if error > 1e-3:
        raise Differs(f"`frozen_change` is off the prediction by {error:.1%} of its largest "
                      "entry (0.1% allowed): is ln_final's scale frozen at its clean value in "
                      "the run with the added output?")
    return f"the frozen change equals the prediction to {error:.1e} of its largest entry."
