"""Checks of chapter 1's exercises (the decomposition of layer-0 attention scores)."""

from __future__ import annotations

import torch

from context_neurons import decomposition as dec
from context_neurons.book.exercise_checks.registry import PROPERTY, VALUE, close, holds, number
from context_neurons.book.exercise_checks.registry import register, tensor


@register("ex-diagonal", VALUE, {"diagonal_error": "max over heads and n of the error at i = n"},
          "against the package's decomposition of the chapter's text: within 1e-4 of the "
          "largest diagonal score")
def diagonal(ns: dict) -> str:
    decomposed, size = ns["decomposed"], len(ns["tokens"])
    index = torch.arange(size)
    exact = decomposed.exact_scores[:, index, index]
    scale = float(exact.abs().max())
    value = number("diagonal_error", ns["diagonal_error"])
    holds(value >= 0, "`diagonal_error` is negative: take the absolute value before the maximum.")
    error = (decomposed.positional_scores + decomposed.content_scores)[:, index, index] - exact
    close("diagonal_error", value, float(error.abs().max()), rtol=0.0, atol=1e-4 * scale,
          hint="the reconstructed score is the sum of two terms; compare it at i = n only.")
    return f"the diagonal error is {value:.2g}, float rounding of scores up to {scale:.3g}."


@register("ex-constant-text", VALUE, {"tv_to_hooks": "TV distance per head"},
          "one value per head, each below 1e-4, the package's TV between the hooked pattern of "
          "a constant text and pos_m on the same text recomputed")
def constant_text(ns: dict) -> str:
    model = ns["model"]
    m = min(300, model.cfg.n_ctx - 1)
    the = dec.token_id(model, " the")
    text = torch.full((1, m + 1), the, device=model.cfg.device)
    _, cache = model.run_with_cache(text, stop_at_layer=1,
                                    names_filter="blocks.0.attn.hook_pattern")
    hooked = cache["blocks.0.attn.hook_pattern"][0, :, m]
    reference = dec.tv_distance(hooked, dec.positional_pattern(
        model, m, " the", reference_tokens=torch.tensor([the], device=model.cfg.device)))
    value = tensor("tv_to_hooks", ns["tv_to_hooks"], (model.cfg.n_heads,))
    holds(bool((value >= 0).all() and (value <= 1).all()),
          "a TV distance lies between 0 and 1: check the factor 1/2 and the absolute value.")
    close("tv_to_hooks", value, reference, rtol=0.0, atol=1e-4,
          hint="which token distribution should M[i] average over when every token is ' the'?")
    return f"the largest TV is {float(value.max()):.1e}: pos_m is the attention pattern."


@register("ex-ch01-good-enough", PROPERTY,
          {"delta": "|Delta_n| at every destination n of the text, for the head of Figure 1.1",
           "bound": "2 TV_n max_{i<=n} |x_i - c| at every destination",
           "ratio": "median |Delta_n| / median movement of the output (positions n >= 1)"},
          "Delta_n against the package's exact and reconstructed patterns times the head's "
          "values; the bound holds at every destination; the ratio is a positive number",
          website="Whether the reconstruction is good enough is your argument from the ratio: "
                  "compare it with the solution on the website.")
def good_enough(ns: dict) -> str:
    model, tokens, head, shown = ns["model"], ns["tokens"], ns["head"], ns["shown"]
    decomposition = ns["contextual_decomposition"]
    _, cache = model.run_with_cache(tokens[None], stop_at_layer=1,
                                    names_filter="blocks.0.attn.hook_v")
    x = cache["blocks.0.attn.hook_v"][0, :, head] @ model.blocks[0].attn.W_O[head]
    row = shown.index(head)
    difference = decomposition.exact_pattern()[row] - decomposition.reconstructed_pattern()[row]
    reference = (difference @ x).norm(dim=-1)
    scale = float(reference.max())
    close("delta", ns["delta"], reference, rtol=1e-3, atol=1e-6 * scale,
          hint="Delta_n is the difference of the two patterns applied to x_i = v_i W_O.")
    delta = tensor("delta", ns["delta"])
    bound = tensor("bound", ns["bound"], tuple(reference.shape))
    holds(bool((delta <= bound * (1 + 1e-4) + 1e-6).all()),
          "the bound is below |Delta_n| somewhere: it must hold at every destination (is the "
          "maximum over i <= n a running maximum, and is the factor 2 there?).")
    ratio = number("ratio", ns["ratio"])
    holds(ratio > 0, "`ratio` should be a positive number (an error over a movement).")
    return f"the bound holds at all {len(delta)} destinations; ratio {ratio:.3f}."
