"""End-to-end: ``python -m verify ntk-margin`` and ``python -m verify one-step`` on tiny configs."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mhajax.cli.verify import main
from mhajax.verdict import Verdict

pytestmark = pytest.mark.slow   # whole runs of a check: the slow tier

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--n", "10", "--tokens", "3", "--dim", "4", "--clusters", "2", "--seeds", "2"]


def test_ntk_margin_end_to_end(tmp_path, capsys):
    out = tmp_path / "ntk"
    rc = main(["ntk-margin", "--heads", "1,2", *TINY, "--signal", "1.5", "--out", str(out)])
    text = capsys.readouterr().out
    s = json.loads((out / "summary.json").read_text())
    assert rc == (0 if s["passed"] else 1)
    assert "ntk-margin: " in text and "γ̄" in text and "pass = separable" in text
    assert s["seeds"] == [0, 1] and len(s["records"]) == 4
    assert s["meta"]["config"]["heads"] == [1, 2] and s["meta"]["versions"]["jax"]
    assert s["meta"]["dtype"] == "float64"
    for r in s["records"]:
        assert set(r["checks"]) == {"separable", "gap", "init"}
        assert r["passed"] == all(r["checks"].values())
        if r["separable"]:
            assert r["gamma"] > 0 and 0 < r["gamma_bar"] <= 1
            assert r["gamma_lower"] <= r["gamma"] * (1 + 1e-12)
            assert r["step"] == pytest.approx(r["log_n"] / r["gamma"])
            assert r["loss_linear"] <= r["loss_linear_bound"] * (1 + 1e-12)


TINY_OS = ["--ns", "8,12,16", "--tokens", "3", "--dim", "4", "--clusters", "2", "--seeds", "2",
           "--resamples", "200"]


def without(argv, flag):
    """``argv`` less ``flag`` and its value (a mixture knob is refused with other data)."""
    i = argv.index(flag)
    return argv[:i] + argv[i + 2:]


def test_one_step_end_to_end(tmp_path, capsys):
    """The exit code is the verdict's; summary.json holds, per start, the parts (a)-(c), the
    slopes with CIs, (P) and the linear comparison marked as not a claim."""
    out = tmp_path / "os"
    rc = main(["one-step", "--heads", "2", *TINY_OS, "--out", str(out)])
    text = capsys.readouterr().out
    s = json.loads((out / "summary.json").read_text())
    assert rc == Verdict(s["verdict"]).exit_code
    assert s["verdict"] in {v.value for v in (Verdict.PASSED, Verdict.FAILED, Verdict.INCONCLUSIVE)}
    assert "one-step: " in text and "comparison, not a claim" in text and "excess over (P)" in text
    assert s["ns"] == [8, 12, 16] and s["seeds"] == [0, 1] and s["starts"] == ["zero", "random-u"]
    assert s["lr0"] == {"zero": 10.0, "random-u": 1.0} and s["tolerance"] == -0.1 and s["init_const"] == 1.0
    assert s["judged"] is True and s["noiseless_sweep"] is True and "not a claim" in s["comparison_note"]
    assert s["meta"]["config"]["ns"] == [8, 12, 16] and s["meta"]["dtype"] == "float64"
    assert len(s["records"]) == 2 * 3 * 2  # starts × ns × seeds
    for start, a in s["by_start"].items():
        assert set(a["parts"]) == {"a", "b1", "b2", "c"}
        assert {"noisy", "noiseless", "excess"} <= set(a["slopes"])
        assert np.asarray(a["curves"]["noisy"]).shape == (2, 3)
        assert a["separability"]["total"] == 6 and len(a["comparison"]) == 3
        recs = [r for r in s["records"] if r["start"] == start]
        # (c) recomputed from the records: max|Φ₀| <= log n on every (n, seed)
        failing = sum(r["phi0_max"] > math.log(r["n"]) for r in recs)
        assert a["init"]["failing"] == failing and (a["parts"]["c"]["rule"] == "holds") == (failing == 0)
        for r in recs:
            m = r["noisy"]
            if m["status"] == "separable":
                assert 0 < m["gamma_bar"] <= 1 and m["gamma_bar"] == pytest.approx(m["gamma"] / m["scale"])
        for row in a["comparison"]:
            rs = [r for r in recs if r["n"] == row["n"]]
            ratios = [r["noisy"]["gamma_bar"] / max(r["gamma_bar_mean"], r["gamma_bar_flat"]) for r in rs]
            assert row["ratio_min"] == pytest.approx(min(ratios), rel=1e-12, abs=0)
            assert row["lost"] == sum(x <= 1 + 1e-9 for x in ratios)
    # the comparison never enters the verdict
    assert "linear" not in s["verdict_reason"] and "γ̄_mean" not in s["verdict_reason"]


@pytest.mark.parametrize("cmd,args,needle", [
    ("ntk-margin", ["--heads", "0"], "heads"),
    ("ntk-margin", ["--n", "1"], "n must be"),
    ("ntk-margin", ["--zeta", "1.5"], "zeta"),
    ("ntk-margin", ["--gap-tol", "-1"], "gap_tol"),
    ("ntk-margin", ["--one-step-lr", "nan"], "one_step_lr"),
    ("ntk-margin", ["--dim", "3"], "dim=3"),
    ("ntk-margin", ["--seeds", "x"], "invalid int"),
    ("one-step", ["--ns", "64,128"], "--ns needs at least 3 values, got '64,128'"),
    ("one-step", ["--ns", "64"], "--ns needs at least 3 values, got '64'"),
    ("one-step", ["--ns", "64,64,128"], "--ns must be strictly increasing"),
    ("one-step", ["--ns", "8,abc,16"], "'abc'"),
    ("one-step", ["--starts", "zero,ones"], "--starts: unknown value 'ones'"),
    ("one-step", ["--starts", "zero,zero"], "--starts lists a start twice"),
    ("one-step", ["--lr-zero", "0"], "lr_zero"),
    ("one-step", ["--lr-random", "nan"], "lr_random"),
    ("one-step", ["--seeds", "1"], "seeds must be an integer >= 2"),
    ("one-step", ["--preset", "bogus"], "--preset 'bogus'"),
    ("one-step", ["--lrs", "1"], "unrecognized"),  # the old flags are gone
    ("one-step", ["--bogus"], "unrecognized"),
])
def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, cmd, args, needle):
    out = tmp_path / "never"
    rc = main([cmd, *args, "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2
    assert needle in err and err.startswith("error:")
    if cmd == "one-step":
        assert err.count("\n") == 1  # one line
    assert not out.exists()


def test_out_is_a_file_exits_2(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["one-step", "--out", str(f)]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_module_entry_point_exit_code():
    """The real command line: a bad value exits 2 with a one-line message."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "verify", "one-step", "--heads", "-1"], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert "heads" in p.stderr and "Traceback" not in p.stderr


