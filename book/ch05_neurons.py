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
# (British versus American English, GPT-2 Small's neurons 300 and 704; 19th-20th century war,
# neuron 1621; religious text, neuron 1710; and domains such as medicine, law, the Bible,
# Spanish, astronomy and programming). Chapter 4 showed that the contextual heads write a
# decaying bag of extended embeddings $\sum_i K[n,i]\, e(t_i)$. A first-layer MLP neuron reads
# that bag through a LayerNorm and its input weights, so each token has a fixed
# **contribution** to each neuron. We compute the contributions of every neuron and every token
# with one matrix product, score each neuron by how much a few tokens stand out, and read off
# context neurons without running the model on any text.
#
# ```{admonition} Learning objectives
# :class: tip
# After this chapter you can
# - derive a neuron's token contributions from the extended embeddings, LayerNorm 2 and
#   $W_{in}$, and compute them for every neuron and token at once;
# - define a robust score for "a few tokens move this neuron a lot", choose a threshold for any
#   model's vocabulary and read the number of neurons found against it;
# - read a context neuron from its top and bottom tokens, give it a domain from its weights
#   before looking at activations, split it into sub-latents, and check the reading against its
#   activations on real text of the domain;
# - say when texts can confirm a reading and when they cannot (how often they use the neuron's
#   tokens), and test a reading at fixed text with a controlled experiment (minimal pairs).
# ```
#
# **Prerequisites:** {ref}`ch-circuit`. The symbols ($e(t)$, $w_j$, $\mathrm{top}[j]$,
# $\theta$) are collected on the {ref}`notation` page (section 5).

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
# For all neurons and tokens, the contributions are the product of the $d_{vocab} \times
# d_{model}$ matrix of extended embeddings with the $d_{model} \times d_{mlp}$ matrix of read
# vectors ($50257 \times 768$ and $768 \times 3072$ on GPT-2 Small; the sizes of this page's model
# are printed below).

# %%
from context_neurons import circuit as cc
from context_neurons import discovery as disc
from context_neurons import printing
from context_neurons.printing import show_table, wrapped, wrapped_items

circuit = cc.get_circuit(model)
cfg = model.cfg
some = disc.contributions(circuit, model, neurons=[0, cfg.d_mlp - 1])
print(f"extended embeddings {tuple(circuit.extended.shape)} (d_vocab x d_model)")
print(f"read vectors ({cfg.d_model}, {cfg.d_mlp}) (d_model x d_mlp)")
print(f"contributions of two neurons: {tuple(some.shape)} (neurons x tokens)")
scores = disc.get_scores(circuit, model)  # the full d_mlp x d_vocab product, chunked over neurons

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
# "standard deviations of an ordinary token" of that neuron. `<|endoftext|>` is left out: it
# sits at position 0 of every text, so it belongs to no context.
#
# **Choosing $\theta$ on any model.** If no token stands out, that is if a neuron's
# contributions are Gaussian over the $N$ scored tokens, $\mathrm{top}[j]$ is the mean of the 20
# largest of $N$ Gaussian $|z|$: the **Gaussian null** (`disc.gaussian_null_score(N)`, from the
# expected order statistics). It depends on the vocabulary, but only through
# $\sqrt{2 \ln N}$: it is 3.79 for GPT-2's 50,256 tokens and a little lower for a smaller
# vocabulary (printed below for this model). We call a neuron context-sensitive when
# $\mathrm{top}[j] \ge \theta$ with $\theta = 6$ on every model. The rule transfers because both
# sides are in units of the neuron's own spread: $\theta = 6$ says that the twenty most extreme
# tokens sit on average six ordinary spreads out, whatever the model's width or scale, and it
# stays well above the null for any vocabulary from a few thousand tokens to a few hundred
# thousand (the null moves by a few tenths over that range). What does not transfer is how many
# neurons pass: that depends on how heavy-tailed a model's contributions are, which the sweep
# below shows, and on a model whose typical neuron already scores above $\theta$ the threshold
# separates little (the code says so when it happens).

# %%
from context_neurons.plotting.discovery import plot_scores, plot_sweep

null = scores.null()
found = disc.require_found(scores.found(disc.THETA), disc.THETA, "this chapter's case studies")
planted = sorted(loaded.truth.context_neurons) if loaded.is_planted else None
for finding in disc.score_summary(scores, disc.THETA).findings():
    print(wrapped(finding))
figure = plot_scores(
    scores, disc.THETA, planted=planted, null=null, title=f"{loaded.title}: discovery scores"
)

# %% [markdown]
# *Figure 5.1: the score $\mathrm{top}[j]$ of every neuron of the model named in the title
# (log-log histogram), with the threshold (dashed) and the Gaussian null for the model's
# vocabulary (dotted).* On the planted model the planted context neurons (planted truth) are
# drawn in red. Where to look: the bulk of the neurons and how far it sits above the null (how
# heavy-tailed ordinary contributions are), and whether a separate tail of high scores stands
# to the right of $\theta$.
#
# How many neurons are found depends on $\theta$. The paper's score is on a different scale (it
# reports about 100 neurons at its $\theta \approx 5$ on GPT-2 Small, and hundreds at lower
# thresholds), so only the shape of the curve compares:

# %%
sweep = disc.theta_sweep(scores, thetas=(4, 4.5, 5, 6, 8, 12, 20, 30, 50, 80), truth=planted)
against = "; precision and recall against the planted neurons" if planted else ""
show_table(sweep, f"neurons found at each threshold theta{against}", model=loaded.title,
           formats={"recall": 2})
