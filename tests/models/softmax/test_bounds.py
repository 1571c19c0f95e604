"""mhajax.bounds and every inequality of docs/theory.md §6, on hypothesis-generated θ and data.

Truths are independent of the library: Φ, ∇Φ and the per-sample head Hessians
come from ``jax.grad``/``jax.hessian`` of the reference model in tests/helpers.py,
norms and spectra from ``numpy.linalg``. Adversarial regimes: W entries up to 20
(saturated softmax), U up to 30, token entries ~1e-3, and losses near underflow
(every margin >= 690, L̂ ~ e^{-700}), where the loss weights are handled in numpy
and the Hessian is used divided by L̂ (scale-free).

Inequalities are checked as ``a <= b + tol`` with ``tol`` at rounding level
(1e-10 relative to the magnitudes involved); equality cases show the bounds are
attained, so a wrong constant would be caught.
"""
import math

import jax

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given

from helpers import (D, H, N, T, flat, make_refs, opnorm_sym, per_regime, problems,
                     scaled_hessian, weight_rtol)
from mhajax.models.softmax.bounds import (beta2, beta3, kappa_bound, l21_norms, output_bound,
                                          smoothness_coefficient)
from mhajax.errors import InputError
from mhajax.models.base import MHAParams

REFS = make_refs(H, T, D)
RTOL = 1e-10
TINY = float(np.finfo(np.float64).tiny)


def np_l21(U):
    return np.linalg.norm(np.asarray(U), axis=-1).sum(-1)       # [H]


def np_beta2(U, R, T=T):
    return math.sqrt(T * R**2 + R**6 * np.sum(np_l21(U) ** 2) / U.shape[0])


def np_beta3(U, R, T=T):
    return R**3 * math.sqrt(T) + 2 * R**5 * np_l21(U)           # [H]


def per_sample_radius(X):
    return np.linalg.norm(np.asarray(X), axis=-1).max(-1)       # [n]


@given(problems())
def test_closed_forms_match_numpy(case):
    th, X, y, _ = case
    U = np.asarray(th.U)
    R = float(np.linalg.norm(np.asarray(X), axis=-1).max())
    np.testing.assert_allclose(np.asarray(l21_norms(th.U)), np_l21(U), rtol=1e-14)
    assert float(output_bound(th, R)) == pytest.approx(R * np_l21(U).sum() / math.sqrt(H), rel=1e-14, abs=0)
    assert float(beta2(th, R)) == pytest.approx(np_beta2(U, R), rel=1e-14, abs=0)
    assert float(beta2(th, R, 7)) == pytest.approx(np_beta2(U, R, 7), rel=1e-14, abs=0)
    np.testing.assert_allclose(np.asarray(beta3(th, R)), np_beta3(U, R), rtol=1e-14)
    assert float(kappa_bound(th, R)) == pytest.approx(np_beta3(U, R).max(), rel=1e-14, abs=0)
    assert float(smoothness_coefficient(th, R)) == pytest.approx(
        np_beta2(U, R) ** 2 + np_beta3(U, R).max() / math.sqrt(H), rel=1e-13, abs=0)


@given(problems())
def test_kappa_depends_only_on_readouts(case):
    """κ(θ) never depends on W_h, and not on H (duplicating heads leaves it unchanged)."""
    th, X, y, _ = case
    R = 1.7
    k0 = float(kappa_bound(th, R))
    other_W = MHAParams(th.U, 20.0 * jnp.ones_like(th.W))
    dup = MHAParams(jnp.concatenate([th.U] * 3), jnp.concatenate([th.W] * 3))
    assert float(kappa_bound(other_W, R)) == k0
    assert float(kappa_bound(dup, R)) == k0


@per_regime()
def test_output_and_gradient_bounds(case):
    """|Φ(θ;X_i)| <= (R_i/√H) Σ_h ||U_h||_{2,1} and ||∇_θΦ(θ;X_i)|| <= β₂(θ) with R_i the
    largest token norm of X_i (which implies the data-set-R form)."""
    th, X, y, _ = case
    z = flat(th)
    Ri = per_sample_radius(X)
    U = np.asarray(th.U)
    phi = np.asarray(REFS["phi"](z, X))
    bound = Ri * np_l21(U).sum() / math.sqrt(H)
    assert np.all(np.abs(phi) <= bound * (1 + RTOL))
    J = np.asarray(REFS["jac"](z, X))
    gnorm = np.linalg.norm(J, axis=1)
    b2 = np.array([np_beta2(U, r) for r in Ri])
    assert np.all(gnorm <= b2 * (1 + RTOL))
    # library values for the data-set R bound the same quantities
    R = float(Ri.max())
    assert np.all(np.abs(phi) <= float(output_bound(th, R)) * (1 + RTOL))
    assert np.all(gnorm <= float(beta2(th, R)) * (1 + RTOL))


