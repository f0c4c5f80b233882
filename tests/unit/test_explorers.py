"""Explorers: the pure functions behind the panels, the static fallback and the widgets' updates,
without a browser (ipywidgets objects are built and driven from Python)."""

from __future__ import annotations

import math
import sys
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from context_neurons import decomposition as dec  # noqa: E402
from context_neurons import config  # noqa: E402
from context_neurons.checks import InputError  # noqa: E402
from context_neurons import interactive as ex  # noqa: E402

MODEL = "planted model (seed 0)"  # what a chapter passes as model_title (loaded.title)


@pytest.fixture(autouse=True)
def _close_figures(monkeypatch):
    monkeypatch.delenv(config.STATIC.name, raising=False)
    yield
    plt.close("all")


# ------------------------------------------------------------------------------------- mode


def test_mode_static_without_kernel_or_when_asked(monkeypatch):
    assert ex.interactive_mode() is False  # pytest is not an IPython kernel
    monkeypatch.setattr(ex.panel, "in_kernel", lambda: True)  # headless (nbclient, nbval)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.delenv("COLAB_RELEASE_TAG", raising=False)
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    assert ex.interactive_mode() is False
    monkeypatch.setenv("JPY_SESSION_NAME", "/home/reader/ch01_decomposition.ipynb")  # JupyterLab
    assert ex.interactive_mode() is True
    monkeypatch.delenv("JPY_SESSION_NAME")
    monkeypatch.setenv("COLAB_RELEASE_TAG", "release-colab")  # Colab
    assert ex.interactive_mode() is True
    monkeypatch.delenv("COLAB_RELEASE_TAG")
    monkeypatch.setenv(config.WIDGETS.name, "1")
    assert ex.interactive_mode() is True
    assert ex.interactive_mode(interactive=True) is True
    assert ex.interactive_mode(interactive=False) is False
    monkeypatch.setenv(config.STATIC.name, "1")
    assert ex.interactive_mode(interactive=True) is False  # the website build wins


def test_mode_static_without_ipywidgets(monkeypatch):
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # import ipywidgets -> ImportError
    assert ex.widgets_available() is False
    assert ex.interactive_mode(interactive=True) is False


# ------------------------------------------------------------------------------ head kernels


def test_kernel_frame_keeps_the_last_positions():
    pattern = np.arange(11, dtype=float)
    pattern /= pattern.sum()
    frame = ex.kernel_frame(pattern, n=10, window=4)
    assert list(frame["source position"]) == [7, 8, 9, 10]
    assert list(frame["distance"]) == [3, 2, 1, 0]
    assert frame["cumulative weight"].iloc[-1] == pytest.approx(pattern[10])
    assert frame["cumulative weight"].iloc[0] == pytest.approx(pattern[7:].sum())
    with pytest.raises(ex.ExplorerError, match="11 weights"):
        ex.kernel_frame(pattern[:5], n=10)


def test_kernel_summary_of_known_shapes():
    uniform = ex.kernel_summary(np.ones(100))
    assert uniform["effective width"] == pytest.approx(100)
    assert uniform["mean distance"] == pytest.approx(49.5)
    assert uniform["mass on last 50"] == pytest.approx(0.5)
    delta = ex.kernel_summary(np.eye(1, 20, 19).ravel())
    assert delta["effective width"] == pytest.approx(1)
    assert delta["self weight"] == pytest.approx(1)
    with pytest.raises(ex.ExplorerError):
        ex.kernel_summary(np.zeros(5))


@pytest.fixture(scope="module")
def kernels(small_model):
    generator = torch.Generator().manual_seed(0)
    reference = torch.randint(0, small_model.cfg.d_vocab, (200,), generator=generator)
    return ex.HeadKernels(small_model, reference_tokens=reference), reference


def test_head_kernels_match_positional_pattern(small_model, kernels):
    head_kernels, reference = kernels
    expected = dec.positional_pattern(
        small_model, 40, dest_token=7, heads=[2], reference_tokens=reference
    )[0].numpy()
    got = head_kernels(2, 40, 7)
    assert got.shape == (41,)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)
    assert got.sum() == pytest.approx(1, abs=1e-5)
    with pytest.raises(InputError, match="Head 99 out of range"):
        head_kernels(99, 40, 7)
    with pytest.raises(InputError, match="out of range"):
        head_kernels(0, 10_000, 7)