# --- --model/--loss/--data take effect; resume ---------------------------

def _summary(out):
    return json.loads((Path(out) / "summary.json").read_text())


def test_ntk_margin_uses_the_chosen_model_and_loss(tmp_path, capsys):
    """P follows the model's parameter count and L̂(θ₀) equals an independent
    ``empirical_risk`` with that model and loss on the same seeds' data and init."""
    from mhajax.experiments.configs import DataConfig
    from mhajax.experiments.base import batched_data, batched_init
    from mhajax.losses import empirical_risk, get_loss
    from mhajax.models.base import get_model
    out = tmp_path / "qk"
    rc = main(["ntk-margin", "--heads", "2", *TINY, "--model", "qk", "--loss", "exponential",
               "--out", str(out), "--quiet"])
    assert rc in (0, 1)
    assert "model qk, loss exponential, data mixture" in capsys.readouterr().out
    s = _summary(out)
    assert s["model"] == "qk" and s["meta"]["config"]["data"]["loss"] == "exponential"
    T, d, H = 3, 4, 2
    assert {r["P"] for r in s["records"]} == {H * (T * d + 2 * d * d)}  # U, W_Q, W_K (rank d)
    cfg = DataConfig(n=10, tokens=T, dim=d, num_clusters=2, model="qk", loss="exponential")
    X, y = batched_data(cfg, [0, 1])
    th = batched_init(cfg, [0, 1], H)
    for i, r in enumerate(s["records"]):
        p = type(th)(*(leaf[i] for leaf in th))
        want = float(empirical_risk(p, X[i], y[i], get_model("qk"), get_loss("exponential")))
        assert r["loss0"] == pytest.approx(want, rel=1e-12, abs=0)
        assert r["loss0"] != pytest.approx(
            float(empirical_risk(p, X[i], y[i], get_model("qk"))), rel=1e-6, abs=0)  # not logistic


