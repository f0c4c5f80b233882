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
# (ch-trained)=
# # 8. A model nobody wrote
#
# Every other chapter runs on whichever model `CONTEXT_NEURONS_MODEL` names; the stored pages use
# the planted model, whose structure we wrote in the method's own terms. Agreement there shows
# that the code is right, not that the method finds context neurons in a network that *learned*
# them, which is the paper's claim. This chapter runs the whole method on a model whose structure
# nobody wrote: a GPT-2-architecture model trained from scratch on the offline corpora
# (`python -m context_neurons train`), shipped with the package as the `trained` model. Its truth
# is measured from activations on documents it never saw, and discovery is scored against it by a
# protocol committed before any verdict was computed (v1, section 8.5), by a second protocol
# committed after v1's verdicts and before any of its own numbers (v2, section 8.7), and by a
# confirmatory third (v3, section 8.8), committed before any of its numbers, which reads documents
# no earlier evaluation read and asks whether the score beats four baselines that do without the
# decomposition. v3 is the one to believe; v1 and v2 stay as the record of how the question
# sharpened. The verdicts of all three, computed when this page was built, are printed right
# below the set-up cell.
#
# ```{admonition} Learning objectives
# :class: tip
# After this chapter you can
# - train and load a GPT-2-architecture model through the same loader GPT-2 uses, and say what
#   its training record guarantees (seed, token budget, held-out split);
# - derive a neuron's expected input on a domain from the weights and the domain's token
#   frequencies, and turn it into a *frequency-aware* discovery score;
# - define context neurons from activations alone, in additive units (Cohen's $d$ of a domain's
#   shift, and the part of it the contextual heads carry), independently of the weights;
# - read a pre-registered evaluation: its statistics, cluster-bootstrap intervals, controls and
#   verdict rule;
# - compare a method with the cheapest baselines that could explain its result (here: the model
#   run on each token alone), through a paired bootstrap interval of the difference;
# - follow the head groups and the context neurons over training checkpoints.
# ```
#
# **Prerequisites:** chapters {ref}`ch-taxonomy` to {ref}`ch-evaluation`. The symbols are on the
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
from context_neurons.book.colab import colab_corpora

colab_corpora()  # Colab only: fetch the corpora the verdicts read (elsewhere it does nothing)
loaded = setup_chapter(model="trained")  # this chapter is about the trained model
model = loaded.model

# %% [markdown]
# **The verdicts, computed on this page.** The main job runs the whole method and the three
# evaluations (sections 8.5 to 8.8) on the trained model; the sentences below are printed from
# its results, with 95% cluster-bootstrap intervals. Protocol v3 comes first: it is the
# confirmatory test. The terms they use, in short (sections 8.5 and 8.8 define them in full):
#
# - **truth** ($T$, of size $|T|$): the neurons that are *context neurons by activation*: a
#   domain of text moves their pre-activation by at least one standard deviation, and the
#   contextual heads carry at least half of that move (measured on held-out text, never from
#   the weights);
# - **AUC**: the probability that a neuron of the truth scores higher than a neuron outside it
#   (0.5: the score does not rank them); $\rho$: the rank correlation of predicted and measured
#   shifts; **precision** among the $|T|$ highest-scoring neurons, against the **base rate**
#   $|T|/d_{mlp}$ that a random ranking gets;
# - **baselines**: cheaper predictors that do without the decomposition (the model run on each
#   token alone, among them); protocol v3's primary verdict compares the score with the best.

# %%
from context_neurons.printing import wrapped
from context_neurons.reproduce import reproduce
from context_neurons.reproduce.findings import finding_sentence, shipped_findings
from context_neurons.verdict.v3_report import verdict_sentences_v3

results = reproduce("trained", n_texts=40, progress=False)  # typed: every section reads it
evaluation, evaluation_v2 = results.evaluation("v1"), results.evaluation("v2")
evaluation_v3 = results.evaluation("v3")  # every model v3 registers
if evaluation_v3:
    print(wrapped("Protocol v3 (confirmatory: registered before any of its numbers, fresh "
                  "documents):"))
    for sentence in verdict_sentences_v3(evaluation_v3):
        print(wrapped(f"- {sentence}"))
else:  # the documents are not on this machine: the results stored with the package, said so
    print(wrapped("Protocol v3 was not computed on this machine (its documents are absent). "
                  "The results stored with the package, not computed on this page:"))
    for found in shipped_findings():
        print(wrapped(f"- {finding_sentence(found, emphasis='')}"))

# %%
from context_neurons.verdict import truth_summary, verdict_sentences

protocols = {"v1 (registered before any verdict; superseded by v3)": evaluation,
             "v2 (registered after v1's verdicts were seen; superseded by v3)": evaluation_v2}
if evaluation is not None:
    for name, result in protocols.items():
        print(wrapped(f"Protocol {name}, trained model: {truth_summary(result)}; primary heads "
                      f"{result.head_sets['primary']}."))
        for sentence in verdict_sentences(result):
            print(wrapped(f"- {sentence}"))
else:  # online: the held-out documents of the training split are not on this machine
    print(wrapped(f"No verdict on this machine. {results.row('discovery_verdict').label}"))

# %% [markdown]
# ## 8.1 The model and its training
#
# The model is a Hugging Face `GPT2LMHeadModel`: learned absolute positions, pre-LayerNorm, GELU,
# tied embeddings, the architecture the decomposition of chapter 1 is about. Its byte-level BPE
# tokenizer (`tokenizers`) was trained on the same training split; a small vocabulary keeps the
# softmax cheap on a CPU. The corpora are split by document: a document is held out when the
# SHA-256 hash of `corpus:id`, read as a number in $[0, 1)$, falls below 0.15, so the split is
# recomputed from the corpora alone and every held-out document keeps its corpus as a label.
# Training draws documents from a weighted mixture of the corpora, so that each small domain
# (Bible, Spanish, legal, medical, code, ...) is frequent enough for a neuron to pay off.
# The record below is the one the training command wrote (`training.json`). The model was trained
# on a GPU (deterministic kernels; rerunning the command on the same GPU model reproduces it); the
# same command runs on a CPU, in parts with `train --resume`, in the time the record estimates.

# %%
import json

import pandas as pd

from context_neurons.models.loading import TRAINED_DIR
from context_neurons.training.summary import training_run

cfg = model.cfg
print("\n".join(training_run(TRAINED_DIR).findings(cfg)))  # its training.json, read typed

# %%
from context_neurons.plotting.training import plot_loss

loss = pd.read_csv(TRAINED_DIR / "loss.csv")
heldout = pd.read_csv(TRAINED_DIR / "heldout.csv")
heldout = heldout[heldout["corpus"] == "mean"]
figure = plot_loss(loss, heldout, title=f"Figure 8.1. {loaded.title}: training and held-out loss")

# %% [markdown]
# *Figure 8.1: training loss of every batch (thin), its moving average, and the mean held-out
# loss at the checkpoints (trained model). A uniform guess over the vocabulary costs
# $\ln d_{vocab}$ nats.* The model is small: a language model far weaker than GPT-2, trained
# until its layer 0 has what GPT-2's has (a previous-token head and heads the taxonomy calls
# contextual; section 8.3), not for a token count.
#
# ## 8.2 The whole method in one run
#
# The main job (`python -m context_neurons reproduce --model trained`) runs every step of the
# book on the model and prints each quantity beside the paper's value on GPT-2 Small. Its rows
# with one number are below; the paper's column is the paper's (Gibson 2025), not a result of
# this run.

