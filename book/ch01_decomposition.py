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
# (ch-decomposition)=
# # 1. Positional and content terms of layer-0 attention
#
# Gibson's paper starts from one observation: in the first layer of GPT-2 Small, the attention
# score between a destination and a source splits, almost exactly, into a term that depends only
# on *where* the source is and a term that depends only on *what* it is. This chapter derives that
# split, checks it against the model's own attention patterns, reproduces the paper's Figure 1, and
# measures what sets the split's error. Symbols and equations are collected on the notation page
# ({ref}`notation`, section 2).
#
# ```{admonition} Learning objectives
# :class: tip
# After this chapter you can
# - write a layer-0 attention score as a positional term plus a content term, and say where
#   LayerNorm makes this approximate;
# - compute the **positional pattern** $\mathrm{pos}_n(i)$ and the **content weight**
#   $c_n(t)$ of any head from the weights alone;
# - measure the quality of the reconstruction with the total variation distance, and explain why
#   it is exact at $i = n$;
# - split the reconstruction's error into the part a token's own LayerNorm scale causes and the
#   part the positional keys cause, and measure which one dominates on a given model.
# ```
#
# **Prerequisites:** the attention computation of a transformer (queries, keys, softmax) and
# TransformerLens's `TransformerBridge`.

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
# The banner above says which model produced this page's outputs. By default the book runs on
# GPT-2 Small; where GPT-2's weights cannot be downloaded (the machines that test this book) it
# runs on the **planted model**, a GPT-2-shaped network with structure we planted (see
# {ref}`appendix-planted`), and chapter 8 runs on a model trained from scratch. Every number below
# is computed when the page runs, and the text never states one that belongs to a particular
# model: it points to the output.
#
# ## 1.1 The score, written out
#
# For tokens $t_1, \dots, t_n$ the residual stream entering layer 0 is
# $x_i = W_E[t_i] + W_{pos}[i]$. Head $h$ scores source $i$ from destination $n$ as
#
# $$
# s_{n,i} = \frac{q_n \cdot k_i}{\sqrt{d_{head}}}, \qquad
# q_n = \mathrm{LN}_1(x_n) W_Q + b_Q, \qquad k_i = \mathrm{LN}_1(x_i) W_K + b_K .
# $$
#
# Without LayerNorm the key would be a sum, $W_E[t_i]W_K + W_{pos}[i]W_K$, and the score would split
# into a token term plus a position term. LayerNorm divides by $\sigma(t_i, i)$, the standard
# deviation of $x_i$, which depends on both. Writing $\tilde e$, $\tilde p$ for the mean-centred
# embeddings and $\gamma, \beta$ for LayerNorm's affine map,
#
# $$
# k(t, i) = \frac{(\gamma \odot \tilde e_t) W_K + (\gamma \odot \tilde p_i) W_K}{\sigma(t, i)}
#           + \beta W_K + b_K
#         = \frac{K_E[t] + K_P[i]}{\sigma(t, i)} + K_b .
# $$
#
# This identity is exact, and it makes every score of a text a few small matrix products
# (`context_neurons.decomposition.project_exact`). Gibson's decomposition replaces the key of
# $t_i$ as seen from destination $n$ by
#
# $$
# k(t_i, i) \approx \underbrace{k(t_i, n)}_{E[n, t_i]\ \text{(content)}} +
#   \underbrace{M[i] - M[n]}_{P[n, i]\ \text{(position)}},
# \qquad M[i] = \mathbb{E}_{t}\, k(t, i),
# $$
#
# where the expectation is over a token distribution (here: the tokens of the calibration text).
# The content term places the source token at the destination's position, so it uses the
# destination's LayerNorm scale; the positional term is the average change of a key when a token
# moves from $n$ to $i$. At $i = n$ the positional term vanishes and the approximation is
# **exact**; elsewhere its error comes from the LayerNorm scale, in two ways that section 1.5
# separates and measures.
#
# Exponentiating, the score becomes a product:
#
# $$
# A_{n,i} = \frac{\mathrm{pos}_n(i)\, c_n(t_i)}{D_n}, \quad
# \mathrm{pos}_n(i) = \operatorname*{softmax}_{i \le n} \frac{q_n \cdot P[n,i]}{\sqrt{d}}, \quad
# c_n(t) = \exp \frac{q_n \cdot E[n,t]}{\sqrt{d}}, \quad
# D_n = \sum_{j \le n} \mathrm{pos}_n(j)\, c_n(t_j).
# $$
#
# The positional pattern is the attention the head would pay if every token were identical.
#
# ## 1.2 The exact scores match the model
#
# Before approximating anything we check that the exact split reproduces the attention scores
# TransformerLens computes (hook `blocks.0.attn.hook_attn_scores`). We use one long document of
# ordinary English that is none of the calibration texts: the first held-out evaluation text
# (offline, from the offline corpora; online, from OpenWebText), named in the output.

