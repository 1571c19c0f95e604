"""mhajax.curvature.headnorms: the largest per-sample head Hessian norm, against dense
eigvalsh of every head (the route it replaces, ``operators.per_sample_head_hessian_norms``)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jax
import jax.numpy as jnp

from mhajax.curvature import headnorms as HN
from mhajax.curvature.operators import per_sample_head_hessian_norms
from mhajax.models.base import get_model

_max = jax.jit(HN.max_head_norms, static_argnames="model")
_sample = jax.jit(HN._sample, static_argnums=1)
_pd = jax.jit(HN.positive_definite)


def _problem(H, T, d, n, seed, w_scale):
    from mhajax.bench.timing import problem
    return problem(H, T, d, n, seed=seed, w_scale=w_scale)


@pytest.mark.parametrize("model,H,T,d,w_scale", [("softmax", 16, 6, 8, 0.0), ("softmax", 12, 6, 8, 1.0),
                                                  ("softmax", 5, 8, 4, 1.0),     # 2T² >= p: the p×p route
                                                  ("linear", 8, 4, 6, 1.0), ("qk", 6, 4, 6, 1.0)])
def test_the_largest_norm_per_sample_is_the_dense_one(model, H, T, d, w_scale):
    """max over heads of the dense per-(sample, head) norms, to the stated 2τ; fewer eigensolves
    than heads where the leading block vanishes (softmax, linear: Φ linear in U)."""
    m = get_model(model)
    params = m.init(jax.random.PRNGKey(3), H, T, d, u_scale=1.0, w_scale=w_scale)
    X = jax.random.normal(jax.random.PRNGKey(4), (24, T, d)) / np.sqrt(d)
    got, solved = _max(params, X, model=m)
    want = np.max(np.asarray(per_sample_head_hessian_norms(params, X, m)), axis=1)
    np.testing.assert_allclose(np.asarray(got), want, rtol=4 * HN.TAU + 1e-13, atol=0)
    assert np.all(np.asarray(got) <= want * (1 + 1e-13))       # m̂ is a computed norm: never above the max
    solved = np.asarray(solved)
    assert np.all(solved >= min(HN.K, H)) and np.all(solved <= H)
    if model == "softmax" and H > HN.K:
        assert solved.mean() < H, solved


def _zero_lead(rng, H, a, k, scale):
    E = rng.standard_normal((H, a, k)) * scale[:, None, None]
    F = rng.standard_normal((H, k, k)) * scale[:, None, None]
    F = F + np.swapaxes(F, 1, 2)
    return np.block([[np.zeros((H, a, a)), E], [np.swapaxes(E, 1, 2), F]])


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), H=st.integers(1, 40), ties=st.booleans(), lead=st.booleans())
def test_sample_is_the_max_of_dense_norms_with_ties_and_any_leading_block(seed, H, ties, lead):
    """Synthetic head matrices: with a zero leading block the non-candidates are certified; with
    a nonzero one nothing can be, and every head is solved; identical heads (ties) are solved
    or certified, never mis-ranked."""
    rng = np.random.default_rng(seed)
    scale = np.where(rng.random(H) < 0.5, 1.0, rng.uniform(0.2, 1.0, H))
    M = _zero_lead(rng, H, 5, 7, scale)
    if ties:
        M[: H // 2] = M[0]
    if not lead:
        M[:, 0, 0] = 1e-3
    want = np.max(np.abs(np.linalg.eigvalsh(M)), axis=1).max()
    got, solved = _sample(jnp.asarray(M), 5)
    assert want / (1 + 4 * HN.TAU) - 1e-13 * want <= float(got) <= want * (1 + 1e-13)
    if not lead:
        assert int(solved) == H
    else:
        assert min(HN.K, H) <= int(solved) <= H


def test_positive_definite_against_eigenvalues():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((200, 9, 9))
    A = A @ np.swapaxes(A, 1, 2) + rng.uniform(-3, 3, (200, 1, 1)) * np.eye(9)
    lmin = np.linalg.eigvalsh(A)[:, 0]
    got = np.asarray(_pd(jnp.asarray(A)))
    clear = np.abs(lmin) > 1e-8 * np.abs(np.linalg.eigvalsh(A)).max(axis=1)
    np.testing.assert_array_equal(got[clear], (lmin > 0)[clear])
    assert got.any() and (~got).any()
    assert not bool(_pd(jnp.full((1, 3, 3), jnp.nan))[0])


def test_a_nan_matrix_gives_nan_not_a_number():
    M = _zero_lead(np.random.default_rng(1), 6, 3, 4, np.ones(6))
    M[2, 4, 4] = np.nan
    assert np.isnan(float(_sample(jnp.asarray(M), 3)[0]))