def test_head_explorer_static(small_model, kernels):
    explorer = ex.head_explorer(
        small_model, kernels=kernels[0], head=1, n=30, dest_token=5, interactive=False,
        model_title=MODEL,
    )
    assert explorer.mode == "static" and explorer.widget is None
    assert list(explorer.table.index) == [1]
    assert {"effective width", "mean distance"} <= set(explorer.table.columns)
    axes = explorer.figure.axes[0]
    assert len(axes.patches) == 31  # positions 0..30: the whole pattern fits in the window
    assert "head 1" in axes.get_title()
    assert repr(explorer) == "<Explorer: figure and table>"


def test_head_explorer_static_when_building_the_website(small_model, kernels, monkeypatch):
    monkeypatch.setenv(config.STATIC.name, "1")
    explorer = ex.head_explorer(
        small_model, kernels=kernels[0], n=20, dest_token=5, interactive=True,
        model_title=MODEL,
    )
    assert explorer.mode == "static" and explorer.figure is not None


def test_head_explorer_widgets_update(small_model, kernels):
    explorer = ex.head_explorer(
        small_model,
        kernels=lambda h, n, t: kernels[0](h, n, int(t)),
        head=0,
        n=30,
        dest_token="5",
        interactive=True,
        model_title=MODEL,
    )
    assert explorer.mode == "widgets"
    controls = explorer.widget.children[0].children
    head_w, n_w, token_w = controls
    assert list(explorer.table.index) == [0]
    head_w.value = 3  # as a reader would: the observer redraws
    assert list(explorer.table.index) == [3]
    n_w.value = 12
    assert "n = 12" in explorer.figure.axes[0].get_title()
    token_w.value = "not a number"  # an error is printed in the panel, the last view stays
    assert list(explorer.table.index) == [3]


def test_head_explorer_widgets_with_a_token_id(small_model, kernels):
    """A token id (an int) gets a number box, and the kernels keep receiving ints."""
    seen = []

    def recording(head, n, token):
        seen.append(token)
        return kernels[0](head, n, token)

    explorer = ex.head_explorer(
        small_model, kernels=recording, head=0, n=30, dest_token=5, interactive=True,
        model_title=MODEL,
    )
    head_w, n_w, token_w = explorer.widget.children[0].children
    assert token_w.value == 5 and "id" in token_w.description
    assert seen == [5]
    token_w.value = 7
    assert seen == [5, 7] and all(type(token) is int for token in seen)
    assert "token id 7 at n = 30" in explorer.figure.axes[0].get_title()
    expected = kernels[0](0, 30, 7)
    assert explorer.figure.axes[0].patches[-1].get_height() == pytest.approx(expected[-1])


def test_token_widget_by_type():
    assert type(ex.token_widget(3).value) is int
    assert ex.token_widget(" the").value == " the"
    with pytest.raises(ex.ExplorerError, match="token string"):
        ex.token_widget(True)


# ------------------------------------------------------------------------ activations (b)


def fake_activations(text: str, neuron: int) -> ex.ActivationTrace:
    words = text.split()
    true = np.arange(len(words), dtype=float) * (neuron + 1)
    return ex.ActivationTrace(words, true, true + 0.5)


def test_activation_summary_and_frame():
    trace = fake_activations("a b c d", 0)
    summary = ex.activation_summary(trace)
    assert summary["pearson"] == pytest.approx(1)
    assert summary["max |error|"] == pytest.approx(0.5)
    assert summary["fvu"] == pytest.approx(4 * 0.25 / 5)  # sum err^2 / sum (x - 1.5)^2
    frame = ex.activation_frame(trace)
    assert list(frame.columns) == ["token", "true", "approximate", "error"]
    assert frame["error"].tolist() == [0.5] * 4
    constant = ex.activation_summary((["x", "y"], [1.0, 1.0], [1.0, 2.0]))
    assert math.isnan(constant["fvu"]) and math.isnan(constant["pearson"])
    with pytest.raises(ex.ExplorerError, match="as many tokens"):
        ex.as_trace((["a"], [1.0, 2.0], [1.0, 2.0]))


