"""Slope estimation, bootstrap CIs and bands (mhajax.rates) on synthetic curves with known rates."""
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from mhajax.errors import InputError
from mhajax.analysis.rates import (bootstrap_slope, classify_slope, log_grid, loglog_fit,
                                   loglog_slopes, mean_band, upper_bound_holds, window_slopes)

X = np.geomspace(64, 4096, 7)


def test_exact_power_law_slope():
    fit = loglog_fit(X, 3.0 / X)
    assert abs(fit.slope + 1) < 1e-12 and abs(fit.intercept - math.log(3.0)) < 1e-11
    assert fit.rms < 1e-12 and fit.points == 7


@given(c=st.floats(1e-3, 1e3), b=st.floats(-3.0, 1.0))
def test_power_law_slope_recovered(c, b):
    assert abs(loglog_fit(X, c * X ** b).slope - b) < 1e-9


def test_log_factor_correction():
    """y = C log(x)/x: the plain slope is shallower than -1 by about 1/log x;
    dividing by log x (log_power=1) recovers -1 exactly."""
    y = 2.0 * np.log(X) / X
    plain = loglog_fit(X, y).slope
    corrected = loglog_fit(X, y, log_power=1).slope
    assert abs(corrected + 1) < 1e-12
    u = np.log(X)
    assert -1 + 1 / u.max() - 1e-9 < plain < -1 + 1 / u.min() + 1e-9  # local slope -1 + 1/log x
    y2 = np.log(X) ** 2 / X
    assert abs(loglog_fit(X, y2, log_power=2).slope + 1) < 1e-12


def test_noisy_power_law():
    rng = np.random.default_rng(0)
    y = 5.0 / X * (1 + 0.05 * rng.standard_normal(X.size))
    assert abs(loglog_fit(X, y).slope + 1) < 0.05


def test_undefined_on_nonpositive():
    y = 1.0 / X
    y[3] = 0.0
    assert math.isnan(loglog_fit(X, y).slope)
    slopes = loglog_slopes(X, np.stack([1.0 / X, y, -1.0 / X]))
    assert abs(slopes[0] + 1) < 1e-12 and np.isnan(slopes[1:]).all()


def test_window_slopes_show_bend():
    y = np.log(X) ** 2 / X  # local slope -1 + 2/log x, steeper at large x
    w = window_slopes(X, y)
    assert w.lower > w.upper > -1


def _synthetic(S, rng, slope=-1.0, noise=0.1):
    """Per-seed curves C_s x^slope (1 + η_sj): the population mean curve is
    E[C] x^slope, whose slope is exactly ``slope``."""
    C = rng.lognormal(0.0, 0.3, size=(S, 1))
    return C * X[None] ** slope * (1 + noise * rng.standard_normal((S, X.size)))


def test_bootstrap_ci_coverage():
    """The percentile CI over seeds covers the true slope of the mean curve
    about as often as its level says (S = 20 seeds, 300 replications)."""
    rng = np.random.default_rng(1)
    hits = 0
    reps = 300
    for r in range(reps):
        f = bootstrap_slope(X, _synthetic(20, rng), resamples=400, seed=r)
        hits += f.ci[0] <= -1.0 <= f.ci[1]
    cover = hits / reps
    assert 0.85 <= cover <= 0.99, cover


def test_bootstrap_reproducible_and_seeded():
    Y = _synthetic(6, np.random.default_rng(2))
    a = bootstrap_slope(X, Y, resamples=500, seed=3)
    b = bootstrap_slope(X, Y, resamples=500, seed=3)
    c = bootstrap_slope(X, Y, resamples=500, seed=4)
    assert a == b
    assert a.ci != c.ci
    assert a.ci[0] <= a.slope <= a.ci[1]
    assert a.distinct_resamples == math.comb(11, 6)
    assert all(s is not None for s in a.per_seed)


def test_bootstrap_counts_undefined_resamples():
    """A curve that crosses zero in one seed: the seed-mean stays positive, but
    resamples drawing that seed often have a non-positive mean: counted, not fitted."""
    Y = np.tile(1.0 / X, (4, 1))
    Y[0] = -1.0 / X
    f = bootstrap_slope(X, Y, resamples=1000, seed=0)
    assert f.slope is not None and abs(f.slope + 1) < 1e-12
    assert f.undefined_resamples > 0 and f.per_seed[0] is None


