"""Check a home-made attention head against the paper's curvature theory (docs/testing.md)."""
import jax.numpy as jnp
import pytest
from hypothesis import given, settings

from mhajax import HeadModel, init_params
from mhajax.testing import assert_chain, assert_head_block_diagonal
from mhajax.testing.strategies import problems


def tanh_head(theta, X):  # my per-head function f(θ_h; X), parameters MHAParams(U, W)
    return jnp.sum(theta.U * (jnp.tanh(X @ theta.W @ X.T) @ X)) / X.shape[0]


MINE = HeadModel("tanh-attention", tanh_head, init_params)  # no closed-form κ, β₂ (yet)


@pytest.mark.usefixtures("x64")
@settings(max_examples=10, deadline=None)
@given(problems(MINE))
def test_my_heads_obey_the_curvature_chain(p):
    assert_head_block_diagonal(p.params, p.X, p.y, model=MINE)  # heads share no parameters
    assert_chain(p.params, p.X, p.y, model=MINE)  # κ_emp <= κ_blk <= κ_mid <= κ_Φ
