"""mhajax.runtime.jaxsetup.compile_ahead: a program compiled on a background thread while the
caller goes on (issue 14: the κ-chain analysis compiles during GD).

Truths: the program the plain path compiles from the concrete arguments (outputs equal to the
bit); the caller's context variables; the thread's name; the caller's exception.
"""
import contextvars
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mhajax.bench.timing import problem
from mhajax.errors import InputError
from mhajax.experiments.base import analyse_batch, point_index
from mhajax.runtime.jaxsetup import compile_ahead

_VAR = contextvars.ContextVar("mhajax_test_var", default="unset")


def test_it_compiles_on_the_background_thread_with_the_callers_context():
    seen = {}

    def lower():
        seen.update(thread=threading.current_thread().name, var=_VAR.get())
        return jax.jit(lambda x: 2.0 * x).lower(jax.ShapeDtypeStruct((3,), jnp.float64))

    token = _VAR.set("caller")
    try:
        prog, seconds = compile_ahead(lower).result(timeout=120)
    finally:
        _VAR.reset(token)
    assert seen["thread"].startswith("mhajax-compile") and seen["thread"] != threading.current_thread().name
    assert seen["var"] == "caller"
    assert seconds > 0
    np.testing.assert_array_equal(prog(np.arange(3.0)), [0.0, 2.0, 4.0])


def test_an_error_in_lowering_reaches_the_caller():
    def lower():
        raise InputError("bad size: H = 0")

    with pytest.raises(InputError, match="H = 0"):
        compile_ahead(lower).result(timeout=120)


def test_the_analysis_lowered_on_shapes_is_the_plain_paths_program():
    """What weak-convexity does: the analysis lowered on ``ShapeDtypeStruct`` s of the checkpoints
    and of the data and keys before any of them exists, compiled in the background, gives the
    numbers of the plain call on the concrete arrays, to the bit."""
    params, X, y = problem(2, 3, 4, 8)
    points = 2
    P = jax.tree_util.tree_map(lambda a: np.stack([np.asarray(a), 1.1 * np.asarray(a)]), params)
    keys = jax.random.split(jax.random.PRNGKey(0), points)
    idx = point_index(1, points)
    static = dict(method="auto", links="all", lanczos_steps=8, max_cycles=2, batch_size=None)
    shape = lambda tree: jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), tree)
    args = shape((P, keys, X[None], y[None]))
    ahead = compile_ahead(lambda: analyse_batch.lower(args[0], idx, *args[1:], **static))
    plain = analyse_batch(P, idx, keys, X[None], y[None], **static)
    got = ahead.result(timeout=600)[0](P, idx, keys, X[None], y[None])
    assert set(got) == set(plain)
    for k in plain:
        np.testing.assert_array_equal(np.asarray(got[k]), np.asarray(plain[k]), err_msg=k)