def test_single_seed_has_no_ci():
    f = bootstrap_slope(X, (1.0 / X)[None], resamples=200)
    assert f.ci is None and abs(f.slope + 1) < 1e-12
    assert classify_slope(f.ci, f.slope) == "matches"


def test_mean_band():
    Y = _synthetic(8, np.random.default_rng(5))
    b = mean_band(Y, resamples=500, seed=0)
    m, lo, hi = map(np.asarray, (b.mean, b.lo, b.hi))
    assert np.allclose(m, Y.mean(0)) and np.all(lo <= m + 1e-15) and np.all(m <= hi + 1e-15)
    assert np.allclose(b.std, Y.std(0, ddof=1))
    assert mean_band(Y[:1], resamples=100).std == [0.0] * X.size


@pytest.mark.parametrize("ci,expected", [
    ([-1.1, -0.9], "matches"), ([-0.8, -0.5], "matches"), ([-2.0, -1.5], "steeper"),
    ([-0.6, -0.2], "shallower"), (None, "undefined")])
def test_classify(ci, expected):
    assert classify_slope(ci) == expected
    assert upper_bound_holds(ci) == {"matches": True, "steeper": True, "shallower": False,
                                     "undefined": None}[expected]


def test_log_grid():
    g = log_grid(3, 1000, 20)
    assert g[0] == 3 and g[-1] == 1000 and np.all(np.diff(g) > 0)
    assert list(log_grid(2, 4, 50)) == [2, 3, 4]
    with pytest.raises(InputError):
        log_grid(0, 10, 5)


@pytest.mark.parametrize("x,y,kw", [
    ([1.0], [1.0], {}), ([0.0, 1.0, 2.0], [1.0, 1.0, 1.0], {}), ([2.0, 2.0], [1.0, 2.0], {}),
    ([1.0, 2.0, 4.0], [1.0, 2.0], {}), ([0.5, 2.0, 4.0], [1.0, 1.0, 1.0], {"log_power": 1}),
    ([1.0, float("nan"), 3.0], [1.0, 1.0, 1.0], {})])
def test_bad_input(x, y, kw):
    with pytest.raises(InputError):
        loglog_fit(x, y, **kw)


def test_bad_bootstrap_args():
    Y = np.ones((3, X.size))
    with pytest.raises(InputError):
        bootstrap_slope(X, Y, resamples=0)
    with pytest.raises(InputError):
        bootstrap_slope(X, Y, level=1.0)
    with pytest.raises(InputError):
        bootstrap_slope(X, np.ones(X.size))


def test_rate_applies():
    """The rate is claimed only with a closed-form κ and β₂ and a self-bounded loss."""
    from mhajax.losses import get_loss
    from mhajax.models.base import HeadModel
    from mhajax.analysis.rates import rate_applies
    from mhajax.models import MODELS
    from mhajax.models.base import get_model
    for name in MODELS:
        for loss in ("logistic", "exponential"):
            assert rate_applies(get_model(name), get_loss(loss))[0] is True
        ok, why = rate_applies(get_model(name), get_loss("squared_hinge"))
        assert ok is False and "squared_hinge" in why
    m = get_model("softmax")
    ok, why = rate_applies(HeadModel("bare", m.head_fn, m.init), get_loss("logistic"))
    assert ok is False and "κ" in why


# --- exact boundaries and direct computations (issue 32: mutation testing) --------------------

import mhajax.analysis.rates as rates_mod  # noqa: E402
from mhajax.analysis.rates import RATE_TOLERANCE, resample_indices, rate_applies, rule_text  # noqa: E402


def _polyslope(x, Y):
    """Slope of log y on log x by numpy's own least squares, per row (NaN where a value <= 0)."""
    Y = np.atleast_2d(Y)
    return np.array([np.polyfit(np.log(x), np.log(r), 1)[0] if np.all(r > 0) else np.nan for r in Y])


