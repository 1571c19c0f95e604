"""mhajax.losses: ℓ, ℓ', ℓ'' of the logistic loss, self-boundedness, the empirical risk (docs/theory.md §2)."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from helpers import D, EPS, H, N, T, flat, make_refs, problems, sigmoid_np, softplus_np, weight_rtol
from mhajax.losses import LOGISTIC, empirical_risk, loss_derivatives, margins
from mhajax.models.base import mha

TINY = float(np.finfo(np.float64).tiny)
SUB = 5e-324  # smallest subnormal: the absolute resolution near underflow

value = jax.jit(LOGISTIC.value)
d1 = jax.jit(LOGISTIC.d1)
d2 = jax.jit(LOGISTIC.d2)
grad_value = jax.jit(jax.vmap(jax.grad(LOGISTIC.value)))
grad_d1 = jax.jit(jax.vmap(jax.grad(LOGISTIC.d1)))

# Fixed length 64 so every jitted function compiles once.
margin_arrays = hnp.arrays(np.float64, 64, elements=st.one_of(
    st.floats(-1e4, 1e4, allow_nan=False), st.floats(-60.0, 60.0), st.floats(650.0, 800.0),
    st.floats(-1e-300, 1e-300), st.sampled_from([0.0, -0.0, 36.3, 700.0, 708.0, 709.0, 745.0])))


@given(margin_arrays)
def test_value_and_derivatives_match_independent_formulas(z):
    """ℓ = log(1 + e^{-z}) (numpy logaddexp), ℓ' = −σ(−z), ℓ'' = σ(z)σ(−z) (σ via tanh)."""
    v, g, h = (np.asarray(f(jnp.asarray(z))) for f in (value, d1, d2))
    # Outside the flush-to-zero range of XLA: agreement to a few ulps.
    ref_v = softplus_np(-z)
    ref_g = -sigmoid_np(-z)
    ref_h = sigmoid_np(z) * sigmoid_np(-z)
    big = ref_v > TINY / EPS
    np.testing.assert_allclose(v[big], ref_v[big], rtol=4 * EPS, atol=0)
    # In the subnormal range XLA may flush to 0: absolute error below the smallest normal.
    assert np.all(np.abs(v - ref_v) <= np.maximum(4 * EPS * ref_v, TINY))
    np.testing.assert_allclose(g, ref_g, rtol=4 * EPS, atol=TINY)
    np.testing.assert_allclose(h, ref_h, rtol=8 * EPS, atol=TINY)


@given(margin_arrays)
def test_closed_form_derivatives_equal_autodiff(z):
    zz = jnp.asarray(z)
    g = np.asarray(d1(zz))
    np.testing.assert_allclose(g, np.asarray(grad_value(zz)), rtol=1e-14, atol=2 * TINY)
    # jax's JVP rule for the logistic forms s·(1 − s) with s = σ(−z): 1 − s cancels, so
    # the autodiff value carries an absolute error ~eps·s = eps·|ℓ'| (the closed form does not).
    assert np.all(np.abs(np.asarray(d2(zz)) - np.asarray(grad_d1(zz))) <= 4 * EPS * np.abs(g) + 2 * TINY)


def test_derivatives_match_central_differences():
    z = np.linspace(-8.0, 8.0, 33)
    h = 1e-5
    fd1 = (softplus_np(-(z + h)) - softplus_np(-(z - h))) / (2 * h)
    fd2 = (np.asarray(d1(jnp.asarray(z + h))) - np.asarray(d1(jnp.asarray(z - h)))) / (2 * h)
    # Central-difference error: h²/6·|ℓ'''| (<= 1e-10·...) + eps·|ℓ|/h (<= 2e-11·|ℓ|).
    err1 = h**2 / 6 + EPS * (1 + np.abs(softplus_np(-z))) / h
    assert np.all(np.abs(fd1 - np.asarray(d1(jnp.asarray(z)))) <= 10 * err1)
    assert np.all(np.abs(fd2 - np.asarray(d2(jnp.asarray(z)))) <= 10 * (h**2 / 6 + EPS / h))


