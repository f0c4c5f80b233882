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
# (ch-lookups)=
# # 7. Context look-ups: the method of Neo, Cohen and Barez (2024, Figure 2)
#
# Gibson's context neurons sit in the first MLP layer and read a context assembled by the
# first-layer attention heads. Neo, Cohen and Barez (2024), *Interpreting Context Look-ups in
# Transformers*, look at the same partnership further up the network: a **token-predicting
# neuron** in a later MLP layer, whose output weights promote one token, and the **attention
# heads** that switch it on when the context calls for that token. Their method has four steps,
# and this chapter runs all of them on the model of this page:
#
# 1. find neurons whose output, read through the unembedding, predicts one token;
# 2. find prompts that activate such a neuron, and truncate them to the shortest suffix that keeps
#    80% of the activation;
# 3. find the upstream heads responsible, by attributing the neuron's pre-activation to each head;
# 4. explain when each head is active, and score the explanation by using it as a zero-shot
#    classifier on held-out prompts.
#
# These are the five boxes of the paper's Figure 2 (steps 4 and 5 there are our step 4). Along the
# way we redraw three of its figures on this page's model: Figure 7.1 is the score distribution
# behind their Figure 3, Figure 7.2 a truncation as in their Figure 4, and Figure 7.6 the
# explanation scores of their Figure 5, for four heads instead of thousands.
#
# The paper used GPT-4 for step 4. Here an **offline explainer** (contrastive word statistics)
# writes the stored explanations, and an LLM explainer behind the same interface is used only
# if you configure one.
#
# ```{admonition} Learning objectives
# :class: tip
# After this chapter you can
# - score every MLP neuron by how strongly it predicts one token, handling the final LayerNorm
#   explicitly;
# - find and truncate the prompts that activate a neuron, checking every cut with the model;
# - split a neuron's pre-activation *exactly* into one term per upstream head plus the parts you
#   did not attribute, and check the attribution against ablation;
# - write an explanation of when a head is active and measure it as a classifier against the
#   right chance level.
# ```
#
# **Prerequisites:** {ref}`ch-decomposition` (LayerNorm, TransformerLens hooks) and, for the
# comparison at the end, the contextual circuit of the earlier chapters. The symbols are on the
# {ref}`notation` page.

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
# ## 7.1 Token-predicting neurons
#
# Neuron $j$ of MLP layer $l$ adds $a_j\, W_{out}[l][j]$ to the residual stream, where $a_j$ is
# its activation. Its **direct effect** on the logits goes through the final LayerNorm and the
# unembedding. TransformerLens loads the model with `fold_ln=True`: the final LayerNorm's weight
# (and bias) are folded into $W_U$ (and $b_U$), and what remains is a bare normalisation
# $x \mapsto (x - \bar x)/s(x)$. That normalisation is not linear, so we **linearise** it: we
# freeze the scale $s$ at its typical value on real text (the median over the positions of the
# calibration text) and write the logit effect of one unit of activation as
#
# $$
# \ell_j = \frac{\big(W_{out}[l][j] - \overline{W_{out}[l][j]}\big)\, W_U}{s}
# \quad \in \mathbb{R}^{d_{vocab}} .
# $$
#
# (If the final LayerNorm were not folded, its weight would multiply $W_{out}[l][j]$
# elementwise before $W_U$; `neuron_logit_effect` handles both.) A neuron **predicts a token**
# when one entry of $\ell_j$ stands out from the rest. We score it by
# $(\max \ell_j - \mathrm{mean}\, \ell_j)/\mathrm{std}\, \ell_j$ over the vocabulary. That
# score does not depend on the frozen scale $s$; the scale only gives the `logit` column its
# units (logit change per unit of activation). We also report the `gap` between the first and
# second token, in the same standard deviations.
#
# Which layers? The paper found the best neuron of each token mostly in the last layers and kept
# only those (the last five of GPT-2 Large's 36 layers, right of the dotted line in its Figure 3).
# We score the **later half** of the layers by default (`n_last_layers`, see `lk.later_layers`):
# the last layer of the two-layer planted model, layers 6 to 11 of GPT-2 Small. Pass
# `n_last_layers=...` or an explicit `layers=[...]` to choose otherwise.

# %%
import pandas as pd

from context_neurons import config, lookups as lk
from context_neurons.printing import show_table, wrapped

final_scale = lk.typical_final_scale(model)
print(f"typical final LayerNorm scale on the calibration text: {final_scale:.2f}")
N_LAST = 2 if config.reduced_scale() else None  # reduced (CI's online run): the last two layers only
scored_layers = lk.later_layers(model, N_LAST)
print(f"scoring {'the last two' if N_LAST else 'the later half of the'} layers: "
      f"{scored_layers} of 0..{model.cfg.n_layers - 1}")
