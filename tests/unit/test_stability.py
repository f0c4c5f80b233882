"""The stability theory: moments and tail bounds, and the model's denominators."""

from __future__ import annotations

import math

import matplotlib
import matplotlib.pyplot as plt
import pytest
import torch

from context_neurons import stability as st
from context_neurons.text.windows import corpus_windows
from context_neurons.checks import InputError
from context_neurons.decomposition import decompose_attention, token_id
from context_neurons.plotting.stability import plot_concentration, plot_tail_bounds
from context_neurons.text.topics import stopword_ids

matplotlib.use("Agg")


def exponential_kernel(width: float, length: int) -> torch.Tensor:
    kernel = torch.exp(-torch.arange(length, dtype=torch.float64).flip(0) / width)
    return kernel / kernel.sum()


def discrete_distribution(n_values: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    values = torch.exp(0.5 * torch.randn(n_values, generator=gen, dtype=torch.float64))
    probs = torch.rand(n_values, generator=gen, dtype=torch.float64)
    return values, probs / probs.sum()


@pytest.mark.parametrize("width", [1.0, 25.0, 400.0])
def test_variance_formula_matches_monte_carlo(width):
    kernel = exponential_kernel(width, 300)
    values, probs = discrete_distribution(50, seed=1)
    mu, var = st.iid_moments(values, probs)
    draws = st.simulate_weighted_sums(kernel, values, probs, n_samples=20000, seed=2)
    predicted_var = st.weighted_sum_variance(kernel, var)
    assert predicted_var == pytest.approx(var / float(1 / st.sum_of_squares(kernel)))
    # Mean within 4 standard errors; variance within 6% (its relative standard error is ~1%).
    assert abs(float(draws.mean()) - mu) < 4 * math.sqrt(predicted_var / len(draws))
    assert float(draws.var()) == pytest.approx(predicted_var, rel=0.06)


def test_iid_moments_of_a_known_distribution():
    mean, var = st.iid_moments(torch.tensor([0.0, 1.0]), torch.tensor([0.75, 0.25]))
    assert (mean, var) == pytest.approx((0.25, 0.1875))


@pytest.mark.parametrize("width", [0.7, 10.0, 100.0, 1e6])
@pytest.mark.parametrize("seed", [0, 1])
def test_hoeffding_and_chebyshev_never_violated_on_iid_draws(width, seed):
    kernel = exponential_kernel(width, 400)
    values, probs = discrete_distribution(30, seed)
    low, high = float(values.min()), float(values.max())
    mu, var = st.iid_moments(values, probs)
    n_samples = 20000
    deviations = st.simulate_weighted_sums(kernel, values, probs, n_samples, seed=seed + 10) - mu
    sd = math.sqrt(st.weighted_sum_variance(kernel, var))
    t = torch.linspace(0.25 * sd, 6 * sd, 40)
    empirical = st.tail_probability(deviations, t)
    hoeffding = st.hoeffding_bound(t, float(st.sum_of_squares(kernel)), low, high)
    chebyshev = st.chebyshev_bound(t, float(st.sum_of_squares(kernel)), var)
    tolerance = 4 * torch.sqrt(empirical * (1 - empirical) / n_samples) + 1 / n_samples
    assert (empirical <= hoeffding + tolerance).all()
    assert (empirical <= chebyshev + tolerance).all()
    assert empirical[0] > 0.3  # the test has power: deviations of a quarter sd are common


def test_bounds_and_their_inverses():
    t = torch.tensor([0.0, 0.1, 1.0])
    assert st.hoeffding_bound(t, 0.02, 0.0, 1.0).tolist()[0] == 1.0  # capped at one
    assert float(st.hoeffding_bound(t, 0.02, 0.0, 1.0)[2]) == pytest.approx(2 * math.exp(-100))
    assert float(st.chebyshev_bound(t, 0.02, 0.5)[1]) == pytest.approx(1.0)
    t_h = st.hoeffding_deviation(0.05, 0.02, 0.0, 2.0)
    t_c = st.chebyshev_deviation(0.05, 0.02, 0.5)
    assert float(st.hoeffding_bound(torch.tensor([t_h]), 0.02, 0.0, 2.0)) == pytest.approx(0.05)
    assert float(st.chebyshev_bound(torch.tensor([t_c]), 0.02, 0.5)) == pytest.approx(0.05)


@pytest.fixture(scope="module")
def windows(planted):
    found, labels, _ = corpus_windows(
        planted.model.tokenizer, "nltk_brown_us", n=40, min_tokens=600
    )
    return found, labels


def test_log_denominators_equal_the_decomposition(planted, windows):
    model = planted.model
    tokens = windows[0][0][:300].clone()
    log_d = st.log_denominators(model, tokens, heads=[0, 3, 6])
    for n in (1, 57, 299):
        replaced = tokens[: n + 1].clone()
        replaced[n] = token_id(model, " the")
        expected = decompose_attention(model, replaced, heads=[0, 3, 6]).log_denominator()[:, n]
        # The decomposition runs in float32, where the local head's large scores cancel: 1e-3.
        torch.testing.assert_close(log_d[:, n].float(), expected, atol=1e-3, rtol=1e-3)
    strided = st.log_denominators(model, tokens, heads=[0, 3, 6], positions=torch.tensor([57, 299]))
    torch.testing.assert_close(strided, log_d[:, [57, 299]], atol=1e-9, rtol=1e-9)


@pytest.fixture(scope="module")
def study(planted, windows):
    texts, labels = windows
    return st.denominator_study(planted.model, texts, n=512, labels=labels)


def test_denominator_study_on_planted_model(planted, windows, study):
    model, truth = planted.model, planted.truth
    texts, labels = windows
    assert len(study.labels) == len(texts)
    # The study's D at n equals log_denominators on the same text.
    log_d = st.log_denominators(model, texts[3][:513], positions=torch.tensor([512]))[:, 0]
    torch.testing.assert_close(
        study.ratio[3], torch.exp(log_d - study.log_mu), atol=1e-4, rtol=1e-4
    )
    table = study.table()
    contextual, local = truth.head_groups["contextual"], truth.head_groups["detokenization"]
    assert (table.loc[contextual, "CV texts"] < 0.1).all()
    assert (table.loc[local, "CV texts"] > 0.2).all()
    # The independent-token model predicts the contextual heads' spread within 35%.
    ratio = table.loc[contextual, "CV texts"] / table.loc[contextual, "CV predicted"]
    assert ((ratio > 0.65) & (ratio < 1.35)).all(), ratio
    # Bounds hold on the texts for the contextual heads: half-widths from the bounds are wider.
    assert (table.loc[contextual, "t Chebyshev"] > table.loc[contextual, "t texts"]).all()
    assert (table.loc[contextual, "t Hoeffding"] > table.loc[contextual, "t texts"]).all()


def test_study_methods_take_head_numbers(planted, windows, study):
    texts, labels = windows
    subset = st.denominator_study(planted.model, texts, n=512, heads=[0, 6, 8], labels=labels)
    for head in (6, 8):  # rows 1 and 2 of the subset, rows 6 and 8 of the full study
        torch.testing.assert_close(subset.values(head), study.values(head))
        torch.testing.assert_close(subset.measured(head), study.measured(head))
        assert subset.predicted_cv(head) == pytest.approx(study.predicted_cv(head))
    assert subset.row(8) == 2 and study.row(8) == 8
    for method in (
        subset.values,
        subset.sum_sq,
        subset.sigma,
        subset.predicted_mean,
        subset.simulate,
        subset.measured,
        subset.n_eff_random,
    ):
        with pytest.raises(
            InputError, match=r"Head 2 is not in this study \(heads: \[0, 6, 8\]\)"
        ):
            method(2)
    with pytest.raises(InputError, match="not in this study"):
        subset.tails(2, torch.tensor([0.1]))
    assert list(subset.table().index) == [0, 6, 8]


def test_prediction_with_fixed_terms_factorises(study):
    for head in study.heads:
        k = study.row(head)
        pos = study.kernel[k]
        rho, n_rand = study.random_share(head), study.n_eff_random(head)
        # CV = rho (sigma/mu) / sqrt(n_eff random), the same number as sd / mean.
        assert study.predicted_cv(head) == pytest.approx(rho * study.sigma(head) / n_rand**0.5)
        assert study.predicted_cv(head) == pytest.approx(
            study.predicted_sd(head) / study.predicted_mean(head)
        )
        assert 0 < rho <= 1 and 1 <= n_rand <= study.n - 1
        # Without the fixed terms, n_eff random would be the width over the random positions.
        inner = pos[1:-1] / pos[1:-1].sum()
        assert n_rand == pytest.approx(float(1 / (inner**2).sum()))
    # Contextual heads: the fixed terms hardly matter. Previous-token heads: their kernel peaks
    # at i = n - 1, a random token, so the fixed terms matter little there too, but the random
    # part is about one token wide.
    assert study.random_share(0) > 0.85 and study.n_eff_random(0) == pytest.approx(
        study.n_eff(0), rel=0.05
    )
    assert study.n_eff_random(3) < 3 < study.n_eff_random(0)


def test_stopword_preference_finds_the_planted_heads(planted, study):
    preference = study.preference(torch.tensor(stopword_ids(planted.model.tokenizer)))
    contextual = planted.truth.head_groups["contextual"]
    assert min(contextual, key=preference.get) == 6  # planted stopword_weight -0.8
    assert max(contextual, key=preference.get) == 8  # planted stopword_weight +0.8
    # The planted weights, seen through the factor the destination ' the' puts on content scores.
    factor = planted.truth.content_factor_the
    assert preference[6] == pytest.approx(-0.8 * factor[6], abs=0.15)
    assert preference[8] == pytest.approx(0.8 * factor[8], abs=0.15)
    with pytest.raises(ValueError, match="some, but not all"):
        study.preference(torch.tensor([50256]))


def test_tail_figure_and_concentration_figure_for_every_head(study):
    tails = {
        head: study.tails(head, study.deviation_grid(head, n_t=10), n_samples=500)
        for head in study.heads
    }
    for head, frame in tails.items():
        assert frame["t"].iloc[-1] == pytest.approx(
            5 * max(study.predicted_sd(head), float(study.measured(head).std()))
        )
        assert (frame["texts"].diff().dropna() <= 0).all()  # tails decrease with t
    figure = plot_tail_bounds(tails, n_cols=4)
    assert len([ax for ax in figure.axes if ax.get_visible()]) == 12
    plt.close(figure)
    table = study.table(n_samples=500)
    figure = plot_concentration(table, {"contextual": [0, 2, 6, 8, 9, 10]})
    plt.close(figure)


def test_bootstrap_standard_error_of_a_mean():
    x = torch.randn(400, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    se = st.bootstrap_standard_error(x, lambda v: float(v.mean()), n_boot=2000)
    assert se == pytest.approx(float(x.std()) / 20, rel=0.1)
    assert st.coefficient_of_variation(torch.tensor([1.0, 3.0])) == pytest.approx(2**0.5 / 2)
    with pytest.raises(ValueError, match="at least two"):
        st.bootstrap_standard_error(x[:1], lambda v: float(v.mean()))


def test_stopword_density_moves_heads_6_and_8_in_opposite_directions(planted, windows, study):
    model = planted.model
    texts, _ = windows
    density = st.kernel_weighted_density(study, texts, torch.tensor(stopword_ids(model.tokenizer)))
    assert st.correlation(density[:, 6], study.ratio[:, 6].log()) < -0.5
    assert st.correlation(density[:, 8], study.ratio[:, 8].log()) > 0.5


def test_relative_denominators_average_to_one():
    log_d = torch.randn(5, 2, 7, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(st.relative_denominators(log_d).mean(0), torch.ones(2, 7))


def test_bad_inputs_give_clear_errors(planted, windows):
    model = planted.model
    with pytest.raises(InputError, match="Head -1 out of range"):
        st.log_kernels(model, 100, heads=[-1])
    with pytest.raises(InputError, match="Position 1024 out of range"):
        st.denominator_study(model, windows[0], n=1024)
    with pytest.raises(InputError, match="Positions must be in 0..9"):
        st.log_denominators(model, windows[0][0][:10], positions=torch.tensor([10]))
    with pytest.raises(ValueError, match="No window is longer than n = 900"):
        st.denominator_study(model, [w[:600] for w in windows[0]], n=900)


def test_main_job_rows(planted, windows):
    from context_neurons.reproduce.pipeline import stability_rows

    texts, labels = windows
    rows = {r.key: r for r in stability_rows(st.denominator_study(planted.model, texts,
                                                                  labels=labels))}
    cv = rows["denominator_cv"].value
    assert set(cv) == set(range(12))
    assert max(cv[h] for h in (0, 2, 6, 8, 9, 10)) < min(cv[h] for h in (3, 4, 7))
    assert f"{len(texts)} texts" in rows["denominator_cv"].label
    se = rows["denominator_cv_se"].value
    assert all(0 < se[h] < cv[h] for h in cv)  # 40 texts: a few per cent of the CV, not zero
    # The paper column holds only paper values: the prediction is ours, not the paper's.
    assert rows["denominator_cv_predicted"].paper == rows["denominator_cv_se"].paper == ""


def test_weighted_sum_cumulants_by_enumeration():
    """Variance, third moment and fourth cumulant of a two-term weighted sum, against the exact
    distribution enumerated over every pair of values."""
    values, probs = discrete_distribution(5, seed=4)
    kernel = torch.tensor([0.3, 0.7], dtype=torch.float64)
    sums = kernel[0] * values[:, None] + kernel[1] * values[None, :]
    weights = probs[:, None] * probs[None, :]
    centred = sums - (weights * sums).sum()
    variance = float((weights * centred**2).sum())
    third = float((weights * centred**3).sum())
    kappa4 = float((weights * centred**4).sum()) - 3 * variance**2
    got = st.weighted_sum_cumulants(kernel, values, probs)
    assert got == pytest.approx((variance, third, kappa4), rel=1e-10, abs=1e-14)


@pytest.mark.parametrize("skewed", [False, True])
def test_cv_standard_error_matches_repeated_estimates(skewed):
    """The delta-method standard error of a CV against the spread of 3000 CV estimates."""
    gen = torch.Generator().manual_seed(5)
    if skewed:  # a heavy right tail, as content weights have
        values = torch.tensor([0.5, 1.0, 2.0, 12.0], dtype=torch.float64)
        probs = torch.tensor([0.4, 0.4, 0.19, 0.01], dtype=torch.float64)
    else:
        values, probs = discrete_distribution(6, seed=1)
    n_samples, repeats = 400, 3000
    draws = torch.multinomial(probs, repeats * n_samples, replacement=True, generator=gen)
    samples = values[draws.view(repeats, n_samples)]
    estimates = samples.std(-1) / samples.mean(-1)
    mean = float((probs * values).sum())
    variance, third, kappa4 = st.weighted_sum_cumulants(torch.ones(1, dtype=torch.float64), values, probs)
    se = st.cv_standard_error(mean, variance, third, kappa4, n_samples)
    assert se == pytest.approx(float(estimates.std()), rel=0.1)
    with pytest.raises(ValueError, match="positive variance"):
        st.cv_standard_error(1.0, 0.0, 0.0, 0.0, 10)


def test_simulated_cv_standard_error_covers_the_simulation(study):
    """The study's i.i.d. CV agrees with the prediction within five of its standard errors, for
    every head, and the standard error shrinks as 1 / sqrt(N)."""
    for head in study.heads:
        se = study.simulated_cv_standard_error(head, 4000)
        cv = st.coefficient_of_variation(study.simulate(head, n_samples=4000, seed=2))
        assert abs(cv - study.predicted_cv(head)) < 5 * se, head
        assert study.simulated_cv_standard_error(head, 16000) == pytest.approx(se / 2, rel=1e-9)


def test_denominators_over_positions_equal_log_denominators_text_by_text(planted, windows):
    model = planted.model
    texts = [w[:400] for w in windows[0][:5]]
    positions, log_d = st.denominators_over_positions(model, texts, heads=[0, 3, 6], stride=7, chunk=2)
    assert positions.tolist() == list(range(0, 400, 7))
    for k, text in enumerate(texts):
        expected = st.log_denominators(model, text, heads=[0, 3, 6], positions=positions)
        torch.testing.assert_close(log_d[k], expected.cpu(), atol=2e-5, rtol=1e-5)


def test_most_frequent_tokens(study):
    top = study.most_frequent(5)
    order = torch.argsort(study.probs, descending=True)[:5]
    assert top.tolist() == study.token_ids[order].tolist()
    assert float(study.probs[torch.isin(study.token_ids, top)].min()) >= float(
        study.probs[~torch.isin(study.token_ids, top)].max()
    )
    with pytest.raises(InputError, match="k must be between"):
        study.most_frequent(0)


def test_denominators_per_text_figure_has_one_point_per_text(study):
    from context_neurons.plotting.stability import plot_denominators_per_text

    figure = plot_denominators_per_text(study, [0, 3], title="a model")
    visible = [ax for ax in figure.axes if ax.get_visible()]
    assert len(visible) == 2
    assert len(visible[0].collections[0].get_offsets()) == len(study.labels)
    assert figure._suptitle.get_text() == "a model"
    plt.close(figure)


# ---- chapter 3's findings, computed in the package (issue 33) ----------------------------------


def test_quantile_intervals_cover_every_position_drawn_and_the_late_ones():
    relative = torch.ones(3, 2, 5, dtype=torch.float64)
    relative[:, 1] = torch.arange(15, dtype=torch.float64).reshape(3, 5)  # head 7 varies
    positions = torch.tensor([0, 8, 16, 24, 32])
    table = st.quantile_intervals(relative, [3, 7], positions, start=16)
    assert list(table.columns) == ["positions 8..32", "positions 16..32"]
    assert table.loc[3].tolist() == ["[1.000, 1.000]", "[1.000, 1.000]"]
    late = relative[:, 1, 2:].flatten().quantile(torch.tensor([0.05, 0.95], dtype=torch.float64))
    assert table.loc[7, "positions 16..32"] == f"[{late[0]:.3f}, {late[1]:.3f}]"


def test_density_effect_and_share_spread_match_their_definitions(windows, study):
    import numpy as np

    texts, _ = windows
    stops = torch.tensor(sorted({int(t) for w in texts for t in w[:50]}))[:20]
    density = st.kernel_weighted_density(study, texts, stops)
    other = torch.arange(len(study.labels)) % 2 == 1
    head = study.heads[0]
    effect = st.density_effect(study, density, other, [head], {head: 0.5})
    share, log_d = density[:, study.row(head)].numpy(), study.measured(head).log().numpy()
    r = np.corrcoef(share, log_d)[0, 1]
    assert list(effect.columns) == st.DENSITY_COLUMNS
    assert effect.loc[head, "corr(share, log D)"] == pytest.approx(r, abs=1e-9)
    assert effect.loc[head, "slope of log D on share"] == pytest.approx(
        r * log_d.std(ddof=1) / share.std(ddof=1), rel=1e-5)
    assert effect.loc[head, "mean D/mu: Bible"] == pytest.approx(
        float(study.measured(head)[other].mean()))
    spread = st.share_spread(study, density, other, head, "Bible")
    assert list(spread.quantiles.index) == ["prose", "Bible", "all"]
    assert spread.quantiles.loc["all", "median"] == pytest.approx(float(np.median(share)))
    assert spread.explained == pytest.approx(abs(r) * log_d.std(ddof=1), rel=1e-5)
    assert f"(r^2 = {r**2:.2f})" in spread.finding()


def test_interval_half_widths_cover_and_compare_the_bounds():
    import pandas as pd

    table = pd.DataFrame(
        {
            "n_eff": [50.0, 60.0, 2.0, 3.0],
            "group": ["contextual", "contextual", "detokenization", "duplicate"],
            "t Chebyshev": [0.2, 0.3, 1.0, 2.0],
            "t Hoeffding": [0.4, 0.6, 0.5, 1.0],
            "t texts": [0.1, 0.1, 0.5, 4.0],
            "t i.i.d.": [0.1, 0.4, 0.5, 1.0],
        },
        index=pd.Index([0, 2, 3, 5], name="head"),
    )
    widths = st.interval_half_widths(table)
    assert list(widths.table.columns[:5]) == ["group", "t Chebyshev", "t Hoeffding", "t texts",
                                              "t i.i.d."]
    assert widths.table["Chebyshev covers texts"].tolist() == [True, True, True, False]
    assert widths.table["Chebyshev covers i.i.d."].tolist() == [True, False, True, True]
    assert widths.table["Hoeffding covers texts"].tolist() == [True, True, True, False]
    assert widths.findings() == [
        "Chebyshev's 95% half-width is the narrower of the two for 2 of 4 heads",
        "contextual: Chebyshev's half-width is 2.0 to 3.0 times the measured one",
        "contextual: Hoeffding's half-width is 4.0 to 6.0 times the measured one",
        "detokenization: Chebyshev's half-width is 2.0 to 2.0 times the measured one",
        "detokenization: Hoeffding's half-width is 1.0 to 1.0 times the measured one",
    ]
    alone = st.interval_half_widths(table[table["group"] == "duplicate"])
    assert alone.findings() == [
        "Chebyshev's 95% half-width is the narrower of the two for 0 of 1 heads"]