figure = plot_sweep(sweep, disc.THETA, title=f"{loaded.title}: neurons found against theta")

# %% [markdown]
# *Figure 5.2: neurons found against the threshold $\theta$ (log-log) on the model named in the
# title; on the planted model also the precision and recall against the planted context
# neurons (planted truth).* Below the bulk of the score distribution every neuron is "found";
# the count falls steeply through the bulk and then slowly along the tail of genuine context
# neurons. A good threshold sits where the curve flattens.
#
# On the planted model we can compare with what was planted. This is agreement **by
# construction**: the context neurons were planted by giving their input weights a component
# along the directions the contextual heads write for a topic, which is exactly what the score
# measures, so it checks the code end to end, not the method's validity on a real network. The
# planted gains are spread from below $\theta$ to far above it, and some neurons that were *not*
# planted as context neurons read topics through other routes, so neither precision nor recall
# need be 1:

# %%
if loaded.is_planted:
    truth = loaded.truth
    precision, recall = disc.precision_recall(found, planted)
    print(
        f"planted truth: {len(planted)} context neurons; "
        f"found at theta = {disc.THETA:g}: {len(found)}"
    )
    print(f"precision {precision:.3f}, recall {recall:.3f}")
    for j in sorted(set(planted) - set(found)):
        what, score = disc.planted_description(truth, j), float(scores.top[j])
        print(wrapped(f"  planted, not found: {j} ({what}), score {score:.1f}", indent="    "))
    for j in sorted(set(found) - set(planted)):
        what, score = disc.planted_description(truth, j), float(scores.top[j])
        print(wrapped(f"  found, not planted: {j} ({what}), score {score:.1f}", indent="    "))

# %% [markdown]
# Every analysis below that costs time per neuron (activations on texts, sub-latents, the
# gallery's plots, chapter 6's evaluation) takes at most `disc.MAX_NEURONS` = 200 found neurons,
# the highest-scoring ones. On GPT-2 Small $\theta$ can select hundreds or thousands; on the
# planted model all found neurons fit:

# %%
carried = disc.carried(found)
note = disc.selection_note(carried, found)
print(f"carried into the analyses: {note} (MAX_NEURONS = {disc.MAX_NEURONS})")

# %% [markdown]
# ## 5.3 Case studies: British spelling, war and religion
#
# The paper's case studies are four neurons of GPT-2 Small: 300 and 704 (British versus
# American English), 1621 (19th-20th century war) and 1710 (religious text). On GPT-2 Small, and
# on the planted model, which planted neurons of these roles at the same numbers (by
# construction), we study those neurons. On any other model these numbers mean nothing, so the
# chapter chooses each role's neuron from the weights: the found neuron whose **up-tokens**
# (the tokens whose contribution is at least $\theta$ robust standard deviations above its
# median, the tokens behind its score) the role's texts use most often, relative to the texts of
# other domains. Counting tokens in texts needs no model run, so this choice is made before any
# activation is looked at. The texts: four windows of each domain of `data.DOMAINS`
# (`data.domain_documents`, `data` being `context_neurons.text.corpora`: the offline corpora, or
# OpenWebText documents dense in the domain's keywords when the corpora are absent; short documents are concatenated, separated by
# `<|endoftext|>`, and the documents alternate between a domain's corpora), each as long as the
# model's context.

# %%
import pandas as pd

from context_neurons import casestudies, gallery
from context_neurons import respelling as rs
from context_neurons.text.windows import domain_texts

pd.set_option("display.width", 140)
texts = domain_texts(model.tokenizer, n=4)
densities = casestudies.token_densities(circuit, model, carried, texts, scores)
cases_table = casestudies.case_studies(loaded, densities, carried)
show_table(cases_table, "the neuron of each case study, and how it was chosen",
           model=loaded.title)
role = cases_table["neuron"].to_dict()
british, british_2 = role["British spelling"], role["British spelling, second"]
war, religion = role["war"], role["religion"]

# %% [markdown]
# The table says which neuron plays each role on this page's model and how it was chosen. The
# paper's first example separates British from American English. The top and bottom token
# contributions (contribution and robust z) of the British-spelling neuron:

# %%


def show(table, neuron, k=10):
    """A neuron's token table without the id columns, at fixed precision, naming the model."""
    columns = {
        "top token": "top token",
        "top contribution": "top contr.",
        "top z": "top z",
        "bottom token": "bottom token",
        "bottom contribution": "bottom contr.",
        "bottom z": "bottom z",
    }
    shown = table[list(columns)].head(k).rename(columns=columns)
    caption = f"top and bottom token contributions (contr.) of neuron {neuron}"
    show_table(shown, caption, model=loaded.title, decimals=2)


print(f"British-spelling neuron: {british}")
show(disc.token_table(circuit, model, british), british)

# %% [markdown]
# On GPT-2 Small the paper finds British spellings among neuron 300's top tokens and their
# American counterparts among the bottom ones. The paper's neuron 704 detects British contexts
# too, but writes in the opposite direction; it suggests the two cancel each other's outputs.
# Compare the two British-spelling neurons' contributions and their output weights:

# %%
pair = disc.neuron_pair(circuit, model, british, british_2)
for finding in pair.findings():
    print(wrapped(finding))
show(disc.token_table(circuit, model, british_2), british_2, k=5)

# %% [markdown]
# A correlation near 1 says the two neurons read the same context; a cosine near $-1$ that they
# write opposite outputs. Next, the war neuron (the paper's 1621, "19th-20th century
# conflict"):

