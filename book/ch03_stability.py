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
# # 3. Why the denominators are stable
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
# tokens appeared recently, ready to be read by the MLP neurons of chapters 4 and 5. This chapter
# explains why, for the contextual heads, $D_n$ is indeed nearly constant: it is an average over
# many tokens, and averages concentrate. It reproduces the paper's Figures 3 and 4, puts the
# theory's prediction beside the measured spread for every head, and shows where the theory's
# assumption of independent tokens fails. Symbols are on the notation page ({ref}`notation`,
# section 4).
#
# ```{admonition} Learning objectives
# :class: tip
# After this chapter you can
# - compute a head's denominator $D_n$ across positions and texts;
# - derive the mean and variance of $D_n$ when tokens are independent, and see that the
#   relative spread scales as $1/\sqrt{n_{\mathrm{eff}}}$;
# - apply Hoeffding's and Chebyshev's inequalities to $D_n$ and judge how tight they are;
# - explain why contextual heads have stable denominators and detokenization heads do not, and
#   how the density of stop words moves the denominators of heads that prefer or avoid stop words
#   (two of the contextual heads in the paper).
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
# ## 3.1 The denominator of a text
#
# We fix the destination token to `' the'` at every position $n$ (the text's own token at $n$ is
# replaced), so that $D_n$ measures the *context* and not the current token:
#
# $$
# D_n = \sum_{j < n} \mathrm{pos}_n(j)\, c_n(t_j) + \mathrm{pos}_n(n)\, c_n(\texttt{' the'}).
# $$
#
# The texts are long documents of general English: offline, the evaluation corpora of the offline
# collection; online, OpenWebText as in the paper (the report line below says what was read), cut
# to the model's context. The paper uses 1,000 OpenWebText texts; we take up to 1,000 texts of at
# least half the context and say how many there were. The heads are the contextual heads as
# computed in {ref}`ch-taxonomy`.

# %%
import torch

from context_neurons import stability as st
from context_neurons.printing import fixed, show_table, wrapped, wrapped_items
from context_neurons.text.windows import corpus_windows, domain_windows

n_ctx = model.cfg.n_ctx
half = n_ctx // 2  # the destination of the paper's Figure 4
windows, labels, report = corpus_windows(
    model.tokenizer, None, n=1000, min_tokens=half, n_ctx=n_ctx
)
full_length = [i for i, w in enumerate(windows) if len(w) == n_ctx]
print(wrapped(f"{len(windows)} texts of at least {half + 1} tokens (the paper: 1000) ({report})"))
print(f"{len(full_length)} of them of the full {n_ctx} tokens, all used for Figure 3.1")

# %%
from context_neurons import taxonomy as tx
from context_neurons.reproduce.paper import PAPER_GROUPS

taxonomy = tx.classify_heads(model)
contextual = taxonomy.groups["contextual"]
print(f"contextual heads (computed): {contextual}")
print(f"GPT-2 Small's in the paper, for comparison: {PAPER_GROUPS['contextual']}")
if contextual:
    shown = contextual
else:
    shown = taxonomy.heads
    print(wrapped(
        "This model has NO contextual head: the figures below show every head instead, so that "
        "the chapter still measures which denominators concentrate."
    ))

# %% [markdown]
# Gibson's Figure 3 divides each text's denominator $D_{h,i}$ by its average $c_{h,i}$ over many
# texts (1,000 in the paper; every full-length text here, counted above), so that a flat line at 1
# means "this text's denominator is the typical one". We compute $D$ at every eighth position of
# every full-length text, in log space (`stability.denominators_over_positions`).

# %%
from context_neurons.plotting.stability import plot_relative_denominators

positions, log_d = st.denominators_over_positions(
    model, [windows[i] for i in full_length], heads=shown, stride=8
)
relative = st.relative_denominators(log_d)
figure = plot_relative_denominators(
    relative,
    shown,
    show=list(range(min(4, len(full_length)))),
    labels=[labels[i] for i in full_length],
    positions=positions,
    title=f"{loaded.title}: D / c over positions, {len(full_length)} texts for c",
)
start = min(100, int(positions[-1]))  # every contextual kernel has tens of tokens from here
show_table(st.quantile_intervals(relative, shown, positions, start),
           f"D/c over {relative.shape[0]} texts: the 5% and 95% quantiles over texts "
           "and positions", model=loaded.title)