def test_activation_explorer_static_and_widgets():
    static = ex.activation_explorer(
        fake_activations, neurons=[300, 704], text="x y z", interactive=False,
        model_title=MODEL,
    )
    assert static.mode == "static" and list(static.table.index) == [300]
    lines = static.figure.axes[0].get_lines()
    assert [line.get_label() for line in lines[:2]] == ["true", "approximate"]

    live = ex.activation_explorer(
        fake_activations, neurons=[300, 704], text="x y z", interactive=True,
        model_title=MODEL,
    )
    neuron_w, text_w, _ = live.widget.children
    neuron_w.value = 704
    assert list(live.table.index) == [704]
    text_w.value = "one two three four five"
    assert len(live.figure.axes[0].get_lines()[0].get_xdata()) == 5
    text_w.value = "   "  # empty text: message, no crash
    with pytest.raises(ex.ExplorerError):
        ex.activation_explorer(fake_activations, neurons=[], interactive=False, model_title=MODEL)


class FakeTokenizer:
    def decode(self, ids):
        return "".join(f"<{i}>" for i in ids)


def fake_model(d_vocab=10, n_ctx=8):
    return SimpleNamespace(
        cfg=SimpleNamespace(d_vocab=d_vocab, n_ctx=n_ctx),
        tokenizer=FakeTokenizer(),
        to_tokens=lambda text: torch.tensor([[0] + [len(w) for w in text.split()]]),
    )


def test_model_activations_fn_adapts_batched_functions():
    model = fake_model(n_ctx=4)
    seen = {}

    def true_fn(tokens, neurons):
        seen["neurons"] = neurons
        return tokens[..., None].float().expand(-1, -1, len(neurons))

    activations_fn = ex.model_activations_fn(model, true_fn, lambda t, js: true_fn(t, js) + 1)
    trace = activations_fn("aa bbb c dddd eeeee", 704)
    assert seen["neurons"] == [704]
    assert trace.tokens == ["<0>", "<2>", "<3>", "<1>"]  # BOS, then cut at n_ctx = 4
    np.testing.assert_allclose(trace.approx - trace.true, 1)


# ------------------------------------------------------------------------ contributions (c)


def test_contribution_frame_orders_both_sides():
    series = pd.Series([0.5, -2.0, 3.0, 0.0, -1.0], index=[" a", " b", " c", " d", " e"])
    frame = ex.contribution_frame(series, k=2)
    assert frame["top token"].tolist() == ["' c'", "' a'"]
    assert frame["bottom token"].tolist() == ["' b'", "' e'"]
    assert frame["top contribution"].tolist() == [3.0, 0.5]
    assert list(frame.index) == [1, 2]
    assert len(ex.contribution_frame(([" x", " y"], np.array([1.0, 2.0])), k=10)) == 2
    with pytest.raises(ex.ExplorerError):
        ex.contribution_frame(pd.Series([], dtype=float))


def test_contribution_bars_use_the_figures_colours():
    from matplotlib.colors import to_rgba

    from context_neurons.plotting.discovery import plot_contributions
    from context_neurons.plotting.style import DOWN_COLOUR, UP_COLOUR

    # a bottom side with one positive value: the colour follows the sign, as in the
    # chapters' token bars (plotting.discovery.plot_token_bars)
    series = pd.Series([3.0, 2.0, 0.5, -1.0, -4.0], index=[" a", " b", " c", " d", " e"])
    frame = ex.contribution_frame(series, k=3)
    figure = plot_contributions(frame, neuron=300)
    left, right = figure.axes
    bottom = [to_rgba(bar.get_facecolor()) for bar in left.patches]
    top = [to_rgba(bar.get_facecolor()) for bar in right.patches]
    up, down = to_rgba(UP_COLOUR), to_rgba(DOWN_COLOUR)
    assert up == to_rgba("tab:red") and down == to_rgba("tab:blue")
    assert top == [up, up, up]  # 3.0, 2.0, 0.5
    assert bottom == [down, down, up]  # -4.0, -1.0, 0.5


