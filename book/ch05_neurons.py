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
# (ch-neurons)=
# # 5. Finding context neurons from the weights
#
# This chapter reproduces the paper's section on **contextual neurons** and its case studies
# (British versus American English, neurons 300 and 704; 19th-20th century war, neuron 1621;
# religious text, neuron 1710; and domains such as medicine, law, the Bible, Spanish, astronomy
# and programming). Chapter 4 showed that the contextual heads write a decaying bag of extended
# embeddings $\sum_i K[n,i]\, e(t_i)$. A first-layer MLP neuron reads that bag through a
# LayerNorm and its input weights, so each token has a fixed **contribution** to each neuron. We
# compute all $3072 \times 50257$ contributions with one matrix product, score each neuron by how
# much a few tokens stand out, and read off context neurons without running the model on any
# text.
#
# ```{admonition} Learning objectives
# :class: tip
# After this chapter you can
# - derive a neuron's token contributions from the extended embeddings, LayerNorm 2 and
#   $W_{in}$, and compute them for every neuron and token at once;
# - define a robust score for "a few tokens move this neuron a lot", choose a threshold and read
#   the number of neurons found against it;
# - read a context neuron from its top and bottom tokens, split it into sub-latents, and check
#   what you read against its activations on real text of the domain.
# ```
#
# **Prerequisites:** {ref}`ch-circuit`.

# %% tags=["remove-cell"]
# Colab only: install this book's package and use the GPU (elsewhere this cell does nothing).
import importlib.util
import os
import sys

if ("google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ) and (
    importlib.util.find_spec("context_neurons") is None
):
    import subprocess

    spec = "context-neurons[book,online] @ git+https://github.com/context-neurons/context-neurons"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", spec], check=True)
    importlib.invalidate_caches()
from context_neurons.colab import colab_setup

device = colab_setup()

# %%
from context_neurons.chapter import setup_chapter

loaded = setup_chapter()
model = loaded.model

# %% [markdown]
# ## 5.1 Token contributions
#
# Neuron $j$'s pre-activation is $\mathrm{LN}_2(x)\cdot W_{in}[:, j] + b_{in}[j]$, with $x$ the
# residual stream after attention. LayerNorm 2 is not linear, but its scale varies little, so we
# linearise it with the scale $s_2$ measured on the calibration text (chapter 4):
# $\mathrm{LN}_2(x) \approx s_2\, \gamma_2 \odot (x - \bar x) + \beta_2$. The bag's share of the
# pre-activation is then $\sum_i K[n,i]\; \mathrm{contribution}[j, t_i]$ with
#
# $$
# \mathrm{contribution}[j, t] = s_2\, \big(\gamma_2 \odot (e(t) - \overline{e(t)})\big) \cdot
# W_{in}[:, j] = e(t) \cdot w_j, \qquad w_j = s_2\, \mathrm{centred}(\gamma_2 \odot W_{in}[:, j]).
# $$
#
# A contribution is in units of pre-activation: it is what token $t$ would add if the kernel put
# all its weight on it. A token at kernel weight $K[n,i] \approx 1/60$ adds a sixtieth of that.
# For all neurons and tokens, the contributions are the product of the $50257 \times 768$ matrix
# of extended embeddings with the $768 \times 3072$ matrix of read vectors.

# %%
from context_neurons import circuit as cc
from context_neurons import neurons as nn

circuit = cc.get_circuit(model)
some = nn.contributions(circuit, model, neurons=[300, 1710])
print(f"contributions of two neurons: {tuple(some.shape)} (neurons x tokens)")
scores = nn.get_scores(circuit, model)  # the full 3072 x 50257 product, chunked over neurons

# %% [markdown]
# ## 5.2 A score for context neurons
#
# A context neuron is one that a small set of tokens moves much more than the rest of the
# vocabulary. We measure this robustly. With $m_j$ the median of neuron $j$'s contributions
# over the vocabulary and $\mathrm{MAD}_j$ their median absolute deviation,
#
# $$
# z[j, t] = \frac{\mathrm{contribution}[j,t] - m_j}{1.4826\, \mathrm{MAD}_j}, \qquad
# \mathrm{top}[j] = \text{mean of the } k = 20 \text{ largest } |z[j, t]| .
# $$
#
# The factor 1.4826 makes the MAD a standard deviation for Gaussian data, so $z$ is in
# "standard deviations of an ordinary token". `<|endoftext|>` is left out: it sits at position 0
# of every text, so it belongs to no context. If no token stands out, that is if a neuron's
# contributions are Gaussian over the 50,256 tokens, $\mathrm{top}[j]$ is about 3.79 (expected
# order statistics). We call a neuron context-sensitive when $\mathrm{top}[j] \ge \theta$ with
# $\theta = 6$: its twenty most extreme tokens sit on average six standard deviations out, far
# beyond the Gaussian value.