# %%
from context_neurons.printing import fixed, show_table
from context_neurons.reproduce import number_rows

show_table(number_rows(results, "trained model"),
           "the main job's rows with one number, beside the paper's values on GPT-2 Small",
           model=loaded.title)
print("contextual heads:", results.heads)

# %% [markdown]
# The rows come in three kinds: the head structure (taxonomy, previous-token heads), the
# discovery of chapter 5 and its diagnostics (`neurons_found`, `loud_token_share`, the
# approximation's `median_pearson_r`), and the pre-registered evaluation of section 8.5
# (`activation_truth_neurons`, `discovery_verdict`; the scores with their intervals are in the
# table of section 8.6), of protocol v2 (the rows ending in `_v2`, section 8.7) and of protocol v3
# (the rows ending in `_v3`, section 8.8). Each section below takes one apart.
#
# ## 8.3 Which heads? The taxonomy on a model nobody wrote

# %%
from context_neurons import taxonomy as tx
from context_neurons.plotting.taxonomy import plot_kernel_shapes

taxonomy = results.taxonomy  # classified once, by the main job
taxonomy_v1 = taxonomy.with_rule(previous_token_rule=False)  # as protocols v1, v2 read it
print(wrapped(f"contextual: slowly decaying kernel, content sd <= "
              f"{tx.CONTEXTUAL_MAX_CONTENT_SD} nats and previous-token share < "
              f"{tx.PREVIOUS_TOKEN_MIN}"))
show_table(taxonomy.table(), "layer-0 heads by the taxonomy of chapter 2", model=loaded.title,
           decimals=2)
print(wrapped(f"contextual heads without the previous-token rule (protocols v1 and v2): "
              f"{taxonomy_v1.groups['contextual']}; with it: {taxonomy.groups['contextual']}"))
if results.previous_token is not None:  # None online: the EVAL documents are not here
    print("\n".join(results.previous_token.findings()))
figure = plot_kernel_shapes(
    taxonomy.patterns[0],
    taxonomy.heads,
    taxonomy.shapes,
    title=f"Figure 8.2. {loaded.title}: positional kernels at n = {taxonomy.n}, destination ' the'",
)

# %% [markdown]
# *Figure 8.2: the layer-0 positional kernels of the trained model, one panel per kernel shape
# (trained model).* The kernel rules of chapter 2 were fixed before this model existed: a head is
# contextual when its kernel decays slowly (neither local nor flat over more than half the
# context) **and** its content weights vary little (the spread of $\log c$ at most
# `tx.CONTEXTUAL_MAX_CONTENT_SD` nats). This model showed what those rules missed: a head can be
# contextual by its *positional* kernel and still attend mostly to the previous token on real
# text, when the previous token's *content* weight is what makes it local. Chapter 2's
# previous-token rule, registered with protocol v3 (section 8.8), makes such a head a
# detokenization head; protocols v1 and v2 were registered before it and read the taxonomy
# without it (the first list above). Heads whose kernel is flatter than half the context
# are "uniform" and fall outside the contextual group; the evaluation's secondary head set takes
# every non-local head, so that the algebra below is tested without the taxonomy's choice.
#
# ## 8.4 A frequency-aware score
#
# The paper's score asks which tokens move a neuron most, every token of the vocabulary weighted
# equally: $\mathrm{top}[j]$ is a statement about the shape of $\epsilon_j(t) = e(t) \cdot w_j$
# over the vocabulary. But a text of a domain $D$ does not draw its tokens uniformly: a token
# moves the neuron's expected input on $D$ by $p_D(t)\,\epsilon_j(t)$. Write the argument out
# under the paper's own assumptions: tokens drawn independently from $p_D$, and denominators
# that concentrate (chapter 3).
#
# For one head $h$ with content weights $c_h(t)$ and token outputs $u_h(t) = v_h(t) W_O^h$ read by
# neuron $j$ as $\epsilon_{hj}(t) = u_h(t) \cdot w_j$, position 0 holding `<|endoftext|>` with
# weight $b_n = \mathrm{pos}_n(0)\, c_n(\mathrm{BOS})$, the expected denominator at $n$ is
# $b_n + (1 - \mathrm{pos}_n(0)) S_h(p_D)$ with $S_h(p) = \sum_t p(t) c_h(t)$, and to first order
#
# $$
# \mathbb{E}_{D}\big[\text{head } h \text{'s input to } j \text{ at } n\big]
#   = \beta_n\, \epsilon_{hj}(\mathrm{BOS}) + (1 - \beta_n)\,
#     \frac{\sum_t p_D(t)\, c_h(t)\, \epsilon_{hj}(t)}{\sum_t p_D(t)\, c_h(t)},
# \qquad \beta_n = \frac{b_n}{b_n + (1 - \mathrm{pos}_n(0))\, S_h(p_D)} .
# $$
#
# The kernel drops out of the mean, except through the BOS share $\beta_n$; with one calibrated
# denominator the fraction reduces to $\sum_t p_D(t)\, \epsilon_j(t)$. The direct path (the
# token's own embedding) gives $\sum_t p_D(t)\, W_E[t] \cdot w_j$ by the same algebra. The
# predicted **shift** of domain $D$ is its mean minus the mean of the other domains' means, kept
# apart for the contextual heads ($\Delta^{ctx}_j(D)$) and the rest ($\Delta^{other}_j(D)$).
# The **spread** of a window mean follows from the first-order fluctuation
# $\sum_i \sum_h a_{hi}\, (c_h(t_i)/S_h)(\epsilon_{hj}(t_i) - m_{hj})$, whose variance for
# independent tokens is the kernel's $1/n_{\mathrm{eff}}$ generalised to window means and to
# several paths reading the same token. The score is
#
# $$
# \mathrm{score}_j = |d_j(D^*)| \cdot \mathrm{clip}\!\left(
#   \frac{\Delta^{ctx}_j(D^*)}{\Delta^{ctx}_j(D^*) + \Delta^{other}_j(D^*)}, 0, 1\right),
# \qquad d_j(D) = \frac{\Delta^{ctx}_j(D) + \Delta^{other}_j(D)}{\hat\sigma_j},
# $$
#
# at the domain $D^*$ of largest $|d_j|$: a neuron scores high when its domain moves it by many of
# its own spreads and the contextual heads carry the move. It uses the weights, the calibration
# text (for the LayerNorm-2 scale) and unigram counts $p_D$ from calibration (CAL) documents of
# each domain, never the documents it is evaluated on (`context_neurons.domain_shift`). The
# paper's $\mathrm{top}[j]$ stays beside it, unchanged.

# %%
from context_neurons import circuit as cc
from context_neurons import discovery as disc

if evaluation is not None and evaluation.primary is not None:
    highest = pd.DataFrame(evaluation.primary.frequency_aware_highest)
    show_table(highest[["neuron", "score", "domain", "share"]].set_index("neuron"),
               f"the five highest frequency-aware scores with the contextual heads "
               f"{evaluation.primary.heads}, each neuron's predicted domain and the heads' "
               "predicted share of its shift there", model=loaded.title, decimals=2,
               formats={"score": 1})

# %% [markdown]
# **The planted control.** On the planted model, whose context neurons we wrote, the new score
# must recover what $\mathrm{top}[j]$ recovers. Its domains there are the planted topics: $p_D$ is
# uniform over each topic's *label* words, the half of each word list that was never used to
# plant (appendix), so the check does not reuse what built the model. The rule, fixed before it
# was first computed: the frequency-aware score's precision among the $|T|$ highest-scoring
# neurons is at least that of $\mathrm{top}[j]$ minus 0.10 (two of the twenty planted neurons).
# With the trained model's ten corpus domains instead, which are not the planted topics, its
# precision falls well below that of $\mathrm{top}[j]$: a score can only see a neuron's domain if
# $p_D$ contains it (`scripts/planted_control.py` prints both, for any seed).