@pytest.mark.slow
@per_regime()
def test_head_hessian_bound_beta3(case):
    """||∇²_{θ_h} f(θ_h; X_i)||_op <= β₃(θ_h) = R³√T + 2R⁵||U_h||_{2,1}, exact per-sample norms;
    and ||∇²_θ Φ(θ; X_i)||_op = max_h ||∇²f(θ_h; X_i)|| / √H <= max_h β₃(θ_h) / √H."""
    th, X, y, _ = case
    z = flat(th)
    Ri = per_sample_radius(X)
    U = np.asarray(th.U)
    norms = opnorm_sym(REFS["head_hess"](z, X))                  # [n, H]
    b3 = np.stack([np_beta3(U, r) for r in Ri])                  # [n, H]
    assert np.all(norms <= b3 * (1 + RTOL))
    phi_norms = opnorm_sym(REFS["phi_hess"](z, X))               # [n], from the full P×P Hessian
    np.testing.assert_allclose(phi_norms, norms.max(1) / math.sqrt(H), rtol=1e-9,
                               atol=1e-12 * b3.max())
    assert np.all(phi_norms <= b3.max(1) / math.sqrt(H) * (1 + RTOL))


def _scaled(th, X, y):
    z = flat(th)
    phi = np.asarray(REFS["phi"](z, X))
    J = np.asarray(REFS["jac"](z, X))
    F = np.asarray(REFS["head_hess"](z, X))
    return scaled_hessian(J, F, np.asarray(y) * phi, y, H)


@per_regime()
def test_self_bounded_gradient_weak_convexity_and_smoothness(case):
    """docs/theory.md (6.6)–(6.8) on ∇²L̂/L̂ (scale-free):
    ||∇L̂|| <= β₂ L̂;  λ_min(∇²L̂) >= −(κ/√H) L̂;  λ_max(∇²L̂) <= (β₂² + κ/√H) L̂."""
    th, X, y, regime = case
    A, g, L, _ = _scaled(th, X, y)
    assert L > 0
    R = float(np.linalg.norm(np.asarray(X), axis=-1).max())
    U = np.asarray(th.U)
    b2, kap = np_beta2(U, R), float(np_beta3(U, R).max())
    ev = np.linalg.eigvalsh(A)
    scale = max(abs(ev[0]), abs(ev[-1]))
    assert np.linalg.norm(g) <= b2 * (1 + RTOL)
    assert ev[0] >= -kap / math.sqrt(H) - RTOL * max(scale, kap)
    assert ev[-1] <= b2**2 + kap / math.sqrt(H) + RTOL * scale


@per_regime(regimes=("generic", "large_w", "tiny_data", "large_u", "small_loss"))
def test_structure_free_hessian_obeys_the_same_bounds(case):
    """Same inequalities on jax.hessian of the reference L̂ (no G + B structure assumed),
    where L̂ is far from underflow; and that Hessian equals the assembly of docs/theory.md §3."""
    th, X, y, _ = case
    z = flat(th)
    L = float(REFS["risk"](z, X, y))
    Hd = np.asarray(REFS["hess"](z, X, y))
    gd = np.asarray(REFS["grad"](z, X, y))
    R = float(np.linalg.norm(np.asarray(X), axis=-1).max())
    U = np.asarray(th.U)
    b2, kap = np_beta2(U, R), float(np_beta3(U, R).max())
    ev = np.linalg.eigvalsh(0.5 * (Hd + Hd.T))
    scale = max(abs(ev[0]), abs(ev[-1]))
    assert np.linalg.norm(gd) <= b2 * L * (1 + RTOL)
    assert ev[0] >= -(kap / math.sqrt(H)) * L - RTOL * max(scale, kap * L)
    assert ev[-1] <= (b2**2 + kap / math.sqrt(H)) * L + RTOL * scale
    A, g, Ls, _ = _scaled(th, X, y)
    rnd = weight_rtol(th, X)
    assert Ls == pytest.approx(L, rel=1e-12 + rnd, abs=0)
    np.testing.assert_allclose(Hd / L, A, rtol=0, atol=(1e-9 + rnd) * scale / L)
    np.testing.assert_allclose(gd / L, g, rtol=0, atol=(1e-10 + rnd) * np.linalg.norm(g))


