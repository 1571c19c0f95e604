import jax
import numpy as np

from mhajax import empirical_risk, init_params, tokenized_mixture
from mhajax.curvature import assemble_hessian, dense_hessian


def test_dense_and_structured_hessians_agree(key):
    X, y = tokenized_mixture(key, 8, 4, 6, num_clusters=2)
    th = init_params(jax.random.PRNGKey(1), 2, 4, 6, w_scale=1.0)
    A1, A2 = dense_hessian(th, X, y), assemble_hessian(th, X, y)
    assert np.allclose(A1, A2, atol=1e-13 * np.abs(A1).max())
    assert np.isfinite(float(empirical_risk(th, X, y)))