# %%
from context_neurons.plotting_neurons import plot_scores, plot_sweep

null = nn.gaussian_null_score()
found = scores.found(nn.THETA)
planted = sorted(loaded.truth.context_neurons) if loaded.is_planted else None
print(f"Gaussian null score: {null:.2f}; theta = {nn.THETA:g}; neurons found: {len(found)}")
print(f"median score over all neurons: {scores.top.median():.2f}")
figure = plot_scores(scores, nn.THETA, planted=planted, null=null)

# %% [markdown]
# *Figure 5.1: the score $\mathrm{top}[j]$ of all 3072 neurons (log-log histogram), with the
# threshold (dashed) and the Gaussian null (dotted).* The bulk of the neurons sits just above the
# Gaussian null: their contributions are slightly heavier-tailed than Gaussian, but no group of
# tokens stands out. Context neurons form a tail to the right. On the planted model the planted
# context neurons are drawn in red.
#
# How many neurons are found depends on $\theta$. The paper's score is on a different scale (it
# reports about 100 neurons at its $\theta \approx 5$ on GPT-2 Small, and hundreds at lower
# thresholds), so only the shape of the curve compares:

# %%
sweep = nn.theta_sweep(scores, thetas=(4, 4.5, 5, 6, 8, 12, 20, 30, 50, 80), truth=planted)
print(sweep.round(3).to_string())
figure = plot_sweep(sweep, nn.THETA)

# %% [markdown]
# *Figure 5.2: neurons found against the threshold $\theta$ (log-log); on the planted model also
# the precision and recall against the planted context neurons.* Below the bulk of the score
# distribution every neuron is "found"; the count falls steeply through the bulk and then slowly
# along the tail of genuine context neurons. A good threshold sits where the curve flattens.

# %%
if loaded.is_planted:
    precision, recall = nn.precision_recall(found, planted)
    print(f"planted context neurons: {len(planted)}; found at theta = {nn.THETA:g}: {len(found)}")
    print(f"precision {precision:.3f}, recall {recall:.3f}")
    missed = sorted(set(planted) - set(found))
    extra = sorted(set(found) - set(planted))
    print(f"planted but not found: {missed or 'none'}; found but not planted: {extra or 'none'}")

# %% [markdown]
# On the planted model the comparison with the truth is the end-to-end test of the method: the
# context neurons were planted by giving their input weights a large component along the
# directions the contextual heads write for a topic. The discovery above never reads the
# planted record.
#
# ## 5.3 Case studies: neurons 300, 704, 1621 and 1710
#
# The paper's first example, neuron 300 of GPT-2 Small, separates British from American English.
# Its top and bottom token contributions (contribution and robust z):

# %%
import pandas as pd

pd.set_option("display.width", 140)


def show(table, k=10):
    """A token table without the id columns, at fixed precision."""
    columns = [
        "top token",
        "top contribution",
        "top z",
        "bottom token",
        "bottom contribution",
        "bottom z",
    ]
    print(table[columns].head(k).to_string(float_format="{:.2f}".format))


show(nn.token_table(circuit, model, 300))

# %% [markdown]
# On GPT-2 Small the paper finds British spellings among the top tokens and their American
# counterparts among the bottom ones. The paper's neuron 704 detects British contexts too, but
# writes in the opposite direction; it suggests the two cancel each other's outputs. Compare
# their contributions and their output weights:

# %%
import torch

both = nn.contributions(circuit, model, [300, 704])
input_r = float(torch.corrcoef(both)[0, 1])
w_out = model.blocks[0].mlp.W_out
output_cos = float(w_out[300] @ w_out[704] / (w_out[300].norm() * w_out[704].norm()))
print(f"correlation of the token contributions of 300 and 704: {input_r:.3f}")
print(f"cosine of their output weights W_out[300], W_out[704]: {output_cos:.3f}")
show(nn.token_table(circuit, model, 704), k=5)

# %% [markdown]
# A correlation near 1 says the two neurons read the same context; a cosine near $-1$ that they
# write opposite outputs. Next, neuron 1621, which the paper calls "19th-20th century conflict":

# %%
show(nn.token_table(circuit, model, 1621))

# %% [markdown]
# The paper reads the top tokens as a "war" latent and the bottom tokens as a "21st century"
# latent: the neuron is pushed up by one topic and down by another, so its top and bottom
# tokens describe two different things. Neuron 1710, religious text:

# %%
show(nn.token_table(circuit, model, 1710))