# %%
from context_neurons.models import load_model
from context_neurons.verdict.planted import planted_control

planted = load_model("planted")
control = planted_control(planted)
for line in control.findings():
    print(line)

# %% [markdown]
# ## 8.5 The pre-registered protocol and the truth
#
# The evaluation was fixed in a file committed before any verdict was computed
# (`context_neurons/assets/protocol/discovery-verdict.json`); the page prints it rather than
# restating it. In short:
#
# - **Data.** The training run's held-out documents are split by a hash of their key into halves:
#   CAL (the unigram counts $p_D$ and the ablation means) and EVAL (everything measured). EVAL
#   windows are $n_{ctx}$ tokens, at most 4 per document and 200 per domain, each remembering its
#   document.
# - **Truth, in additive units.** Neuron $j$'s window-mean pre-activation (positions from 32 on);
#   its shift on domain $D$ (the domain's mean minus the mean of the other domains' means) in units
#   of the within-domain standard deviation pooled over domains, Cohen's $d$. Neuron $j$ is a
#   *context neuron by activation* when at its domain $D^*$ of largest $|d|$, $|d| \ge 1$ and the
#   contextual heads' part of the shift (the shift minus the same shift with the heads
#   mean-ablated) is at least half of it.
# - **Statistics.** $\rho$: the median over domains of the Spearman correlation across neurons
#   between the predicted and the measured context shift (for $\mathrm{top}[j]$: between the score
#   and the measured $|$context shift$|/\sigma$ at $D^*$); the AUC of each score against the truth;
#   precision among the $|T|$ highest-scoring neurons against the base rate $|T|/d_{mlp}$.
#   Intervals: a 95% percentile bootstrap over EVAL *documents*, resampled within each domain
#   (and over neurons for the AUC), 1000 resamples.
# - **Controls and verdict.** Printed below with the results.

# %% tags=["hide-output"]
from context_neurons.printing import nested_lines
from context_neurons.verdict import load_protocol

protocol = load_protocol()
print("\n".join(nested_lines(protocol.sections("truth", "verdict"))))

# %%
if evaluation is not None and evaluation.primary is not None:
    primary = evaluation.primary
    truth_domains = pd.Series(primary.truth_domains).value_counts()
    per_domain = pd.DataFrame({"EVAL windows": pd.Series(evaluation.eval_windows),
                               "context neurons": truth_domains}).fillna(0).astype(int)
    show_table(per_domain.rename_axis("domain"), "EVAL windows per domain, and the context "
               "neurons by activation (protocol v1, primary heads) whose best domain it is",
               model=loaded.title)
    low, high = (fixed(bound, 0) for bound in primary.truth_count_ci95)
    print(wrapped(
        f"{len(primary.truth_neurons)} of {cfg.d_mlp} neurons are context neurons by "
        f"activation (primary heads {primary.heads}); bootstrap 95% interval of the count: "
        f"[{low}, {high}]"))
    print(f"with resample ablation instead of mean ablation: "
          f"{primary.truth_count_resample_ablation} neurons")
    if evaluation.secondary is not None:
        secondary = evaluation.secondary
        print(wrapped(f"secondary head set (all non-local heads {secondary.heads}): "
                      f"{len(secondary.truth_neurons)} neurons"))

# %% [markdown]
# The truth is broad on this model: most neurons move by at least a pooled standard deviation on
# some domain, and the contextual heads carry at least half of that move. The shared base rate
# matters for reading the verdict: at a base rate above one third, precision can never reach three
# times the base rate, so the protocol's "positive" is out of reach whatever the ranking, and the
# ranking criteria (the AUC and $\rho$ intervals) carry the information.
#
# ## 8.6 The scores against the truth: the verdict

# %%
from context_neurons.plotting.training import plot_verdict

from context_neurons.verdict.evaluate import show_scores, with_interval

if evaluation is not None and evaluation.primary is not None:
    for set_name in evaluation.results:
        show_scores(evaluation, "v1", loaded.title, set_name)
    scores_p = evaluation.primary.scores
    print(f"neurons-permuted control: rho "
          f"{fixed(scores_p['frequency_aware'].permutation_spearman, 2)} (frequency-aware), "
          f"{fixed(scores_p['top'].permutation_spearman, 2)} (top)")
    for name, c in evaluation.primary.controls.random_directions.items():
        print(wrapped(f"{name}: {c.honest_found} real neurons above the 99th percentile of "
                      f"random read directions with the same norms ({c.honest_found_share:.1%})"))
    figure = plot_verdict(
        {f"{k} ({s})": v for s, result in evaluation.results.items()
         for k, v in result.scores.items()},
        protocol.verdict,
        title=f"Figure 8.3. {loaded.title}: each score against the truth, 95% intervals",
    )

# %% [markdown]
# *Figure 8.3: the AUC (left) and Spearman correlation (right) of each score against the truth,
# with 95% cluster-bootstrap intervals, for the taxonomy's contextual heads (primary) and all
# non-local heads (secondary); dotted lines: chance and the verdict rule's bounds (trained
# model).* The sentences at the top of the page state each verdict; the table gives the
# numbers behind them and the controls. The controls must come out at chance for the run to
# count: predictions with neurons permuted, and $p_D$ with token ids permuted (the same
# frequencies on the wrong tokens).
#
# **The old truth rule, beside.** Before this protocol, the truth was "separates a domain (AUC of
# window means $\ge 0.9$) and mean-ablating the contextual heads removes half of the
# separation". A ratio of AUCs saturates: a neuron whose direct path alone separates its domain
# perfectly shows no removal however much the heads carry, and averaging over 224 positions makes
# nearly every neuron separate something. Its counts on the same model:

# %%
from context_neurons import activations as act
from context_neurons.plotting.training import plot_discovery_vs_activation

heads, heldout = results.heads, results.heldout  # the main job's heads and truth, not recomputed
truth, context, windows, labels = None, [], [], []
if heldout is None:  # online (Colab): the training split's documents are not here
    print(wrapped("no truth from activations on this machine. "
                  f"{results.row('neuron_recall_vs_activations').label}"))
else:
    truth, windows, labels = heldout.truth, heldout.windows, heldout.labels
    context = truth.context_neurons()
    print(wrapped(f"old rule: {len(truth.separating_neurons())} of {cfg.d_mlp} neurons separate "
                  f"a domain; {len(context)} of them through the contextual heads {heads}"))

# %%
if heads:
    circuit, scores = results.circuit, results.scores
    null = disc.gaussian_null_score(scores.n_tokens)
    print(f"Gaussian null {null:.2f}; median top[j] {float(scores.top.median()):.1f}; "
          f"theta = {disc.THETA:g}; found at theta: {len(scores.found())}")
if truth is not None:
    figure = plot_discovery_vs_activation(
        scores.top, truth.separation, truth.mask(), disc.THETA, act.MIN_SEPARATION,
        title=f"Figure 8.4. {loaded.title}: top[j] against the old rule's separation",
    )

