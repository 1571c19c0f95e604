"""The control-variate gap and its jackknife (mhajax.analysis.gap) on synthetic data whose
mean and variance are known in closed form."""
import math

import numpy as np
import pytest

from mhajax.analysis.gap import (RESOLVED_SE, _normal_quantile, control_variate_gap, jackknife_slope,
                                 seeds_needed)
from mhajax.errors import InputError


def synthetic(rng, S, mu, sd_eps, sd_a, sd_b, sd_xi):
    """A generative model of the S x S experiment. Training set s has hardness a_s (every
    model independent of it sees L̂_s − L = −a_s + ξ); model s has held-out error b_s (its
    held-out loss is estimated with error b_s) and overfits by μ + ε_s. Then

        gap_s      = μ + ε_s + a_s + b_s,
        C[s, s']   = L̂_s(θ_s') − L̂_test(θ_s') = −a_s − b_s' + ξ_ss',

    so est_s = μ + ε_s + b_s − mean_{s'≠s} b_s' + mean_{s'≠s} ξ_ss', the b's cancel in the
    mean and ĝ = μ + mean ε + mean of the off-diagonal ξ:
    E[ĝ] = μ, Var[ĝ] = sd_eps²/S + sd_xi²/(S(S − 1))."""
    eps, a, b = rng.normal(0, sd_eps, S), rng.normal(0, sd_a, S), rng.normal(0, sd_b, S)
    xi = rng.normal(0, sd_xi, (S, S))
    gap = mu + eps + a + b
    C = -a[:, None] - b[None, :] + xi
    C[np.diag_indices(S)] = np.nan        # ignored by the estimator
    return gap, C


@pytest.mark.slow
def test_unbiased_and_jackknife_se_matches_the_true_sd():
    rng = np.random.default_rng(1)
    S, mu, sd_eps, sd_a, sd_b, sd_xi = 8, 2e-5, 1e-5, 5e-5, 2e-5, 1e-5
    reps = 4000
    est, se2, naive2, plain = np.empty(reps), np.empty(reps), np.empty(reps), np.empty(reps)
    for r in range(reps):
        g, C = synthetic(rng, S, mu, sd_eps, sd_a, sd_b, sd_xi)
        out = control_variate_gap(g, C)
        est[r], se2[r], plain[r] = out["mean"], out["se"] ** 2, out["plain_mean"]
        naive2[r] = np.var(out["per_seed"], ddof=1) / S
    var_true = sd_eps ** 2 / S + sd_xi ** 2 / (S * (S - 1))
    # unbiased: |mean − μ| within 4 Monte-Carlo standard errors
    assert abs(est.mean() - mu) < 4 * math.sqrt(var_true / reps)
    # the Monte-Carlo variance of ĝ is the closed form (±10 %: 4000 replicates give ~2.2 % sd)
    assert est.var(ddof=1) == pytest.approx(var_true, rel=0.1, abs=0)
    # the jackknife se² in expectation: exact for the ε part (a mean); the ξ part is an average
    # over ordered pairs (a U-statistic), where the jackknife is conservative: ĝ_(j) is a linear
    # form w_jᵀξ and E[se_J²] = σ_ξ²·(S−1)/S·Σ_j‖w_j − w̄‖² = σ_ξ²·2/(S(S−2)) (hand:
    # ‖w_j‖² = 1/((S−1)(S−2)), ‖w̄‖² = 1/(S(S−1))), i.e. 2(S−1)/(S−2) times the true share
    expect_jk = sd_eps ** 2 / S + sd_xi ** 2 * 2 / (S * (S - 2))
    assert se2.mean() == pytest.approx(expect_jk, rel=0.1, abs=0)
    assert se2.mean() >= var_true                      # never anti-conservative here
    # the naive std(est_s)/√S is far off: the est_s share the models' held-out errors b
    assert naive2.mean() > 1.5 * expect_jk
    # the plain gap carries the set hardness and the test error: variance (ε + a + b)/S
    assert plain.var(ddof=1) == pytest.approx((sd_eps ** 2 + sd_a ** 2 + sd_b ** 2) / S, rel=0.1, abs=0)


