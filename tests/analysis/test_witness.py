"""mhajax.analysis.witness: the class direction, the readout direction w, the directional
margins y_i⟨g_i, w⟩, the feature norms ‖g_i‖, the witness margin and the witness point.
Truth: closed forms computed directly in numpy from the model Φ(θ; X) = H^{-1/2} Σ_h
⟨U_h, softmax(X W_h Xᵀ) X⟩ (the gradient in U is H^{-1/2} A_h X; in W it is
H^{-1/2} Σ_{t,j} a_t[j](v_t[j] − a_tᵀv_t) x_t x_jᵀ), at a point with W ≠ 0."""
import math

import jax.numpy as jnp
import numpy as np
import pytest

from mhajax.analysis.witness import (class_direction, directional_margins, feature_norms, readout_direction,
                                     witness, witness_point)
from mhajax.models.base import MHAParams

H, T, D, N = 2, 3, 4, 5


def _problem(seed=0):
    r = np.random.default_rng(seed)
    U = r.normal(size=(H, T, D))
    W = 0.4 * r.normal(size=(H, D, D))
    X = r.normal(size=(N, T, D))
    y = np.array([1.0, -1.0, 1.0, 1.0, -1.0])
    return MHAParams(jnp.asarray(U), jnp.asarray(W)), U, W, X, y


def _softmax(S):
    E = np.exp(S - S.max(-1, keepdims=True))
    return E / E.sum(-1, keepdims=True)


def _phi(U, W, x):
    return sum(np.sum(U[h] * (_softmax(x @ W[h] @ x.T) @ x)) for h in range(H)) / math.sqrt(H)


def _grad_norm(U, W, x):
    sq = 0.0
    for h in range(H):
        A = _softmax(x @ W[h] @ x.T)
        V = x @ U[h].T                                # V[j, t] = x_jᵀ u_t
        gU = A @ x
        gW = np.zeros((D, D))
        for t in range(T):
            v = V[:, t]
            c = A[t] * (v - A[t] @ v)
            gW += np.outer(x[t], c @ x)
        sq += (np.sum(gU ** 2) + np.sum(gW ** 2)) / H
    return math.sqrt(sq)


def _dir_margin(W, x, yi, e):
    # ⟨g, w⟩ = (1/(H√T)) Σ_h Σ_t e·(A_h x)_t
    return yi * sum(np.sum((_softmax(x @ W[h] @ x.T) @ x) @ e) for h in range(H)) / (H * math.sqrt(T))


def test_class_direction_closed_form():
    s = 1 / math.sqrt(2)
    np.testing.assert_array_equal(np.asarray(class_direction(4, antipodal=True)), [1.0, 0.0, 0.0, 0.0])
    e = np.asarray(class_direction(3))
    assert e.dtype == np.float64
    np.testing.assert_allclose(e, [s, -s, 0.0], rtol=1e-15, atol=0)
    e32 = class_direction(3, dtype=jnp.float32)
    assert e32.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(e32), [s, -s, 0.0], rtol=1e-7, atol=0)
    assert class_direction(2).shape == (2,)


def test_readout_direction_is_unit_and_moves_u_only():
    p, U, W, X, y = _problem()
    e = np.asarray(class_direction(D))
    w = readout_direction(p, jnp.asarray(e))
    np.testing.assert_allclose(np.asarray(w.U), np.broadcast_to(e / math.sqrt(H * T), (H, T, D)),
                               rtol=1e-15, atol=0)
    np.testing.assert_array_equal(np.asarray(w.W), np.zeros((H, D, D)))
    assert w.U.dtype == p.U.dtype and w.W.shape == p.W.shape
    assert math.sqrt(float(jnp.sum(w.U ** 2) + jnp.sum(w.W ** 2))) == pytest.approx(1.0, rel=1e-14, abs=0)
    p32 = MHAParams(p.U.astype(jnp.float32), p.W.astype(jnp.float32))
    assert readout_direction(p32, jnp.asarray(e)).U.dtype == jnp.float32


