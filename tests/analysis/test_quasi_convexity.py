"""Local quasi-convexity along a segment (mhajax.analysis.quasi_convexity, docs/theory.md §10):
segment_check's numbers on small cases against dense and finite-difference truths, and
finalize's verdicts and judged_pair on hand-made numbers at their edges (round numbers: powers of
two, so every comparison is exact)."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mhajax.models.softmax.bounds import beta2, kappa_bound
from mhajax.data.common import token_radius
from mhajax.data.mixture import tokenized_mixture
from mhajax.losses import empirical_risk
from mhajax.models.softmax.head import init_params
from mhajax.analysis.quasi_convexity import REL_TOL, Segment, finalize, judged_pair, segment_check

_check = jax.jit(segment_check, static_argnames="grid")


def jit_check(*args):
    """segment_check's numbers for one pair, the typed :class:`Segment`."""
    seg = _check(*args)
    assert isinstance(seg, Segment)
    return seg


def _case(seed, H=2, n=12, T=4, d=6, w_scale=3.0):
    k = jax.random.split(jax.random.PRNGKey(seed), 3)
    X, y = tokenized_mixture(k[0], n, T, d, num_clusters=2)
    a = init_params(k[1], H, T, d, w_scale=w_scale)
    b = init_params(k[2], H, T, d, u_scale=0.5, w_scale=w_scale)
    return a, b, X, y, token_radius(X)


def _path(a, b, t):
    return jax.tree_util.tree_map(lambda u, v: u + t * (v - u), a, b)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_inequality_holds_and_kappa_bar_is_segment_max(seed):
    a, b, X, y, R = _case(seed)
    raw = jit_check(a, b, X, y, R, 16)
    rec = finalize(raw)
    assert rec.holds and not rec.certified_violation and rec.wc_holds
    ts = jnp.linspace(0, 1, 401)
    T = a.U.shape[1]
    kap = np.asarray(jax.vmap(lambda t: kappa_bound(_path(a, b, t), R, T))(ts))
    b2 = np.asarray(jax.vmap(lambda t: beta2(_path(a, b, t), R, T))(ts))
    assert kap.max() <= rec.kappa_bar * (1 + 1e-12)  # κ̄ = max over the segment (convexity)
    assert b2.max() <= rec.beta2_bar * (1 + 1e-12)
    assert abs(rec.kappa_bar - max(kap[0], kap[-1])) <= 1e-12 * rec.kappa_bar


@pytest.mark.parametrize("seed", [0, 3])
def test_certified_max_bounds_the_dense_max(seed):
    """M_cert from a coarse grid (8 intervals) bounds the max of L̂ on a 2000-point grid."""
    a, b, X, y, R = _case(seed)
    rec = finalize(jit_check(a, b, X, y, R, 8))
    dense = jax.vmap(lambda t: empirical_risk(_path(a, b, t), X, y))(jnp.linspace(0, 1, 2001))
    assert rec.max_loss <= float(dense.max()) * (1 + 1e-12)  # sampled max is a lower estimate
    assert float(dense.max()) <= rec.max_loss_cert


def test_taylor_identity_and_kappa_need_logic():
    """κ_need is exactly the constant at which (QC) becomes tight: with κ̄
    slightly below it the check fails, slightly above it holds."""
    found = 0
    for seed in range(12):
        a, b, X, y, R = _case(seed, w_scale=6.0)
        raw = Segment(*(float(v) for v in jit_check(a, b, X, y, R, 16)))
        rec = finalize(raw)
        need = rec.kappa_need
        if need is None or need <= 0:
            assert rec.convex
            continue
        found += 1
        assert not rec.convex and rec.holds and rec.kappa_bar > need  # closed-form κ̄ suffices
        assert finalize(raw._replace(kappa_bar=0.99 * need)).holds is False
        assert finalize(raw._replace(kappa_bar=1.01 * need)).holds is True
    assert found > 0, "no non-convex segment among the cases: the test lost its power"


def test_lhs_matches_finite_difference():
    a, b, X, y, R = _case(4)
    rec = finalize(jit_check(a, b, X, y, R, 4))
    # lhs = <∇L̂(θ_k), θ_k − θ*> = −d/dt L̂(θ_k + t(θ* − θ_k)) at t=0
    h = 1e-6
    fd = -(empirical_risk(_path(a, b, h), X, y) - empirical_risk(_path(a, b, -h), X, y)) / (2 * h)
    assert abs(rec.lhs - float(fd)) < 1e-7 * max(1.0, abs(rec.lhs))
    assert abs(rec.dist2 - float(sum(jnp.sum((u - v) ** 2) for u, v in zip(a, b)))) < 1e-12


