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
# (ch-circuit)=
# # 4. The contextual circuit: a decaying bag of extended embeddings
#
# This chapter reproduces the paper's section on the **contextual circuit**. Chapters 1 to 3
# showed that a contextual head's attention factorises into a positional kernel times content
# weights, divided by a denominator that hardly depends on the text. Here we take the last step:
# replace each denominator by a constant, give the contextual heads one shared kernel, and find
# that together they write, at every position, an exponentially decaying average of fixed vectors,
# one per token: Gibson's **extended embeddings**. This linear "bag of tokens" is what the MLP
# neurons of chapter 5 read. Symbols are on the notation page ({ref}`notation`, section 5).
#
# ```{admonition} Learning objectives
# :class: tip
# After this chapter you can
# - calibrate the denominators $\hat D_h$ of the contextual heads on one text, and say why the
#   first ~100 positions are special;
# - build the shared median kernel $K[n, i]$ and the extended embedding $e(t)$ of every token of
#   the vocabulary from the weights;
# - measure how well $\sum_i K[n,i]\, e(t_i)$ plus a positional part reproduces the contextual
#   heads' true combined output, and attribute the error to each approximation;
# - choose a calibration text, and say what changing it does to the circuit.
# ```
#
# **Prerequisites:** {ref}`ch-decomposition`, {ref}`ch-taxonomy` and {ref}`ch-stability`.

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
# ## 4.1 From attention to a bag of tokens
#
# Fix the destination token to `' the'`, a stop word, so that the query depends only on the
# position $n$. For each contextual head $h$, chapter 1 gives
#
# $$
# \text{head}_h(n) = \sum_{i \le n} A^h_{n,i}\, v_h(t_i, i)\, W_O^h, \qquad
# A^h_{n,i} = \frac{\mathrm{pos}_{h,n}(i)\; c_h(t_i)}{D_h(n)} .
# $$
#
# Three approximations turn this into a bag of tokens; the code makes each one explicit
# (`context_neurons.circuit`).
#
# 1. **Calibrated denominators.** Chapter 3 showed that $D_h(n)$ concentrates. We measure it on
#    one *calibration text* with `' the'` placed at each destination,
#    $D_h(n) = \sum_{j<n} \mathrm{pos}_{h,n}(j)\, c_h(t_j) + \mathrm{pos}_{h,n}(n)\,
#    c_h(\texttt{' the'})$, and take $\hat D_h$ = its median over positions $n \ge 100$.
# 2. **One kernel.** The contextual heads' kernels $\mathrm{pos}_{h,n}(i)$ are similar; we replace
#    them by their element-wise median $K[n,i]$, renormalised to sum to 1 over $i \le n$. Since
#    $\mathrm{pos}_{h,n}(i) \propto \exp(q_{n} \cdot M[i] / \sqrt{d})$, the whole
#    $n_{ctx} \times n_{ctx}$ kernel of a head is one small matrix product, independent of any
#    text.
# 3. **Position-free token values.** We split a value into its average over tokens, $M_V^h[i]$,
#    and a token-dependent rest, which we evaluate at the reference position
#    $n_{\text{ref}} = n_{ctx}/2$: $v_h(t) = v_h(t, n_{\text{ref}}) - M_V^h[n_{\text{ref}}]$. The
#    content weight $c_h(t)$ is also taken at $n_{\text{ref}}$.
#
# Then the contextual heads together write approximately
#
# $$
# \sum_{h} \text{head}_h(n) \;\approx\; \sum_{i \le n} K[n,i]\; e(t_i)
# \;+\; \underbrace{\sum_h \sum_{i \le n} \mathrm{pos}_{h,n}(i)\, M_V^h[i]\, W_O^h}_{
# \text{positional part}},
# \qquad
# e(t) = \sum_{h} \frac{c_h(t)}{\hat D_h}\; v_h(t)\, W_O^h .
# $$
#
# The positional part is the same for every text; everything the text contributes is in the
# bag $\sum_i K[n,i]\, e(t_i)$. The contextual heads are the ones chapter 2 classifies from the
# weights of this model (six on GPT-2 Small in the paper). A model without contextual heads has no
# circuit, and the chapter stops here on it with a message that says so.

# %%
from context_neurons import circuit as cc
from context_neurons.checks import NoContextualHeadsError
from context_neurons.printing import below, show_table, wrapped
from context_neurons.reproduce.paper import PAPER_GROUPS