# %%
print(f"war neuron: {war}")
show(disc.token_table(circuit, model, war), war)

# %% [markdown]
# The paper reads neuron 1621's top tokens as a "war" latent and its bottom tokens as a "21st
# century" latent: the neuron is pushed up by one topic and down by another, so its top and
# bottom tokens describe two different things. The religion neuron (the paper's 1710, religious
# text):

# %%
print(f"religion neuron: {religion}")
show(disc.token_table(circuit, model, religion), religion)

# %% [markdown]
# ## 5.4 Domains, and activations on real text
#
# Reading tokens is a hypothesis about a neuron; activations on real text test it. We run the
# model's first layer on the texts of section 5.3 and compute the circuit's approximation of
# chapter 6 beside it. Domains are chosen by corpus, not by topic, and not every one is a clean
# match for a case study. Offline, the *british* texts are UK medicine leaflets and Australian
# rural news, so they mix spelling with a medical topic; the *war* texts are State of the Union
# addresses of the 1940s and a WikiText article, not war histories; *american* is the Brown corpus
# and State of the Union; programming text is the Python standard library. WikiText's markup (the
# `<unk>` that stands for a rare word, `@-@` for a hyphen) is removed when the texts are read
# (`data.strip_markup`), so that it never counts as a domain's token. The texts of each domain:

# %% tags=["hide-output"]
for domain in dict.fromkeys(texts.domains):
    names = [texts.labels[i] for i in texts.indices(domain)]
    print(wrapped_items(f"{domain:>12s}:", [name[:36] for name in names], ";", indent=" " * 14))
CASE_DOMAINS = ("medical", "legal", "bible", "spanish", "astronomy", "code")
domain_neurons = [casestudies.token_matched_neuron(densities, d, carried) for d in CASE_DOMAINS]
computed = list(dict.fromkeys(carried + list(role.values()) + domain_neurons))
acts = casestudies.text_activations(circuit, model, computed, texts, scores)
print(f"activations of {len(computed)} neurons on {len(texts.windows)} texts")

# %% [markdown]
# For every neuron and text we average the model's (**true**) pre-activation over positions
# $n \ge 100$, where the bag is full, and average those means over each domain's four texts.
# A context neuron should stand out on its domain against its own level elsewhere. Neurons
# differ in scale, so we measure each neuron's departure from its median over domains in units
# of its own typical standard deviation along a text (the mean over all texts): one unit is the
# token-by-token noise a context has to rise above.

# %%
from context_neurons.plotting.discovery import plot_domain_profile

relative = casestudies.relative_domain_means(acts)
shown_rows = carried[:40]
figure = plot_domain_profile(
    relative.loc[shown_rows],
    title=f"{loaded.title}: mean pre-activation minus the neuron's median over domains",
    colorbar_label="in units of the neuron's within-text SD",
)

# %% [markdown]
# *Figure 5.3: for each found neuron (rows, best score first, at most 40; the
# {ref}`gallery <ch-neuron-gallery>` lists every one) and each domain (columns), the mean true
# pre-activation over four texts of the domain minus the neuron's median over domains, divided
# by the neuron's mean within-text standard deviation; on the model named in the title.* Each
# row is normalised by its own neuron's spread, so one strong neuron cannot wash out the others;
# the colour scale is symmetric and clipped at the 95th percentile of the absolute cell values
# (cells beyond it saturate; the numbers in the cells are exact). Red cells: the neuron is more
# active in that domain than usual. A context neuron shows up as a row with one or two strongly
# coloured cells.
#
# **A neuron's own domain, from its weights.** Which domain *should* move a neuron? Choosing the
# domain where its activation is highest would grade the activations against themselves, and
# gives meaningless answers for a neuron that context pushes *down* (a "not Spanish" neuron is
# highest wherever Spanish is absent). So the domain is chosen from the weights and the texts'
# tokens alone (`casestudies.domain_from_weights`): a neuron's **driving tokens** are its
# up-tokens when its most extreme tokens push it up on balance and its down-tokens when they
# push it down; its own domain is the domain whose texts use its driving tokens most often
# relative to the other domains' texts, provided they use them at least twice as often and at
# least one more time per 1000 tokens. Otherwise its tokens suggest none of these domains and it
# gets none: no text of ours is a test of it. The domain is named from half of each domain's
# texts (the first and third) and checked on the other half (`own_domain.held_out_domains`): the
# name is **confirmed** when the same domain passes the same rule on the held-out texts, and
# **weak** when it does not (the table's densities are the naming half's). Then the activations
# test the choice: on its own domain, a neuron driven up should rise and a neuron driven down
# should fall.

# %%
from context_neurons.own_domain import check_domains, held_out_domains

own = held_out_domains(densities, scores)
checked = check_domains(own, relative, carried, circuit, model, texts, scores,
                        truth=loaded.truth if loaded.is_planted else None)
show_table(checked.evidence.head(40), "each neuron's own domain (from its weights), "
           "the densities of its driving tokens and its measured departure there",
           model=loaded.title, decimals=2)
show_table(checked.listing.head(40),
           "the driving tokens its own domain's texts use most", model=loaded.title)
for finding in checked.findings():
    print(wrapped(finding))

