"""mhajax.softmax_hessian: the closed-form per-head Hessian against jax.hessian and SPEC §4's
second-derivative formula."""
import math

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from helpers import D, H, N, T, flat, make_refs, per_regime
from mhajax.models.base import MHAParams
from mhajax.models.softmax.hessian import head_hessian, weighted_head_hessian

REFS = make_refs(H, T, D)
P_H = T * D + D * D

# [n, H, p, p] closed-form per-sample head Hessians
closed_all = jax.jit(lambda th, X: jax.vmap(
    lambda x: jax.vmap(lambda U, W: head_hessian(MHAParams(U, W), x))(th.U, th.W))(X))
weighted = jax.jit(lambda th, X, c: jax.vmap(
    lambda U, W: weighted_head_hessian(MHAParams(U, W), X, c))(th.U, th.W))


def _beta3(th, X):
    """β₃(θ_h; R_i) [n, H]: bounds every entry (and every intermediate term) of the Hessian."""
    Ri = np.linalg.norm(np.asarray(X), axis=-1).max(-1)[:, None]
    l21 = np.linalg.norm(np.asarray(th.U), axis=-1).sum(-1)[None, :]
    return Ri**3 * math.sqrt(T) + 2 * Ri**5 * l21


@per_regime()
def test_closed_form_equals_jax_hessian(case):
    th, X, y, _ = case
    ref = np.asarray(REFS["head_hess"](flat(th), X))           # [n, H, p, p]
    got = np.asarray(closed_all(th, X))
    assert got.shape == (N, H, P_H, P_H)
    tol = 1e-12 * _beta3(th, X)[..., None, None]
    assert np.all(np.abs(got - ref) <= tol)
    # f is linear in U: the UU block is exactly zero; the Hessian is symmetric
    assert np.all(got[..., : T * D, : T * D] == 0.0)
    np.testing.assert_allclose(got, np.swapaxes(got, -1, -2), rtol=0, atol=1e-13 * _beta3(th, X).max())


C_WEIGHTS = np.random.default_rng(0).standard_normal(N)   # both signs


@per_regime(regimes=("generic", "large_w", "large_u"))
def test_weighted_sum_over_samples(case):
    th, X, y, _ = case
    c = C_WEIGHTS
    ref = np.einsum("i,ihab->hab", c, np.asarray(REFS["head_hess"](flat(th), X)))
    got = np.asarray(weighted(th, X, jnp.asarray(c)))
    tol = 1e-12 * np.einsum("i,ih->h", np.abs(c), _beta3(th, X))[:, None, None]
    assert np.all(np.abs(got - ref) <= tol)


def _spec_second_derivative(U, W, X, dU, dW):
    """SPEC §4: D²f[Δ,Δ] = Σ_t ( 2 Cov_{a_t}(p_t, q_t) + E_{a_t}[(v_t − v̄_t)(q_t − q̄_t)²] ),
    p_t[j] = x_jᵀ Δu_t, q_t[j] = x_tᵀ ΔW x_j, v_t[j] = x_jᵀ u_t (plain numpy)."""
    S = X @ W @ X.T
    A = np.exp(S - S.max(1, keepdims=True))
    A /= A.sum(1, keepdims=True)
    total = 0.0
    for t in range(X.shape[0]):
        a = A[t]
        p = X @ dU[t]
        q = X @ dW.T @ X[t]            # q[j] = x_tᵀ ΔW x_j
        v = X @ U[t]
        cov = a @ ((p - a @ p) * (q - a @ q))
        third = a @ ((v - a @ v) * (q - a @ q) ** 2)
        total += 2 * cov + third
    return total


@given(st.integers(0, 2**32 - 1), st.floats(0.0, 3.0), st.floats(0.3, 2.0))
def test_spec_second_derivative_formula(seed, sw, sx):
    rng = np.random.default_rng(seed)
    U = rng.standard_normal((H, T, D))
    W = sw * rng.standard_normal((H, D, D))
    X = sx * rng.standard_normal((N, T, D))
    th = MHAParams(jnp.asarray(U), jnp.asarray(W))
    Hs = np.asarray(closed_all(th, jnp.asarray(X)))
    dU = rng.standard_normal((T, D))
    dW = rng.standard_normal((D, D))
    delta = np.concatenate([dU.ravel(), dW.ravel()])
    b3 = _beta3(th, X)
    for i in range(2):
        for h in range(H):
            quad = delta @ Hs[i, h] @ delta
            spec = _spec_second_derivative(U[h], W[h], X[i], dU, dW)
            assert abs(quad - spec) <= 1e-12 * b3[i, h] * (delta @ delta)


def test_saturated_softmax_hessian_vanishes_in_w():
    """A saturated softmax (one-hot rows, far from ties) has zero curvature to rounding:
    every Hessian entry involves a_t ⊙ (1 − a_t)-type factors ~ e^{-gap}."""
    rng = np.random.default_rng(5)
    X = np.eye(D)[:T] * 2.0                      # orthogonal tokens, norm 2
    W = 50.0 * np.eye(D)                         # s_t[t] = 200, s_t[j≠t] = 0
    U = rng.standard_normal((T, D))
    Hs = np.asarray(head_hessian(MHAParams(jnp.asarray(U), jnp.asarray(W)), jnp.asarray(X)))
    assert np.abs(Hs).max() <= 1e-60
