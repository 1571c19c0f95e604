"""mhajax.softmax_hessian: the closed-form per-head Hessian against jax.hessian and the
second-derivative formula (4.5) of docs/theory.md."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import D, H, N, T, flat, make_refs, per_regime
from mhajax.models.base import MHAParams
from mhajax.models.softmax.hessian import head_hessian, reduced_head_hessian, weighted_head_hessian

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
    """docs/theory.md (4.5): D²f[Δ,Δ] = Σ_t ( 2 Cov_{a_t}(p_t, q_t) + E_{a_t}[(v_t − v̄_t)(q_t − q̄_t)²] ),
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


reduced = jax.jit(lambda th, x: jax.vmap(lambda U, W: reduced_head_hessian(MHAParams(U, W), x))(th.U, th.W))


def _power_sums(A, kmax=4):
    """tr(A^k), k = 1..kmax: equal for two symmetric matrices with the same nonzero spectrum."""
    out, P = [], np.eye(A.shape[-1])
    for _ in range(kmax):
        P = P @ A
        out.append(np.trace(P))
    return np.array(out)


@per_regime(regimes=("generic", "large_w", "large_u", "tiny_data"), examples=3)
def test_reduced_hessian_has_the_nonzero_spectrum_of_the_head_hessian(case):
    """reduced_head_hessian(θ_h, x) [2T², 2T²] against jax.hessian of the reference head [p, p]:
    exactly symmetric, the same operator norm (numpy eigvalsh) and the same power sums
    tr(A^k), k = 1..4 (which zero eigenvalues do not change)."""
    th, X, y, _ = case
    ref = np.asarray(REFS["head_hess"](flat(th), X))            # [n, H, p, p]
    b3 = _beta3(th, X)
    for i in range(2):
        got = np.asarray(reduced(th, X[i]))
        assert got.shape == (H, 2 * T * T, 2 * T * T)
        np.testing.assert_array_equal(got, np.swapaxes(got, -1, -2))
        for h in range(H):
            s = b3[i, h]
            ev_ref, ev_got = np.linalg.eigvalsh(ref[i, h]), np.linalg.eigvalsh(got[h])
            assert abs(max(-ev_got[0], ev_got[-1]) - max(-ev_ref[0], ev_ref[-1])) <= 1e-11 * s
            scale = s ** np.arange(1, 5) * 2 * T * T
            assert np.all(np.abs(_power_sums(got[h]) - _power_sums(ref[i, h])) <= 1e-10 * scale)


@pytest.mark.slow
def test_reduced_hessian_with_more_tokens_than_dimensions():
    """T > d: x xᵀ is singular (rank d); the square root R must still give the exact spectrum."""
    rng = np.random.default_rng(12)
    T5, d2 = 5, 2
    U, W, x = rng.standard_normal((T5, d2)), rng.standard_normal((d2, d2)), rng.standard_normal((T5, d2))
    th = MHAParams(jnp.asarray(U), jnp.asarray(W))
    full = np.asarray(head_hessian(th, jnp.asarray(x)))
    ref = np.asarray(make_refs(1, T5, d2)["head_hess"](jnp.asarray(np.concatenate([U.ravel(), W.ravel()])),
                                                       jnp.asarray(x[None])))[0, 0]
    np.testing.assert_allclose(full, ref, atol=1e-12 * np.abs(ref).max())
    red = np.asarray(reduced_head_hessian(th, jnp.asarray(x)))
    assert red.shape == (2 * T5 * T5, 2 * T5 * T5)
    scale = np.abs(ref).max() * ref.shape[0]
    assert np.all(np.abs(_power_sums(red) - _power_sums(ref)) <= 1e-10 * scale ** np.arange(1, 5))


@pytest.mark.slow
def test_float32_inputs_give_float32_hessians():
    """The closed forms keep the inputs' dtype (no silent promotion to float64 under x64),
    and agree with the float64 values to float32 rounding."""
    rng = np.random.default_rng(14)
    U, W, x = rng.standard_normal((T, D)), rng.standard_normal((D, D)), rng.standard_normal((T, D))
    th64 = MHAParams(jnp.asarray(U), jnp.asarray(W))
    th32 = MHAParams(jnp.asarray(U, jnp.float32), jnp.asarray(W, jnp.float32))
    x32 = jnp.asarray(x, jnp.float32)
    for fn in (head_hessian, reduced_head_hessian):
        a32, a64 = fn(th32, x32), np.asarray(fn(th64, jnp.asarray(x)))
        assert a32.dtype == jnp.float32
        np.testing.assert_allclose(np.asarray(a32), a64, atol=1e-4 * np.abs(a64).max())
    c32 = jnp.asarray([0.5, -1.0], jnp.float32)
    w = weighted_head_hessian(th32, jnp.stack([x32, 2 * x32]), c32)
    assert w.dtype == jnp.float32
