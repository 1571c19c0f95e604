"""``python -m verify.bench``'s default sections at tiny sizes: the growth table's certified
check and the ARPACK peer (torch double backward + scipy eigsh, a separate process).

Truths: numpy eigvalsh of the assembled Hessian (growth: the enclosure holds it), and the
peer's independent answer (torch autograd + ARPACK, no jax): within its own residual of
the certified enclosure, and within 1e-8 of it. No timing is asserted."""
import importlib.util
import json

import pytest

from mhajax.bench import suite
from mhajax.cli.common import run_main


@pytest.mark.slow
def test_growth_section_certifies_and_holds_dense(tmp_path, capsys):
    out = tmp_path / "b"
    assert run_main(suite.main, ["--sections", "growth", "--heads", "2,8", "--points", "2", "--repeat", "1",
                                 "--out", str(out)]) == 0
    res = json.loads((out / "bench.json").read_text())
    rows = res["growth"]["rows"]
    assert [r["heads"] for r in rows] == [2, 8]
    for r in rows:
        assert r["all_certified"] and r["max_rel_width"] <= 1e-10
        for p in r["points"]:
            assert p["contains_dense"] is True and p["lambda_min_lo"] <= p["dense_lambda_min"] + 1e-12
    assert rows[1]["growth_median_s"] > 0 and res["growth"]["targets"]["growth_met"] is None   # no H=64,256
    assert "holds dense" in capsys.readouterr().out


def test_arpack_peer_lands_inside_the_enclosure(tmp_path):
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (the ARPACK peer needs it)")
    out = tmp_path / "b"
    assert run_main(suite.main, ["--sections", "arpack", "--arpack-heads", "2", "--repeat", "1",
                                 "--out", str(out)]) == 0
    row, = json.loads((out / "bench.json").read_text())["arpack"]["rows"]
    assert row["peer_returncode"] == 0 and row["peer_hvps"] > 0
    # the peer's Ritz value is within its true residual ||Av − λv|| of an eigenvalue (Bauer–Fike):
    # with which="SA" that is λ_min, so it lies in the certified enclosure widened by it
    lam, res = row["peer"]["SA"]["eigenvalue"], row["peer"]["SA"]["residual"]
    lo, hi = row["enclosure"]
    assert lo - res <= lam <= hi + res, (lo, lam, hi, res)
    assert row["agreement"] <= 1e-8


def test_unknown_section_is_refused_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "b"
    assert run_main(suite.main, ["--sections", "growth,speed", "--out", str(out)]) == 2
    assert "--sections" in capsys.readouterr().err
    assert not out.exists()


def test_start_section_ratios_from_the_processes_it_ran(monkeypatch, tmp_path):
    """The start section's arithmetic, with every process replaced by a fake of known time:
    cold/warm ratios = peer / (cold, best warm); every process caches bytecode (as a default
    Python does) even where this environment switched that off, and every jax run shares one
    compilation cache."""
    seconds = {"cold": 6.0, "warm0": 3.0, "warm1": 2.5, "warm_after_peer": 4.0, "peer": 60.0}
    ran, cache_dir, bytecode = [], {}, []

    def fake(cmd, env=None, timeout=None):
        if "--out" in cmd:
            name = cmd[cmd.index("--out") + 1].rsplit("/", 1)[-1]
            cache_dir[name] = (env or {}).get("MHAJAX_CACHE_DIR")
        bytecode.append((env or {}).get("PYTHONDONTWRITEBYTECODE"))
        key = "peer" if any("peer_torch" in c for c in cmd) else cmd[cmd.index("--out") + 1].rsplit("/", 1)[-1]
        ran.append(key)
        tail = json.dumps({"max_kappa_emp": {"16": 2.0}}) if key == "peer" else ""
        return dict(seconds=seconds[key], cpu_s=seconds[key] / 2, returncode=0, stdout_tail=tail, stderr_tail="")

    monkeypatch.setattr(suite, "time_process", fake)
    monkeypatch.setattr(suite, "_torch_wanted", lambda mode: True)
    monkeypatch.setattr(suite, "_peer_npz", lambda path, *a, **k: path)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    args = suite.build_parser().parse_args(["--sections", "start", "--warm-runs", "2"])
    res = suite.start_section(args)
    assert ran == ["cold", "warm0", "warm1", "peer", "warm_after_peer"]
    assert bytecode == [None] * 5
    assert cache_dir["cold"] == cache_dir["warm0"] == cache_dir["warm1"] == cache_dir["warm_after_peer"]
    assert res["warm_best_s"] == 2.5
    assert res["ratio_cold"] == pytest.approx(60.0 / 6.0, rel=1e-15, abs=0)
    assert res["ratio_warm"] == pytest.approx(60.0 / 2.5, rel=1e-15, abs=0)
    assert res["ratio_warm_cpu"] == pytest.approx(30.0 / 1.25, rel=1e-15, abs=0)
    text = "\n".join(suite.report_targets({"start": res}))
    assert "cold 10x (target >= 8x), warm 24x" in text


@pytest.mark.slow
def test_width_section_times_the_three_calls_and_their_growth(tmp_path):
    """The width section at tiny sizes: every one of the 200 counts exact, the histogram's N₋
    decided, ratios to λmin from the same run, and the growth per 4x H (2 -> 8); no timing is
    asserted, only the arithmetic on the times measured."""
    out = tmp_path / "b"
    assert run_main(suite.main, ["--sections", "width", "--width-heads", "2,8", "--repeat", "1",
                                 "--out", str(out)]) == 0
    w = json.loads((out / "bench.json").read_text())["width"]
    a, b = w["rows"]
    assert (a["heads"], b["heads"]) == (2, 8) and a["P"] == 224
    for r in (a, b):
        assert r["counts_exact"] == r["counts"] == 200 and r["neg"][0] == r["neg"][1]
        assert r["lambda_min_enclosure"][0] <= r["lambda_min_enclosure"][1] < 0
        assert r["ratio_to_lambda_min"]["histogram_40"] == r["best_s"]["histogram_40"] / r["best_s"]["lambda_min"]
    assert b["growth"]["counts_200"] == b["best_s"]["counts_200"] / a["best_s"]["counts_200"]
    assert w["targets"]["ratio_met"] == (b["ratio_to_lambda_min"]["histogram_40"] <= 3.0)


@pytest.mark.slow
def test_split_section_compares_one_and_four_devices_record_for_record(tmp_path):
    out = tmp_path / "b"
    assert run_main(suite.main, ["--sections", "split", "--split-heads", "8", "--devices", "4",
                                 "--out", str(out)]) == 0
    s = json.loads((out / "bench.json").read_text())["split"]
    assert s["devices_1"]["returncode"] == 0 and s["devices_4"]["returncode"] == 0
    assert s["devices_1"]["devices"] == 1 and s["devices_4"]["devices"] == 4
    assert s["identical_at_theta0"] is True and s["counts_equal_after_gd"] is True
    assert 0 <= s["max_rel_diff_after_gd"] <= 1e-10 and s["speedup_census"] > 0   # GD's rule (test_sharding)
