"""Reliability of sweeps: kill/resume, determinism, divergence, config guard."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import run_as_user

from mhajax.experiments.configs import make
from mhajax.runtime.resume import ProgressStore

ROOT = Path(__file__).resolve().parents[2]
TINY = ["weak-convexity", "--heads", "1,2,3", "--seeds", "2", "--n", "8", "--tokens", "3",
        "--dim", "6", "--clusters", "2", "--steps", "10", "--every", "5", "--quiet"]


CACHE = {}


@pytest.fixture(autouse=True)
def _shared_compile_cache(tmp_path_factory):
    # One XLA compile cache for this module's subprocesses: it changes compile
    # time only (the kill test turns it off so that the run is slow to kill).
    CACHE.setdefault("dir", str(tmp_path_factory.mktemp("xla-cache")))


def _run(args, cache=True, devices=1):
    """``python -m verify ARGS`` from the checkout, as a user runs it (:func:`helpers.run_as_user`:
    a run past 600 s fails the test); ``cache`` False turns the compilation cache off."""
    return run_as_user(["verify", *args], ROOT, CACHE["dir"] if cache else "off", devices=devices)


def _numbers(path):
    s = json.loads(Path(path).read_text())
    return dict(passed=s["passed"], records=s["records"], by_heads=s["by_heads"])


@pytest.mark.slow
def test_same_command_same_numbers(tmp_path):
    a, b = _run(TINY + ["--out", str(tmp_path / "a")]), _run(TINY + ["--out", str(tmp_path / "b")])
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert _numbers(tmp_path / "a/summary.json") == _numbers(tmp_path / "b/summary.json")


@pytest.mark.slow
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


def test_other_config_on_same_out_starts_afresh_and_says_so(tmp_path):
    one = TINY[:TINY.index("--heads") + 1] + ["1"] + TINY[TINY.index("--heads") + 2:]   # one H is enough here
    out = tmp_path / "o"
    assert _run(one + ["--out", str(out)]).returncode == 0
    other = _run(one + ["--out", str(out), "--lr", "0.5"])
    assert other.returncode == 0, other.stderr
    said = [line for line in other.stderr.splitlines() if "starting afresh" in line]
    assert len(said) == 1 and "gd.lr" in said[0] and "Traceback" not in other.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["meta"]["config"]["gd"]["lr"] == 0.5 and s["resumed_heads"] == []
    fresh = _run(one + ["--out", str(out), "--lr", "0.5", "--fresh"])
    assert fresh.returncode == 0, fresh.stderr
    assert "starting afresh" not in fresh.stderr and json.loads((out / "summary.json").read_text())["resumed_heads"] == []


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
    said = []
    assert ProgressStore(tmp_path, {"a": 2}, say=said.append).units() == []      # another key: afresh
    assert len(said) == 1 and "(a)" in said[0] and "starting afresh" in said[0]
    st = ProgressStore(tmp_path, {"a": 2}, say=said.append)
    st.save("heads=1", {})
    assert ProgressStore(tmp_path, {"a": 2}, fresh=True, say=said.append).units() == [] and len(said) == 1


def _close(a, b, rtol=1e-10):
    if isinstance(a, dict):
        # Eigen-residuals are rounding noise themselves (~1e-16): compare them
        # against the spectrum's scale (|λ| ~ 0.1-1 here), not relative to themselves.
        # Likewise the relative width of a certified enclosure (~1e-11, where the bisection
        # stops): compared against the 1e-10 width target, not relative to itself.
        return a.keys() == b.keys() and all(
            abs(a[k] - b[k]) <= 1e-13 if k.endswith("_residual") and a[k] is not None and b[k] is not None
            else abs(a[k] - b[k]) <= 1e-10 if k.endswith("_rel_width") and a[k] is not None and b[k] is not None
            else _close(a[k], b[k], rtol) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_close(x, y, rtol) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        # rounding-level: XLA may pick other kernels for another per-device batch size
        return abs(a - b) <= rtol * max(abs(a), abs(b)) + 1e-300
    return a == b


@pytest.mark.slow
def test_four_cpu_devices_agree_with_one(tmp_path):
    one = _run(TINY + ["--out", str(tmp_path / "one")])
    # (cache off: programs compiled for 4 devices must not be mixed with 1-device ones)
    four = _run(TINY + ["--out", str(tmp_path / "four")], cache=False, devices=4)
    assert one.returncode == 0 and four.returncode == 0, one.stderr + four.stderr
    s4 = json.loads((tmp_path / "four/summary.json").read_text())
    assert len(s4["meta"]["devices"]) == 4
    a, b = _numbers(tmp_path / "one/summary.json"), _numbers(tmp_path / "four/summary.json")
    assert a["passed"] == b["passed"]
    assert [r["all_hold"] for r in a["records"]] == [r["all_hold"] for r in b["records"]]
    assert _close(a, b)


# ---------------------------------------------------------------------------
# mid-trajectory checkpoints: array state in the store, GD in saved segments
# ---------------------------------------------------------------------------

import numpy as np  # noqa: E402

pytestmark = pytest.mark.slow   # whole runs of a check: the slow tier


def test_array_store_roundtrips_bit_for_bit(tmp_path):
    st = ProgressStore(tmp_path, {"a": 1})
    fi = np.finfo(np.float64)
    x = np.array([0.1, -0.0, fi.tiny / 4, fi.max, np.nan, np.inf, -np.inf, 1 / 3])
    arrays = dict(x=x, b=np.array([True, False]), n=np.int64(7), m=np.arange(6.0).reshape(2, 3))
    st.save_arrays("heads=4.seg=10", arrays)
    st.save_arrays("heads=40.seg=10", dict(x=x))
    back = st.load_arrays("heads=4.seg=10")
    assert set(back) == set(arrays)
    for k, v in arrays.items():
        assert back[k].dtype == np.asarray(v).dtype and back[k].shape == np.asarray(v).shape
        assert back[k].tobytes() == np.asarray(v).tobytes()          # every bit, NaN included
    assert not [p for p in st.root.iterdir() if p.name.endswith(".tmp")]
    st.discard_arrays("heads=4.seg=")
    assert not st.has_arrays("heads=4.seg=10") and st.has_arrays("heads=40.seg=10")
    with pytest.raises(ValueError):
        st.save_arrays("../evil", dict(x=x))


def _wc_config(**kw):
    from mhajax.experiments.configs import DataConfig
    from mhajax.experiments.weak_convexity import WeakConvexityConfig
    data = DataConfig(n=8, tokens=3, dim=6, num_clusters=2, w_scale=1.0)
    base = dict(heads=(1,), seeds=2, steps=20, every=5, save_every=10, links="core", data=data)
    return make(WeakConvexityConfig, **{**base, **kw}).validate()


class _Killed(Exception):
    pass


def test_interrupted_mid_trajectory_resumes_from_the_saved_segment(tmp_path):
    """Stop the run right after GD segment 0..10 was saved (the progress callback raises,
    as a kill would): the rerun loads θ_10 from the store, trains 10..20 only, and its
    numbers equal an uninterrupted run's; the segment files are gone once H is done."""
    from mhajax.experiments.weak_convexity import run
    cfg = _wc_config()
    ref = run(cfg)                                       # no store: nothing saved, nothing resumed
    assert ref.resumed_from_step == {} and ref.passed is True

    def stop(note):
        if note == "H=1 step 10/20":
            raise _Killed

    store = ProgressStore(tmp_path, dict(command="weak-convexity", **cfg.to_dict()))
    with pytest.raises(_Killed):
        run(cfg, store=store, progress=stop)
    assert store.array_units() == ["heads=1.seg=10"] and not store.has("heads=1")
    store = ProgressStore(tmp_path, dict(command="weak-convexity", **cfg.to_dict()))
    again = run(cfg, store=store)
    assert again.resumed_from_step == {1: 10} and again.resumed_heads == []
    assert again.records == ref.records and again.by_heads == ref.by_heads
    assert store.array_units() == [] and store.has("heads=1")