# %% [markdown]
# ## 5.4 Domains, and activations on real text
#
# Reading tokens is a hypothesis about a neuron; activations on real text test it. We take two
# windows of 1024 tokens from each domain the offline corpora cover (short documents are
# concatenated, separated by `<|endoftext|>`), run the model's first layer on them and average
# each found neuron's **true** pre-activation over positions $n \ge 100$ (where the bag is full).
# The American texts are the Brown corpus; the British ones UK medicine leaflets, so they mix
# spelling with a medical topic; programming text is the Python standard library.

# %%
from context_neurons import evaluation as ev

DOMAINS = (
    "american",
    "british",
    "encyclopedic",
    "war",
    "bible",
    "spanish",
    "medical",
    "legal",
    "astronomy",
    "pokemon",
    "code",
)
domain_sets = {d: ev.domain_windows(model.tokenizer, d, n=2)[0] for d in DOMAINS}
shown = found[:40]
profile = ev.domain_profile(model, shown, domain_sets)
relative = profile.sub(profile.median(axis=1), axis=0)

# %%
from context_neurons.plotting_neurons import plot_domain_profile

figure = plot_domain_profile(
    relative, title="mean pre-activation minus the neuron's median over domains"
)

# %% [markdown]
# *Figure 5.3: for each found neuron (rows, best score first, at most 40) and each domain
# (columns), the mean true pre-activation over two texts of the domain, minus the neuron's
# median over domains.* Red cells: the neuron is more active in that domain than usual. A
# context neuron shows up as a row with one or two red cells. For each domain, the found neuron
# most specific to it and its top tokens:

# %%
rows = []
for domain in DOMAINS:
    j = int(relative[domain].idxmax())
    table = nn.token_table(circuit, model, j, k=6)
    direction = "top" if scores.sign[j] > 0 else "bottom"
    row = {
        "domain": domain,
        "neuron": j,
        "excess pre-activation": relative.loc[j, domain],
        "tokens on its score side": " ".join(table[f"{direction} token"]),
    }
    if loaded.is_planted:
        plan = loaded.truth.context_neurons.get(j)
        row["planted as"] = plan["description"] if plan else "-"
    rows.append(row)
specific = pd.DataFrame(rows).set_index("domain")
print(specific.to_string(float_format="{:.2f}".format))

# %% [markdown]
# Each row names the found neuron most active on a domain relative to its own median, with the
# tokens on the side that gives it its score (the bottom tokens for a neuron pushed mainly down).
# Where the excess is large, the neuron's tokens should fit the domain: that is the check of the
# reading. Where the excess is small, and the tokens do not fit, no found neuron is specific to
# that domain *in these texts*: for instance a neuron may read word forms that the domain's
# texts rarely contain (code tokens often lack the leading space of prose words). On the planted
# model the last column says what was planted; the domain texts were never used to plant
# anything. Activations along one text, for the four domains with the largest excess, the
# model's (black) beside the circuit's approximation (orange, chapter 6):

# %%
import matplotlib.pyplot as plt

from context_neurons.plotting_neurons import plot_activation_curves

picks = list(specific["excess pre-activation"].sort_values(ascending=False).index[:4])
fig, axes = plt.subplots(len(picks), 1, figsize=(8, 2.2 * len(picks)), sharex=True)
for ax, domain in zip(axes, picks):
    j = int(specific.loc[domain, "neuron"])
    curves = ev.activation_curves(circuit, model, domain_sets[domain][0], j)
    del curves["bag only"]
    plot_activation_curves(
        curves, title=f"neuron {j} on a {domain} text", ax=ax, legend=ax is axes[0]
    )
fig.tight_layout()

# %% [markdown]
# *Figure 5.4: true (black) and approximate (orange, dashed) pre-activation of the most
# domain-specific neuron along the first text of its domain, for the four domains with the
# largest excess.* Where a window concatenates short documents, each `<|endoftext|>` separator
# is a second attention sink in the middle of the text. The circuit treats it as an ordinary
# token at its position, so the approximation can leave the true curve for a few dozen tokens
# after a separator. The pre-activation rises over the first
# few dozen tokens as the bag fills with domain tokens, then stays high while the text stays on
# topic; the approximation from the weights follows it.
#
# ## 5.5 Sub-latents
#
# The paper asks for a way to split a neuron's contributions into sub-latents: a neuron may be
# pushed up by two unrelated topics. We cluster the extended embeddings of a neuron's 60 top
# tokens, after removing their common component along the read vector $w_j$ (every top token has
# one, that is why it is a top token), with spherical k-means into two clusters. If the tokens
# come from one topic, the two centroids point in similar directions (cosine near or above 0);
# two topics give clusters with opposite residual directions (cosine clearly below 0).