try:
    heads = cc.contextual_heads(model)
except NoContextualHeadsError as error:
    raise NoContextualHeadsError(
        f"Chapter 4 stops here: the {loaded.title} has no contextual head. {error}"
    ) from None
planted = loaded.truth.contextual_heads if loaded.is_planted else None
known = cc.KnownHeads(heads, PAPER_GROUPS["contextual"], loaded.name == "gpt2", planted)
for line in known.findings():
    print(line)
circuit = cc.get_circuit(model, "prose", heads=heads)
d_in = len(heads) * model.cfg.d_head
print(
    f"extended embeddings {tuple(circuit.extended.shape)}: one ({model.cfg.d_vocab} x {d_in}) "
    f"by ({d_in} x {model.cfg.d_model}) product"
)

# %% [markdown]
# `get_circuit` builds everything in this chapter in a few seconds: the calibration, the kernels,
# and $e(t)$ for every token of the vocabulary (the one matrix product printed above).
#
# ## 4.2 Calibrating the denominators
#
# The calibration text is the `prose` text of `text.corpora.CALIBRATION_TEXTS` (offline a
# document of general prose; online an OpenWebText stand-in; its label is printed below), cut to
# the model's context with the BOS token first.

# %%
from context_neurons.plotting.circuit import plot_calibration_denominators
from context_neurons.text.corpora import calibration_text, describe

calib = circuit.calibration
calibration = describe(calibration_text("prose"))
print(wrapped(f"calibration text: {calibration}, {len(calib.tokens)} tokens"))
figure = plot_calibration_denominators(circuit, title=loaded.title)

# %% [markdown]
# *Figure 4.1: $\log D_h(n)$ along the calibration text for each contextual head (solid) and the
# median $\log \hat D_h$ over $n \ge 100$ (dashed), on the model named in the title.* Two things
# to see. After about 100 positions, how flat is each curve around its median? The more it is,
# the fairer a single constant per head. Before that, $D_h(n)$ can be much larger: position 0
# holds the BOS token, and where its content weight is large (an *attention sink*) it dominates
# the denominator while the kernel still gives position 0 a noticeable weight. The last column of
# the table below says how large the denominator is at $n = 10$ relative to $\hat D_h$ on this
# model. The paper notes the sink on GPT-2 Small; we return to it in section 4.5.

# %%
show_table(cc.denominator_table(calib, circuit.heads),
           "calibrated denominators of the contextual heads", model=loaded.title)
print(f"LN2 scale of the calibration text (median 1/std of resid_mid): {circuit.ln2_scale:.3f}")

# %% [markdown]
# Compare the spread of $\log D_h(n)$ beyond position 100, along one text, with the coefficients
# of variation across texts that chapter 3 measured for the same heads: both say how much a
# single constant misses. The circuit also records the LayerNorm-2 scale of the calibration text,
# which chapter 5 needs.
#
# ## 4.3 One kernel for the contextual heads
#
# The kernels differ in width, but for contextual heads they all decay over tens of tokens. The
# median kernel at the destination position of chapter 2 (printed below):

# %%
import pandas as pd

from context_neurons.plotting.circuit import plot_kernels
from context_neurons.taxonomy import default_position

n = default_position(model)
print(f"destination n = {n}")
figure = plot_kernels(circuit, n=n, window=150, title=loaded.title)

# %% [markdown]
# *Figure 4.2: positional patterns $\mathrm{pos}_{h,n}(i)$ of the contextual heads of the model
# named in the title, with destination `' the'` at the printed $n$, and their median kernel
# $K[n, i]$ (dashed), over the last 150 positions.* The median sits inside the bundle. Narrow heads
# put more weight on the last few tokens and less further back than the median; wide heads the
# opposite. How far each head's kernel is from the median (total variation), and how many tokens
# the median kernel averages over, $n_{\mathrm{eff}} = 1/\sum_i K[n,i]^2$:

# %%
spread = cc.kernel_spread(circuit, n)
tv_table = pd.Series(spread, name="TV distance from the median kernel").rename_axis("kernel")
show_table(tv_table, f"each head's kernel against the median kernel at n = {n}",
           model=loaded.title)
n_eff = cc.effective_tokens(circuit.kernel[n])
print(f"the median kernel averages over n_eff = {n_eff:.1f} tokens")

