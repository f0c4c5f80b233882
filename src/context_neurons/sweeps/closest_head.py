"""The head closest to contextual. This module answers which head misses the contextual group
most narrowly (chapter 9, second open question; the paper's head 11 of GPT-2, "close to
contextual"): :func:`contextual_distance` reads the taxonomy's margins as how far each head is
from the contextual group's rules, and :func:`closest_to_contextual` picks the nearest
non-contextual head."""

from __future__ import annotations

import math

import pandas as pd

from context_neurons import taxonomy as tx
from context_neurons.checks import InputError


def contextual_distance(taxonomy: tx.HeadTaxonomy) -> pd.DataFrame:
    """How far each head is from the contextual group, read from :meth:`HeadTaxonomy.margins`.

    Each rule a contextual head obeys contributes how far the head breaks it, as a log factor (0
    when it obeys it): the kernel width beyond its nearest width threshold (a local kernel below
    the local one, a uniform kernel above the uniform one); the content spread above its maximum;
    the self-preference above the duplicate threshold (``log(z / z_min)``); the previous-token
    share at or above its threshold (``log(share / 0.4)``, when the taxonomy applies that rule).
    ``distance`` is their sum: 0 for the contextual heads, small for a head that misses the group
    narrowly.
    """
    margins = taxonomy.margins()
    rows = {}
    for head, row in margins.iterrows():
        factor = math.log(row["n_eff / threshold"])
        local = str(row["width threshold"]).startswith("local")
        width = max(0.0, -factor) if local else max(0.0, factor)
        content = max(0.0, math.log(row["content sd / contextual max"]))
        z = row["self z - duplicate min"] + tx.DUPLICATE_MIN_Z
        duplicate = max(0.0, math.log(z / tx.DUPLICATE_MIN_Z)) if z > 0 else 0.0
        share = row["prev. share / 0.4"]
        previous = math.log(share) if taxonomy.previous_token_rule and share >= 1 else 0.0
        rows[head] = {
            "group": row["group"],
            "width": width,
            "content": content,
            "duplicate": duplicate,
            "previous": previous,
            "distance": width + content + duplicate + previous,
        }
    table = pd.DataFrame(rows).T.infer_objects()
    table.index.name = "head"
    return table


def closest_to_contextual(taxonomy: tx.HeadTaxonomy) -> int:
    """The non-contextual head with the smallest :func:`contextual_distance`."""
    table = contextual_distance(taxonomy)
    others = table[table["group"] != "contextual"]
    if others.empty:
        raise InputError("Every classified head is contextual: there is no other head to add.")
    return int(others["distance"].astype(float).idxmin())
