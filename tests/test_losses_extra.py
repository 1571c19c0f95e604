"""The exponential and squared-hinge losses (mhajax.losses), their stated self-bounded
constants, the loss registry, and how the κ chain is judged for a loss that is not
self-bounded (mhajax.applicability)."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from mhajax.models.two_layer import TWO_LAYER
from mhajax.analysis.applicability import judge, requirements
from mhajax.analysis.chain import chain_raw, finalize
from mhajax.errors import InputError
from mhajax.losses import (EXPONENTIAL, LOGISTIC, LOSSES, SELF_BOUNDS, SQUARED_HINGE, Loss,
                           get_loss, self_bound)
from mhajax.models.softmax import SOFTMAX
from mhajax.models.base import MHAParams, mha

EPS = float(np.finfo(np.float64).eps)
TINY = float(np.finfo(np.float64).tiny)

# one fixed length: every jitted function compiles once
finite_z = hnp.arrays(np.float64, 32, elements=st.one_of(
    st.floats(-700.0, 700.0, allow_nan=False), st.floats(-3.0, 3.0),
    st.sampled_from([0.0, -0.0, 0.999999, 1.000001, 2.0, -1.0])))


def _grad(fn):
    return jax.jit(jax.vmap(jax.grad(fn)))


EXP = {k: jax.jit(getattr(EXPONENTIAL, k)) for k in ("value", "d1", "d2")}
SQH = {k: jax.jit(getattr(SQUARED_HINGE, k)) for k in ("value", "d1", "d2")}
EXP_G1, EXP_G2 = _grad(EXPONENTIAL.value), _grad(EXPONENTIAL.d1)
SQH_G1, SQH_G2 = _grad(SQUARED_HINGE.value), _grad(SQUARED_HINGE.d1)


@given(finite_z)
def test_exponential_derivatives_equal_autodiff_and_constants(z):
    zz = jnp.asarray(z)
    v, g, h = (np.asarray(EXP[k](zz)) for k in ("value", "d1", "d2"))
    np.testing.assert_allclose(v, np.exp(-z), rtol=4 * EPS, atol=TINY)
    np.testing.assert_allclose(g, np.asarray(EXP_G1(zz)), rtol=4 * EPS, atol=TINY)
    np.testing.assert_allclose(h, np.asarray(EXP_G2(zz)), rtol=4 * EPS, atol=TINY)
    # stated constants: |ℓ'| = ℓ and ℓ'' = ℓ, exactly
    assert np.array_equal(np.abs(g), v) and np.array_equal(h, v)
    assert self_bound(EXPONENTIAL).c1 == 1.0 and self_bound(EXPONENTIAL).c2 == 1.0


@given(finite_z)
def test_squared_hinge_derivatives_equal_autodiff_away_from_the_kink(z):
    zz = jnp.asarray(z)
    v, g, h = (np.asarray(SQH[k](zz)) for k in ("value", "d1", "d2"))
    ref = np.maximum(1.0 - z, 0.0) ** 2
    np.testing.assert_allclose(v, ref, rtol=4 * EPS, atol=0)
    np.testing.assert_allclose(g, np.asarray(SQH_G1(zz)), rtol=4 * EPS, atol=0)
    off = z != 1.0  # ℓ'' does not exist at the kink z = 1
    np.testing.assert_array_equal(h[off], np.asarray(SQH_G2(zz))[off])
    # stated constants: |ℓ'| = 2√ℓ and 0 <= ℓ'' <= 2; convex
    np.testing.assert_allclose(np.abs(g), 2 * np.sqrt(v), rtol=4 * EPS, atol=0)
    assert np.all((h >= 0) & (h <= 2))


def test_squared_hinge_kink_and_no_linear_self_bound():
    """At z = 1 ℓ'' jumps (2 -> 0; autodiff splits the tie and says 1), and |ℓ'|/ℓ = 2/(1−z)
    exceeds every constant c as z -> 1⁻: the paper's self-boundedness |ℓ'| <= cℓ is absent."""
    one = jnp.asarray([1.0])
    assert float(SQH["d2"](one)[0]) == 0.0 and float(SQH_G2(one)[0]) == 1.0
    assert float(SQH["d2"](jnp.asarray([1.0 - 1e-12]))[0]) == 2.0
    for eps in (1e-1, 1e-3, 1e-6):
        z = jnp.asarray([1.0 - eps])
        ratio = float(jnp.abs(SQH["d1"](z))[0] / SQH["value"](z)[0])
        assert ratio == pytest.approx(2.0 / eps, rel=1e-6, abs=0)
        ratio2 = float(SQH["d2"](z)[0] / SQH["value"](z)[0])
        assert ratio2 == pytest.approx(2.0 / eps**2, rel=1e-6, abs=0)
    sb = self_bound(SQUARED_HINGE)
    assert sb.c1 is None and sb.c2 is None and sb.convex


def test_exponential_overflow_and_underflow_are_as_documented():
    z = jnp.asarray([-710.0, -709.0, 708.3, 709.0])
    v = np.asarray(EXP["value"](z))
    assert math.isinf(v[0]) and math.isfinite(v[1]) and v[2] > 0
    assert 0.0 <= v[3] < TINY  # flushed to 0 by XLA on CPU (or subnormal elsewhere)


def test_registry():
    assert set(LOSSES) == set(SELF_BOUNDS) == {"logistic", "exponential", "squared_hinge"}
    assert get_loss("logistic") is LOGISTIC
    assert get_loss("Exponential") is EXPONENTIAL
    assert get_loss("squared-hinge") is get_loss("squared_hinge") is SQUARED_HINGE
    with pytest.raises(InputError, match="unknown loss 'hinge'.*logistic, exponential, squared_hinge"):
        get_loss("hinge")
    mine = Loss("logistic", LOGISTIC.value, LOGISTIC.d1, LOGISTIC.d2)  # same name, not registered
    assert self_bound(mine).c1 is None and not self_bound(mine).convex
    assert self_bound(LOGISTIC).c1 == 1.0


# ---------------------------------------------------------------------------
# The chain, judged honestly per loss
# ---------------------------------------------------------------------------

def _problem(scale, seed=0):
    """A softmax problem whose labels are sign Φ and whose smallest margin is ``scale``."""
    rng = np.random.default_rng(seed)
    H, T, d, n = 2, 3, 4, 6
    U = rng.standard_normal((H, T, d))
    W = rng.standard_normal((H, d, d))
    X = jnp.asarray(rng.standard_normal((n, T, d)))
    th = MHAParams(jnp.asarray(U), jnp.asarray(W))
    phi = np.asarray(mha(th, X))
    y = jnp.asarray(np.sign(phi))
    c = scale / np.min(np.abs(phi))
    return MHAParams(th.U * c, th.W), X, y


_CHAIN = {}


def _rec(loss, params, X, y):
    fn = _CHAIN.setdefault(loss, jax.jit(lambda p, X, y: chain_raw(p, X, y, jax.random.PRNGKey(0),
                                                                    model=SOFTMAX, loss=loss)))
    return finalize(fn(params, X, y), 2)


@pytest.mark.slow
def test_squared_hinge_breaks_the_self_bounded_link_and_it_is_reported_not_implied():
    """Margins just below 1: |ℓ'|/ℓ = 2/(1 − z) is huge, so κ_mid > κ_Φ — finalize says the
    link failed; judge() files it under 'not implied' and does not fail the run."""
    params, X, y = _problem(0.999)
    rec = _rec(SQUARED_HINGE, params, X, y)
    assert rec.links["kappa_mid<=kappa_phi"] is False
    assert rec.kappa_mid > 10 * rec.kappa_phi
    j = judge({**rec.links, **rec.checks}, SOFTMAX, SQUARED_HINGE)
    assert "kappa_mid<=kappa_phi" in j.not_implied and j.not_implied["kappa_mid<=kappa_phi"] is False
    assert j.implied["kappa_emp<=kappa_block"] and j.implied["kappa_block<=kappa_mid"]
    assert j.implied["kappa_phi<=kappa_bound"]
    assert "weak_convexity" in j.not_implied and "self_bounded_gradient" in j.not_implied
    assert j.passed is True and j.failed == []
    # with the logistic loss the same link is implied and holds
    rec_l = _rec(LOGISTIC, params, X, y)
    jl = judge({**rec_l.links, **rec_l.checks}, SOFTMAX, LOGISTIC)
    assert jl.not_implied == {} and jl.passed is True


def test_squared_hinge_at_zero_loss_is_undefined_not_passed():
    params, X, y = _problem(1.5)  # every margin >= 1.5: L̂ = 0 exactly
    rec = _rec(SQUARED_HINGE, params, X, y)
    assert rec.loss == 0.0 and rec.kappa_emp is None and rec.all_hold is None
    j = judge({**rec.links, **rec.checks}, SOFTMAX, SQUARED_HINGE)
    # the ratio links are undefined (neither pass nor fail); the loss-free κ_Φ <= κ(θ) is judged
    assert j.implied["kappa_phi<=kappa_bound"] is True
    assert all(v is None for k, v in j.implied.items() if k != "kappa_phi<=kappa_bound")
    assert j.passed is True


@pytest.mark.slow
@pytest.mark.parametrize("scale", [0.5, 5.0, 40.0])
def test_exponential_loss_implies_the_whole_chain_and_it_holds(scale):
    params, X, y = _problem(scale, seed=1)
    rec = _rec(EXPONENTIAL, params, X, y)
    j = judge({**rec.links, **rec.checks}, SOFTMAX, EXPONENTIAL)
    assert j.not_implied == {}
    assert j.passed is True, rec.links
    # |ℓ'| = ℓ: κ_mid is a loss-weighted average of per-sample norms, <= κ_Φ
    assert rec.kappa_mid <= rec.kappa_phi * (1 + 1e-9)


def test_requirements_table():
    r = requirements(SOFTMAX, SQUARED_HINGE)
    assert r["kappa_emp<=kappa_block"][0] and r["kappa_block<=kappa_mid"][0]
    assert not r["kappa_mid<=kappa_phi"][0] and "|ℓ'| <= ℓ" in r["kappa_mid<=kappa_phi"][1]
    assert not r["self_bounded_smoothness"][0]
    coupled = requirements(TWO_LAYER, LOGISTIC)
    assert not coupled["kappa_emp<=kappa_block"][0] and "coupled" in coupled["kappa_emp<=kappa_block"][1]
    nok = requirements(SOFTMAX._replace(kappa=None, beta2=None), LOGISTIC)
    assert not nok["kappa_phi<=kappa_bound"][0] and not nok["self_bounded_gradient"][0]
