# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# (ch-taxonomy)=
# # 2. A taxonomy of layer-0 heads (Figure 2)
#
# Chapter 1 split every layer-0 attention pattern into a **positional pattern**
# $\mathrm{pos}_n(i)$ and **content weights** $c_n(t)$. That split is also a way to *describe* a
# head: where does it look (the shape and width of its positional kernel), and how much does it
# care about what it finds there (its content weights)? Gibson sorts the twelve heads of GPT-2
# Small's layer 0 into four groups this way: six **contextual** heads with slowly decaying kernels
# (0, 2, 6, 8, 9, 10), three **detokenization** heads that look at the previous few tokens
# (3, 4, 7), two **duplicate-token** heads (1, 5) and one **miscellaneous** head (11). This
# chapter computes that classification from the weights, reproduces Figure 2 (the three kernel
# shapes), and checks the result against what is known.
#
# ```{admonition} Learning objectives
# :class: tip
# After this chapter you can
# - compute the positional pattern of any head at a chosen destination and summarise it by its
#   width $n_{\mathrm{eff}} = 1/\sum_i \mathrm{pos}_n(i)^2$;
# - tell slowly decaying, local and uniform kernels apart, with explicit thresholds;
# - detect duplicate-token heads from their content weights alone;
# - say which heads are contextual, and why that is a property of the weights.
# ```
#
# **Prerequisites:** {ref}`ch-decomposition`.

# %% tags=["remove-cell"]
# Colab only: install this book's package and use the GPU (elsewhere this cell does nothing).
import importlib.util
import os
import sys

if ("google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ) and (
    importlib.util.find_spec("context_neurons") is None
):
    import subprocess

    spec = "context-neurons[online] @ git+https://github.com/context-neurons/context-neurons"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", spec], check=True)
    importlib.invalidate_caches()
from context_neurons.book.colab import colab_setup

device = colab_setup()

# %%
from context_neurons.book.chapter import setup_chapter

loaded = setup_chapter()
model = loaded.model

# %% [markdown]
# ## 2.1 Positional patterns at $n = 500$
#
# Following the paper, we place the destination token `' the'` at position $n = 500$ and compute
# each head's positional pattern
#
# $$
# \mathrm{pos}_n(i) = \operatorname*{softmax}_{i \le n}
#   \frac{q_n \cdot (M[i] - M[n])}{\sqrt{d_{head}}},
# $$
#
# the attention the head would pay if every source token were the same (chapter 1; $M[i]$ is the
# mean key at position $i$ over the calibration text's tokens). One call computes the patterns,
# the content statistics and the classification of this chapter; the sections below open it up.

# %%
from context_neurons import taxonomy as tx
from context_neurons.reproduce.paper import PAPER_GROUPS

taxonomy = tx.classify_heads(model)  # at tx.default_position(model): 500 where the context allows
print(f"destination position n = {taxonomy.n}, destination tokens: {taxonomy.destinations}")

# %%
from context_neurons.plotting.taxonomy import plot_kernel_shapes

figure = plot_kernel_shapes(taxonomy.patterns[0], taxonomy.heads, taxonomy.shapes)

# %% [markdown]
# *Figure 2 (reproduced): positional patterns of the twelve heads at $n = 500$ with destination
# `' the'`, against the distance $n - i$ back from the destination, grouped by the kernel shape
# computed in section 2.2. Note the different horizontal and vertical scales.* The paper finds
# three shapes on GPT-2 Small: **slowly decaying** kernels that spread their mass over tens of
# tokens, **local** kernels concentrated on the last few tokens, and **uniform** kernels nearly
# flat over the whole context. A panel says so when no head of this model has that shape.
#
# ## 2.2 The width of a kernel
#
# A single number summarises how many tokens a kernel averages over:
#
# $$
# n_{\mathrm{eff}} = \frac{1}{\sum_{i \le n} \mathrm{pos}_n(i)^2} .
# $$
#
# It equals 1 for a head that attends to one token and $n + 1$ for a uniform head, and for an
# exponential kernel $\mathrm{pos}_n(i) \propto r^{\,n-i}$ with decay length $w$ ($r = e^{-1/w}$)
# it is $(1 + r)/(1 - r) \approx 2w$ (`taxonomy.exponential_width` computes it exactly on $n + 1$
# positions). It is also the quantity that controls the stability of the denominators in
# {ref}`ch-stability`. We classify the shape of a kernel from its width:
#
# - **local** if $n_{\mathrm{eff}} < 32$ tokens: the head averages over about a sentence or less;
# - **uniform** if $n_{\mathrm{eff}} > (n+1)/2$: the kernel is flat over the whole context;
# - **slowly decaying** otherwise: tens to hundreds of tokens.
#
# Both thresholds are choices (`taxonomy.LOCAL_MAX_N_EFF`, `taxonomy.UNIFORM_MIN_FRACTION`);
# section 2.5 shows how far each head is from them. The table also shows the mean distance
# $\sum_i (n - i)\,\mathrm{pos}_n(i)$ for intuition, and on the planted model the width of the
# exponential kernel that was planted (decay length $w$), beside the measured one.

