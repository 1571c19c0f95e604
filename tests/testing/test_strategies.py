"""mhajax.testing.strategies: shapes from a small set, float64 arrays, deterministic
draws, and each regime delivering what it claims (docs/theory.md §1, §2, §9)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from mhajax.models.softmax import SOFTMAX
from mhajax.models.base import HeadModel, mha
from mhajax.models.softmax.head import init_params
from mhajax.losses import empirical_risk
from mhajax.testing import float64, loss_defined, x64_enabled
from mhajax.testing import strategies as mst
from mhajax.testing._x64 import global_x64

FAST = settings(max_examples=15, deadline=None)
SHAPES = ((1, 3, 4), (2, 3, 4))
risk = jax.jit(empirical_risk)


def _is_f64(a):
    return isinstance(a, jax.Array) and a.dtype == jnp.float64


@FAST
@given(mst.problems(shapes=SHAPES, regimes=mst.ALL_REGIMES))
def test_problems_shapes_dtypes_and_labels(p):
    n, T, d = p.X.shape
    H = p.params.U.shape[0]
    assert (H, T, d) in SHAPES and n in mst.SAMPLE_SIZES
    assert p.params.U.shape == (H, T, d) and p.params.W.shape == (H, d, d)
    for a in (p.params.U, p.params.W, p.X, p.y):
        assert _is_f64(a) and bool(jnp.all(jnp.isfinite(a)))
    assert set(np.unique(np.asarray(p.y))) <= {-1.0, 1.0} and p.y.shape == (n,)
    assert p.regime in mst.ALL_REGIMES and p.regime in repr(p)


@FAST
@given(mst.problems(shapes=SHAPES, regimes=("large_w", "uniform_attention", "saturated")))
def test_parameter_regimes(p):
    W = np.asarray(p.params.W)
    if p.regime == "uniform_attention":
        assert np.all(W == 0)
    elif p.regime == "large_w":
        assert np.abs(W).max() <= 20.0 and np.abs(W).max() >= 2.5  # entries up to ~20
    else:  # saturated: nearly one-hot attention rows
        S = jnp.einsum("nta,hab,njb->nhtj", p.X, p.params.W, p.X)
        assert float(jnp.mean(jnp.max(jax.nn.softmax(S, axis=-1), axis=-1))) > 0.8


@FAST
@given(mst.problems(shapes=SHAPES, regimes=("near_underflow", "underflow")))
def test_margin_regimes(p):
    z = np.asarray(p.y * mha(p.params, p.X))
    L = float(risk(p.params, p.X, p.y))
    lo, hi = mst.NEAR_UNDERFLOW_MARGIN if p.regime == "near_underflow" else mst.UNDERFLOW_MARGIN
    assert lo * (1 - 1e-6) <= z.min() <= hi * (1 + 1e-6)
    if p.regime == "near_underflow":   # tiny but still defined: the ratios are meaningful
        assert 0 < L < 1e-250 and loss_defined(L)
    else:                              # undefined: every ratio over L̂ is reported as such
        assert not loss_defined(L)


@FAST
@given(st.integers(1, 9).flatmap(lambda n: st.tuples(st.just(n), mst.labels(n, balanced=True))))
def test_balanced_labels(arg):
    n, y = arg
    assert _is_f64(y) and y.shape == (n,)
    assert float(jnp.sum(y)) == n % 2


@FAST
@given(mst.tokenized_mixtures(6, 3, 5))
def test_mixture_draws(data):
    X, y = data
    assert _is_f64(X) and X.shape == (6, 3, 5) and float(jnp.sum(y)) == 0


@pytest.mark.parametrize("antipodal", [False, True])
def test_mixture_arrays_follow_spec_section_6(antipodal):
    """σ = 0: relevant tokens equal μ_y, the others some ν_k = e_{2+k}."""
    X, y = mst.mixture_arrays(3, 8, 5, 6, zeta=0.4, num_clusters=3, signal=2.0, sigma=0.0,
                              antipodal=antipodal)
    mu_pos = 2.0 * np.eye(6)[0]
    mu_neg = -mu_pos if antipodal else 2.0 * np.eye(6)[1]
    nus = np.eye(6)[2:5]
    for Xi, yi in zip(X, y):
        mu = mu_pos if yi > 0 else mu_neg
        rel = np.all(Xi == mu, axis=1)
        assert rel.sum() == 2  # m = round(ζ T) = 2 relevant positions
        assert all(any(np.all(x == nu) for nu in nus) for x in Xi[~rel])
    assert sorted(y) == [-1.0] * 4 + [1.0] * 4


def test_draws_are_deterministic():
    def run():
        seen = []

        @settings(max_examples=5, deadline=None, database=None, derandomize=True)
        @given(mst.problems(shapes=SHAPES))
        def collect(p):
            seen.append((p.regime, np.asarray(p.params.U).tobytes(), np.asarray(p.X).tobytes()))
        collect()
        return seen
    assert run() == run()


def _dict_init(key, heads, tokens, dim):
    k1, k2 = jax.random.split(key)
    return {"U": jax.random.normal(k1, (heads, tokens, dim)),
            "Q": jax.random.normal(k2, (heads, dim))}


def _dict_head(th, X):
    return jnp.sum(th["U"] * (jax.nn.softmax(X @ th["Q"])[:, None] * X))


DICT_MODEL = HeadModel("dict-head", _dict_head, _dict_init)


@FAST
@given(mst.problems(DICT_MODEL, shapes=((2, 3, 4),)))
def test_generic_pytree_models(p):
    assert set(p.params) == {"U", "Q"}
    assert p.params["U"].shape == (2, 3, 4) and p.params["Q"].shape == (2, 4)
    assert all(_is_f64(a) for a in p.params.values())
    if p.regime == "near_underflow":
        z = np.asarray(p.y * mha(p.params, p.X, DICT_MODEL))
        assert z.min() >= mst.NEAR_UNDERFLOW_MARGIN[0] * (1 - 1e-6)


def _square_head(th, X):  # not linear in U: the margin regimes cannot rescale it
    return jnp.sum(th.U * (X.mean(0) @ th.W)) ** 2


def test_bad_arguments_are_reported():
    X, _ = mst.mixture_arrays(0, 6, 3, 4, num_clusters=2)
    X = jnp.asarray(X)
    th = init_params(jax.random.PRNGKey(0), 2, 3, 4, w_scale=1.0)
    with pytest.raises(InvalidArgument, match="not linear"):
        mst.push_margins(th, X, HeadModel("square", _square_head, init_params), 650.0)
    with pytest.raises(InvalidArgument, match="readout leaf 'V'"):
        mst.push_margins(th, X, SOFTMAX, 650.0, readout="V")
    with pytest.raises(InvalidArgument, match="regimes"):
        find(mst.problems(regimes=("huge",)), lambda _: True)
    with pytest.raises(InvalidArgument, match="shape"):
        mst.shapes([(2, 3)])


def test_float64_is_required_and_switchable():
    with global_x64(False):
        assert not x64_enabled()
        with pytest.raises(InvalidArgument, match="x64 fixture"):
            find(mst.labels(4), lambda _: True)
        with float64():
            assert x64_enabled() and jnp.zeros(()).dtype == jnp.float64
        assert not x64_enabled()
    assert x64_enabled()