def test_output_bound_is_attained():
    """All tokens equal to x (||x|| = R) and every u_t parallel to x: f = Σ_t ||u_t|| R,
    so |Φ| equals the output bound and ||∇_U Φ||² equals T R² — the constants are sharp."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(D)
    R = float(np.linalg.norm(x))
    X = np.broadcast_to(x, (1, T, D)).copy()
    scales = rng.uniform(0.5, 2.0, (H, T, 1))
    U = scales * x / R
    W = rng.standard_normal((H, D, D))
    th = MHAParams(jnp.asarray(U), jnp.asarray(W))
    phi = float(REFS["phi"](flat(th), jnp.asarray(np.repeat(X, N, 0)))[0])
    assert phi == pytest.approx(float(output_bound(th, R)), rel=1e-13, abs=0)
    J = np.asarray(REFS["jac"](flat(th), jnp.asarray(np.repeat(X, N, 0))))[0].reshape(H, -1)
    gu2 = np.sum(J[:, : T * D] ** 2)
    assert gu2 == pytest.approx(T * R**2, rel=1e-13, abs=0)


def _alternating(T, d, R, seed):
    """Tokens x, −x, x, −x, … with ||x|| = R (T even: their mean is 0)."""
    x = np.random.default_rng(seed).standard_normal(d)
    x *= R / np.linalg.norm(x)
    return np.stack([x if t % 2 == 0 else -x for t in range(T)])


@pytest.mark.parametrize("Tt,d,R", [(2, 2, 1.0), (4, 3, 1.7), (6, 2, 0.6)])
def test_beta3_is_attained_at_uniform_attention_and_alternating_tokens(Tt, d, R):
    """Equality case of β₃ (measured, not recomputed): at U = 0, W = 0 and tokens ±x with
    ||x|| = R, T even. There v_t = 0, so ∂²f/∂W² = 0, and the attention is uniform, so
    M_t = Xᵀ(diag(a_t) − a_t a_tᵀ)X = x xᵀ; the cross block is the rank-one
    (s ⊗ x)(x ⊗ x)ᵀ (s_t = ±1) and ∇²f = [[0, C], [Cᵀ, 0]] has norm ||C|| = √T·R·R² = R³√T
    = β₃(θ_h). The Hessian is jax.hessian of the reference head, its norm numpy's eigvalsh.
    So β₃ with R³√T (or √T) changed is caught here; its U term is not attained (see
    test_beta3_literal_values_with_an_explicit_T)."""
    Hh = 2
    X = _alternating(Tt, d, R, seed=Tt)
    refs = make_refs(Hh, Tt, d)
    th = MHAParams(jnp.zeros((Hh, Tt, d)), jnp.zeros((Hh, d, d)))
    measured = opnorm_sym(refs["head_hess"](jnp.asarray(flat(th)), jnp.asarray(X[None])))[0]   # [H]
    np.testing.assert_allclose(measured, R**3 * math.sqrt(Tt), rtol=1e-12)                    # the derivation
    np.testing.assert_allclose(np.asarray(beta3(th, R)), measured, rtol=1e-12)                # the library
    assert float(kappa_bound(th, R)) == pytest.approx(float(measured.max()), rel=1e-12, abs=0)
    # the same tokens with W ≠ 0 stay within the bound
    th_w = MHAParams(jnp.zeros((Hh, Tt, d)), 0.5 * jnp.ones((Hh, d, d)))
    below = opnorm_sym(refs["head_hess"](jnp.asarray(flat(th_w)), jnp.asarray(X[None])))[0]
    assert np.all(below <= np.asarray(beta3(th_w, R)) * (1 + RTOL))


def test_beta3_literal_values_with_an_explicit_T():
    """β₃, κ, β₂, the smoothness coefficient and the output bound at a hand-computed point, with
    T = 9 passed explicitly (U has 2 rows): R = 2, ||U_1||_{2,1} = 5 (rows (3,4), (0,0)),
    ||U_2||_{2,1} = 3 (rows (1,0), (0,2)), H = 2. By docs/theory.md §6:
    β₃ = R³√T + 2R⁵||U_h||_{2,1} = 8·3 + 64·5 = 344 and 8·3 + 64·3 = 216;
    β₂² = T R² + (R⁶/H) Σ_h ||U_h||²_{2,1} = 36 + 32·34 = 1124; output bound (R/√H)·8 = 8√2.
    The U term of β₃ is not attained by any θ (measured: the excess ||∇²f|| − R³√T stays below
    ~0.77 R⁵||U_h||_{2,1}), so a smaller constant is also a valid bound: only the literal
    values can tell 2R⁵ from, say, 1.5R⁵."""
    U = jnp.asarray([[[3.0, 4.0], [0.0, 0.0]], [[1.0, 0.0], [0.0, 2.0]]])
    th = MHAParams(U, jnp.zeros((2, 2, 2)))
    np.testing.assert_array_equal(np.asarray(l21_norms(U)), [5.0, 3.0])
    np.testing.assert_allclose(np.asarray(beta3(th, 2.0, 9)), [344.0, 216.0], rtol=1e-15)
    assert float(kappa_bound(th, 2.0, 9)) == pytest.approx(344.0, rel=1e-15, abs=0)
    assert float(beta2(th, 2.0, 9)) == pytest.approx(math.sqrt(1124.0), rel=1e-15, abs=0)
    assert float(smoothness_coefficient(th, 2.0, 9)) == pytest.approx(1124.0 + 344.0 / math.sqrt(2), rel=1e-15, abs=0)
    assert float(output_bound(th, 2.0)) == pytest.approx(8.0 * math.sqrt(2), rel=1e-15, abs=0)
    # T defaults to U's token count (2): β₃ = 8√2 + 64·||U_h||, β₂² = 8 + 1088
    np.testing.assert_allclose(np.asarray(beta3(th, 2.0)), 8 * math.sqrt(2) + np.array([320.0, 192.0]), rtol=1e-15)
    assert float(beta2(th, 2.0)) == pytest.approx(math.sqrt(1096.0), rel=1e-15, abs=0)
    assert float(smoothness_coefficient(th, 2.0)) == pytest.approx(
        1096.0 + (8 * math.sqrt(2) + 320.0) / math.sqrt(2), rel=1e-15, abs=0)


BOUNDS = {"output_bound": lambda th, R, T: output_bound(th, R), "beta2": beta2, "beta3": beta3,
          "kappa_bound": kappa_bound}


@pytest.mark.parametrize("R, T, said", [
    (float("nan"), None, "R (the largest token norm) must be a finite number >= 0, got nan"),
    (-1.0, None, "R (the largest token norm) must be a finite number >= 0, got -1.0"),
    ("2", None, "R (the largest token norm) must be a number, got '2'"),
    (np.ones(2), None, "R (the largest token norm) must be a number, got array([1., 1.])"),
    (1.0, 0, "T must be an integer >= 1, got 0"),
    (1.0, 2.5, "T must be an integer >= 1, got 2.5"),
])
@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_a_bad_radius_or_token_count_is_refused_by_name(name, R, T, said):
    """A negative or NaN R gave a negative or NaN κ(θ), marked as a bound; now one line names it."""
    if name == "output_bound" and T is not None:
        return                                       # takes no T
    th = MHAParams(jnp.ones((2, 3, 4)), jnp.zeros((2, 4, 4)))
    with pytest.raises(InputError) as e:
        BOUNDS[name](th, R, T)
    assert str(e.value) == f"{name}: {said}"


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_params_without_finite_readouts_are_refused_by_name(name):
    bad = MHAParams(jnp.ones((2, 3, 4)).at[1, 0, 0].set(jnp.inf), jnp.zeros((2, 4, 4)))
    with pytest.raises(InputError, match=rf"^{name}: params contain non-finite values"):
        BOUNDS[name](bad, 1.0, None)
    with pytest.raises(InputError, match=rf"^{name}: params must have readouts U \[H, T, d\], got dict"):
        BOUNDS[name]({"W": jnp.zeros((2, 4, 4))}, 1.0, None)


def test_a_traced_radius_and_token_count_give_the_eager_numbers():
    """Under jit R and T may be tracers (unchecked; the width constants pass both as arguments):
    the bounds are the eager ones to rounding (XLA fuses the jitted form differently), 0 included."""
    th = MHAParams(jnp.asarray(np.random.default_rng(0).normal(size=(2, 3, 4))), jnp.zeros((2, 4, 4)))
    for R in (0.0, 1.3):
        for name, fn in BOUNDS.items():
            eager = np.asarray(fn(th, R, 3))
            np.testing.assert_allclose(np.asarray(jax.jit(lambda r: fn(th, r, 3))(R)), eager, rtol=1e-14, atol=0)
            np.testing.assert_allclose(np.asarray(jax.jit(lambda r, t: fn(th, r, t))(R, 3)), eager, rtol=1e-14, atol=0)