# %% [markdown]
# *Figure 8.4: each layer-0 neuron's discovery score $\mathrm{top}[j]$ (x, log scale) against its
# separation measured on held-out text (y); red: context neurons by the old rule (trained
# model).* Why does $\mathrm{top}[j]$ not rank the truth? The chapters' own diagnostics name it.
#
# **The score saturates.** Chapter 5 warned that on a model whose typical neuron already scores
# above $\theta$ the threshold separates little. Here every neuron does. The reason is in the
# extended embeddings $e(t) = \sum_h (c_h(t) / \hat D_h)\, v_h(t) W_O^h$ (chapter 4): their norm
# grows with the content weight $c_h(t)$, and this model's heads weight tokens several nats apart
# (the `content sd` of section 8.3). A token with a large $|e(t)|$ stands out in
# $e(t) \cdot w_j$ for *any* read vector $w_j$. Count, for every neuron, how many of its
# $k = 20$ extreme tokens are among the loudest 1% of the vocabulary:

# %%
from context_neurons.plotting.discovery import plot_loudness

if heads:
    ids = scores.vocabulary.nonzero().flatten()
    loudness = disc.loudness(scores, circuit)
    for finding in loudness.findings(model.tokenizer):
        print(wrapped(finding))
    figure = plot_loudness(
        circuit.extended[ids].norm(dim=-1), loudness.shares, loudness.fraction,
        title=f"Figure 8.5. {loaded.title}: loud tokens fill every neuron's extreme slots",
    )

# %% [markdown]
# *Figure 8.5: left, the norms $|e(t)|$ of the extended embeddings over the vocabulary (log
# scales), the loudest 1% right of the dashed line; right, each neuron's share of its 20 extreme
# tokens that are loudest tokens, against the 1% expected if loudness played no part (trained
# model).* The same few loud tokens stand out for every neuron, so "a few tokens stand out",
# the score's premise, holds everywhere and says nothing about a neuron's own context. The same
# count on the planted model, whose context neurons read planted topic directions:

# %%
planted_circuit = cc.get_circuit(planted.model)
planted_scores = disc.get_scores(planted_circuit, planted.model)
planted_loudness = disc.loudness(planted_scores, planted_circuit)
print(wrapped("planted model: " + planted_loudness.among(
    sorted(planted.truth.context_neurons), "its planted context neurons")))

# %% [markdown]
# The frequency-aware score of section 8.4 does not look for tokens that stand out: it weights
# every token by how often a domain uses it, which is why loud but rare tokens do not dominate it.
#
# ## 8.7 A second protocol: context neurons by a single activation
#
# Under v1 the frequency-aware score could not come out positive, whatever its ranking: v1's
# truth holds most of the neurons, because its Cohen's $d$ divides by the spread of *window means*
# of about 224 positions, which is small, so almost every neuron's average separates some domain.
# What the literature calls a context neuron (a French neuron, a Python neuron) is one whose
# single activation tells the context. Asking again carries a risk: a protocol written after
# seeing the first one's numbers can be bent towards a result. So v2 was committed, in a file of
# its own (`discovery-verdict-v2.json`), before any of its numbers was computed, and it changes
# only what it lists below; the scores, data, statistics, bootstrap, controls and verdict
# thresholds are v1's. What it cannot undo: whoever wrote it had seen v1's results, including
# those of v1's secondary head set. Read v2 as a second, weaker kind of evidence than v1.

# %%
protocol_v2 = load_protocol("v2")
registered = protocol_v2.registered.split(" (issue")[0]  # the project's issue number dropped
print(wrapped(f"{protocol_v2.name}: registered {registered}."))
for change in protocol_v2.changes_from_v1:
    print(wrapped(f"- {change}"))

# %% [markdown]
# **Which heads.** The taxonomy leaves out broad heads whose kernels are flatter than half the
# context. Chapter 3's case for treating a head as a bag of tokens is that its denominator
# $D_n$ is stable across texts; v2 measures that, with chapter 3's coefficient of variation of
# $D_n$ across the CAL texts, and adds every non-local head at least as stable as the least stable
# of the taxonomy's contextual heads:

# %%
if evaluation_v2 is not None and evaluation_v2.primary is not None:
    stability = evaluation_v2.denominator_stability
    show_table(stability.table(taxonomy_v1), stability.caption, model=loaded.title, decimals=2)
    for finding in stability.findings(taxonomy_v1.groups["contextual"],
                                      evaluation_v2.primary.heads):
        print(wrapped(finding))

# %% [markdown]
# A CV is the fraction of its mean by which a head's denominator moves from one text to another.
# Where it is tenths rather than hundredths, chapter 3's concentration is weak, and one
# calibrated denominator per head (the circuit of chapter 4, and $\mathrm{top}[j]$) is a rough
# approximation. The frequency-aware score does not rely on it: its prediction is
# self-normalised per domain (section 8.4).
#
# **The truth and the verdict.**

# %%
if evaluation_v2 is not None and evaluation_v2.primary is not None:
    primary_v2 = evaluation_v2.primary
    tried = ", ".join(f"d >= {d:g}: {n}" for d, n in evaluation_v2.truth_threshold.tried)
    low, high = primary_v2.truth_count_ci95
    print(wrapped(f"protocol v2, trained model: {truth_summary(evaluation_v2)}; thresholds "
                  f"tried: {tried}; bootstrap 95% interval of the count [{low:.0f}, {high:.0f}]; "
                  f"{primary_v2.truth_count_resample_ablation} with resample ablation"))
    shown = {"primary": primary_v2}  # the secondary set too, where its heads differ
    if evaluation_v2.secondary is not None and evaluation_v2.secondary.heads != primary_v2.heads:
        shown["secondary"] = evaluation_v2.secondary
    for set_name in shown:
        show_scores(evaluation_v2, "v2", loaded.title, set_name)
    if len(shown) == 1:
        print("(the secondary head set, all non-local heads, is the same: same rows)")
    figure = plot_verdict(
        {f"{k} ({s})": v for s, result in shown.items() for k, v in result.scores.items()},
        protocol_v2.verdict,
        title=f"Figure 8.6. {loaded.title}: protocol v2, each score against the truth",
    )

# %% [markdown]
# *Figure 8.6: as Figure 8.3, under protocol v2 (trained model); the secondary head set is
# shown only where it differs from the primary one.* The verdicts in
# words are at the top of the page and in section 8.10.
#
# ## 8.8 A confirmatory protocol: the score against baselines, on fresh documents
#
# An independent check of v1 and v2, with its own code, reproduced their numbers and then asked
# what they leave open. Three things:
#
# - **A cheaper explanation.** Run the model on each token alone, `[BOS, t, t, ..., t]`, so every
#   head can read only $t$, and record each neuron's pre-activation late in the sequence: a
#   response $r_j(t)$. Predicting a domain's shift as $\sum_t (p_D(t) - p_{rest}(t))\, r_j(t)$
#   needs no decomposition of attention at all. If it ranks the context neurons as well as the
#   frequency-aware score, a high $\rho$ measures how linear layer 0 is in its tokens, not what
#   splitting attention into position and content adds.
# - **A criterion that did nothing.** With every head in the ablated set, "the heads carry at least
#   half of the shift" holds for almost every neuron with a large shift, so a truth built that way
#   is "the domain moves the neuron", whatever the heads.
# - **A head that is both.** Head 0 attends mostly to the previous token on real text while the
#   taxonomy, which reads the positional kernel, calls it contextual: local information counted as
#   context.
#
# So a third protocol (`discovery-verdict-v3.json`, with its reasons in `discovery-verdict-v3.md`)
# was committed before any of its numbers. It asks one primary question and fixes one
# comparison:
#
# - **Context set.** The taxonomy's contextual heads, less any head whose attention to the
#   previous token is at least 0.4, on the calibration text or on the calibration windows of the
#   domains: a previous-token head is a detokenization head whatever its kernel.
# - **Truth.** Neuron $j$'s shift on a domain, in units of its *single-position* standard deviation
#   (Cohen's $d$, as in v2), at least 1 at its best domain, and at least half of it removed by
#   mean-ablating the context set alone, every other head intact. How many neurons the second
#   condition removes is reported; a criterion that removes almost none is said to.
# - **Fresh documents.** A CONFIRM set of held-out documents that no earlier evaluation read,
#   listed by key in a manifest written before any forward pass on them; CAL documents give the
#   token frequencies $p_D$ and the ablation means, as before.
# - **Baselines, on the same truth and resamples.** The bag-of-tokens response above; the score's
#   own $|d_j|$ without the context share; the direct path alone; and the paper's
#   $\mathrm{top}[j]$.
# - **Statistic and verdict.** $\Delta = \mathrm{AUC}(\text{score}) - \max_b \mathrm{AUC}(b)$, the
#   best baseline taken inside each resample of a paired cluster bootstrap (2000 resamples over
#   documents within domains, and over neurons). The lower bound of the 95% interval above 0:
#   *adds something*; the upper bound below 0: *baseline better*; otherwise *no difference shown*,
#   and *equivalent within 0.05* when the whole interval lies inside $[-0.05, 0.05]$. Whether the
#   score finds context neurons at all is v2's question, asked again as a secondary verdict.
#
# The protocol's question, as it stands in the file:

# %%
from context_neurons.verdict.protocol import load_protocol_v3

protocol_v3 = load_protocol_v3()
print(wrapped(f"{protocol_v3.name} ({protocol_v3.short_kind}), registered "
              f"{protocol_v3.registered_date}: {protocol_v3.question}"))
for name, rule in protocol_v3.primary.rules.items():
    print(wrapped(f"- {name.replace('_', ' ')}: {rule}"))

# %% [markdown]
# **The context set.** Each head with the measures the rule reads; `prev. (cal. text)` and
# `prev. (CAL)` are its mean attention to the previous token on the calibration text and on the
# domains' calibration windows:

# %%
from dataclasses import asdict

from context_neurons.verdict.v3_result import V3Evaluation

seed0 = evaluation_v3.get("trained-seed0") if evaluation_v3 else None
if isinstance(seed0, V3Evaluation):
    per_head = pd.DataFrame([asdict(m) for m in seed0.context_set.measures]).set_index("head")
    show_table(per_head[["group", "fixed_group", "kernel_n_eff", "content_sd",
                         "previous_share_calibration", "previous_share_cal_windows",
                         "in_context_set"]].rename(columns={
                   "fixed_group": "group with the fix", "kernel_n_eff": "n_eff",
                   "content_sd": "content sd", "previous_share_calibration": "prev. (cal. text)",
                   "previous_share_cal_windows": "prev. (CAL)", "in_context_set": "in the set"}),
               "protocol v3: each layer-0 head, its taxonomy group before and after the fix, and "
               "whether it is in the context set", model=loaded.title, decimals=2)
    print(f"context set: {list(seed0.context_set.heads)}")
else:
    print("not computed on this machine (no held-out documents): see the stored page.")

# %% [markdown]
# **The truth, the baselines and the primary verdict.**

# %%
from context_neurons.plotting.training import plot_baselines
from context_neurons.verdict.v3_report import baseline_records, truth_lines

if isinstance(seed0, V3Evaluation) and seed0.primary:
    for line in truth_lines(seed0):
        print(wrapped(line))
    show_table(pd.DataFrame(baseline_records(seed0.primary)).T.rename_axis("score"),
               "protocol v3: the frequency-aware score and the four registered baselines "
               "against the truth; AUC and AUC(score) minus it, paired 95% intervals",
               model=loaded.title)
    print(wrapped(f"PRIMARY: {seed0.primary.words()}"))
    figure = plot_baselines(
        seed0.primary, protocol_v3.primary.equivalence_margin,
        title=f"Figure 8.7. {loaded.title}: protocol v3, the score against the baselines")

# %% [markdown]
# *Figure 8.7: left, the AUC of the frequency-aware score and of each baseline against protocol
# v3's truth; right, the score's AUC minus each baseline's, with paired 95% cluster-bootstrap
# intervals; dotted: the equivalence margin (trained model).* The primary verdict compares the
# score with the best baseline in each resample, so it can only be as favourable as the closest
# comparison on the right.
#
# **The secondary verdicts, sensitivities and what is not yet run.** The secondary verdicts ask
# v2's question (does a score find context neurons, by fixed thresholds on AUC, $\rho$ and
# precision) on v3's truth. The sensitivities change one rule each and carry no verdict. Domains
# with too few CONFIRM documents are reported one by one, never pooled, and the models the
# protocol registers for replication are listed whether or not they exist yet.

# %%
from context_neurons.verdict.v3_report import detail_lines

if isinstance(seed0, V3Evaluation) and seed0.primary:
    for line in detail_lines(seed0):
        print(wrapped(line))

# %% [markdown]
# How to read it. The primary verdict is about the *decomposition*: whether splitting each
# neuron's predicted shift into the context set's part and the rest ranks the context neurons
# better than the cheapest predictors that do without that split. The secondary verdict is about
# the *score*: whether it finds them at all. The two can differ, and the page prints both. A
# sensitivity that favours the score where the primary comparison does not is not a verdict: it
# was registered as a sensitivity, and reading it as the answer would be choosing the rule after
# seeing the numbers.
#
# **The replications.** The protocol registers two more models, with every rule unchanged: the
# seed-0 command with `--seed 1`, and a model whose layer 0 has GPT-2 Small's shape. The seed-1
# model was trained on a lent GPU and ships beside the seed-0 model
# (`assets/trained-model-seed1`). Its v3 evaluation takes about four minutes on one core, so it
# is not run on this page: `python -m context_neurons v3 --model trained-seed1 --store`
# computed it and stored it beside the weights, and it is read back only while those weights and
# the protocol files are the ones it was computed from (their SHA-256 are in the file).
#
# The GPT-2-shaped model (2 blocks, $d_\text{model} = 768$, 12 heads, $d_\text{mlp} = 3072$,
# context 1024, GPT-2's tokenizer) was trained on a lent H100 from the same corpora. Its weights
# (107 MB) could not leave that machine, so v3 ran there, on the GPU rather than on the CPU path
# the other results use (`scripts/device_jobs.sh` step 2). Its training records and that result
# ship in `assets/gpt2-layer0-shape`, labelled with the device, and are checked against the
# protocol files only, since the weights are not here to hash. The table says which result was
# computed in this run and which is stored:

# %%
from context_neurons.verdict.v3_report import replication_rows, source_lines

if evaluation_v3:
    show_table(pd.DataFrame(replication_rows(evaluation_v3)).T.rename_axis("model"),
               "protocol v3 on every registered model: seed 0 computed here, the others stored "
               "or pending", model="trained models (seeds 0 and 1, GPT-2-shaped)")
    for line in source_lines(evaluation_v3):
        print(wrapped(line))