def test_kappa_dir_matches_finite_differences():
    """With grid = 1 the directional constant is taken at the two endpoints;
    compare with a central second difference of t -> L̂(θ_k + t(θ* − θ_k))."""
    a, b, X, y, R = _case(5, w_scale=6.0)
    rec = finalize(jit_check(a, b, X, y, R, 1))
    g = lambda t: float(empirical_risk(_path(a, b, t), X, y))
    h = 1e-4
    H = a.U.shape[0]
    vals = []
    for t in (0.0, 1.0):
        g2 = (g(t + h) - 2 * g(t) + g(t - h)) / h ** 2
        vals.append(-np.sqrt(H) * g2 / (rec.dist2 * g(t)))
    assert abs(rec.kappa_dir - max(vals)) < 1e-4 * max(1.0, abs(max(vals)))


# -- finalize: the inequalities at their edges --------------------------------------------------------

def _raw(lhs, loss_k, loss_star=1.0, term_s=1.0, cert_factor=2.0, wc_ratio=0.5, kappa_dir=0.25,
         max_loss=0.5, dist2=2.0):
    """segment_check's numbers with H = 4 (√H = 2): term_s = κ̄/(2√H)·max_loss·dist2."""
    return Segment(lhs=lhs, loss_k=loss_k, loss_star=loss_star, dist2=dist2, max_loss=max_loss,
                   kappa_bar=term_s * 4.0 / (max_loss * dist2) if max_loss * dist2 else 4.0, beta2_bar=0.125,
                   cert_factor=cert_factor, kappa_dir=kappa_dir, wc_ratio=wc_ratio, heads=4.0)


def test_quasi_convexity_finalize_holds_at_equality_with_the_tolerance():
    # drop = 8, term_s = 1, tol = 0.5·(1 + 9 + 1 + 1) = 6: lhs >= 8 − 1 − 6 = 1
    f = finalize(_raw(1.0, 9.0), rel_tol=0.5)
    assert f.holds is True and f.rhs == 7.0 and bool(f.certified_violation) is False
    assert f.inconclusive is False and f.convex is False
    assert f.rhs_cert == 6.0 and f.max_loss_cert == 1.0 and f.cert_factor == 2.0
    assert f.kappa_need == 2 * 2 * (8.0 - 1.0) / (0.5 * 2.0) == 28.0
    assert f.kappa_dir == 0.25 and f.wc_ratio == 0.5 and f.wc_holds is True
    assert "heads" not in f._fields and f.lhs == 1.0 and f.kappa_bar == 4.0 and f.beta2_bar == 0.125
    assert (f.loss_k, f.loss_star, f.dist2, f.max_loss) == (9.0, 1.0, 2.0, 0.5)
    below = finalize(_raw(1.0 - 2 ** -40, 9.0), rel_tol=0.5)
    assert below.holds is False and bool(below.certified_violation) is False and below.inconclusive is True
    # without the tolerance: 1 < 7 fails
    assert finalize(_raw(1.0, 9.0), rel_tol=0.0).holds is False
    assert finalize(_raw(7.0, 9.0), rel_tol=0.0).holds is True
    assert finalize(_raw(7.0 - 2 ** -40, 9.0), rel_tol=0.0).holds is False


def test_finalize_tolerance_weighs_the_absolute_values():
    # lhs = −1, loss_k = 3, loss_star = −1, term_s = 3: drop = 4, rhs = 1; tol = 0.25·(1 + 3 + 1 + 3) = 2,
    # so lhs = 1 − 2 holds at equality (a signed sum, 6 or 2, would give tol 1.5 or 0.5: fails)
    assert finalize(_raw(-1.0, 3.0, loss_star=-1.0, term_s=3.0), rel_tol=0.25).holds is True
    assert finalize(_raw(-1.0 - 2 ** -40, 3.0, loss_star=-1.0, term_s=3.0), rel_tol=0.25).holds is False
    # lhs = −3, loss_k = −1, loss_star = −3, term_s = 1: drop = 2, rhs = 1; tol = 0.5·(3 + 1 + 3 + 1) = 4
    assert finalize(_raw(-3.0, -1.0, loss_star=-3.0), rel_tol=0.5).holds is True
    assert finalize(_raw(-3.0 - 2 ** -40, -1.0, loss_star=-3.0), rel_tol=0.5).holds is False


def test_quasi_convexity_finalize_certified_violation_is_strict_beyond_the_tolerance():
    # drop = 6, term_c = 1·2, tol = 0.5·(1 + 7 + 1 + 1) = 5: violated iff lhs < 6 − 2 − 5 = −1
    at = finalize(_raw(-1.0, 7.0), rel_tol=0.5)
    assert bool(at.certified_violation) is False and at.holds is False and at.inconclusive is True
    assert at.rhs_cert == 4.0 and at.rhs == 5.0
    beyond = finalize(_raw(-1.0 - 2 ** -40, 7.0), rel_tol=0.5)
    assert bool(beyond.certified_violation) is True and beyond.holds is False and beyond.inconclusive is False
    # κ̄, β̄₂ sampled, not exact: never certified, inconclusive
    sampled = finalize(_raw(-1.0 - 2 ** -40, 7.0), rel_tol=0.5, certifiable=False)
    assert bool(sampled.certified_violation) is False and sampled.inconclusive is True
    # an infinite certification factor: no certified right-hand side, no violation
    inf = finalize(_raw(-100.0, 7.0, cert_factor=math.inf), rel_tol=0.0)
    assert bool(inf.certified_violation) is False and inf.rhs_cert is None
    assert inf.max_loss_cert is None and inf.cert_factor is None and inf.inconclusive is True