def test_resample_indices_are_pcg64_integers():
    want = np.random.Generator(np.random.PCG64(7)).integers(0, 5, size=(30, 5))
    np.testing.assert_array_equal(resample_indices(5, 30, 7), want)
    assert resample_indices(3, 4, 0).shape == (4, 3)


@pytest.mark.parametrize("level", [0.95, 0.8])
def test_bootstrap_ci_is_the_numpy_quantile_of_the_same_resamples(level):
    Y = _synthetic(5, np.random.default_rng(11), noise=0.3)
    B, seed = 300, 9
    idx = np.random.Generator(np.random.PCG64(seed)).integers(0, 5, size=(B, 5))
    slopes = _polyslope(X, Y[idx].mean(axis=1))
    slopes = slopes[np.isfinite(slopes)]
    f = bootstrap_slope(X, Y, resamples=B, seed=seed, level=level)
    lo, hi = np.quantile(slopes, [(1 - level) / 2, (1 + level) / 2])
    assert f.ci == pytest.approx((lo, hi), rel=1e-10, abs=0)
    assert f.slope == pytest.approx(_polyslope(X, Y.mean(0))[0], rel=1e-10, abs=0)
    assert f.per_seed == pytest.approx(_polyslope(X, Y).tolist(), rel=1e-10, abs=0)
    assert f.level == level and f.resamples == B and f.seeds == 5 and f.log_power == 0.0
    assert f.undefined_resamples == 0
    assert f.distinct_resamples == math.comb(9, 5)
    p = np.polyfit(np.log(X), np.log(Y.mean(0)), 1)
    assert f.intercept == pytest.approx(p[1], rel=1e-10, abs=0)
    res = np.log(Y.mean(0)) - np.polyval(p, np.log(X))
    assert f.rms == pytest.approx(math.sqrt(np.mean(res ** 2)), rel=1e-8, abs=0)
    assert f.window._fields == ("lower", "upper")


def _forced(monkeypatch, rows):
    """bootstrap_slope on S = 2 seeds, y_0 = 1/x and y_1 = −1/x, with the resamples given:
    a resample is defined only when it draws seed 0 twice."""
    monkeypatch.setattr(rates_mod, "resample_indices", lambda S, B, seed: np.array(rows))
    Y = np.stack([1.0 / X, -1.0 / X])
    return bootstrap_slope(X, Y, resamples=len(rows))


def test_ci_needs_at_least_half_the_resamples_defined(monkeypatch):
    f = _forced(monkeypatch, [[0, 0], [0, 0], [1, 1], [0, 1]])     # 2 of 4 defined: exactly half
    assert f.ci == pytest.approx([-1.0, -1.0], abs=1e-12) and f.undefined_resamples == 2
    f = _forced(monkeypatch, [[0, 0], [1, 1], [0, 1], [1, 0]])     # 1 of 4
    assert f.ci is None and f.undefined_resamples == 3
    f = _forced(monkeypatch, [[0, 0], [0, 0], [1, 1], [0, 1], [1, 1]])   # 2 of 5: 5 // 2 = 2
    assert f.ci is not None and f.undefined_resamples == 3
    f = _forced(monkeypatch, [[0, 0]])                                # 1 of 1 (at least one)
    assert f.ci == pytest.approx([-1.0, -1.0], abs=1e-12) and f.undefined_resamples == 0
    f = _forced(monkeypatch, [[1, 1]])                                # 0 of 1
    assert f.ci is None and f.undefined_resamples == 1
    assert f.slope is None and f.window is None                  # the seed mean is 0


def test_window_none_when_mean_not_positive_and_two_seeds_get_a_ci():
    Y = np.stack([1.0 / X, 2.0 / X])
    f = bootstrap_slope(X, Y, resamples=50)
    assert f.ci == pytest.approx([-1.0, -1.0], abs=1e-12) and f.window is not None


