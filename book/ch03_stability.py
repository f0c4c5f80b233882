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
# (ch-stability)=
# # 3. Why the denominators are stable (Figures 3 and 4)
#
# Chapter 1 wrote a layer-0 attention pattern as
#
# $$
# A_{n,i} = \frac{\mathrm{pos}_n(i)\, c_n(t_i)}{D_n}, \qquad
# D_n = \sum_{j \le n} \mathrm{pos}_n(j)\, c_n(t_j).
# $$
#
# The numerator is a fixed kernel times a fixed weight per token. Only the denominator $D_n$
# couples a source token to all the others. If $D_n$ were a constant $\hat D$, a head's output
# would be a **kernel-weighted bag of tokens**,
# $\sum_i \mathrm{pos}_n(i)\, \frac{c_n(t_i)}{\hat D}\, v(t_i)$: a linear function of which
# tokens appeared recently, ready to be read by the MLP neurons of chapter 4. This chapter
# explains why, for the contextual heads, $D_n$ is indeed nearly constant: it is an average over
# many tokens, and averages concentrate. It reproduces Gibson's Figures 3 and 4, puts the
# theory's prediction beside the measured spread for every head, and shows where the theory's
# assumption of independent tokens fails.
#
# ```{admonition} Learning objectives
# :class: tip
# After this chapter you can
# - compute a head's denominator $D_n$ across positions and texts;
# - derive the mean and variance of $D_n$ when tokens are independent, and see that the
#   relative spread scales as $1/\sqrt{n_{\mathrm{eff}}}$;
# - apply Hoeffding's and Chebyshev's inequalities to $D_n$ and judge how tight they are;
# - explain why contextual heads have stable denominators and detokenization heads do not, and
#   how the density of stop words moves the denominators of heads 6 and 8.
# ```
#
# **Prerequisites:** {ref}`ch-decomposition` and {ref}`ch-taxonomy`; the mean and variance of a
# sum of independent random variables.

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
# ## 3.1 The denominator of a text
#
# We fix the destination token to `' the'` at every position $n$ (the text's own token at $n$ is
# replaced), so that $D_n$ measures the *context* and not the current token:
#
# $$
# D_n = \sum_{j < n} \mathrm{pos}_n(j)\, c_n(t_j) + \mathrm{pos}_n(n)\, c_n(\texttt{' the'}).
# $$
#
# The texts are long documents of ordinary English prose from the offline corpora (the Brown
# corpus, MASC, WikiText and State of the Union addresses; OpenWebText in the paper), cut to at
# most 1024 tokens. The heads are the contextual heads as computed in {ref}`ch-taxonomy`.

# %%
from context_neurons import stability as st
from context_neurons import taxonomy as tx
from context_neurons.data import corpus_windows

PROSE = ("nltk_brown_us", "nltk_masc", "wikitext2_pytorch_examples", "nltk_state_union_us")
windows, labels, report = corpus_windows(model.tokenizer, PROSE, n=1000, min_tokens=512)
full_length = [i for i, w in enumerate(windows) if len(w) == model.cfg.n_ctx][:100]
taxonomy = tx.classify_heads(model)
contextual = taxonomy.groups["contextual"]
print(f"{len(windows)} texts of at least 513 tokens ({report})")
print(f"{len(full_length)} of them of the full 1024 tokens, for Figure 3")
print(f"contextual heads (computed): {contextual}   (paper: {tx.PAPER_GROUPS['contextual']})")

# %% [markdown]
# Gibson's Figure 3 divides each text's denominator $D_{h,i}$ by its average $c_{h,i}$ over many
# texts (1000 in the paper, the full-length texts here), so that a flat line at 1 means "this
# text's denominator is the typical one". We compute $D$ at every fourth position of every
# full-length text, in log space (`stability.denominators_over_positions`).

# %%
from context_neurons.plotting_stability import plot_relative_denominators

positions, log_d = st.denominators_over_positions(
    model, [windows[i] for i in full_length], heads=contextual, stride=4
)
relative = st.relative_denominators(log_d)
figure = plot_relative_denominators(
    relative, contextual, show=[0, 1, 2, 3], labels=[labels[i] for i in full_length],
    positions=positions,
)
print(f"relative denominators over {relative.shape[0]} texts and {relative.shape[2]} positions:")
for k, head in enumerate(contextual):
    values = relative[:, k, positions >= 100]  # after the first 100 tokens
    print(f"  head {head:2d}: 90% of D/c within [{values.quantile(0.05):.3f}, "
          f"{values.quantile(0.95):.3f}]")