# %% [markdown]
# *Figure 3.1 (reproduces the paper's Figure 3): $D_{h,i}/c_{h,i}$ against position $i$ for four
# texts and the heads printed above (the contextual heads), on the model named in the title;
# $c_{h,i}$ is the mean over every full-length text.* The printed intervals hold 90% of the values
# over all texts and positions: the first column over every position drawn, the second from
# position 100 on (or the last position drawn, on a short context), where a contextual kernel has
# tens of tokens to average over (compare the two to see how much the start of a text matters).
# The narrower an interval around 1, the less a head's denominator depends on which text it reads.
# The curves wander slowly rather than jumping, because neighbouring positions share most of
# their kernel.
#
# ## 3.2 The denominator at the middle of the context, text by text
#
# The paper's Figure 4 fixes the position at the middle of the context, $n = n_{ctx}/2$ (512 on
# GPT-2 Small; printed below for this model), and plots $D_h$ for each of its 1,000 texts.
# `stability.denominator_study` computes it for every text of at least $n + 1$ tokens, together
# with everything the theory of the next sections needs; denominators are reported in units of
# $\mu$, the mean content weight defined in section 3.3.

# %%
from context_neurons.plotting.stability import plot_denominators_per_text

study = st.denominator_study(model, windows, n=half, labels=labels)
figure = plot_denominators_per_text(
    study, shown, title=f"{loaded.title}: D / mu at n = {study.n} on {len(study.labels)} texts"
)
cv = {head: st.coefficient_of_variation(study.measured(head)) for head in study.heads}
print(wrapped(
    f"coefficient of variation of D at n = {study.n} over {len(study.labels)} texts, "
    f"heads shown: {min(cv[h] for h in shown):.3f} to {max(cv[h] for h in shown):.3f}"
))

# %% [markdown]
# *Figure 3.2 (reproduces the paper's Figure 4): $D_h/\mu$ at $n = n_{ctx}/2$ for every text
# (texts indexed along the horizontal axis, as in the paper), for the heads printed in section
# 3.1, on the model named in the title (panel titles: the coefficient of variation, standard
# deviation over mean). Solid: the mean of the independent-token model of section 3.3; dashed:
# that mean plus or minus two of its standard deviations.* The printed range of the coefficient
# of variation is the relative width of these bands of points. The histograms below show the same
# values as distributions, beside synthetic texts of independent tokens.

# %%
from context_neurons.plotting.stability import plot_denominator_histograms

figure = plot_denominator_histograms(
    study, shown, title=f"{loaded.title}: distribution of D / mu at n = {study.n}"
)

# %% [markdown]
# *Figure 3.3: histograms of the values of Figure 3.2 (coloured), with synthetic texts of
# independent tokens (black steps, section 3.3) and the normal distribution with the
# independent-token model's mean and standard deviation (dashed), on the model named in the
# title.* The theory below predicts that width from the head's kernel and content weights alone.
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
#
# In our setting two terms are not random: the BOS token at position 0 and the destination
# `' the'` at $n$. They enter the mean but not the variance. With $m = \sum_{0<j<n}
# \mathrm{pos}_n(j)$ the kernel's mass on the random positions, exactly (in units of $\mu$),
#
# $$
# \frac{\mathbb{E}[D_n]}{\mu} = \mathrm{pos}_n(0)\frac{c_n(\mathrm{BOS})}{\mu} + m
#   + \mathrm{pos}_n(n)\frac{c_n(\texttt{' the'})}{\mu}, \qquad
# \mathrm{CV} = \frac{\mathrm{sd}[D_n]}{\mathbb{E}[D_n]}
#   = \frac{\sigma \sqrt{\sum_{0<j<n} \mathrm{pos}_n(j)^2}}{\mathbb{E}[D_n]}
#   = \rho\, \frac{\sigma/\mu}{\sqrt{n_{\mathrm{eff}}^{\mathrm{rand}}}},
# $$
#
# with $\rho = \mu m / \mathbb{E}[D_n]$, the **random share** of the mean, and
# $n_{\mathrm{eff}}^{\mathrm{rand}} = m^2 / \sum_{0<j<n} \mathrm{pos}_n(j)^2$, the number of
# random tokens the denominator averages over. Without the fixed terms, $\rho = 1$ and
# $n_{\mathrm{eff}}^{\mathrm{rand}} = n_{\mathrm{eff}}$, the formula above. The token distribution
# is the pooled unigram distribution of our texts. The first table gives every factor for every
# head; the second sets the prediction beside the spread measured on the texts (with its bootstrap
# standard error) and on synthetic texts of independent tokens drawn from the same distribution.

