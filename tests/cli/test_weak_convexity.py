"""`python -m verify weak-convexity`: bad input (exit 2, one message naming the value, no
traceback, nothing written), and end-to-end runs on a tiny configuration."""
import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from helpers import make_refs
from mhajax.experiments.configs import DataConfig
from mhajax.experiments.base import batched_data, batched_init
from mhajax.cli.verify import main

pytestmark = pytest.mark.slow   # whole runs of a check: the slow tier

REPO = Path(__file__).resolve().parents[2]
TINY = ["--seeds", "1", "--n", "8", "--tokens", "3", "--dim", "6", "--clusters", "2"]


@pytest.fixture(autouse=True)
def no_persistent_cache(monkeypatch):
    # keep the test process hermetic: no XLA cache written under $HOME
    monkeypatch.setenv("MHAJAX_CACHE_DIR", "off")


def run_cli(capsys, *argv):
    rc = main(["weak-convexity", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


BAD = [
    (["--heads", ""], "''"),
    (["--heads", "1,,2"], "'1,,2'"),
    (["--heads", "a"], "'a'"),
    (["--heads", "0"], "got 0"),
    (["--heads", "-1"], "got -1"),
    (["--heads", "1,-2"], "got -2"),
    (["--n", "1"], "n must be an integer >= 2, got 1"),
    (["--n", "0"], "got 0"),
    (["--steps", "-1"], "steps must be an integer >= 0, got -1"),
    (["--every", "0"], "every must be an integer >= 1, got 0"),
    (["--lr", "0"], "lr must be a finite number > 0, got 0.0"),
    (["--lr", "-0.5"], "got -0.5"),
    (["--lr", "nan"], "got nan"),
    (["--lr", "inf"], "got inf"),
    (["--dim", "3", "--clusters", "2"], "dim=3"),
    (["--dim", "5", "--clusters", "4"], "dim=5"),
    (["--method", "eig"], "'eig'"),
    (["--links", "most"], "'most'"),
    (["--zeta", "1.5"], "1.5"),
    (["--seeds", "0"], "seeds"),
    (["--n", "abc"], "'abc'"),
    (["--dtype", "float16"], "'float16'"),
    (["--bogus", "1"], "--bogus"),
    (["--save-every", "7", "--every", "5"], "got 7"),
    (["--save-every", "-5"], "got -5"),
    (["--model", "bogus"], "'bogus'"),
    (["--loss", "hinge"], "'hinge'"),
    (["--data", "images"], "'images'"),
    (["--data", "npz"], "--data-path"),
    (["--model", "two-layer", "--method", "dense"], "--method dense does not apply"),
    (["--model", "two-layer", "--dim", "3"], "dim=3"),
]


@pytest.mark.parametrize("argv, needle", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_exits_2_with_a_message_naming_the_value(capsys, tmp_path, argv, needle):
    out_dir = tmp_path / "never-created"
    rc, out, err = run_cli(capsys, *TINY, *argv, "--out", str(out_dir))
    assert rc == 2
    assert "Traceback" not in err and "Traceback" not in out
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert needle in err
    assert not out_dir.exists()                     # nothing written


def test_out_that_is_a_file(capsys, tmp_path):
    f = tmp_path / "results.txt"
    f.write_text("precious")
    rc, out, err = run_cli(capsys, *TINY, "--heads", "1", "--steps", "0", "--out", str(f))
    assert rc == 2 and "results.txt" in err and "not a directory" in err
    assert "Traceback" not in err
    assert f.read_text() == "precious"


@pytest.mark.parametrize("bad", [["--lr", "-1"], ["--heads", "1,,2"], ["--dim", "2"]])
def test_bad_input_keeps_previous_results(capsys, tmp_path, bad):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    prev = out_dir / "summary.json"
    prev.write_text('{"passed": true, "previous": 1}\n')
    before = prev.read_bytes()
    rc, _, err = run_cli(capsys, *TINY, *bad, "--out", str(out_dir))
    assert rc == 2 and "Traceback" not in err
    assert prev.read_bytes() == before
    assert sorted(os.listdir(out_dir)) == ["summary.json"]


def test_subprocess_bad_input():
    """The real entry point: exit status 2 and a one-line message, no traceback."""
    env = dict(os.environ, MHAJAX_CACHE_DIR="off", PYTHONPATH=str(REPO))
    p = subprocess.run([sys.executable, "-m", "verify", "weak-convexity", "--heads", "0,2"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert "Traceback" not in p.stderr
    assert p.stderr.startswith("error: ") and "got 0" in p.stderr and p.stderr.count("\n") == 1


# ---------------------------------------------------------------------------
# end to end
# ---------------------------------------------------------------------------

RECORD_KEYS = ("heads", "seed", "step", "loss", "lambda_min", "lambda_max", "kappa_emp", "kappa_block",
               "kappa_mid", "kappa_phi", "kappa_bound", "grad_norm", "beta2", "chain_holds")
CHAIN = ("kappa_emp", "kappa_block", "kappa_mid", "kappa_phi", "kappa_bound")


@pytest.fixture(scope="module")
def e2e(tmp_path_factory):
    out = tmp_path_factory.mktemp("wc")
    mp = pytest.MonkeyPatch()
    mp.setenv("MHAJAX_CACHE_DIR", "off")
    try:
        rc = main(["weak-convexity", "--heads", "1,2", *TINY, "--steps", "10", "--every", "5",
                   "--out", str(out), "--quiet"])
    finally:
        mp.undo()
    return rc, json.loads((out / "summary.json").read_text()), out


def test_end_to_end_summary(e2e):
    rc, s, out = e2e
    assert rc == 0
    assert s["passed"] is True
    assert s["checkpoints"] == [0, 5, 10] and s["seeds"] == [0]
    assert len(s["records"]) == 2 * 1 * 3
    assert sorted({r["heads"] for r in s["records"]}) == [1, 2]
    for r in s["records"]:
        for k in RECORD_KEYS:
            assert k in r, k
        assert r["chain_holds"] is True and r["all_hold"] is True and r["diverged"] is False
        assert r["loss"] > 0 and r["lambda_min"] <= r["lambda_max"]
        vals = [r[k] for k in CHAIN]
        assert all(v is not None for v in vals)
        slack = 1e-9 * max(r["check_scale"], max(abs(v) for v in vals))
        assert all(a <= b + slack for a, b in zip(vals, vals[1:]))
        assert r["grad_norm"] <= r["beta2"] * r["loss"] * (1 + 1e-9)
        assert r["lambda_min_block"] <= r["lambda_min"] + 1e-9 * abs(r["lambda_min"])
    by_step = {(r["heads"], r["step"]): r["loss"] for r in s["records"]}
    for H in (1, 2):
        assert by_step[(H, 10)] < by_step[(H, 5)] < by_step[(H, 0)]       # GD makes progress
    meta = s["meta"]
    for k in ("config", "versions", "dtype", "backend", "seeds"):
        assert k in meta
    assert meta["dtype"] == "float64" and meta["backend"] == jax.default_backend()
    assert meta["config"]["heads"] == [1, 2] and meta["config"]["data"]["n"] == 8
    assert meta["versions"]["jax"] == jax.__version__
    assert s["wall_time_s"] > 0
    assert "summary.json" in os.listdir(out)
    assert not [f for f in os.listdir(out) if f.endswith(".tmp")]      # no partial files
    assert "NaN" not in (out / "summary.json").read_text()


def test_end_to_end_first_checkpoint_against_numpy(e2e):
    """The step-0 record for H = 1 is θ_0 on the training set of seed 0: recompute L̂ and
    λ_min(∇²L̂) with the independent reference and numpy."""
    _, s, _ = e2e
    rec = next(r for r in s["records"] if r["heads"] == 1 and r["step"] == 0)
    cfg = DataConfig(n=8, tokens=3, dim=6, num_clusters=2)
    X, y = batched_data(cfg, [0])
    th = batched_init(cfg, [0], 1)
    refs = make_refs(1, 3, 6)
    from helpers import flat
    th0 = jax.tree_util.tree_map(lambda a: a[0], th)
    z = flat(th0)
    L = float(refs["risk"](z, X[0], y[0]))
    ev = np.linalg.eigvalsh(np.asarray(refs["hess"](z, X[0], y[0])))
    assert rec["loss"] == pytest.approx(L, rel=1e-12, abs=0)
    assert rec["lambda_min"] == pytest.approx(ev[0], rel=1e-8, abs=0)
    assert rec["lambda_max"] == pytest.approx(ev[-1], rel=1e-8, abs=0)
    assert rec["kappa_emp"] == pytest.approx(-ev[0] / L, rel=1e-8, abs=0)


def test_dense_and_lanczos_agree(capsys, tmp_path):
    """P = 2·(18 + 36) = 108 > 64 Krylov vectors: Lanczos restarts; its λ_min/λ_max match
    the dense ones to 1e-8 relative at every checkpoint."""
    res = {}
    for method in ("dense", "lanczos"):
        out = tmp_path / method
        rc, _, err = run_cli(capsys, "--heads", "2", *TINY, "--steps", "5", "--every", "5",
                             "--links", "core", "--method", method, "--out", str(out), "--quiet")
        assert rc == 0, err
        s = json.loads((out / "summary.json").read_text())
        assert s["by_heads"]["2"]["method"] == method
        res[method] = s["records"]
    assert len(res["dense"]) == len(res["lanczos"]) == 2
    for d, l in zip(res["dense"], res["lanczos"]):
        assert (d["step"], d["seed"]) == (l["step"], l["seed"])
        assert l["eig_converged"] is True and l["num_matvecs"] > 0
        assert abs(l["lambda_min"] - d["lambda_min"]) <= 1e-8 * abs(d["lambda_min"])
        assert abs(l["lambda_max"] - d["lambda_max"]) <= 1e-8 * abs(d["lambda_max"])
        assert l["lambda_min"] >= d["lambda_min"] - 1e-12 * abs(d["lambda_max"])   # Ritz: upper estimate
        assert d["chain_holds"] is True and l["chain_holds"] is True