def test_directional_margins_closed_form():
    p, U, W, X, y = _problem()
    e = np.asarray(class_direction(D))
    m = np.asarray(directional_margins(p, jnp.asarray(X), jnp.asarray(y), readout_direction(p, jnp.asarray(e))))
    want = [_dir_margin(W, X[i], y[i], e) for i in range(N)]
    np.testing.assert_allclose(m, want, rtol=1e-12, atol=0)


def test_feature_norms_closed_form():
    p, U, W, X, y = _problem(1)
    g = np.asarray(feature_norms(p, jnp.asarray(X)))
    np.testing.assert_allclose(g, [_grad_norm(U, W, X[i]) for i in range(N)], rtol=1e-12, atol=0)


def test_witness_every_field():
    p, U, W, X, y = _problem(2)
    e = np.asarray(class_direction(D, antipodal=True))
    r = witness(p, jnp.asarray(X), jnp.asarray(y), jnp.asarray(e))
    m = [_dir_margin(W, X[i], y[i], e) for i in range(N)]
    g = [_grad_norm(U, W, X[i]) for i in range(N)]
    assert float(r.gamma) == pytest.approx(min(m), rel=1e-12, abs=0)
    assert float(r.max_feature_norm) == pytest.approx(max(g), rel=1e-12, abs=0)
    assert float(r.gamma_bar) == pytest.approx(min(m) / max(g), rel=1e-12, abs=0)
    assert float(r.radius) == pytest.approx(math.log(N) / min(m), rel=1e-12, abs=0)
    assert float(r.init_output) == pytest.approx(max(abs(_phi(U, W, X[i])) for i in range(N)), rel=1e-12, abs=0)


def test_witness_point_moves_every_margin_by_log_n_over_gamma():
    p, U, W, X, y = _problem(3)
    e = np.asarray(class_direction(D))
    m = np.array([_dir_margin(W, X[i], y[i], e) for i in range(N)])
    star = witness_point(p, jnp.asarray(X), jnp.asarray(y), jnp.asarray(e))
    r = math.log(N) / m.min()
    np.testing.assert_allclose(np.asarray(star.U), U + r * e / math.sqrt(H * T), rtol=1e-13, atol=0)
    np.testing.assert_array_equal(np.asarray(star.W), W)
    # Φ is linear in U: y_i Φ(θ*) = y_i Φ(θ_0) + r·m_i, and the argmin sample gains exactly log n
    Ustar = np.asarray(star.U)
    for i in range(N):
        assert y[i] * _phi(Ustar, W, X[i]) == pytest.approx(y[i] * _phi(U, W, X[i]) + r * m[i], rel=1e-11, abs=1e-12)
    i = int(np.argmin(m))
    assert y[i] * _phi(Ustar, W, X[i]) - y[i] * _phi(U, W, X[i]) == pytest.approx(math.log(N), rel=1e-11, abs=0)


def test_float32_inputs_stay_float32():
    """The data's dtype is kept: log n is taken in X's dtype, so γ_w's radius and θ* are float32 for
    float32 data and parameters (and their values those of the float64 computation, to float32)."""
    p, U, W, X, y = _problem(4)
    p32 = MHAParams(p.U.astype(jnp.float32), p.W.astype(jnp.float32))
    X32, y32 = jnp.asarray(X, jnp.float32), jnp.asarray(y, jnp.float32)
    e32 = class_direction(D, dtype=jnp.float32)
    r = witness(p32, X32, y32, e32)
    assert r.radius.dtype == jnp.float32 and r.gamma.dtype == jnp.float32
    m = min(_dir_margin(np.asarray(p32.W, np.float64), np.asarray(X32, np.float64)[i], y[i],
                        np.asarray(e32, np.float64)) for i in range(N))
    assert float(r.radius) == pytest.approx(math.log(N) / m, rel=1e-5, abs=0)
    star = witness_point(p32, X32, y32, e32)
    assert star.U.dtype == jnp.float32 and star.W.dtype == jnp.float32
