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
# (ch-evaluation)=
# # 6. How well does the circuit predict the neurons?
#
# This chapter reproduces the paper's evaluation of context neurons: for the neurons found in
# chapter 5, compare the pre-activation the model computes with the one the contextual circuit
# predicts from the weights, text by text. On GPT-2 Small and 1000 OpenWebText texts the paper
# reports a median Pearson correlation of 0.9485 and a median fraction of variance unexplained
# (FVU) of 0.1426. We compute both, ask how much of them measures the *context* part of the
# prediction rather than the parts that depend on the current token only, look at typical
# examples, find where the remaining error comes from, and ask how much the choice of
# calibration text matters.
#
# ```{admonition} Learning objectives
# :class: tip
# After this chapter you can
# - write a first-layer neuron's approximate pre-activation as the bag of token contributions
#   plus four smaller terms, and evaluate it for many texts at once with a few matrix products;
# - measure the approximation with Pearson's $r$ and the FVU, and read their distributions;
# - separate the context part of the prediction from its local part and measure it on its own;
# - explain the error of the first ~100 positions and the effect of the calibration text;
# - show that the method finds neurons that are nearly silent on the text used to calibrate it.
# ```
#
# **Prerequisites:** {ref}`ch-circuit` and {ref}`ch-neurons`.

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
# ## 6.1 The approximate pre-activation
#
# At position $n$ of a text $t_0 \dots t_n$ (with $t_0$ = `<|endoftext|>`), the residual stream
# entering the first MLP is approximated by five terms:
#
# $$
# x(n) \approx \underbrace{\sum_{i \le n} K[n,i]\, e_n(t_i)}_{\text{bag (contextual heads)}}
# + \underbrace{\sum_{h} \sum_{i} \mathrm{pos}_{h,n}(i)\, M_V^h[i] W_O^h}_{\text{positional part}}
# + \underbrace{W_E[t_n] + W_{pos}[n]}_{\text{direct path}}
# + \underbrace{\sum_{h \notin \text{ctx}} v_h(t_n, n)\, W_O^h}_{\text{other heads}}
# + b_O .
# $$
#
# The six other heads are approximated as attending only to the current token (their value of
# $t_n$ at $n$, exact through LN1). The pre-activation is
# $s_2\, (\gamma_2 \odot \mathrm{centred}(x(n))) \cdot W_{in}[:, j] + \beta_2 \cdot W_{in}[:, j]
# + b_{in}[j]$ with the calibration text's LN2 scale $s_2$. Every term is linear in $x$, so we
# project each onto the neurons' read vectors first (`context_neurons.evaluation.approximator`):
# the whole prediction is table look-ups plus, for the bag, the kernel applied to each
# contextual head's contributions. For $J$ neurons, $H_{ctx} = 6$ contextual heads and a batch of
# $B$ texts of $P$ tokens, that is $B P^2 H_{ctx} J$ multiply-adds (each head keeps its own
# per-position denominator, below; with one constant denominator per head the heads can be summed
# first and it is $B P^2 J$).
#
# One choice differs from chapter 4's extended embeddings: in $e_n(t)$ each head's share is
# divided by the calibration text's denominator **at position $n$**, $D_h(n)$, instead of the
# constant $\hat D_h$. Chapter 4 (Figure 4.3) showed why: over the first ~100 positions the
# `<|endoftext|>` sink makes the true denominators much larger than $\hat D_h$. Section 6.5
# measures what this choice changes. The true pre-activations come from the model's hook
# `blocks.0.mlp.hook_pre`, running the first layer only, in batches.
#
# **Local and context terms.** Three of the five terms, the direct path, the other heads and the
# constant biases, depend only on the current token $t_n$ and position $n$: we call them the
# *local terms*. Only the bag and the positional part carry the contextual heads' output, the
# part this method is about. A neuron's pre-activation can vary mostly with the current token, so
# a high correlation could come from the local terms alone. We therefore also measure the
# **context part** on its own: the true pre-activation minus the local terms, $y - \ell$,
# against the predicted bag plus positional part, $\hat y - \ell$. Their difference is the same
# error as before; what changes is the variance it is compared with. The **context share**
# $\mathrm{var}(y - \ell) / \mathrm{var}(y)$ says how much of a pair's variance that part carries.
#
# ## 6.2 The headline numbers
#
# For each neuron and text we compute, over positions $1 \dots 1023$,
#
# $$
# r = \mathrm{corr}(y, \hat y), \qquad
# \mathrm{FVU} = \frac{\sum_n (y_n - \hat y_n)^2}{\sum_n (y_n - \bar y)^2},
# $$
#
# with $y$ the true and $\hat y$ the approximate pre-activation. No regression is fitted: FVU
# compares the approximation as it is, so an offset or a wrong scale counts as error, and FVU can
# exceed 1. The neurons are those found in chapter 5 at $\theta = 6$.
#
# **Which texts, and how many.** The paper used 1000 OpenWebText texts. Offline we take
# `N_TEXTS = 200` documents of at least 1023 tokens, one from each of four corpora in turn (Brown
# corpus, MASC, WikiText, State of the Union addresses; about 800 such documents exist, the
# Brown corpus alone has 500). Two hundred is a runtime choice, not a limit of the method: the
# truth costs one first-layer run per text, and this whole book must build in a few minutes on
# two CPU cores. The heavier analyses below (the split by position, the calibration texts) use
# subsets and say so. `python -m context_neurons reproduce` makes its own choice: 100 corpus
# texts for the planted model and 1000 OpenWebText texts for GPT-2 online (option `--texts`).