def test_window_slopes_middle_point_in_both_halves():
    """x = 1, 4, 16: the log-midpoint is 4, which belongs to both halves."""
    x = np.array([1.0, 4.0, 16.0])
    w = window_slopes(x, np.array([1.0, 2.0, 16.0]))
    assert w.lower == pytest.approx(0.5, rel=1e-14, abs=0) and w.upper == pytest.approx(1.5, rel=1e-14, abs=0)
    w = window_slopes(np.array([1.0, 2.0, 100.0]), np.array([1.0, 2.0, 3.0]))
    assert w.lower == pytest.approx(1.0, rel=1e-14, abs=0) and w.upper is None
    w = window_slopes(np.array([1.0, 2.0, 4.0, 8.0]), np.array([1.0, 2.0, 4.0, -1.0]))
    assert w.lower == pytest.approx(1.0, rel=1e-14, abs=0) and w.upper is None   # undefined fit -> None
    w = window_slopes(np.array([2.0, 4.0, 8.0]), np.log(np.array([2.0, 4.0, 8.0])) ** 2, log_power=2)
    assert w.lower == pytest.approx(0.0, abs=1e-12) and w.upper == pytest.approx(0.0, abs=1e-12)


def test_loglog_fit_rms_and_log_power_against_numpy():
    x = np.array([2.0, 3.0, 5.0, 9.0, 17.0])
    y = np.array([1.0, 0.7, 0.5, 0.2, 0.15])
    for p in (0.0, 1.5):
        v = np.log(y) - p * np.log(np.log(x))
        b, a = np.polyfit(np.log(x), v, 1)
        f = loglog_fit(x, y, log_power=p)
        assert f.slope == pytest.approx(b, rel=1e-12, abs=0) and f.intercept == pytest.approx(a, rel=1e-12, abs=0)
        assert f.rms == pytest.approx(math.sqrt(np.mean((v - a - b * np.log(x)) ** 2)), rel=1e-9, abs=0)
        assert f.points == 5
        assert loglog_slopes(x, y[None], log_power=p)[0] == pytest.approx(b, rel=1e-12, abs=0)
    bad = loglog_fit(x, -y)
    assert math.isnan(bad.slope) and math.isnan(bad.intercept) and math.isnan(bad.rms) and bad.points == 5


def test_loglog_slopes_shapes_and_inf():
    Y = np.stack([np.stack([X ** -1.0, X ** 0.5, 2 * X ** -2.0])] * 2)   # [2, 3, m]
    s = loglog_slopes(X, Y)
    assert s.shape == (2, 3)
    np.testing.assert_allclose(s, [[-1.0, 0.5, -2.0]] * 2, rtol=1e-12)
    Z = 1.0 / X
    Z[2] = np.inf
    assert np.isnan(loglog_slopes(X, Z[None])[0])
    with pytest.raises(InputError, match="points per curve"):
        loglog_slopes(X, np.ones((2, X.size - 1)))


def test_check_x_boundaries():
    assert loglog_fit([1.0, 2.0], [1.0, 2.0]).slope == pytest.approx(1.0, rel=1e-14, abs=0)   # 2 points
    assert loglog_fit([1.0, 2.0], [3.0, 3.0], log_power=0).slope == pytest.approx(0.0, abs=1e-14)  # x = 1 ok
    with pytest.raises(InputError, match="x > 1"):
        loglog_fit([1.0, 2.0], [1.0, 1.0], log_power=1)
    assert np.isfinite(loglog_fit([math.nextafter(1.0, 2.0), 2.0], [1.0, 1.0], log_power=1).slope)
    with pytest.raises(InputError, match="vector"):
        loglog_fit(np.ones((2, 2)), np.ones((2, 2)))
    with pytest.raises(InputError, match="finite and > 0"):
        loglog_fit([-1.0, 2.0], [1.0, 1.0])
    with pytest.raises(InputError, match="finite and > 0"):
        loglog_fit([1.0, np.inf], [1.0, 1.0])
    with pytest.raises(InputError, match="distinct"):
        loglog_fit([2.0, 2.0], [1.0, 1.0])
    with pytest.raises(InputError, match="shape"):
        loglog_fit([1.0, 2.0], [1.0, 1.0, 1.0])


@pytest.mark.parametrize("kw", [dict(resamples=True), dict(resamples=2.0), dict(resamples=0), dict(level=0.0),
                                dict(level=1.0), dict(level="0.5")])
def test_check_boot_rejects(kw):
    with pytest.raises(InputError):
        mean_band(np.ones((3, 4)), **kw)