def test_control_variate_exact_small_case():
    """S = 3 by hand: c_0 = (C01 + C02)/2, …; leave-one-out with S − 1 = 2 seeds uses one partner."""
    g = np.array([1.0, 2.0, 4.0])
    C = np.array([[0.0, -0.5, 0.1], [0.2, 0.0, -0.4], [0.3, 0.6, 0.0]])
    out = control_variate_gap(g, C)
    c = [(-0.5 + 0.1) / 2, (0.2 - 0.4) / 2, (0.3 + 0.6) / 2]
    assert out["control"] == pytest.approx(c, rel=1e-15, abs=0)
    assert out["per_seed"] == pytest.approx([1.0 + c[0], 2.0 + c[1], 4.0 + c[2]], rel=1e-15, abs=0)
    assert out["mean"] == pytest.approx((7.0 + sum(c)) / 3, rel=1e-15, abs=0)
    # ĝ_(0) = mean(g1 + C12, g2 + C21), ĝ_(1) = mean(g0 + C02, g2 + C20), ĝ_(2) = mean(g0 + C01, g1 + C10)
    loo = np.array([(2.0 - 0.4 + 4.0 + 0.6) / 2, (1.0 + 0.1 + 4.0 + 0.3) / 2, (1.0 - 0.5 + 2.0 + 0.2) / 2])
    assert out["leave_one_out"] == pytest.approx(loo.tolist(), rel=1e-15, abs=0)
    assert out["se"] == pytest.approx(math.sqrt(2 / 3 * np.sum((loo - loo.mean()) ** 2)), rel=1e-14, abs=0)
    assert out["plain_se"] == pytest.approx(np.std(g, ddof=1) / math.sqrt(3), rel=1e-15, abs=0)


def test_bad_input():
    with pytest.raises(InputError, match="at least 3 seeds"):
        control_variate_gap([1.0, 2.0], np.zeros((2, 2)))
    with pytest.raises(InputError):
        control_variate_gap([1.0, 2.0, 3.0], np.zeros((2, 2)))
    out = control_variate_gap([1.0, np.nan, 3.0], np.zeros((3, 3)))
    assert out["mean"] is None and out["se"] is None


def test_seeds_needed_hand():
    # 2·se/mean = 2 at S = 8 -> 8·4 = 32 seeds
    assert seeds_needed(1e-5, 1e-5, 8) == 32
    # mean <= 0: half the upper bound, (−1e-6 + 8e-6)/2 = 3.5e-6 -> 8·(8/3.5)² = 41.8 -> 42
    assert seeds_needed(-1e-6, 4e-6, 8) == 42
    assert seeds_needed(-1e-5, 1e-6, 8) is None
    assert RESOLVED_SE == 2.0


def test_jackknife_slope_known_slopes():
    x = np.array([32.0, 64, 128, 256, 512, 1024])
    # every leave-one-out curve a power law with slope −1.9: se 0, slope −1.9
    loo = np.array([c * x ** -1.9 for c in (1.0, 1.3, 0.8, 1.1)])
    out = jackknife_slope(x, loo.mean(axis=0), loo)
    assert out["slope"] == pytest.approx(-1.9, rel=1e-12, abs=0) and out["se"] == pytest.approx(0.0, abs=1e-12)
    # slopes −1.8, −2.0, −1.9, −1.9: se = √(3/4 · 0.02) = 0.12247…
    b = np.array([-1.8, -2.0, -1.9, -1.9])
    loo = np.array([x ** bj for bj in b])
    full = x ** -1.9
    out = jackknife_slope(x, full, loo, level=0.95)
    assert out["per_leave_out"] == pytest.approx(b.tolist(), rel=1e-12, abs=0)
    assert out["se"] == pytest.approx(math.sqrt(0.75 * 0.02), rel=1e-12, abs=0)
    assert out["ci"] == pytest.approx([-1.9 - 1.959963984540054 * out["se"], -1.9 + 1.959963984540054 * out["se"]],
                                      rel=1e-12, abs=0)
    bad = loo.copy()
    bad[1, 2] = -1.0
    assert jackknife_slope(x, full, bad)["slope"] is None
    with pytest.raises(InputError):
        jackknife_slope(x, full, loo[:1])


def test_normal_quantile():
    assert _normal_quantile(0.975) == pytest.approx(1.959963984540054, abs=1e-12)
    assert _normal_quantile(0.5) == pytest.approx(0.0, abs=1e-12)


# --- exact boundaries and direct computations (issue 32: mutation testing) --------------------

G3 = np.array([1.0, 2.0, 4.0])
C3 = np.array([[np.nan, -0.5, 0.1], [0.2, np.nan, -0.4], [0.3, 0.6, np.nan]])


def test_diagonal_is_ignored_and_every_field():
    out = control_variate_gap(G3, C3)                      # NaN on the diagonal: ignored
    c = np.array([(-0.5 + 0.1) / 2, (0.2 - 0.4) / 2, (0.3 + 0.6) / 2])
    assert out["mean"] == pytest.approx((7.0 + c.sum()) / 3, rel=1e-15, abs=0)
    assert out["plain_mean"] == pytest.approx(7.0 / 3, rel=1e-15, abs=0) and out["seeds"] == 3
    assert out["corr"] == pytest.approx(np.corrcoef(G3, -c)[0, 1], rel=1e-13, abs=0)
    assert set(out) == {"mean", "se", "per_seed", "control", "leave_one_out", "plain_mean", "plain_se",
                        "corr", "seeds"}