# %% [markdown]
# A replication *replicates* when its primary verdict is seed 0's. Two seeds of the same recipe
# are two draws of one training procedure, not two architectures: agreement says the verdict is
# not an accident of one initialisation, and disagreement says how much of it is. A model whose
# primary comparison is *not testable* (its truth holds fewer neurons than the protocol's
# minimum, or its context set is empty) can neither replicate nor contradict seed 0, and the
# table shows "-" in that column for it. For
# the GPT-2-shaped model, the verdict lines at the top of the page say how many of the neurons
# the effect size selects its context criterion removes. Its stored result is from a retraining
# on a lent GPU (2026-11-28, the same command; GPU training is not bit-reproducible): its taxonomy
# found two contextual heads where the first training's found one, and still its context
# criterion removes almost every neuron the effect size selects, so that v3's truth stays below
# the protocol's minimum and the primary comparison is not testable (the verdict lines at the top
# of the page give the counts). That is a statement about this model and this protocol's truth,
# not about the score; the registered sensitivities (in `discovery_evaluation_v3`) are not
# verdicts.
#
# ## 8.9 How the structure appears during training
#
# The training command saved checkpoints at log-spaced steps, and `development.json` (written
# from them by `context_neurons.training.development.summarize_run`, shipped with the model)
# holds the method's own measurements of each: the taxonomy, the previous-token heads, the neurons
# found, and the truth from activations under the old rule and the protocol's additive rule. The
# shipped file was written before chapter 2's previous-token rule, so its `contextual` column is
# the taxonomy without that rule (as v1 and v2 read it); the `prev.-token` column, measured on
# EVAL windows, shows where the rule would move a head. `summarize_run` applies the rule now, so a
# file written again from the checkpoints would differ there. Both runs' files were also written
# before the fix of the denominators' frame (section 8.11), so their counts of neurons found are
# those of the circuit read in the destination frame; the checkpoints are gone, so they stay.

# %%
from context_neurons.plotting.training import plot_development
from context_neurons.training.development import CHECKPOINT_COLUMNS, CHECKPOINT_COUNTS
from context_neurons.training.development import DEVELOPMENT_FILE, checkpoint_table

development = json.loads((TRAINED_DIR / DEVELOPMENT_FILE).read_text())
show_table(checkpoint_table(development), "the checkpoints: held-out loss, contextual and "
           f"previous-token heads, and neuron counts ({CHECKPOINT_COLUMNS})", model=loaded.title,
           decimals=3, formats={c: 0 for c in CHECKPOINT_COUNTS})
figure = plot_development(development, title=f"Figure 8.8. {loaded.title}: development")

# %% [markdown]
# *Figure 8.8: over training (log axis), each head's kernel width and content spread, and the
# neuron counts (trained model; squares mark a head the taxonomy calls contextual at that
# checkpoint).* At initialisation every head is uniform and content-blind; the table shows when
# the previous-token head and the contextual heads appear, and how the truth grows with them.
#
# **The seed-1 replication's development.** Its `development.json` was written on the GPU by the
# same `summarize_run`, after chapter 2's previous-token rule, so its `contextual` column already
# leaves a previous-token head out. The sentences below read both files alike: each last
# checkpoint's contextual heads, and which of them are previous-token heads.

# %%
from context_neurons.models.loading import TRAINED_SEED1_DIR
from context_neurons.training.development import development_findings

development_seed1 = json.loads((TRAINED_SEED1_DIR / DEVELOPMENT_FILE).read_text())
show_table(checkpoint_table(development_seed1), "the seed-1 replication's checkpoints "
           f"({CHECKPOINT_COLUMNS})", model="trained model, seed 1", decimals=3,
           formats={c: 0 for c in CHECKPOINT_COUNTS})
for seed, record in (("seed 0", development), ("seed 1", development_seed1)):
    for line in development_findings(record):
        print(wrapped(f"{seed}: {line}"))

# %% [markdown]
# **Protocol v3's view of the checkpoints.** v3's columns were added after both runs'
# intermediate checkpoints were gone (only the final weights ship; seed 1's checkpoints stayed
# on the lent GPU machine). They come from the weights that remain: the initialised model (step
# 0, rebuilt from the run's configuration and seed) and the shipped model, added by
# `python -m context_neurons development RUN_DIR --v3-only`. The other steps say that
# their weights were not kept; a run of the GPU jobs from now on (`scripts/device_jobs.sh`,
# which write both views from the kept checkpoints on the GPU machine) gets every row. The last
# row's truth is the point value of the v3 truth in §8.8.

# %%
from context_neurons.training.development import v3_checkpoint_table

show_table(v3_checkpoint_table({"seed 0": development, "seed 1": development_seed1}),
           "protocol v3's context set and truth (its point value) at each checkpoint",
           model="trained model, seeds 0 and 1")
#
# ## 8.10 What this model says about the method
#
# The verdicts, and what they mean for chapters 4 to 6, in words computed from this run. The
# confirmatory one first:

# %%
from context_neurons.verdict.evaluate import score_readings
from context_neurons.verdict.v3_report import decomposition_readings

if isinstance(seed0, V3Evaluation) and seed0.primary:
    for sentence in decomposition_readings(seed0):
        print(wrapped(sentence))
if evaluation is not None and evaluation.primary is not None:
    for name, result in protocols.items():
        print(wrapped(f"Protocol {name}, trained model:"))
        for sentence in score_readings(result):
            print(wrapped(sentence))
    print(wrapped(control.reading()))
else:
    print("not computed on this machine (no held-out documents): see the stored page.")

# %% [markdown]
# The bag algebra of chapter 4, weighted by the domains' token frequencies, predicts which
# neurons the heads move and by how much (the $\rho$ above, against the neurons-permuted control
# of section 8.6). Whether that makes the score a discovery method turns on the truth: under
# v1's broad truth no score could be called positive, and v2's truth was registered after v1's
# numbers were seen. Protocol v3 asks the sharper question on documents neither had read: a
# score can find context neurons (its secondary verdict) without the decomposition being what
# finds them (its primary verdict), when a baseline that runs the model on each token alone
# ranks them as well. The verdicts under each protocol are those printed above.
#
# For chapters 4 to 6 this means: the contextual circuit (chapter 4) is *shown* here, on a model
# nobody wrote, in the form of its expected value on a domain, which the frequency-aware score
# uses; the discovery rule of chapter 5, $\mathrm{top}[j] \ge \theta$, is shown to recover
# planted neurons on the planted model, where we wrote the structure in its own terms, and is
# tested here against a truth it did not define, with the verdict above; the accuracy measures
# of chapter 6 were computed on the planted model, and on this model the whole approximation's
# accuracy is the `median_pearson_r` row of section 8.2, taken apart in section 8.11. Claims about GPT-2 Small are the
# paper's (Gibson 2025) until `CONTEXT_NEURONS_MODEL=gpt2` runs the book there.
#
# ````{exercise} Ablate every head that averages over the context
# :label: ex-ch08-all-heads
#
# *Difficulty: easy, 10 minutes.* The old rule ablates only the taxonomy's contextual heads.
# Measure it again ablating every
# layer-0 head whose kernel is not local (`taxonomy.shapes`), and compare the number of context
# neurons by activation. What does the difference say about where this model's context runs?
#
# ```{hint}
# :class: dropdown
#
# `act.activation_truth(model, windows, labels, heads)` takes the heads to ablate; the first test
# (separation) does not depend on them.
# ```
# ````

# %% [markdown]
# ```{solution-start} ex-ch08-all-heads
# :class: dropdown
# ```

# %%
import torch

broad = [h for h in taxonomy.heads if taxonomy.shapes[h] != "local"]
truth_broad = act.activation_truth(model, windows, labels, broad) if windows else None
if truth_broad is None:
    print("this exercise needs the held-out documents (the offline corpora)")
else:
    print(wrapped(f"non-local heads {broad}: {len(truth_broad.context_neurons())} context neurons "
                  f"by activation (against {len(context)} with the contextual heads only)"))
