"""Checks of chapter 9's exercises (four open questions)."""

from __future__ import annotations

import torch

from context_neurons import discovery as disc
from context_neurons import position_schemes as ps
from context_neurons import sweeps as sw
from context_neurons.book.exercise_checks.registry import FUNCTION, VALUE, Differs, close, first
from context_neurons.book.exercise_checks.registry import holds, number, register, tensor


@register("ex-ch09-destination", VALUE,
          {"mine": "the circuit of your destination", "jaccard": "Jaccard index of its found "
           "neurons with ' the''s (or `mine_jaccard`)"},
          "the sweep's circuit for ' the' equals `circuit`, yours has another destination, and "
          "the Jaccard index equals the one of its neurons scored again on the same vocabulary")
def destination(ns: dict) -> str:
    circuit, model, mine = ns["circuit"], ns["model"], ns["mine"]
    again = ns["again"]
    holds(torch.allclose(again.extended, circuit.extended,
                         atol=1e-4 * float(circuit.extended.abs().max())),
          "the sweep's circuit for ' the' should equal `circuit`.")
    holds(mine.dest_token != circuit.dest_token, "`mine` is the circuit of ' the': pick another "
          "destination.")
    scores = disc.score_neurons(mine, model, k=ns["k"], vocabulary=ns["vocabulary"])
    found = scores.found(disc.THETA)
    reference = sw.jaccard(found, ns["sweep"].found[ns["classes"].tokens[0]])
    name, value = first(ns, "mine_jaccard", "jaccard")
    close(name, number(name, value), reference, rtol=0.0, atol=1e-9,
          hint="score `mine` with k=k and vocabulary=vocabulary, then |A & B| / |A | B|.")
    return f"Jaccard {reference:.2f} with ' the'."


@register("ex-ch09-tv", FUNCTION,
          {"tv_by_hand": "the TV of the added head at n (a number, or a function "
           "(c, head, text, n) -> number)"},
          "against sw.circuit_attention_tv: a number for the added head at n on the first text; "
          "a function also on the second text at n / 2 and on the widest old head")
def tv(ns: dict) -> str:
    plus, model, tokens, n, added = ns["plus"], ns["model"], ns["tokens"], ns["n"], ns["added"]
    mine = ns["tv_by_hand"]

    def reference(head: int, text: torch.Tensor, position: int) -> float:
        values = sw.circuit_attention_tv(plus, model, text[None])
        return float(values[plus.heads.index(head), 0, position])

    if not callable(mine):
        close("tv_by_hand", number("tv_by_hand", mine), reference(added, tokens[0], n),
              rtol=1e-5, atol=1e-5, hint="index plus's tensors by the head's place in plus.heads.")
        return "the added head's TV, as the function's."
    widest = max(ns["circuit"].heads, key=ns["taxonomy"].width)
    cases = [(added, tokens[0], n), (added, tokens[1], n // 2), (widest, tokens[0], n)]
    for head, text, position in cases:
        close(f"tv_by_hand(plus, {head}, text, {position})",
              number("tv_by_hand", mine(plus, head, text, position)),
              reference(head, text, position), rtol=1e-5, atol=1e-5,
              hint="read the row and the weights at the given head, text and position.")
    return f"your function matches on {len(cases)} heads, texts and positions."


@register("ex-ch09-profiles", VALUE,
          {"recalibrated": "the circuit recalibrated on one domain text",
           "difference": "the largest |log D| difference from that text's profile"},
          "the recalibrated denominators at the profile positions match a row of `profiles` to "
          "1e-3 nats, and `difference` is that largest difference (to 1e-4)")
def profiles(ns: dict) -> str:
    positions, table = ns["positions"], ns["profiles"]
    mine = ns["recalibrated"].calibration.log_denominators[:, positions.to(
        ns["model"].cfg.device)].cpu()
    gaps = (mine[None] - table).abs().flatten(1).max(1).values
    best = float(gaps.min())
    holds(best < 1e-3, "the recalibrated denominators match no text's profile: recalibrate on "
                       "one of domains.windows and read the profile positions.")
    close("difference", number("difference", ns["difference"]), best, rtol=0.0, atol=1e-4,
          hint="compare with the profile of the same text, at `positions`.")
    return f"text {int(gaps.argmin())}: largest difference {best:.1e} nats."


@register("ex-ch09-rope", VALUE,
          {"half_fit": "the factorisation of the half-content model",
           "ratio": "error of half_fit / error of rope_fit, per rotating head"},
          "ratio against the package's factorisation of the half-content model on the same "
          "texts, per rotating head, to a relative 1e-4")
def rope(ns: dict) -> str:
    rotated, texts, rope_fit = ns["rotated"], ns["texts"], ns["rope_fit"]
    half, _ = ps.rotary_toy_model(seed=0, content_sd=0.5)
    half_error = ps.factorise_attention(half, texts).score_error().abs().sum((0, 2, 3))
    full_error = rope_fit.score_error().abs().sum((0, 2, 3))
    reference = (half_error / full_error).cpu()
    ratio = tensor("ratio", ns["ratio"]).flatten()
    if ratio.numel() == len(reference):
        ratio = ratio[torch.tensor(rotated)]
    elif ratio.numel() != len(rotated):
        raise Differs(f"`ratio` holds {ratio.numel()} numbers; expected one per rotating head "
                      f"({len(rotated)}).")
    close("ratio", ratio, reference[torch.tensor(rotated)], rtol=1e-4,
          hint="the half model's score error over the original model's, each summed over texts "
               "and positions.")
    return "the score error halves for every rotating head."