scores = lk.token_prediction_scores(model, layers=scored_layers, final_scale=final_scale)
print(f"scored {len(scores)} neurons in layers {scores.layer.min()}..{scores.layer.max()}")

best = lk.best_neurons(scores, per_layer=5)
shown = best.assign(token=best.token.map(repr), runner_up=best.runner_up.map(repr))
columns = ["layer", "neuron", "token", "score", "gap", "logit", "runner_up"]
show_table(
    shown[columns],
    "the five best token-predicting neurons of each scored layer (score and gap in standard "
    "deviations over the vocabulary, logit per unit of activation)",
    model=loaded.title, decimals=2, index=False,
)

# %% [markdown]
# For each token, the neuron that predicts it best is the population the paper plotted in its
# Figure 3. We keep the four highest-scoring neurons that predict different tokens.

# %%
from context_neurons.plotting.lookups import plot_token_scores

chosen = lk.select_neurons(scores, n=4)
per_token = lk.best_neuron_per_token(scores)
print(f"{len(per_token)} distinct tokens are some neuron's top token")
print(wrapped(f"examined neurons (layer, neuron): {chosen}"))
figure = plot_token_scores(
    scores, marked=chosen, title=f"Figure 7.1. {loaded.title}: token-prediction scores"
)

# %% [markdown]
# *Figure 7.1: token-prediction scores of all scored neurons (log scale), by layer; the four
# examined neurons are labelled with the token they promote.* A random output weight read
# through a 50,257-token unembedding already has a maximum a few standard deviations above the
# mean: the bulk of the histogram is that baseline. Token-predicting neurons are the ones far to
# its right.

# %%
if loaded.is_planted:
    for finding in lk.selection_against_plan(chosen, scores, loaded.truth):
        print(wrapped(finding))
else:
    print("GPT-2: compare the examined neurons with the paper's examples (Appendix A).")

# %% [markdown]
# On the planted model the four planted look-up neurons stand far above the rest, and each
# predicts the token it was built to predict. On GPT-2 we expect (not measured here) a long tail
# instead of four isolated points, and which neurons come first depends on the score: the paper's Figure 3
# looks at the best neuron *per token*, which you can read off `per_token`.
#
# ## 7.2 Prompts that activate a neuron
#
# Next we need text on which these neurons fire. We build a **prompt pool** from the domain
# texts of `context_neurons.text.corpora.domain_documents`: the opening 64 tokens of up to 48
# documents of each domain (general prose, encyclopedic, British and American English, Bible, Spanish,
# medical, legal, astronomy, war, Pokémon, and Python code), alternating between a domain's
# corpora, each window starting with `<|endoftext|>`. (Without the offline corpora, in Colab say,
# each domain's documents are the OpenWebText documents densest in its keywords, and the labels
# say so.) One batched forward pass per layer
# reads the pre-activations (hook `blocks.{l}.mlp.hook_pre`) of all examined neurons at every
# position, and the same pass stores what the attribution of section 7.3 needs. The forward
# pass stops at that hook: nothing later is computed.

# %%
PER_DOMAIN = 12 if config.reduced_scale() else 48  # documents per domain (reduced: CI's online run)
windows, labels = lk.lookup_windows(model.tokenizer, per_domain=PER_DOMAIN)
windows = [w.to(model.cfg.device) for w in windows]
domains = sorted({label.split("|")[0] for label in labels})
print(f"{len(windows)} windows of {len(windows[0]) - 1} tokens from {len(domains)} domains")
pool = lk.scan_pool(model, windows, labels, chosen)

# %%
layer, neuron = chosen[0]
top = lk.top_activating_prompts(
    model, windows, layer, neuron, k=6, labels=labels, acts=pool.attributions[(layer, neuron)].pre
)
show_table(
    lk.prompts_table(top, model.tokenizer), f"most activating prompts of neuron {layer}.{neuron}",
    model=loaded.title, decimals=2, index=False,
)

# %% [markdown]
# Each prompt ends at the token where its window activates the neuron most (one prompt per
# window, so they are not near-copies of each other). The source labels already hint at the
# context: on the planted model they come mostly from one domain.
#
# A prompt carries more text than the neuron needs. The paper **truncates** it to the shortest
# suffix that keeps at least 80% of the activation at the same final token. We check every
# candidate suffix with the model (shortest first, eight at a time, stopping at the first that
# keeps enough), always with `<|endoftext|>` in front, as the windows have. Truncating the six
# prompts above:

# %%
from context_neurons.plotting.lookups import plot_truncation

cuts = [lk.truncate_prompt(model, p, layer, neuron) for p in top]
for cut in cuts:
    assert cut.activation >= 0.8 * cut.full_activation
