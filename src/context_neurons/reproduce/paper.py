"""The paper's numbers. This module is the one place where values reported by Gibson (2025) on GPT-2
Small are typed in. They appear only in columns labelled "paper", beside values computed in the
run, never in their place (:mod:`context_neurons.reproduce.pipeline` and the chapters)."""

from __future__ import annotations

#: The paper's layer-0 head groups of GPT-2 Small (its taxonomy table).
PAPER_GROUPS: dict[str, list[int]] = {
    "contextual": [0, 2, 6, 8, 9, 10],
    "detokenization": [3, 4, 7],
    "duplicate": [1, 5],
    "miscellaneous": [11],
}
#: The six contextual heads of GPT-2 Small in the paper.
PAPER_CONTEXTUAL_HEADS: tuple[int, ...] = tuple(PAPER_GROUPS["contextual"])
#: Median Pearson r and FVU of the approximation, 1000 OpenWebText texts, GPT-2 Small.
PAPER_MEDIAN_R = 0.9485
PAPER_MEDIAN_FVU = 0.1426
#: Typical TV distance between exact and reconstructed patterns of the contextual heads (Figure 1).
PAPER_TV = 0.05
#: The blog's range of GPT-2 Small's LayerNorm scale 1/sigma across tokens.
PAPER_LN_SCALE_RANGE = (0.15, 0.175)

#: The paper column of the main job's table, by result key (text, as the paper states it).
PAPER: dict[str, str] = {
    "tv_distance_median": "~0.05",
    "head_groups": "0,2,6,8,9,10 contextual; 3,4,7 detok; 1,5 duplicate; 11 misc",
    "contextual_heads": "0, 2, 6, 8, 9, 10",
    "n_eff": "contextual kernels decay over ~50 tokens",
    "denominator_cv": "small for heads 0,2,6,8,9,10 (Figure 4)",
    "theta": "~5 (different score scale)",
    "neurons_found": "~100",
    "neurons_found_sweep": "hundreds at lower theta",
    "median_pearson_r": f"{PAPER_MEDIAN_R}",
    "median_fvu": f"{PAPER_MEDIAN_FVU}",
    "median_pearson_r_constant_denominator": "not reported apart: the paper's one r (above) "
                                             "does not say which denominators it used",
    "median_fvu_constant_denominator": "not reported apart: the paper's one FVU (above) does "
                                       "not say which denominators it used",
}
