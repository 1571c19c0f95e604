"""``python -m verify variants`` end to end on a tiny config, its summary.json, the honest
handling of a loss that is not self-bounded, and bad input (exit 2, nothing written)."""
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from mhajax.cli.verify import main

pytestmark = pytest.mark.slow   # whole runs of a check: the slow tier

TINY = ["--heads", "1,2", "--n", "6", "--tokens", "3", "--dim", "4", "--clusters", "2",
        "--steps", "4", "--every", "2"]


def without(argv, flag):
    """``argv`` less ``flag`` and its value (a mixture knob is refused with other data)."""
    i = argv.index(flag)
    return argv[:i] + argv[i + 2:]


def _finite_or_none(obj):
    if isinstance(obj, dict):
        return all(_finite_or_none(v) for v in obj.values())
    if isinstance(obj, list):
        return all(_finite_or_none(v) for v in obj)
    if isinstance(obj, float):
        return math.isfinite(obj)
    return True


def test_end_to_end(tmp_path, capsys):
    out = tmp_path / "v"
    code = main(["variants", "--models", "softmax,linear,two-layer", *TINY, "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    s = json.loads((out / "summary.json").read_text())
    assert s["passed"] is True and s["failures"] == [] and s["diverged"] == []
    assert list(s["by_model"]) == ["softmax", "linear", "two-layer"]
    assert s["checkpoints"] == [0, 2, 4] and s["seeds"] == [0]
    assert len(s["records"]) == 3 * 2 * 3
    meta = s["meta"]
    assert meta["x64"] and meta["dtype"] == "float64" and meta["versions"]["jax"]
    assert meta["config"]["models"] == ["softmax", "linear", "two-layer"]
    assert _finite_or_none(s)
    for name in ("softmax", "linear"):
        m = s["by_model"][name]
        assert m["passed"] is True and isinstance(m["slope_kappa_emp"], float)
        for r in m["by_heads"].values():
            assert r["max_kappa_emp"] <= r["max_kappa_block"] * (1 + 1e-9) + 1e-12
            assert r["max_kappa_phi"] <= r["max_kappa_bound"]
    tl = s["by_model"]["two-layer"]
    assert tl["passed"] is None  # nothing the theory implies to judge: κ_emp is measured only
    for r in tl["by_heads"].values():
        assert r["max_kappa_emp"] is not None and r["max_kappa_block"] is None and r["max_kappa_bound"] is None
    # linear attention: κ(θ) = R³√T exactly, the same for every H and checkpoint
    lin = [r["kappa_bound"] for r in s["records"] if r["model"] == "linear"]
    assert max(lin) == pytest.approx(min(lin), rel=1e-12, abs=0)
    assert "1/√H survives" in text and "slope" in text and "variants: PASSED" in text


def test_squared_hinge_and_sparse_data(tmp_path, capsys):
    """A loss that is not self-bounded: the links it does not imply are reported as 'not
    implied' and never fail the run; data from the sparse-token model."""
    out = tmp_path / "sq"
    code = main(["variants", "--models", "cls", *without(TINY, "--clusters"), "--loss", "squared-hinge", "--data", "sparse",
                 "--k-signal", "1", "--sigma", "0.3", "--out", str(out), "--quiet"])
    capsys.readouterr()
    s = json.loads((out / "summary.json").read_text())
    assert code == (0 if s["passed"] else 1)
    assert s["passed"] is True
    recs = [r for r in s["records"] if not r["diverged"] and r["kappa_emp"] is not None]
    assert recs
    for r in recs:
        assert set(r["not_implied"]) >= {"kappa_mid<=kappa_phi", "weak_convexity", "self_bounded_gradient"}
        assert "kappa_emp<=kappa_block" in r["implied"]


def test_npz_data(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((10, 3, 4))
    y = np.where(X[:, :, 0].mean(1) > 0, 1.0, -1.0)
    np.savez(tmp_path / "d.npz", X=X, y=y)
    out = tmp_path / "npz"
    code = main(["variants", "--models", "relu", *without(TINY, "--clusters"), "--data", "npz", "--data-path",
                 str(tmp_path / "d.npz"), "--out", str(out), "--quiet"])
    text = capsys.readouterr().out
    assert code == 0, text
    s = json.loads((out / "summary.json").read_text())
    assert s["meta"]["config"]["data"]["dataset"] == "npz"


BAD = [
    (["--models", "softmax,gpt"], "unknown value 'gpt'"),
    (["--models", "softmax,softmax"], "lists a model twice"),
    (["--heads", "0"], "heads"),
    (["--loss", "hinge"], "unknown loss 'hinge'"),
    (["--data", "mnist"], "unknown data model 'mnist'"),
    (["--data", "npz"], "--data npz needs --data-path"),
    (["--data-path", "x.npz"], "only used with --data npz"),
    (["--data", "npz", "--data-path", "/nonexistent/x.npz"], "does not exist"),
    (["--dim", "3"], "dim=3"),
    (["--data", "sparse", "--k-signal", "9", "--tokens", "4"], "k (signal positions) must be <= tokens"),
    (["--lr", "nan"], "lr"),
    (["--links", "some"], "--links"),
]


@pytest.mark.parametrize("argv, match", BAD)
def test_bad_input(tmp_path, capsys, argv, match):
    out = tmp_path / "bad"
    code = main(["variants", *argv, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and match in err, err
    assert not (out / "summary.json").exists()


def test_help_lists_the_flags():
    r = subprocess.run([sys.executable, "-m", "verify", "variants", "--help"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0
    for flag in ("--models", "--heads", "--loss", "--data", "--data-path", "--links"):
        assert flag in r.stdout


def _no_timings(obj):
    """Drop wall-clock fields (``*_s``): the only numbers a rerun may change."""
    if isinstance(obj, dict):
        return {k: _no_timings(v) for k, v in obj.items() if not k.endswith("_s")}
    if isinstance(obj, list):
        return [_no_timings(v) for v in obj]
    return obj


def test_interrupted_sweep_resumes_with_identical_numbers(tmp_path, capsys):
    """Each finished (model, H) unit is kept under OUT/.progress: drop the later units (as a
    kill would leave them), rerun the same command, and the summary equals the full run's;
    the units that were kept are loaded, not recomputed; another config starts afresh."""
    out = tmp_path / "v"
    argv = ["variants", "--models", "softmax,relu", *TINY, "--out", str(out), "--quiet"]
    assert main(argv) == 0
    full = json.loads((out / "summary.json").read_text())
    prog = out / ".progress"
    units = sorted(p.name for p in prog.glob("model=*.json"))
    assert units == ["model=relu.heads=1.json", "model=relu.heads=2.json",
                     "model=softmax.heads=1.json", "model=softmax.heads=2.json"]
    for name in units[:2]:
        (prog / name).unlink()
    (out / "summary.json").unlink()
    kept = json.loads((prog / "model=softmax.heads=2.json").read_text())
    was = kept["records"][0]["lambda_min_residual"]
    kept["records"][0]["lambda_min_residual"] = 123.0  # proves the file is loaded, not recomputed
    (prog / "model=softmax.heads=2.json").write_text(json.dumps(kept))
    assert main(argv) == 0
    again = json.loads((out / "summary.json").read_text())
    assert sorted(again["resumed"]) == ["softmax/H=1", "softmax/H=2"]
    marked = [r for r in again["records"] if r.get("lambda_min_residual") == 123.0]
    assert len(marked) == 1
    marked[0]["lambda_min_residual"] = was
    for key in ("records", "by_model", "failures", "diverged", "passed"):
        assert _no_timings(again[key]) == _no_timings(full[key]), key
    capsys.readouterr()
    assert main([*argv[:-1], "--steps", "6"]) == 0          # another config: afresh, in one line
    said = [line for line in capsys.readouterr().err.splitlines() if "starting afresh" in line]
    assert len(said) == 1 and "steps" in said[0], said
    assert json.loads((out / "summary.json").read_text())["resumed"] == []
    assert main([*argv, "--fresh"]) == 0
    assert json.loads((out / "summary.json").read_text())["resumed"] == []