show_table(
    lk.truncation_table(cuts, model.tokenizer),
    f"the six prompts of neuron {layer}.{neuron} truncated to the shortest suffix that keeps "
    "80% of the activation",
    model=loaded.title, decimals=2, index=False,
)

# %% [markdown]
# A prompt whose last token is itself a word of the context keeps only that token: the neuron
# needs no more. The figure shows the prompt whose truncation kept the most text, where the
# context really is spread over the prompt.

# %%
longest = max(range(len(cuts)), key=lambda i: len(cuts[i].tokens))  # first of the longest
prompt, truncated = top[longest], cuts[longest]
suffixes = lk.suffix_activations(model, prompt.tokens, layer, neuron)
print(f"full prompt: {len(prompt.tokens) - 1} tokens, activation {truncated.full_activation:.2f}")
print(f"truncated:   {len(truncated.tokens) - 1} tokens, activation {truncated.activation:.2f}")
print(wrapped(f"kept text: {truncated.text(model.tokenizer)!r}"))
figure = plot_truncation(
    suffixes,
    truncated.full_activation,
    len(truncated.tokens) - 1,
    title=f"Figure 7.2. {loaded.title}: neuron {layer}.{neuron}, {prompt.source}",
    start_token=model.tokenizer.decode([int(truncated.tokens[1])]),
)

# %% [markdown]
# *Figure 7.2: the neuron's pre-activation at the prompt's final token for every suffix length,
# the 80% line, and the kept length with the kept suffix's first token.* Read it from the left:
# each step to the right puts one more token of context in front of the same final token.
# Truncation keeps the *shortest* suffix above the red line, checked with the model. A curve
# that jumps marks the token the neuron was waiting for; on the planted model that is often a word
# of the look-up head's topic, which can sit dozens of tokens back.
#
# ## 7.3 Which heads switch the neuron on?
#
# ### Direct attribution through LayerNorm
#
# The neuron's pre-activation is computed from the residual stream $x$ entering its MLP,
# $\mathrm{pre}_j = \mathrm{LN}_2(x) \cdot W_{in}[:, j] + b_{in}[j]$, with
# $\mathrm{LN}_2(x) = \gamma \odot (x - \bar x)/s + \beta$. At a given position we read the
# **actual** scale $s$ (hook `blocks.{l}.ln2.hook_scale`); with $s$ known, the pre-activation is
# linear in $x$. The residual stream is a sum of components $c$ (the token and position
# embeddings, each head's output $z_h W_O^h$, each earlier MLP's output, the attention output
# biases), so
#
# $$
# \mathrm{pre}_j = \sum_c \frac{(c - \bar c) \cdot (\gamma \odot W_{in}[:, j])}{s}
# + \beta \cdot W_{in}[:, j] + b_{in}[j] .
# $$
#
# The term of head $h$ is its **direct attribution**. We attribute to heads only; the embeddings,
# the MLP outputs and the biases are the parts excluded. Because the scale is the actual one,
# the parts add up to the pre-activation **exactly**, which we check on the whole pool:

# %%
for key, attribution in pool.attributions.items():
    error = (attribution.total() - attribution.pre).abs().max()
    assert error < 1e-4 * max(1.0, float(attribution.pre.abs().max())), (key, error)
print(wrapped(
    f"heads + embeddings + MLP outputs + biases = hook_pre, to float precision, for "
    f"{len(pool.attributions)} neurons at {sum(len(w) for w in windows)} positions"
))

# %% [markdown]
# Now the four steps for every examined neuron: the ten most activating prompts, truncated; the
# attribution of their final-token pre-activation to every head of layers $0..l$; a
# **mean-ablation** check (replace one head's `hook_z` by its mean over the pool and measure the
# drop in pre-activation); and the explanation of section 7.4.

# %%
lookups = [lk.examine_neuron(model, layer, neuron, pool, scores=scores) for layer, neuron in chosen]
show_table(
    lk.top_heads_table(lookups),
    "the top heads of each examined neuron (layer.neuron and its token), over its ten "
    "truncated prompts",
    model=loaded.title, decimals=2, index=False,  # fixed decimals: no "-0.00"
)

# %% [markdown]
# `prompt length` is the mean length of the truncated prompts in tokens; `head 1..3` are the heads
# with the largest mean attribution over them; `attribution 1` is the first one's mean,
# `ablation drop 1` the mean drop when it is mean-ablated, and `attribution 2` the runner-up's
# mean, for scale.

# %%
from context_neurons.plotting.lookups import plot_head_attribution

figure = plot_head_attribution(
    lookups, title=f"Figure 7.3. {loaded.title}: direct attribution of upstream heads"
)