# %%
table = study.table(prob=0.05)
table["group"] = [taxonomy.group_of(h) for h in table.index]
factors = ["group", "n_eff", "n_eff random", "random share", "sigma/mu"]
show_table(table[factors], f"the factors of the predicted CV of D at n = {study.n}",
           model=loaded.title)
show_table(table[["CV predicted", "CV texts", "CV texts se", "CV i.i.d."]],
           f"CV of D at n = {study.n}: predicted, on the texts (se: bootstrap), on i.i.d. texts",
           model=loaded.title)

# %%
from context_neurons.plotting.stability import plot_concentration

figure = plot_concentration(
    table, taxonomy.groups, title=f"{loaded.title}: spread of D against tokens averaged over"
)

# %% [markdown]
# *Figure 3.4: coefficient of variation of $D$ across texts (filled, coloured by group, with its
# standard error) against $n_{\mathrm{eff}}^{\mathrm{rand}}$, the number of random tokens the
# denominator averages over, for every head of the model named in the title, with the
# independent-token prediction $\rho\,(\sigma/\mu)/\sqrt{n_{\mathrm{eff}}^{\mathrm{rand}}}$ (open
# circles).* The three factors of the prediction, per group:

# %%
ranges = st.group_ranges(table)
show_table(ranges.table, "min .. max over each group's heads", model=loaded.title)
for line in ranges.findings():
    print(wrapped(line))

# %% [markdown]
# What to see (the ranges just printed give the numbers; a group this model lacks is absent):
#
# - **Contextual heads concentrate.** Their kernels average over tens of random tokens and the
#   fixed terms carry little of the mean ($\rho$ close to 1), so the prediction is the textbook
#   $(\sigma/\mu)/\sqrt{n_{\mathrm{eff}}}$; their content weights vary only moderately
#   ($\sigma/\mu$), and dividing by $\sqrt{n_{\mathrm{eff}}}$ leaves a small spread.
# - **Detokenization heads do not.** Their kernels put their mass on the last few positions.
#   The share of the mean that comes from the destination itself (and BOS), $1 - \rho$, is
#   fixed; the rest comes from a handful of random tokens ($n_{\mathrm{eff}}^{\mathrm{rand}}$ of
#   order one), with nothing to average. So the CV is the fraction
#   $\rho/\sqrt{n_{\mathrm{eff}}^{\mathrm{rand}}}$ of the spread $\sigma/\mu$ of a single weight,
#   and that spread is itself larger because these heads care more about token identity.
# - **Duplicate heads stretch the model.** Their content weight is huge for one token, the
#   destination's own: with `' the'` at $n$, $D_n$ mostly counts the earlier copies of `' the'`
#   under the kernel, hence the large $\sigma/\mu$.
# - The printed list names the heads whose spread on real texts exceeds the i.i.d. spread beyond
#   sampling error: for them real text is not a sequence of independent tokens. Texts differ in
#   their mix of tokens (their topic, their style; for a duplicate head, how often `' the'`
#   occurs), and the content weights see that. Section 3.5 shows one such effect.
#
# ## 3.4 Tail bounds: Hoeffding and Chebyshev
#
# The variance gives a typical deviation; concentration inequalities bound the probability of a
# large one. If every content weight lies in $[a, b]$, **Hoeffding's inequality** for the weighted
# sum gives
#
# $$
# P(|D_n - \mathbb{E}D_n| \ge t) \le
#   2 \exp\left(-\frac{2t^2}{(b - a)^2 \sum_{0<j<n} \mathrm{pos}_n(j)^2}\right),
# $$
#
# and from the variance alone, **Chebyshev's inequality** gives
#
# $$
# P(|D_n - \mathbb{E}D_n| \ge t) \le \frac{\sigma^2 \sum_{0<j<n} \mathrm{pos}_n(j)^2}{t^2} .
# $$
#
# Both shrink with the sum of squares over the random positions. Both are theorems about the
# independent-token model, and we plug in estimates: $\mu$ and $\sigma$ from the pooled token
# frequencies, and $[a, b]$ the smallest and largest content weight among the tokens of our texts.
# The figure compares the bounds with the measured tail probabilities, on the texts and on
# i.i.d. texts, for every head (each panel has its own range of $t$, up to five standard
# deviations).

# %%
from context_neurons.plotting.stability import plot_tail_bounds

