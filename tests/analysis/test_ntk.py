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
    assert wit.step == pytest.approx(log_n / m.gamma)
    delta = ravel_heads(jax.tree_util.tree_map(jnp.subtract, wit.params, th))[0].reshape(-1)
    assert float(jnp.linalg.norm(delta)) == pytest.approx(log_n / m.gamma, rel=1e-12, abs=0)
    # linearized margins: y_i <g_i, Δ> >= (log n / γ) m(w*) ≈ log n
    G = np.asarray(ntk_features(th, X))
    lin = np.asarray(y) * (G @ np.asarray(delta))
    assert wit.lin_margin_min == pytest.approx(lin.min(), rel=1e-10, abs=0)
    assert wit.lin_margin_min >= log_n * (1 - 1e-8)
    phi0, phi_star = np.asarray(mha(th, X)), np.asarray(mha(wit.params, X))
    assert wit.lin_error == pytest.approx(np.abs(phi_star - phi0 - G @ np.asarray(delta)).max(), rel=1e-9, abs=0)
    assert wit.loss0 == pytest.approx(float(empirical_risk(th, X, y)), rel=1e-12, abs=0)
    assert wit.loss_star == pytest.approx(float(empirical_risk(wit.params, X, y)), rel=1e-12, abs=0)
    assert wit.loss_linear <= wit.loss_linear_bound * (1 + 1e-12)
    assert wit.phi0_max == pytest.approx(np.abs(phi0).max())
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
    assert m.separable and lin.mean.separable
    assert m.gamma_bar == pytest.approx(lin.mean.gamma_bar, rel=1e-10, abs=0)


def test_pooling_shapes(problem):
    X, y, _ = problem
    assert mean_pooled(X).shape == (N, D)
    assert np.allclose(mean_pooled(X), np.asarray(X).mean(axis=1))
    F = flattened(X)
    assert F.shape == (N, T * D)
    assert np.allclose(F[3, D:2 * D], X[3, 1])
    lm = linear_margins(X, y)
    assert set(lm._fields) == {"mean", "flat"}
    assert hard_margin(np.asarray(F), np.asarray(y)).gamma == pytest.approx(lm.flat.gamma)


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


# ---------------------------------------------------------------------------------------------
# Arguments reach what they name (each test below kills mutants that the tests above
# let through; independent truths are numpy closed forms and the functions of other modules).
# ---------------------------------------------------------------------------------------------

def _softplus_neg(z):
    """ℓ(z) = log(1 + e^{-z}) in numpy (the logistic loss, stable)."""
    return np.logaddexp(0.0, -np.asarray(z, dtype=float))


def test_check_refuses_mismatched_parameters_bad_labels_and_a_2d_X(problem):
    X, y, th = problem
    th5 = init_params(jax.random.PRNGKey(4), 2, T + 2, D)       # parameters for 5 tokens
    with pytest.raises(InputError, match=r"X has 3 tokens but the parameters expect T=5"):
        ntk_margin(th5, X, y)
    bad = np.asarray(y).copy()
    bad[2] = 0.5
    m = ntk_margin(th, X, y)
    for fn in (lambda: ntk_margin(th, X, jnp.asarray(bad)), lambda: witness(th, X, jnp.asarray(bad), m),
               lambda: linear_margins(X, jnp.asarray(bad))):
        with pytest.raises(InputError, match=r"labels must be -1 or \+1, got y\[2\] = 0\.5"):
            fn()
    # without labels, a single [T, d] sample passes check_data but not the NTK entry points
    with pytest.raises(InputError, match=r"X must have shape \[n, T, d\], got shape \(3, 4\)$"):
        ntk_margin(th, X[0], None)


