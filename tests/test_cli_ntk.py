"""End-to-end: ``python -m verify ntk-margin`` and ``python -m verify one-step`` on tiny configs."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from verify.__main__ import main

ROOT = Path(__file__).resolve().parents[1]
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


def test_one_step_end_to_end(tmp_path, capsys):
    out = tmp_path / "os"
    rc = main(["one-step", "--heads", "2", "--lrs", "0.1,10", "--signals", "1", "--zetas", "0.34",
               *TINY, "--start", "zero-signs", "--out", str(out)])
    text = capsys.readouterr().out
    s = json.loads((out / "summary.json").read_text())
    assert rc == (0 if s["passed"] else 1)
    assert "one-step: " in text and "γ̄_attn" in text
    assert len(s["rows"]) == 2 and len(s["cells"]) == 1 and len(s["records"]) == 4
    assert s["meta"]["config"]["start"] == "zero-signs"
    for r in s["records"]:
        if r["gamma_bar_mean"]:
            assert r["ratio_mean"] == pytest.approx(r["gamma_bar_attn"] / r["gamma_bar_mean"])
        lin = max(r["gamma_bar_mean"], r["gamma_bar_flat"])
        if lin > 0 and r["ratio_lin"] is not None:
            assert r["ratio_lin"] == pytest.approx(r["gamma_bar_attn"] / lin)
            assert r["beats_linear"] == (r["ratio_lin"] > 1 + 1e-9)
        # zero start: the NTK at θ₋₁ = 0 is mean pooling
        assert r["gamma_bar_m1"] == pytest.approx(r["gamma_bar_mean"], rel=1e-9, abs=1e-12)
    assert s["passed"] == all(c["holds"] for c in s["cells"])


@pytest.mark.parametrize("cmd,args,needle", [
    ("ntk-margin", ["--heads", "0"], "heads"),
    ("ntk-margin", ["--n", "1"], "n must be"),
    ("ntk-margin", ["--zeta", "1.5"], "zeta"),
    ("ntk-margin", ["--gap-tol", "-1"], "gap_tol"),
    ("ntk-margin", ["--one-step-lr", "nan"], "one_step_lr"),
    ("ntk-margin", ["--dim", "3"], "dim=3"),
    ("ntk-margin", ["--seeds", "x"], "invalid int"),
    ("one-step", ["--lrs", "0.1,abc"], "'abc' is not a number"),
    ("one-step", ["--lrs", "0"], "lrs"),
    ("one-step", ["--zetas", "2"], "zetas"),
    ("one-step", ["--signals", ""], "signals"),
    ("one-step", ["--start", "ones"], "--start"),
    ("one-step", ["--min-ratio", "-2"], "min_ratio"),
    ("one-step", ["--bogus"], "unrecognized"),
])
def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, cmd, args, needle):
    out = tmp_path / "never"
    rc = main([cmd, *args, "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2
    assert needle in err and err.startswith("error:")
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
