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
# # 7. Context look-ups: heads that switch on token-predicting neurons
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
# comparison at the end, the contextual circuit of the earlier chapters.

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
# second token, in the same standard deviations. Following the paper we score the later layers:
# every MLP layer from 1 on.

# %%
from context_neurons import lookups as lk

final_scale = lk.typical_final_scale(model)
print(f"typical final LayerNorm scale on the calibration text: {final_scale:.2f}")
scores = lk.token_prediction_scores(model, final_scale=final_scale)
print(f"scored {len(scores)} neurons in layers {scores.layer.min()}..{scores.layer.max()}")

best = lk.best_neurons(scores, per_layer=5)
shown = best.assign(token=best.token.map(repr), runner_up=best.runner_up.map(repr))
columns = ["layer", "neuron", "token", "score", "gap", "logit", "runner_up"]
print(shown[columns].round(2).to_string(index=False))

# %% [markdown]
# For each token, the neuron that predicts it best is the population the paper plotted in its
# Figure 3. We keep the four highest-scoring neurons that predict different tokens.

# %%
from context_neurons.plotting_lookups import plot_token_scores

chosen = lk.select_neurons(scores, n=4)
per_token = lk.best_neuron_per_token(scores)
print(f"{len(per_token)} distinct tokens are some neuron's top token")
print("examined neurons (layer, neuron):", chosen)
figure = plot_token_scores(scores, marked=chosen)

# %% [markdown]
# *Figure 7.1: token-prediction scores of all scored neurons (log scale), by layer; the four
# examined neurons are labelled with the token they promote.* A random output weight read
# through a 50,257-token unembedding already has a maximum a few standard deviations above the
# mean: the bulk of the histogram is that baseline. Token-predicting neurons are the ones far to
# its right.

# %%
if loaded.is_planted:
    planted = {(d["layer"], d["neuron"]): d for d in loaded.truth.lookups}
    for layer, neuron in chosen:
        truth = planted.get((layer, neuron))
        row = scores[(scores.layer == layer) & (scores.neuron == neuron)].iloc[0]
        found = f"predicts {row.token!r}"
        verdict = f"planted to predict {truth['target']!r}" if truth else "not planted"
        print(f"neuron {layer}.{neuron}: {found}, {verdict}")
    print("all planted look-up neurons found:", set(planted) == set(chosen))
else:
    print("GPT-2: compare the examined neurons with the paper's examples (Appendix A).")

# %% [markdown]
# On the planted model the four planted look-up neurons stand far above the rest, and each
# predicts the token it was built to predict. On GPT-2 the histogram has a long tail instead of
# four isolated points, and which neurons come first depends on the score: the paper's Figure 3
# looks at the best neuron *per token*, which you can read off `per_token`.
#
# ## 7.2 Prompts that activate a neuron
#
# Next we need text on which these neurons fire. We build a **prompt pool** from the offline
# corpora: the opening 64 tokens of 48 documents from each of the domain collections (general
# prose, encyclopedic, British and American English, Bible, Spanish, medical, legal, astronomy,
# war, Pokémon), each window starting with `<|endoftext|>`. One batched forward pass per layer
# reads the pre-activations (hook `blocks.{l}.mlp.hook_pre`) of all examined neurons at every
# position, and the same pass stores what the attribution of section 7.3 needs. The forward
# pass stops at that hook: nothing later is computed.

# %%
windows, labels = lk.lookup_windows(model.tokenizer)
windows = [w.to(model.cfg.device) for w in windows]
domains = sorted({label.split("|")[0] for label in labels})
print(f"{len(windows)} windows of {len(windows[0]) - 1} tokens from {len(domains)} domains")
pool = lk.scan_pool(model, windows, labels, chosen)

layer, neuron = chosen[0]
top = lk.top_activating_prompts(
    model, windows, layer, neuron, k=6, labels=labels, acts=pool.attributions[(layer, neuron)].pre
)
print(f"\nmost activating prompts of neuron {layer}.{neuron}:")
for prompt in top:
    print(
        f"{prompt.activation:5.2f}  {prompt.source[:48]:48s}  ...{prompt.text(model.tokenizer)[-50:]!r}"
    )

# %% [markdown]
# Each prompt ends at the token where its window activates the neuron most (one prompt per
# window, so they are not near-copies of each other). The source labels already hint at the
# context: on the planted model they come mostly from one domain.
#
# A prompt carries more text than the neuron needs. The paper **truncates** it to the shortest
# suffix that keeps at least 80% of the activation at the same final token. We check every
# candidate suffix with the model (shortest first, eight at a time, stopping at the first that
# keeps enough), always with `<|endoftext|>` in front, as the windows have.

