"""Multi-process sharding: two CPU processes joined by ``jax.distributed``
run :func:`mhajax.runtime.sharding.over_runs` over one batch of seeds and agree with one process.

The two processes are the real thing (subprocesses, a coordinator on a free localhost
port, gloo collectives); the 1-process reference runs here, in the test process, through
the same ``compute`` of docs/examples/multihost.py.
"""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _example():
    spec = importlib.util.spec_from_file_location("multihost_example", ROOT / "docs/examples/multihost.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_two_processes_agree_with_one(tmp_path):
    ex = _example()
    seeds, steps = 3, 5  # 3 runs over 2 devices: the padding path is exercised
    res = ex.launch(tmp_path, seeds=seeds, steps=steps, reference=False, timeout=300)
    one = ex.compute(ex.parse(["--seeds", str(seeds), "--steps", str(steps)]))
    p0, p1 = res["p0"], res["p1"]
    assert p0["process_count"] == p1["process_count"] == 2
    assert {p0["process_id"], p1["process_id"]} == {0, 1}
    assert len(p0["devices"]) == 2 and one["process_count"] == 1
    # every process holds the full, identical result (all-gathered)
    for k in ("loss", "U", "W", "seeds"):
        assert p0[k] == p1[k]
    # and it equals the one-process run up to rounding (per-device batch sizes differ, so
    # XLA may pick other kernels; the numbers are otherwise the same computation)
    for k in ("loss", "U", "W"):
        np.testing.assert_allclose(np.asarray(p0[k]), np.asarray(one[k]), rtol=1e-12, atol=1e-14)
    # training moved the parameters, so the agreement is not between two copies of θ₀
    th0 = ex.compute(ex.parse(["--seeds", str(seeds), "--steps", "0"]))
    assert not np.allclose(np.asarray(th0["W"]), np.asarray(one["W"]))