# %% [markdown]
# A TV distance of 0.1 means that 10% of a head's attention mass is placed differently by the
# median kernel. Whether that matters depends on what is read downstream: a neuron that sums
# contributions over the last fifty tokens hardly cares whether a token sits at distance 5 or 10.
#
# ## 4.4 Extended embeddings
#
# Each token's extended embedding is a weighted sum of its values, one per contextual head: the
# weight $c_h(t)/\hat D_h$ says how much more (or less) head $h$ attends to $t$ than to an average
# token. For a few tokens (those of the list below that are single tokens of this model's
# tokenizer) and the BOS token:

# %%
import torch

from context_neurons.decomposition import token_id
from context_neurons.taxonomy import single_tokens

candidates = [" the", ",", " and", " colour", " color", " war", " God", " patients", " water"]
words = single_tokens(model, candidates)
bos = model.tokenizer.bos_token_id
ids = torch.tensor([token_id(model, w) for w in words] + [bos], device=circuit.extended.device)
weights = (circuit.log_content[:, ids] - calib.log_dhat[:, None]).exp()  # c_h(t) / Dhat_h
frame = pd.DataFrame(
    weights.T.cpu().numpy(),
    index=[repr(w) for w in words] + [f"BOS {model.tokenizer.decode([bos])!r}"],
    columns=[f"head {h}" for h in circuit.heads],
)
frame["|e(t)|"] = circuit.extended[ids].norm(dim=-1).cpu().numpy()
show_table(frame, "weights c_h(t) / Dhat_h of the contextual heads, and the norm |e(t)|",
           model=loaded.title, decimals=2)

# %% [markdown]
# Reading the table: a weight above 1 means the head attends to the token more than to the
# average token of the calibration text. On GPT-2 Small the paper finds that one contextual head
# down-weights stop words and another up-weights them (chapter 3 finds which heads do so on this
# model); compare the rows of `' the'`, `','` and `' and'` with the content words. Compare also
# the BOS row with the others: where its weights are much larger, BOS is the attention sink of
# Figure 4.1. Its extended embedding enters only through position 0, at kernel weight $K[n, 0]$.
#
# ## 4.5 Does the bag of tokens reproduce the heads?
#
# We compare the approximation with the contextual heads' true combined output
# $\sum_h z_h W_O^h$ (hook `blocks.0.attn.hook_z`, bias excluded) on four texts that are not the
# calibration text: the first four evaluation texts that are not a calibration text (offline,
# documents of the evaluation corpora, chosen to cover different registers; online, OpenWebText
# documents), named in the output below.
# Per position we report the cosine similarity and the relative error
# $|\text{true} - \text{approx}| / |\text{true}|$, and the same two for the *text-dependent part*,
# true output minus the positional part against the bag alone (the positional part is common to all
# texts, so it could make a poor bag look good).

# %%
from context_neurons.evaluation import held_out_general_windows
from context_neurons.text.windows import pad_windows

windows, labels, _, _ = held_out_general_windows(model.tokenizer, 4, n_ctx=model.cfg.n_ctx)
tokens, _ = pad_windows(windows)
tokens = tokens.to(model.cfg.device)
true = cc.true_head_output(model, tokens, circuit.heads)
fits = cc.variant_fits(circuit, model, tokens, true)  # the circuit, and each approximation removed
print(wrapped(f"texts: {', '.join(labels)}"))
show_table(cc.fit_table(fits), "median fit of the contextual heads' output on the four texts",
           model=loaded.title)

# %% [markdown]
# Medians over the four texts and their positions (positions $n \ge 1$ for the cosine). The first
# row is the circuit exactly as the paper defines it. The other rows remove one approximation at a
# time: per-position denominators take $D_h(n)$ from the calibration text at each $n$ instead of the
# constant $\hat D_h$, and "own kernels" gives each head its own kernel instead of the median.

# %%
from context_neurons.plotting.circuit import plot_circuit_fit

figure = plot_circuit_fit(
    {name: fit.relative_error for name, fit in fits.items()},
    smooth=15,
    title=f"{loaded.title}: relative error of the contextual heads' output",
)