def test_contribution_explorer_static_and_widgets():
    def contributions_fn(neuron):
        return pd.Series(
            np.arange(30.0) * (1 if neuron == 300 else -1), index=[f" t{i}" for i in range(30)]
        )

    static = ex.contribution_explorer(
        contributions_fn, [300, 1621], k=5, interactive=False, model_title=MODEL
    )
    assert static.mode == "static"
    assert static.table["top token"].iloc[0] == "' t29'"
    live = ex.contribution_explorer(
        contributions_fn, [300, 1621], k=5, interactive=True, model_title=MODEL
    )
    neuron_w, k_w = live.widget.children[0].children
    neuron_w.value = 1621
    assert live.table["top token"].iloc[0] == "' t0'"
    k_w.value = 8
    assert len(live.table) == 8


def test_static_explorer_displays_a_captioned_result_table(monkeypatch):
    """In a kernel the static table is an HTML result table naming the model, at fixed decimals."""
    shown = []
    monkeypatch.setattr(ex.panel, "in_kernel", lambda: True)  # where the panels look it up
    monkeypatch.setattr(ex.panel, "_display", lambda *objects: shown.extend(objects))

    def contributions_fn(neuron):
        return pd.Series([0.12345, -2.0, 1e-9], index=[" a", " b", " c"])

    static = ex.contribution_explorer(
        contributions_fn, [300], k=3, interactive=False, model_title="planted model (seed 0)"
    )
    assert shown[0].data is static.table or shown[0].data.equals(static.table)
    page = shown[0]._repr_html_()
    caption = "planted model (seed 0): top and bottom token contributions of neuron 300"
    assert f"<caption>{caption}</caption>" in page
    assert ">0.123<" in page and "-0.000" not in page
    with pytest.raises(ex.ExplorerError, match="model_title"):
        ex.result_table(static.table, "a table", " ")


def test_model_contributions_fn_names_tokens():
    model = fake_model(d_vocab=6)
    fn = ex.model_contributions_fn(
        model,
        lambda js: torch.arange(6.0)[None] * js[0],
        token_ids=torch.tensor([1, 2, 3, 4, 5, 0]),
    )
    series = fn(2)
    assert series.index.tolist() == ["<1>", "<2>", "<3>", "<4>", "<5>", "<0>"]
    assert series.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]


def test_explorers_name_the_model_in_their_titles():
    """Every figure names its model (issue 14): the explorers put ``model_title`` in the title,
    in the static view and after a widget update."""
    def contributions_fn(neuron):
        return pd.Series(np.arange(10.0), index=[f" t{i}" for i in range(10)])

    static = ex.contribution_explorer(
        contributions_fn, [300], k=3, interactive=False, model_title="planted model (seed 0)"
    )
    assert "planted model (seed 0)" in static.figure._suptitle.get_text()
    with pytest.raises(TypeError, match="model_title"):
        ex.contribution_explorer(contributions_fn, [300], k=3, interactive=False)
    live = ex.activation_explorer(
        fake_activations, [300, 704], text="x y", interactive=True, model_title="GPT-2 Small"
    )
    live.widget.children[0].value = 704
    assert live.figure.axes[0].get_title() == "layer-0 neuron 704 (GPT-2 Small)"


def test_domain_profile_colour_scale_is_robust():
    """One extreme neuron saturates instead of washing out the others (Figure 5.3)."""
    from context_neurons.plotting.discovery import plot_domain_profile, robust_limit

    values = np.array([[0.5, -0.4, 0.2], [0.3, 0.1, -0.6], [40.0, 0.0, 0.1]])
    profile = pd.DataFrame(values, index=[1, 2, 3], columns=["a", "b", "c"])
    limit = robust_limit(values)
    assert limit == pytest.approx(np.quantile(np.abs(values), 0.95))
    assert limit < 40.0 and limit > 0.5
    figure = plot_domain_profile(profile, title="planted model (seed 0)")
    image = figure.axes[0].get_images()[0]
    assert image.get_clim() == pytest.approx((-limit, limit))
    assert figure.axes[0].get_title() == "planted model (seed 0)"
    assert robust_limit(np.zeros((2, 2))) == 1.0