# %% [markdown]
# *Figure 7.3: mean direct attribution of every upstream head (rows: layer, columns: head) to each
# examined neuron, over its ten truncated prompts; the box marks the top head.* A context look-up
# shows as one bright cell: a single head carries the drive. On the planted model that is what
# was built for three of the four look-ups; the fourth, the war look-up, was built hard: a second
# head carries part of its drive and its neuron also reads a layer-0 neuron (see the appendix).
# On GPT-2 the drive can also be shared by several heads, and this figure shows which case each
# neuron is in.

# %%
from context_neurons.plotting.lookups import plot_attribution_vs_ablation

figure = plot_attribution_vs_ablation(
    lookups, title=f"Figure 7.4. {loaded.title}: attribution against mean-ablation"
)

# %% [markdown]
# *Figure 7.4: direct attribution against the drop in pre-activation when the head is
# mean-ablated, for every (prompt, head) pair of the four neurons, coloured by the head's
# layer.* Points near the diagonal are heads whose effect is direct. The two measures differ in
# two ways: ablation replaces the head's output by its *mean* rather than by zero (so the drop is
# smaller by the head's average contribution), and it lets the change flow through everything
# between the head and the neuron (later heads and MLPs, and the LayerNorm scale), whereas the
# attribution counts the direct path only. A head of an early layer can have a
# small direct attribution and a large ablation drop: that is an indirect effect, which the
# attribution alone would miss.
#
# How much of the pre-activation do the heads explain? Averaging the parts at the prompts' final
# tokens:

# %%
parts = pd.DataFrame(
    {
        f"{lookup.layer}.{lookup.neuron} {lookup.token!r}": lookup.contributions()
        for lookup in lookups
    }
).T
show_table(
    parts,
    "mean parts of each neuron's pre-activation at the final tokens of its truncated prompts",
    model=loaded.title, decimals=2,
)

# %% [markdown]
# The first five columns add up to the last. On the planted model the look-up neurons were built
# with a bias of $-2$: the `biases` column is negative, and for three of them the top head
# supplies the drive that makes the neuron fire. The hard war look-up is different by
# construction: other heads and the layer-0 MLP outputs (its neuron also reads a layer-0 war
# neuron) carry much of its drive, and this table is where that shows.
#
# What does the top head look at? Its attention from the final token of the first truncated
# prompt:

# %%
lookup = lookups[0]
head_layer, head, _ = lookup.top_heads[0]
first = lookup.prompts[0]
print(wrapped(f"{lk.head_name(head_layer, head)} on {first.text(model.tokenizer)!r}"))
attended = lk.attended_tokens(model, first.tokens, head_layer, head, k=5)
show_table(
    pd.DataFrame(
        [(position, repr(token), weight) for position, token, weight in attended],
        columns=["position", "token", "weight"],
    ),
    f"the five largest attention weights of {lk.head_name(head_layer, head)} from the final "
    "token of that prompt",
    model=loaded.title, decimals=2, index=False,
)

# %% [markdown]
# ## 7.4 When is a head active? Explanations as classifiers
#
# To explain a head we need prompts where it is active and prompts where it is not. We cut every
# window of the pool at every eighth token and call a prompt **active** for a head when the head's
# direct attribution to the neuron at the prompt's last token is at least a quarter of its mean
# attribution over the neuron's ten most activating *training* prompts.
#
# **The split.** Prompts are split by **document**: a document (corpus and id, e.g.
# `bible_kjv:Genesis 14`) is held out when the SHA-256 hash of its name, read as a number in
# $[0, 1)$, is below one half (`lk.is_held_out`). All prompts of a document land on the same
# side, so held-out prompts never share text with training prompts; a domain's documents, and
# those of each corpus of a two-corpus domain, fall on both sides (counted below); and the split
# of a document does not depend on what else is in the pool. (The two English Bibles are
# different documents: the same chapter in the King James and in the World English Bible can
# fall on different sides.)
# The explainer sees the training half only, and the threshold above is computed from it too.

# %%
activity = lookups[0].activity
for finding in activity.split_findings():
    print(wrapped(finding))

# %%
from context_neurons.plotting.lookups import plot_head_activity

figure = plot_head_activity(
    [lookup.activity for lookup in lookups],
    names=[repr(lookup.token) for lookup in lookups],
    title=f"Figure 7.5. {loaded.title}: top head's attribution over the pool",
)