# %% [markdown]
# *Rank of that domain* ranks the domains by the measured departure in the predicted direction
# (up for a neuron driven up, down for one driven down): 1 means that the domain the weights
# chose moves the neuron most of all the domains. The second table shows what the choice rests
# on: the neuron's driving tokens that the domain's texts use most. The rule counts tokens, not
# topics, so a domain that repeats one of a neuron's tokens wins even when its topic is another
# (if a game's texts repeat the American spelling *Defense*, then for a neuron driven down by
# American spellings they are the texts where its context term is largest). Neurons without a
# domain are listed at the end: their driving tokens are not concentrated in any domain we have
# texts of (a neuron of 21st-century technology, say, or one that reads a few rare tokens), so
# these texts cannot test them and nothing is claimed about them. Chapter 6 uses the same rule
# to pick the texts on which each neuron's approximation is judged.
#
# ### Case studies against the texts
#
# Now the case studies: the British-spelling neuron on British and on American texts, the
# second one on British texts, the war neuron on war and the religion neuron on the Bible; and
# for the domains medical, legal, Bible, Spanish, astronomy and code the found neuron whose
# up-tokens the domain's texts use most, relative to the other texts (chosen from the weights
# and the texts' tokens, not the activations). For each pair we measure the neuron's mean on the
# domain's texts against its mean on the texts of the other domains (*excess*; a text that the
# domain shares with another, such as a UK leaflet that is both *british* and *medical*, is not
# counted among the others), the same for the circuit's approximation (*predicted excess*: what
# the weights and the texts' tokens predict), and the typical standard deviation of the
# pre-activation along one of the domain's texts. The second table counts the neuron's up-tokens
# and **down-tokens** (at least $\theta$ robust standard deviations below its median) per 1000
# tokens of text.

# %%
cases = [(british, "british"), (british, "american"), (british_2, "british")]
cases += [(war, "war"), (religion, "bible")]
cases += list(zip(domain_neurons, CASE_DOMAINS))
cases = list(dict.fromkeys(cases))
against_texts = rs.case_verdicts(acts, cases, spelling=(british, british_2))
evidence = against_texts.evidence


def signed(value):
    """A number with its sign and two decimals."""
    return printing.fixed(value, 2, sign=True)


show_table(evidence.iloc[:, :7], "case studies against the texts: excess on the domain",
           model=loaded.title, formats=dict.fromkeys(evidence.columns[:6], signed))
show_table(evidence.iloc[:, 7:], "up- and down-token densities of the case studies",
           model=loaded.title, decimals=1)
for name, listed in against_texts.verdicts().items():
    print(wrapped(f"{name:>12s}: {listed}", indent=" " * 14))
for finding in against_texts.findings():
    print(wrapped(finding))

# %% [markdown]
# How to read the verdicts: a domain's effect counts as **confirmed** when it moves the
# neuron's mean by at least one within-text standard deviation in the direction the weights
# predict, **weak** from half a standard deviation, and **not shown** below that: then these
# texts cannot tell whether the reading is right. Read two columns beside the verdict. First,
# *predicted excess* against *excess*: where they agree (the line above gives the largest gap),
# a small effect is not a failure of the reading from the weights, since the circuit predicts
# it small from the same texts. Second, the up-token densities: the effect follows how often
# the texts use the neuron's tokens. The bag of tokens averages over some sixty positions, so a
# token with contribution $c$ adds about $c/60$ for as long as it stays in the bag: a neuron
# whose up-tokens occur once in a thousand tokens of text is in context a few per cent of the
# time, and its mean hardly moves however strongly each token drives it. Spelling variants are
# rare words even in British text, and State of the Union addresses speak of war only now and
# then; a medicine leaflet, a Bible chapter or a Spanish text is dense in the words of its
# domain. For the British-spelling neurons the last lines above give their verdicts with the
# densities behind them; where a verdict is *not shown* or *weak*, the texts cannot decide, and
# {ref}`a controlled experiment <sec-ch05-respelling>` at the end of this section changes only
# the spelling of the same texts to test the reading directly.
#
# Activations along one text show this position by position. For each case, the text of its
# domain on which the neuron departs most from its median over all texts:

# %%
from context_neurons.plotting.discovery import plot_activation_grid

panels = []
for j, domain in cases:
    w = acts.best_window(j, domain)
    title = f"neuron {j} on {domain}: {texts.labels[w][:48]}"
    panels.append(acts.panel(j, w, title=title))
figure = plot_activation_grid(
    panels, columns=2, title=f"{loaded.title}: case-study neurons along a text of their domain"
)

# %% [markdown]
# *Figure 5.4: true (black) and approximate (orange, dashed) pre-activation of each case-study
# neuron along one text of its domain, with the neuron's median over all texts (grey, dotted),
# on the model named in the title. Ticks along the bottom mark the neuron's up-tokens (red) and
# down-tokens (blue) in the text.* Where to look: the pre-activation rises within a few tokens
# of a cluster of red ticks and sinks back as they leave the kernel, over some tens of tokens;
# blue ticks push it down the same way. A text with few ticks leaves the curve near its median,
# whatever the neuron reads. Where a window concatenates short documents, each `<|endoftext|>`
# separator is a second attention sink in the middle of the text; the circuit treats it as an
# ordinary token, so the approximation can leave the true curve for a few dozen tokens after a
# separator.
#
# The curves also show why the within-text spread is large even without any tick: the bag is
# only one term of the pre-activation. Split into the terms of chapter 6, along the same texts:

# %%
spreads = casestudies.case_term_spreads(circuit, model, acts, cases)
show_table(spreads.drop(columns=["positional", "constant"]),
           "standard deviation along the text of each term of the approximate pre-activation",
           model=loaded.title, decimals=2)