# %%
import torch

from context_neurons import decomposition as dec
from context_neurons.printing import below, show_table, wrapped
from context_neurons.evaluation import held_out_general_windows

windows, labels, _, _ = held_out_general_windows(model.tokenizer, 1, n_ctx=model.cfg.n_ctx)
tokens = windows[0].to(model.cfg.device)
print(f"text: {labels[0]}, {len(tokens)} tokens (BOS first)")

_, cache = model.run_with_cache(
    tokens[None], stop_at_layer=1, names_filter="blocks.0.attn.hook_attn_scores"
)
hook_scores = cache["blocks.0.attn.hook_attn_scores"][0]
decomposed = dec.decompose_attention(model, tokens)
mask = decomposed.mask
relative_error = (decomposed.exact_scores - hook_scores)[:, mask].abs().max() / hook_scores[
    :, mask
].abs().max()
print(f"max |exact split - hook scores| / max |score| {below(relative_error, 1e-5)}")
assert relative_error < 1e-5

# %% [markdown]
# The difference is float32 rounding: the identity is exact.
#
# ## 1.3 Positional patterns and content weights
#
# The positional pattern of a head depends on the destination position and, through the query,
# weakly on the destination token. The heads this book is about are the **contextual** heads that
# chapter 2's taxonomy finds from the weights (six on GPT-2 Small in the paper); we take them from
# that classification now. The destination is the taxonomy's default position
# (`taxonomy.default_position`: the paper's $n = 500$ where the model's context allows it, else
# the last position), printed below.

# %%
from context_neurons import taxonomy as tx
from context_neurons.reproduce.paper import PAPER_CONTEXTUAL_HEADS

n = tx.default_position(model)
taxonomy = tx.classify_heads(model, n=n)
contextual = taxonomy.groups["contextual"]
print(f"destination position n = {n}")
print(f"contextual heads of this model (computed): {contextual}")
print(f"GPT-2 Small's in the paper, for comparison: {list(PAPER_CONTEXTUAL_HEADS)}")
if contextual:
    shown = contextual
else:
    shown = taxonomy.heads
    print(
        "This model has NO contextual head (chapter 2 says why): the decomposition below is "
        "shown for every head instead, and chapters 4 onwards have no circuit to build."
    )
head = shown[0]
print(f"head drawn in Figure 1.1: {head}")

# %% [markdown]
# Below: the exact attention of that head from destination $n$, its reconstruction
# $\mathrm{pos}_n(i)\,c_n(t_i)/D_n$, and the positional pattern alone.

# %%
from context_neurons.plotting.decomposition import plot_patterns

row = decomposed.heads.index(head)
figure = plot_patterns(
    {
        "exact pattern": decomposed.exact_pattern()[row, n],
        "reconstructed": decomposed.reconstructed_pattern()[row, n],
        "positional pattern": decomposed.positional_pattern()[row, n],
    },
    n=n,
    head=head,
    title=loaded.title,
)

