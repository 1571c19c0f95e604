"""Splitting the curvature analysis over devices (:func:`mhajax.runtime.sharding.over_blocks`):
the decomposition's head blocks, the counts' partial sums and the head norms' samples go to 4
CPU devices, and the results are those of 1 device bit for bit (docs/theory.md §3.5)."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def _run(tmp_path, devices: int) -> dict:
    out = tmp_path / f"d{devices}.npz"
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    subprocess.run([sys.executable, os.path.join(HERE, "_split_worker.py"), str(out)], env=env, check=True,
                   timeout=600)
    return dict(np.load(out))


@pytest.mark.slow
def test_four_devices_give_the_counts_and_enclosures_of_one(tmp_path):
    one, four = _run(tmp_path, 1), _run(tmp_path, 4)
    assert int(one["devices"]) == 1 and int(four["devices"]) == 4
    for k in ("lam", "Kt", "min_lo", "min_hi", "max_lo", "max_hi", "iters", "lo", "hi", "reason", "err", "norms",
              "solved"):
        np.testing.assert_array_equal(four[k], one[k], err_msg=k)
    assert np.all(one["lo"] == one["hi"])                       # the thresholds were counted exactly
    # δ(t), the reported window, is replicated scalar arithmetic: the same to rounding
    np.testing.assert_allclose(four["delta"], one["delta"], rtol=4e-16, atol=0)
