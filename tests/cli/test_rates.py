"""``python -m verify convergence|generalization|heads|quasi-convexity``: end to end on
tiny configs, and bad input (exit 2, a message naming the value, nothing written)."""
import json
import subprocess
import sys

import pytest

from mhajax.verdict import Verdict
from mhajax.cli.verify import main

pytestmark = pytest.mark.slow   # whole runs of a check: the slow tier

DATA = ["--tokens", "4", "--dim", "6", "--clusters", "2"]
TINY = {
    "convergence": ["--heads", "1,2", "--seeds", "2", "--steps", "16", "--fit-points", "5",
                    "--resamples", "200", "--n", "8"] + DATA,
    "generalization": ["--ns", "8,16,32", "--heads", "1", "--seeds", "2", "--n-test", "64",
                       "--resamples", "200"] + DATA,
    "heads": ["--ns", "8,16", "--heads", "1,2", "--seeds", "2", "--n-test", "64"] + DATA,
    "quasi-convexity": ["--heads", "1", "--seeds", "1", "--steps", "6", "--every", "3", "--grid", "4",
                        "--n", "8"] + DATA,
}


@pytest.mark.parametrize("name", list(TINY))
def test_end_to_end(name, tmp_path, capsys):
    out = tmp_path / name
    code = main([name, *TINY[name], "--out", str(out)])
    text = capsys.readouterr().out
    s = json.loads((out / "summary.json").read_text())
    assert code == Verdict(s["verdict"]).exit_code         # the one verdict -> exit code mapping
    assert s["passed"] is {0: True, 1: False}.get(code)      # true only for PASSED, false only FAILED
    meta = s["meta"]
    assert meta["x64"] and meta["dtype"] == "float64" and meta["seeds"] == s["seeds"]
    assert meta["versions"]["jax"] and meta["config"]
    assert f"{name}:" in text and str(out) in text
    if name != "heads":
        assert "rule" in text or "QC holds" in text


BAD = [
    (["generalization", "--ns", "64,,128"], "--ns"),
    (["generalization", "--ns", "64,abc,128"], "abc"),
    (["generalization", "--ns", "128,64,256"], "increasing"),
    (["generalization", "--ns", "1,4,8"], "--ns"),
    (["generalization", "--ns", "8,16"], "at least 3"),
    (["generalization", "--n-test", "1"], "n_test"),
    (["heads", "--heads", "2,x"], "--heads"),
    (["heads", "--heads", "4,2"], "increasing"),
    (["heads", "--regime-c", "nan"], "regime_c"),
    (["convergence", "--steps", "-1"], "steps"),
    (["convergence", "--lr", "0"], "lr"),
    (["convergence", "--lr", "nan"], "lr"),
    (["convergence", "--seeds", "1"], "seeds"),
    (["convergence", "--level", "1.5"], "level"),
    (["convergence", "--dim", "3"], "dim=3"),
    (["convergence", "--n", "1"], "n"),
    (["convergence", "--heads", ""], "--heads"),
    (["quasi-convexity", "--references", "final,bogus"], "bogus"),
    (["quasi-convexity", "--grid", "1"], "grid"),
    (["quasi-convexity", "--every", "0"], "every"),
    (["quasi-convexity", "--steps", "ten"], "ten"),
]


@pytest.mark.parametrize("argv,needle", BAD)
def test_bad_input_exit_2(argv, needle, tmp_path, capsys):
    out = tmp_path / "never"
    code = main([*argv, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert needle in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("name", list(TINY))
def test_out_is_a_file(name, tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("keep")
    assert main([name, "--out", str(f)]) == 2
    assert "not a directory" in capsys.readouterr().err and f.read_text() == "keep"


def test_subprocess_exit_code(tmp_path):
    """The real entry point: a bad value exits 2 with a one-line message."""
    r = subprocess.run([sys.executable, "-m", "verify", "heads", "--ns", "64,-2",
                        "--out", str(tmp_path / "o")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--ns" in r.stderr and "Traceback" not in r.stderr
