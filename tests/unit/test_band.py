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