# %%
import pandas as pd
import torch

from context_neurons import circuit as cc
from context_neurons import evaluation as ev
from context_neurons.text.windows import evaluation_windows
from context_neurons import discovery as disc

N_TEXTS = 200

circuit = cc.get_circuit(model)
found = disc.get_scores(circuit, model).found(disc.THETA)
windows, labels, report = evaluation_windows(model.tokenizer, N_TEXTS)
truth_cache = {}
result = ev.evaluate(circuit, model, windows, found, labels=labels, truth_cache=truth_cache)
corpora = pd.Series([label.split(":")[0] for label in labels]).value_counts()
print(f"{len(found)} neurons x {len(windows)} texts ({report})")
print("texts per corpus: " + ", ".join(f"{name} {count}" for name, count in corpora.items()))

# %% [markdown]
# Each neuron of chapter 5 also has a domain. To see the approximation where the context part
# matters, we evaluate the same neurons on 4 texts of each domain of the offline corpora
# (`data.domain_documents`; programming text is the Python standard library) and take, for each
# neuron, its **own domain**: the set of texts on which its mean true pre-activation is highest
# (computed here, not planted).

# %%
from context_neurons.text.corpora import DOMAINS
from context_neurons.text.windows import domain_windows

domain_sets = {domain: domain_windows(model.tokenizer, domain, n=4)[0] for domain in DOMAINS}
domain_results = ev.evaluate_sets(circuit, model, domain_sets, found, truth_cache=truth_cache)
matched, matched_medians = ev.matched_domains(domain_results)
print(f"{sum(len(w) for w in domain_sets.values())} domain texts: " + ", ".join(domain_sets))

# %%
general_medians = result.select(torch.ones_like(result.pearson, dtype=torch.bool))
measures = {
    "median Pearson r": ("median r", "0.9485"),
    "median FVU": ("median FVU", "0.1426"),
    "median context share": ("context share", "not reported"),
    "median context r": ("context r", "not reported"),
    "median context FVU": ("context FVU", "not reported"),
}
headline = pd.DataFrame(
    {
        "paper (GPT-2 Small)": [paper for _, paper in measures.values()],
        f"this run: {len(windows)} general texts": [
            f"{general_medians[key]:.4f}" for key, _ in measures.values()
        ],
        "this run: each neuron on its own domain": [
            f"{matched_medians[key]:.4f}" for key, _ in measures.values()
        ],
    },
    index=list(measures),
)
print(headline.to_string())
share = general_medians["context share"]
print(
    f"\nOn the general texts the context part carries a median {share:.1%} of a pair's variance: "
    + (
        "most of the headline r and FVU measures the local terms, and the context part alone "
        f"is predicted with median r = {general_medians['context r']:.3f}."
        if share < 0.5
        else "the headline r and FVU mostly measure the context part."
    )
)
print(
    f"On each neuron's own domain the context share is {matched_medians['context share']:.1%} "
    f"and the context part alone has median r = {matched_medians['context r']:.3f}, "
    f"FVU = {matched_medians['context FVU']:.3f}."
)

