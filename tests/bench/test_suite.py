"""``python -m verify.bench``'s issue-14 sections at tiny sizes: the growth table's certified
check and the ARPACK peer (torch double backward + scipy eigsh, a separate process).

Truths: numpy eigvalsh of the assembled Hessian (growth: the enclosure holds it), and the
peer's independent answer (torch autograd + ARPACK, no jax): within its own residual of
the certified enclosure, and within 1e-8 of it. No timing is asserted."""
import importlib.util
import json

import pytest

from mhajax.bench import suite
from mhajax.cli.common import run_main


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