# %% [markdown]
# *Figure 7.5: the top head's attribution over all prompts of the pool (log scale), with the
# "active" threshold in red, for each neuron.* Most prompts are far below the threshold, so a
# classifier that always says "inactive" is already right most of the time: the fraction in each
# title is the base rate, and **chance** below is the accuracy of that majority guess. We also
# report the **balanced accuracy** (the mean of the accuracies on active and on inactive prompts),
# whose chance level is 0.5 whatever the base rate.
#
# **The offline explainer.** From the training prompts it computes, for every word (a token
# stripped, lower-cased and singularised, so `' War'` and `' wars'` count as one), the log-odds
# ratio of appearing in an active prompt rather than an inactive one. Words present in at least
# two documents' active prompts are candidates; it then adds words greedily, each time the one
# that most increases the training accuracy of the rule *"active when the prompt contains one
# of these words"*, and stops when no word helps. The explanation is that list; the classifier
# applies the rule literally to held-out prompts, which makes it a zero-shot classifier in the
# paper's sense: it reads nothing but the explanation.

# %%
odds = lk.word_odds(activity, model.tokenizer, k=10)  # the offline explainer's statistics
if odds.table is not None:  # a contrast to explain
    show_table(
        odds.table,
        f"{odds.summary}; the ten words with the largest log-odds ratio (active with, inactive "
        "with: the active and inactive training prompts that contain the word)",
        model=loaded.title, decimals=2, index=False,
    )
else:  # every prompt active, or none: nothing separates them, so there is nothing to explain
    print(f"{odds.summary}: no contrast, so no word list (the explainer needs both kinds)")

# %% [markdown]
# The top of this list mixes words that trigger the head with words that merely share documents
# with them; greedy covering keeps one word for each group of prompts it explains. The held-out
# evaluation of all four explanations:

# %%
from context_neurons.plotting.lookups import plot_explanation_scores

results = lk.explanation_results(lookups)
show_table(
    results.drop(columns="name").rename(columns={"balanced_accuracy": "balanced accuracy"}),
    "explanations of each neuron's top head, scored as classifiers on the held-out prompts "
    "(active: the base rate; chance: the accuracy of the majority guess)",
    model=loaded.title, decimals=3, index=False,
)
figure = plot_explanation_scores(
    results, title=f"Figure 7.6. {loaded.title}: explanation scores on held-out prompts"
)

# %% [markdown]
# *Figure 7.6: held-out accuracy (blue) against the majority-class chance level (black ticks),
# and balanced accuracy (orange) against 0.5, for the four explanations.* An explanation is
# useful when it beats both chance levels. The offline explainer can only name words it has seen
# in the training half: a held-out prompt that activates the head through a word it never saw is
# a miss. This is what an LLM explainer, like the paper's GPT-4, adds: it can generalise from
# *"war words"* to words it was not shown.
#
# **The LLM explainer.** `context_neurons.lookups.explainers.LLMExplainer` sends the same active and
# inactive prompts (as text) to an OpenAI-compatible chat-completions endpoint, then asks it to
# label held-out prompts from the explanation alone. It uses only the standard library and is
# enabled only by environment variables (section 7.7 lists them). Its explanation request shows
# it up to 20 active and 20 inactive training prompts, sampled round-robin over domains and
# documents so that they are not the first few documents of the pool, each clipped to its last
# 64 words. Without a key it is never constructed and no network connection is attempted (a unit
# test enforces this); a key with a wrong base URL, model name or network raises an error that
# names the variable to check.

# %%
# NBVAL_IGNORE_OUTPUT
# (the output depends on whether the reader configured an LLM.)
from context_neurons.lookups.explainers import ExplainerError, LLMExplainer

llm = LLMExplainer.from_env()
if llm is None:
    print(wrapped("No CONTEXT_NEURONS_LLM_API_KEY set: skipping the LLM explainer "
                  "(offline results above)."))
else:
    n_calls = llm.n_requests(lookups[0].evaluation.n_test)
    print(wrapped(f"LLM explainer {llm.model} at {llm.base_url}: {n_calls} requests for one head"))
    try:
        llm_result = lk.evaluate_explainer(llm, lookups[0].activity, model.tokenizer)
    except ExplainerError as err:
        print(wrapped(f"The LLM explainer failed: {err}"))
    else:
        print(wrapped(llm_result.explanation.text))
        print(wrapped(
            f"accuracy {llm_result.accuracy:.3f} (chance {llm_result.chance:.3f}), "
            f"balanced accuracy {llm_result.balanced_accuracy:.3f}"
        ))

# %% [markdown]
# ## 7.5 Does the method recover what was planted?
#
# On the planted model we know the answer: four look-ups, each a layer-1 head that attends to the
# words of one topic and a neuron that predicts one token. A look-up counts as recovered when the
# neuron is among the examined ones with the planted token, its top head is the planted head, and
# the head's explanation beats both chance levels on held-out prompts (a test on activations, not
# on a word list). Whether the explanation *names* the topic is measured apart, against the
# **label half** of the topic's word list, the half that never planted anything
# ({ref}`appendix-planted`): `words in topic` counts its words there, and `topic share` is the
# fraction of the held-out active prompts the explanation detects that its label-half words
# detect (`lk.topic_share`). Reading the explanation against the planting half would read back
# what was built.