# %%
table = taxonomy.table()
print(
    f"local below n_eff = {tx.LOCAL_MAX_N_EFF:g}; uniform above n_eff = "
    f"{tx.UNIFORM_MIN_FRACTION * (taxonomy.n + 1):g}\n"
)
widths_table = table[["n_eff", "mean distance", "kernel"]].copy()
if loaded.is_planted:
    planted_decay = loaded.truth.kernel_widths
    widths_table["planted w"] = [planted_decay[h] for h in widths_table.index]
    widths_table["planted n_eff (exponential)"] = [
        tx.exponential_width(planted_decay[h], taxonomy.n + 1) for h in widths_table.index
    ]
print(widths_table.round(1).to_string())

# %% [markdown]
# On the planted model (last two columns, shown only there), compare each measured width with
# the width of the exponential kernel that was planted: about $2w$ once $w$ exceeds a few tokens,
# and capped by the $n + 1 = 501$ positions for the widest kernels. The planted kernels are
# exponential only up to the LayerNorm scale of each position, so small differences are expected.
#
# ## 2.3 Content weights: spread and self-preference
#
# The kernel says where a head looks; the content weights say how much the identity of a source
# token matters. We summarise $\log c_n(t)$ (destination at $n = 500$) over the tokens of the
# calibration text, with repetitions so that frequent tokens count more, by two numbers:
#
# - the **spread**, the standard deviation of $\log c_n(t)$: a spread of $s$ nats means a typical
#   token's weight is $e^{\pm s}$ times the average;
# - the **self-preference** of the destination token $d$,
#   $z = (\log c_n(d) - \overline{\log c_n}) / \mathrm{spread}$, with mean and spread taken over the
#   *other* tokens. A duplicate-token head attends to earlier copies of the current token, so its
#   $z$ is large for every destination token.
#
# Both are computed for the eight destination tokens of `taxonomy.DESTINATIONS`; the table gives
# the median over them.

# %%
print(table[["content sd", "self z"]].round(2).to_string())

# %% [markdown]
# ## 2.4 The four groups
#
# The groups follow from the kernel and the content statistics, in this order:
#
# 1. **duplicate**: median self-preference $z \ge 4$ (the destination's own token stands four
#    standard deviations above the rest);
# 2. **detokenization**: otherwise, a local kernel;
# 3. **contextual**: otherwise, a slowly decaying kernel with a content spread of at most 1.5 nats
#    (the kernel, not the tokens, decides where the head looks);
# 4. **miscellaneous**: everything else: a uniform kernel without a duplicate preference, or a
#    slowly decaying kernel whose content weights vary too much. The cell below says which.

# %%
for head in taxonomy.groups["miscellaneous"]:
    reason = (
        "uniform kernel"
        if taxonomy.shapes[head] == "uniform"
        else f"content sd {table.loc[head, 'content sd']:.2f} > {tx.CONTEXTUAL_MAX_CONTENT_SD:g}"
    )
    print(f"head {head} is miscellaneous: {reason}")
if not taxonomy.groups["miscellaneous"]:
    print("no head is miscellaneous")

# %% [markdown]
# The map below places every head by its width and its self-preference, with the three
# thresholds that decide the groups.

# %%
from context_neurons.plotting.taxonomy import plot_head_map

