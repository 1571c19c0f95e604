"""mhajax.model: Φ, heads, initialization and the per-head flat layout (docs/theory.md §1, §3)."""
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given

from helpers import D, H, N, T, flat, make_refs, problems
from mhajax.models.softmax.bounds import output_bound
from mhajax.data.common import token_radius
from mhajax.models.softmax import SOFTMAX
from mhajax.models.base import (MHAParams, head_outputs, head_slice, mha, num_heads,
                                params_per_head, ravel_heads, unravel_heads)
from mhajax.models.softmax.head import init_params, softmax_head, softmax_init

REFS = make_refs(H, T, D)
phi = jax.jit(mha)
heads_out = jax.jit(head_outputs)


def _scale(th, X):
    """Magnitude of the summands of Φ: the output bound (R/√H) Σ_h ||U_h||_{2,1}."""
    return float(output_bound(th, token_radius(X)))


@given(problems())
def test_mha_matches_independent_reference(case):
    th, X, y, _ = case
    out = np.asarray(phi(th, X))
    ref = np.asarray(REFS["phi"](flat(th), X))
    assert out.shape == (N,)
    # Rounding of a sum of terms bounded by the output bound.
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-13 * _scale(th, X))


@given(problems(regimes=("generic", "large_w")))
def test_head_outputs_shapes_and_ntk_scaling(case):
    th, X, y, _ = case
    f = np.asarray(heads_out(th, X))
    assert f.shape == (N, H)
    assert np.asarray(heads_out(th, X[0])).shape == (H,)
    assert np.asarray(phi(th, X[0])).shape == ()
    np.testing.assert_allclose(np.asarray(phi(th, X)), f.sum(1) / math.sqrt(H), rtol=1e-14,
                               atol=1e-14 * _scale(th, X))
    # each head is the single-head model applied on its own
    for h in range(H):
        fh = np.array([float(softmax_head(head_slice(th, h), X[i])) for i in range(2)])
        np.testing.assert_allclose(fh, f[:2, h], rtol=1e-14, atol=1e-14 * _scale(th, X))


@given(problems(regimes=("generic",)))
def test_duplicating_heads_scales_phi_by_sqrt2(case):
    """NTK scaling: H -> 2H with every head duplicated multiplies Φ by 2/√2 = √2;
    permuting heads leaves Φ unchanged."""
    th, X, y, _ = case
    dup = MHAParams(jnp.concatenate([th.U, th.U]), jnp.concatenate([th.W, th.W]))
    perm = MHAParams(th.U[::-1], th.W[::-1])
    base = np.asarray(phi(th, X))
    tol = 1e-13 * _scale(th, X)
    np.testing.assert_allclose(np.asarray(mha(dup, X)), math.sqrt(2) * base, rtol=0, atol=tol)
    np.testing.assert_allclose(np.asarray(phi(perm, X)), base, rtol=0, atol=tol)


def test_uniform_attention_is_mean_pooling():
    """W = 0: every attention row is uniform, f(θ_h; X) = Σ_t u_tᵀ mean_j x_j."""
    rng = np.random.default_rng(3)
    U = rng.standard_normal((H, T, D))
    X = rng.standard_normal((N, T, D))
    th = MHAParams(jnp.asarray(U), jnp.zeros((H, D, D)))
    expect = np.einsum("htd,id->ih", U, X.mean(1))
    np.testing.assert_allclose(np.asarray(heads_out(th, jnp.asarray(X))), expect, rtol=1e-13, atol=1e-14)


def test_init_params_shapes_scales_and_determinism(key):
    th = init_params(key, 3, 5, 4)
    assert isinstance(th, MHAParams)
    assert th.U.shape == (3, 5, 4) and th.W.shape == (3, 4, 4)
    assert th.U.dtype == jnp.float64 and th.W.dtype == jnp.float64
    assert np.all(np.asarray(th.W) == 0.0)          # default w_scale = 0: uniform attention
    th2 = init_params(key, 3, 5, 4, u_scale=2.0, w_scale=3.0)
    np.testing.assert_array_equal(np.asarray(th2.U), 2.0 * np.asarray(th.U))
    _, kw = jax.random.split(key)
    np.testing.assert_allclose(np.asarray(th2.W),
                               3.0 / 2.0 * np.asarray(jax.random.normal(kw, (3, 4, 4))), rtol=1e-15)
    again = init_params(key, 3, 5, 4)
    np.testing.assert_array_equal(np.asarray(again.U), np.asarray(th.U))
    other = init_params(jax.random.PRNGKey(1), 3, 5, 4)
    assert not np.array_equal(np.asarray(other.U), np.asarray(th.U))
    assert num_heads(th) == 3 and params_per_head(th) == 5 * 4 + 4 * 4
    assert SOFTMAX.init is softmax_init   # unguarded: a model's init runs inside traced code