tails = {head: study.tails(head, study.deviation_grid(head)) for head in study.heads}
figure = plot_tail_bounds(
    tails, n_cols=4, title=f"{loaded.title}: tails of D / mu at n = {study.n}"
)

# %% [markdown]
# *Figure 3.5: $P(|D/\mu - \mathbb{E}| \ge t)$ against $t$ for every head of the model named in
# the title (log scale): measured on the texts (coloured), on i.i.d. texts (black), and the
# Chebyshev (dashed) and Hoeffding (dash-dotted) bounds.* On i.i.d. texts both bounds must hold,
# since those texts satisfy the model's assumptions; on real texts they need not. Hoeffding only
# knows the range $b - a$ of the weights, set by the most extreme token in the texts, while
# Chebyshev uses their actual spread $\sigma$; Hoeffding's exponential decay wins only for large
# enough $t$. The first table gives, for every head, the half-width $t$ of an interval that holds
# $D/\mu$ with probability 95%, from each bound and as measured; the second, whether each bound's
# half-width covers the measured one.

# %%
half_widths = st.interval_half_widths(table)
show_table(half_widths.table.iloc[:, :5],
           "half-width t of a 95% interval of D/mu: bounds, measured", model=loaded.title)
show_table(half_widths.table.iloc[:, 5:], "does each bound's half-width cover the measured one?",
           model=loaded.title)
for line in half_widths.findings():
    print(wrapped(line))

# %% [markdown]
# Under independence, each bound holds for *every* weight distribution with this variance (or
# range), so it is loose for the near-normal sums of the contextual heads: compare its half-width
# with the measured one in each row. For the detokenization heads, whose weights span a wide
# range, Hoeffding's half-width can exceed the mean itself and say nothing useful, while
# Chebyshev's stays within a small factor of the measured one (the ratios printed above). Where a
# bound fails to cover the texts but covers the i.i.d. texts, the failure is the independence
# assumption's, not the bound's.
#
# ## 3.5 Stop-word density
#
# The independence assumption fails most visibly where a head's content weights separate two
# classes of tokens whose proportions differ between texts. Gibson observes that, on GPT-2 Small,
# one contextual head up-weights keywords and another up-weights stop words. Rather than take
# head numbers from the paper, we measure for every head how much it prefers stop words: the
# frequency-weighted mean of $\log c_n(t)$ over stop words minus that over all other tokens of the
# texts (`DenominatorStudy.preference`). Among the contextual heads, the most negative is the
# **keyword head** and the most positive the **stop-word head**.
#
# **Which stop words?** Not a hand-written list: the planted model planted its stop-word
# preference with one (`topics.stopword_ids`), and measuring with the list that built the effect
# would only read it back. We define stop words by frequency alone: the 50 most frequent tokens
# of the texts studied (`DenominatorStudy.most_frequent`), a definition that needs no word list
# and works for any tokenizer, since the most frequent tokens of a language are its function words
# and punctuation. Frequency does not know what a word is: whatever markup the texts repeat
# (printed below) counts too.

# %%
stop_list = st.stop_words(study, 50)
stops = stop_list.ids
print(stop_list.finding())
first = [repr(model.tokenizer.decode([t])) for t in stops[:20].tolist()]
print(wrapped_items("the first 20:", [f"[{first[0]}", *first[1:-1], f"{first[-1]}]"], ","))
if loaded.is_planted:
    print(wrapped(stop_list.planted_finding(loaded.truth.stopword_ids)))

# %%
import pandas as pd

preference = study.preference(stops)
signed = {"stop-word preference (nats)": lambda value: fixed(value, 2, sign=True)}
show_table(pd.DataFrame({"stop-word preference (nats)": [preference[h] for h in shown]},
                        index=pd.Index(shown, name="head")),
           "preference of each head for the 50 stop words", model=loaded.title, formats=signed)
keyword_head = min(shown, key=preference.get)
stopword_head = max(shown, key=preference.get)
print(f"computed: keyword head {keyword_head}, stop-word head {stopword_head}")
if loaded.is_planted:
    weights = {h: loaded.truth.layer0_heads[h].stopword_weight for h in shown}
    planted_signs = {h: w for h, w in weights.items() if w}
    print(wrapped(
        f"planted truth: stop-word score added per head {planted_signs} (by construction)"
    ))