# %% [markdown]
# The medians are over neuron-text pairs: 200 texts times the found neurons for the general
# texts, and each neuron's 4 own-domain texts for the last column. The paper reports only the
# first two rows, on GPT-2 over OpenWebText; the context rows are this book's addition. On the
# planted model all these numbers measure the method on a network whose structure we built; they
# are not GPT-2's and need not match the paper. Per neuron, on the general texts and on its own
# domain:

# %%
per_neuron = result.per_neuron()
per_neuron["own domain"] = matched["domain"]
per_neuron["own-domain context r"] = matched["context r"].astype(float)
if loaded.is_planted:
    per_neuron["planted as"] = [
        loaded.truth.context_neurons.get(j, {}).get("description", "-") for j in per_neuron.index
    ]
print(per_neuron.to_string(float_format="{:.3f}".format))

# %% [markdown]
# Read the columns together. A neuron whose domain is absent from general text (Spanish, the
# Bible, astronomy) has a small context share there: its pre-activation wiggles with the current
# token and its context part is a small, slowly varying signal that the approximation gets only
# roughly. On its own domain the context part is large, and there the context $r$ says how well
# the bag tracks it. A median over neurons and texts is robust to a few poorly predicted pairs.
#
# ## 6.3 How fast is it?
#
# The approximation needs no model run; the truth needs the first layer. We time both on the
# same 4 texts, after one warm-up call each, taking the best of three runs: the approximation,
# our first layer (`true_pre_activations`, fused attention), and the first layer through
# TransformerLens's hooks (`run_with_cache(..., stop_at_layer=1)`), the usual way to read
# activations.

# %%
# NBVAL_IGNORE_OUTPUT
# (wall-clock timings vary from run to run and machine to machine.)
import time

from context_neurons.text.windows import pad_windows

batch, _ = pad_windows(windows[:4])
batch = batch.to(model.cfg.device)
approx_fn = ev.approximator(circuit, model, found)


def best_time(fn, repeats=3):
    """Best wall-clock time of ``fn()`` over ``repeats`` runs, after one warm-up run."""
    fn()
    times = []
    for _ in range(repeats):
        if torch.device(model.cfg.device).type == "cuda":
            torch.cuda.synchronize()
        begin = time.perf_counter()
        fn()
        if torch.device(model.cfg.device).type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - begin)
    return min(times)


t_approx = best_time(lambda: approx_fn(batch))
t_layer0 = best_time(lambda: ev.true_pre_activations(model, batch, found))
t_hooks = best_time(
    lambda: model.run_with_cache(batch, stop_at_layer=1, names_filter="blocks.0.mlp.hook_pre")
)
print(
    f"4 texts, {len(found)} neurons: approximation {t_approx:.3f} s; first layer, fused "
    f"{t_layer0:.3f} s ({t_layer0 / t_approx:.1f}x); first layer through hooks {t_hooks:.3f} s "
    f"({t_hooks / t_approx:.1f}x): here the approximation is "
    f"{'faster' if t_approx < t_layer0 else 'slower'} than the fused first layer"
)

# %% [markdown]
# The ratios depend on the machine (a GPU changes them) and on the number of neurons: the bag
# costs $B P^2 H_{ctx} J$ multiply-adds, while the model's cost does not depend on $J$, so for a
# few neurons the approximation wins by more, and for thousands the model's run is the cheaper
# way to get pre-activations.
#
# ## 6.4 Typical examples and distributions
#
# What do $r$ and FVU look like for a typical pair? We take the neuron-text pairs of the general
# texts at the 10th, 50th and 90th percentile of $r$ and draw, on the left, the true and
# approximate pre-activations with the local terms alone, and on the right the context part:
# true minus local terms against the predicted bag plus positional part.

# %%
import matplotlib.pyplot as plt

