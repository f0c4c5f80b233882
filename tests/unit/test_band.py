"""Tests of the certified band (issue 56) against brute force on a small model.

The model: a small GPT-2-architecture model whose four heads have weak queries (chapter 3's
independent-token model describes them; ``make_small_model(gentle_heads=...)``), all four in the
circuit. Texts are drawn from the model's own assumption (BOS, then independent tokens from the
calibration distribution) and run through the exact model's hooks.

**Binomial allowance.** A band that holds with probability ``p >= 1 - delta`` per pair has, on
``N`` independent texts, a measured rate whose standard error is at most
``sqrt(delta (1 - delta) / N)``. Pairs of one text are not independent, so ``N`` counts texts, not
pairs (the conservative choice), and a rate is accepted when it is at least
``1 - delta - 3 sqrt(delta (1 - delta) / N)``: a correct band fails this about once in 700 runs
(one-sided, three standard errors); the seeds are fixed, so a run is reproducible.
"""

from __future__ import annotations

import math

import pytest
import torch

from context_neurons import circuit as C
from context_neurons.evaluation import band as B
from context_neurons.hooks import run_until
from context_neurons.models.toy import make_small_model

torch.set_grad_enabled(False)

DELTA = 0.1
N_TEXTS = 200
NEURONS = list(range(16))


def allowance(delta: float, n: int) -> float:
    """Three standard errors of a rate ``1 - delta`` measured on ``n`` independent texts."""
    return 3 * math.sqrt(delta * (1 - delta) / n)


@pytest.fixture(scope="module")
def setup():
    model = make_small_model(seed=0, gentle_heads=(0, 1, 2, 3))[0]
    gen = torch.Generator().manual_seed(5)
    calibration = torch.randint(1, model.cfg.d_vocab, (model.cfg.n_ctx,), generator=gen)
    calibration[0] = 0
    circuit = C.build_circuit(model, calibration, heads=[0, 1, 2, 3], dest_token=7, n_min=4)
    residual = B.measure_residual(circuit, model, NEURONS, DELTA, seed=1)
    texts = B.sample_texts(circuit, N_TEXTS, model.cfg.n_ctx, seed=7)  # fresh draws
    band = B.certified_band(circuit, model, texts, NEURONS, DELTA, residual=residual)
    stored = run_until(model, texts, "blocks.0.mlp.hook_pre", names=["blocks.0.hook_resid_mid"])
    return model, circuit, residual, texts, band, stored


def test_band_holds_the_true_pre_activation_at_the_stated_rate(setup):
    """The whole band against the hook ``blocks.0.mlp.hook_pre`` on texts of the model."""
    _, _, _, _, band, stored = setup
    true = stored["blocks.0.mlp.hook_pre"][..., NEURONS].double()
    rate = float(band.contains(true).double().mean())
    assert rate >= 1 - DELTA - allowance(DELTA, N_TEXTS), rate
    assert torch.isfinite(band.width).all()


def test_a_narrower_band_fails(setup):
    """The test above can fail: the same band shrunk to a fifth of its half-width about its
    midpoint misses too often."""
    _, _, _, _, band, stored = setup
    true = stored["blocks.0.mlp.hook_pre"][..., NEURONS].double()
    mid, half = (band.lower + band.upper) / 2, (band.upper - band.lower) / 2
    inside = ((true - mid).abs() <= 0.2 * half).double().mean()
    assert inside < 1 - DELTA - allowance(DELTA, N_TEXTS), float(inside)


def test_denominator_interval_holds(setup):
    """Step 1: each head's ``D_h(n)`` of the text (the circuit's frame) lies in chapter 3's
    interval at rate ``>= 1 - delta_head``; a tenth of the deviation does not."""
    model, circuit, _, texts, band, _ = setup
    interval = band.denominators
    log_d = torch.stack([circuit.text_log_denominators(model, t) for t in texts]).double()
    ratio = torch.exp(log_d - interval.log_mean_weight[None, :, None])  # [text, head, pos]
    random = interval.tau[0] > 0  # positions with random terms
    inside = ((ratio >= interval.lower) & (ratio <= interval.upper))[:, :, random]
    rate = inside.double().mean((0, 2))
    assert (rate >= 1 - interval.delta_head - allowance(interval.delta_head, N_TEXTS)).all(), rate
    tight = ((ratio - interval.mean).abs() <= 0.1 * interval.tau)[:, :, random].double().mean()
    assert tight < 1 - interval.delta_head - allowance(interval.delta_head, N_TEXTS)


def test_ln2_scale_bound_holds(setup):
    """Step 3: the true LN2 scale ``1 / sqrt(var + eps)`` of ``blocks.0.hook_resid_mid`` lies in
    ``[scale_lower, scale_upper]``, and the calibration's single scale does not always."""
    model, circuit, _, _, band, stored = setup
    resid = stored["blocks.0.hook_resid_mid"].double()
    resid = resid - resid.mean(-1, keepdim=True)
    scale = torch.rsqrt((resid**2).mean(-1) + model.cfg.eps)
    inside = ((scale >= band.scale_lower) & (scale <= band.scale_upper)).double().mean()
    assert inside >= 1 - DELTA - allowance(DELTA, N_TEXTS)
    assert not torch.isclose(scale, torch.tensor(circuit.ln2_scale, dtype=scale.dtype),
                             rtol=1e-3).all()