def test_entry_points_ask_the_memory_guard_once_with_their_own_sizes(monkeypatch, problem):
    """The public ntk_features / ntk_margin hand the guard H, n, T, d read off their arguments
    and b from X's dtype; the features' term is the bytes of G, the margin adds its host copy;
    ``force`` is passed on (the margin's, not the solver's); nothing guards twice. The plain
    functions (and ntk_gram, built on them) ask nothing."""
    from mhajax import api
    from mhajax.runtime import memory as mem
    from mhajax.models.variants import LINEAR
    X, y, _ = problem
    calls = []
    monkeypatch.setattr(mem, "guard", lambda est, sizes, ref, *, force=False, api=False, budget=None:
                        calls.append((est(sizes).what, est(sizes).terms, sizes, force)))
    th = LINEAR.init(jax.random.PRNGKey(5), 3, T, D, u_scale=1.0, w_scale=0.5)
    X32 = jnp.asarray(X, jnp.float32)
    sizes = dict(H=3, n=N, T=T, d=D)
    G = ("NTK features G [n, P]", (N, 3 * (T * D + D * D)))
    out = api.ntk_features(th, X32, LINEAR)
    assert calls == [("ntk_features", (G,), sizes, False)] and out.size == N * 3 * (T * D + D * D)
    calls.clear()
    api.ntk_features(th, X32, LINEAR, force=True)
    api.ntk_features(th, X32, LINEAR, True)
    assert [c[3] for c in calls] == [True, True]
    calls.clear()
    m = api.ntk_margin(th, X32, y, LINEAR)
    assert calls == [("ntk_margin", (G, ("y·G on the host [n, P]", G[1])), sizes, False)]
    calls.clear()
    api.ntk_margin(th, X32, y, LINEAR, force=True)     # 'force' is the guard's, not the solver's
    assert [c[3] for c in calls] == [True]
    calls.clear()
    assert np.array_equal(np.asarray(ntk_features(th, X32, LINEAR)), np.asarray(out))
    ntk_gram(th, X32, None, LINEAR)
    assert ntk_margin(th, X32, y, LINEAR).gamma == m.gamma and calls == []



def test_the_model_passed_is_the_one_differentiated(problem):
    """ntk_gram, ntk_margin, one_step, witness_values and init_condition use the model they are
    given: the linear-attention head, whose features differ from the softmax head's."""
    from mhajax.analysis.ntk import witness_values
    from mhajax.models.variants import LINEAR
    X, y, _ = problem
    th = LINEAR.init(jax.random.PRNGKey(6), 2, T, D, u_scale=1.0, w_scale=0.5)
    G = np.asarray(jax.jacrev(lambda t: mha(t, X, LINEAR))(th).U.reshape(N, -1))
    GW = np.asarray(jax.jacrev(lambda t: mha(t, X, LINEAR))(th).W.reshape(N, -1))
    Gs = np.asarray(ntk_features(th, X))                                     # softmax's
    full = np.asarray(ntk_features(th, X, LINEAR))
    assert np.abs(np.sort(np.abs(full), axis=None) - np.sort(np.abs(np.hstack([G, GW])), axis=None)).max() \
        <= 1e-12 * np.abs(full).max()
    assert np.abs(full - Gs).max() > 1e-3 * np.abs(full).max()
    np.testing.assert_allclose(np.asarray(ntk_gram(th, X, None, LINEAR)), full @ full.T, rtol=1e-12,
                               atol=1e-12 * np.abs(full).max() ** 2)
    m = ntk_margin(th, X, y, LINEAR)
    ref = hard_margin(full, np.asarray(y))
    assert m.status == ref.status and m.gamma == pytest.approx(ref.gamma, rel=1e-10, abs=0)
    th0 = one_step(th, X, y, 0.3, model=LINEAR)
    g = jax.grad(empirical_risk)(th, X, y, LINEAR)
    np.testing.assert_allclose(np.asarray(th0.W), np.asarray(th.W - 0.3 * g.W), rtol=1e-13, atol=1e-15)
    w = jnp.asarray(np.random.default_rng(7).standard_normal(full.shape[1]))
    vals = witness_values(th, X, y, w, 0.2, LINEAR)
    phi0 = np.asarray(mha(th, X, LINEAR))
    phis = np.asarray(mha(jax.tree_util.tree_map(jnp.add, th, flat_to_params(0.2 * w, th)), X, LINEAR))
    assert float(vals.phi0_max) == pytest.approx(np.abs(phi0).max(), rel=1e-13, abs=0)
    assert float(vals.phi_star_margin_min) == pytest.approx((np.asarray(y) * phis).min(), rel=1e-12, abs=0)
    ic = init_condition(th, X, LINEAR)
    assert ic["phi0_max"] == pytest.approx(np.abs(phi0).max(), rel=1e-13, abs=0)


def test_the_loss_passed_is_the_one_used(problem):
    """one_step and witness use the loss they are given (exponential: ℓ = e^{-z})."""
    from mhajax.losses import EXPONENTIAL
    X, y, th = problem
    g = jax.grad(lambda t: jnp.mean(jnp.exp(-y * mha(t, X))))(th)
    th0 = one_step(th, X, y, 0.3, loss=EXPONENTIAL)
    np.testing.assert_allclose(np.asarray(th0.U), np.asarray(th.U - 0.3 * g.U), rtol=1e-13, atol=1e-15)
    m = ntk_margin(th, X, y)
    wit = witness(th, X, y, m, loss=EXPONENTIAL)
    phi0 = np.asarray(mha(th, X))
    assert wit.loss0 == pytest.approx(np.mean(np.exp(-np.asarray(y) * phi0)), rel=1e-12, abs=0)


