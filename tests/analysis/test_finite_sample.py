"""The n-slope rule and the finite-sample prediction (P) (mhajax.analysis.finite_sample),
against closed forms, hand values and Monte Carlo."""
import math

import numpy as np
import pytest

from mhajax.analysis.finite_sample import (HOLDS, SLOPE_TOLERANCE, UNDEFINED, UNRESOLVED, VIOLATED,
                                           excess_slope, expected_max_normal, n_slope, paired_spreads,
                                           predicted_margin, slope_rule)
from mhajax.errors import InputError

NS = (64, 128, 256, 512, 1024, 2048, 4096)


# --- a_n = E max of n standard normals ----------------------------------------------------

def test_expected_max_closed_forms():
    """a_1 = 0, a_2 = 1/√π, a_3 = 3/(2√π), a_4 = (3/√π)(1/2 + arcsin(1/3)/π) (order statistics
    of the normal, known in closed form up to n = 5)."""
    sp = math.sqrt(math.pi)
    assert expected_max_normal(1) == 0.0
    assert expected_max_normal(2) == pytest.approx(1 / sp, abs=1e-10)
    assert expected_max_normal(3) == pytest.approx(3 / (2 * sp), abs=1e-10)
    assert expected_max_normal(4) == pytest.approx(3 / sp * (0.5 + math.asin(1 / 3) / math.pi), abs=1e-10)


