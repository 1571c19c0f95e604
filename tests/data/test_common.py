"""mhajax.data.common: balanced labels and the token radius R = max_{i,t} ||x_{i,t}||₂, checked
against numpy; a malformed data set is refused in one line naming token_radius."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mhajax.data.common import balanced_labels, token_radius
from mhajax.errors import InputError


def test_token_radius_is_numpys_largest_token_norm_traced_or_not():
    X = jax.random.normal(jax.random.PRNGKey(0), (5, 3, 4))
    want = np.linalg.norm(np.asarray(X), axis=-1).max()
    assert float(token_radius(X)) == pytest.approx(want, rel=1e-15, abs=0)
    assert float(jax.jit(token_radius)(X)) == pytest.approx(want, rel=1e-15, abs=0)   # traced: shapes only
    assert float(token_radius(X[2])) == pytest.approx(np.linalg.norm(np.asarray(X[2]), axis=-1).max(), rel=1e-15, abs=0)


@pytest.mark.parametrize("X, said", [
    (np.full((2, 3, 4), np.nan), "X contains 24 non-finite value(s), first X[0, 0, 0] = nan"),
    (np.ones((2, 3, 4), np.int64), "X must be a floating-point array, got dtype int64"),
    (np.ones((0, 3, 4)), "X must be non-empty, got shape (0, 3, 4)"),
    (np.ones(4), "X must have shape [n, T, d] or [T, d], got shape (4,)"),
    ([[1.0, 2.0]], "X must be an array of shape [n, T, d], got list"),
])
def test_a_malformed_data_set_is_refused_in_one_line(X, said):
    with pytest.raises(InputError) as e:
        token_radius(X)
    assert str(e.value) == f"token_radius: {said}"


def test_balanced_labels_are_a_permutation_of_ceil_half_plus_ones():
    y = np.asarray(balanced_labels(jax.random.PRNGKey(3), 7, jnp.float64))
    assert sorted(y.tolist()) == [-1.0] * 3 + [1.0] * 4
