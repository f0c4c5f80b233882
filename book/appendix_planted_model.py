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
# (appendix-planted)=
# # Appendix: the planted ground-truth model
#
# GPT-2 Small's weights cannot be downloaded on the machines that build and test this book, so
# every chapter also runs on a **planted model**: the GPT-2 Small architecture (768-dimensional
# residual stream, 12 heads of dimension 64, 3072 MLP neurons, 1024 positions) with **two**
# layers, GPT-2's real tokenizer (50257 tokens), and weights we built so that we know what the
# method should find. Pages built offline (as in this project's CI) show its outputs; **none of
# them is a GPT-2 result**. This page is a reference, not a lesson: it lists exactly what was
# planted, with every table computed from the record `context_neurons.planted.PlantedTruth` that
# is returned with the model (`load_model("planted").truth`; the full record, word lists
# included, is printed by `python -m context_neurons planted-truth`), and it measures what the
# planted heads actually do.
#
# ## How it is built
#
# All structured directions are orthonormal and orthogonal to the all-ones vector, so that
# LayerNorm's mean subtraction leaves them alone and LayerNorm acts as a scale
# $s(x) = \sqrt{768}/|x|$.
#
# - **Positions.** $W_{pos}[i] = u_{const} + r(i)\,u_{ramp} + \sqrt{1 - r(i)^2}\,u_{comp} + \text{noise}$
#   with $r(i) = (i - 511.5)/512$: every position has the same norm, and one coordinate grows
#   linearly with $i$.
# - **Tokens.** A random unit vector in an "identity" subspace (its dimension is printed below:
#   what is left of the 767 mean-free dimensions after the structured directions), plus a loading of
#   0.45 on a topic direction $u_k$ for each word list the token is in, 0.3 on a stop-word
#   direction for function words and punctuation, and, for `<|endoftext|>`, a BOS direction;
#   norms $3(1 + 0.04\,\varepsilon)$, so LayerNorm scales differ slightly between tokens (the
#   source of the decomposition's small error).
# - **Layer-0 positional kernels.** Dimensions 0 and 1 of each head implement
#   $W_{QK} = A_h(u_{const} u_{ramp}^\top - u_{ramp} u_{const}^\top)$, so the score is
#   $\frac{s_n s_i}{\bar s^2}\frac{i - n}{w_h}$: an exponentially decaying kernel of width $w_h$
#   that is zero at $i = n$ whatever the tokens.
# - **Content scores.** A constant query against a key direction mixing a random token direction,
#   the stop-word direction (head 6 down-weights stop words, head 8 up-weights them) and the BOS
#   direction (an attention sink at the start of a text). Duplicate-token heads compare 60
#   dimensions of the identity subspace of query and key; all heads have a small random
#   query-dependent part.
# - **Contextual heads' OV circuit** copies each topic direction $u_k$ to a context direction
#   $m_k$, plus a random part. Together the six heads write a decaying bag of topics.
# - **Layer-0 MLP.** Planted context neurons read a signed mix of context directions $m_k$
#   (neuron 704 reads what 300 reads and writes the opposite output); all others are random.
# - **Layer 1.** Each look-up head attends to the tokens of one topic (or to BOS when there is
#   none) and copies the topic to a direction $o_l$; its look-up neuron reads $o_l$ and writes the
#   unembedding of one target token. All other heads and neurons of layer 1 are random.

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
import pandas as pd

from context_neurons.book.chapter import show_model_banner
from context_neurons.models import load_model

loaded = load_model("planted", device=device)
show_model_banner(loaded)
truth = loaded.truth
print(f"seed {truth.seed}; British/American spellings from: {truth.gb_us_source}")
print(f"identity subspace: {truth.identity_dimensions} dimensions")

# %% [markdown]
# ## Layer-0 heads
#
# The plan of each head: its group, kernel shape and decay length $w_h$ (the score falls by
# $1/w_h$ per token of distance), and the content part of its score.

# %%
heads = pd.DataFrame(
    [
        {
            "head": h,
            "group": plan["group"],
            "kernel": plan["kernel"],
            "width w (tokens)": plan["width"],
            "content score sd": plan["content_sd"],
            "stop-word weight": plan["stopword_weight"],
            "BOS weight": plan["bos_weight"],
            "duplicate score": plan["duplicate_strength"],
        }
        for h, plan in sorted(truth.layer0_heads.items())
    ]
).set_index("head")
print(heads.to_string())

# %% [markdown]
# What the kernels do, measured: the positional pattern $\mathrm{pos}_n(i)$ of every head at
# $n = 500$ with destination `' the'` (chapter 1), as the share of attention on the destination
# itself ($i = n$), on the previous token, on the two before it, and on everything further back.
# The kernel $e^{(i-n)/w}$ peaks at $i = n$, so the local ("detokenization") heads of this model
# attend to the current token and the one or two before it, not to the previous token alone.

# %%
from context_neurons import decomposition as dec

pattern = dec.positional_pattern(loaded.model, 500, " the").cpu().double()
shares = pd.DataFrame(
    {
        "i = n": pattern[:, 500],
        "i = n-1": pattern[:, 499],
        "i = n-2, n-3": pattern[:, 497:499].sum(-1),
        "i < n-3": pattern[:, :497].sum(-1),
        "n_eff = 1/sum pos^2": 1 / (pattern**2).sum(-1),
    },
    index=pd.Index(range(loaded.model.cfg.n_heads), name="head"),
)
shares.insert(0, "group", [truth.layer0_heads[h]["group"] for h in shares.index])
print(shares.round(3).to_string())

# %% [markdown]
# ## Topic word lists
#
# Only words that the tokenizer encodes as a single token (with a leading space, lower-case or
# capitalised) are planted; British and American spellings are kept only in pairs where both
# spellings are single tokens. Eight examples per list; `planted-truth` prints them all.

# %%
topics = pd.DataFrame(
    [
        {"topic": topic, "tokens": len(truth.topic_token_ids[topic]),
         "examples": ", ".join(repr(w) for w in truth.topic_words[topic][:8])}
        for topic in truth.topic_words
    ]
).set_index("topic")
print(topics.to_string())

# %% [markdown]
# ## Layer-0 context neurons
#
# Each planted neuron reads a signed mix of context directions $m_k$ with a gain; its input
# weights also have a random part, and every other neuron is random.

# %%
neurons = pd.DataFrame(
    [
        {"neuron": j, "reads": ", ".join(f"{w:+.1f} {k}" for k, w in plan["topics"].items()),
         "gain": plan["gain"], "description": plan["description"]}
        for j, plan in sorted(truth.context_neurons.items())
    ]
).set_index("neuron")
print(neurons.to_string())

# %% [markdown]
# ## Layer-1 context look-ups
#
# Each look-up pairs a layer-1 head that attends to one topic's tokens with a neuron that reads
# the head's output and promotes one target token (chapter 7 recovers them).

# %%
lookups = pd.DataFrame(
    [{k: v for k, v in lookup.items() if k != "topic_token_ids"} for lookup in truth.lookups]
)
print(lookups.to_string(index=False))
