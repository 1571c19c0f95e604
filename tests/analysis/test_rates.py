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
    assert w["lower"] > w["upper"] > -1


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
        hits += f["ci"][0] <= -1.0 <= f["ci"][1]
    cover = hits / reps
    assert 0.85 <= cover <= 0.99, cover


def test_bootstrap_reproducible_and_seeded():
    Y = _synthetic(6, np.random.default_rng(2))
    a = bootstrap_slope(X, Y, resamples=500, seed=3)
    b = bootstrap_slope(X, Y, resamples=500, seed=3)
    c = bootstrap_slope(X, Y, resamples=500, seed=4)
    assert a == b
    assert a["ci"] != c["ci"]
    assert a["ci"][0] <= a["slope"] <= a["ci"][1]
    assert a["distinct_resamples"] == math.comb(11, 6)
    assert all(s is not None for s in a["per_seed"])


def test_bootstrap_counts_undefined_resamples():
    """A curve that crosses zero in one seed: the seed-mean stays positive, but
    resamples drawing that seed often have a non-positive mean: counted, not fitted."""
    Y = np.tile(1.0 / X, (4, 1))
    Y[0] = -1.0 / X
    f = bootstrap_slope(X, Y, resamples=1000, seed=0)
    assert f["slope"] is not None and abs(f["slope"] + 1) < 1e-12
    assert f["undefined_resamples"] > 0 and f["per_seed"][0] is None


def test_single_seed_has_no_ci():
    f = bootstrap_slope(X, (1.0 / X)[None], resamples=200)
    assert f["ci"] is None and abs(f["slope"] + 1) < 1e-12
    assert classify_slope(f["ci"], f["slope"]) == "matches"


def test_mean_band():
    Y = _synthetic(8, np.random.default_rng(5))
    b = mean_band(Y, resamples=500, seed=0)
    m, lo, hi = map(np.asarray, (b["mean"], b["lo"], b["hi"]))
    assert np.allclose(m, Y.mean(0)) and np.all(lo <= m + 1e-15) and np.all(m <= hi + 1e-15)
    assert np.allclose(b["std"], Y.std(0, ddof=1))
    assert mean_band(Y[:1], resamples=100)["std"] == [0.0] * X.size


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