# %%
if loaded.is_planted:
    recovery = lk.planted_recovery(lookups, loaded.truth, model.tokenizer)
    show_table(
        recovery.table,
        "each planted look-up against what the method found (recovered: the planted token, the "
        "planted head on top and an explanation that beats chance, all three)",
        model=loaded.title, decimals=2, index=False,
    )
    print(recovery.finding())
else:
    print("GPT-2 has no planted truth: compare with the paper's case studies instead.")

# %% [markdown]
# On the planted model the last line says how many planted look-ups were recovered end to end:
# the token-prediction score finds the neuron and its token, the attribution names the planted
# head (with the ablation drop agreeing, Figure 7.4), and the explanation beats chance on
# held-out prompts. The label-half columns say how far the explanation names the topic in words
# that were never planted: an explanation full of planting words (`god` for religion, `de` for
# Spanish) counts nothing there, and words outside any list are real correlates in the training
# documents (a title, a name, a word fragment of the same language) that a word-level explainer
# cannot tell apart from triggers without more varied data. A low `topic share` says the label
# words detect few of the prompts the explanation detects. The hard war look-up, whose head also
# attends to 21st-century words and shares its drive with a second head, is where a word-level
# explanation does worst; an LLM explainer could do better.
#
# ## 7.6 Look-ups and Gibson's layer-0 context circuit
#
# Both papers describe the same division of labour between attention and MLPs. In Gibson's
# circuit, six layer-0 heads with slowly decaying positional kernels average a bag of recent
# tokens, and a layer-0 neuron reads a *context* from that bag: a detector of topics, languages,
# spelling conventions. A context look-up moves the same pattern to the output side: a head
# collects evidence for a context, and a neuron turns it into a *prediction* of one token. On the
# planted model the two mechanisms are built side by side: the layer-0 contextual heads write a
# bag of topics that the layer-0 context neurons read, while the layer-1 look-up heads attend to
# topic words themselves (over about 200 tokens) and drive the token-predicting neurons. The
# `MLP outputs` column of the contribution table measures how much a look-up neuron reads from
# the earlier MLPs, context neurons included: on the planted model nothing was planted there. On
# GPT-2, running this chapter on a neuron of the last layers and splitting that column by
# neuron (the attribution keeps one term per MLP layer in `NeuronAttribution.mlp`) is the way to
# ask whether a layer-0 context neuron feeds a late token-predicting neuron.
#
# ## 7.7 Running at scale on GPT-2
#
# Set `CONTEXT_NEURONS_MODEL=gpt2` and rerun this page: every cell is the same. Four knobs
# matter for a real study:
#
# - **Which layers.** `token_prediction_scores(model, n_last_layers=...)`: the default later half
#   is 6 of GPT-2 Small's 12 layers; the paper's choice for GPT-2 Large was the last five of 36.
# - **More and longer prompts.** `lookup_windows(tokenizer, per_domain=..., n_tokens=...)` for
#   the domain texts (online without the corpora, keyword-selected OpenWebText documents), or
#   `document_windows(tokenizer, openwebtext_documents(10_000), n_tokens=256)` for a plain web
#   sample, as the paper used.
# - **More neurons.** `select_neurons(scores, n=...)`, or the best neuron of each token from
#   `best_neuron_per_token(scores)`. `scan_pool` runs one forward pass per layer for all neurons
#   of that layer.
# - **A GPU.** `setup_chapter` picks CUDA when available; the attribution keeps only
#   `hook_z` of the layers below the neuron and one number per head, position and neuron.
#
# The command-line reproduction, `python -m context_neurons reproduce --model gpt2`, runs the
# same steps for the four best neurons and reports them in the row `lookups`.
#
# ```python
# from context_neurons.text.corpora import openwebtext_documents
# windows, labels = lk.document_windows(model.tokenizer, openwebtext_documents(5000), n_tokens=128)
# pool = lk.scan_pool(model, [w.to(model.cfg.device) for w in windows], labels, chosen)
# lookups = [lk.examine_neuron(model, l, n, pool, scores=scores) for l, n in chosen]
# ```
#
# **An LLM explainer costs money.** It is configured by three environment variables, read when
# `LLMExplainer.from_env()` or `get_explainer("auto")` runs:
#
# - `CONTEXT_NEURONS_LLM_API_KEY`: the API key. Setting it enables the LLM explainer; unset,
#   the offline explainer is used and nothing touches the network.
# - `CONTEXT_NEURONS_LLM_BASE_URL`: the root of an OpenAI-compatible API, ending in `/v1`
#   (default `https://api.openai.com/v1`; a local server such as `http://localhost:8000/v1`
#   works too).
# - `CONTEXT_NEURONS_LLM_MODEL`: the chat model's name (default `gpt-4o-mini`).
#
# Explaining one head is one request; classifying its held-out prompts is one request per 20
# prompts. For this page's pool:

# %%
n_test = lookups[0].evaluation.n_test
costing = LLMExplainer(api_key="(counting only: no request is sent)")
words = sum(
    min(len(p.text(model.tokenizer).split()), costing.max_words_per_example)
    for p in lookups[0].activity.split(train=False)[0]
)
print(wrapped(
    f"{n_test} held-out prompts per head: {costing.n_requests(n_test)} requests per neuron "
    f"({costing.n_requests(n_test) * len(lookups)} for the {len(lookups)} neurons), "
    f"about {words:,} words of prompts sent per neuron"
))

# %% [markdown]
# A study of thousands of heads, as in the paper, multiplies that accordingly: subsample the
# held-out prompts (`HeadActivity.split`) or raise `LLMExplainer.batch_size` before you start.
#
# ## 7.8 Exercises
#
# ````{exercise} Attribute a pre-activation by hand
# :label: ex-ch07-attribution
#
# *Difficulty: medium, 20 minutes.* Take the first truncated prompt of the first examined neuron
# (`lookups[0].prompts[0]`). Using only `model.run_with_cache`, the weights `model.W_O` and
# `model.W_in`, and the hooks `blocks.{l}.attn.hook_z` and `blocks.{l}.ln2.hook_scale`, compute
# the direct attribution of the top head to the neuron at the prompt's final token, and check it
# against `lookups[0].head_attribution[0]`. Then add the embeddings, the MLP outputs and the
# biases and check that you recover `blocks.{l}.mlp.hook_pre`. (On this model's processed
# weights, `ln2` has no affine part: TransformerLens folded it into `W_in` and `b_in`.)
#
# ```python
# head_term = ...  # (z_h @ W_O[h] - mean) . W_in[:, j] / scale
# ```
#
# ```{hint}
# :class: dropdown
#
# LN2 subtracts the mean of its input before dividing by `ln2.hook_scale`, so centre the read-out
# vector `model.W_in[layer][:, neuron]` once and dot every part with it; `lookups[0].top_heads[0]`
# gives the top head's layer and index. For the full sum, remember that the neuron reads the
# attention output of its own block (bias $b_O$ included) but only the MLP outputs of earlier
# blocks.
# ```
# ````
#
# ```{solution-start} ex-ch07-attribution
# :class: dropdown
# ```
#
# Centre the head's output (or, equivalently, the read-out vector $W_{in}[:, j]$), dot it with
# $W_{in}[:, j]$ and divide by the actual LN2 scale at that position. The remaining terms are
# the embeddings, the earlier MLP outputs and the biases $b_O$ (each centred, dotted and divided
# the same way), plus $b_{in}[j]$. The code checks both sums against the package and the hook.

# %%
import torch

lookup = lookups[0]
layer, neuron = lookup.layer, lookup.neuron
head_layer, head, _ = lookup.top_heads[0]
tokens = lookup.prompts[0].tokens[None].to(model.cfg.device)
_, cache = model.run_with_cache(tokens, stop_at_layer=layer + 1)
scale = cache[f"blocks.{layer}.ln2.hook_scale"][0, -1, 0]
read = model.W_in[layer][:, neuron] - model.W_in[layer][:, neuron].mean()

z = cache[f"blocks.{head_layer}.attn.hook_z"][0, -1, head]
head_term = float((z @ model.W_O[head_layer, head]) @ read / scale)
expected = float(lookup.head_attribution[0, head_layer, head])
assert abs(head_term - expected) < 1e-3 * max(1.0, abs(expected)), (head_term, expected)

resid = cache["hook_embed"][0, -1] + cache["hook_pos_embed"][0, -1]
for l in range(layer + 1):
    resid = resid + model.blocks[l].attn.b_O
    resid = resid + torch.einsum("he,hed->d", cache[f"blocks.{l}.attn.hook_z"][0, -1], model.W_O[l])
for l in range(layer):
    resid = resid + cache[f"blocks.{l}.hook_mlp_out"][0, -1]
pre = float(resid @ read / scale + model.b_in[layer][neuron])
hooked = float(cache[f"blocks.{layer}.mlp.hook_pre"][0, -1, neuron])
assert abs(pre - hooked) < 1e-3 * max(1.0, abs(hooked)), (pre, hooked)
print("check passed: the hand-made head term matches the package's,")
print("  and the sum of all parts matches the hook")