def test_check_boot_accepts_edges():
    assert len(mean_band(np.ones((3, 4)), resamples=1, level=0.5).lo) == 4
    assert len(mean_band(np.ones((3, 4)), resamples=np.int64(3), level=1e-9).hi) == 4
    with pytest.raises(InputError, match=r"\[S, m\]"):
        mean_band(np.ones(4))
    with pytest.raises(InputError, match=r"\[S, m\]"):
        mean_band(np.ones((0, 4)))
    with pytest.raises(InputError, match="points per curve"):
        bootstrap_slope(X, np.ones((2, X.size + 1)))


@pytest.mark.parametrize("level", [0.95, 0.8])
def test_mean_band_is_the_numpy_quantile_of_the_same_resamples(level):
    Y = _synthetic(6, np.random.default_rng(12))
    idx = np.random.Generator(np.random.PCG64(4)).integers(0, 6, size=(200, 6))
    means = Y[idx].mean(axis=1)
    b = mean_band(Y, resamples=200, seed=4, level=level)
    np.testing.assert_allclose(b.lo, np.quantile(means, (1 - level) / 2, axis=0), rtol=1e-13)
    np.testing.assert_allclose(b.hi, np.quantile(means, (1 + level) / 2, axis=0), rtol=1e-13)
    np.testing.assert_allclose(b.mean, Y.mean(0), rtol=1e-14)
    np.testing.assert_allclose(b.std, Y.std(0, ddof=1), rtol=1e-14)
    assert b.level == level


def test_mean_band_non_finite_point_without_warnings(recwarn):
    Y = np.ones((3, 4))
    Y[1, 2] = np.inf
    Y[2, 2] = -np.inf
    b = mean_band(Y, resamples=20)
    assert not np.isfinite(b.std[2]) and np.isfinite(b.std[0])
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_classify_at_the_exact_band_ends():
    assert RATE_TOLERANCE == 0.3
    lo_band, hi_band = -1.0 - 0.3, -1.0 + 0.3
    below, above = math.nextafter(lo_band, -2.0), math.nextafter(hi_band, 0.0)
    assert classify_slope([-2.0, lo_band]) == "matches"
    assert classify_slope([-2.0, below]) == "steeper"
    assert classify_slope([hi_band, 0.0]) == "matches"
    assert classify_slope([above, 0.0]) == "shallower"
    # the point estimate stands in for a missing CI
    assert classify_slope(None, -1.5) == "steeper" and classify_slope(None, -0.5) == "shallower"
    assert classify_slope(None, lo_band) == "matches"
    # target and tolerance are honoured (band [1.75, 2.25])
    assert classify_slope([1.7, 1.74], target=2.0, tol=0.25) == "steeper"
    assert classify_slope([1.7, 1.75], target=2.0, tol=0.25) == "matches"
    assert classify_slope([2.25, 3.0], target=2.0, tol=0.25) == "matches"
    assert classify_slope([2.26, 3.0], target=2.0, tol=0.25) == "shallower"


def test_upper_bound_holds_passes_slope_target_and_tol():
    assert upper_bound_holds(None, -0.5) is False and upper_bound_holds(None, -1.0) is True
    assert upper_bound_holds(None, -3.0) is True and upper_bound_holds(None) is None
    assert upper_bound_holds([2.26, 3.0], target=2.0, tol=0.25) is False
    assert upper_bound_holds([2.2, 3.0], target=2.0, tol=0.25) is True
    assert upper_bound_holds([-0.75, 0.0], tol=0.2) is False


def test_rule_text_in_words():
    assert rule_text() == (
        "rule: slope of the seed-mean curve on log-log axes, 95% bootstrap CI over seeds; 'matches' if "
        "the CI overlaps [-1.3, -0.7] (slope -1 up to logs), 'steeper' if the CI is entirely below -1.3, "
        "'shallower' if entirely above -0.7; the Õ(x^-1) upper bound counts as violated only when 'shallower'.")
    t = rule_text(level=0.9, target=-2.0, tol=0.5)
    assert "90% bootstrap" in t and "[-2.5, -1.5]" in t and "Õ(x^-2)" in t