# %% [markdown]
# A text dense in stop words then has a *smaller* denominator for the keyword head and a
# *larger* one for the stop-word head. We measure, for each text, the share of a head's kernel
# that falls on stop words, $\sum_{j<n} \mathrm{pos}_n(j)\,[t_j \text{ is a stop word}]$, and
# compare general prose with chapters of the Bible (offline the King James Bible; online the
# OpenWebText documents densest in Bible words, a weak stand-in that the labels name), a text of
# another period and style. The table gives, per head, the correlation between the share and
# $\log D$ over all these texts, the slope of $\log D$ on the share (least squares), and the
# mean $D/\mu$ on each kind of text.

# %%
from context_neurons.evaluation import without_documents
from context_neurons.plotting.stability import plot_density_effect

bible, bible_labels = domain_windows(model.tokenizer, "bible", n=200, min_tokens=half, n_ctx=n_ctx)
# online both come from OpenWebText: a document is prose or Bible, never both
prose, prose_labels = without_documents(windows[:400], labels[:400], bible_labels)
mixed = prose + bible
mixed_study = st.denominator_study(model, mixed, n=half, labels=prose_labels + bible_labels)
density = st.kernel_weighted_density(mixed_study, mixed, stops)
corpus = ["Bible" if lab in bible_labels else "prose" for lab in mixed_study.labels]
is_bible = torch.tensor([c != "prose" for c in corpus])
print(wrapped(
    f"{int((~is_bible).sum())} prose texts, {int(is_bible.sum())} Bible windows: "
    f"{bible_labels[0]}, ..."
))
effect = st.density_effect(mixed_study, density, is_bible, sorted(shown, key=preference.get),
                           preference)
show_table(effect, f"log D at n = {mixed_study.n} against the stop-word share of the kernel",
           model=loaded.title, decimals=3, formats=st.signed_formats())

# %% [markdown]
# How much does the stop-word share itself vary between texts? For the stop-word head's kernel,
# the quantiles over texts of each kind, and the standard deviation of $\log D$ that the share
# accounts for ($|r|$ times the standard deviation of $\log D$ over all these texts):

# %%
spread = st.share_spread(mixed_study, density, is_bible, stopword_head, "Bible")
show_table(spread.quantiles, f"stop-word share of head {stopword_head}'s kernel over the texts",
           model=loaded.title, decimals=2)
print(wrapped(spread.finding()))

# %%
neutral = min(
    (h for h in shown if h not in (keyword_head, stopword_head)),
    key=lambda h: abs(preference[h]),
    default=None,
)
show = [keyword_head, stopword_head] + ([neutral] if neutral is not None else [])
roles = {keyword_head: "keyword head", stopword_head: "stop-word head", neutral: "least preference"}
titles = {h: f"head {h} ({roles[h]}, {preference[h]:+.2f} nats)" for h in show}
figure = plot_density_effect(
    density,
    mixed_study.ratio,
    corpus,
    mixed_study.heads,
    show,
    titles,
    title=f"{loaded.title}: D / mu at n = {mixed_study.n} against the stop-word share",
    xlabel="share of the kernel on the 50 most frequent tokens",
)