# %%
split = {j: nn.sub_latents(circuit, model, j, k=60) for j in found}
cosines = pd.Series(
    {j: float(s.centroid_cosine[0, 1]) for j, s in split.items()}, name="centroid cosine"
)
print(cosines.sort_values().head(8).to_string(float_format="{:.3f}".format))

# %%
two = int(cosines.idxmin())
table = split[two].table
for cluster in (0, 1):
    tokens = table[table["cluster"] == cluster]["token"].head(12)
    print(
        f"neuron {two}, cluster {cluster} ({(table['cluster'] == cluster).sum()} tokens): {' '.join(tokens)}"
    )
if loaded.is_planted:
    print(
        f"planted as: {loaded.truth.context_neurons.get(two, {}).get('description', 'not planted')}"
    )

# %% [markdown]
# The neuron with the most clearly separated clusters, and the first tokens of each cluster.
# Where the clusters are two recognisable topics, the neuron is an OR of two sub-latents and its
# top tokens alone would mislead. The clustering is deliberately simple: two clusters, the
# geometry of the extended embeddings only; a neuron with a single topic still gets split in
# two, which the centroid cosine then flags as weak.
#
# ## 5.6 The gallery
#
# Every neuron found, best score first: its score, whether its extreme tokens push it up (+) or
# down (-), and its top and bottom tokens. On the planted model, also what was planted there and
# the share of its 20 most extreme tokens that belong to the planted topics.

# %%
from context_neurons import gallery

summary = gallery.gallery_table(circuit, model, found, scores, loaded.truth, k=5)
with pd.option_context("display.max_colwidth", 70, "display.width", 250):
    print(summary.to_string())

# %%
figure = gallery.plot_gallery(circuit, model, found, scores, k=5, columns=4, max_neurons=40)

# %% [markdown]
# *Figure 5.5: the five top (red) and five bottom (blue) token contributions of each found
# neuron (at most 40 shown).* `gallery.write_gallery(directory, ...)` writes the same as one
# Markdown page per neuron, with its full token table.

# %% [markdown]
# **Explore.** Pick any discovered neuron and see the tokens that push it up and down most (a
# dropdown in a live notebook; the strongest neuron on the website).

# %%
from context_neurons.explorers import contribution_explorer, model_contributions_fn

contributions_fn = model_contributions_fn(model, lambda js: nn.contributions(circuit, model, js))
explorer = contribution_explorer(contributions_fn, found, neuron=found[0])

# %% [markdown]
# ## 5.7 Exercise
#
# ````{exercise} Find the neuron that reads a word list
# :label: ex-word-list
#
# *Difficulty: medium, 20 minutes.* Take the astronomy word list
# `context_neurons.topics.ASTRONOMY`, keep the words that are a single token with a leading space
# (`topics.single_token_variants`), and for every found neuron compute the mean robust z-score
# of the contributions of those tokens. Which found neuron responds most to astronomy, and what
# are its top tokens? Check that its mean z-score over the list is above 2.
#
# ```python
# ids = ...       # token ids of the word list
# mean_z = ...    # one number per found neuron
# ```
# ````
#
# ```{solution} ex-word-list
# :class: dropdown
#
# The robust z-score needs each neuron's median and spread over the vocabulary, which
# `scores.median` and `scores.spread` already hold; `contributions` gives the word list's
# contributions for all found neurons in one product.
# ```

# %% tags=["hide-input"]
from context_neurons.topics import ASTRONOMY, single_token_variants

ids = torch.tensor(sorted(set(single_token_variants(ASTRONOMY, model.tokenizer).values())))
c = nn.contributions(circuit, model, found, ids)  # [found neurons, words]
z = (c - scores.median[found][:, None]) / scores.spread[found][:, None]
mean_z = z.mean(dim=1)
best = found[int(mean_z.argmax())]
print(f"{len(ids)} astronomy tokens; best neuron {best}, mean z = {float(mean_z.max()):.1f}")
print("its top tokens:", " ".join(nn.token_table(circuit, model, best, k=8)["top token"]))
assert float(mean_z.max()) > 2
print("check passed: a found neuron reads the astronomy words")

# %% [markdown]
# ## Summary
#
# - A first-layer neuron's response to the contextual heads is a sum of fixed token
#   contributions, $e(t)\cdot w_j$, weighted by the kernel; all of them are one matrix product.
# - A robust score, the mean of the 20 largest robust $|z|$, separates context neurons from the
#   bulk; the number found falls steeply through the bulk and slowly along the tail.
# - Top and bottom tokens name a neuron's context (British versus American spelling, war,
#   religion, medicine, law, ...); activations on real text of the domain confirm it, and
#   clustering the top tokens exposes neurons that read two topics.
#
# **Next:** {ref}`ch-evaluation` measures how well the circuit predicts these neurons'
# activations text by text, the paper's median Pearson correlation of 0.9485.