# %% [markdown]
# The *bag* column is the context signal; *direct* is the current token's own embedding read
# through LayerNorm 2, and *other heads* the heads that attend to the current and previous few
# tokens. Where the direct path varies as much as the bag or more, a neuron's context response
# is a shift of its level under token-by-token noise, and only the mean over many positions,
# the excess above, reveals it. The top and bottom tokens of the domain neurons:

# %% tags=["hide-output"]
for j, domain in zip(domain_neurons, CASE_DOMAINS):
    show(disc.token_table(circuit, model, j, k=6, scores=scores), f"{j} ({domain})", k=6)

# %% [markdown]
# (sec-ch05-respelling)=
# ### A controlled experiment: respelling
#
# Texts of two domains differ in many ways at once, and British spellings are rare even in
# British text, so the table above cannot isolate what the two British-spelling neurons read. A
# controlled experiment can. We take American texts, respell their American words into British
# spelling (`topics.swap_spellings`, with the SCOWL spelling pairs of `rs.spelling_pairs()`, or a
# short built-in list without the corpora) and run the model on both versions. The two versions
# are a **minimal pair**: all but the spelling is the same, so the difference of the
# pre-activations, British minus American, is the neuron's response to the spelling alone, free
# of the token-by-token noise of the direct path that dominates the within-text spread.
#
# Two details keep the comparison exact. We respell only words whose two spellings have the same
# number of tokens (`rs.length_preserving_pairs`: with GPT-2's tokenizer *colour* and *color* are
# one token each after a space, *realisation* is two against *realization*'s one), so the
# versions align by position; and we keep a text only if its two tokenizations have equal length
# and differ at the respelled words and nowhere else. The texts are the American documents
# (`data.domain_documents("american")`) with most respellable words in their first window: they
# are chosen by their words, not by the neuron's activations.

# %%
from context_neurons.text import corpora as data

pairs, pairs_source = rs.spelling_pairs()
aligned = rs.length_preserving_pairs(pairs, model.tokenizer)
american_documents = data.domain_documents("american")
respelling = rs.respelled_texts(
    model.tokenizer, american_documents, aligned, n=8, pairs_source=pairs_source
)
print(wrapped(f"spelling pairs: {len(pairs)} ({pairs_source}); {len(aligned)} keep the token "
              "count"))
coverage = respelling.coverage(circuit, model, british, scores, against_texts)
for finding in coverage.findings():  # the lines as printed (the long ones wrapped)
    print(finding)

# %% [markdown]
# The last line compares how dense the respelled texts and the British texts of the table are
# in the British-spelling neuron's up-tokens; the respelled texts differ from their originals in
# nothing but the spelling. The line before says how many of the respelled tokens are the
# neuron's up-tokens in British spelling (and down-tokens in American): the reading from the
# weights covers those, and a British spelling split into several tokens may not be among them.
#
# Now the pre-activations of both neurons on both versions, true and approximate, and their mean
# difference at the respelled tokens, over the next 50 positions after a respelled word,
# elsewhere (before the first respelled word and beyond 50 positions after one) and over all
# positions, each from $n = 100$ on as in the table:

# %%
effect = rs.respelling_effect(circuit, model, [british, british_2], respelling)
differences = effect.differences()
show_table(differences, "mean difference, British minus American", model=loaded.title,
           formats=dict.fromkeys(differences.columns, signed))
summary = effect.summary()
show_table(summary, "the respelling's effect against the within-text SD", model=loaded.title,
           formats=dict.fromkeys(summary.columns.drop("verdict"), signed))
print(f"largest |true difference| before the first respelled word: {effect.before_first():.3f}")

# %% [markdown]
# Attention is causal, so before the first respelled word the two versions cannot differ: the
# last line checks that the texts are aligned. The verdict uses the scale and thresholds of the
# case-study table: the effect near respelled words in units of the neuron's standard deviation
# along the (American) texts, against the approximation's prediction. Along the text with most
# respelled words:

# %%
import torch

first = int(torch.tensor(respelling.words).argmax())
panels = [
    effect.panel(j, first, title=f"neuron {j}: {respelling.labels[first]}, respelled")
    for j in (british, british_2)
]
figure = plot_activation_grid(
    panels, columns=2, height=2.6, title=f"{loaded.title}: respelling, British minus American"
)

# %% [markdown]
# *Figure 5.5: British minus American pre-activation of the two British-spelling neurons (left
# and right, numbers in the panel titles) along one respelled text, true (black) and approximate
# (orange, dashed), on the model named in the title; red ticks mark the respelled tokens.* Where
# to look: the curve is flat at zero before the first tick. A neuron that reads British spelling
# jumps at each tick (the respelled token's own embedding and its place in the bag) and decays
# over some tens of positions as the word's weight in the bag thins out; the approximation
# should follow the jumps and the decays. A neuron that ignores spelling stays near zero.
#
# The verdicts on British texts and on respelled texts side by side, and what the second neuron
# does that the first does not:

# %%
comparison = rs.compare_with_texts(against_texts, effect, pair.output_cosine)
for finding in comparison.findings():
    print(wrapped(finding))