# %% [markdown]
# ```{solution-end}
# ```
#
# ````{exercise} Check the frozen-scale logit effect with a hook
# :label: ex-ch07-logit-effect
#
# *Difficulty: medium, 15 minutes.* Section 7.1 linearised the final LayerNorm by freezing its
# scale. Test that claim on the first truncated prompt of the first examined neuron: add
# `delta = 1.0` times the neuron's output weight `model.W_out[layer][neuron]` to the residual
# stream after the last block (hook `blocks.{n_layers - 1}.hook_resid_post`), once with the
# final LayerNorm's scale (`ln_final.hook_scale`) frozen at its clean value and once without.
# With the scale frozen, the change of the last position's logits should equal
# `delta * lk.neuron_logit_effect(model, layer, neuron, final_scale=s)`, where `s` is that clean
# scale, up to float rounding. How far off is the unfrozen change?
#
# ```python
# predicted = ...  # delta * neuron_logit_effect(...) at the clean scale
# frozen_change = ...  # logits with the hook and the frozen scale, minus the clean logits
# ```
#
# ```{hint}
# :class: dropdown
#
# `model.run_with_hooks(tokens, fwd_hooks=[(name, function), ...])` calls each function with the
# activation and uses what it returns instead: one function adds `delta` times the output weight
# at the last block's `hook_resid_post`, another returns the clean scale read beforehand with
# `model.run_with_cache`. Compare the logits of the last position only.
# ```
# ````
#
# ```{solution-start} ex-ch07-logit-effect
# :class: dropdown
# ```
#
# Adding $\delta\, W_{out}[l][j]$ after the last block is the neuron's *direct* path only (later
# layers never see it). With the scale frozen, the final LayerNorm is affine in its input, so the
# logits move by exactly $\delta\,(W_{out}[l][j] - \text{mean})\,\gamma\, W_U / s$, the formula of
# section 7.1. Without freezing, the scale changes too and divides every logit, not only the
# neuron's contribution: the printed relative error is the price of the linearisation for one
# unit of activation. Both computations hold on any model with a final LayerNorm.

# %%
delta = 1.0
last = f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"
tokens = lookups[0].prompts[0].tokens[None].to(model.cfg.device)
clean, cache = model.run_with_cache(tokens, names_filter="ln_final.hook_scale")
clean_scale = cache["ln_final.hook_scale"]
direction = model.W_out[lookups[0].layer][lookups[0].neuron]


def add_output(resid, hook):
    return resid + delta * direction


frozen = model.run_with_hooks(
    tokens,
    fwd_hooks=[(last, add_output), ("ln_final.hook_scale", lambda scale, hook: clean_scale)],
)
unfrozen = model.run_with_hooks(tokens, fwd_hooks=[(last, add_output)])
s = float(clean_scale[0, -1, 0])
effect = lk.neuron_logit_effect(model, lookups[0].layer, lookups[0].neuron, final_scale=s)
predicted = delta * effect
frozen_change = frozen[0, -1] - clean[0, -1]
error = float((frozen_change - predicted).abs().max() / predicted.abs().max())
assert error < 1e-3, error
unfrozen_error = float((unfrozen[0, -1] - clean[0, -1] - predicted).norm() / predicted.norm())
print("check passed: with the scale frozen, logit change = delta * logit effect")
print(wrapped(
    f"(to 0.1% of its largest entry); unfrozen, the linearisation is off by {unfrozen_error:.0%}"
))

# %% [markdown]
# ```{solution-end}
# ```
#
# %% [markdown]
# ## Summary
#
# - A **token-predicting neuron** is one whose output weight, read through the (linearised)
#   final LayerNorm and the unembedding, promotes one token far above the rest; scoring every
#   neuron takes one matrix product per layer.
# - Its most activating prompts, **truncated** to the shortest suffix keeping 80% of the
#   activation, show the context it responds to.
# - With LN2's actual scale, the pre-activation splits **exactly** into one term per upstream head
#   plus embeddings, MLP outputs and biases; ablation confirms the direct attribution for heads
#   whose effect is direct.
# - An explanation of when a head is active is scored as a **zero-shot classifier** on held-out
#   prompts; with rare activity, compare with the majority-class chance and with balanced
#   accuracy. The offline explainer needs no service; an LLM one can be plugged in.
# - On the planted model, section 7.5 checks each planted look-up end to end: neuron, token,
#   head, and an explanation that beats chance on held-out documents; how much of the explanation
#   lies in the topic is measured with the half of the word list that did not plant it.
#
# **Next:** run the page on GPT-2 (section 7.7), or return to {ref}`ch-decomposition` to see the
# layer-0 half of the story.
