"""mhajax.linalg: eigensolvers that give NaN for a non-finite matrix, and an underflow-safe norm.

Truth: numpy.linalg.eigvalsh/eigh (an independent LAPACK call), math.hypot (correctly scaled),
``A V = V diag(w)`` and ``VᵀV = I`` checked directly, and the compiled program's text (no
host callback: JAX's persistent cache can store the analysis)."""
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mhajax import linalg


def _sym(rng, *shape):
    A = rng.standard_normal(shape)
    return A + np.swapaxes(A, -1, -2)


def test_eigensolvers_agree_with_numpy_and_give_nan_for_nonfinite():
    rng = np.random.default_rng(0)
    A = _sym(rng, 3, 5, 5)
    A[1, 2, 3] = np.nan
    w = np.asarray(jax.jit(linalg.eigvalsh)(A))
    w2, V = (np.asarray(a) for a in jax.jit(linalg.eigh)(A))
    ref = np.linalg.eigvalsh(A[[0, 2]])
    for got in (w, w2):
        assert np.all(np.isnan(got[1]))
        np.testing.assert_allclose(got[[0, 2]], ref, rtol=0, atol=1e-13 * np.abs(ref).max())
    assert np.all(np.isnan(V[1])) and np.all(np.isfinite(V[[0, 2]]))


@given(st.integers(1, 12), st.integers(0, 2 ** 31 - 1), st.sampled_from([1.0, 1e-150, 1e150]))
def test_eigh_is_an_eigendecomposition(m, seed, scale):
    """``A V = V diag(w)`` to backward-stable accuracy, V orthogonal, w ascending, at scales
    where a careless formula under- or overflows."""
    A = _sym(np.random.default_rng(seed), m, m) * scale
    w, V = (np.asarray(a) for a in linalg.eigh(jnp.asarray(A)))
    nrm = np.linalg.norm(A, 2)
    assert np.all(np.diff(w) >= 0)
    assert np.linalg.norm(A @ V - V * w, 2) <= 64 * m * np.finfo(float).eps * nrm
    assert np.linalg.norm(V.T @ V - np.eye(m), 2) <= 64 * m * np.finfo(float).eps


def test_a_nan_matrix_inside_a_vmapped_batch_gets_nan_only_itself():
    A = _sym(np.random.default_rng(2), 2, 3, 4, 4)
    A[1, 0, 2, 2] = np.inf
    w, V = jax.jit(jax.vmap(lambda a: linalg.eigh(a)))(jnp.asarray(A))
    bad = np.zeros((2, 3), bool)
    bad[1, 0] = True
    assert np.all(np.isnan(np.asarray(w)[bad])) and np.all(np.isnan(np.asarray(V)[bad]))
    np.testing.assert_array_equal(np.asarray(w)[~bad], np.asarray(jnp.linalg.eigvalsh(A[~bad])))


def test_eigvalsh_has_jnp_gradients():
    """d λ_i / dA = v_i v_iᵀ for a simple eigenvalue (first-order perturbation theory)."""
    A = jnp.asarray(_sym(np.random.default_rng(3), 4, 4))
    g = jax.grad(lambda a: linalg.eigvalsh(a)[0])(A)
    v = np.linalg.eigh(np.asarray(A))[1][:, 0]
    np.testing.assert_allclose(np.asarray(g), np.outer(v, v), atol=1e-12)


def test_a_program_with_the_eigensolvers_holds_no_host_callback():
    """The eigensolvers run inside XLA (LAPACK custom calls), so JAX's persistent compilation
    cache can store a program that uses them (it refuses one with a host callback)."""
    A = jnp.asarray(_sym(np.random.default_rng(4), 3, 6, 6))
    text = jax.jit(lambda a: (linalg.eigvalsh(a), linalg.eigh(a)[1])).lower(A).compile().as_text()
    targets = re.findall(r'custom_call_target="([^"]+)"', text)
    assert not [t for t in targets if "callback" in t.lower()], targets
    if jax.default_backend() == "cpu":
        assert any("syevd" in t for t in targets), targets


# --- norm: the underflow/overflow-safe Euclidean norm --------------------------------------------

@pytest.mark.parametrize("scale", [1e-200, 1e-160, 1.0, 1e150, 1e200])
def test_norm_agrees_with_math_hypot_where_the_plain_formula_fails(scale):
    """Truth: math.hypot (correctly scaled, Python >= 3.8). At 1e-200 the plain sqrt(Σx²)
    underflows to 0 and at 1e200 overflows to inf; norm must not."""
    x = np.random.default_rng(0).standard_normal(257) * scale
    want = math.hypot(*x)
    assert float(linalg.norm(jnp.asarray(x))) == pytest.approx(want, rel=1e-14, abs=0)
    X = x.reshape(1, 257).repeat(3, 0) * np.array([[1.0], [2.0], [0.0]])
    got = np.asarray(linalg.norm(jnp.asarray(X), axis=1))
    np.testing.assert_allclose(got, [want, 2 * want, 0.0], rtol=1e-14, atol=0)


def test_norm_of_a_non_finite_vector_is_never_zero():
    """A NaN entry gives NaN and an inf entry inf (a NaN residual once read as 0, i.e. as
    converged); the zero vector gives exactly 0."""
    nan, inf = float("nan"), float("inf")
    cases = {(0.0, 0.0, 0.0): 0.0, (1.0, nan, 2.0): nan, (1.0, -inf, 2.0): inf, (nan, inf, 1.0): nan}
    for v, want in cases.items():
        got = float(linalg.norm(jnp.asarray(v)))
        assert (math.isnan(got) and math.isnan(want)) or got == want, (v, got)
    rows = np.asarray(linalg.norm(jnp.asarray([[3.0, 4.0], [nan, 1.0], [0.0, 0.0], [inf, 0.0]]), axis=1))
    assert rows[0] == 5.0 and math.isnan(rows[1]) and rows[2] == 0.0 and rows[3] == inf