# %% [markdown]
# How to read this. Where the respelling verdict is *confirmed* but the British texts left the
# neuron *not shown*, the reading from the weights was right and the British texts were too
# sparse to show it: the same neuron that barely moves over a whole British text rises within
# a few tokens of each British spelling. Where the respelling too leaves a neuron *not shown*,
# the spelling hardly moves it even at fixed text, and its top tokens overstate what it reads.
# The *all / SD* column is the whole-text shift at the density of the respelled texts; at the
# lower density of ordinary British text it shrinks roughly in proportion. Where the correlation
# of the two neurons' contributions (section 5.3) is near 1, the two read the same tokens and
# the respelling moves them the same way (the ratio above is positive); their output weights
# (the cosine above) say what they write: where they point in opposite directions, the two
# neurons' effects on the residual stream partly cancel in a British context, as the paper
# suggests for GPT-2's 300 and 704.

# %% [markdown]
# ## 5.5 Sub-latents
#
# The paper asks for a way to split a neuron's contributions into sub-latents: a neuron may be
# pushed up by two unrelated topics. We cluster the extended embeddings of a neuron's 60 top
# tokens, after removing their common component along the read vector $w_j$ (every top token has
# one, that is why it is a top token), with spherical k-means into two clusters. If the tokens
# come from one topic, the two centroids point in similar directions (cosine near or above 0);
# two topics give clusters with opposite residual directions (cosine clearly below 0). We split
# the carried neurons (section 5.2).

# %%
split = {j: disc.sub_latents(circuit, model, j, k=60) for j in carried}
cosines = disc.centroid_cosines(split)
show_table(cosines.sort_values().head(8).rename_axis("neuron"),
           f"sub-latents of {disc.selection_note(carried, found)}; the 8 most clearly split",
           model=loaded.title)

# %%
two = int(cosines.idxmin())
table = split[two].table
for cluster in (0, 1):
    members = table[table["cluster"] == cluster]["token"]
    print(wrapped_items(f"neuron {two}, cluster {cluster} ({len(members)} tokens):", members.head(12)))
if loaded.is_planted:
    print(wrapped(f"planted truth: {disc.planted_description(loaded.truth, two)} "
              f"(topics {disc.planted_topics(loaded.truth, two)})"))

# %% [markdown]
# The neuron with the most clearly separated clusters, and the first tokens of each cluster.
# Where the clusters are two recognisable topics, the neuron is an OR of two sub-latents and its
# top tokens alone would mislead. The clustering is deliberately simple: two clusters, the
# geometry of the extended embeddings only; a neuron with a single topic still gets split in
# two, which the centroid cosine then flags as weak. On the planted model the planted topics are
# printed beside it: a match there is by construction (the topics were planted as directions of
# the extended embeddings), not evidence that the method finds sub-latents in a real network.
#
# ## 5.6 The gallery
#
# Every carried neuron, best score first: its score, whether its extreme tokens push it up (+)
# or down (-), its top and bottom tokens, and its own domain from the weights (section 5.4). On
# the planted model, also what was planted there (planted truth) and the share of its 20 most
# extreme tokens that are label words of the planted topics (words of the topics' word lists
# that were held out of the planting; a topic-neuron can reach them only through the corpora's
# association, so the share need not be 1). The {ref}`neuron gallery <ch-neuron-gallery>` gives
# each neuron a section of its own, with its token table and its activations on the text where
# it departs most from its median.

# %%
from context_neurons.plotting.discovery import plot_gallery

summary = gallery.gallery_table(circuit, model, carried, scores, loaded.truth, k=5)
summary.insert(4, "own domain (weights)", [own.loc[j, "domain"] or "-" for j in summary.index])
show_table(summary, f"{disc.selection_note(carried, found)}, best score first",
           model=loaded.title, formats={"score": 1, "label-word share": 2})

# %%
eight = disc.token_tables(circuit, model, carried[:8], k=5, scores=scores)
figure = plot_gallery(
    eight,
    {j: float(scores.top[j]) for j in eight},
    k=5,
    columns=4,
    title=f"{loaded.title}: the eight best-scoring neurons",
)

# %% [markdown]
# *Figure 5.6: a preview of the gallery: the five top (red) and five bottom (blue) token
# contributions of the eight best-scoring neurons of the model named in the title.* A context
# neuron's bars name its topic on one side; a British-spelling neuron names two (British
# spellings on one side, American ones on the other). Every found neuron is on the
# {ref}`gallery page <ch-neuron-gallery>`.
#
# **Explore.** Pick any carried neuron and see the tokens that push it up and down most (a
# dropdown in a live notebook; the strongest neuron on the website).

# %%
from context_neurons.interactive import contribution_explorer, model_contributions_fn

contributions_fn = model_contributions_fn(model, lambda js: disc.contributions(circuit, model, js))
explorer = contribution_explorer(
    contributions_fn, carried, neuron=carried[0], model_title=loaded.title
)

# %% [markdown]
# *Figure 5.7: the explorer's view of the chosen neuron (the model is named in its title): its
# bottom tokens (left, largest negative contributions) and top tokens (right, largest positive
# contributions), as bars and as a table; as in Figure 5.6, red bars push the neuron up and blue
# bars push it down.* In a live notebook the dropdown switches neurons and the slider sets how
# many tokens are shown; on the website it shows the best-scoring neuron.
#
# ## 5.7 Exercises
#
# ````{exercise} Recompute a neuron's score by hand
# :label: ex-ch05-score
#
# *Difficulty: easy, 10 minutes.* Take the best-scoring neuron, compute its contributions over
# the scoring vocabulary (every token but `<|endoftext|>`), and rebuild its score $\mathrm{top}[j]$
# from the definition of section 5.2: the median, the MAD scaled by 1.4826, the robust
# z-scores, and the mean of the 20 largest $|z|$. Check it against `scores.top[j]`.
#
# ```python
# j = found[0]
# c = ...      # contributions of neuron j over the scoring vocabulary
# top_j = ...  # mean of the 20 largest robust |z|
# ```
# ````
#
# ```{solution-start} ex-ch05-score
# :class: dropdown
# ```
#
# `disc.contributions` with the scoring vocabulary's ids gives the contributions in one product;
# the rest is three reductions. PyTorch's `median` takes the lower of the two middle values,
# as the package does.

