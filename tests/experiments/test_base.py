"""Shared experiment helpers (mhajax.experiments.base): the host-side point index, and the
shapes of the data and of the init known before either is drawn."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mhajax.experiments.base import (batched_data, batched_data_shapes, batched_init, batched_init_shapes,
                                     point_index)
from mhajax.experiments.configs import DataConfig


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


def _shape(tree):
    return jax.tree_util.tree_map(lambda a: (tuple(a.shape), np.dtype(a.dtype)), tree)


@pytest.mark.parametrize("dataset", ["mixture", "sparse", "npz"])
def test_data_and_init_shapes_are_the_arrays_shapes(dataset, tmp_path):
    """``batched_data_shapes``/``batched_init_shapes`` (what weak-convexity lowers its analysis
    on before drawing anything) against the arrays ``batched_data``/``batched_init`` return; a
    file is read once and its arrays handed back, a generator draws nothing."""
    kw = dict(n=6, tokens=3, dim=4, num_clusters=2)
    if dataset == "npz":
        rng = np.random.default_rng(0)
        np.savez(tmp_path / "d.npz", X=rng.normal(size=(10, 3, 4)), y=np.where(rng.random(10) < 0.5, -1.0, 1.0))
        kw.update(data_path=str(tmp_path / "d.npz"))
    cfg = DataConfig(dataset=dataset, **kw).validate()
    seeds = [0, 3]
    shapes, data = batched_data_shapes(cfg, seeds)
    X, y = batched_data(cfg, seeds)
    assert _shape(shapes) == _shape((X, y)) == (((2, 6, 3, 4), np.dtype(np.float64)), ((2, 6), np.dtype(np.float64)))
    if dataset == "npz":
        assert all(np.array_equal(a, b) for a, b in zip(data, (X, y)))
    else:
        assert data is None and all(isinstance(s, jax.ShapeDtypeStruct) for s in shapes)
    for H in (1, 3):
        assert _shape(batched_init_shapes(cfg, seeds, H)) == _shape(batched_init(cfg, seeds, H))
