"""Every sweep's GD runs split over all local devices (mhajax.train.train ->
mhajax.sharding.over_runs): a 4-device CPU run of a rate check gives the numbers of a
1-device run. (weak-convexity's own test: tests/runtime/test_resume.py.)"""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mhajax.verdict import from_exit_code

ROOT = Path(__file__).resolve().parents[2]
TINY = {
    "convergence": ["--heads", "1,2", "--seeds", "3", "--steps", "16", "--n", "8", "--tokens", "3",
                    "--dim", "6", "--clusters", "2", "--resamples", "100", "--n-test", "16"],
    "generalization": ["--ns", "8,12,16", "--heads", "2", "--seeds", "3", "--tokens", "3", "--dim", "6",
                       "--clusters", "2", "--resamples", "100", "--n-test", "32"],
}


def _run(cmd, out, devices):
    env = dict(os.environ, PYTHONPATH=str(ROOT), MHAJAX_CACHE_DIR="off",
               XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")
    p = subprocess.run([sys.executable, "-m", "verify", cmd, *TINY[cmd], "--out", str(out), "--quiet"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert from_exit_code(p.returncode) is not None, p.stdout + p.stderr   # a verdict, whichever
    # (tiny sizes may well be INCONCLUSIVE); the numbers are what is compared
    return json.loads((out / "summary.json").read_text())


def _numbers(obj, path=""):
    """Every number in a summary (timings and provenance dropped), keyed by its JSON path."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k in ("meta", "wall_time_s", "timings_s", "timings") or k.endswith("_s"):
                continue
            out.update(_numbers(v, f"{path}/{k}"))
        return out
    if isinstance(obj, list):
        out = {}
        for i, v in enumerate(obj):
            out.update(_numbers(v, f"{path}[{i}]"))
        return out
    return {path: obj}


@pytest.mark.slow
@pytest.mark.parametrize("cmd", sorted(TINY))
def test_four_devices_give_the_numbers_of_one(tmp_path, cmd):
    one = _run(cmd, tmp_path / "one", 1)
    four = _run(cmd, tmp_path / "four", 4)
    assert len(one["meta"]["devices"]) == 1 and len(four["meta"]["devices"]) == 4
    a, b = _numbers(one), _numbers(four)
    assert a.keys() == b.keys()
    worst = 0.0
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, float) and isinstance(y, float):
            assert math.isclose(x, y, rel_tol=1e-10, abs_tol=1e-300), (k, x, y)
            worst = max(worst, abs(x - y) / max(abs(x), abs(y), 1e-300))
        else:
            assert x == y, (k, x, y)
    assert a  # the summaries hold numbers to compare