# %% [markdown]
# *Figure 3.6: $D/\mu$ at $n = n_{ctx}/2$ against the share of the kernel on stop words (the 50
# most frequent tokens), for prose and Bible windows, for the computed keyword head, the computed
# stop-word head and the contextual head with the weakest preference (panel titles: the head's
# stop-word preference), on the model named in the title.*
#
# The stop-word share is **not** nearly constant between texts: the quantiles printed above show
# how widely it spreads over the texts of each kind, and whether the Bible windows sit apart from
# prose. To first order a change of share moves $\log D$ by the head's preference times that
# change, $\Delta \log D \approx p\,\Delta(\text{share})$ for a preference of $p$ nats: for a head
# with a strong preference the printed slope should have the preference's sign and a size of the
# same order (smaller when other tokens that the head weighs differently vary with the share);
# where the preference is near zero, any slope comes from whatever else changes with the share
# between texts. The printed $r^2$ says how much of the spread of $\log D$ the share explains;
# the rest is the text's other tokens. A shift between kinds of text (the difference of the
# printed means) is *systematic*, not noise that averages away over a kernel: a head's denominator
# calibrated on one kind of text is off on another by that much, which is why chapter 6 measures
# how the approximation depends on the calibration text.
#
# ## 3.6 Exercises
#
# ````{exercise} Predict the spread of a denominator from its kernel
# :label: ex-ch03-predict-spread
#
# *Difficulty: medium, 20 minutes.* For the first head of section 3.1 (the first contextual
# head), compute by hand the independent-token prediction of the coefficient of variation of $D$
# at $n = n_{ctx}/2$, using only `study.kernel` (the kernel $\mathrm{pos}_n(i)$, $i = 0..n$, one
# row per head of `study.heads`), `study.values(head)` (the content weights $c_n(t)/\mu$ of the
# tokens of the texts) and `study.probs` (their frequencies). Remember that positions $0$ (BOS)
# and $n$ (the destination) are fixed. Check your number against `study.predicted_cv(head)` and
# against the spread of synthetic i.i.d. texts (`study.simulate(head)`), within a tolerance you
# justify from the number of synthetic texts; then compare it with the spread measured on the
# real texts (`study.measured(head)`).
#
# ```python
# head = shown[0]
# sigma = ...        # standard deviation of c/mu under the token distribution
# sum_sq = ...       # sum of pos^2 over the random positions
# cv_predicted = ... # sigma * sqrt(sum_sq) / E[D/mu], with E[D/mu] = study.predicted_mean(head)
# ```
#
# ```{hint}
# :class: dropdown
#
# The content weights `study.values(head)` are in units of $\mu$, so their mean under
# `study.probs` is 1 and $\sigma$ is a weighted standard deviation; the random positions are the
# kernel row `study.kernel[study.row(head)]` without its first and last entries. For the
# tolerance, `study.simulated_cv_standard_error(head, n_samples)` gives the standard error of a CV
# estimated from `n_samples` synthetic texts, and `st.coefficient_of_variation` measures the
# spread of any set of denominators.
# ```
# ````
#
# ```{solution-start} ex-ch03-predict-spread
# :class: dropdown
# ```
#
# The variance of one weight is $\sum_t p_t (c_t/\mu - 1)^2$, since the mean of $c/\mu$ is 1. The
# random positions are $0 < j < n$, so the sum of squares leaves out the first and last entries of
# the kernel row. The synthetic texts follow the model exactly, so their spread must agree with the
# prediction up to Monte Carlo error, and that error can be computed rather than guessed: a CV
# estimated from $N$ draws has a standard error given by the delta method from the sum's variance,
# third moment and fourth cumulant (`stability.cv_standard_error`), and cumulants of independent
# terms add, $\kappa_r(\sum_j a_j X_j) = \kappa_r(X) \sum_j a_j^r$. Heavy-tailed content weights
# (a large fourth cumulant) widen it; `study.simulated_cv_standard_error` computes it from the
# exact weight distribution, and we allow five standard errors. The real texts need not agree.

# %%
head = shown[0]
values, probs = study.values(head), study.probs
sigma = float((probs * (values - (probs * values).sum()) ** 2).sum().sqrt())
sum_sq = float((study.kernel[study.row(head), 1:-1] ** 2).sum())
cv_predicted = sigma * sum_sq**0.5 / study.predicted_mean(head)
n_draws = 20000
cv_iid = st.coefficient_of_variation(study.simulate(head, n_samples=n_draws, seed=1))
cv_texts = st.coefficient_of_variation(study.measured(head))
tolerance = 5 * study.simulated_cv_standard_error(head, n_draws)
print(
    f"head {head}: predicted CV {cv_predicted:.3f}, i.i.d. texts {cv_iid:.3f}, "
    f"real texts {cv_texts:.3f}"
)
print(wrapped(
    f"tolerance: 5 standard errors of a CV from {n_draws} draws = "
    f"{tolerance / cv_predicted:.1%} of the prediction"
))
assert abs(cv_predicted - study.predicted_cv(head)) < 1e-9
assert abs(cv_iid - cv_predicted) < tolerance
print("check passed: the prediction equals the package's and the i.i.d.\n"
      "  texts' spread")