# %%
from context_neurons.plotting_lookups import plot_truncation

prompt = top[0]
truncated = lk.truncate_prompt(model, prompt, layer, neuron)
suffixes = lk.suffix_activations(model, prompt.tokens, layer, neuron)
print(f"full prompt: {len(prompt.tokens) - 1} tokens, activation {truncated.full_activation:.2f}")
print(f"truncated:   {len(truncated.tokens) - 1} tokens, activation {truncated.activation:.2f}")
print(f"kept text: {truncated.text(model.tokenizer)!r}")
assert truncated.activation >= 0.8 * truncated.full_activation
figure = plot_truncation(
    suffixes,
    truncated.full_activation,
    len(truncated.tokens) - 1,
    title=f"neuron {layer}.{neuron}, {prompt.source}",
)

# %% [markdown]
# *Figure 7.2: the neuron's pre-activation at the prompt's final token for every suffix length
# (log scale), the 80% line and the kept length.* The curve is not monotonic: a token can lower
# the activation, and adding text before it can raise it again. Truncation keeps the *shortest*
# suffix above the line, which the model checked.
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
print(
    f"heads + embeddings + MLP outputs + biases = hook_pre, to float precision, for "
    f"{len(pool.attributions)} neurons at {sum(len(w) for w in windows)} positions"
)

# %% [markdown]
# Now the four steps for every examined neuron: the ten most activating prompts, truncated; the
# attribution of their final-token pre-activation to every head of layers $0..l$; a
# **mean-ablation** check (replace one head's `hook_z` by its mean over the pool and measure the
# drop in pre-activation); and the explanation of section 7.4.

# %%
import pandas as pd

lookups = [lk.examine_neuron(model, layer, neuron, pool, scores=scores) for layer, neuron in chosen]
table = pd.DataFrame(
    [
        {
            "neuron": f"{lookup.layer}.{lookup.neuron}",
            "token": repr(lookup.token),
            "prompt length": sum(len(p.tokens) - 1 for p in lookup.prompts) / len(lookup.prompts),
            **{f"head {i + 1}": lk.head_name(l, h) for i, (l, h, _) in enumerate(lookup.top_heads)},
            "attribution 1": lookup.top_heads[0][2],
            "ablation drop 1": float(
                lookup.ablation[:, lookup.top_heads[0][0], lookup.top_heads[0][1]].mean()
            ),
            "attribution 2": lookup.top_heads[1][2],
        }
        for lookup in lookups
    ]
)
print(table.round(2).to_string(index=False))

# %% [markdown]
# `prompt length` is the mean length of the truncated prompts in tokens; `head 1..3` are the heads
# with the largest mean attribution over them; `attribution 1` is the first one's mean, `ablation drop 1` the mean drop when it is
# mean-ablated, and `attribution 2` the runner-up's mean, for scale.

# %%
from context_neurons.plotting_lookups import plot_head_attribution

figure = plot_head_attribution(lookups)

# %% [markdown]
# *Figure 7.3: mean direct attribution of every upstream head (rows: layer, columns: head) to each
# examined neuron, over its ten truncated prompts; the box marks the top head.* A context look-up
# shows as one bright cell: a single head carries the drive. On the planted model that is what
# was built; on GPT-2 the drive can also be shared by several heads, and this figure shows which
# case each neuron is in.

# %%
from context_neurons.plotting_lookups import plot_attribution_vs_ablation

figure = plot_attribution_vs_ablation(lookups)

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
print(parts.round(2).to_string())

# %% [markdown]
# The first five columns add up to the last. On the planted model the look-up neurons were built
# with a bias of $-2$: the `biases` column is negative, and the top head supplies the drive that
# makes the neuron fire, while the other heads, the embeddings and the MLP outputs contribute
# little.
#
# What does the top head look at? Its attention from the final token of the first truncated
# prompt:

# %%
lookup = lookups[0]
head_layer, head, _ = lookup.top_heads[0]
first = lookup.prompts[0]
print(f"{lk.head_name(head_layer, head)} on {first.text(model.tokenizer)!r}")
for position, token, weight in lk.attended_tokens(model, first.tokens, head_layer, head, k=5):
    print(f"  position {position:3d}  {token!r:16s} weight {weight:.2f}")

# %% [markdown]
# ## 7.4 When is a head active? Explanations as classifiers
#
# To explain a head we need prompts where it is active and prompts where it is not. We cut every
# window of the pool at every eighth token and call a prompt **active** for a head when the head's
# direct attribution to the neuron at the prompt's last token is at least a quarter of its mean
# attribution over the neuron's ten most activating prompts. Documents alternate between a
# training half, which the explainer sees, and a held-out half, which it does not.