def test_witness_values_equal_their_numpy_definitions(problem):
    """Every field of WitnessValues against numpy: L̂_lin(θ*) = mean ℓ(y(Φ₀ + G Δ)), the margin
    min y Φ(θ*), and the reported ℓ(log n · m(w*)/γ − max|Φ₀|) bound and log n."""
    X, y, th = problem
    m = ntk_margin(th, X, y)
    wit = witness(th, X, y, m)
    yn = np.asarray(y)
    G = np.asarray(ntk_features(th, X))
    delta = np.asarray(ravel_heads(jax.tree_util.tree_map(jnp.subtract, wit.params, th))[0]).reshape(-1)
    phi0, phis = np.asarray(mha(th, X)), np.asarray(mha(wit.params, X))
    assert wit.loss_linear == pytest.approx(np.mean(_softplus_neg(yn * (phi0 + G @ delta))), rel=1e-9, abs=0)
    assert wit.phi_star_margin_min == pytest.approx((yn * phis).min(), rel=1e-12, abs=0)
    assert wit.log_n == math.log(N)
    bound = _softplus_neg(math.log(N) * m.gamma_lower / m.gamma - np.abs(phi0).max())
    assert wit.loss_linear_bound == pytest.approx(float(bound), rel=1e-12, abs=0)


def test_witness_keeps_float32_and_needs_a_certified_separable_margin(problem):
    import dataclasses
    X, y, th = problem
    X32 = jnp.asarray(X, jnp.float32)
    th32 = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float32), th)
    m = ntk_margin(th32, X32, y)
    wit = witness(th32, X32, y, m)
    assert {leaf.dtype for leaf in jax.tree_util.tree_leaves(wit.params)} == {jnp.dtype(jnp.float32)}
    # an undecided solver result still carries a direction w: no witness from it
    undecided = dataclasses.replace(m, status="undecided")
    assert undecided.w is not None
    with pytest.raises(InputError, match="status 'undecided'"):
        witness_step(N, undecided)


def test_init_condition_literals_edges_and_default_constant(problem):
    """``holds`` iff 0 < log n and max|Φ₀| <= const·log n, const = 1 by default; ``ratio`` =
    max|Φ₀|/log n, None at n = 1."""
    X, y, th = problem
    phi0 = float(np.abs(np.asarray(mha(th, X))).max())
    ic = init_condition(th, X)
    assert set(ic) == {"phi0_max", "log_n", "ratio", "holds"}
    assert ic["log_n"] == math.log(N) and ic["ratio"] == pytest.approx(phi0 / math.log(N), rel=1e-13, abs=0)
    big = th._replace(U=th.U * (1.5 * math.log(N) / phi0))   # Φ is linear in U: max|Φ₀| = 1.5 log n
    assert init_condition(big, X)["holds"] is False
    assert init_condition(big, X, const=2.0)["holds"] is True
    zero = zero_params(2, T, D)                              # Φ₀ = 0: holds with const 0 (<=, not <)
    assert init_condition(zero, X, const=0.0)["holds"] is True
    one = init_condition(th, X[:1])                          # n = 1: log n = 0
    assert one["log_n"] == 0.0 and one["ratio"] is None and one["holds"] is False
    assert init_condition(zero, X[:1])["holds"] is False     # even with Φ₀ = 0: needs log n > 0
    two = init_condition(th, X[:2], const=1e6)               # n = 2: 0 < log 2 < 1
    assert two["ratio"] == pytest.approx(two["phi0_max"] / math.log(2), rel=1e-13, abs=0) and two["holds"]


def test_solver_options_reach_the_margin_solver(problem):
    """ntk_margin and linear_margins pass their keyword options to the solver: a resolution
    of 0.9 (margins below 90 % of the largest feature norm count as 0) makes every margin here
    'not separable', which the default does not."""
    X, y, th = problem
    assert ntk_margin(th, X, y).separable
    assert ntk_margin(th, X, y, resolution=0.9).status == "not_separable"
    plain, coarse = linear_margins(X, y), linear_margins(X, y, resolution=0.9)
    for k in ("mean", "flat"):
        assert getattr(plain, k).separable, k
        assert getattr(coarse, k).status == "not_separable", k


