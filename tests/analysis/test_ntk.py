"""NTK features, witness and the one-step map (mhajax.ntk)."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mhajax.losses import empirical_risk
from mhajax.models.softmax.head import init_params
from mhajax.models.base import mha
from mhajax.data.mixture import tokenized_mixture
from mhajax.errors import InputError
from mhajax.analysis.margin import hard_margin
from mhajax.models.base import ravel_heads
from mhajax.analysis.ntk import (flat_to_params, flattened, init_condition, linear_margins,
                                 mean_pooled, ntk_features, ntk_gram, ntk_margin, one_step,
                                 random_head_signs, witness, witness_step, zero_params)

N, T, D, K = 12, 3, 4, 2


@pytest.fixture(scope="module")
def problem():
    X, y = tokenized_mixture(jax.random.PRNGKey(0), N, T, D, num_clusters=K, signal=1.5)
    th = init_params(jax.random.PRNGKey(1), 2, T, D, w_scale=1.0)
    return X, y, th


def test_features_equal_finite_differences(problem):
    X, y, th = problem
    G = np.asarray(ntk_features(th, X))
    Z, _ = ravel_heads(th)
    assert G.shape == (N, Z.size)
    rng = np.random.default_rng(0)
    h = 1e-5
    for _ in range(3):
        v = rng.normal(size=Z.size)
        vt = flat_to_params(jnp.asarray(v), th)
        plus = mha(jax.tree_util.tree_map(lambda a, b: a + h * b, th, vt), X)
        minus = mha(jax.tree_util.tree_map(lambda a, b: a - h * b, th, vt), X)
        fd = np.asarray((plus - minus) / (2 * h))
        assert np.allclose(G @ v, fd, rtol=1e-7, atol=1e-8 * np.abs(fd).max())


def test_gram_is_signed_feature_products(problem):
    X, y, th = problem
    G = np.asarray(ntk_features(th, X))
    Ks = np.asarray(ntk_gram(th, X, y))
    assert np.allclose(Ks, np.outer(y, y) * (G @ G.T), rtol=1e-13, atol=1e-13)
    assert np.allclose(np.asarray(ntk_gram(th, X)), G @ G.T, rtol=1e-13)


def test_witness_quantities_are_consistent(problem):
    X, y, th = problem
    m = ntk_margin(th, X, y)
    assert m.separable
    assert m.gamma_bar == pytest.approx(m.gamma / np.linalg.norm(np.asarray(ntk_features(th, X)), axis=1).max())
    wit = witness(th, X, y, m)
    log_n = math.log(N)
    assert wit["step"] == pytest.approx(log_n / m.gamma)
    delta = ravel_heads(jax.tree_util.tree_map(jnp.subtract, wit["params"], th))[0].reshape(-1)
    assert float(jnp.linalg.norm(delta)) == pytest.approx(log_n / m.gamma, rel=1e-12, abs=0)
    # linearized margins: y_i <g_i, Δ> >= (log n / γ) m(w*) ≈ log n
    G = np.asarray(ntk_features(th, X))
    lin = np.asarray(y) * (G @ np.asarray(delta))
    assert wit["lin_margin_min"] == pytest.approx(lin.min(), rel=1e-10, abs=0)
    assert wit["lin_margin_min"] >= log_n * (1 - 1e-8)
    phi0, phi_star = np.asarray(mha(th, X)), np.asarray(mha(wit["params"], X))
    assert wit["lin_error"] == pytest.approx(np.abs(phi_star - phi0 - G @ np.asarray(delta)).max(), rel=1e-9, abs=0)
    assert wit["loss0"] == pytest.approx(float(empirical_risk(th, X, y)), rel=1e-12, abs=0)
    assert wit["loss_star"] == pytest.approx(float(empirical_risk(wit["params"], X, y)), rel=1e-12, abs=0)
    assert wit["loss_linear"] <= wit["loss_linear_bound"] * (1 + 1e-12)
    assert wit["phi0_max"] == pytest.approx(np.abs(phi0).max())
    ic = init_condition(th, X, const=1.0)
    assert ic["phi0_max"] == pytest.approx(np.abs(phi0).max())
    assert ic["holds"] == (ic["phi0_max"] <= math.log(N))


def test_witness_refuses_non_separable():
    X = jnp.ones((4, T, D))
    y = jnp.array([1.0, -1.0, 1.0, -1.0])  # identical inputs, different labels
    th = init_params(jax.random.PRNGKey(2), 1, T, D)
    m = ntk_margin(th, X, y)
    assert m.status == "not_separable" and m.gamma == 0.0
    with pytest.raises(InputError, match="NTK-separable"):
        witness_step(4, m)


def test_zero_start_step_moves_only_U_and_heads_agree(problem):
    X, y, _ = problem
    H = 3
    th0 = one_step(zero_params(H, T, D), X, y, 2.0)
    assert np.all(np.asarray(th0.W) == 0.0)
    U = np.asarray(th0.U)
    assert np.abs(U).max() > 0
    assert np.all(U == U[0:1])  # every head gets the same U
    # the step is −η ∇_U L̂(0) = (η/2n√H) Σ_i y_i 1 x̄_iᵀ  (ℓ'(0) = −1/2)
    xbar = np.asarray(mean_pooled(X))
    expect = 2.0 / (2 * N * np.sqrt(H)) * (np.asarray(y) @ xbar)
    assert np.allclose(U[0], np.broadcast_to(expect, (T, D)), rtol=1e-12)


def test_random_signs_flip_heads_but_not_the_ntk_gram(problem):
    X, y, _ = problem
    H = 4
    s = jnp.array([1.0, -1.0, -1.0, 1.0])
    plain = one_step(zero_params(H, T, D), X, y, 3.0)
    signed = one_step(zero_params(H, T, D), X, y, 3.0, head_signs=s)
    assert np.allclose(np.asarray(signed.U), np.asarray(s)[:, None, None] * np.asarray(plain.U))
    assert np.all(np.asarray(signed.W) == 0.0)
    # Φ(θ₀) cancels: Σ_h s_h = 0 here
    assert np.abs(np.asarray(mha(signed, X))).max() < 1e-14
    # ... but the Gram matrix (hence γ, γ̄) is exactly invariant
    assert np.allclose(np.asarray(ntk_gram(signed, X, y)), np.asarray(ntk_gram(plain, X, y)),
                       rtol=1e-12, atol=1e-14)
    rs = random_head_signs(jax.random.PRNGKey(0), 16)
    assert set(np.asarray(rs).tolist()) <= {-1.0, 1.0}


def test_one_step_is_a_gd_step(problem):
    X, y, th = problem
    g = jax.grad(empirical_risk)(th, X, y)
    th0 = one_step(th, X, y, 0.3)
    for a, b, c in zip(jax.tree_util.tree_leaves(th0), jax.tree_util.tree_leaves(th),
                       jax.tree_util.tree_leaves(g)):
        assert np.allclose(a, b - 0.3 * c, rtol=1e-14, atol=1e-15)


def test_ntk_at_zero_is_mean_pooling(problem):
    """At θ = 0 the features are H^{-1/2} 1 x̄ᵀ per head (W-block 0), so the
    normalized NTK margin equals the mean-pooling linear margin exactly."""
    X, y, _ = problem
    m = ntk_margin(zero_params(2, T, D), X, y)
    lin = linear_margins(X, y)
    assert m.separable and lin["mean"].separable
    assert m.gamma_bar == pytest.approx(lin["mean"].gamma_bar, rel=1e-10, abs=0)


def test_pooling_shapes(problem):
    X, y, _ = problem
    assert mean_pooled(X).shape == (N, D)
    assert np.allclose(mean_pooled(X), np.asarray(X).mean(axis=1))
    F = flattened(X)
    assert F.shape == (N, T * D)
    assert np.allclose(F[3, D:2 * D], X[3, 1])
    lm = linear_margins(X, y)
    assert set(lm) == {"mean", "flat"}
    assert hard_margin(np.asarray(F), np.asarray(y)).gamma == pytest.approx(lm["flat"].gamma)


def test_zero_start_with_H_heads_equals_one_head_at_step_over_sqrt_H(problem):
    """From θ₋₁ = 0, U_h(θ₀) = (η₀/√H) u₁ in every head, so the Gram matrix is
    K_U + (η₀²/H) K_W(u₁): H heads at η₀ = one head at η₀/√H."""
    X, y, _ = problem
    K4 = ntk_gram(one_step(zero_params(4, T, D), X, y, 6.0), X, y)
    K1 = ntk_gram(one_step(zero_params(1, T, D), X, y, 3.0), X, y)
    assert np.allclose(np.asarray(K4), np.asarray(K1), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", ["softmax", "linear", "relu", "qk", "value", "causal", "cls"])
@pytest.mark.parametrize("w_scale,zero", [(0.0, False), (0.7, False), (0.0, True)])
def test_dead_point_probe_agrees_with_the_features_on_data(name, w_scale, zero, problem):
    """``dead_point_reason`` (one probe input, one head) is not None exactly when the NTK
    features of the model at that start vanish on a real data set with 2 heads."""
    from mhajax.analysis.ntk import dead_point_reason
    from mhajax.models.base import get_model
    X, _, _ = problem
    model = get_model(name)
    th = model.init(jax.random.PRNGKey(3), 2, T, D, u_scale=1.0, w_scale=w_scale)
    if zero:
        th = jax.tree_util.tree_map(jnp.zeros_like, th)
    G = np.asarray(ntk_features(th, X, model))
    why = dead_point_reason(model, T, D, u_scale=1.0, w_scale=w_scale, zero=zero)
    assert (why is not None) == (not np.any(G)), (name, why, np.abs(G).max())
    if why:
        assert f"--model {name}" in why