# %% [markdown]
# *Figure 4.3: relative error of the approximate output of the contextual heads along the
# positions (median over the four texts, moving average over 15 positions; logarithmic axis, so
# that errors of different sizes can be compared), for the circuit and for versions with one or
# two approximations removed, on the model named in the title.* Where to look: at the start of the
# text, compare the constant denominators with the per-position ones; where the BOS sink makes the
# true $D_h(n)$ larger there (Figure 4.1), the constant denominators overstate the output and the
# per-position denominators remove that excess. Further on, the vertical gap between the shared
# and the own kernels (on a log axis, a ratio of errors) is the price of giving heads of different
# widths one kernel. What is left after removing both has three sources: the position dependence
# of values and content weights (approximation 3); the text's own denominators differing from the
# calibration text's; and the fixed destination token, since the circuit queries with `' the'` at
# every position while the true heads query with whatever token sits at $n$ (content weights and
# kernels then differ from those computed for `' the'`).

# %%
from context_neurons.plotting.circuit import plot_output_scatter

fit = fits["the circuit (Dhat_h, shared kernel)"]
figure = plot_output_scatter(
    fit.true[:, 100:] - fit.positional[100:],
    fit.approx[:, 100:] - fit.positional[100:],
    title=loaded.title,
)

# %% [markdown]
# *Figure 4.4: coordinates of the text-dependent part of the contextual heads' output, true
# (horizontal) against the bag $\sum_i K[n,i]\, e(t_i)$ (vertical), for a random sample of
# positions $n \ge 100$ and residual dimensions, on the model named in the title.* The closer the
# points lie to the diagonal, the more of what the text writes through these heads the bag of
# extended embeddings captures; the bag cosine in the table above puts a number on it.
#
# ## 4.6 Exercises
#
# ````{exercise} Build a model on which the circuit is exact
# :label: ex-ch04-exact-circuit
#
# *Difficulty: medium, 20 minutes.* `context_neurons.models.toy.exact_toy_model()` returns a tiny
# one-layer model on which every approximation of section 4.1 holds exactly: token and position
# embeddings are orthogonal with fixed norms (so LayerNorm's scale is constant), and the two
# contextual heads have zero queries (so every content weight is 1, every denominator is 1 and
# all kernels are uniform). Build its circuit from a random calibration text, check that the
# relative error of `circuit_error` is at float precision, then give head 0 a content-dependent
# query (nonzero `W_Q[0]` on the token dimensions `0:16`) and show that the error becomes
# visible. Which of the three approximations did you break?
#
# ```python
# from context_neurons.models.toy import exact_toy_model
#
# toy, toy_heads = exact_toy_model(seed=0)
# toy_circuit = cc.build_circuit(toy, calibration_tokens, heads=toy_heads, dest_token=3, n_min=4)
# error = ...
# ```
#
# ```{hint}
# :class: dropdown
#
# `cc.circuit_error(toy_circuit, toy, texts)` returns a fit whose `relative_error` has one value
# per text and position; random texts from `torch.randint` will do, and the circuit must be built
# again after you change `W_Q`. For the last question, follow a nonzero query through
# $A^h_{n,i} = \mathrm{pos}_{h,n}(i)\, c_h(t_i) / D_h(n)$: which quantities stop being the same
# for every text?
# ```
# ````
#
# ```{solution-start} ex-ch04-exact-circuit
# :class: dropdown
# ```
#
# With zero queries every score is 0, so $c_h(t) = 1$ and $D_h(n) = 1$ for every text and the
# denominators are exactly calibrated; the values split exactly because LayerNorm's scale is the
# same for every token and position. A query that reads token dimensions makes the content
# weights, and with them the denominators, depend on the text: approximation 1 (and the
# content weight's position independence) breaks, while the kernels stay uniform.

# %%
from context_neurons.models.toy import exact_toy_model

toy, toy_heads = exact_toy_model(seed=0)
gen = torch.Generator().manual_seed(1)
calibration_tokens = torch.randint(0, toy.cfg.d_vocab, (toy.cfg.n_ctx,), generator=gen)
texts = torch.randint(0, toy.cfg.d_vocab, (4, toy.cfg.n_ctx), generator=gen)
toy_circuit = cc.build_circuit(toy, calibration_tokens, heads=toy_heads, dest_token=3, n_min=4)
exact_error = cc.circuit_error(toy_circuit, toy, texts).relative_error.max()

toy.blocks[0].attn.W_Q[0, :16] = torch.randn(16, toy.cfg.d_head, generator=gen)
broken = cc.build_circuit(toy, calibration_tokens, heads=toy_heads, dest_token=3, n_min=4)
broken_error = cc.circuit_error(broken, toy, texts).relative_error.max()
print(f"largest relative error, exact model:   {below(exact_error, 1e-5)}")
print(f"largest relative error, content query: {broken_error:.2f}")
assert exact_error < 1e-5 and broken_error > 1e-2
print("check passed: the circuit is exact when its assumptions hold, only then")

