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
# (ch-neuron-gallery)=
# # Gallery of the context neurons
#
# This page lists every layer-0 neuron that {ref}`ch-neurons` finds from the weights
# ($\mathrm{top}[j] \ge \theta$), best score first, and gives the highest-scoring of them, at
# most `disc.MAX_NEURONS` = 200 (all of them on the planted model; on GPT-2 Small $\theta$ can
# select many more; 12 at `CONTEXT_NEURONS_SCALE=reduced`, CI's quick runs), a section of its
# own. The index says how many are shown. For each neuron you see:
#
# - its **score**, its **own domain from the weights** (the domain whose texts use the tokens
#   that drive it most, section 5.4, or none; *confirmed* when the held-out half of the texts
#   gives the same domain, *weak* when it does not) and, on the planted model, what was planted
#   there (planted truth);
# - its **top and bottom tokens**: the ten tokens whose extended embeddings push its
#   pre-activation up most and down most. A contribution is what the token would add if the
#   kernel put all its weight on it; $z$ is the robust z-score of section 5.2;
# - a small **activation plot** along one real text: among four texts of each domain of
#   `data.DOMAINS`, the one on which the neuron's mean pre-activation departs most from its
#   median over all texts. Black: the model's pre-activation; orange, dashed: the circuit's
#   approximation from the weights (chapter 6); grey, dotted: the neuron's median over all texts;
#   ticks along the bottom: its up-tokens (red) and down-tokens (blue) in the text, the tokens
#   at least $\theta$ robust standard deviations from its median contribution. Each plot's title
#   names the model.
#
# Everything on the page is computed when it is built; the banner below names the model that
# produced it. The code is hidden under the cells; the functions are in
# `context_neurons.gallery`. Symbols: {ref}`notation`.

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

# %% tags=["hide-input"]
from context_neurons import circuit as cc
from context_neurons import discovery as disc
from context_neurons.config import reduced_scale

circuit = cc.get_circuit(model)
scores = disc.get_scores(circuit, model)
found = disc.require_found(scores.found(disc.THETA), disc.THETA, "the gallery")
shown = disc.carried(found, 12 if reduced_scale() else disc.MAX_NEURONS)  # reduced: CI's runs
tables = disc.token_tables(circuit, model, found, k=10, scores=scores)

# %% tags=["hide-input"]
from context_neurons import casestudies, gallery
from context_neurons.own_domain import held_out_domains
from context_neurons.printing import wrapped
from context_neurons.text.windows import domain_texts

texts = domain_texts(model.tokenizer, n=4)
densities = casestudies.token_densities(circuit, model, found, texts, scores)
own = held_out_domains(densities, scores)  # named on half the texts, checked on the other
acts = casestudies.text_activations(circuit, model, shown, texts, scores)
windows = {j: acts.best_window(j) for j in shown}
print(wrapped(f"{len(found)} neurons with top[j] >= theta = {disc.THETA:g}; sections and plots "
              f"for {disc.selection_note(shown, found)}"))
print(
    f"activation plots: the best of {len(texts.windows)} texts of {len(set(texts.domains))} domains"
)

# %% [markdown]
# ## All neurons
#
# One row per found neuron, with its three top and three bottom tokens, its own domain from the
# weights and, for the neurons that have a section (a link), the domain of the text its plot
# shows:

# %% tags=["hide-input"] mystnb={"markdown_format": "gfm"}
from IPython.display import Markdown, display

extra = {}
for j in found:
    extra[j] = {"own domain (weights)": own.loc[j, "domain"] or "-",
                "held-out": own.loc[j, "held-out"] or "-"}
    extra[j]["plotted text"] = texts.domains[windows[j]] if j in windows else "(no section)"
    if loaded.is_planted:
        extra[j]["planted truth"] = disc.planted_description(loaded.truth, j)
display(Markdown(gallery.index_markdown(found, scores, tables, extra, linked=shown,
                                        model=loaded.title)))

# %% [markdown]
# ## The neurons

# %% tags=["hide-input"] mystnb={"markdown_format": "gfm"}
import matplotlib.pyplot as plt

from context_neurons.plotting.discovery import plot_activation_curves

for j in shown:
    w = windows[j]
    facts = gallery.neuron_facts(acts, scores, j, w, loaded.truth)
    domain = own.loc[j, "domain"]
    facts["own domain (weights)"] = (
        f"*{domain}* ({own.loc[j, 'density, domain']:.1f} of its driving tokens per 1000 tokens "
        f"there, {own.loc[j, 'density, others']:.1f} elsewhere; on held-out texts: "
        f"{own.loc[j, 'held-out']})"
        if domain
        else "none: its driving tokens are not concentrated in any domain of these texts"
    )
    display(Markdown(gallery.neuron_markdown(j, tables[j], facts, k=10, model=loaded.title)))
    panel = acts.panel(j, w, title=f"{loaded.title}: neuron {j} on {texts.labels[w][:48]}")
    figure = plot_activation_curves(**panel, figsize=(7.5, 2.3))
    display(figure)
    plt.close(figure)