# %% [markdown]
# *Figure 1.1: the head printed above (the first contextual head, when the model has one) at
# destination $n$, last 60
# source positions, on the model named in the title. The positional pattern is the smooth
# envelope; the content weights move individual tokens above or below it, and the reconstruction
# follows the exact pattern as closely as section 1.4 measures.*
#
# How much do content weights vary? For a contextual head they should vary little (a weak
# content dependence); for a head that looks for particular tokens, a lot. The spread of
# $\log c_n(t)$ over the whole vocabulary, with destination `' the'` at $n$:

# %%
groups = [taxonomy.group_of(h) for h in range(model.cfg.n_heads)]
spreads = dec.content_spread(model, n, groups, dest_token=" the")
show_table(spreads, f"std of log content weight over the vocabulary, ' the' at n = {n}",
           model=loaded.title, decimals=2)

# %% [markdown]
# **Explore.** In a live notebook (Jupyter, Colab) the cell below shows sliders: pick a head, a
# destination position and a destination token and watch the positional kernel change. On the
# website it shows one static selection, computed on the model named in the first line.

# %%
from context_neurons.interactive import head_explorer

print(f"explorer on the {loaded.title}")
explorer = head_explorer(model, head=head, n=n, dest_token=" the", model_title=loaded.title)

# %% [markdown]
# ## 1.4 How good is the reconstruction? (the paper's Figure 1)
#
# We measure the distance between the exact pattern $A_{n,\cdot}$ and the reconstruction
# $\hat A_{n,\cdot}$ at every destination by the total variation distance
# $\mathrm{TV}_n = \tfrac12 \sum_i |A_{n,i} - \hat A_{n,i}|$: the largest difference in
# probability the two patterns give to any set of positions. The paper reports TV of about 0.05
# at every position for the contextual heads it finds on GPT-2 Small, on an OpenWebText text.

# %%
from context_neurons.plotting.decomposition import plot_tv_over_positions

contextual_decomposition = dec.decompose_attention(model, tokens, heads=shown)
tv = contextual_decomposition.tv_distance()
figure = plot_tv_over_positions(
    tv, shown, title=f"{loaded.title}: TV distance, {labels[0]}", smooth=9
)

# %% [markdown]
# *Figure 1.2 (reproduces the paper's Figure 1): TV distance between the exact and the
# reconstructed attention pattern across destination positions, for the heads printed in section
# 1.3 (the contextual heads), on the model named in the title (moving average over 9 positions).*
# The table gives each head's median, 90th percentile and maximum, and the medians over the first
# and the second half of the text: whether the error grows along the text can be read there.

# %%
from context_neurons.reproduce.paper import PAPER_TV

summary = dec.tv_summary(tv, shown)
show_table(summary.table, f"TV distance over destination positions, {labels[0]}",
           model=loaded.title, decimals=3)
print(summary.finding(PAPER_TV))

# %% [markdown]
# ## 1.5 What sets the error
#
# Subtract the exact key from the reconstructed one, using the notation of section 1.1
# ($k(t, i) = (K_E[t] + K_P[i])/\sigma(t, i) + K_b$). The score error of source $i$ seen from
# $n$, $q_n \cdot (E[n, t_i] + P[n, i] - k(t_i, i))/\sqrt{d}$, is the sum of two parts:
#
# $$
# \underbrace{\frac{q_n \cdot K_E[t_i]}{\sqrt d}\left(\frac{1}{\sigma(t_i, n)} -
#   \frac{1}{\sigma(t_i, i)}\right)}_{\text{token scale: one token, two positions}}
# \;+\;
# \underbrace{\frac{q_n}{\sqrt d} \cdot \left(\frac{K_P[n]}{\sigma(t_i, n)} -
#   \frac{K_P[i]}{\sigma(t_i, i)} - (M[n] - M[i])\right)}_{\text{positional key: this token
#   against the average token}} .
# $$
#
# The first part is zero when a token's LayerNorm scale is the same at $i$ as at $n$: it is driven
# by how the scale changes **across positions for one token**, $\sigma(t, i)$ against
# $\sigma(t, n)$. The second is zero when every token has the same scale at each position: the
# positional key $K_P$ is divided by this token's scale, while $M$ averages over the calibration
# text's tokens, so it is driven by how the scale differs **between tokens** at one position. Both
# vanish at $i = n$. `decomposition.score_error_parts` computes the two parts from the key parts
# directly; below, each part's size where the head actually looks (the attention-weighted mean of
# its absolute value over the sources, median over destinations), beside the TV distance.