@given(margin_arrays)
def test_self_boundedness(z):
    """|ℓ'| <= ℓ and 0 <= ℓ'' <= |ℓ'| (docs/theory.md §2), up to rounding of ℓ (1–2 ulps near z ≈ 36)."""
    v, g, h = (np.asarray(f(jnp.asarray(z))) for f in (value, d1, d2))
    assert np.all(np.isfinite(v)) and np.all(np.isfinite(g)) and np.all(np.isfinite(h))
    assert np.all(v >= 0) and np.all(g <= 0)
    assert np.all(np.abs(g) <= v * (1 + 4 * EPS))
    assert np.all(h >= 0)
    assert np.all(h <= np.abs(g))          # exact: fl(σ(z)·σ(−z)) <= σ(−z) since σ(z) <= 1


def test_self_boundedness_constants_are_tight():
    """|ℓ'|/ℓ -> 1 and ℓ''/|ℓ'| -> 1 as z -> +∞: no constant below 1 would do."""
    z = jnp.asarray([30.0, 200.0])
    v, g, h = value(z), d1(z), d2(z)
    np.testing.assert_allclose(np.abs(g) / v, 1.0, rtol=1e-12)
    np.testing.assert_allclose(h / np.abs(g), 1.0, rtol=1e-12)


def test_no_overflow_for_large_negative_margins():
    z = jnp.asarray([-1e5, -1e300, -800.0])
    np.testing.assert_array_equal(np.asarray(value(z)), [1e5, 1e300, 800.0])
    np.testing.assert_array_equal(np.asarray(d1(z)), [-1.0, -1.0, -1.0])
    np.testing.assert_array_equal(np.asarray(d2(z)), [0.0, 0.0, 0.0])


def test_underflow_is_to_exact_zero_never_nan():
    z = jnp.asarray([746.0, 800.0, 1e4, 1e300])
    for f in (value, d1, d2):
        out = np.asarray(f(z))
        assert np.all(out == 0.0), out
    # Still positive and normal where e^{-z} is a normal float.
    assert float(value(700.0)) > TINY and float(value(700.0)) == pytest.approx(math.exp(-700.0), rel=1e-14, abs=0)


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="documents XLA:CPU flush-to-zero")
def test_spec_underflow_threshold_is_708_not_745_under_xla():
    """ℓ is usually said to underflow to 0 near z ≈ 745 in float64 (docs/theory.md §2.3) — true for IEEE gradual
    underflow (numpy), but XLA flushes subnormals to zero, so in JAX ℓ(z) = 0 already
    for z >= ~708.4 (e^{-z} < smallest normal 2.2e-308)."""
    assert softplus_np(-740.0) > 0                     # numpy: subnormal, not zero
    assert float(value(740.0)) == 0.0                  # JAX: flushed
    assert float(value(709.0)) == 0.0
    assert float(value(708.0)) > TINY


# ---------------------------------------------------------------------------
# empirical risk, margins, per-sample derivatives
# ---------------------------------------------------------------------------

REFS = make_refs(H, T, D)
risk = jax.jit(empirical_risk)
derivs = jax.jit(loss_derivatives)
marg = jax.jit(margins)


@given(problems(regimes=("generic", "large_w", "tiny_data", "large_u", "small_loss")))
def test_empirical_risk_matches_reference(case):
    th, X, y, _ = case
    z = flat(th)
    L = float(risk(th, X, y))
    Lref = float(REFS["risk"](z, X, y))
    # ℓ ~ e^{-m} turns the rounding of the margin into a relative error (weight_rtol)
    rnd = 1e-12 + weight_rtol(th, X)
    assert L == pytest.approx(Lref, rel=rnd, abs=2 * TINY)
    phi = np.asarray(REFS["phi"](z, X))
    np.testing.assert_allclose(np.asarray(marg(th, X, y)), np.asarray(y) * phi,
                               rtol=1e-12, atol=1e-13 * np.abs(phi).max())
    l, g, h = (np.asarray(a) for a in derivs(th, X, y))
    m = np.asarray(y) * np.asarray(mha(th, X))
    np.testing.assert_allclose(l, softplus_np(-m), rtol=rnd, atol=2 * TINY)
    assert np.mean(l) == pytest.approx(L, rel=1e-14, abs=0)
    assert np.all(np.abs(g) <= l * (1 + 4 * EPS)) and np.all(h >= 0) and np.all(h <= np.abs(g))