from context_neurons.plotting.discovery import plot_activation_curves
from context_neurons.plotting.evaluation import plot_accuracy


def draw_pair(row, tokens, neuron, title, legend):
    """The whole pre-activation (left) and its context part (right) of one neuron-text pair."""
    curves = ev.activation_curves(circuit, model, tokens, neuron, parts=True)
    panels = (
        (row[0], title, ("local terms", "true", "approximation")),
        (row[1], "context part", ("true minus local", "bag + positional")),
    )
    for ax, name, keys in panels:
        plot_activation_curves({k: curves[k] for k in keys}, title=name, ax=ax, legend=False)
        if legend:
            ax.legend(fontsize=7, ncol=3)


def pick(values, q):
    """(text, neuron column) of the pair at quantile q of a [texts, neurons] tensor."""
    flat = values.flatten()
    order = flat.argsort()
    return divmod(int(order[int(q * (len(order) - 1))]), values.shape[1])


fig, axes = plt.subplots(3, 2, figsize=(11, 7.2), gridspec_kw={"width_ratios": [3, 2]})
for i, q in enumerate((0.1, 0.5, 0.9)):
    text, k = pick(result.pearson, q)
    draw_pair(
        axes[i],
        windows[text],
        found[k],
        f"{int(q * 100)}th percentile of r: neuron {found[k]} on {labels[text]} "
        f"(r = {float(result.pearson[text, k]):.3f}, context r = "
        f"{float(result.context_pearson[text, k]):.3f})",
        legend=i == 0,
    )
fig.tight_layout()

# %% [markdown]
# *Figure 6.1: three neuron-text pairs of the general texts, at the 10th, 50th and 90th
# percentile of Pearson r. Left: true (black) and approximate (orange, dashed) pre-activation,
# and in grey the local terms alone (direct path, other heads at the current token, biases).
# Right: the context part, the true pre-activation minus the local terms (black) and the
# predicted bag plus positional part (orange, dashed), on its own scale.* On the left, see how
# much of the truth's token-by-token movement the grey local terms already follow (where no grey
# shows, it lies under the other two curves): where they do, the high $r$ of a pair says little
# about the context. The right column shows what is left
# for the context to explain, and how well the bag follows it (its $r$ is in each title): the
# slow rises and decays are the bag's, the fast noise around them is what the local terms miss
# (the other heads attending to tokens other than the current one). Pairs on a neuron's own
# domain show the context part at full size:

# %%
own = [
    (float(domain_results[d].context_pearson[i, found.index(j)]), d, i, j)
    for j, d in matched["domain"].items()
    for i in range(len(domain_sets[d]))
]
own.sort()
fig, axes = plt.subplots(3, 2, figsize=(11, 7.2), gridspec_kw={"width_ratios": [3, 2]})
for i, q in enumerate((0.1, 0.5, 0.9)):
    context_r, domain, text, neuron = own[int(q * (len(own) - 1))]
    k = found.index(neuron)
    draw_pair(
        axes[i],
        domain_sets[domain][text],
        neuron,
        f"{int(q * 100)}th percentile of context r: neuron {neuron} on {domain} text {text} "
        f"(r = {float(domain_results[domain].pearson[text, k]):.3f}, context r = {context_r:.3f})",
        legend=i == 0,
    )
fig.tight_layout()

# %% [markdown]
# *Figure 6.2: as Figure 6.1, for neurons on texts of their own domain (section 6.2), at the
# 10th, 50th and 90th percentile of the context part's r over all such pairs.* See on the right
# whether the predicted bag rises and falls with the true context part, and on the left how far
# the true curve moves away from the grey local terms when the context is there.

# %%
figure = plot_accuracy(
    {"whole pre-activation": result, "context part": result.context_view()}
)

# %% [markdown]
# *Figure 6.3: distributions over the general texts' neuron-text pairs of Pearson r (left) and
# FVU (right, clipped at 2), for the whole pre-activation (blue) and for its context part
# (orange); medians in the legend.* The whole pre-activation's distribution sits close to 1;
# the context part's is much wider, because on general text it is small for most neurons.
#
# ## 6.5 Where the error comes from
#
# Compare the per-position denominators with one constant denominator per head, and split the
# positions at $n = 100$, where chapter 4 found the `<|endoftext|>` sink to stop dominating the
# denominators. The first comparison runs on all 200 texts (the truth is cached); the split on
# the first `SUBSET = 48` of them, to save time.