@given(problems(regimes=("generic",)))
def test_ravel_heads_layout_and_roundtrip(case):
    th, X, y, _ = case
    Z, unravel_head = ravel_heads(th)
    assert Z.shape == (H, T * D + D * D)
    # per head: vec(U_h) then vec(W_h), row-major — the layout the Hessian blocks refer to
    np.testing.assert_array_equal(np.asarray(Z).reshape(-1), flat(th))
    back = unravel_heads(Z, unravel_head)
    chex.assert_trees_all_equal(back, th)
    one = unravel_head(Z[1])
    np.testing.assert_array_equal(np.asarray(one.W), np.asarray(th.W[1]))


H3 = 3
P3 = H3 * (T * D + D * D)


def _phi_flat_lib(z, x):
    Z, unravel_head = ravel_heads(MHAParams(jnp.zeros((H3, T, D)), jnp.zeros((H3, D, D))))
    return mha(unravel_heads(z.reshape(H3, -1), unravel_head), x)


phi_hessian = jax.jit(jax.hessian(_phi_flat_lib))


@given(problems(Hh=H3, regimes=("generic", "large_w", "large_u", "tiny_data")))
def test_per_sample_hessian_of_phi_is_exactly_block_diagonal(case):
    """Heads share no parameters: in the ravel_heads layout, ∇²Φ(θ; X_i) has exactly
    zero (not merely small) blocks between different heads."""
    th, X, y, _ = case
    p = T * D + D * D
    z = jnp.asarray(ravel_heads(th)[0].reshape(-1))
    Hs = np.asarray(phi_hessian(z, X[0])).reshape(H3, p, H3, p)
    for g in range(H3):
        for h in range(H3):
            if g != h:
                assert np.all(Hs[g, :, h, :] == 0.0), (g, h)
    # and the diagonal blocks are not trivially zero (the check can fail)
    assert any(np.abs(Hs[h, :, h, :]).max() > 0 for h in range(H3))


# --- the registry and the model kinds (base.py against its own tests) -------------

def test_model_key_and_get_model():
    from mhajax.errors import InputError
    from mhajax.models.base import CoupledModel, HeadModel, get_model, model_key
    assert model_key(" Two_Layer ") == "two-layer" and model_key("SOFTMAX") == "softmax"
    assert get_model("softmax") is SOFTMAX and get_model(" SoftMax ") is SOFTMAX
    assert get_model(SOFTMAX) is SOFTMAX                       # a model object is returned as it is
    mine = HeadModel("mine", softmax_head, init_params)
    assert get_model(mine) is mine
    coupled = CoupledModel("c", lambda th, x: 0.0, init_params)
    assert get_model(coupled) is coupled
    assert isinstance(get_model("two_layer"), CoupledModel)
    with pytest.raises(InputError) as e:
        get_model("gpt")
    assert str(e.value).startswith("unknown model 'gpt'; choose from softmax, ")
    assert "two-layer" in str(e.value)


def test_register_and_model_names(monkeypatch):
    from mhajax.models import base
    from mhajax.models.base import CoupledModel, HeadModel, is_coupled, model_names, register
    monkeypatch.setattr(base, "_REGISTRY", {})
    a = HeadModel("Head_A", softmax_head, init_params)
    c = CoupledModel("Pair", lambda th, x: 0.0, init_params)
    b = HeadModel("b", softmax_head, init_params)
    assert register(a) is a and register(c) is c and register(b) is b
    assert model_names() == ("head-a", "pair", "b")
    assert model_names(coupled=False) == ("head-a", "b")
    assert model_names(coupled=True) == ("pair",)
    assert is_coupled(c) and not is_coupled(a)
    assert base.get_model("HEAD-A") is a


def test_output_of_both_model_kinds():
    """output() = mha() for a per-head model; a coupled model's phi, per sample for X [n, T, d]."""
    from mhajax.models.base import CoupledModel, output
    rng = np.random.default_rng(9)
    th = MHAParams(jnp.asarray(rng.standard_normal((H, T, D))), jnp.asarray(rng.standard_normal((H, D, D))))
    X = jnp.asarray(rng.standard_normal((N, T, D)))
    np.testing.assert_allclose(np.asarray(output(th, X)), np.asarray(REFS["phi"](flat(th), X)), rtol=1e-12)
    assert np.asarray(output(th, X[0])).shape == ()
    pair = CoupledModel("pair", lambda p, x: jnp.sum(p.U[:, 0] * x[0]) * jnp.sum(p.W), init_params)
    got = np.asarray(output(th, X, pair))
    want = [float(np.sum(np.asarray(th.U)[:, 0] * np.asarray(X)[i, 0]) * np.sum(np.asarray(th.W)))
            for i in range(N)]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert float(output(th, X[2], pair)) == pytest.approx(want[2], rel=1e-12, abs=0)


