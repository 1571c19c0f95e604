"""Local quasi-convexity along a segment (mhajax.experiments.quasi_convexity, docs/theory.md §10) on small cases."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mhajax.models.softmax.bounds import beta2, kappa_bound
from mhajax.data.common import token_radius
from mhajax.data.mixture import tokenized_mixture
from mhajax.losses import empirical_risk
from mhajax.models.softmax.head import init_params
from mhajax.experiments.quasi_convexity import Segment, finalize, segment_check

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