# %% [markdown]
# ```{solution-end}
# ```
#
# ````{exercise} Derive the variance of a denominator and check it by simulation
# :label: ex-ch03-variance
#
# *Difficulty: medium, 25 minutes.* Show that for independent weights $X_j$ of variance
# $\sigma^2$, $\mathrm{Var}[\sum_j \mathrm{pos}(j) X_j] = \sigma^2 \sum_j \mathrm{pos}(j)^2$.
# Then check it by simulation for the head with the *narrowest* kernel of the study, where the
# sum has the fewest terms: draw 20000 synthetic texts of i.i.d. tokens from `study.probs` with
# `torch.multinomial`, compute $\sum_{0<j<n} \mathrm{pos}_n(j)\, c(t_j)/\mu$ for each, and
# compare its variance with the formula within a tolerance set by the simulation's own standard
# error. Finally check Chebyshev's inequality on your draws at two and three standard deviations.
#
# ```python
# head = min(study.heads, key=study.n_eff)
# draws = ...          # [20000, n - 1] token indices into study.values(head)
# sums = ...           # one weighted sum per synthetic text
# ```
#
# ```{hint}
# :class: dropdown
#
# Write the variance of the sum as a double sum of covariances $\mathrm{Cov}[X_j, X_k]$ and use
# independence. For the tolerance, the standard error of a sample variance depends on the sum's
# fourth cumulant, and cumulants of independent terms add like variances:
# `st.weighted_sum_cumulants(kernel, values, probs)` computes them from the weight distribution
# rather than from the draws.
# ```
# ````
#
# ```{solution-start} ex-ch03-variance
# :class: dropdown
# ```
#
# Expand the square: $\mathrm{Var}[\sum_j a_j X_j] = \sum_{j,k} a_j a_k \mathrm{Cov}[X_j, X_k]$,
# and independence kills every term with $j \ne k$, leaving $\sigma^2 \sum_j a_j^2$. For the
# tolerance: a sample variance of $N$ draws of a sum $S$ has standard error
# $\sqrt{(\kappa_4(S) + 2\,\mathrm{Var}[S]^2)/N}$, and fourth cumulants add like variances,
# $\kappa_4(S) = \kappa_4(X) \sum_j a_j^4$. Computing it from the weight distribution (not from
# the draws) matters for a narrow kernel: its sum is one or two heavy-tailed weights, whose
# sample moments underestimate the tails.

# %%
head = min(study.heads, key=study.n_eff)
kernel = study.kernel[study.row(head), 1:-1]  # the random positions 0 < j < n
values, probs = study.values(head), study.probs
generator = torch.Generator().manual_seed(0)
n_draws = 20000
draws = torch.multinomial(probs, n_draws * len(kernel), replacement=True, generator=generator)
sums = values[draws.view(n_draws, len(kernel))] @ kernel
deviation = values - (probs * values).sum()  # the weight's deviation from its mean
var_x = float((probs * deviation**2).sum())
kappa4_x = float((probs * deviation**4).sum()) - 3 * var_x**2
predicted = var_x * float((kernel**2).sum())
kappa4_sum = kappa4_x * float((kernel**4).sum())
standard_error = ((kappa4_sum + 2 * predicted**2) / n_draws) ** 0.5
variance = float(sums.var())
print(wrapped(
    f"head {head} (n_eff {study.n_eff(head):.1f}): variance {variance:.4f}, "
    f"formula {predicted:.4f}, standard error of the estimate {standard_error:.4f}"
))
assert abs(predicted - study.predicted_sd(head) ** 2) < 1e-9 * predicted
assert abs(variance - predicted) < 5 * standard_error
for k in (2.0, 3.0):
    tail = float(((sums - sums.mean()).abs() >= k * predicted**0.5).double().mean())
    assert tail <= 1 / k**2 + 0.01, (k, tail)
    print(f"P(|deviation| >= {k:.0f} sd) = {tail:.4f} <= Chebyshev {1 / k**2:.3f}")
print("check passed: the variance formula and Chebyshev's bound hold on\n"
      "  i.i.d. draws")