if truth is not None:  # the first test (separation) reads the unablated model, whatever is ablated
    assert torch.equal(truth_broad.auc, truth.auc)
    print("check passed: only the second test depends on the heads ablated")

# %% [markdown]
# ```{solution-end}
# ```
#
# ````{exercise} A discovery score that ranks
# :label: ex-ch08-rank
#
# *Difficulty: open-ended, 45 minutes.* Take the truth of the previous exercise (all non-local
# heads ablated) and a circuit built from
# the same heads. Measure how well $\mathrm{top}[j]$ ranks the context neurons by activation above
# the others (`act.score_auc`). Then propose a weights-only variant (for example, the same
# robust score over the tokens that occur in the calibration text only, rather than the whole
# vocabulary; or one that divides each contribution by the loudness $|e(t)|$ of Figure 8.5) and
# measure it the same way. Keep the truth out of the score's construction.
#
# ```{hint}
# :class: dropdown
#
# `disc.contributions(circuit, model, token_ids=...)` gives every neuron's contribution of any
# set of tokens in one matrix product; the frequency-aware score of section 8.4 is one answer to
# compare yours with.
# ```
# ````

# %% [markdown]
# ```{solution-start} ex-ch08-rank
# :class: dropdown
# ```

# %%
broad_circuit = results.method.circuit(broad)  # built once in the run (protocol v1's secondary set)
broad_scores = results.method.scores(broad)
seen = torch.unique(broad_circuit.calibration.tokens[1:])  # tokens of the calibration text
contributions = disc.contributions(broad_circuit, model, token_ids=seen)  # [neuron, token]
z = contributions - contributions.median(1, keepdim=True).values
z = z / (1.4826 * z.abs().median(1, keepdim=True).values)
seen_score = z.abs().topk(broad_scores.k, dim=1).values.mean(1)
if truth_broad is not None:
    broad_truth = truth_broad.context_neurons()
    print(f"{len(broad_truth)} context neurons by activation (all non-local heads ablated)")
    print(f"AUC of top[j] over the vocabulary: {act.score_auc(broad_scores.top, broad_truth):.3f}")
    seen_auc = act.score_auc(seen_score, broad_truth)
    print(wrapped(f"AUC of the score over the calibration text's {len(seen)} tokens: "
                  f"{seen_auc:.3f} (0.5: no ranking)"))
    # a rank statistic: reversing the score turns AUC into 1 - AUC (ties counted half)
    assert abs(seen_auc + act.score_auc(-seen_score, broad_truth) - 1) < 1e-6
    print("check passed: the AUC is a rank statistic (AUC of -score = 1 - AUC)")

# %% [markdown]
# ```{solution-end}
# ```
#
# (ch-trained-failure)=
# ## 8.11 Why the approximation failed here, and what it assumes
#
# Chapter 6's accuracy measures hold on the planted model; on this model the approximation's
# FVU (section 8.2) is above 1. Two questions: is that the model, or the code? And which of the
# method's assumptions does the model break?
#
# **The frame of the denominators.** A content score $\log c_n(t) = q_n \cdot E[n, t] / \sqrt{d}$
# carries a part $a(n)$ that depends (almost: the key's LayerNorm scale varies a little with the
# token) on the destination position alone, the position and bias parts of $E[n, t]$ read by the
# query $q_n$, shared by every source token. The softmax cancels it. The bag does not: it weighs
# token $t_i$ by $c_{n_\mathrm{ref}}(t_i)$, read at the reference position, and divides by
# $D_h(n)$. Read $D_h(n)$ with $c_n$ (the *destination frame*, what this package did before issue
# 50) and the bag's weights sum to $D_\mathrm{ref}(n) / D_\mathrm{dest}(n) \approx
# e^{a(n_\mathrm{ref}) - a(n)}$ instead of 1; read it with $c_{n_\mathrm{ref}}$ (the *reference
# frame*, the package's default now) and they sum to 1 on the calibration text by construction
# (tested against the hooks in `tests/unit/test_formulas.py`). Below, for both frames on the same
# texts and neurons: the accuracy, by position band, and with only one contextual head
# approximated (every other piece exact); each head's *drift*, the range over the calibration
# text of $\log D_\mathrm{ref}(n) - \log D_\mathrm{dest}(n)$; then, in the reference frame, the
# median FVU with one piece of the approximation at a time replaced by its exact value (through
# the model's hooks; `context_neurons.evaluation.error_terms`). The seed-1 replication runs
# beside seed 0.

# %%
from context_neurons.discovery import THETA
from context_neurons.evaluation.failure import approximation_failure
from context_neurons.method import MethodValues
from context_neurons.models import load_model
from context_neurons.models.loading import TRAINED_SEED1_DIR
from context_neurons.plotting.circuit import plot_frame_drift
from context_neurons.text.windows import evaluation_windows

failures = {}  # each trained run's frames and pieces, on 10 evaluation texts
for label, run in (("trained model (seed 0)", model),
                   ("trained model, seed 1", load_model(str(TRAINED_SEED1_DIR)).model)):
    method = results.method if run is model else MethodValues(run)
    run_heads = method.contextual_heads()
    texts = [w.to(run.cfg.device) for w in evaluation_windows(run.tokenizer, 10)[0]]
    found = method.scores(run_heads).found(THETA)
    failures[label] = approximation_failure(run, run_heads, texts, found, label)
    for line in failures[label].findings():
        print(wrapped(line))
seed0 = failures["trained model (seed 0)"]
figure = plot_frame_drift(seed0.shift, seed0.heads,
                          title=f"Figure 8.9. {loaded.title}, calibration text")

# %% [markdown]
# *Figure 8.9: on the calibration text, the log of the sum of the bag's weights when the
# denominators are read in the destination frame, per contextual head (trained model, seed 0).
# In the reference frame every line is 0.* A drift of $x$ nats scales a head's share of the bag
# by up to $e^x$ from one position to another. The lines above show what it did: in the
# destination frame the FVU is largest at the first positions, and with one head approximated
# at a time the heads that drift most (over ten nats) are the ones that blow up, on both seeds;
# in the reference frame each head alone is approximated well. This was a flaw of the method's code, not a property of
# the model: the paper's notation leaves the frame of $\hat D_h$ implicit, and the planted model,
# whose content scores hardly depend on the destination's position, is barely affected (chapter
# 6). The first hypothesis, that heads using no `<|endoftext|>` sink lose their per-position
# denominators, was tested on the way and refuted: by its own measure (mean attention to
# position 0 at positions $\ge 32$) the planted model's contextual heads use a sink no more than
# this model's (`sink` below, and chapter 6's table), yet per-position denominators beat the
# constant ones there.
#
# With the frame fixed, FVU stays above 1 on both seeds. The pieces say where the rest comes
# from: each text's own denominators instead of the calibrated ones lower it only a little, and
# LN2's exact scale hardly changes it; the **other heads**, which the approximation writes as attending to the
# current token only, carry most of it: with their exact output the FVU falls several-fold (the
# lines above). On this model a previous-token head sits outside the contextual group, and the
# approximation does not model it.
#
# **The assumptions, head by head.** The main job measures what the approximation assumes of
# each layer-0 head on its evaluation texts (`context_neurons.assumptions`), each quantity
# against a limit stated with its reason before any model was measured with it; two changes made
# after the first measurements are labelled *post hoc* in the list below the table.

# %%
from context_neurons.assumptions import LIMITS

check = results.assumptions  # measured once, by the main job, on its evaluation texts
print(wrapped(f"measured by the main job on its {check.n_texts} evaluation texts:"))
for line in check.findings():
    print(wrapped(line))