# %% [markdown]
# *Figure 3 (reproduced): $D_{h,i}/c_{h,i}$ against position $i$ for four texts and the six
# contextual heads, $c_{h,i}$ the mean over the full-length texts.* Every curve stays close to 1
# along the whole text (the printed ranges hold 90% of all texts and positions): whatever the
# text is about, each contextual head divides by nearly the same number. The curves wander
# slowly rather than jumping, because neighbouring positions share most of their kernel.
#
# ## 3.2 Figure 4: the denominator at $n = 512$ across texts
#
# Figure 4 fixes the position at the middle of the context, $n = n_{ctx}/2 = 512$, and looks at
# the distribution of $D_h$ over all texts. `stability.denominator_study` computes it, together
# with everything the theory of the next sections needs; denominators are reported in units of
# $\mu$, the mean content weight defined in section 3.3.

# %%
from context_neurons.plotting_stability import plot_denominator_histograms

study = st.denominator_study(model, windows, n=model.cfg.n_ctx // 2, labels=labels)
figure = plot_denominator_histograms(study, contextual)

# %% [markdown]
# *Figure 4 (reproduced): histograms of $D_h/\mu$ at $n = 512$ over the texts, for the six
# contextual heads (title: the coefficient of variation, standard deviation over mean). Black
# steps: synthetic texts of independent tokens (section 3.3); dashed: the normal distribution
# with the independent-token model's mean and standard deviation.* The denominators are tightly
# concentrated: their coefficient of variation (in the titles) is a few per cent. The theory below
# predicts the width of each histogram from the head's kernel and content weights alone.
#
# ## 3.3 The independent-token model
#
# Suppose the source tokens $t_j$ were drawn independently from a token distribution, and write
# $\mu$ and $\sigma^2$ for the mean and variance of the content weight $c_n(t)$ under it. Since the
# kernel sums to one,
#
# $$
# \mathbb{E}[D_n] = \mu \sum_{j} \mathrm{pos}_n(j) = \mu, \qquad
# \mathrm{Var}[D_n] = \sigma^2 \sum_j \mathrm{pos}_n(j)^2 = \frac{\sigma^2}{n_{\mathrm{eff}}},
# \qquad
# \frac{\mathrm{sd}[D_n]}{\mathbb{E}[D_n]} = \frac{\sigma/\mu}{\sqrt{n_{\mathrm{eff}}}} .
# $$
#
# The relative spread of the denominator is the relative spread of a single content weight,
# divided by the square root of the kernel width $n_{\mathrm{eff}}$ of {ref}`ch-taxonomy`.
# Choices made here: the token distribution is the pooled unigram distribution of our texts; the
# BOS token at position 0 and the destination at $n$ are fixed, so their terms enter the mean but
# not the variance (the sums above then run over $0 < j < n$; the corrections are negligible for
# the contextual heads at $n = 512$). The table sets, for every head, the prediction beside the
# spread measured on the texts and on synthetic texts of independent tokens drawn from the same
# distribution.

# %%
table = study.table(prob=0.05)
table["group"] = [taxonomy.group_of(h) for h in table.index]
columns = ["group", "n_eff", "sigma/mu", "CV predicted", "CV texts", "CV i.i.d."]
print(table[columns].round(3).to_string())

# %%
from context_neurons.plotting_stability import plot_concentration

figure = plot_concentration(table, taxonomy.groups)

# %% [markdown]
# *Figure 3.3: coefficient of variation of $D$ across texts (filled, coloured by group) against
# kernel width, for all twelve heads, with the independent-token prediction
# $\sigma/(\mu\sqrt{n_{\mathrm{eff}}})$ (open circles).* What to see:
#
# - **Contextual heads concentrate.** Their kernels average over tens of tokens
#   ($n_{\mathrm{eff}}$ in the table) and their content weights vary only moderately
#   ($\sigma/\mu$), so dividing by $\sqrt{n_{\mathrm{eff}}}$ leaves a spread of a few per cent.
# - **Detokenization heads do not.** With $n_{\mathrm{eff}}$ of a few tokens there is nothing to
#   average: $D_n$ is essentially the content weight of the previous token or two, and inherits
#   its full spread, which is also larger because these heads care more about token identity.
# - **Duplicate heads stretch the model.** Their content weight is huge for one token, the
#   destination's own: with `' the'` at $n$, $D_n$ mostly counts the earlier copies of `' the'`
#   under the kernel. Its spread is large, and it exceeds the prediction where the frequency of
#   `' the'` varies between texts more than independent draws allow.
# - Where the texts' spread exceeds the i.i.d. spread, real text is not a sequence of independent
#   tokens: texts differ in their mix of tokens (their topic, their style), and the content weights
#   see that. Section 3.5 shows the largest such effect.
#
# ## 3.4 Tail bounds: Hoeffding and Chebyshev
#
# The variance gives a typical deviation; concentration inequalities bound the probability of a
# large one. If every content weight lies in $[a, b]$, **Hoeffding's inequality** for the weighted
# sum gives
#
# $$
# P(|D_n - \mu| \ge t) \le 2 \exp\left(-\frac{2t^2}{(b - a)^2 \sum_j \mathrm{pos}_n(j)^2}\right),
# $$
#
# and from the variance alone, **Chebyshev's inequality** gives
#
# $$
# P(|D_n - \mu| \ge t) \le \frac{\sigma^2 \sum_j \mathrm{pos}_n(j)^2}{t^2} .
# $$
#
# Both shrink with $\sum_j \mathrm{pos}_n(j)^2 = 1/n_{\mathrm{eff}}$. We take $[a, b]$ as the
# smallest and largest content weight among the tokens of our texts. The figure compares the
# bounds with the measured tail probabilities, on the texts and on i.i.d. texts.

# %%
import torch

from context_neurons.plotting_stability import plot_tail_bounds

t = torch.linspace(0.01, 0.6, 60)
tails = {head: study.tails(study.heads.index(head), t) for head in contextual}
figure = plot_tail_bounds(tails)

# %% [markdown]
# *Figure 3.4: $P(|D/\mu - \mathbb{E}| \ge t)$ against $t$ for the six contextual heads (log
# scale): measured on the texts (coloured), on i.i.d. texts (black), and the Chebyshev (dashed)
# and Hoeffding (dash-dotted) bounds.* Both bounds hold on i.i.d. texts, as they must; the check
# below says whether they also hold on the real texts. Chebyshev is the tighter of the two for
# moderate $t$: Hoeffding only
# knows the range $b - a$ of the weights, set by the rarest extreme token, while Chebyshev uses
# their actual spread $\sigma$. For large $t$ Hoeffding's exponential decay wins. The table gives
# the half-width $t$ of an interval that holds $D/\mu$ with probability 95%, from each bound and
# as measured.

# %%
columns = ["group", "t Chebyshev", "t Hoeffding", "t texts", "t i.i.d."]
print(table.loc[contextual + taxonomy.groups["detokenization"], columns].round(3).to_string())
holds = (table.loc[contextual, "t Chebyshev"] >= table.loc[contextual, "t texts"]).all()
print(f"\nChebyshev's 95% half-width covers the measured one for every contextual head: {holds}")

# %% [markdown]
# For the contextual heads the bounds promise a denominator within some tens of per cent of its
# mean with 95% probability, while the measured half-width is smaller still: the bounds are
# guarantees for every distribution with this variance or range, so they are loose for the
# near-normal sums seen here. For the detokenization heads the bounds say nothing useful:
# Hoeffding's half-width is many times the mean itself.
#
# ## 3.5 Keyword density: heads 6 and 8
#
# The independence assumption fails most visibly where a head's content weights separate two
# classes of tokens whose proportions differ between texts. Gibson observes that head 6 up-weights
# keywords and head 8 up-weights stop words. A text dense in stop words then has a *smaller*
# denominator for head 6 and a *larger* one for head 8. We measure, for each text, the share of a
# head's kernel that falls on stop words, $\sum_{j<n} \mathrm{pos}_n(j)\,[t_j \text{ is a stop
# word}]$, and compare ordinary prose with the King James Bible, whose chapters are rich in
# *and*, *the*, *of* and *unto*.

# %%
from context_neurons.plotting_stability import plot_density_effect
from context_neurons.topics import stopword_ids

bible, bible_labels, _ = corpus_windows(model.tokenizer, "bible_kjv", n=200, min_tokens=512)
mixed = windows[:400] + bible
mixed_study = st.denominator_study(model, mixed, n=512, labels=labels[:400] + bible_labels)
stops = torch.tensor(stopword_ids(model.tokenizer))
density = st.kernel_weighted_density(mixed_study, mixed, stops)
corpus = ["Bible (KJV)" if lab.startswith("bible") else "prose" for lab in mixed_study.labels]
is_bible = torch.tensor([c != "prose" for c in corpus])
print("head  corr(stop-word share, log D)  mean D/mu: prose  Bible")
for head in [6, 8] + [h for h in contextual if h not in (6, 8)]:
    k = mixed_study.heads.index(head)
    r = st.correlation(density[:, k], mixed_study.ratio[:, k].log())
    prose_mean = mixed_study.ratio[~is_bible, k].mean()
    bible_mean = mixed_study.ratio[is_bible, k].mean()
    print(f"{head:4d}  {r:+29.2f}  {prose_mean:16.3f}  {bible_mean:5.3f}")

# %%
show = [6, 8] + [h for h in contextual if h not in (6, 8)][:1]
figure = plot_density_effect(density, mixed_study.ratio, corpus, mixed_study.heads, show)

# %% [markdown]
# *Figure 3.5: $D/\mu$ at $n = 512$ against the share of the kernel on stop words, for prose and
# Bible chapters, for heads 6 and 8 and one other contextual head.* Heads 6 and 8 respond to the
# stop-word density in opposite directions, and the Bible sits at the stop-word-rich end; another
# contextual head does not respond. This is a *systematic* shift, not noise: a head's denominator
# can be calibrated on one kind of text and be off by several per cent on another. The effect
# stays small because the share of stop words itself varies little between texts once averaged
# over a kernel of tens of tokens: the same concentration argument, one level up.

# %%
if loaded.is_planted:
    from context_neurons.planted import LAYER0_HEADS

    for head in (6, 8):
        weight = LAYER0_HEADS[head].stopword_weight
        print(f"planted truth: head {head} adds about {weight:+.1f} to the log content weight "
              f"of stop words")
else:
    print("paper (GPT-2 Small): head 6 up-weights keywords, head 8 up-weights stop words")

# %% [markdown]
# ## 3.6 Exercise
#
# ````{exercise} Predict the spread of a denominator from its kernel
# :label: ex-predict-spread
#
# *Difficulty: medium, 20 minutes.* For the first contextual head, compute by hand the
# independent-token prediction of the coefficient of variation of $D$ at $n = 512$, using only
# `study.kernel` (the kernel $\mathrm{pos}_n(i)$, $i = 0..n$), `study.values(k)` (the content
# weights $c_n(t)/\mu$ of the tokens of the texts) and `study.probs` (their frequencies). Remember
# that positions $0$ (BOS) and $n$ (the destination) are fixed. Compare with the measured
# coefficient of variation across the texts (`study.ratio`).
#
# ```python
# k = study.heads.index(contextual[0])
# sigma = ...        # standard deviation of c/mu under the token distribution
# sum_sq = ...       # sum of pos^2 over the random positions
# cv_predicted = ... # sigma * sqrt(sum_sq) / E[D/mu], with E[D/mu] = study.predicted_mean(k)
# ```
# ````
#
# ```{solution} ex-predict-spread
# :class: dropdown
#
# The variance of one weight is $\sum_t p_t (c_t/\mu - 1)^2$, since the mean of $c/\mu$ is 1. The
# random positions are $0 < j < n$, so the sum of squares leaves out the first and last entries of
# the kernel. The code below computes the prediction and checks it against the package and the
# measurement.
# ```

# %% tags=["hide-input"]
k = study.heads.index(contextual[0])
values, probs = study.values(k), study.probs
sigma = float((probs * (values - (probs * values).sum()) ** 2).sum().sqrt())
sum_sq = float((study.kernel[k, 1:-1] ** 2).sum())
cv_predicted = sigma * sum_sq**0.5 / study.predicted_mean(k)
measured = study.ratio[:, k]
cv_measured = float(measured.std() / measured.mean())
print(f"head {contextual[0]}: predicted CV {cv_predicted:.3f}, measured CV {cv_measured:.3f}")
assert abs(cv_predicted - study.predicted_sd(k) / study.predicted_mean(k)) < 1e-9
assert 0.5 < cv_measured / cv_predicted < 2
print("check passed: the prediction matches the package and the measurement within a factor 2")

# %% [markdown]
# ## Summary
#
# - The denominator $D_n$ is a kernel-weighted average of content weights. For independent
#   tokens its relative spread is $(\sigma/\mu)/\sqrt{n_{\mathrm{eff}}}$.
# - Contextual heads average over tens of tokens with mildly varying weights, so their
#   denominators vary by a few per cent across texts and positions (Figures 3 and 4);
#   detokenization heads average over one or two tokens and their denominators do not concentrate.
# - Hoeffding's and Chebyshev's inequalities turn this into guarantees; Chebyshev is the tighter
#   here, and both hold with room to spare for the contextual heads.
# - Real text is not independent tokens: the density of stop words shifts the denominators of
#   heads 6 and 8 in opposite directions, a systematic effect of a few per cent.
#
# **Next:** chapter 4 replaces each contextual head's denominator by a constant calibrated on one
# text, merges the six heads into one kernel and one extended embedding per token, and uses the
# resulting linear bag of tokens to find the MLP neurons that read it.