def test_segmentation_is_part_of_the_config(tmp_path):
    """Resuming must rerun the very same compiled segments: another --save-every on the
    same --out is not reused, like any other config change."""
    a, b = _wc_config(save_every=10), _wc_config(save_every=5)
    st = ProgressStore(tmp_path, dict(command="weak-convexity", **a.to_dict()))
    st.save("heads=1", {})
    said = []
    assert ProgressStore(tmp_path, dict(command="weak-convexity", **b.to_dict()), say=said.append).units() == []
    assert len(said) == 1 and "save_every" in said[0]
    assert _wc_config(save_every=None).save_every == 500 // 5 * 5   # the default, recorded


SEGMENTED = ["weak-convexity", "--heads", "1", "--seeds", "2", "--n", "8", "--tokens", "3",
             "--dim", "6", "--clusters", "2", "--w-scale", "1", "--steps", "40", "--every", "5",
             "--save-every", "10", "--links", "core", "--quiet"]


@pytest.mark.slow
def test_sigkill_mid_trajectory_then_resume_equals_uninterrupted(tmp_path):
    """SIGKILL once GD segment 0..10 of H = 1 is on disk and before H = 1 is finished: the
    rerun resumes from a saved segment (resumed_from_step >= 10) and its summary equals
    an uninterrupted run's number for number."""
    ref = _run(SEGMENTED + ["--out", str(tmp_path / "ref")], cache=False)
    assert ref.returncode == 0, ref.stderr
    out = tmp_path / "killed"
    env = dict(os.environ, PYTHONPATH=str(ROOT), MHAJAX_CACHE_DIR="off")
    proc = subprocess.Popen([sys.executable, "-m", "verify", *SEGMENTED, "--out", str(out)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first_segment = out / ".progress" / "heads=1.seg=10.npz"
    deadline = time.time() + 240
    while not first_segment.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert first_segment.exists(), "the run never saved its first GD segment"
    assert not (out / ".progress" / "heads=1.json").exists(), "killed too late: H = 1 had finished"
    assert not (out / "summary.json").exists()
    again = _run(SEGMENTED + ["--out", str(out)], cache=False)
    assert again.returncode == 0, again.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resumed_from_step"]["1"] >= 10 and summary["resumed_heads"] == []
    assert _numbers(out / "summary.json") == _numbers(tmp_path / "ref/summary.json")
    assert not list((out / ".progress").glob("*.npz"))