# %%
constant = ev.evaluate(
    circuit, model, windows, found, truth_cache=truth_cache, denominators="median"
)
figure = plot_accuracy({"per-position D_h(n)": result, "constant Dhat_h": constant})

# %% [markdown]
# *Figure 6.4: distributions of Pearson r (left) and FVU (right, clipped at 2) over the general
# texts' neuron-text pairs, with per-position (blue) and constant (orange) denominators; medians
# in the legend.*

# %%
SUBSET = 48
rows = {}
for name, denominators in (("per-position D_h(n)", "per_position"), ("constant Dhat_h", "median")):
    for span, start in (("all positions", 1), ("n >= 100", 100)):
        res = ev.evaluate(
            circuit,
            model,
            windows[:SUBSET],
            found,
            truth_cache=truth_cache,
            denominators=denominators,
            start=start,
        )
        rows[(name, span)] = {
            "median r": res.median_pearson,
            "median FVU": res.median_fvu,
            "median context FVU": res.median_context_fvu,
        }
print(f"first {SUBSET} texts:")
print(pd.DataFrame(rows).T.to_string(float_format="{:.4f}".format))

# %% [markdown]
# Read the FVU column: with the constant denominators, compare all positions with $n \ge 100$.
# Over the first hundred positions the bag is overstated by the ratio of the true to the
# calibrated denominator, up to several times (Figure 4.1); per-position denominators from the
# calibration text correct this because every text starts with the same sink. From position 100
# on the two agree, and what remains is the shared kernel, the position dependence of values and
# content weights, the other heads' attention to tokens other than the current one, and the LN2
# scale varying around its calibrated value.
#
# ## 6.6 Does the calibration text matter?
#
# Three things come from one text: the denominators, the LN2 scale, and the token distribution
# of the mean keys and values $M$, $M_V$ (chapters 1 and 4), which sets the "average token" the
# bag's summands are measured from. The paper notes that prose works in
# general, while specialised domains may need a matched calibration text. We rebuild the circuit
# with each calibration text of `data.CALIBRATION_TEXTS` (general prose, news, the King James
# Bible, Spanish newswire, a software licence, Python code) and evaluate the same neurons on
# five sets of texts: the first 16 general texts above, and the 4 texts of the Bible, Spanish,
# legal and code domains. Besides the median over all found neurons we report the median FVU of
# each set's **own neurons** (those whose own domain, section 6.2, is that set), since the
# paper's concern is the domain's neurons on the domain's text.

# %%
from context_neurons.text.corpora import CALIBRATION_TEXTS
from context_neurons.plotting.evaluation import plot_calibration_sensitivity

sets = {"general": windows[:16]}
for domain in ("bible", "spanish", "legal", "code"):
    sets[domain] = domain_sets[domain]
own_neurons = {d: list(matched.index[matched["domain"] == d]) for d in sets}
sensitivity = ev.calibration_sensitivity(
    model,
    sets,
    found,
    calibrations=tuple(CALIBRATION_TEXTS),
    truth_cache=truth_cache,
    own_neurons=own_neurons,
)
print("own neurons: " + "; ".join(f"{d} {js}" for d, js in own_neurons.items()))
for measure in ("median r", "median FVU", "own neurons' FVU"):
    print(f"\n{measure}")
    print(sensitivity[measure].to_string(float_format="{:.4f}".format))

# %%
figure = plot_calibration_sensitivity(sensitivity, "median FVU")

# %% [markdown]
# *Figure 6.5: median FVU of the found neurons on five sets of texts (groups) for each
# calibration text (bars).* Compare the bars within a group: the lowest is the best calibration
# text for that set. Pearson's $r$ is insensitive to a constant scale, so the effect of the
# calibration text shows mostly in the FVU (compare the two tables above). Does a matched
# calibration text help its domain? For each domain with a calibration text of its own, the
# matched calibration against prose:

# %%
import math