# %%
from context_neurons.plotting_lookups import plot_head_activity

figure = plot_head_activity(
    [lookup.activity for lookup in lookups], names=[repr(lookup.token) for lookup in lookups]
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
from context_neurons.explainers import OfflineExplainer, examples_from_prompts

explainer = OfflineExplainer(model.tokenizer)
activity = lookups[0].activity
train_prompts, train_active = activity.split(train=True)
examples = examples_from_prompts(train_prompts, model.tokenizer)
odds = explainer.word_log_odds(
    [e for e, a in zip(examples, train_active) if a],
    [e for e, a in zip(examples, train_active) if not a],
)
print(
    f"{lk.head_name(*activity.head)}: {sum(train_active)} active of {len(train_active)} "
    f"training prompts; words by log-odds ratio:"
)
print(
    pd.DataFrame(odds[:10], columns=["word", "log-odds", "active with", "inactive with"])
    .round(2)
    .to_string(index=False)
)

# %% [markdown]
# The top of this list mixes words that trigger the head with words that merely share documents
# with them; greedy covering keeps one word for each group of prompts it explains. The held-out
# evaluation of all four explanations:

# %%
from context_neurons.plotting_lookups import plot_explanation_scores

results = pd.DataFrame(
    [
        {
            "name": f"{lk.head_name(*lookup.activity.head)}\n{lookup.token!r}",
            "neuron": f"{lookup.layer}.{lookup.neuron}",
            "head": lk.head_name(*lookup.activity.head),
            "active": lookup.activity.base_rate,
            "accuracy": lookup.evaluation["accuracy"],
            "chance": lookup.evaluation["chance"],
            "balanced_accuracy": lookup.evaluation["balanced_accuracy"],
            "explanation": (
                ", ".join(lookup.explanation.tokens)
                if lookup.explanation
                else lookup.evaluation.get("error", "")
            ),
        }
        for lookup in lookups
    ]
)
print(results.drop(columns="name").round(3).to_string(index=False))
figure = plot_explanation_scores(results)

# %% [markdown]
# *Figure 7.6: held-out accuracy (blue) against the majority-class chance level (black ticks),
# and balanced accuracy (orange) against 0.5, for the four explanations.* An explanation is
# useful when it beats both chance levels. The offline explainer can only name words it has seen
# in the training half: a held-out prompt that activates the head through a word it never saw is
# a miss. This is what an LLM explainer, like the paper's GPT-4, adds: it can generalise from
# *"war words"* to words it was not shown.
#
# **The LLM explainer.** `context_neurons.explainers.LLMExplainer` sends the same active and
# inactive prompts (as text) to an OpenAI-compatible chat-completions endpoint, then asks it to
# label held-out prompts from the explanation alone. It uses only the standard library and is
# enabled only by environment variables: `CONTEXT_NEURONS_LLM_API_KEY` (required),
# `CONTEXT_NEURONS_LLM_BASE_URL` (default `https://api.openai.com/v1`) and
# `CONTEXT_NEURONS_LLM_MODEL` (default `gpt-4o-mini`). Without a key it is never constructed and
# no network connection is attempted (a unit test enforces this).

# %%
# NBVAL_IGNORE_OUTPUT
# (the output depends on whether the reader configured an LLM.)
from context_neurons.explainers import LLMExplainer

llm = LLMExplainer.from_env()
if llm is None:
    print("No CONTEXT_NEURONS_LLM_API_KEY set: skipping the LLM explainer (offline results above).")
else:
    llm_result = lk.evaluate_explainer(llm, lookups[0].activity, model.tokenizer)
    print(llm_result["explanation"].text)
    print(
        f"accuracy {llm_result['accuracy']:.3f} (chance {llm_result['chance']:.3f}), "
        f"balanced accuracy {llm_result['balanced_accuracy']:.3f}"
    )

# %% [markdown]
# ## 7.5 Does the method recover what was planted?

# %%
from context_neurons.explainers import normalise_word

if loaded.is_planted:
    found = {(lookup.layer, lookup.neuron): lookup for lookup in lookups}
    rows = []
    for truth in loaded.truth.lookups:
        lookup = found.get((truth["layer"], truth["neuron"]))
        topic = {normalise_word(w) for w in loaded.truth.topic_words[truth["topic"]]}
        words = lookup.explanation.tokens if lookup and lookup.explanation else []
        rows.append(
            {
                "planted neuron": f"{truth['layer']}.{truth['neuron']} {truth['target']!r}",
                "found": lookup is not None,
                "planted head": lk.head_name(truth["layer"], truth["head"]),
                "top head": lk.head_name(*lookup.top_heads[0][:2]) if lookup else "-",
                "topic": truth["topic"],
                "explanation words in topic": f"{sum(w in topic for w in words)}/{len(words)}",
                "first word": words[0] if words else "-",
            }
        )
    print(pd.DataFrame(rows).to_string(index=False))
else:
    print("GPT-2 has no planted truth: compare with the paper's case studies instead.")

# %% [markdown]
# On the planted model each planted look-up is recovered end to end: the token-prediction score
# finds the neuron and its token, the attribution names the planted head (with the ablation
# drop agreeing), and the explanation starts with a word of the planted topic. Words outside the
# topic list in an explanation are real correlates in the corpora: words that share documents with
# the topic words, which a word-level explainer cannot tell apart from triggers without more varied
# data. Together with topic words never seen in training, they are why the held-out accuracy stays
# below 100%.
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
# Set `CONTEXT_NEURONS_MODEL=gpt2` and rerun this page: every cell is the same. Three knobs
# matter for a real study:
#
# - **More and longer prompts.** `lookup_windows(tokenizer, per_domain=..., n_tokens=...)` for
#   the offline corpora, or `document_windows(tokenizer, openwebtext_documents(10_000),
#   n_tokens=256)` online; the paper used prompts from a large web corpus.
# - **More neurons.** `select_neurons(scores, n=...)`, or the best neuron of each token from
#   `best_neuron_per_token(scores)`, restricted to the last layers as in the paper's Figure 3.
#   `scan_pool` runs one forward pass per layer for all neurons of that layer.
# - **A GPU.** `setup_chapter` picks CUDA when available; the attribution keeps only
#   `hook_z` of the layers below the neuron and one number per head, position and neuron.
#
# The command-line reproduction, `python -m context_neurons reproduce --model gpt2`, runs the
# same steps for the four best neurons and reports them in the row `lookups`.
#
# ```python
# from context_neurons.data import openwebtext_documents
# windows, labels = lk.document_windows(model.tokenizer, openwebtext_documents(5000), n_tokens=128)
# pool = lk.scan_pool(model, [w.cuda() for w in windows], labels, chosen)
# lookups = [lk.examine_neuron(model, l, n, pool, scores=scores) for l, n in chosen]
# ```
#
# ## 7.8 Exercise
#
# ````{exercise} Attribute a pre-activation by hand
# :label: ex-lookup-attribution
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
# ````
#
# ```{solution} ex-lookup-attribution
# :class: dropdown
#
# Centre the head's output (or, equivalently, the read-out vector $W_{in}[:, j]$), dot it with
# $W_{in}[:, j]$ and divide by the actual LN2 scale at that position. The remaining terms are
# the embeddings, the earlier MLP outputs and the biases $b_O$ (each centred, dotted and divided
# the same way), plus $b_{in}[j]$.
# ```

# %% tags=["hide-input"]
import torch

lookup = lookups[0]
layer, neuron = lookup.layer, lookup.neuron
head_layer, head, _ = lookup.top_heads[0]
tokens = lookup.prompts[0].tokens[None].to(model.cfg.device)
_, cache = model.run_with_cache(tokens, stop_at_layer=layer + 1)
scale = cache[f"blocks.{layer}.ln2.hook_scale"][0, -1, 0]
read = model.W_in[layer][:, neuron] - model.W_in[layer][:, neuron].mean()

z = cache[f"blocks.{head_layer}.attn.hook_z"][0, -1, head]
head_term = (z @ model.W_O[head_layer, head]) @ read / scale
assert torch.isclose(head_term, lookup.head_attribution[0, head_layer, head], atol=1e-3)

resid = cache["hook_embed"][0, -1] + cache["hook_pos_embed"][0, -1]
for l in range(layer + 1):
    resid = resid + model.blocks[l].attn.b_O
    resid = resid + torch.einsum("he,hed->d", cache[f"blocks.{l}.attn.hook_z"][0, -1], model.W_O[l])
for l in range(layer):
    resid = resid + cache[f"blocks.{l}.hook_mlp_out"][0, -1]
pre = resid @ read / scale + model.b_in[layer][neuron]
assert torch.isclose(pre, cache[f"blocks.{layer}.mlp.hook_pre"][0, -1, neuron], atol=1e-3)
print(f"check passed: top head {head_term:.2f} of a pre-activation of {pre:.2f}")

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
# - On the planted model every planted look-up (neuron, token, head, context) is recovered.
#
# **Next:** run the page on GPT-2 (section 7.7), or return to {ref}`ch-decomposition` to see the
# layer-0 half of the story.
