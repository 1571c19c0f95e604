"""tools/trace_check.py: the grouped XLA trace of the certified check runs and says what it
measured (a fresh process, so the profiler never runs inside the suite's)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow   # whole runs of a check: the slow tier

ROOT = Path(__file__).resolve().parents[2]


def test_trace_check_prints_the_program_and_its_groups():
    env = dict(os.environ, PYTHONPATH=str(ROOT), MHAJAX_CACHE_DIR="off")
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "trace_check.py"), "--heads", "4", "--calls", "2"],
                          capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    m = re.search(r"H = 4, P = 448: program (\d+) ms per call \(2 calls\)", out)
    assert m and int(m.group(1)) >= 0, out
    groups = dict(re.findall(r"^  (eigh \(head blocks\)|one-off ops|per-count ops|head-Hessian loop \(x\d+\))\s+"
                             r"([0-9.]+) ms$", out, flags=re.M))
    assert "eigh (head blocks)" in groups and "one-off ops" in groups, out
    assert all(float(v) >= 0 for v in groups.values())
    assert "largest one-off ops:" in out