def test_risk_of_zero_model_is_log2():
    from mhajax.models.base import MHAParams
    rng = np.random.default_rng(0)
    th = MHAParams(jnp.zeros((H, T, D)), jnp.asarray(rng.standard_normal((H, D, D))))
    X = jnp.asarray(rng.standard_normal((N, T, D)))
    y = jnp.asarray(np.where(np.arange(N) % 2 == 0, 1.0, -1.0))
    assert float(risk(th, X, y)) == pytest.approx(math.log(2.0), rel=1e-15, abs=0)


def test_margins_risk_and_derivatives_use_the_model_given():
    """A per-head model other than softmax, f(θ_h; X) = Σ U_h ⊙ X: z_i = y_i H^{-1/2} Σ_h <U_h, X_i>
    (numpy), then the logistic value log(1 + e^{−z}) and its derivatives −σ(−z), σ(z)σ(−z)."""
    from mhajax.models.base import HeadModel, MHAParams
    from mhajax.models.softmax.head import init_params
    lin = HeadModel("lin", lambda th, x: jnp.sum(th.U * x), init_params)
    rng = np.random.default_rng(21)
    U, X = rng.standard_normal((H, T, D)), rng.standard_normal((N, T, D))
    y = np.where(rng.random(N) < 0.5, -1.0, 1.0)
    th = MHAParams(jnp.asarray(U), jnp.zeros((H, D, D)))
    z = y * np.einsum("htd,itd->i", U, X) / math.sqrt(H)
    np.testing.assert_allclose(np.asarray(margins(th, jnp.asarray(X), jnp.asarray(y), lin)), z, rtol=1e-13)
    risk = float(empirical_risk(th, jnp.asarray(X), jnp.asarray(y), lin))
    assert risk == pytest.approx(np.mean(softplus_np(-z)), rel=1e-13, abs=0)
    v, d1, d2 = (np.asarray(a) for a in loss_derivatives(th, jnp.asarray(X), jnp.asarray(y), lin))
    np.testing.assert_allclose(v, softplus_np(-z), rtol=1e-13)
    np.testing.assert_allclose(d1, -sigmoid_np(-z), rtol=1e-13)
    np.testing.assert_allclose(d2, sigmoid_np(z) * sigmoid_np(-z), rtol=1e-13)


def test_losses_keep_float32_margins_float32():
    """value, ℓ' and ℓ'' of float32 margins are float32 (no promotion under x64), with the
    squared hinge's ℓ'' = 2·1[z < 1] exactly."""
    z = jnp.asarray([-1.0, 0.5, 1.0, 3.0], jnp.float32)
    from mhajax.losses import EXPONENTIAL, SQUARED_HINGE
    for loss in (LOGISTIC, EXPONENTIAL, SQUARED_HINGE):
        for f in (loss.value, loss.d1, loss.d2):
            assert f(z).dtype == jnp.float32, (loss.name, f)
    np.testing.assert_array_equal(np.asarray(SQUARED_HINGE.d2(z)), [2.0, 2.0, 0.0, 0.0])
    assert SQUARED_HINGE.d2(jnp.asarray([0.5, 1.5])).dtype == jnp.float64


def test_unregistered_loss_knows_nothing():
    from mhajax.losses import Loss, self_bound
    mine = Loss("mine", LOGISTIC.value, LOGISTIC.d1, LOGISTIC.d2)
    sb = self_bound(mine)
    assert (sb.c1, sb.c2, sb.convex) == (None, None, False) and sb.convex is False
    assert sb.note == "loss 'mine' is not registered: no constants known"
