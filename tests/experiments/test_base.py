"""Shared experiment helpers (mhajax.experiments.base): the host-side point index."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mhajax.experiments.base import point_index, premise_line, step_premise


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("S, C", [(1, 1), (1, 6), (3, 4), (5, 1)])
def test_point_index_is_the_device_repeat_with_its_dtype(S, C, x64):
    """Point b = s·C + c belongs to seed s; same values and dtype as jnp.repeat(jnp.arange(S), C),
    so a program lowered with either has the same signature (and cache key)."""
    before = bool(jax.config.read("jax_enable_x64"))
    jax.config.update("jax_enable_x64", x64)
    try:
        want = jnp.repeat(jnp.arange(S), C)
        got = point_index(S, C)
    finally:
        jax.config.update("jax_enable_x64", before)
    assert want.dtype == (np.int64 if x64 else np.int32)
    assert isinstance(got, np.ndarray) and got.dtype == want.dtype and np.array_equal(got, np.asarray(want))
    assert [int(got[s * C + c]) for s in range(S) for c in range(C)] == [s for s in range(S) for _ in range(C)]



def test_premise_line_when_the_measured_bound_allows_any_step():
    """λ̄_max(θ₀) = 0 (a model whose Hessian vanishes at θ₀): every η is allowed, the ratio to
    the closed form is undefined, and the report line says so instead of failing to format it
    (the relu model's terminal report died here)."""
    p = step_premise(1.0, [0.0], rho0=[678.24])
    assert p["holds"] is True and p["max_lr"] is None and p["ratio"] is None
    line = premise_line(p)
    assert "largest η allowed any" in line and "the measured bound allows any η" in line
    q = step_premise(1.0, [0.5], rho0=[100.0])
    assert "(200x less; informational)" in premise_line(q)