# %%
parts = dec.score_error_parts(model, tokens, heads=shown)
sizes = dec.error_part_sizes(contextual_decomposition, parts, tv)
assert sizes.mismatch < 1e-3  # the two parts add up to the reconstruction's score error
show_table(sizes.table, "the score error's two parts where the head looks, median over n",
           model=loaded.title, decimals=4)
print(wrapped(sizes.finding(loaded.title)))

# %% [markdown]
# The token-scale part is set by how much $\sigma(t, i)$ differs from $\sigma(t, n)$ for one
# token. We measure it for the calibration text's tokens (with their repetitions) at the
# destination $n$: the median and 90th percentile over tokens of
# $|1 - \sigma(t, n)/\sigma(t, i)|$, against the distance $n - i$
# (`decomposition.scale_change_by_distance`).

# %%
reference = dec.default_reference_tokens(model)
show_table(dec.scale_change_by_distance(model, reference, n),
           f"|1 - sigma(t, n)/sigma(t, i)| over the calibration tokens, n = {n}",
           model=loaded.title, decimals=4)

# %% [markdown]
# The positional-key part is set by how much $1/\sigma$ differs between tokens at one position.
# That is what the blog measured on GPT-2 Small, $1/\sigma$ within 0.15-0.175 across tokens; here
# is the same spread for this page's model over the vocabulary at $n$, printed only as the blog's
# comparison:

# %%
from context_neurons.reproduce.paper import PAPER_LN_SCALE_RANGE

for line in dec.ln1_scale_range(model, n).findings(PAPER_LN_SCALE_RANGE):
    print(wrapped(line))

# %% [markdown]
# Read the three outputs together. The vocabulary spread alone does not say how large the error
# is: it enters only through the positional-key part, multiplied by how much the positional key
# changes between $i$ and $n$. The change of one token's scale across positions enters through the
# token-scale part, multiplied by the token's own key. Which of the two dominates is a property
# of the model, not of the method; the sentence under the table of the two parts names it for this
# page's model. On a model whose position embeddings have very different norms at different
# positions (we expect this of GPT-2 Small's first positions), expect the token-scale part to
# matter where the kernel reaches those positions.
#
# ## 1.6 Exercises
#
# ````{exercise} Show that the reconstruction is exact on the diagonal
# :label: ex-diagonal
#
# *Difficulty: easy, 10 minutes.* Using `decomposed.positional_scores`,
# `decomposed.content_scores` and `decomposed.exact_scores`, check numerically that the
# reconstructed score equals the exact score at $i = n$ for every head and position, and explain
# from the definitions of $E[n,t]$ and $P[n,i]$ why.
#
# ```python
# diagonal_error = ...  # max over heads and n of |reconstructed - exact| at i = n
# ```
# ````
#
# ```{solution-start} ex-diagonal
# :class: dropdown
# ```
#
# At $i = n$, $P[n, n] = M[n] - M[n] = 0$ and $E[n, t_n] = k(t_n, n)$ is the exact key, so the two
# scores agree up to float rounding. The code below computes the error and checks it.

# %%
index = torch.arange(len(tokens))
reconstructed = decomposed.positional_scores + decomposed.content_scores
diagonal_error = (reconstructed - decomposed.exact_scores)[:, index, index].abs().max()
scale = decomposed.exact_scores[:, index, index].abs().max()
assert diagonal_error <= 1e-4 * scale, diagonal_error
print("check passed: the reconstruction is exact on the diagonal")