def test_residual_is_the_conformal_quantile(setup):
    """Step 2: the measured residual is the stated order statistic of freshly computed ones."""
    _, _, residual, _, _, _ = setup
    assert B.conformal_rank(64, DELTA / 4) == math.ceil(65 * (1 - DELTA / 4))
    with pytest.raises(B.BandError, match="too few"):
        B.conformal_rank(10, DELTA / 4)
    assert residual.projected.shape == (64, len(NEURONS)) and (residual.projected >= 0).all()
    assert residual.norm.shape == (64,)


def test_a_failed_head_is_bounded_by_its_values(setup):
    """A head left out of ``certified`` is bounded by the range of its value outputs: the band
    still holds, and is wider."""
    model, circuit, _, texts, band, stored = setup
    residual = B.measure_residual(circuit, model, NEURONS, DELTA, certified=[0, 1, 2], seed=1,
                                  n_texts=40)
    wide = B.certified_band(circuit, model, texts[:50], NEURONS, DELTA, certified=[0, 1, 2],
                            residual=residual)
    true = stored["blocks.0.mlp.hook_pre"][:50][..., NEURONS].double()
    assert wide.failed == [3]
    assert float(wide.contains(true).double().mean()) >= 1 - DELTA - allowance(DELTA, 50)
    assert wide.width.median() > band.width[:50].median()


def test_bad_input_is_refused(setup):
    model, circuit, residual, texts, band, _ = setup
    for delta in (0, 1.5, "x"):
        with pytest.raises(B.BandError, match="delta"):
            B.certified_band(circuit, model, texts[:2], NEURONS, delta, residual=residual)
    two = C.build_circuit(model, circuit.calibration.tokens, heads=[0, 1], dest_token=7, n_min=4)
    with pytest.raises(B.BandError, match="not in the circuit"):
        B.measure_residual(two, model, NEURONS, DELTA, certified=[0, 2], n_texts=40)
    with pytest.raises(B.BandError, match="other neurons"):
        B.certified_band(circuit, model, texts[:2], [1, 2], DELTA, residual=residual)
    short = B.measure_residual(circuit, model, NEURONS, DELTA, n_texts=40, length=16)
    with pytest.raises(B.BandError, match="positions"):
        B.certified_band(circuit, model, texts[:2], NEURONS, DELTA, residual=short)
    with pytest.raises(B.BandError, match="shape"):
        band.contains(torch.zeros(1, 2, 3))


def test_coverage_bootstrap_and_reading_rule():
    """The stored table's statistic and reading rule (``context_neurons.band_coverage``)."""
    from context_neurons.band_coverage import bootstrap_coverage, reading

    pairs = torch.full((10,), 100.0)
    coverage, low, high = bootstrap_coverage(torch.full((10,), 90.0), pairs)
    assert coverage == low == high == pytest.approx(0.9)
    coverage, low, high = bootstrap_coverage(torch.tensor([100.0] * 5 + [50.0] * 5), pairs)
    assert coverage == pytest.approx(0.75) and 0.5 <= low < 0.75 < high <= 1.0
    assert reading(0.7, 0.8, 0.9) == "falls short"
    assert reading(0.85, 0.95, 0.9) == "consistent with nominal"
    assert reading(0.92, 0.99, 0.9) == "at or above nominal"


def test_band_coverage_command_refuses_an_unknown_model(capsys):
    from context_neurons.__main__ import main

    assert main(["band-coverage", "--models", "gpt9"]) != 0
    assert "Unknown models ['gpt9']" in capsys.readouterr().err


def test_interval_product_with_an_unbounded_projection():
    """Step 4's interval arithmetic: corners, and ``0 * (-inf)`` (a zero scale bound against an
    unbounded projection) reaching ``-inf`` instead of NaN (which no value lies in)."""
    t = torch.tensor
    lower, upper = B.interval_product(t([1.0, 0.0]), t([2.0, 3.0]), t([-1.0, -math.inf]),
                                      t([3.0, 2.0]))
    assert lower.tolist() == [-2.0, -math.inf] and upper.tolist() == [6.0, 6.0]