# %%
j = found[0]
vocabulary_ids = disc.scoring_vocabulary(model).nonzero().flatten()
c = disc.contributions(circuit, model, [j], vocabulary_ids)[0]
median = c.median()
mad_sd = 1.4826 * (c - median).abs().median()
top_j = ((c - median) / mad_sd).abs().topk(20).values.mean()
print(f"neuron {j}: by hand {float(top_j):.3f}, scores.top {float(scores.top[j]):.3f}")
assert abs(float(top_j) - float(scores.top[j])) <= 1e-4 * float(scores.top[j])
assert float(top_j) >= disc.THETA  # it was found, so its score passes the threshold
print("check passed: the score rebuilt from its definition equals the package's")

# %% [markdown]
# ```{solution-end}
# ```
#
# ````{exercise} Find the neuron that reads a domain's own vocabulary
# :label: ex-ch05-word-list
#
# *Difficulty: medium, 20 minutes.* Which found neuron reads astronomy? Do not take a word list
# (on the planted model a word list may be the very list that planted a neuron, and checking a
# neuron with the list that built it proves nothing): take the astronomy texts' own vocabulary.
# Count the tokens of the astronomy texts and of the other domains' texts of section 5.3
# (`casestudies.token_counts`), and keep the word tokens (a space and at least three letters)
# that occur at least 0.5 times per 1000 tokens in astronomy and at least ten times as often
# there as elsewhere. For every carried
# neuron compute the mean robust z-score of the contributions of those tokens. Which neuron
# responds most, and what are its top tokens? Check your z-scores for that neuron against a
# direct computation from its contributions over the whole scoring vocabulary.
#
# ```python
# ids = ...       # token ids over-represented in the astronomy texts
# mean_z = ...    # one number per carried neuron
# ```
#
# ```{hint}
# :class: dropdown
#
# `texts.indices("astronomy")` and `texts.others("astronomy")` pick the rows of
# `casestudies.token_counts(texts.windows, model.cfg.d_vocab)` to pool into the two rates. Each
# neuron's robust centre and scale are already in `scores.median` and `scores.spread`, so one call
# of `disc.contributions` with the carried neurons and your token ids gives every z-score.
# ```
# ````
#
# ```{solution-start} ex-ch05-word-list
# :class: dropdown
# ```
#
# The robust z-score needs each neuron's median and spread over the vocabulary, which
# `scores.median` and `scores.spread` already hold; `contributions` gives the chosen tokens'
# contributions for all carried neurons in one product. The direct computation takes the median
# and the MAD of the neuron's contributions over the vocabulary again, from scratch. On the
# planted model, compare the winner with the neurons planted on astronomy (printed): the texts'
# vocabulary is not the word list that planted them, so the neuron it drives most need not be one
# of them; a text's words carry several topics at once (British spelling, for one).

# %%
import re

counts = casestudies.token_counts(texts.windows, cfg.d_vocab)
inside = counts[texts.indices("astronomy")].sum(0)
outside = counts[texts.others("astronomy")].sum(0)
rate_in, rate_out = 1000 * inside / inside.sum(), 1000 * outside / outside.sum()
keep = (rate_in >= 0.5) & (rate_in >= 10 * rate_out) & scores.vocabulary.cpu()
candidates = keep.nonzero().flatten().tolist()
words = [t for t in candidates if re.fullmatch(r" [^\W\d_]{3,}", model.tokenizer.decode([t]))]
ids = sorted(words, key=lambda t: -float(rate_in[t]))  # most frequent first
assert ids, "no word token is over-represented in the astronomy texts"
c = disc.contributions(circuit, model, carried, ids)  # [carried neurons, tokens]
z = (c - scores.median[carried][:, None]) / scores.spread[carried][:, None]
mean_z = z.mean(dim=1)
best = carried[int(mean_z.argmax())]
table = disc.token_table(circuit, model, best, k=8, scores=scores)
examples = [disc.token_str(model, t) for t in ids[:12]]
print(wrapped_items(f"{len(ids)} astronomy tokens, e.g.", examples))
print(f"best neuron {best}, mean z = {float(mean_z.max()):.1f}")
print(wrapped_items("its top tokens:", list(table["top token"])))
if loaded.is_planted:
    what = disc.planted_description(loaded.truth, best)
    on_astronomy = sorted(
        j for j, plan in loaded.truth.context_neurons.items() if "astronomy" in plan.topics
    )
    print(wrapped(f"planted truth at {best}: {what}; planted on astronomy: {on_astronomy}"))
full = disc.contributions(circuit, model, [best], vocabulary_ids)[0]
full_median = full.median()
direct = (c[carried.index(best)] - full_median) / (1.4826 * (full - full_median).abs().median())
assert torch.allclose(direct, z[carried.index(best)], rtol=1e-3, atol=1e-3)
print(f"check passed: the {len(ids)} z-scores of neuron {best} match a direct computation")