def test_log_grid_edges():
    assert list(log_grid(1, 1, 5)) == [1] and list(log_grid(7, 7, 1)) == [7]
    assert list(log_grid(1, 100, 1)) == [1, 100]          # at least two points
    assert list(log_grid(1, 100, 3)) == [1, 10, 100]
    assert log_grid(1, 100, 3).dtype == np.int64
    for lo, hi in ((0, 10), (5, 4)):
        with pytest.raises(InputError, match="1 <= lo <= hi"):
            log_grid(lo, hi, 3)


def test_rate_applies_reasons():
    from mhajax.losses import get_loss
    from mhajax.models.softmax import SOFTMAX
    assert rate_applies(SOFTMAX, get_loss("logistic")) == (
        True, "softmax has closed-form κ and β₂ and logistic is self-bounded")
    ok, why = rate_applies(SOFTMAX._replace(kappa=None), get_loss("logistic"))
    assert (ok, why) == (False, "weak_convexity not implied: no closed-form κ")
    ok, why = rate_applies(SOFTMAX._replace(beta2=None), get_loss("logistic"))
    assert (ok, why) == (False, "self_bounded_gradient not implied: no closed-form β₂")
    ok, why = rate_applies(SOFTMAX, get_loss("squared_hinge"))
    assert ok is False and why.startswith("weak_convexity and self_bounded_gradient not implied: needs |ℓ'| <= ℓ")
    ok, why = rate_applies(SOFTMAX._replace(kappa=None), get_loss("squared_hinge"))
    assert why.startswith("weak_convexity not implied: no closed-form κ; self_bounded_gradient not implied: ")


def test_defaults_are_2000_resamples_level_095_seed_0():
    # 12 seeds: ~1.4e6 distinct resamples, so the quantiles move with the draws (with 4 seeds,
    # 35 distinct means, they sit on ties and another count or seed gives the same values)
    Y = _synthetic(12, np.random.default_rng(13))
    idx = np.random.Generator(np.random.PCG64(0)).integers(0, 12, size=(2000, 12))
    means = Y[idx].mean(axis=1)
    b = mean_band(Y)
    np.testing.assert_allclose(b.lo, np.quantile(means, 0.025, axis=0), rtol=1e-13)
    np.testing.assert_allclose(b.hi, np.quantile(means, 0.975, axis=0), rtol=1e-13)
    assert b.level == 0.95
    f = bootstrap_slope(X, Y)
    s = _polyslope(X, means)
    assert f.ci == pytest.approx(np.quantile(s, [0.025, 0.975]).tolist(), rel=1e-10, abs=0)
    assert f.resamples == 2000 and f.level == 0.95 and f.log_power == 0.0


def test_mean_band_overflow_without_warnings(recwarn):
    Y = np.ones((3, 2))
    Y[:, 1] = 1.7e308                                          # the sum of three overflows
    b = mean_band(Y, resamples=10)
    assert b.mean[1] == np.inf and b.lo[0] == 1.0
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_bootstrap_slope_with_a_log_correction_against_numpy():
    x = np.array([3.0, 9.0, 27.0, 81.0])
    Y = np.array([2.0, 1.5, 3.0])[:, None] * np.log(x) ** 2 / x * np.array([[1.0, 1.1, 0.9, 1.0]])
    f = bootstrap_slope(x, Y, log_power=2, resamples=100, seed=1)
    idx = np.random.Generator(np.random.PCG64(1)).integers(0, 3, size=(100, 3))
    corr = lambda M: np.atleast_2d(M) / np.log(x) ** 2
    s = _polyslope(x, corr(Y[idx].mean(axis=1)))
    assert f.slope == pytest.approx(_polyslope(x, corr(Y.mean(0)))[0], rel=1e-12, abs=0)
    assert f.ci == pytest.approx(np.quantile(s, [0.025, 0.975]).tolist(), rel=1e-10, abs=0)
    assert f.per_seed == pytest.approx(_polyslope(x, corr(Y)).tolist(), rel=1e-12, abs=0)
    assert f.log_power == 2
    m = corr(Y.mean(0))[0]          # halves of the window: x = 3, 9 and x = 27, 81 (log-midpoint ≈ 15.6)
    assert f.window.lower == pytest.approx(_polyslope(x[:2], m[:2])[0], rel=1e-12, abs=0)
    assert f.window.upper == pytest.approx(_polyslope(x[2:], m[2:])[0], rel=1e-12, abs=0)


