"""Checks of chapter 2's exercises (the head taxonomy)."""

from __future__ import annotations

from collections import Counter
from itertools import product

import pandas as pd

from context_neurons import taxonomy as tx
from context_neurons.book.exercise_checks.registry import FUNCTION, PROPERTY, VALUE, Differs
from context_neurons.book.exercise_checks.registry import holds, register, tensor


@register("ex-ch02-horizon", VALUE, {"horizon": "the 90% horizon k of every head"},
          "one whole number per head, equal to the horizon of the package's positional "
          "patterns (taxonomy.patterns[0]) recomputed")
def horizon(ns: dict) -> str:
    taxonomy = ns["taxonomy"]
    mass_from_n = taxonomy.patterns[0].flip(-1).cumsum(-1).cpu()
    reference = (mass_from_n < 0.9).sum(-1)
    value = tensor("horizon", ns["horizon"], tuple(reference.shape))
    holds(bool((value == value.round()).all()), "`horizon` should hold whole numbers (a count).")
    wrong = (value != reference).nonzero().flatten().tolist()
    if wrong:
        k = wrong[0]
        raise Differs(
            f"head {taxonomy.heads[k]}'s horizon is {int(value[k])}; the pattern's mass puts it "
            f"{'above' if value[k] > reference[k] else 'below'} that. Hint: k counts the "
            "positions before n, and k + 1 positions (n - k, ..., n) must hold 90%.")
    return f"{len(value)} horizons, each minimal."


@register("ex-ch02-classify", FUNCTION, {"my_group": "a function (n_eff, content_sd, self_z, "
                                                     "share, n) -> group name"},
          "called on 1,600 made-up heads around every threshold and two context lengths, "
          "against the package's rules (classify_kernel, then assign_group)")
def classify(ns: dict) -> str:
    my_group = ns["my_group"]
    holds(callable(my_group), "`my_group` should be a function.")
    widths = (5.0, tx.LOCAL_MAX_N_EFF - 0.1, tx.LOCAL_MAX_N_EFF, 100.0, 160.0)
    tried = 0
    for n, sd, z, share in product((200, 400), (1.0, tx.CONTEXTUAL_MAX_CONTENT_SD, 2.0),
                                   (0.0, tx.DUPLICATE_MIN_Z - 0.1, tx.DUPLICATE_MIN_Z, 6.0),
                                   (0.0, tx.PREVIOUS_TOKEN_MIN - 0.01, tx.PREVIOUS_TOKEN_MIN)):
        for n_eff in (*widths, tx.UNIFORM_MIN_FRACTION * (n + 1), n - 1.0):
            expected = tx.assign_group(tx.classify_kernel(n_eff, n + 1), sd, z, share)
            got = my_group(n_eff, sd, z, share, n)
            tried += 1
            if got != expected:
                raise Differs(
                    f"my_group(n_eff={n_eff:g}, content_sd={sd:g}, self_z={z:g}, share={share:g}"
                    f", n={n}) returns {got!r}; the rules give another group. Hint: check the "
                    "order of the rules and which side of each threshold is included.")
    return f"{tried} made-up heads classified as the rules do."


@register("ex-ch02-close-call", PROPERTY,
          {"subject": "the head you argue about", "votes": "setting -> group it gives",
           "argued": "the group you argue for"},
          "the head is the closest call of the width rule (when there is one), every vote is a "
          "group name, there are at least three settings and the argued group is their majority",
          website="The argument itself (which settings matter, and why) only the solution on "
                  "the website can judge.")
def close_call(ns: dict) -> str:
    taxonomy, calls = ns["taxonomy"], ns["calls"]
    closest = calls.loc["kernel width -> group"]["closest head"]
    subject = int(ns["subject"])
    if pd.notna(closest):
        holds(subject == int(closest), f"head {subject} is not the closest call of the width "
              "rule: read the row 'kernel width -> group' of taxonomy.closest_calls().")
    votes = dict(ns["votes"])
    holds(len(votes) >= 3, "vote over at least three settings (destinations, positions).")
    odd = sorted({g for g in votes.values() if g not in tx.GROUPS})
    holds(not odd, f"votes {odd} are not group names; groups are {list(tx.GROUPS)}.")
    count = Counter(votes.values())
    holds(count[ns["argued"]] == max(count.values()),
          "`argued` is not the group most settings give.")
    return f"head {subject}, {len(votes)} settings, majority {ns['argued']!r}."