fvu = sensitivity["median FVU"]
own_fvu = sensitivity["own neurons' FVU"]
helps = 0
for domain in ("bible", "spanish", "legal", "code"):
    matched_fvu, prose_fvu = fvu.loc[domain, domain], fvu.loc["prose", domain]
    helps += matched_fvu < prose_fvu
    verdict = "better" if matched_fvu < prose_fvu else "worse"
    own_text = (
        f"; own neurons {own_fvu.loc[domain, domain]:.4f} vs {own_fvu.loc['prose', domain]:.4f}"
        if own_neurons[domain]
        else "; no own neurons"
    )
    print(
        f"{domain:8s} texts: {domain} calibration FVU {matched_fvu:.4f} vs prose "
        f"{prose_fvu:.4f} ({verdict}; best: {fvu[domain].idxmin()}){own_text}"
    )
verdicts = {0: "never helps", 1: "rarely helps", 2: "helps on half the domains"}
print(
    f"The matched calibration text lowers the median FVU on {helps} of 4 domains: on this model "
    f"it {verdicts.get(helps, 'mostly helps')}."
)
prose_calibration = cc.get_circuit(model, "prose").calibration
constants = pd.DataFrame(
    {
        calib: {
            "LN2 scale s2 / prose": c.ln2_scale / prose_calibration.ln2_scale,
            "Dhat_h / prose (geometric mean)": float(
                (c.log_dhat - prose_calibration.log_dhat).mean().exp()
            ),
        }
        for calib in CALIBRATION_TEXTS
        for c in [cc.get_circuit(model, calib).calibration]
    }
).T
print("\ncalibration constants relative to prose:")
print(constants.to_string(float_format="{:.3f}".format))

# %% [markdown]
# The lines above answer the paper's question for this run, domain by domain; the verdict is
# computed, so it holds for whichever model built this page. The calibration constants multiply
# the bag, so their differences (the table just above) change the prediction most where the bag
# is large: on a domain's own neurons, on that domain's texts. Compare the own-neurons' table
# with the all-neurons one to see it.
#
# Which of the three things matters? Take the domain where the matched calibration text changes
# its own neurons' FVU most, and swap one ingredient at a time: the calibration text (denominators
# and LN2 scale) and the reference distribution of the mean keys and values
# (`build_circuit(..., reference_tokens=...)`).

# %%
change = {
    d: own_fvu.loc[d, d] / own_fvu.loc["prose", d]
    for d in ("bible", "spanish", "legal", "code")
    if own_neurons[d]
}
if not change:
    print("No domain of the table has neurons of its own: nothing to swap.")
else:
    domain = max(change, key=lambda d: abs(math.log(change[d])))
    tokens = {name: cc.get_circuit(model, name).calibration.tokens for name in ("prose", domain)}
    rows = {}
    for calib in ("prose", domain):
        for reference in ("prose", domain):
            swapped = cc.build_circuit(
                model, calib, heads=circuit.heads, reference_tokens=tokens[reference][1:]
            )
            res = ev.evaluate(
                swapped, model, domain_sets[domain], own_neurons[domain], truth_cache=truth_cache
            )
            rows[(calib, reference)] = {
                "FVU": res.median_fvu,
                "context r": res.median_context_pearson,
            }
    swap = pd.DataFrame(rows).T
    swap.index.names = ["denominators and LN2 scale from", "mean keys and values from"]
    print(f"{domain} texts, its own neurons {own_neurons[domain]}:")
    print(swap.to_string(float_format="{:.4f}".format))
    base = swap.loc[("prose", "prose"), "FVU"]
    by_reference = abs(swap.loc[("prose", domain), "FVU"] - base)
    by_calibration = abs(swap.loc[(domain, "prose"), "FVU"] - base)
    print(
        "The reference distribution changes the FVU "
        + ("more" if by_reference > by_calibration else "less")
        + f" than the denominators and LN2 scale ({by_reference:.4f} vs {by_calibration:.4f})."
    )