def test_non_finite_off_diagonal_or_gap_gives_all_none():
    for g, C in ((G3, np.where(np.eye(3, dtype=bool), 0.0, np.inf)), (np.array([1.0, np.inf, 2.0]), np.zeros((3, 3)))):
        out = control_variate_gap(g, C)
        assert out == dict(mean=None, se=None, per_seed=None, control=None, leave_one_out=None,
                           plain_mean=None, plain_se=None, corr=None, seeds=3)
    C = np.zeros((3, 3))
    C[0, 1] = np.nan
    assert control_variate_gap(G3, C)["mean"] is None


def test_corr_none_when_either_spread_is_zero():
    assert control_variate_gap([1.0, 1.0, 1.0], np.array([[0, 1.0, 2.0], [0.5, 0, 0.1], [3.0, 2.0, 0]]))["corr"] is None
    C = np.zeros((3, 3))                                      # every control c_s = 0
    out = control_variate_gap(G3, C)
    assert out["corr"] is None and out["control"] == [0.0, 0.0, 0.0]
    assert out["per_seed"] == G3.tolist()


def test_shapes_rejected():
    with pytest.raises(InputError, match=r"gap must be \[S\]"):
        control_variate_gap(G3[None], np.zeros((3, 3)))
    with pytest.raises(InputError, match=r"gap must be \[S\]"):
        control_variate_gap(G3, np.zeros((3, 4)))


def test_seeds_needed_boundaries():
    # mean exactly 0: the gap is taken at half its upper bound, se -> 8·(2se/se)² = 32
    assert seeds_needed(0.0, 1e-5, 8) == 32
    # mean + 2 se exactly 0: nothing to resolve
    assert seeds_needed(-0.5, 0.25, 8) is None
    # an exact integer is not rounded up: 2·se/mean = 1 -> S
    assert seeds_needed(2.0, 1.0, 8) == 8
    assert seeds_needed(2.0, 1.0, 7) == 7
    for m, s in ((None, 1.0), (1.0, None), (math.inf, 1.0), (1.0, math.nan)):
        assert seeds_needed(m, s, 8) is None


def test_jackknife_slope_two_seeds_level_and_undefined_rows():
    x = np.array([10.0, 100.0, 1000.0])
    b = np.array([-1.0, -2.0])
    loo = np.array([x ** bj for bj in b])
    out = jackknife_slope(x, x ** -1.5, loo, level=0.9)
    se = math.sqrt(1 / 2 * 0.5)                         # (S−1)/S Σ (b − b̄)², S = 2
    assert out["se"] == pytest.approx(se, rel=1e-12, abs=0) and out["level"] == 0.9
    z = 1.6448536269514722                                 # z_{0.95}: level 0.9, two-sided
    assert out["ci"] == pytest.approx([-1.5 - z * se, -1.5 + z * se], rel=1e-11, abs=0)
    assert jackknife_slope(x, x ** -1.5, loo)["level"] == 0.95
    bad = loo.copy()
    bad[1, 0] = 0.0
    out = jackknife_slope(x, x ** -1.5, bad, level=0.9)
    assert out["slope"] is None and out["se"] is None and out["ci"] is None and out["level"] == 0.9
    assert out["per_leave_out"][0] == pytest.approx(-1.0, rel=1e-12, abs=0) and out["per_leave_out"][1] is None
    full_bad = jackknife_slope(x, np.array([1.0, -1.0, 1.0]), loo)
    assert full_bad["slope"] is None and full_bad["per_leave_out"] == pytest.approx([-1.0, -2.0], rel=1e-12, abs=0)
    with pytest.raises(InputError, match="loo must be"):
        jackknife_slope(x, x[:2], loo)
    with pytest.raises(InputError, match="loo must be"):
        jackknife_slope(x, x, loo[0])


def test_normal_quantile_more_levels():
    for p, z in ((0.95, 1.6448536269514722), (0.025, -1.959963984540054), (0.8413447460685429, 1.0)):
        assert _normal_quantile(p) == pytest.approx(z, abs=1e-12)


def test_corr_with_a_spread_below_one_and_float32_inputs():
    g = G3 / 100                                       # std(g) ≈ 0.012 < 1: still defined
    C = np.array([[0.0, -0.5, 0.1], [0.2, 0.0, -0.4], [0.3, 0.6, 0.0]]) / 100
    c = np.array([(-0.5 + 0.1) / 2, (0.2 - 0.4) / 2, (0.3 + 0.6) / 2]) / 100
    out = control_variate_gap(g, C)
    assert out["corr"] == pytest.approx(np.corrcoef(g, -c)[0, 1], rel=1e-12, abs=0)
    # float32 inputs are read as float64: the result is that of their exact float64 values
    g32, C32 = g.astype(np.float32), C.astype(np.float32)
    assert control_variate_gap(g32, C32) == control_variate_gap(g32.astype(np.float64), C32.astype(np.float64))