def test_dtypes_of_zero_params_and_head_signs():
    for dt in (jnp.float32, jnp.float64):
        z = zero_params(2, T, D, dt)
        assert z.U.dtype == dt and z.W.dtype == dt and z.U.shape == (2, T, D) and z.W.shape == (2, D, D)
        assert random_head_signs(jax.random.PRNGKey(0), 5, dt).dtype == dt
    assert zero_params(1, T, D).U.dtype == jnp.float64 and zero_params(1, T, D).W.dtype == jnp.float64
    assert random_head_signs(jax.random.PRNGKey(0), 5).dtype == jnp.float64


def test_head_signs_are_fair_coin_flips():
    """s_h iid uniform on {−1, +1}: over 4096 heads both signs occur and the mean is within
    5 standard deviations (5/64) of 0."""
    s = np.asarray(random_head_signs(jax.random.PRNGKey(11), 4096))
    assert set(s.tolist()) == {-1.0, 1.0}
    assert abs(s.mean()) <= 5 / 64


def test_signed_one_step_keeps_float32(problem):
    X, y, _ = problem
    z = zero_params(4, T, D, jnp.float32)
    out = one_step(z, jnp.asarray(X, jnp.float32), y, 1.0, head_signs=jnp.array([1.0, -1.0, 1.0, -1.0]))
    assert out.U.dtype == jnp.float32 and out.W.dtype == jnp.float32


@pytest.mark.parametrize("name", ["relu", "value"])
def test_dead_point_messages(name):
    """The reason names the model, the start and (only at an initialization with w_scale = 0)
    the way out; the defaults are u_scale = 1, w_scale = 0, not θ = 0."""
    from mhajax.analysis.ntk import dead_point_reason
    from mhajax.models.base import get_model
    model = get_model(name)
    if name == "relu":   # relu(0) = 0 with zero derivative: dead at W = 0 whatever U is
        assert dead_point_reason(model, T, D) == (
            "--model relu has ∇_θΦ ≡ 0 at its initialization (u_scale=1, w_scale=0): every NTK "
            "feature is 0, so the margin is 0 and GD never leaves that point; use --w-scale > 0")
        assert dead_point_reason(model, T, D, u_scale=2.5) .startswith(
            "--model relu has ∇_θΦ ≡ 0 at its initialization (u_scale=2.5, w_scale=0)")
        assert dead_point_reason(model, T, D, w_scale=0.7) is None
    assert dead_point_reason(model, T, D, zero=True) == (
        f"--model {name} has ∇_θΦ ≡ 0 at θ = 0: every NTK feature is 0, so the margin is 0 and "
        "GD never leaves that point")


def test_a_label_vector_of_the_wrong_length_is_refused_naming_both_shapes(problem):
    """ntk_margin and linear_margins validate (X, y) together before the solver does: the
    message names X's shape too."""
    X, y, th = problem
    for fn in (lambda: ntk_margin(th, X, y[:5]), lambda: linear_margins(X, y[:5])):
        with pytest.raises(InputError, match=r"y has shape \(5,\) but X has shape \(12, 3, 4\)"):
            fn()


def test_dead_point_probe_starts_from_the_given_u_scale():
    """A head quadratic in U (f = <U, X>², no W) has ∇Φ ≡ 0 exactly at U = 0: the probe must
    see u_scale = 0 as dead and u_scale = 1 as alive."""
    from mhajax.analysis.ntk import dead_point_reason
    from mhajax.models.base import HeadModel
    quad = HeadModel("quad", lambda th, x: jnp.sum(th.U * x) ** 2, init_params)
    assert dead_point_reason(quad, T, D, u_scale=0.0, w_scale=0.5) == (
        "--model quad has ∇_θΦ ≡ 0 at its initialization (u_scale=0, w_scale=0.5): every NTK "
        "feature is 0, so the margin is 0 and GD never leaves that point")
    assert dead_point_reason(quad, T, D, u_scale=1.0, w_scale=0.5) is None


def test_an_unknown_solver_option_is_refused_by_name(problem):
    """The options reach :func:`mhajax.analysis.margin.hard_margin`; a misspelt one is named
    (it used to surface as a TypeError from inside the solver)."""
    X, y, th = problem
    with pytest.raises(InputError, match=r"^ntk_margin: unknown option 'max_iters' \(the solver's options: "
                                         r"resolution, rtol, max_iter\)$"):
        ntk_margin(th, X, y, max_iters=3)