# %% [markdown]
# The table separates the two. When the mean keys and values come from the domain's own text,
# the domain's common value direction is part of the "average token": it moves out of the bag,
# which weights each token by its content, into the positional part, which does not, so the
# approximation of exactly that domain's neurons can get worse. A calibration text is also one
# document with its own quirks (Genesis 1 is short and repetitive), so a "matched" calibration
# text need not represent even its own domain. On GPT-2 the answer may differ, which is why it
# is computed here rather than assumed.
#
# ## 6.7 Neurons that are silent on the calibration text
#
# The discovery uses the calibration text only for a handful of constants; it finds neurons
# from the weights. Does it find neurons that do not fire on that text? "Never fires" in the
# strict sense (pre-activation below zero everywhere) is rare and picks out neurons that hardly
# fire anywhere. A relative criterion is more telling: a neuron is **quiet on the calibration
# text** when its largest output there (GELU of the largest pre-activation) is below
# `ev.QUIET_FRACTION` = 10% of its largest output on its best domain, and that output is at least
# `ev.STRONG_OUTPUT` = 1, a clear firing.

# %%
silent = ev.silent_on_calibration(circuit, model, found, domain_results)
quiet = silent[silent["quiet on calibration"]]
columns = ["max on calibration text", "best set", "max on best set", "output ratio"]
shown = quiet[columns].copy()
if loaded.is_planted:
    shown["planted as"] = [
        loaded.truth.context_neurons.get(j, {}).get("description", "-") for j in shown.index
    ]
print(
    f"{len(quiet)} of {len(found)} found neurons are quiet on the calibration text "
    f"({CALIBRATION_TEXTS[circuit.calibration.name].description}) and fire strongly in a domain:"
)
print(shown.to_string(float_format="{:.2f}".format))

# %% [markdown]
# Each neuron in this table barely responds anywhere in the calibration text, yet fires at
# least ten times more strongly on some domain's texts, and the circuit found it. Finding such
# neurons from activations would need text of their domain; the circuit needs none.

# %% [markdown]
# **Explore.** Type a text and pick a neuron to compare its true and approximate pre-activation
# along the text (a text box in a live notebook; a default text on the website).

# %%
from context_neurons.interactive import activation_explorer, model_activations_fn

activations_fn = model_activations_fn(
    model,
    lambda tokens, js: ev.true_pre_activations(model, tokens, js),
    lambda tokens, js: ev.approximator(circuit, model, js)(tokens),
)
explorer = activation_explorer(activations_fn, found, neuron=found[0])

# %% [markdown]
# ## 6.8 Exercises
#
# ````{exercise} Locate the constant-denominator error
# :label: ex-ch06-early-positions
#
# *Difficulty: easy, 15 minutes.* For one neuron and one text, compute the approximation with
# constant denominators and with per-position ones (`ev.activation_curves(...,
# denominators=...)`). Show that the two differ only in the bag term, then compute for each the
# share of its squared error $\sum_n (y_n - \hat y_n)^2$ that falls in positions $1 \dots 99$.
#
# ```python
# curves = {d: ev.activation_curves(circuit, model, windows[0], found[0], denominators=d)
#           for d in ("median", "per_position")}
# early_share = ...  # per denominator choice: squared error over n < 100 / over all n >= 1
# ```
# ````
#
# ```{solution-start} ex-ch06-early-positions
# :class: dropdown
# ```
#
# Only the bag divides by the denominators; the positional part, the direct path, the other
# heads and the biases do not depend on them. So the difference of the two approximations equals
# the difference of their bag terms. With constant denominators the bag is overstated where the
# `<|endoftext|>` sink inflates the true denominators, so a large share of the error sits in the
# first hundred positions; per-position denominators remove most of it.

# %%
curves = {
    d: ev.activation_curves(circuit, model, windows[0], found[0], denominators=d)
    for d in ("median", "per_position")
}
gap = curves["median"]["approximation"] - curves["per_position"]["approximation"]
bag_gap = curves["median"]["bag only"] - curves["per_position"]["bag only"]
scale = curves["median"]["true"].abs().max()
assert torch.allclose(gap, bag_gap, atol=1e-4 * float(scale)), (gap - bag_gap).abs().max()
early_share = {}
for d, c in curves.items():
    squared = (c["true"] - c["approximation"])[1:] ** 2
    early_share[d] = float(squared[:99].sum() / squared.sum())
    assert 0 <= early_share[d] <= 1