figure = plot_head_map(
    taxonomy.n_eff[0],
    taxonomy.self_z.median(dim=0).values,
    taxonomy.heads,
    taxonomy.groups,
    local_max=tx.width_thresholds(taxonomy.n + 1)["local"],
    duplicate_min=tx.DUPLICATE_MIN_Z,
    uniform_min=tx.width_thresholds(taxonomy.n + 1)["uniform"],
)

# %% [markdown]
# *Figure 2.2: each head's kernel width (horizontal, log scale) and self-preference (vertical),
# coloured by the computed group. Dotted: the local threshold; dash-dotted: the uniform
# threshold; dashed: the duplicate threshold.* Duplicate heads sit above the dashed line,
# detokenization heads left of the dotted line, uniform kernels right of the dash-dotted line,
# and the slowly decaying kernels between the two vertical lines. The content-spread rule does not
# appear in the map; section 2.5 gives its margins.
#
# ## 2.5 How robust is the classification?
#
# The thresholds (32 tokens, half the context, $z = 4$, 1.5 nats) were chosen while building this
# book, on the planted model, whose structure we planted to follow the paper's taxonomy. A rule
# tuned on the model it is tested on can look better than it is, so we print how far every head is
# from every threshold: the factor $n_{\mathrm{eff}}/\text{threshold}$ to the nearest width
# threshold, the difference $z - 4$, and the factor content sd / 1.5. A factor near 1 or a
# difference near 0 is a close call; on GPT-2 Small this table says how much the computed groups
# can be trusted.

# %%
margins = taxonomy.margins()
print(margins.round(2).to_string())
calls = taxonomy.closest_calls()
print()
print(calls.round(2).to_string())
slow = [h for h in taxonomy.heads if taxonomy.shapes[h] == "slowly decaying"]
moved = [h for h in slow if h in taxonomy.groups["miscellaneous"]]
print(
    f"\nslowly decaying heads moved to miscellaneous by the content rule "
    f"(content sd > {tx.CONTEXTUAL_MAX_CONTENT_SD:g}): {moved}"
)

# %% [markdown]
# Read the second table as: for each rule, the head nearest its threshold among the heads whose
# label that rule decides. The first row concerns the kernel shapes of all heads; the second the
# groups of the heads that are not duplicate heads (for a duplicate head, the duplicate test comes
# first and its kernel does not change its group).

# %%
width_call = calls.loc["kernel width -> shape"]
head = int(width_call["closest head"])
print(
    f"closest call on the width: head {head}, n_eff {taxonomy.width(head):.1f}, "
    f"{width_call['margin']:.2f} x the {margins.loc[head, 'width threshold']} threshold; "
    f"its group ({taxonomy.group_of(head)}) "
    + (
        "does not depend on it (the duplicate test comes first)"
        if taxonomy.group_of(head) == "duplicate"
        else "depends on it"
    )
)
windows = taxonomy.width_windows()
print("\nthe nearest widths on either side of each width threshold:")
print(windows.round(1).to_string())
if slow:
    largest_sd = table.loc[slow, "content sd"].max()
    print(
        f"largest content sd of a slowly decaying head: {largest_sd:.2f} nats, "
        f"{tx.CONTEXTUAL_MAX_CONTENT_SD / largest_sd:.1f} x below the threshold "
        f"{tx.CONTEXTUAL_MAX_CONTENT_SD:g}"
    )
local_window = windows.loc["local"]
print(
    f"the local threshold {tx.LOCAL_MAX_N_EFF:g} lies "
    f"{tx.LOCAL_MAX_N_EFF / local_window['n_eff below'] - 1:.0%} above the widest narrower kernel "
    f"and {local_window['n_eff above'] / tx.LOCAL_MAX_N_EFF - 1:.0%} below the narrowest wider one"
)

# %% [markdown]
# Any threshold inside a printed window gives the same kernel shapes. Two signs of a rule tuned on
# the model it is tested on are a rule that moves no head, because every head is far from it (the
# content rule, when the slowly decaying heads' content sd is far below 1.5 nats: it was never put
# to the test), and a threshold in a window only a few per cent wide (the local threshold, when the
# widest narrower kernel is just below it: it was placed by looking at these very heads). The
# lines above say how much room each rule had on the model this page ran on; on the planted model
# the contextual heads have weak content dependence by construction. On GPT-2 Small, expect the
# close calls to differ. In particular, Gibson calls head 11 "unclear, close to contextual": if
# its kernel there is slowly decaying rather than uniform and its content weights vary little,
# these rules put it in the contextual group, a disagreement with the paper's *label* rather than
# with what the head does. Any head with a margin near a threshold should be read the same way.
#
# How does the computed classification compare with what is known? On the planted model we know
# the groups we built in; on GPT-2 Small we compare with the paper.