# %% [markdown]
# ```{solution-end}
# ```
#
# ````{exercise} Rebuild an extended embedding from the model's own values
# :label: ex-ch04-extended
#
# *Difficulty: medium, 15 minutes.* The extended embedding is
# $e(t) = \sum_h (c_h(t)/\hat D_h)\, v_h(t)\, W_O^h$, where $v_h(t)$ is the value of $t$ at the
# reference position $n_{\text{ref}}$ minus the token-averaged value $M_V^h[n_{\text{ref}}]$. Read
# the values from the model itself instead of the circuit: put a content word (the first of
# `' war'`, `' water'`, `' time'` that is one token of this tokenizer) at position
# $n_{\text{ref}}$ of a text (any filler before it), run the model with the hook
# `blocks.0.attn.hook_v`, subtract `circuit.mean_values[n_ref]`, weight each head by its content
# weight over its calibrated denominator (`circuit.log_content`, `calib.log_dhat`) and apply
# $W_O$. Check that you get the row of `circuit.extended` for that word. Why does the filler not
# matter?
#
# ```python
# probe = ...   # [1, n_ref + 1] with the word last
# v = ...       # [ctx_head, d_head]: the contextual heads' values of the word
# e_word = ...  # [d_model]
# ```
#
# ```{hint}
# :class: dropdown
#
# The hook `blocks.0.attn.hook_v` has shape `[batch, pos, head, d_head]`, so index the word's
# position and `circuit.heads`; `circuit.log_content` (`[ctx_head, d_vocab]`) and
# `calib.log_dhat` are logarithms, so each head's factor is one exponential of a difference. For
# the last question, ask which residual-stream vector the value at position $n_{\text{ref}}$ is
# computed from.
# ```
# ````
#
# ```{solution-start} ex-ch04-extended
# :class: dropdown
# ```
#
# A value depends only on the token and the position at which it sits: it is
# $\mathrm{LN}_1(W_E[t] + W_\text{pos}[n])\, W_V + b_V$, computed position by position, so the
# tokens before it do not enter. The circuit computes the same thing from the weights for every
# token of the vocabulary at once.

# %%
word = single_tokens(model, [" war", " water", " time"])[0]
word_id, n_ref = token_id(model, word), circuit.n_ref
probe = torch.full((1, n_ref + 1), circuit.dest_token, device=model.cfg.device)  # filler: ' the'
probe[0, 0], probe[0, n_ref] = bos, word_id
_, cache = model.run_with_cache(probe, stop_at_layer=1, names_filter="blocks.0.attn.hook_v")
v = cache["blocks.0.attn.hook_v"][0, n_ref, circuit.heads] - circuit.mean_values[n_ref]
weights_word = (circuit.log_content[:, word_id] - calib.log_dhat).exp()  # c_h(t) / Dhat_h
w_o = model.blocks[0].attn.W_O[circuit.heads]
e_word = torch.einsum("h,he,hed->d", weights_word, v, w_o)
error = float((e_word - circuit.extended[word_id]).norm() / circuit.extended[word_id].norm())
print(f"relative difference from circuit.extended[{word!r}]: {below(error, 1e-5)}")
assert error < 1e-3
print("check passed: the extended embedding equals its definition via the hooks")

