"""H_theory (mhajax.analysis.width) against hand computations and independent truths."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mhajax.analysis.width import (condition_level, distance_bound, h_theory, kappa_apriori,
                                   segment_curvature, width_constants)
from mhajax.data.mixture import tokenized_mixture
from mhajax.errors import InputError
from mhajax.losses import empirical_risk
from mhajax.models.softmax import SOFTMAX


def test_condition_level_hand():
    # a_k = 4c/(8 − c) <= α  ⇔  c <= 8α/(4 + α): 8/9 at α = 1/2, 8/5 at α = 1
    assert condition_level() == pytest.approx(8 / 9, rel=1e-15, abs=0)
    assert condition_level(1.0 - 1e-12) == pytest.approx(8 / 5, rel=1e-11, abs=0)
    c = condition_level(0.3)
    assert 4 * c / (8 - c) == pytest.approx(0.3, rel=1e-14, abs=0)
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(InputError):
            condition_level(bad)


def test_h_theory_small_hand_value():
    # κ̄ = 1, D_K = 2: (81/64)·1·16 = 20.25
    assert h_theory(1.0, 2.0) == pytest.approx(20.25, rel=1e-15, abs=0)
    assert h_theory(0.0, 2.0) == 0.0 and h_theory(-0.3, 5.0) == 0.0
    assert h_theory(None, 2.0) is None


def test_h_theory_paper_sized_hand_value():
    """n = 64, γ = 0.5, κ̄ = 150, η = 1, K = 64, L̂(θ*) = 1/64, L̂(θ₀) = ln 2, worked by hand:
    D₀ = ln 64/0.5 = 8.317766166719343, D₀² = 69.18523400422099,
    D_K² = 69.18523400422099 + 3 + 1.3862943611198906 = 73.57152836534088,
    D_K⁴ = 5412.769786012158, H = 1.265625 · 22500 · 5412.769786012158 = 1.5413707710948685e8."""
    D0 = math.log(64) / 0.5
    DK = distance_bound(D0, 1.0, 64, 1 / 64, math.log(2))
    assert DK ** 2 == pytest.approx(73.57152836534088, rel=1e-14, abs=0)
    H = h_theory(150.0, DK)
    assert H == pytest.approx(1.5413707710948685e8, rel=1e-12, abs=0)
    assert h_theory(150.0, D0) == pytest.approx(1.363058173623249e8, rel=1e-12, abs=0)   # leading term
    # at H = H_theory the condition κ̄ D_K²/√H is exactly at its level 8/9
    assert 150.0 * DK ** 2 / math.sqrt(H) == pytest.approx(8 / 9, rel=1e-13, abs=0)
    # a priori κ̄ with R = 1.3, T = 6, κ(θ₀) = 120: 120 + 2·1.3⁵·√6·(8.577385… + 8.317766…)
    kap = kappa_apriori(120.0, 1.3, 6, DK, D0)
    assert kap == pytest.approx(427.3154939716238, rel=1e-13, abs=0)
    assert h_theory(kap, DK) == pytest.approx(1.2508979516739564e9, rel=1e-12, abs=0)


def _problem(n=12, H=2, seed=0):
    X, y = tokenized_mixture(jax.random.PRNGKey(seed), n, 4, 6, num_clusters=2)
    params = SOFTMAX.init(jax.random.PRNGKey(seed + 100), H, 4, 6)
    return params, X, y


@pytest.mark.slow
def test_segment_curvature_matches_finite_differences():
    """κ_dir = max_s −√H g''(s)/(L̂(θ_s)‖δ‖²) against central second differences of L̂ along the segment."""
    params, X, y = _problem()
    star = jax.tree_util.tree_map(lambda a: a + 0.7 * jnp.cos(jnp.arange(a.size, dtype=a.dtype)).reshape(a.shape),
                                  params)
    grid = 8
    kdir, mseg = segment_curvature(params, star, X, y, grid)
    delta = jax.tree_util.tree_map(jnp.subtract, params, star)
    d2 = float(sum(jnp.sum(a * a) for a in jax.tree_util.tree_leaves(delta)))
    g = lambda s: float(empirical_risk(jax.tree_util.tree_map(lambda a, d: a - s * d, params, delta), X, y))
    h = 1e-4
    vals = []
    for s in np.linspace(0, 1, grid + 1):
        g2 = (g(s + h) - 2 * g(s) + g(s - h)) / h ** 2
        vals.append(-math.sqrt(2) * g2 / (g(s) * d2))
    assert float(kdir) == pytest.approx(max(vals), rel=1e-5, abs=1e-6)
    assert float(mseg) == pytest.approx(max(g(s) for s in np.linspace(0, 1, grid + 1)), rel=1e-13, abs=0)


@pytest.mark.slow
def test_width_constants_against_independent_quantities():
    params, X, y = _problem(n=16, H=2)
    out = width_constants(params, X, y, lr=1.0, steps=8, checkpoints=2, grid=4)
    assert out["defined"], out.get("reason")
    n = 16
    # R and κ(θ₀) = max_h (R³√T + 2R⁵‖U_h‖_{2,1}) recomputed from the arrays
    R = float(np.max(np.linalg.norm(np.asarray(X), axis=-1)))
    assert out["R"] == pytest.approx(R, rel=1e-14, abs=0)
    U = np.asarray(params.U)                                   # [H, T, d]
    k0 = max(R ** 3 * math.sqrt(4) + 2 * R ** 5 * np.linalg.norm(U[h], axis=-1).sum() for h in range(2))
    assert out["kappa0"] == pytest.approx(k0, rel=1e-12, abs=0)
    assert out["kappa_bar"] >= max(out["kappa0"], out["kappa_star"])
    # D₀ = log n/γ, and θ* sits at distance D₀ from θ₀ (iterate 0)
    assert out["D0"] == pytest.approx(math.log(n) / out["gamma"], rel=1e-14, abs=0)
    assert out["rows"][0]["step"] == 0 and out["rows"][0]["dist"] == pytest.approx(out["D0"], rel=1e-10, abs=0)
    L0 = float(empirical_risk(params, X, y))
    assert out["loss0"] == pytest.approx(L0, rel=1e-13, abs=0)
    assert out["D_K"] == pytest.approx(math.sqrt(out["D0"] ** 2 + 3 * 8 * out["loss_star"] + 2 * L0), rel=1e-14, abs=0)
    assert out["H_theory"] == pytest.approx((9 / 8) ** 2 * out["kappa_bar"] ** 2 * out["D_K"] ** 4, rel=1e-13, abs=0)
    assert out["log6"] == pytest.approx(math.log(n) ** 6, rel=1e-15, abs=0)


@pytest.mark.slow
def test_width_constants_without_the_exact_spectrum():
    """emp=False skips κ_emp (the costly exact λ_min) and leaves every certified quantity unchanged."""
    params, X, y = _problem(n=12, H=2, seed=1)
    full = width_constants(params, X, y, lr=1.0, steps=6, checkpoints=2, grid=4)
    lite = width_constants(params, X, y, lr=1.0, steps=6, checkpoints=2, grid=4, emp=False)
    assert lite["kappa_emp"] is None and lite["H_emp"] is None and full["kappa_emp"] is not None
    for k in ("H_theory", "D_K", "kappa_bar", "gamma", "H_apriori", "kappa_dir"):
        assert lite[k] == full[k]
    assert [r["loss"] for r in lite["rows"]] == pytest.approx([r["loss"] for r in full["rows"]], rel=1e-12, abs=0)


# --- every field of width_constants against an independent run (issue 32: mutation testing) ----

def _kappa_np(U, R, T):
    """κ(θ) = max_h (R³√T + 2R⁵‖U_h‖_{2,1}) (the softmax head's closed form)."""
    U = np.asarray(U)
    return max(R ** 3 * math.sqrt(T) + 2 * R ** 5 * np.linalg.norm(U[h], axis=-1).sum() for h in range(U.shape[0]))


@pytest.mark.slow
def test_width_constants_every_field_against_an_independent_gd_run():
    """GD by hand (θ_{k+1} = θ_k − η∇L̂(θ_k), jax.grad of the risk), θ* = θ₀ + D₀w* from the NTK
    margin, κ in closed form at every iterate (κ̄ the largest of all of them and κ(θ*), not the
    last), κ_emp from numpy's eigvalsh of the dense Hessian at the checkpoints 0, 2, 4, 6."""
    from mhajax.analysis.ntk import ntk_margin
    from mhajax.curvature.operators import dense_hessian
    from mhajax.models.base import mha
    n, H, T, lr, K = 12, 2, 4, 1.0, 6
    params, X, y = _problem(n=n, H=H, seed=2)
    out = width_constants(params, X, y, lr=lr, steps=K, checkpoints=3, grid=4)
    assert out["defined"] is True and out["reason"] == ""
    assert (out["n"], out["heads"], out["lr"], out["steps"]) == (n, H, 1.0, K) and type(out["lr"]) is float
    assert out["log4"] == pytest.approx(math.log(n) ** 4, rel=1e-15, abs=0)
    R = float(np.max(np.linalg.norm(np.asarray(X), axis=-1)))
    m = ntk_margin(params, X, y)
    assert out["gamma"] == m.gamma and out["gamma_bar"] == m.gamma_bar
    D0 = math.log(n) / m.gamma
    w = np.asarray(m.w)                                       # per-head layout [H, P_h]
    star = jax.tree_util.tree_map(lambda a, d: np.asarray(a) + D0 * d, params,
                                  jax.tree_util.tree_map(np.asarray, _unflatten(w, params)))
    grad = jax.jit(jax.grad(empirical_risk))
    th, iters = params, [params]
    for _ in range(K):
        th = jax.tree_util.tree_map(lambda a, g: a - lr * g, th, grad(th, X, y))
        iters.append(th)
    losses = [float(empirical_risk(t, X, y)) for t in iters]
    kaps = [_kappa_np(t.U, R, T) for t in iters]
    dists = [math.sqrt(sum(float(np.sum((np.asarray(a) - b) ** 2)) for a, b in zip(t, star))) for t in iters]
    Lstar = float(empirical_risk(jax.tree_util.tree_map(jnp.asarray, star), X, y))
    kstar = _kappa_np(star[0], R, T)
    assert out["kappa_star"] == pytest.approx(kstar, rel=1e-12, abs=0)
    assert out["kappa_bar"] == pytest.approx(max(max(kaps), kstar), rel=1e-12, abs=0)
    assert out["kappa0"] == pytest.approx(kaps[0], rel=1e-12, abs=0)
    assert out["loss_star"] == pytest.approx(Lstar, rel=1e-12, abs=0)
    assert out["loss_K"] == pytest.approx(losses[-1], rel=1e-10, abs=0)
    assert out["monotone"] is bool(np.all(np.diff(losses) <= 0))
    assert out["max_dist"] == pytest.approx(max(dists), rel=1e-10, abs=0)
    DK = math.sqrt(D0 ** 2 + 3 * lr * K * Lstar + 2 * lr * losses[0])
    assert out["D_K"] == pytest.approx(DK, rel=1e-12, abs=0)
    assert [r["step"] for r in out["rows"]] == [0, 2, 4, 6]
    hess = jax.jit(dense_hessian)
    for r in out["rows"]:
        k = r["step"]
        assert r["loss"] == pytest.approx(losses[k], rel=1e-10, abs=0)
        assert r["kappa"] == pytest.approx(kaps[k], rel=1e-12, abs=0)
        assert r["dist"] == pytest.approx(dists[k], rel=1e-10, abs=0)
        lmin = np.linalg.eigvalsh(np.asarray(hess(iters[k], X, y)))[0]
        assert r["kappa_emp"] == pytest.approx(-math.sqrt(H) * lmin / losses[k], rel=1e-6, abs=1e-9)
        kd, ms = segment_curvature(iters[k], jax.tree_util.tree_map(jnp.asarray, star), X, y, 4)
        assert r["kappa_dir"] == pytest.approx(float(kd), rel=1e-9, abs=1e-12)
        assert r["max_segment_loss"] == pytest.approx(float(ms), rel=1e-10, abs=0)
    kemp = max(r["kappa_emp"] for r in out["rows"])
    kdir = max(r["kappa_dir"] for r in out["rows"])
    assert out["kappa_emp"] == kemp and out["kappa_dir"] == kdir
    hth = lambda k, D: 0.0 if k <= 0 else (9 / 8) ** 2 * k ** 2 * D ** 4
    assert out["H_emp"] == pytest.approx(hth(kemp, DK), rel=1e-12, abs=0)
    assert out["H_dir"] == pytest.approx(hth(kdir, DK), rel=1e-12, abs=0)
    kap_ap = kaps[0] + 2 * R ** 5 * math.sqrt(T) * (DK + D0)
    assert out["kappa_apriori"] == pytest.approx(kap_ap, rel=1e-12, abs=0)
    assert out["H_apriori"] == pytest.approx(hth(kap_ap, DK), rel=1e-12, abs=0)
    kbar = max(max(kaps), kstar)
    assert out["H_lead"] == pytest.approx(hth(kbar, D0), rel=1e-12, abs=0)
    assert out["condition"] == pytest.approx(kbar * DK ** 2 / math.sqrt(H), rel=1e-12, abs=0)
    assert out["condition_level"] == pytest.approx(8 / 9, rel=1e-15, abs=0)
    assert out["phi0_max"] == pytest.approx(float(np.max(np.abs(np.asarray(mha(params, X))))), rel=1e-13, abs=0)


def _unflatten(w, params):
    """w* [P] in the per-head layout (each head's U then W, row-major) as (U, W)."""
    Hh, T, d = params.U.shape
    w = np.asarray(w).reshape(Hh, -1)
    return type(params)(w[:, :T * d].reshape(Hh, T, d), w[:, T * d:].reshape(Hh, d, d))


def test_width_constants_undefined():
    from mhajax.models.two_layer import TWO_LAYER
    params, X, y = _problem(n=8, H=2, seed=3)
    base = dict(n=8, heads=2, lr=0.5, steps=3, log6=math.log(8) ** 6, log4=math.log(8) ** 4)
    out = width_constants(params, X, y, lr=0.5, steps=3, model=SOFTMAX._replace(kappa=None))
    assert out == dict(base, defined=False, reason="--model softmax has no closed-form κ(θ)")
    out = width_constants(params, X, y, lr=0.5, steps=3, model=TWO_LAYER)
    assert out == dict(base, defined=False, reason="--model two-layer has no closed-form κ(θ)")
    # the same sample with both labels: not separable
    X2 = jnp.concatenate([X[:4], X[:4]])
    y2 = jnp.concatenate([y[:4], -y[:4]])
    out = width_constants(params, X2, y2, lr=0.5, steps=3)
    assert out["defined"] is False and out["reason"].startswith("NTK margin at θ₀ not certified positive (")


def test_distance_bound_with_a_step_size_other_than_one():
    # η = 0.5, K = 10, D₀ = 2, L̂(θ*) = 0.1, L̂(θ₀) = 0.7: D_K² = 4 + 3·0.5·10·0.1 + 2·0.5·0.7 = 6.2
    assert distance_bound(2.0, 0.5, 10, 0.1, 0.7) ** 2 == pytest.approx(6.2, rel=1e-15, abs=0)
    with pytest.raises(InputError, match=r"share must lie in \(0, 1\), got 1.5"):
        condition_level(1.5)