def test_bootstrap_slope_accepts_x_of_one_without_log_correction():
    x = np.array([1.0, 2.0, 4.0, 8.0])
    f = bootstrap_slope(x, np.stack([1.0 / x, 2.0 / x]), resamples=20)
    assert f.slope == pytest.approx(-1.0, rel=1e-12, abs=0)


def test_mean_band_std_of_two_seeds():
    Y = np.array([[1.0, 2.0], [3.0, 6.0]])
    assert mean_band(Y, resamples=10).std == pytest.approx([math.sqrt(2.0), math.sqrt(8.0)], rel=1e-14, abs=0)


def test_float32_curves_are_fitted_in_float64():
    """The inputs are read as float64: a float32 curve gives the slope of its (exact) float64
    values, not one computed in float32 (errors ~1e-7)."""
    rng = np.random.default_rng(14)
    Y32 = (rng.lognormal(0.0, 0.5, size=(2, X.size)) / X).astype(np.float32)
    want = _polyslope(X, Y32.astype(np.float64))
    np.testing.assert_allclose(loglog_slopes(X, Y32), want, rtol=1e-12)
    x4 = np.array([2.0, 3.0, 5.0, 7.0])
    y32 = np.array([1.3, 0.9, 0.51, 0.37], dtype=np.float32)
    w = window_slopes(x4, y32)
    lower = np.polyfit(np.log(x4[:2]), np.log(y32[:2].astype(np.float64)), 1)[0]
    upper = np.polyfit(np.log(x4[2:]), np.log(y32[2:].astype(np.float64)), 1)[0]
    assert w.lower == pytest.approx(lower, rel=1e-12, abs=0) and w.upper == pytest.approx(upper, rel=1e-12, abs=0)


def test_loglog_slopes_x_of_one_and_the_message_of_a_3d_mismatch():
    x = np.array([1.0, 2.0, 4.0])
    np.testing.assert_allclose(loglog_slopes(x, np.stack([1 / x, x])), [-1.0, 1.0], rtol=1e-12)
    with pytest.raises(InputError, match="Y has 5 points per curve but x has 7"):
        loglog_slopes(X, np.ones((2, 3, 5)))


def test_ols_intercept_of_every_row():
    from mhajax.analysis.rates import _ols
    x = np.array([2.0, 3.0, 5.0])
    Y = np.array([[1.0, 0.5, 0.3], [7.0, 8.0, 2.0]])
    slope, intercept = _ols(x, Y, 0.0)
    for r in range(2):
        b, a = np.polyfit(np.log(x), np.log(Y[r]), 1)
        assert slope[r] == pytest.approx(b, rel=1e-12, abs=0) and intercept[r] == pytest.approx(a, rel=1e-12, abs=0)


def test_float32_seed_curves_are_read_as_float64():
    Y32 = _synthetic(3, np.random.default_rng(15)).astype(np.float32)
    Y64 = Y32.astype(np.float64)
    a, b = mean_band(Y32, resamples=50), mean_band(Y64, resamples=50)
    assert a == b
    assert bootstrap_slope(X, Y32, resamples=50) == bootstrap_slope(X, Y64, resamples=50)


@pytest.mark.parametrize("kw,msg", [(dict(resamples=0), "resamples must be an integer >= 1, got 0"),
                                    (dict(level=1.0), r"level must lie in \(0, 1\), got 1.0")])
def test_check_boot_messages(kw, msg):
    with pytest.raises(InputError, match=msg):
        mean_band(np.ones((3, 4)), **kw)