def test_finalize_certified_rhs_uses_the_certification_factor():
    # drop = 8, term_s = 1, cert_factor = 4: rhs_cert = 8 − 4 = 4, max_loss_cert = 0.5·4 = 2
    f = finalize(_raw(3.0, 9.0, cert_factor=4.0), rel_tol=0.0)
    assert f.rhs_cert == 4.0 and f.max_loss_cert == 2.0 and f.cert_factor == 4.0
    assert bool(f.certified_violation) is True and f.holds is False      # 3 < 4 (and < 7)
    assert bool(finalize(_raw(4.0, 9.0, cert_factor=4.0), rel_tol=0.0).certified_violation) is False


def test_quasi_convexity_finalize_convex_and_the_undefined_need():
    # drop = 3, lhs = 2: drop − lhs = 1 <= tol = 0.125·(2 + 4 + 1 + 1) = 1
    f = finalize(_raw(2.0, 4.0), rel_tol=0.125)
    assert f.convex is True and f.holds is True
    assert finalize(_raw(2.0 - 2 ** -40, 4.0), rel_tol=0.125).convex is False
    # κ_need = 2√H·(drop − lhs)/(max_loss·dist2) = 4·1/0.25, with dist2 < 1
    assert finalize(_raw(2.0, 4.0, dist2=0.5), rel_tol=0.125).kappa_need == 16.0
    assert finalize(_raw(2.0, 4.0, max_loss=0.0, term_s=0.0), rel_tol=0.125).kappa_need is None
    assert finalize(_raw(2.0, 4.0, dist2=0.0, term_s=0.0), rel_tol=0.125).kappa_need is None
    neg = finalize(_raw(2.0, 4.0, max_loss=-1.0, dist2=2.0), rel_tol=0.125)
    assert neg.kappa_need is None
    assert finalize(_raw(2.0, 4.0, max_loss=0.5, dist2=-2.0), rel_tol=0.125).kappa_need is None
    g = finalize(_raw(2.0, 4.0, kappa_dir=-math.inf, wc_ratio=-math.inf), rel_tol=0.125)
    assert g.kappa_dir is None and g.wc_ratio is None and g.wc_holds is True
    # a convex segment: κ_need <= 0 (lhs above the drop), negative by (drop − lhs)·4/(0.5·2)
    assert finalize(_raw(5.0, 4.0), rel_tol=0.0).kappa_need == -8.0


def test_quasi_convexity_wc_ratio_at_one_plus_rel_tol():
    fin = lambda w, tol: finalize(_raw(7.0, 9.0, wc_ratio=w), rel_tol=tol).wc_holds   # noqa: E731
    assert fin(1.5, 0.5) is True and fin(1.5 + 2 ** -40, 0.5) is False
    assert fin(1.25, 0.25) is True and fin(1.0, 0.0) is True and fin(1.0 + 2 ** -40, 0.0) is False
    # the default tolerance is REL_TOL = 1e-10
    assert REL_TOL == 1e-10
    dflt = lambda w: finalize(_raw(7.0, 9.0, wc_ratio=w)).wc_holds   # noqa: E731
    assert dflt(1 + 5e-11) is True and dflt(1 + 5e-10) is False


def test_finalize_default_tolerance_absorbs_rounding_only():
    # drop = 8, term_s = 1, rhs = 7; tol = 1e-10·(7 + 9 + 1 + 1) = 1.8e-9
    assert finalize(_raw(7.0 - 1e-9, 9.0)).holds is True
    assert finalize(_raw(7.0 - 1e-8, 9.0)).holds is False
    assert bool(finalize(_raw(6.0 - 1e-8, 9.0)).certified_violation) is True     # rhs_cert = 6


def test_finalize_takes_numbers_of_any_float_type():
    f = finalize(Segment(*(np.float32(v) for v in _raw(1.0, 9.0))), rel_tol=0.5)
    assert type(f.lhs) is float and type(f.kappa_bar) is float and f.holds is True


# -- judged_pair: L̂(θ_k) at the floor ------------------------------------------------------------------

def test_judged_pair_needs_a_finite_loss_at_least_the_floor():
    floor = 2.0 ** -900
    assert judged_pair(floor, floor) is True and judged_pair(1.0, floor) is True
    assert judged_pair(floor * (1 - 2 ** -52), floor) is False and judged_pair(0.0, floor) is False
    assert judged_pair(math.inf, floor) is False and judged_pair(math.nan, floor) is False