def test_ntk_margin_dead_point_is_refused_and_linear_is_finite(tmp_path, capsys):
    rc = main(["ntk-margin", "--heads", "1", *TINY, "--model", "relu", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error:") and "relu" in err and "--w-scale" in err
    assert not (tmp_path / "r" / "summary.json").exists()
    # linear at W = 0: Φ ≡ 0 but the W-features are alive -> a finite, defined margin
    rc = main(["ntk-margin", "--heads", "1", *TINY, "--model", "linear", "--out", str(tmp_path / "l"),
               "--quiet"])
    s = _summary(tmp_path / "l")
    assert rc in (0, 1)
    for r in s["records"]:
        assert r["phi0_max"] == 0.0 and r["loss0"] == pytest.approx(math.log(2), rel=1e-12, abs=0)
        assert r["gamma_bar"] is not None and math.isfinite(r["gamma_bar"])


def _partial_resume(tmp_path, argv, drop_unit, key):
    """Full run into A; B gets A's progress minus one unit; B's rerun must compute only that
    unit and end with A's numbers, field for field."""
    import shutil
    a, b = tmp_path / "a", tmp_path / "b"
    assert main([*argv, "--out", str(a), "--quiet"]) in (0, 1, 3)
    (b / ".progress").mkdir(parents=True)
    for f in (a / ".progress").iterdir():
        if f.stem != drop_unit:
            shutil.copy(f, b / ".progress" / f.name)
    assert main([*argv, "--out", str(b), "--quiet"]) in (0, 1, 3)
    sa, sb = _summary(a), _summary(b)
    kept = sb[key]
    assert drop_unit not in map(str, kept) and len(kept) >= 1
    for k in ("records", "passed"):
        assert sa[k] == sb[k]
    return sa, sb


def test_ntk_margin_resumes_per_heads(tmp_path):
    argv = ["ntk-margin", "--heads", "1,2", *TINY]
    sa, sb = _partial_resume(tmp_path, argv, "heads=2", "resumed_heads")
    assert sb["resumed_heads"] == [1] and sa["resumed_heads"] == []
    assert sa["by_heads"] == sb["by_heads"]


def test_one_step_resumes_per_n_and_fresh_recomputes(tmp_path, capsys):
    argv = ["one-step", "--heads", "1", *TINY_OS]
    sa, sb = _partial_resume(tmp_path, argv, "n=16", "resumed_ns")
    assert sb["resumed_ns"] == [8, 12] and sa["resumed_ns"] == []
    assert sa["by_start"] == sb["by_start"]
    assert main([*argv, "--out", str(tmp_path / "b"), "--quiet", "--fresh"]) in (0, 1, 3)
    assert _summary(tmp_path / "b")["resumed_ns"] == []
    # another config on the same --out: its saved progress is not reused, and one line says so
    capsys.readouterr()
    assert main([*argv[:-4], "--seeds", "3", "--resamples", "200", "--out", str(tmp_path / "b"), "--quiet"]) in (0, 1, 3)
    said = [line for line in capsys.readouterr().err.splitlines() if "starting afresh" in line]
    assert len(said) == 1 and "seeds" in said[0], said
    s = _summary(tmp_path / "b")
    assert s["resumed_ns"] == [] and s["meta"]["config"]["seeds"] == 3


def test_one_step_off_the_mixture_is_informational(tmp_path, capsys):
    out = tmp_path / "sp"
    rc = main(["one-step", "--heads", "1", *without(TINY_OS, "--clusters"), "--data", "sparse", "--model", "cls", "--out", str(out)])
    text = capsys.readouterr().out
    s = _summary(out)
    assert rc == Verdict.INFORMATIONAL.exit_code and s["passed"] is None and s["judged"] is False
    assert "INFORMATIONAL" in text and "reported, not judged" in s["scope"]
    assert {r["P"] for r in s["records"]} == {4 + 16}  # cls: u [d] and W [d, d], one head
    for flags, needle in ((["--model", "linear", "--starts", "zero"], "θ = 0"),
                          (["--model", "relu", "--starts", "random-u"], "--w-scale > 0")):
        assert main(["one-step", *TINY_OS, *flags, "--out", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error:") and needle in err and "Traceback" not in err
    assert not (tmp_path / "x" / "summary.json").exists()


def test_one_step_npz_is_informational_without_a_noiseless_sweep(tmp_path):
    rng = np.random.default_rng(0)
    f = tmp_path / "d.npz"
    np.savez(f, X=rng.normal(size=(16, 3, 4)), y=np.where(rng.random(16) < 0.5, -1.0, 1.0))
    rc = main(["one-step", "--heads", "1", *without(TINY_OS, "--clusters"), "--data", "npz", "--data-path", str(f),
               "--out", str(tmp_path / "o"), "--quiet"])
    s = _summary(tmp_path / "o")
    assert rc == Verdict.INFORMATIONAL.exit_code and s["noiseless_sweep"] is False
    for a in s["by_start"].values():
        assert a["curves"]["noiseless"] is None and a["parts"]["b1"]["rule"] == "undefined"


def _tiny_config(name):
    from mhajax.experiments.configs import BootConfig, DataConfig
    from mhajax.experiments.ntk_margin import NTKMarginConfig
    from mhajax.experiments.one_step import OneStepConfig
    if name == "ntk-margin":
        return NTKMarginConfig(heads=(1, 2), seeds=2, data=DataConfig(n=10, tokens=3, dim=4, num_clusters=2,
                                                                      signal=1.5))
    return OneStepConfig(ns=(8, 12, 16), heads=1, seeds=2, boot=BootConfig(resamples=200),
                         data=DataConfig(tokens=3, dim=4, num_clusters=2))


@pytest.mark.parametrize("name", ["ntk-margin", "one-step"])
def test_summary_json_loads_back_to_the_summary_run_returned(tmp_path, name):
    """``CHECKS[name].load`` of the summary.json a run wrote is the typed summary ``run`` returned,
    field for field, and renders the same report, headline and section."""
    from mhajax.cli.common import run_and_save
    from mhajax.experiments.registry import CHECKS
    entry = CHECKS[name]
    summary, path = run_and_save(entry.run, _tiny_config(name), tmp_path / name, command=name)
    loaded = entry.load(json.loads(Path(path).read_text()))
    assert type(loaded) is entry.summary and loaded == summary
    for render in (entry.report, entry.headline, entry.section):
        assert render(loaded) == render(summary)
