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
# # 1. Positional and content terms of layer-0 attention (Figure 1)
#
# Gibson's paper starts from one observation: in the first layer of GPT-2 Small, the attention
# score between a destination and a source splits, almost exactly, into a term that depends only
# on *where* the source is and a term that depends only on *what* it is. This chapter derives that
# split, checks it against the model's own attention patterns, and reproduces Figure 1.
#
# ```{admonition} Learning objectives
# :class: tip
# After this chapter you can
# - write a layer-0 attention score as a positional term plus a content term, and say where
#   LayerNorm makes this approximate;
# - compute the **positional pattern** $\mathrm{pos}_n(i)$ and the **content weight**
#   $c_n(t)$ of any head from the weights alone;
# - measure the quality of the reconstruction with the total variation distance, and explain why
#   it is exact at $i = n$.
# ```
#
# **Prerequisites:** the attention computation of a transformer (queries, keys, softmax) and
# TransformerLens's `HookedTransformer`.

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
# The banner above says which model produced this page. By default the book runs on GPT-2 Small;
# the stored outputs you read on the website come from the **planted model**, a GPT-2-shaped
# network with structure we planted (see {ref}`appendix-planted`), because GPT-2's weights
# cannot be downloaded where the book is built. Every number below is computed when the page runs.
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
#           + \beta W_K + b_K .
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
# **exact**; it degrades only as far as $\sigma(t, i)$ differs between $i$ and $n$ for the same
# token, which is little near $n$, where local heads put their mass.
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
# ordinary English (the first full-length document of the MASC corpus offline, of OpenWebText
# online) that is not the calibration text.

# %%
import torch

from context_neurons import decomposition as dec
from context_neurons.taxonomy import default_position
from context_neurons.text.windows import evaluation_windows

windows, labels, report = evaluation_windows(model.tokenizer, 1)
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
print(f"max |exact split - hook scores| / max |score| = {relative_error:.0e}")
assert relative_error < 1e-5

# %% [markdown]
# The difference is float32 rounding: the identity is exact.
#
# ## 1.3 Positional patterns and content weights
#
# The positional pattern of a head depends on the destination position and, through the query,
# weakly on the destination token. Below: the exact attention of one contextual head from
# destination $n = 500$, its reconstruction $\mathrm{pos}_n(i)\,c_n(t_i)/D_n$, and the positional
# pattern alone.

# %%
from context_neurons.plotting.decomposition import plot_patterns

n, head = default_position(model), 0
row = decomposed.heads.index(head)
figure = plot_patterns(
    {
        "exact pattern": decomposed.exact_pattern()[row, n],
        "reconstructed": decomposed.reconstructed_pattern()[row, n],
        "positional pattern": decomposed.positional_pattern()[row, n],
    },
    n=n,
    head=head,
)

# %% [markdown]
# *Figure 1.1: head 0 at destination 500, last 60 source positions. The positional pattern is the
# smooth envelope; the content weights move individual tokens above or below it, and the
# reconstruction follows the exact pattern closely.*
#
# How much do content weights vary? For a contextual head they should vary little (a weak
# content dependence); for a head that looks for particular tokens, a lot. The spread of
# $\log c_n(t)$ over the whole vocabulary, with destination `' the'` at $n = 500$:

# %%
log_c = dec.content_log_weights(model, n=n, dest_token=" the")
spread = log_c.std(dim=-1)
for h in range(model.cfg.n_heads):
    print(f"head {h:2d}: std of log content weight over the vocabulary = {spread[h]:.2f}")

# %% [markdown]
# **Explore.** In a live notebook (Jupyter, Colab) the cell below shows sliders: pick a head, a
# destination position and a destination token and watch the positional kernel change. On the
# website it shows one static selection.

# %%
from context_neurons.interactive import head_explorer

explorer = head_explorer(model, head=0, n=n, dest_token=" the")

# %% [markdown]
# ## 1.4 Figure 1: how good is the reconstruction?
#
# We measure the distance between the exact pattern $A_{n,\cdot}$ and the reconstruction
# $\hat A_{n,\cdot}$ at every destination by the total variation distance
# $\mathrm{TV}_n = \tfrac12 \sum_i |A_{n,i} - \hat A_{n,i}|$: the largest difference in
# probability the two patterns give to any set of positions. The paper reports TV of about 0.05
# at every position for the six heads it calls *contextual* (0, 2, 6, 8, 9, 10; see
# {ref}`ch-taxonomy`) on an OpenWebText text.

# %%
from context_neurons.plotting.decomposition import plot_tv_over_positions

from context_neurons.circuit import contextual_heads
from context_neurons.reproduce.paper import PAPER_CONTEXTUAL_HEADS