# %% [markdown]
# ```{solution-end}
# ```
#
# ````{exercise} Change the calibration text and measure the denominators' spread
# :label: ex-ch03-calibration
#
# *Difficulty: medium, 30 minutes, open-ended.* Every denominator above used the mean keys $M$
# of one calibration text (the `"prose"` text of `text.corpora.CALIBRATION_TEXTS`). Replace it by
# another, the `"news"` text, and decide whether the choice matters for the stability of the
# denominators.
#
# 1. **Predict first**, from the definitions of chapter 1: which parts of $D_n$ can change, the
#    kernel $\mathrm{pos}_n$, the content weights $c_n(t)$, or both?
# 2. Rebuild the study with `mean_keys=dec.mean_positional_keys(model, news_tokens, n + 1)`
#    (`news_tokens`: the news text's tokens without BOS, from
#    `text.windows.calibration_tokens`), for the heads of section 3.1.
# 3. Measure how far each kernel moves (total variation) and how much each head's CV across texts
#    changes, and decide: does the change exceed the CV's own standard error on these texts?
#
# **Checkable criterion:** your prediction of what cannot change holds exactly in the numbers,
# and your verdict compares each change of CV with the printed bootstrap standard error.
#
# ```{hint}
# :class: dropdown
#
# For the prediction, find where $M$ enters the definitions of chapter 1: in $P[n, i]$, in
# $E[n, t]$, or in both? Then pass `mean_keys=` to `st.denominator_study`, compare the two studies'
# `kernel` with `dec.tv_distance` and their `log_c` directly, and take each head's bootstrap
# standard error from the column `"CV texts se"` of section 3.3's `table`.
# ```
# ````
#
# ```{solution-start} ex-ch03-calibration
# :class: dropdown
# ```
#
# The calibration text enters only through $M$, that is through $P[n, i] = M[i] - M[n]$: the
# kernel. The content weight $c_n(t) = \exp(q_n \cdot E[n, t]/\sqrt d)$ uses the token's own key
# at $n$ and no average at all, so it cannot change: the check below compares the two studies'
# content weights. The kernel changes as much as the average key of the two texts differs,
# position by position; the CV then moves through $\sum_j \mathrm{pos}_n(j)^2$ and through the
# kernel's mass on BOS and the destination. Whether that matters is a comparison with the
# sampling error of the CV itself.

# %%
from context_neurons import decomposition as dec
from context_neurons.text.corpora import calibration_text, describe
from context_neurons.text.windows import calibration_tokens

news_tokens = calibration_tokens(model.tokenizer, "news", n_ctx=n_ctx)[1:].to(model.cfg.device)
news_keys = dec.mean_positional_keys(model, news_tokens, half + 1)
news_study = st.denominator_study(model, windows, n=half, heads=shown, mean_keys=news_keys)
prose_rows = [study.row(h) for h in shown]
assert torch.allclose(news_study.log_c, study.log_c[prose_rows], rtol=0, atol=1e-9)
kernel_tv = dec.tv_distance(news_study.kernel, study.kernel[prose_rows])
print(wrapped(
    f"calibration text for M: {describe(calibration_text('news'))} instead of the prose text"
))
rows = {}
for k, head in enumerate(shown):
    cv_prose = table.loc[head, "CV texts"]
    cv_news = st.coefficient_of_variation(news_study.measured(head))
    se = table.loc[head, "CV texts se"]
    rows[head] = [float(kernel_tv[k]), cv_prose, cv_news, cv_news - cv_prose, se,
                  abs(cv_news - cv_prose) > 2 * se]
names = ["kernel TV", "CV prose", "CV news", "change", "bootstrap se", "change > 2 se"]
show_table(pd.DataFrame.from_dict(rows, orient="index", columns=names).rename_axis("head"),
           "the news text as calibration text instead of the prose text", model=loaded.title,
           decimals=4, formats={"change": lambda value: fixed(value, 4, sign=True)})
print("check passed: the content weights do not depend on the calibration text;\n"
      "  the kernels do")

# %% [markdown]
# ```{solution-end}
# ```
#
# ## Summary
#
# - The denominator $D_n$ is a kernel-weighted average of content weights. For independent
#   tokens its relative spread is $(\sigma/\mu)/\sqrt{n_{\mathrm{eff}}}$, or
#   $\rho\,(\sigma/\mu)/\sqrt{n_{\mathrm{eff}}^{\mathrm{rand}}}$ once the fixed BOS and destination
#   terms are accounted for.
# - Contextual heads average over tens of tokens with mildly varying weights, so their
#   denominators vary little across texts and positions (Figures 3.1 and 3.2, the paper's Figures
#   3 and 4, measured above on as many texts as were available); detokenization heads average
#   over a handful of tokens and their denominators do not concentrate.
# - Hoeffding's and Chebyshev's inequalities turn this into tail bounds, but only under the
#   independent-token model and with $\mu$, $\sigma$, $a$ and $b$ estimated from the texts
#   (plug-in values): they are guaranteed on i.i.d. texts, and the table of section 3.4 shows
#   whether, and with how much room, they also cover the real texts, head by head.
# - Real text is not independent tokens: the share of stop words (defined by frequency, not by
#   the list that planted the planted model's preference) varies between texts and kinds of text,
#   and shifts the denominators of the heads that prefer or avoid stop words in opposite
#   directions, a systematic effect.
#
# **Next:** chapter 4 replaces each contextual head's denominator by a constant calibrated on one
# text, merges the contextual heads into one kernel and one extended embedding per token, and uses
# the resulting linear bag of tokens to find the MLP neurons that read it.