# %%
comparison = tx.compare_groups(taxonomy.groups, PAPER_GROUPS)
comparison = comparison.rename(columns={"expected": "paper (GPT-2 Small)", "agree": "= paper"})
if loaded.is_planted:
    truth = tx.compare_groups(taxonomy.groups, loaded.truth.head_groups)
    comparison["planted truth"] = truth["expected"]
    comparison["= truth"] = truth["agree"]
    shapes_agree = taxonomy.shapes == loaded.truth.kernel_shapes
print(comparison.to_string())
if loaded.is_planted:
    print(f"\nkernel shapes agree with the planted shapes: {shapes_agree}")

# %% [markdown]
# On the planted model, compare the computed groups and kernel shapes with what was planted (the
# classifier never reads the planted record); the planted model was built to follow the paper's
# taxonomy, so the paper's column should agree as well. On GPT-2 Small, the table puts the groups
# computed from the real weights beside the paper's, and the margins above say which of any
# disagreements are close calls.
#
# ## 2.6 Does the kernel depend on the destination token?
#
# The query $q_n$ depends on the destination token, so the positional pattern does too. For the
# taxonomy to be a property of the *head*, that dependence must be weak. The widths for eight
# destination tokens:

# %%
widths = taxonomy.destination_table()
print(widths.round(1).to_string())
spread = (widths.max() / widths.min() - 1).max()
print(f"\nlargest relative change of a head's width across these tokens: {spread:.1%}")
same_shapes = all(
    tx.classify_kernel(float(taxonomy.n_eff[d, k]), taxonomy.n + 1) == taxonomy.shapes[head]
    for d in range(len(taxonomy.destinations))
    for k, head in enumerate(taxonomy.heads)
)
print(f"every head keeps its kernel shape for every destination token: {same_shapes}")

# %%
from context_neurons.plotting.taxonomy import plot_destination_dependence

contextual = taxonomy.groups["contextual"]
local = taxonomy.groups["detokenization"]
show = [contextual[0], contextual[-1], local[-1]] if contextual and local else taxonomy.heads[:3]
figure = plot_destination_dependence(taxonomy.patterns, taxonomy.destinations, taxonomy.heads, show)

# %% [markdown]
# *Figure 2.3: positional patterns of a contextual head, a second contextual head and a
# detokenization head for eight destination tokens (last 150 positions).* The destination token
# rescales a kernel (through the LayerNorm scale and the direction of the query); how much is the
# largest relative change printed above, and the check above says whether any head would change
# kernel shape with the destination.
#
# ## 2.7 Exercises
#
# ````{exercise} Measure how far back each head looks
# :label: ex-ch02-horizon
#
# *Difficulty: easy, 15 minutes.* For every head, compute the **90% horizon**: the smallest $k$
# such that the last $k + 1$ positions ($n-k, \dots, n$) hold at least 90% of the positional
# pattern's mass (use `taxonomy.patterns[0]`, one row per head, last column $i = n$). Then show
# that the horizon can never be much shorter than the width: if $k + 1$ positions hold a mass of at
# least $0.9$, then $k + 1 \ge 0.81\, n_{\mathrm{eff}}$. For an exponential kernel, how does the
# horizon compare with $n_{\mathrm{eff}}$?
#
# ```python
# horizon = ...  # one integer per head
# ```
# ````
#
# ```{solution-start} ex-ch02-horizon
# :class: dropdown
# ```
#
# Reverse each pattern so that it starts at $i = n$, take the cumulative sum and count the
# positions before it reaches 0.9. For the bound, the Cauchy-Schwarz inequality on the $k + 1$
# positions gives $\sum \mathrm{pos}^2 \ge (\sum \mathrm{pos})^2 / (k + 1) \ge 0.81 / (k + 1)$,
# so $n_{\mathrm{eff}} \le (k + 1) / 0.81$, whatever the model. For an exponential kernel with
# decay length $w$ the mass beyond distance $k$ is $r^{k+1}$, so the horizon is about
# $w \ln 10 \approx 2.3\,w \approx 1.15\, n_{\mathrm{eff}}$: the two measures of width agree up to
# a constant.