@pytest.fixture(scope="module")
def run_setup():
    """A small model with the band's context (``LENGTH`` tokens), its circuit, an assumptions
    check grouping the four heads in two groups (without chapter 3's study it measures no
    spread, so it passes no head: both bands are measured), and three texts drawn under (A1)."""
    from context_neurons.assumptions import measure_assumptions
    from context_neurons.band_coverage import LENGTH

    model = make_small_model(seed=0, gentle_heads=(0, 1, 2, 3), n_ctx=LENGTH)[0]
    gen = torch.Generator().manual_seed(5)
    calibration = torch.randint(1, model.cfg.d_vocab, (LENGTH,), generator=gen)
    calibration[0] = 0
    circuit = C.build_circuit(model, calibration, heads=[0, 1, 2, 3], dest_token=7, n_min=4)
    windows = list(B.sample_texts(circuit, 3, LENGTH, seed=3))
    groups = {"slow": [0, 1], "wide": [2, 3]}
    check = measure_assumptions(model, circuit, groups, windows)
    return model, circuit, windows, check, groups


@pytest.fixture
def kept_residuals(monkeypatch):
    """Step 2's residual measured once per band for the tests below (``cached_residual``, the
    same measurement kept): each test needs the same two, and each takes seconds."""
    from context_neurons import band_coverage as bc

    monkeypatch.setattr(bc, "measure_residual", lambda circuit, model, neurons, delta, certified,
                        length, seed: B.cached_residual(circuit, model, neurons, delta, certified,
                                                        length, seed=seed))


#: A ranking of the neurons by score (the main job passes ``scores.ranking()``).
RANKING = [5, 1, 9, 0, 3, 2, 7, 4, 8, 6]


def test_main_job_band_rows_report_each_band_and_head_group_beside_the_nominal(run_setup,
                                                                              kept_residuals):
    """The main job's band rows (issue 56): each band's coverage with its interval and nominal
    1 - delta, and one entry per head group of the circuit's heads, from the check's groups."""
    import json

    from context_neurons.band_coverage import DELTA, N_NEURONS
    from context_neurons.reproduce.band_rows import KEYS, band_rows
    from context_neurons.reproduce.results import Results

    model, circuit, windows, check, groups = run_setup
    rows = band_rows(model, circuit, RANKING, windows, check)
    by_key = {row.key: row for row in rows}
    assert list(by_key) == list(KEYS)
    assert by_key["band_neurons"].value == RANKING[:N_NEURONS]
    bands = by_key["band_coverage"].value
    assert list(bands) == ["all contextual heads", "heads the check passes"]
    for band in bands.values():
        low, high = band["coverage_ci95"]
        assert 0 <= low <= band["coverage"] <= high <= 1 and band["nominal"] == 1 - DELTA
        assert band["reading"] in ("at or above nominal", "consistent with nominal",
                                   "falls short") and 0 <= band["vacuous"] <= 1
    per_group = by_key["band_coverage_per_head_group"].value
    assert set(per_group) == set(groups)  # exactly the groups of the circuit's heads
    table = by_key["band_coverage_table"].value["denominators by group"]
    assert {g["group"]: g["heads"] for g in table} == groups
    for group in per_group.values():
        assert group["nominal"] == round(1 - DELTA / 2 / len(circuit.heads), 4)
        assert math.isfinite(group["coverage"])
        assert set(group["check_fails"]) <= set(circuit.heads)
    results = Results(model="small", model_source="test", planted=False, n_texts=3, texts={},
                      device="cpu", rows=rows, seconds=1.0)
    written = json.loads(results.to_json())
    assert written["band_coverage"] == bands and "denominators" in written["band_coverage_table"]


def test_main_job_band_rows_read_a_shrunk_band_as_falling_short(run_setup, kept_residuals,
                                                                monkeypatch):
    """A band shrunk to the approximation itself (zero width, step 1's interval a point) misses
    nearly every pair: read as falling short, in the records and in the words under the table."""
    from context_neurons import band_coverage as bc
    from context_neurons.reproduce.band_rows import band_rows

    model, circuit, windows, check, _ = run_setup
    original = bc.certified_band

    def shrunk(*args, **kwargs):
        band = original(*args, **kwargs)
        band.lower = band.upper = band.approximate
        band.denominators.tau = torch.zeros_like(band.denominators.tau)
        return band

    monkeypatch.setattr(bc, "certified_band", shrunk)
    by_key = {row.key: row for row in band_rows(model, circuit, RANKING, windows, check)}
    bands, groups = by_key["band_coverage"], by_key["band_coverage_per_head_group"]
    assert all(b["reading"] == "falls short" for b in bands.value.values())
    assert all(g["reading"] == "falls short" for g in groups.value.values())
    assert "falls short of nominal" in bands.reading and "falls short" in groups.reading


def test_main_job_band_rows_with_one_text_say_not_computed(run_setup):
    """A bootstrap over documents needs two: one text gives a reason, never a number."""
    from context_neurons.reproduce.band_rows import band_rows

    model, circuit, windows, check, _ = run_setup
    rows = band_rows(model, circuit, RANKING, windows[:1], check)
    assert [r.key for r in rows] == ["band_coverage", "band_coverage_per_head_group"]
    for row in rows:
        assert math.isnan(row.value)
        assert row.label.startswith("not computed: 1 text") and "--texts 2 or more" in row.label