show_table(check.table(),
           "what the approximation assumes of each layer-0 head, measured", model=loaded.title,
           decimals=3)
for limit in LIMITS.values():
    print(wrapped(f"- {limit.statement()}"))

# %% [markdown]
# The same check ran on the model with GPT-2 Small's layer-0 shape on a lent GPU (its weights
# could not come back; the record is stored with the package and labelled so). That record was
# written before `destination_tv`'s correction, so its TV is the first definition's (against the
# decomposed pattern), printed as stored:

# %%
from context_neurons.verdict.v3_stored import WEIGHTS_NOT_KEPT_DIRS

stored = json.loads((WEIGHTS_NOT_KEPT_DIRS["gpt2-layer0-shape"] / "summary.json").read_text())
view = stored.get("approximation", {})
print(wrapped(f"stored record of a lent GPU ({stored['device']}), {view.get('texts')} held-out "
              f"texts of that model's training split:"))
for frame, numbers in view.get("frames", {}).items():
    per_position = numbers.get("per_position", {})
    r, fvu = (per_position.get(k, float("nan")) for k in ("median_pearson_r", "median_fvu"))
    print(wrapped(f"  {frame} frame: median r {r:.3f}, median FVU {fvu:,.4g}"))
for line in view.get("assumptions", {}).get("findings", ["no assumptions check stored"]):
    if "(contextual)" in line or line.startswith("LN2"):  # the bag's heads, and LN2
        print(wrapped(f"  {line}"))

# %% [markdown]
# **What this connects.** Both discovery scores of this chapter read the contextual heads through
# the bag: $\mathrm{top}[j]$ through the extended embeddings, the frequency-aware score through
# their average on a domain. Where a contextual head misses the bag's assumptions (its
# denominators stray from the calibration's by more than a quarter, or its pattern moves with the
# destination token), the bag stands for that head only roughly, and a score built on it inherits
# the error; where the other heads carry context the bag does not model, a neuron can be a
# context neuron by activation while the bag says nothing about it. That is consistent with the
# verdicts above (the decomposition's share adds nothing over the baselines on these models); it
# does not prove them: the check says which assumptions hold, not how much each matters for
# accuracy or what a score finds. One more thing the frame explains, not yet mended: the
# frequency-aware score's share of `<|endoftext|>` (section 8.4's $\beta_n$) divides the sink's
# weight read with $c_n$ by a token average read with $c_{n_\mathrm{ref}}$, the same mix of frames;
# the registered protocols compute it as registered, and a corrected score would be an amendment
# to them, registered before its numbers. On GPT-2 Small, the paper's model, the published build
# runs the same check (`reproduce --model gpt2`, chapter 6's section 6.5); whether GPT-2 meets the
# assumptions these models miss is expected from the paper's accuracy (median FVU 0.14), not
# shown here.

# %% [markdown]
# (ch08-gpt2)=
# ## 8.12 The paper's model under its own protocol
#
# Everything above judges discovery on models trained here. The paper's claim is about GPT-2
# Small, whose weights this project's machines cannot load; so a third protocol,
# `discovery-verdict-gpt2` (`src/context_neurons/assets/protocol/`), was registered before any GPT-2
# number existed, by construction. It asks v3's question on GPT-2 Small with v3's truth, scores,
# baselines, paired bootstrap and thresholds unchanged, on documents of the offline corpora that no
# chapter, calibration text or main-job reader consumes (split by a hash rule written in the
# file: UNIGRAM documents for the unigram counts and the ablation means, CONFIRM documents for the
# truth). A second registered question puts **the paper's claim in its own terms**: among the
# neurons that $\mathrm{top}[j] \ge \theta$ finds, how many are context neurons by activation
# (precision against the base rate, their ratio the *enrichment* $E$, and recall, each with its
# interval), and, when $\theta$ finds nearly every neuron, the same at the paper's count of 100.
# GPT-2 Medium, Large and XL are replications, each reported beside Small, never pooled.
#
# The cell computes it when the book is built on a GPT-2 model with the corpora present (the
# published website fetches them first; in Colab the set-up cell does); otherwise it says what is
# missing. A stand-in loaded from a local directory is labelled a plumbing check, never GPT-2's
# result. The trained models' v3 results are printed beside it, each labelled with its protocol.

# %%
from context_neurons import config
from context_neurons.reproduce.findings import findings_of, shipped_findings
from context_neurons.verdict.gpt2 import page_lines

first, *rest = page_lines(config.model_name())  # the model the other chapters of this build ran on
print(wrapped(first))
for line in rest:
    print(wrapped(f"- {line}"))
print(wrapped("Protocol v3 on the models trained here (beside it, never combined):"))
for found in findings_of(evaluation_v3) if evaluation_v3 else shipped_findings():
    print(wrapped(f"- {finding_sentence(found, emphasis='')}"))

# %% [markdown]
# ## Summary
#
# - The approximation's FVU in the hundreds of thousands on this model was the denominators read
#   in another frame than the bag's numerators (section 8.11), fixed in the package; what remains
#   above 1 is mostly the heads outside the bag, and the assumptions check says, head by head,
#   which of the method's assumptions this model misses.
# - A model trained here, whose structure nobody wrote, with a previous-token head and heads the
#   taxonomy calls contextual, loads through GPT-2's loader and runs through every chapter's
#   method with groups, heads and neurons from its own weights.
# - Under the paper's assumptions a neuron's expected input on a domain is a frequency-weighted
#   average of its token contributions; that gives a score from the weights, one calibration text
#   and the domains' unigram counts (so not weights-only: it needs labelled text per domain),
#   beside the paper's $\mathrm{top}[j]$.
# - Both were scored against a truth in additive units, by protocol v1 (committed before any
#   verdict) and protocol v2 (committed after v1's verdicts, before its own numbers); on the
#   planted model the new score recovers what $\mathrm{top}[j]$ recovers when its domains are the
#   planted topics.
# - On GPT-2 Small, the paper's model, protocol `discovery-verdict-gpt2` (section 8.12, registered
#   before any GPT-2 number) asks the same question and the paper's own claim in its terms; it is
#   computed where the book runs on GPT-2 with the corpora (the published website), not on the
#   pages built here.
# - Protocol v3, the confirmatory test, compared the score on fresh documents with four baselines
#   that do without the decomposition's context share, the model run on each token alone among
#   them, through a paired bootstrap interval of the difference in AUC, on seed 0 and on two
#   replications (seed 1, and a model with GPT-2 Small's layer-0 shape). Its answer is the
#   chapter's result, in sentences from this run's results (the replications' stored):

# %%
for found in findings_of(evaluation_v3) if evaluation_v3 else shipped_findings():
    print(wrapped(f"- {finding_sentence(found, emphasis='')}"))

# %% [markdown]
# Every verdict as the protocols word it, v3's first:

# %%
if evaluation_v3:
    for sentence in verdict_sentences_v3(evaluation_v3):
        print(wrapped(f"- protocol v3, {sentence}"))
if evaluation is not None and evaluation.primary is not None:
    for name, result in protocols.items():
        for score_name, entry in result.primary.scores.items():
            print(f"- protocol {name.split()[0]}, {score_name.replace('_', '-')}: "
                  f"{entry.verdict} (AUC {with_interval(entry, 'auc')})")
else:
    print("not computed on this machine (no held-out documents): see the stored page.")

# %% [markdown]
# **Back to:** {ref}`ch-evaluation` for the accuracy measures, {ref}`ch-neurons` for the score.