contextual = contextual_heads(model)  # computed by chapter 2's taxonomy of this model
print(f"contextual heads of this model: {contextual}  (paper, GPT-2 Small: {list(PAPER_CONTEXTUAL_HEADS)})")
tv = dec.decompose_attention(model, tokens, heads=contextual).tv_distance()
figure = plot_tv_over_positions(tv, contextual, title=f"TV distance, {labels[0]}", smooth=9)

# %% [markdown]
# *Figure 1 (reproduced): TV distance between the exact and the reconstructed attention pattern
# across destination positions, for the six contextual heads (moving average over 9 positions).*
# The reconstruction stays close all along the text: its error does not grow with the position,
# because it comes from the difference between LayerNorm scales at $i$ and at $n$, weighted by
# where the head attends, and a contextual head always attends to roughly the last fifty tokens.

# %%
import pandas as pd

summary = pd.DataFrame(
    {
        "median TV": tv.median(dim=-1).values,
        "90th percentile TV": tv.quantile(0.9, dim=-1),
        "max TV": tv.max(dim=-1).values,
    },
    index=pd.Index(contextual, name="head"),
)
print(summary.round(3).to_string())
print(f"\nmedian over heads and positions: {tv.median():.3f}   (paper, GPT-2 Small: ~0.05)")

# %% [markdown]
# Why is the reconstruction good, and what sets its error? The approximation's one assumption is
# that LayerNorm divides a token's key by roughly the same scale at position $i$ as at $n$. The
# blog measured GPT-2 Small's LayerNorm scale $1/\sigma$ to lie within 0.15-0.175 across tokens;
# here is the same spread for the model on this page, over the whole vocabulary at $n = 500$:

# %%
vocabulary = torch.arange(model.cfg.d_vocab, device=model.cfg.device)
position = torch.tensor([n], device=model.cfg.device)
inverse_scale = dec.ln1_inverse_scale(model, vocabulary, position).flatten().double().cpu()
low, high = torch.quantile(inverse_scale, torch.tensor([0.05, 0.95], dtype=torch.float64))
print(f"LN1 scale 1/sigma over the vocabulary at n = {n}: 5%-95% range {low:.3f} to {high:.3f} "
      f"(relative width {(high - low) / high:.2f})")
print("paper (blog, GPT-2 Small): 0.15 to 0.175 (relative width 0.14)")

# %% [markdown]
# The narrower this range, relative to its level, the closer $\sigma(t, i)$ is to
# $\sigma(t, n)$ and the smaller the TV distance: compare the two relative widths when you read
# the TV table above against the paper's 0.05.
#
# ## 1.5 Exercises
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
# head would pay if every token were identical". Make that literal: build a text of $n + 1 = 301$
# copies of `' the'` (no BOS), run the model with a hook on `blocks.0.attn.hook_pattern`, and
# compare row $n$ of every head with `dec.positional_pattern(model, 300, " the", ...)`. Which
# `reference_tokens` make the two agree exactly, and why?
#
# ```python
# tv_to_hooks = ...  # TV distance between the hooked pattern and pos_n, per head
# ```
# ````
#
# ```{solution-start} ex-constant-text
# :class: dropdown
# ```
#
# With every source token equal to $t$, the exact key is $k(t, i)$, and $M[i]$ averaged over the
# one-token distribution $\{t\}$ is exactly $k(t, i)$. Then
# $q_n \cdot P[n, i] = q_n \cdot k(t, i) - q_n \cdot k(t, n)$: the true score minus a constant,
# which the softmax ignores. So `reference_tokens=torch.tensor([the])` gives the hooked pattern
# up to float rounding.

# %%
the = dec.token_id(model, " the")
constant_text = torch.full((301,), the, device=model.cfg.device)
_, constant_cache = model.run_with_cache(
    constant_text[None], stop_at_layer=1, names_filter="blocks.0.attn.hook_pattern"
)
hooked = constant_cache["blocks.0.attn.hook_pattern"][0, :, 300]
positional = dec.positional_pattern(
    model, 300, " the", reference_tokens=torch.tensor([the], device=model.cfg.device)
)
tv_to_hooks = dec.tv_distance(hooked, positional)
assert tv_to_hooks.max() < 1e-4, tv_to_hooks
print("check passed: on a constant text pos_n(i) is the attention pattern (max TV < 1e-4)")

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
# - The reconstruction is exact at $i=n$ and close everywhere (Figure 1).
#
# **Next:** {ref}`ch-taxonomy` uses positional patterns to sort the twelve heads into groups, and
# {ref}`ch-stability` asks why the denominators $D_n$ of some heads hardly depend on the text.