print(
    f"neuron {found[0]} on {labels[0]}: share of the squared error in n < 100: "
    + ", ".join(f"{d} {share:.2f}" for d, share in early_share.items())
)
print("check passed: the denominators change the bag term only")

# %% [markdown]
# ```{solution-end}
# ```
#
# ````{exercise} Separate shape from scale
# :label: ex-ch06-fitted-fvu
#
# *Difficulty: medium, 15 minutes.* The FVU compares the approximation as it is. Fit the best
# line $y \approx a \hat y + b$ by least squares for one neuron-text pair and show that the FVU of
# the fitted line is $1 - r^2$. Then compare the median of $1 - r^2$ over all pairs of
# `result` with the median FVU: what does the gap measure?
#
# ```python
# fitted_fvu = ...  # FVU of a * yhat + b, fitted, for one pair
# ```
# ````
#
# ```{solution-start} ex-ch06-fitted-fvu
# :class: dropdown
# ```
#
# Least squares of $y$ on $\hat y$ with an intercept leaves the residual variance
# $(1 - r^2)\,\mathrm{var}(y)$, so the fitted FVU is $1 - r^2$ and never exceeds the FVU of the
# unfitted approximation. The gap between the medians of FVU and of $1 - r^2$ is the error due to
# a wrong offset or scale alone, which a better calibration could remove; $1 - r^2$ is the error
# in the shape of the curve.

# %%
c = curves["per_position"]
y, yhat = c["true"][1:].double(), c["approximation"][1:].double()
design = torch.stack([yhat, torch.ones_like(yhat)], dim=1)
coef = torch.linalg.lstsq(design, y[:, None]).solution
fitted_fvu = float(((y - (design @ coef)[:, 0]) ** 2).sum() / ((y - y.mean()) ** 2).sum())
r = float(torch.corrcoef(torch.stack([y, yhat]))[0, 1])
raw_fvu = float(((y - yhat) ** 2).sum() / ((y - y.mean()) ** 2).sum())
assert abs(fitted_fvu - (1 - r**2)) < 1e-6 and fitted_fvu <= raw_fvu + 1e-9
shape_error = float((1 - result.pearson**2).flatten().nanmedian())
pointwise = (1 - result.pearson**2) <= result.fvu + 1e-4
assert bool(pointwise.all()) and shape_error <= result.median_fvu + 1e-4
print(
    f"one pair: fitted FVU {fitted_fvu:.4f} = 1 - r^2 {1 - r**2:.4f} <= FVU {raw_fvu:.4f}; "
    f"all pairs: median 1 - r^2 {shape_error:.4f}, median FVU {result.median_fvu:.4f}"
)
print("check passed: the fitted FVU equals 1 - r^2 and bounds the FVU from below")

# %% [markdown]
# ```{solution-end}
# ```

# %% [markdown]
# ## Summary
#
# - The circuit predicts a first-layer neuron's pre-activation from the weights, a calibration
#   text's constants and the text itself: a bag of token contributions plus the positional part,
#   the direct path, the other heads at the current token and biases, with LN2 linearised.
# - Its accuracy is measured by Pearson's $r$ and the FVU over each neuron-text pair; the paper's
#   medians on GPT-2 Small are 0.9485 and 0.1426. The same measurement runs here on 200 texts in
#   seconds, without running the model for the prediction.
# - A high headline $r$ can come from the local terms: measure the context part (true minus
#   local terms against bag plus positional part) beside it, and evaluate neurons on texts of
#   their own domain, where the context part is large.
# - The constant denominators' error sits in the first ~100 positions, where the
#   `<|endoftext|>` sink dominates; per-position calibrated denominators remove most of it.
# - The calibration text sets the denominators, the LN2 scale and the reference distribution of
#   the mean keys and values; its effect shows mostly in the FVU and on a domain's own neurons.
#   Whether a matched calibration text helps a domain is computed, not assumed.
# - The method finds neurons that are nearly silent on the calibration text and fire strongly
#   on their domain's texts.
#
# **Next:** chapter 7 follows context into later layers: context look-ups, where a later-layer
# neuron predicts a token when a head finds its context.