def test_head_slice_and_params_per_head():
    rng = np.random.default_rng(10)
    th = MHAParams(jnp.asarray(rng.standard_normal((3, T, D))), jnp.asarray(rng.standard_normal((3, D, D))))
    one = head_slice(th, 2)
    np.testing.assert_array_equal(np.asarray(one.U), np.asarray(th.U)[2])
    np.testing.assert_array_equal(np.asarray(head_slice(th).W), np.asarray(th.W)[0])   # default h = 0
    assert params_per_head(th) == T * D + D * D and num_heads(th) == 3
    assert params_per_head({"a": jnp.zeros((3, 2, 5)), "b": jnp.zeros((3,))}) == 10 + 1


def test_mha_and_head_outputs_use_the_model_given():
    """A per-head model other than softmax: f(θ_h; X) = Σ (U_h ⊙ X) (no attention), so
    Φ = H^{-1/2} Σ_h <U_h, X>; and num_heads reads H off a single-leaf pytree."""
    from mhajax.models.base import HeadModel
    lin = HeadModel("lin", lambda th, x: jnp.sum(th.U * x), init_params)
    rng = np.random.default_rng(13)
    U, X = rng.standard_normal((H, T, D)), rng.standard_normal((N, T, D))
    th = MHAParams(jnp.asarray(U), jnp.zeros((H, D, D)))
    want = np.einsum("htd,itd->ih", U, X)
    np.testing.assert_allclose(np.asarray(head_outputs(th, jnp.asarray(X), lin)), want, rtol=1e-13)
    np.testing.assert_allclose(np.asarray(mha(th, jnp.asarray(X), lin)), want.sum(1) / math.sqrt(H), rtol=1e-13)
    assert num_heads({"only": jnp.zeros((5, 2))}) == 5
    from mhajax.models.base import output
    np.testing.assert_allclose(np.asarray(output(th, jnp.asarray(X), lin)), want.sum(1) / math.sqrt(H), rtol=1e-13)
    one = MHAParams(th.U[:1], th.W[:1])                     # H = 1: the head axis has one entry
    assert params_per_head(one) == T * D + D * D and num_heads(one) == 1
    assert params_per_head({"a": np.zeros((1, 2, 5)), "b": np.zeros((1, 3))}) == 13   # NumPy leaves too


@pytest.mark.parametrize("name", ["softmax", "linear", "relu", "qk", "value", "causal", "cls", "two-layer"])
def test_head_size_is_the_parameters_per_head_of_the_models_init(name):
    """p from shapes only (nothing drawn, even at sizes that could not be): the entries per head
    of the model's own ``init``; the masked model adds its scale (its init pads MHAParams only)."""
    from mhajax.models import get_model, masked
    from mhajax.models.base import head_size
    model = get_model(name)
    th = model.init(jax.random.PRNGKey(0), 3, 5, 7)
    assert head_size(name, 5, 7) == head_size(model, 5, 7) == sum(a[0].size for a in jax.tree_util.tree_leaves(th))
    if isinstance(th, MHAParams):
        assert head_size(masked(model), 5, 7) == head_size(model, 5, 7) + 1
    assert head_size(name, 100_000, 100_000) >= 10 ** 10


def test_a_head_model_is_required_only_where_asked():
    """``check_problem(..., heads=True)`` refuses a coupled model in one line naming the caller and
    the model, before any other check; without ``heads`` a coupled model passes; a head model
    passes either way (H returned)."""
    from mhajax.errors import InputError
    from mhajax.models import TWO_LAYER
    from mhajax.models.base import check_problem, require_heads
    th = TWO_LAYER.init(jax.random.PRNGKey(0), 2, 3, 4)
    X, y = jnp.ones((4, 3, 4)), jnp.array([1.0, -1.0, 1.0, -1.0])
    assert check_problem("f", th, X, y, model=TWO_LAYER) == 2
    with pytest.raises(InputError, match=r"^f: model 'two-layer' couples its heads \(no head blocks\); f needs a "
                                         r"head model \(a HeadModel\)$"):
        check_problem("f", th, X[:, :, :2], y, model=TWO_LAYER, heads=True)   # refused before the shape check
    soft = SOFTMAX.init(jax.random.PRNGKey(0), 2, 3, 4)
    assert check_problem("f", soft, X, y, heads=True) == check_problem("f", soft, X, y) == 2
    assert require_heads("f", SOFTMAX) is None