# %%
import torch

mass_from_n = taxonomy.patterns[0].flip(-1).cumsum(-1)  # mass of positions n-k..n
horizon = (mass_from_n < 0.9).sum(-1)  # the first k with at least 90% of the mass
for head, k in zip(taxonomy.heads, horizon.tolist()):
    print(f"head {head:2d}: 90% horizon {k:4d} tokens, n_eff {taxonomy.width(head):6.1f}")
rows = torch.arange(len(taxonomy.heads))
assert (mass_from_n[rows, horizon] >= 0.9).all()  # k + 1 positions hold 90% ...
assert (horizon == 0).logical_or(mass_from_n[rows, horizon - 1] < 0.9).all()  # ... k do not
assert (horizon + 1 >= 0.81 * taxonomy.n_eff[0] - 1e-9).all()
print("check passed: horizons are minimal and k + 1 >= 0.81 n_eff for every head")

# %% [markdown]
# ```{solution-end}
# ```
#
# ````{exercise} Classify a head from its numbers
# :label: ex-ch02-classify
#
# *Difficulty: easy, 10 minutes.* Write the rules of section 2.4 as one function of a head's
# width $n_{\mathrm{eff}}$, content spread and self-preference (use the thresholds in
# `taxonomy.LOCAL_MAX_N_EFF`, `UNIFORM_MIN_FRACTION`, `DUPLICATE_MIN_Z` and
# `CONTEXTUAL_MAX_CONTENT_SD`, not typed-in numbers). Apply it to every row of `taxonomy.table()`
# and check that you get the groups of `taxonomy.groups`.
#
# ```python
# def my_group(n_eff: float, content_sd: float, self_z: float, n: int) -> str:
#     ...
# ```
# ````
#
# ```{solution-start} ex-ch02-classify
# :class: dropdown
# ```
#
# The order matters: the duplicate test comes first, so a duplicate head keeps its group whatever
# its width; only then does the width decide between local, uniform and slowly decaying, and the
# content spread between contextual and miscellaneous.


# %%
def my_group(n_eff: float, content_sd: float, self_z: float, n: int) -> str:
    if self_z >= tx.DUPLICATE_MIN_Z:
        return "duplicate"
    if n_eff < tx.LOCAL_MAX_N_EFF:
        return "detokenization"
    if n_eff <= tx.UNIFORM_MIN_FRACTION * (n + 1) and content_sd <= tx.CONTEXTUAL_MAX_CONTENT_SD:
        return "contextual"
    return "miscellaneous"


mine = {
    head: my_group(row["n_eff"], row["content sd"], row["self z"], taxonomy.n)
    for head, row in taxonomy.table().iterrows()
}
assert all(head in taxonomy.groups[group] for head, group in mine.items())
assert sum(len(members) for members in taxonomy.groups.values()) == len(mine)
print(f"my groups: { {g: [h for h, x in mine.items() if x == g] for g in tx.GROUPS} }")
print("check passed: the rules written out give the groups of classify_heads for every head")

# %% [markdown]
# ```{solution-end}
# ```
#
# ## Summary
#
# - A head's positional kernel is summarised by its width $n_{\mathrm{eff}}$, the number of
#   tokens it averages over; local, slowly decaying and uniform kernels (Figure 2) differ in
#   width by orders of magnitude.
# - Content weights add two numbers: how much token identity matters (the spread) and whether the
#   head prefers copies of the current token (the self-preference).
# - From these, the four groups follow with explicit thresholds. On the planted model the
#   comparison table says whether they recover the planted groups; the margins say how close each
#   head is to a threshold, which is what to read first on GPT-2 Small, since the thresholds were
#   chosen on the planted model.
# - How much the kernels depend on the destination token is measured, not assumed.
#
# **Next:** {ref}`ch-stability` explains why the heads with wide kernels, the contextual heads,
# have denominators $D_n$ that hardly depend on the text: the property that makes their output a
# simple bag of tokens.