def test_loglog_fit_reads_float32_as_float64_and_rms_at_x_of_one():
    x32 = np.array([1.5, 2.5, 4.5, 9.5], dtype=np.float32)
    y32 = np.array([1.0, 0.55, 0.31, 0.12], dtype=np.float32)
    x, y = x32.astype(np.float64), y32.astype(np.float64)
    b, a = np.polyfit(np.log(x), np.log(y), 1)
    f = loglog_fit(x32, y32)
    assert f.slope == pytest.approx(b, rel=1e-13, abs=0) and f.intercept == pytest.approx(a, rel=1e-13, abs=0)
    assert f.rms == pytest.approx(math.sqrt(np.mean((np.log(y) - a - b * np.log(x)) ** 2)), rel=1e-10, abs=0)
    # x = 1 and x < 1 without a log correction: log log x is never formed
    for xs in ([1.0, 2.0, 4.0], [0.5, 2.0, 4.0]):
        x = np.array(xs)
        y = np.array([1.0, 0.7, 0.2])
        b, a = np.polyfit(np.log(x), np.log(y), 1)
        assert loglog_fit(x, y).rms == pytest.approx(math.sqrt(np.mean((np.log(y) - a - b * np.log(x)) ** 2)),
                                                     rel=1e-10, abs=0)


def test_step_slopes_are_the_exponents_between_consecutive_points():
    """y = c·x^a piecewise: each step's slope is the exponent of its piece, exactly."""
    from mhajax.analysis.rates import step_slopes
    x = np.array([1.0, 2.0, 8.0, 16.0])
    y = np.array([3.0, 3.0 * 2.0 ** 0.5, 3.0 * 2.0 ** 0.5 * 4.0 ** -1.0, 3.0 * 2.0 ** 0.5 * 4.0 ** -1.0 * 2.0 ** 2])
    got = step_slopes(x, y)
    assert len(got) == 3 and all(type(v) is float for v in got)
    assert got == pytest.approx([0.5, -1.0, 2.0], rel=1e-12, abs=1e-12)
    assert step_slopes([4.0], [1.0]) == [] and step_slopes([1, 3], [2, 18]) == pytest.approx([2.0], rel=1e-15, abs=0)


@pytest.mark.parametrize("x, y, want", [
    ([1.0, 2.0, 4.0], [1.0, 0.0, 4.0], [None, None]),            # y = 0: no logarithm
    ([1.0, 2.0, 4.0], [1.0, -2.0, 4.0], [None, None]),           # y < 0
    ([1.0, 2.0, 4.0], [1.0, np.inf, 4.0], [None, None]),         # y not finite
    ([1.0, 2.0, 4.0], [np.nan, 2.0, 4.0], [None, 1.0]),
    ([1.0, 1.0, 4.0], [1.0, 2.0, 8.0], [None, 1.0]),             # x not increasing: no step
    ([2.0, 1.0, 4.0], [1.0, 2.0, 16.0], [None, 1.5]),
    ([0.0, 2.0, 4.0], [1.0, 2.0, 4.0], [None, 1.0]),             # x = 0: no logarithm
    ([1.0, 2.0, 4.0], [0.5, 1.0, 2.0], [1.0, 1.0]),              # y below 1 is fine
    ([0.5, 1.0, 2.0], [1.0, 2.0, 4.0], [1.0, 1.0]),              # x below 1 is fine
])
def test_step_slopes_are_none_where_a_step_is_undefined(x, y, want):
    from mhajax.analysis.rates import step_slopes
    got = step_slopes(x, y)
    assert [v is None for v in got] == [w is None for w in want]
    assert [v for v in got if v is not None] == pytest.approx([w for w in want if w is not None], rel=1e-12, abs=0)


def test_step_slopes_compute_in_float64_whatever_the_input_dtype():
    """float32 inputs are widened first: the slope is log(7)/log(3) to float64 accuracy, not float32's."""
    from mhajax.analysis.rates import step_slopes
    for dt in (np.float32, np.float16):
        x, y = np.array([1, 3], dt), np.array([1, 7], dt)
        assert step_slopes(x, y)[0] == pytest.approx(math.log(7) / math.log(3), rel=1e-15, abs=0)
        assert step_slopes([1.0, 3.0], y)[0] == pytest.approx(math.log(7) / math.log(3), rel=1e-15, abs=0)
        assert step_slopes(x, [1.0, 7.0])[0] == pytest.approx(math.log(7) / math.log(3), rel=1e-15, abs=0)