# %% [markdown]
# ```{solution-end}
# ```
#
# ````{exercise} Predict, then measure: test neurons nobody studied
# :label: ex-ch05-predict
#
# *Difficulty: open-ended, 30 minutes.* Choose three carried neurons that are not among the
# case studies of section 5.4. For each, **before** looking at any activation, read its token
# table (`disc.token_table`) and write down which domain of `texts` should move it, and in which
# direction (up if the tokens behind its score push it up, down otherwise). Then measure: its
# mean true pre-activation on that domain's texts minus its mean on the other domains' texts,
# in units of its within-text standard deviation (`casestudies.domain_evidence`). **Criterion:**
# a prediction holds when the measured effect is at least 0.5 standard deviations
# (`casestudies.WEAK`) in the predicted direction. Count how many of your predictions hold, and
# for those that fail, look at the up-token densities: could these texts have shown it?
#
# ```python
# predictions = {...}  # neuron -> (domain, +1 or -1), written down before measuring
# measured = casestudies.domain_evidence(acts, [(j, d) for j, (d, _) in predictions.items()])
# ```
#
# ```{hint}
# :class: dropdown
#
# Take the direction from the side that dominates the neuron's score (`scores.sign`), not from its
# single largest token: a neuron that a domain's tokens push down should fall on that domain.
# Section 5.4's `casestudies.domain_from_weights` makes the same kind of prediction mechanically, a
# useful check once yours is written down; for a failure, read the up- and down-token densities in
# the table that `casestudies.domain_evidence` returns.
# ```
# ````
#
# ```{solution-start} ex-ch05-predict
# :class: dropdown
# ```
#
# A reader's prediction is a judgement; the solution makes it mechanically with the rule of
# section 5.4, `casestudies.domain_from_weights`, which reads only the weights and the texts'
# tokens (the driving tokens' side gives the direction), and takes the first three carried
# neurons outside the case studies that get a domain. It then measures, and recomputes the
# measurement from the raw activations (`acts.true`, positions from `acts.start` on) to check
# the table. Whether a prediction holds is the model's answer, not the solution's: the check
# asserts the arithmetic, and the last line reports the hits.

# %%
studied = {j for j, _ in cases}
candidates = [j for j in carried if j not in studied and own.loc[j, "domain"] is not None]
predictions = {
    j: (own.loc[j, "domain"], 1 if own.loc[j, "side"] == "up" else -1) for j in candidates[:3]
}
hits = 0
for j, (domain, direction) in predictions.items():
    row = casestudies.domain_evidence(acts, [(j, domain)]).iloc[0]
    col = acts.column(j)
    valid = acts.valid()
    text_means = (acts.true[..., col] * valid).sum(1) / valid.sum(1)
    by_hand = text_means[texts.indices(domain)].mean() - text_means[texts.others(domain)].mean()
    assert abs(float(by_hand) - row["excess"]) < 1e-4 * max(1.0, abs(row["excess"]))
    held = direction * row["excess / SD"] >= casestudies.WEAK
    hits += held
    print(
        wrapped(
            f"neuron {j}: predicted {domain} {'up' if direction > 0 else 'down'}; measured "
            f"{row['excess / SD']:+.2f} SD ({row['up-tokens /1000, domain']:.1f} up-tokens and "
            f"{row['down-tokens /1000, domain']:.1f} down-tokens per 1000 tokens there): "
            f"{'holds' if held else 'fails'}"
        )
    )
print(
    f"check passed: {len(predictions)} measurements recomputed; "
    f"{hits} of {len(predictions)} predictions hold"
)

# %% [markdown]
# ```{solution-end}
# ```
#
# ## Summary
#
# - A first-layer neuron's response to the contextual heads is a sum of fixed token
#   contributions, $e(t)\cdot w_j$, weighted by the kernel; all of them are one matrix product.
# - A robust score, the mean of the 20 largest robust $|z|$, separates the planted model's context
#   neurons from the bulk; $\theta = 6$ is in units of each neuron's own spread and sits well
#   above the Gaussian null for any vocabulary; the number found falls steeply through the bulk
#   and slowly along the tail, and the analyses carry at most the 200 highest-scoring found
#   neurons. What was shown, and where: the planted model's structure is written in the method's
#   terms, so recovering it checks the code; on a model nobody wrote (chapter 8) the score does
#   not rank the neurons its contextual heads move, while a frequency-aware score ranks them
#   above chance (chapter 8 gives both verdicts with their intervals).
# - The paper's case-study neurons are GPT-2's numbers (and the planted model's, by
#   construction); on other models they are chosen from the weights. Top and bottom tokens name
#   a neuron's context (British versus American spelling, war, religion, medicine, law, ...).
# - A neuron's own domain is chosen from its weights (the domain that uses its driving tokens
#   most), before its activations are looked at; activations on real text then test the reading,
#   and the test is only as strong as the texts are dense in the neuron's tokens: the circuit
#   predicts how much a domain should move the neuron, and where that is little, the texts
#   cannot confirm it.
# - A controlled experiment settles such cases: respelling American texts into British spelling
#   changes nothing but the spelling, and the difference of the pre-activations along the same
#   text shows the British-spelling neurons responding to each respelled word, or not.
# - Clustering the top tokens exposes neurons that read two topics; the
#   {ref}`gallery <ch-neuron-gallery>` shows every neuron found.
#
# **Next:** {ref}`ch-evaluation` measures how well the circuit predicts these neurons'
# activations text by text, the paper's median Pearson correlation of 0.9485.
