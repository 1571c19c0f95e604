"""One validation at every public entry that takes θ, X or y (mhajax.models.base.check_problem):
labels in {0, 1} and a token dimension that does not fit θ end in one line naming the function,
never in a traceback from inside JAX; JAX's float64 switched off is refused."""
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

import mhajax as mh
from mhajax import testing as mt
from mhajax.curvature.slq import slq_histogram
from mhajax.models.base import MHAParams

N, T, D, H = 6, 3, 4, 2


def problem():
    kx, ku, kw = jax.random.split(jax.random.PRNGKey(0), 3)
    X = jax.random.normal(kx, (N, T, D)) / 2
    y = jnp.array([1.0, -1.0] * (N // 2))
    th = MHAParams(jax.random.normal(ku, (H, T, D)), jax.random.normal(kw, (H, D, D)) / D)
    return th, X, y


def _dict_head(theta, X):   # a user's head whose parameters are a dict (no U of shape [H, T, d] to compare)
    return jnp.sum(jnp.tanh(X @ theta["w"]) @ theta["v"])


DICT = mh.HeadModel("dict-head", _dict_head, lambda key, H, T, d, **kw: {
    "w": jax.random.normal(key, (H, d, 3)), "v": jnp.ones((H, 3))})

#: name -> call(θ, X, y); every public function that takes θ, X or y
ENTRIES = {
    "mha": lambda th, X, y, m: mh.mha(th, X, m),
    "empirical_risk": lambda th, X, y, m: mh.empirical_risk(th, X, y, m),
    "train": lambda th, X, y, m: mh.train(th, X, y, 1.0, steps=1, every=1, model=m),
    "hvp": lambda th, X, y, m: mh.hvp(th, X, y, th, m),
    "dense_hessian": lambda th, X, y, m: mh.dense_hessian(th, X, y, m),
    "structured_parts": lambda th, X, y, m: mh.structured_parts(th, X, y, m),
    "assemble_hessian": lambda th, X, y, m: mh.assemble_hessian(th, X, y, m),
    "head_blocks": lambda th, X, y, m: mh.head_blocks(th, X, y, m),
    "per_sample_head_hessian_norms": lambda th, X, y, m: mh.per_sample_head_hessian_norms(th, X, m),
    "lambda_min": lambda th, X, y, m: mh.lambda_min(th, X, y, model=m),
    "hessian_extremes": lambda th, X, y, m: mh.hessian_extremes(th, X, y, model=m),
    "spectral_counts": lambda th, X, y, m: mh.spectral_counts(th, X, y, [0.0], model=m),
    "spectral_histogram": lambda th, X, y, m: mh.spectral_histogram(th, X, y, [-1.0, 0.0, 1.0], model=m),
    "slq_histogram": lambda th, X, y, m: slq_histogram(th, X, y, [-1.0, 0.0, 1.0], model=m),
    "chain": lambda th, X, y, m: mh.chain(th, X, y, model=m),
    "assert_derivatives": lambda th, X, y, m: mt.assert_derivatives(th, X, y, model=m),
    "assert_chain": lambda th, X, y, m: mt.assert_chain(th, X, y, model=m),
    "assert_weak_convexity": lambda th, X, y, m: mt.assert_weak_convexity(th, X, y, kappa=1.0, model=m),
    "assert_self_bounded_gradient": lambda th, X, y, m: mt.assert_self_bounded_gradient(th, X, y, beta2=1.0,
                                                                                        model=m),
    "assert_self_bounded_smoothness": lambda th, X, y, m: mt.assert_self_bounded_smoothness(
        th, X, y, kappa=1.0, beta2=1.0, model=m),
    "assert_head_block_diagonal": lambda th, X, y, m: mt.assert_head_block_diagonal(th, X, y, model=m),
}
NO_LABELS = {"mha", "per_sample_head_hessian_norms"}


def one_line(e: Exception) -> str:
    msg = str(e)
    assert msg and "\n" not in msg, msg
    return msg


@pytest.mark.parametrize("name", sorted(set(ENTRIES) - NO_LABELS))
def test_labels_in_0_1_are_refused_in_one_line(name):
    th, X, y = problem()
    with pytest.raises(mh.InputError) as e:
        ENTRIES[name](th, X, (y + 1) / 2, mh.SOFTMAX)
    assert "labels must be -1 or +1, got y[" in one_line(e.value)


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_a_token_dimension_that_does_not_fit_theta_is_refused_in_one_line(name):
    th, X, y = problem()
    with pytest.raises(mh.InputError) as e:
        ENTRIES[name](th, X[..., :D - 1], y, mh.SOFTMAX)
    msg = one_line(e.value)
    assert f"token dimension {D - 1}" in msg and f"d={D}" in msg, msg


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_a_users_model_that_cannot_evaluate_theta_on_x_is_refused_in_one_line(name):
    th = DICT.init(jax.random.PRNGKey(1), H, T, D)
    _, X, y = problem()
    with pytest.raises(mh.InputError) as e:
        ENTRIES[name](th, X[..., :D - 1], y, DICT)
    msg = one_line(e.value)
    assert "model 'dict-head' cannot evaluate θ" in msg and f"({T}, {D - 1})" in msg, msg


def test_the_refusal_names_the_function():
    th, X, y = problem()
    with pytest.raises(mh.InputError, match=r"^empirical_risk: labels"):
        mh.empirical_risk(th, X, (y + 1) / 2)
    with pytest.raises(mh.InputError, match=r"^train: "):
        mh.train(th, X, (y + 1) / 2, 1.0, steps=1, every=1)


def test_a_batch_of_runs_is_checked_run_by_run():
    th, X, y = problem()
    batch = jax.tree_util.tree_map(lambda a: jnp.stack([a, a]), th)
    Xs, ys = jnp.stack([X, X]), jnp.stack([y, y.at[3].set(0.0)])
    with pytest.raises(mh.InputError, match="labels must be -1 or"):
        mh.train(batch, Xs, ys, 1.0, steps=1, every=1)
    with pytest.raises(mh.InputError, match="runs"):
        mh.train(batch, Xs[:1], ys[:1], 1.0, steps=1, every=1)


def test_a_model_that_returns_no_scalar_is_refused():
    wide = mh.HeadModel("vector-head", lambda t, X: jnp.sum(t.U * X, axis=-1), mh.init_params)
    th, X, y = problem()
    with pytest.raises(mh.InputError, match="must return a scalar"):
        mh.empirical_risk(th, X, y, wide)


def test_float64_switched_off_is_refused_with_how_to_turn_it_on():
    code = ("import numpy as np, mhajax as mh\n"          # numpy arrays: nothing for JAX to compile
            "X, y = np.zeros((8, 3, 6), np.float32), np.ones(8, np.float32)\n"
            "th = mh.MHAParams(np.zeros((2, 3, 6), np.float32), np.zeros((2, 6, 6), np.float32))\n"
            "try:\n    mh.lambda_min(th, X, y)\nexcept mh.InputError as e:\n    print('REFUSED', e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("REFUSED lambda_min: JAX's float64 is off"), r.stdout
    assert "jax.config.update('jax_enable_x64', True)" in r.stdout
