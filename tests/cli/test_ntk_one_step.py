"""End-to-end: ``python -m verify ntk-margin`` and ``python -m verify one-step`` on tiny configs."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mhajax.cli.verify import main
from mhajax.verdict import Verdict

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


# --- issue 7: --model/--loss/--data take effect; issue 6: resume ---------------------------

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
        assert r["loss0"] == pytest.approx(want, rel=1e-12)
        assert r["loss0"] != pytest.approx(
            float(empirical_risk(p, X[i], y[i], get_model("qk"))), rel=1e-6)  # not logistic


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
        assert r["phi0_max"] == 0.0 and r["loss0"] == pytest.approx(math.log(2), rel=1e-12)
        assert r["gamma_bar"] is not None and math.isfinite(r["gamma_bar"])


def _partial_resume(tmp_path, argv, drop_unit, key):
    """Full run into A; B gets A's progress minus one unit; B's rerun must compute only that
    unit and end with A's numbers, field for field."""
    import shutil
    a, b = tmp_path / "a", tmp_path / "b"
    assert main([*argv, "--out", str(a), "--quiet"]) in (0, 1)
    (b / ".progress").mkdir(parents=True)
    for f in (a / ".progress").iterdir():
        if f.stem != drop_unit:
            shutil.copy(f, b / ".progress" / f.name)
    assert main([*argv, "--out", str(b), "--quiet"]) in (0, 1)
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


def test_one_step_resumes_per_cell_and_fresh_recomputes(tmp_path, capsys):
    argv = ["one-step", "--heads", "1,2", "--lrs", "1,10", "--signals", "1", "--zetas", "0.34", *TINY]
    sa, sb = _partial_resume(tmp_path, argv, "s=1.0_z=0.34_H=2", "resumed_cells")
    assert sb["resumed_cells"] == ["s=1.0_z=0.34_H=1"]
    assert sa["rows"] == sb["rows"] and sa["cells"] == sb["cells"]
    assert main([*argv, "--out", str(tmp_path / "b"), "--quiet", "--fresh"]) in (0, 1)
    assert _summary(tmp_path / "b")["resumed_cells"] == []
    # another config on the same --out is refused, the old summary untouched
    before = (tmp_path / "b" / "summary.json").read_bytes()
    capsys.readouterr()
    assert main([*argv[:-2], "--seeds", "3", "--out", str(tmp_path / "b"), "--quiet"]) == 2
    assert "different configuration" in capsys.readouterr().err
    assert (tmp_path / "b" / "summary.json").read_bytes() == before


def test_one_step_off_the_mixture_is_informational_and_says_what_is_swept(tmp_path, capsys):
    out = tmp_path / "sp"
    rc = main(["one-step", "--heads", "1", "--lrs", "1", "--signals", "1,2", *TINY, "--data", "sparse",
               "--model", "cls", "--out", str(out)])
    text = capsys.readouterr().out
    s = _summary(out)
    assert rc == Verdict.INFORMATIONAL.exit_code and s["passed"] is None and s["judged"] is False
    assert "INFORMATIONAL" in text and "ζ not a knob of --data sparse" in text
    assert [c["signal"] for c in s["cells"]] == [1.0, 2.0] and all(c["zeta"] is None for c in s["cells"])
    assert {r["P"] for r in s["records"]} == {4 + 16}  # cls: u [d] and W [d, d], one head
    for flags, needle in ((["--data", "sparse", "--zetas", "0.5"], "--zetas"),
                          (["--model", "linear", "--start", "zero"], "θ = 0"),
                          (["--model", "relu"], "--w-scale > 0")):
        assert main(["one-step", *TINY, *flags, "--out", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error:") and needle in err and "Traceback" not in err
    assert not (tmp_path / "x" / "summary.json").exists()


def test_one_step_npz_refuses_generator_knobs(tmp_path, capsys):
    import numpy as np
    rng = np.random.default_rng(0)
    f = tmp_path / "d.npz"
    np.savez(f, X=rng.normal(size=(10, 3, 4)), y=np.where(rng.random(10) < 0.5, -1.0, 1.0))
    for flag in ("--signals", "--zetas"):
        assert main(["one-step", *TINY, "--data", "npz", "--data-path", str(f), flag, "1",
                     "--out", str(tmp_path / "o")]) == 2
        assert flag in capsys.readouterr().err
    rc = main(["one-step", "--heads", "1", "--lrs", "1", *TINY, "--data", "npz", "--data-path", str(f),
               "--out", str(tmp_path / "o"), "--quiet"])
    s = _summary(tmp_path / "o")
    assert rc == Verdict.INFORMATIONAL.exit_code and len(s["cells"]) == 1 and s["cells"][0]["signal"] is None


# --- verify all: --fresh passes through, finished checks are kept ------------------------

def test_all_keeps_finished_checks_and_passes_fresh(tmp_path, monkeypatch, capsys):
    """``verify all`` runs each registered check once; a finished one (its summary.json
    unchanged) is kept, a changed one is rerun, and ``--fresh`` reaches every check."""
    from dataclasses import dataclass

    from mhajax.experiments.base import verdict_fields
    from mhajax.experiments.configs import option
    from mhajax.experiments.registry import Check
    calls = []

    @dataclass(frozen=True)
    class FakeConfig:
        seeds: int = option(1, "seeds")

        def validate(self):
            return self

        def to_dict(self):
            return dict(seeds=self.seeds)

    def fake_run(cfg, store=None, progress=None):
        calls.append(store.has("marker"))     # progress kept from an earlier run of this check?
        store.save("marker", {})
        return dict(verdict_fields(Verdict.PASSED, "fake"), seeds=[0], wall_time_s=0.0)

    fake = Check("fake", FakeConfig, fake_run, lambda s: "", lambda s: "fake", lambda s: "", "a claim")
    monkeypatch.setattr("mhajax.experiments.registry.CHECKS", {"fake": fake})
    monkeypatch.setattr("mhajax.cli.verify.CHECKS", {"fake": fake})
    out = str(tmp_path / "all")
    assert main(["all", "--out", out]) == 0 and calls == [False]
    assert main(["all", "--out", out]) == 0 and calls == [False]  # kept, not rerun
    assert "kept" in capsys.readouterr().out
    summary = tmp_path / "all" / "fake" / "summary.json"
    summary.write_text(summary.read_text().replace('"fake"', '"edited"'))  # changed under us: rerun
    assert main(["all", "--out", out]) == 0 and calls == [False, True]
    assert main(["all", "--out", out, "--fresh"]) == 0 and calls == [False, True, False]
    s = json.loads((tmp_path / "all" / "summary.json").read_text())
    assert s["passed"] is True and s["verdict"] == "passed"