# %% [markdown]
# ```{solution-end}
# ```
#
# ````{exercise} Find a text on which the positional pattern is the attention pattern
# :label: ex-constant-text
#
# *Difficulty: medium, 15 minutes.* Section 1.1 calls $\mathrm{pos}_n(i)$ "the attention the
# head would pay if every token were identical". Make that literal: build a text of $m + 1$
# copies of `' the'` (no BOS), with $m = 300$ or the model's last position if its context is
# shorter, run the model with a hook on `blocks.0.attn.hook_pattern`, and compare row $m$ of every
# head with `dec.positional_pattern(model, m, " the", ...)`. Which `reference_tokens` make the two
# agree exactly, and why?
#
# ```python
# tv_to_hooks = ...  # TV distance between the hooked pattern and pos_m, per head
# ```
#
# ```{hint}
# :class: dropdown
#
# Write out $q_m \cdot P[m, i]$ when every source token is the same token $t$: which token
# distribution in $M[i] = \mathbb{E}_t\, k(t, i)$ makes it the true score minus a constant, which
# the softmax ignores? `dec.token_id` gives the id to put in `reference_tokens`, and
# `dec.tv_distance` compares the two patterns.
# ```
# ````
#
# ```{solution-start} ex-constant-text
# :class: dropdown
# ```
#
# With every source token equal to $t$, the exact key is $k(t, i)$, and $M[i]$ averaged over the
# one-token distribution $\{t\}$ is exactly $k(t, i)$. Then
# $q_m \cdot P[m, i] = q_m \cdot k(t, i) - q_m \cdot k(t, m)$: the true score minus a constant,
# which the softmax ignores. So `reference_tokens=torch.tensor([the])` gives the hooked pattern
# up to float rounding.

# %%
m = min(300, model.cfg.n_ctx - 1)
the = dec.token_id(model, " the")
constant_text = torch.full((m + 1,), the, device=model.cfg.device)
_, constant_cache = model.run_with_cache(
    constant_text[None], stop_at_layer=1, names_filter="blocks.0.attn.hook_pattern"
)
hooked = constant_cache["blocks.0.attn.hook_pattern"][0, :, m]
positional = dec.positional_pattern(
    model, m, " the", reference_tokens=torch.tensor([the], device=model.cfg.device)
)
tv_to_hooks = dec.tv_distance(hooked, positional)
assert tv_to_hooks.max() < 1e-4, tv_to_hooks
print("check passed: on a constant text pos_m(i) is the attention pattern\n  (max TV < 1e-4)")

