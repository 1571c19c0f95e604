"""Reliability of sweeps (issue 6): kill/resume, determinism, divergence, config guard."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mhajax.errors import InputError
from mhajax.resume import ProgressStore

ROOT = Path(__file__).resolve().parents[1]
TINY = ["weak-convexity", "--heads", "1,2,3", "--seeds", "2", "--n", "8", "--tokens", "3",
        "--dim", "6", "--clusters", "2", "--steps", "10", "--every", "5", "--quiet"]


CACHE = {}


@pytest.fixture(autouse=True)
def _shared_compile_cache(tmp_path_factory):
    # One XLA compile cache for this module's subprocesses: it changes compile
    # time only (the kill test turns it off so that the run is slow to kill).
    CACHE.setdefault("dir", str(tmp_path_factory.mktemp("xla-cache")))


def _run(args, cache=True, **kw):
    env = dict(os.environ, PYTHONPATH=str(ROOT), MHAJAX_CACHE_DIR=CACHE["dir"] if cache else "off")
    return subprocess.run([sys.executable, "-m", "verify", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, **kw)


def _numbers(path):
    s = json.loads(Path(path).read_text())
    return dict(passed=s["passed"], records=s["records"], by_heads=s["by_heads"])


def test_same_command_same_numbers(tmp_path):
    a, b = _run(TINY + ["--out", str(tmp_path / "a")]), _run(TINY + ["--out", str(tmp_path / "b")])
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert _numbers(tmp_path / "a/summary.json") == _numbers(tmp_path / "b/summary.json")


def test_sigkill_then_resume_equals_uninterrupted(tmp_path):
    ref = _run(TINY + ["--out", str(tmp_path / "ref")], cache=False)
    assert ref.returncode == 0, ref.stderr
    out = tmp_path / "killed"
    env = dict(os.environ, PYTHONPATH=str(ROOT), MHAJAX_CACHE_DIR="off")
    proc = subprocess.Popen([sys.executable, "-m", "verify", *TINY, "--out", str(out)], cwd=ROOT,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first_unit = out / ".progress" / "heads=1.json"
    deadline = time.time() + 240
    while not first_unit.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert first_unit.exists(), "the sweep never saved its first unit"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "summary.json").exists(), "a killed run must not leave a complete-looking summary"
    again = _run(TINY + ["--out", str(out)], cache=False)
    assert again.returncode == 0, again.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert 1 in summary["resumed_heads"]
    assert _numbers(out / "summary.json") == _numbers(tmp_path / "ref/summary.json")


def test_other_config_on_same_out_is_refused_and_fresh_starts_over(tmp_path):
    out = tmp_path / "o"
    assert _run(TINY + ["--out", str(out)]).returncode == 0
    before = (out / "summary.json").read_text()
    other = _run(TINY + ["--out", str(out), "--lr", "0.5"])
    assert other.returncode == 2
    assert "different configuration" in other.stderr and "Traceback" not in other.stderr
    assert (out / "summary.json").read_text() == before  # nothing lost
    fresh = _run(TINY + ["--out", str(out), "--lr", "0.5", "--fresh"])
    assert fresh.returncode == 0, fresh.stderr
    assert json.loads((out / "summary.json").read_text())["meta"]["config"]["lr"] == 0.5


def test_divergence_is_reported_with_exit_1(tmp_path):
    # A step of 1e308 overflows θ to ±inf within a few steps on the default data.
    r = _run(["weak-convexity", "--heads", "1", "--seeds", "1", "--steps", "10", "--every", "5",
              "--lr", "1e308", "--links", "core", "--out", str(tmp_path / "d")])
    assert r.returncode == 1
    assert "DIVERGED" in r.stdout
    s = json.loads((tmp_path / "d/summary.json").read_text())
    assert s["passed"] is False and s["diverged"] and s["diverged"][0]["step"] >= 1
    bad = [x for x in s["records"] if x["diverged"]]
    assert bad and all(x["chain_holds"] is None for x in bad)


def test_progress_store_unit_names_and_roundtrip(tmp_path):
    st = ProgressStore(tmp_path, {"a": 1})
    st.save("heads=4", {"x": [1.5, None]})
    assert st.has("heads=4") and st.load("heads=4") == {"x": [1.5, None]}
    assert st.units() == ["heads=4"]
    with pytest.raises(ValueError):
        st.save("../evil", {})
    with pytest.raises(InputError, match="different configuration"):
        ProgressStore(tmp_path, {"a": 2})
    assert ProgressStore(tmp_path, {"a": 2}, fresh=True).units() == []


def _close(a, b, rtol=1e-10):
    if isinstance(a, dict):
        # Eigen-residuals are rounding noise themselves (~1e-16): compare them
        # against the spectrum's scale (|λ| ~ 0.1-1 here), not relative to themselves.
        return a.keys() == b.keys() and all(
            abs(a[k] - b[k]) <= 1e-13 if k.endswith("_residual") and a[k] is not None and b[k] is not None
            else _close(a[k], b[k], rtol) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_close(x, y, rtol) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        # rounding-level: XLA may pick other kernels for another per-device batch size
        return abs(a - b) <= rtol * max(abs(a), abs(b)) + 1e-300
    return a == b


def test_four_cpu_devices_agree_with_one(tmp_path):
    one = _run(TINY + ["--out", str(tmp_path / "one")])
    env = dict(os.environ, PYTHONPATH=str(ROOT), MHAJAX_CACHE_DIR="off",
               XLA_FLAGS="--xla_force_host_platform_device_count=4")
    # (cache off: programs compiled for 4 devices must not be mixed with 1-device ones)
    four = subprocess.run([sys.executable, "-m", "verify", *TINY, "--out", str(tmp_path / "four")],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    assert one.returncode == 0 and four.returncode == 0, one.stderr + four.stderr
    s4 = json.loads((tmp_path / "four/summary.json").read_text())
    assert len(s4["meta"]["devices"]) == 4
    a, b = _numbers(tmp_path / "one/summary.json"), _numbers(tmp_path / "four/summary.json")
    assert a["passed"] == b["passed"]
    assert [r["all_hold"] for r in a["records"]] == [r["all_hold"] for r in b["records"]]
    assert _close(a, b)