@pytest.mark.parametrize("n", [64, 4096])
def test_expected_max_monte_carlo(n):
    """a_n against the mean of the maximum of n draws, 20000 replicates: within 5 standard errors."""
    rng = np.random.default_rng(n)
    reps = 20000
    m = np.array([rng.standard_normal((1000, n)).max(axis=1) for _ in range(reps // 1000)]).ravel()
    se = m.std(ddof=1) / math.sqrt(reps)
    assert abs(m.mean() - expected_max_normal(n)) < 5 * se


def test_expected_max_is_increasing_and_below_sqrt_2logn():
    """a_n increases with n and stays below √(2 ln n) (the union bound on E max)."""
    a = [expected_max_normal(n) for n in NS]
    assert np.all(np.diff(a) > 0)
    assert all(v < math.sqrt(2 * math.log(n)) for v, n in zip(a, NS))


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "8", None])
def test_expected_max_bad_n(bad):
    with pytest.raises(InputError, match="n must be"):
        expected_max_normal(bad)


# --- (P) ----------------------------------------------------------------------------------

def test_prediction_by_hand():
    """n = 1: no noise term, γ₀/G₀; n = 2: a_2 = 1/√π, so (0.6 − 0.1/√π)/(2 + 0.1/√π)."""
    assert predicted_margin(0.6, 2.0, 0.1, 1.0, 1.0, 1) == pytest.approx(0.3, abs=1e-15)
    e = 0.1 / math.sqrt(math.pi)
    assert predicted_margin(0.6, 2.0, 0.1, 1.0, 1.0, 2) == pytest.approx((0.6 - e) / (2 + e), rel=1e-10, abs=0)
    # s_w and s_g enter separately: s_g = 0 leaves the denominator at G₀
    assert predicted_margin(0.6, 2.0, 0.1, 3.0, 0.0, 2) == pytest.approx((0.6 - 3 * e) / 2, rel=1e-10, abs=0)
    # σ = 0: flat at γ₀/G₀ whatever n
    np.testing.assert_allclose(predicted_margin(0.6, 2.0, 0.0, 1.0, 1.0, NS), 0.3, rtol=0, atol=1e-15)


def test_prediction_numerator_and_denominator_monte_carlo():
    """(P)'s parts are expectations of extremes: for margins m_i = γ₀ + σ s_w ξ_i the expected
    minimum over n samples is γ₀ − σ s_w a_n (the numerator of (P), read with G₀ = 1, s_g = 0),
    and for norms G₀ + σ s_g ξ_i the expected maximum is G₀ + σ s_g a_n."""
    g0, G0, sig, sw, sg, n, reps = 0.5, 1.7, 0.2, 1.3, 0.7, 256, 20000
    rng = np.random.default_rng(1)
    mins = (g0 + sig * sw * rng.standard_normal((reps, n))).min(axis=1)
    maxs = (G0 + sig * sg * rng.standard_normal((reps, n))).max(axis=1)
    num = predicted_margin(g0, 1.0, sig, sw, 0.0, n)
    den = g0 / predicted_margin(g0, G0, sig, 0.0, sg, n)
    assert abs(mins.mean() - num) < 5 * mins.std(ddof=1) / math.sqrt(reps)
    assert abs(maxs.mean() - den) < 5 * maxs.std(ddof=1) / math.sqrt(reps)


def test_prediction_is_not_positive_where_the_noise_reaches_the_margin():
    """γ₀ = σ s_w a_n exactly -> 0; beyond it negative: not separable."""
    a = expected_max_normal(64)
    assert predicted_margin(0.1 * a, 1.0, 0.1, 1.0, 1.0, 64) == pytest.approx(0.0, abs=1e-15)
    assert predicted_margin(0.1 * a, 1.0, 0.1, 1.01, 1.0, 64) < 0


def test_paired_spreads_by_hand():
    """Noisy = clean + σ z with z = (1, −1, 1, −1): per-unit-σ sd (ddof 1) = √(4/3);
    norms + σ (2, 0, 0, 0): sd (ddof 1) of (2, 0, 0, 0) = 1."""
    z = np.array([1.0, -1.0, 1.0, -1.0])
    clean = np.array([0.3, 0.5, 0.2, 0.9])
    sw, sg = paired_spreads(clean + 0.05 * z, clean, np.ones(4) + 0.05 * np.array([2.0, 0, 0, 0]), np.ones(4), 0.05)
    assert sw == pytest.approx(math.sqrt(4 / 3), rel=1e-12, abs=0)
    assert sg == pytest.approx(1.0, rel=1e-12, abs=0)
    assert paired_spreads(clean, clean, np.ones(4), np.ones(4), 0.0) == (None, None)


# --- the slope rule -------------------------------------------------------------------------

@pytest.mark.parametrize("ci,want", [
    ([-0.05, 0.02], HOLDS), ([SLOPE_TOLERANCE + 1e-12, 0.0], HOLDS),
    ([-0.3, -0.2], VIOLATED), ([-0.3, SLOPE_TOLERANCE - 1e-12], VIOLATED),
    ([-0.15, -0.05], UNRESOLVED), ([SLOPE_TOLERANCE, 0.0], UNRESOLVED), ([-0.2, SLOPE_TOLERANCE], UNRESOLVED),
    (None, UNDEFINED), ([None, 0.1], UNDEFINED), ([float("nan"), 0.1], UNDEFINED),
])
def test_slope_rule_at_and_around_the_tolerance(ci, want):
    assert SLOPE_TOLERANCE == -0.1
    assert slope_rule(ci) == want


def curves(slopes, ns=NS, a=0.3):
    """``[S, m]``: seed s follows a·n^{b_s} exactly."""
    ns = np.asarray(ns, float)
    return np.array([a * ns ** b for b in slopes])


BOOT = dict(resamples=2000, level=0.95, seed=0)


def test_n_slope_constant_curve_holds():
    fit = n_slope(NS, curves([-0.01, 0.01, 0.0, 0.005]), **BOOT)
    assert fit["rule"] == HOLDS and fit["tolerance"] == SLOPE_TOLERANCE
    assert abs(fit["slope"]) < 0.011 and fit["ci"][0] > -0.011


def test_n_slope_decaying_curve_is_violated():
    fit = n_slope(NS, curves([-0.32, -0.28, -0.30, -0.31]), **BOOT)
    assert fit["rule"] == VIOLATED
    assert -0.32 <= fit["slope"] <= -0.28 and fit["ci"][1] < SLOPE_TOLERANCE


def test_n_slope_ci_straddling_tau_is_unresolved():
    """Seed slopes −0.15, −0.05, −0.13, −0.07 (mean −0.1): the CI contains τ."""
    fit = n_slope(NS, curves([-0.15, -0.05, -0.13, -0.07]), **BOOT)
    assert fit["ci"][0] < SLOPE_TOLERANCE < fit["ci"][1]
    assert fit["rule"] == UNRESOLVED


def test_three_points_are_enough_to_fit():
    fit = n_slope(NS[:3], curves([0.0, 0.001, -0.001], NS[:3]), **BOOT)
    assert fit["rule"] == HOLDS


# --- the excess slope ----------------------------------------------------------------------

def test_excess_slope_separates_the_extreme_value_decay():
    """A margin that falls exactly as (P) predicts (per seed, times a constant) violates the raw
    rule but has excess slope 0 (holds); multiplied by n^−0.3 on top, the excess is −0.3 (violated)."""
    sw = np.array([0.9, 1.0, 1.1, 1.2])
    pred = np.array([predicted_margin(0.6, 2.0, 0.12, s, 1.0, NS) for s in sw])  # > 0 at every n
    meas = pred * np.array([[1.1], [1.05], [1.2], [0.95]])  # level differs per seed, shape does not
    assert n_slope(NS, meas, **BOOT)["rule"] == VIOLATED
    ex = excess_slope(NS, meas, pred, **BOOT)
    assert ex["rule"] == HOLDS and abs(ex["slope"]) < 1e-12
    assert ex["predicted_slope"] == pytest.approx(
        np.polyfit(np.log(NS), np.log(pred.mean(axis=0)), 1)[0], rel=1e-10, abs=0)
    ex = excess_slope(NS, meas * np.asarray(NS, float) ** -0.3, pred, **BOOT)
    assert ex["rule"] == VIOLATED and ex["slope"] == pytest.approx(-0.3, abs=1e-10)


def test_excess_slope_undefined_and_bad_shapes():
    pred = curves([0.0, 0.0])
    pred[1, 3] = -0.01
    out = excess_slope(NS, curves([0.0, 0.0]), pred, **BOOT)
    assert out["rule"] == UNDEFINED and out["ci"] is None
    with pytest.raises(InputError, match="same shape"):
        excess_slope(NS, curves([0.0, 0.0]), curves([0.0, 0.0, 0.0]), **BOOT)


# --- exact boundaries and return types (issue 32: mutation testing) ---------------------------

def test_expected_max_accepts_numpy_integers_and_is_a_float():
    v = expected_max_normal(np.int64(2))
    assert type(v) is float and v == pytest.approx(1 / math.sqrt(math.pi), abs=1e-10)
    assert type(expected_max_normal(1)) is float


def test_expected_max_large_n_against_monte_carlo_free_value():
    """a_4096 = 3.6261 (quoted in the docstring; the integral to 1e-4)."""
    assert expected_max_normal(4096) == pytest.approx(3.6261, abs=1e-4)


def test_predicted_margin_scalar_and_array_returns():
    e = 0.1 / math.sqrt(math.pi)
    v = predicted_margin(0.6, 2.0, 0.1, 1.0, 1.0, 2)
    assert type(v) is float
    arr = predicted_margin(0.6, 2.0, 0.1, 1.0, 1.0, [1, 2])
    assert isinstance(arr, np.ndarray) and arr.shape == (2,)
    np.testing.assert_allclose(arr, [0.3, (0.6 - e) / (2 + e)], rtol=1e-10, atol=0)
    one = predicted_margin(0.6, 2.0, 0.1, 1.0, 1.0, [2])        # a sequence of one n stays an array
    assert isinstance(one, np.ndarray) and one.shape == (1,)
    both = predicted_margin(np.array([0.6, 1.2]), 2.0, 0.1, 1.0, 1.0, 2)   # scalar n, array γ₀
    assert isinstance(both, np.ndarray) and both.shape == (2,)
    np.testing.assert_allclose(both, [(0.6 - e) / (2 + e), (1.2 - e) / (2 + e)], rtol=1e-10, atol=0)


def test_paired_spreads_negative_sigma_and_float_type():
    z = np.array([1.0, -1.0, 1.0, -1.0])
    assert paired_spreads(z, z, z, z, -0.1) == (None, None)
    sw, sg = paired_spreads(2 * z, z, z, z, 1.0)
    assert type(sw) is float and type(sg) is float and sg == 0.0
    assert sw == pytest.approx(np.std(z, ddof=1), rel=1e-14, abs=0)


def test_n_slope_passes_the_bootstrap_arguments():
    Y = curves([-0.01, 0.01, 0.0, 0.005])
    fit = n_slope(NS, Y, resamples=123, level=0.8, seed=5)
    assert fit["resamples"] == 123 and fit["level"] == 0.8
    from mhajax.analysis.rates import bootstrap_slope
    want = bootstrap_slope(np.asarray(NS, float), Y, resamples=123, level=0.8, seed=5)
    assert fit == dict(want._asdict(), rule=HOLDS, tolerance=-0.1)


def test_excess_slope_undefined_fields_exactly():
    pred = curves([0.0, 0.0])
    pred[0, 0] = 0.0                                            # not positive at one (seed, n)
    out = excess_slope(NS, curves([0.0, 0.0]), pred, **BOOT)
    assert out == dict(slope=None, ci=None, rule=UNDEFINED, tolerance=SLOPE_TOLERANCE, predicted_slope=None,
                       note="(P) is not positive at some (seed, n)")


def test_predicted_margin_keeps_the_shape_of_n():
    e2 = expected_max_normal(2)
    out = predicted_margin(0.6, 2.0, 0.1, 1.0, 1.0, np.array([[1, 2], [2, 1]]))
    assert out.shape == (2, 2)
    np.testing.assert_allclose(out, [[0.3, (0.6 - 0.1 * e2) / (2 + 0.1 * e2)],
                                     [(0.6 - 0.1 * e2) / (2 + 0.1 * e2), 0.3]], rtol=1e-10, atol=0)


def test_excess_slope_float32_prediction_and_bootstrap_arguments():
    sw = np.array([0.9, 1.0, 1.1])
    pred = np.array([predicted_margin(0.6, 2.0, 0.12, s, 1.0, NS) for s in sw])
    p32 = pred.astype(np.float32)
    meas = pred * np.array([[1.1], [1.05], [1.2]])
    ex = excess_slope(NS, meas, p32, resamples=123, level=0.8, seed=2)
    want = np.polyfit(np.log(NS), np.log(p32.astype(np.float64).mean(axis=0)), 1)[0]
    assert ex["predicted_slope"] == pytest.approx(want, rel=1e-12, abs=0)
    assert ex["resamples"] == 123 and ex["level"] == 0.8


def test_excess_slope_undefined_when_a_whole_column_is_not_positive():
    pred = curves([0.0, 0.0])
    pred[:, 2] = -0.5                                            # the seed mean is negative there
    out = excess_slope(NS, curves([0.0, 0.0]), pred, **BOOT)
    assert out["rule"] == UNDEFINED and out["predicted_slope"] is None


def test_excess_slope_infinite_prediction_has_no_predicted_slope():
    pred = curves([0.0, 0.0])
    pred[0, 1] = np.inf
    out = excess_slope(NS, curves([0.0, 0.0]), pred, **BOOT)
    assert out["predicted_slope"] is None