# %% [markdown]
# ```{solution-end}
# ```
#
# ````{exercise} Is the reconstruction good enough? Decide from the head's output
# :label: ex-ch01-good-enough
#
# *Difficulty: medium, 25 minutes, open-ended.* A TV distance is a statement about attention
# patterns, but what later layers read is the head's **output**
# $o_n = \sum_i A_{n,i}\, x_i$ with $x_i = v_i W_O$ (value times output matrix). Decide whether the
# reconstruction is good enough for a reader of the output of the head drawn in Figure 1.1.
#
# 1. Show that replacing $A$ by $\hat A$ changes the output by at most
#    $\lVert \Delta_n \rVert \le 2\, \mathrm{TV}_n \max_{i \le n} \lVert x_i - c \rVert$ for
#    **any** fixed vector $c$. (Hint: both patterns sum to one.)
# 2. Compute $\lVert \Delta_n \rVert$ and the bound at every destination of the text (read $v_i$
#    from the hook `blocks.0.attn.hook_v`; take $c$ the mean of the $x_i$ over the text).
# 3. Decide, and argue with numbers: compare the typical $\lVert \Delta_n \rVert$ with how much
#    the output itself moves along the text, $\lVert o_n - \bar o \rVert$. Is the bound tight
#    enough to have decided for you?
#
# **Checkable criterion:** the bound holds at every destination; your verdict rests on the
# printed ratio of the median error to the median movement of the output.
#
# ```{hint}
# :class: dropdown
#
# For step 2, `contextual_decomposition.exact_pattern()` and
# `contextual_decomposition.reconstructed_pattern()` hold $A$ and $\hat A$ for the heads in
# `shown`, so $\Delta_n$ at every destination is one matrix product with the $x_i$ stacked as rows.
# The maximum over $i \le n$ in the bound is a running maximum along the positions
# (`torch.cummax`).
# ```
# ````
#
# ```{solution-start} ex-ch01-good-enough
# :class: dropdown
# ```
#
# Since $\sum_i A_{n,i} = \sum_i \hat A_{n,i} = 1$,
# $\Delta_n = \sum_i (A_{n,i} - \hat A_{n,i})\, x_i = \sum_i (A_{n,i} - \hat A_{n,i})(x_i - c)$,
# so $\lVert \Delta_n \rVert \le \sum_i |A_{n,i} - \hat A_{n,i}|\, \max_i \lVert x_i - c \rVert
# = 2\,\mathrm{TV}_n \max_i \lVert x_i - c \rVert$. The code computes both sides; the verdict
# compares the error with the output's own movement: an error much smaller than the movement
# leaves what the head says about the text intact. The bound is usually loose (the differences
# $A - \hat A$ do not all line up with the farthest value), so the measured error, not the bound,
# decides.

# %%
_, value_cache = model.run_with_cache(
    tokens[None], stop_at_layer=1, names_filter="blocks.0.attn.hook_v"
)
x = value_cache["blocks.0.attn.hook_v"][0, :, head] @ model.blocks[0].attn.W_O[head]  # [pos, d]
exact_row = contextual_decomposition.exact_pattern()[shown.index(head)]  # [n, i]
approx_row = contextual_decomposition.reconstructed_pattern()[shown.index(head)]
output = exact_row @ x
delta = ((exact_row - approx_row) @ x).norm(dim=-1)
c = x.mean(dim=0)
farthest = (x - c).norm(dim=-1).cummax(dim=0).values  # max over i <= n of |x_i - c|
bound = 2 * tv[shown.index(head)] * farthest
assert (delta <= bound * (1 + 1e-4) + 1e-6).all()
movement = (output - output[1:].mean(dim=0)).norm(dim=-1)
ratio = float(delta[1:].median() / movement[1:].median())
print(wrapped(
    f"head {head}: median |Delta_n| {delta[1:].median():.4f}, "
    f"median bound {bound[1:].median():.4f}, "
    f"median movement of the output {movement[1:].median():.4f}"
))
print(f"error / movement of the output (medians): {ratio:.3f}")
print("check passed: |Delta_n| <= 2 TV_n max |x_i - c| at every destination")

# %% [markdown]
# ```{solution-end}
# ```

# %% [markdown]
# ## Summary
#
# - Through LayerNorm, a layer-0 key is exactly a token part plus a position part divided by a
#   joint scale; replacing that scale by the destination's gives the content term $E[n,t]$ and the
#   positional term $P[n,i]$.
# - Attention then factorises into a positional pattern times content weights, normalised by a
#   denominator $D_n$ that depends on the whole text.
# - The reconstruction is exact at $i=n$; elsewhere its TV distance is measured (Figure 1.2, the
#   paper's Figure 1), and its score error splits into a token-scale part (one token's scale at
#   $i$ against $n$) and a positional-key part (one token's scale against the average token's),
#   whose sizes section 1.5 measures on the model at hand.
#
# **Next:** {ref}`ch-taxonomy` uses positional patterns to sort the heads of layer 0 into groups,
# and {ref}`ch-stability` asks why the denominators $D_n$ of some heads hardly depend on the text.