# %% [markdown]
# ```{solution-end}
# ```
#
# ````{exercise} Choose a calibration text
# :label: ex-ch04-calibration
#
# *Difficulty: medium, 30 minutes, open-ended.* The circuit's constants $\hat D_h$ come from one
# calibration text. Build a second circuit calibrated on the `"news"` text of
# `text.corpora.CALIBRATION_TEXTS`, keeping the prose text's tokens for the mean keys and values
# (`reference_tokens=circuit.calibration.tokens[1:]`), so that only the denominators change.
#
# 1. **Predict** how the extended embeddings of the two circuits are related, head by head, and
#    check your prediction exactly.
# 2. **Decide** which calibration text is the better one for the four evaluation texts of section
#    4.5: first predict it from the denominators alone (which circuit's $\hat D_h$ is closer to
#    the median of each evaluation text's own $D_h(n)$, $n \ge 100$?), then measure the median
#    relative error at $n \ge 100$ of both circuits.
#
# **Checkable criterion:** the relation of part 1 holds to float precision, and your verdict
# names the calibration text with the lower measured error and says whether the denominators
# predicted it.
#
# ```{hint}
# :class: dropdown
#
# Only `calibration.log_dhat` differs between the two circuits, so write each head's share of
# $e(t)$ from `circuit.token_values`, `circuit.log_content` and `circuit.w_o`, and see what
# another $\hat D_h$ does to it. For part 2, `circuit.text_log_denominators(model, tokens)` gives
# a text's own $\log D_h(n)$ at every position, read as the circuit reads its calibration's, and
# `cc.circuit_error(...).relative_error` the error to measure.
# ```
# ````
#
# ```{solution-start} ex-ch04-calibration
# :class: dropdown
# ```
#
# With the same mean keys and values, the kernels, content weights $c_h(t)$ and token values
# $v_h(t)$ are the same in both circuits; only $\hat D_h$ changes, so each head's share of $e(t)$
# is rescaled by $\hat D_h^{\text{prose}} / \hat D_h^{\text{news}}$: the two bags differ by a
# fixed reweighting of the heads. Which text is better is an empirical question about the texts
# the circuit is used on: a calibration whose denominators sit closer to theirs should do better,
# but the measurement, not the prediction, decides.

# %%
reference = circuit.calibration.tokens[1:]
news = cc.build_circuit(model, "news", heads=heads, reference_tokens=reference)
rescale = (calib.log_dhat - news.calibration.log_dhat).exp()  # Dhat_prose / Dhat_news, per head
per_head = circuit.token_values * (circuit.log_content - calib.log_dhat[:, None]).exp().T[..., None]
predicted = torch.einsum("the,h,hed->td", per_head, rescale, circuit.w_o)
assert torch.allclose(predicted, news.extended, rtol=1e-4, atol=1e-6 * news.extended.abs().max())
print(
    wrapped(
        f"calibration texts: {describe(calibration_text('prose'))} and "
        f"{describe(calibration_text('news'))}"
    )
)
dhat = pd.DataFrame(
    {
        "log Dhat prose": calib.log_dhat.tolist(),
        "log Dhat news": news.calibration.log_dhat.tolist(),
    },
    index=pd.Index(heads, name="head"),
)
show_table(dhat, "denominators of the two calibrations", model=loaded.title)

own = torch.stack(
    [circuit.text_log_denominators(model, w)[:, 100:].median(-1).values for w in windows]
)  # [text, head]: each evaluation text's own median log D_h(n), n >= 100, in the circuit's frame
distance = {
    name: float(((own - c.calibration.log_dhat[None]) ** 2).sum())
    for name, c in (("prose", circuit), ("news", news))
}
errors = {
    name: float(cc.circuit_error(c, model, tokens, true=true).relative_error[:, 100:].median())
    for name, c in (("prose", circuit), ("news", news))
}
predicted_better = min(distance, key=distance.get)
measured_better = min(errors, key=errors.get)
verdicts = pd.DataFrame(
    {"squared distance of log Dhat to the texts' own": distance,
     "median rel. error, n >= 100": errors},
).rename_axis("calibration")
show_table(verdicts, "the two calibrations on the four evaluation texts", model=loaded.title,
           decimals=4)
right = "right" if predicted_better == measured_better else "wrong"
print(
    wrapped(
        f"verdict: {measured_better} calibrates these texts better; the denominators "
        f"predicted {predicted_better} ({right})"
    )
)
print("check passed: only the denominators changed, by the ratio of the Dhat_h")

# %% [markdown]
# ```{solution-end}
# ```

# %% [markdown]
# ## Summary
#
# - With the destination fixed to `' the'`, calibrated constant denominators and one shared
#   kernel, the contextual heads write $\sum_i K[n,i]\, e(t_i)$ plus a positional part that
#   is the same for every text: an exponentially decaying bag of extended embeddings.
# - Everything is computed from the weights, plus one calibration text for the denominators and
#   the LayerNorm-2 scale; $e(t)$ for the whole vocabulary is one matrix product.
# - How closely the approximation follows the heads' true output is measured (the table of section
#   4.5 and Figure 4.3), and so is what each approximation costs: the constant denominators near
#   the start of a text, where a BOS sink inflates the true ones, and the shared kernel further
#   on.
#
# **Next:** {ref}`ch-neurons` composes the extended embeddings with the first MLP layer's input
# weights to find the neurons that read the bag, without running the model on any text.
