"""A step size chosen to diverge, on every sweep command: the run ends with exit 1, a
DIVERGED line naming H, seed and step, a summary.json that records the divergence, and no
traceback — the report must cope with the missing numbers. (weak-convexity:
tests/test_resume.py::test_divergence_is_reported_with_exit_1.)"""
import json

import pytest

from verify.__main__ import main

DATA = ["--tokens", "3", "--dim", "6", "--clusters", "2"]
CASES = {
    "convergence": ["--heads", "1", "--seeds", "2", "--steps", "16", "--n", "8", "--n-test", "16",
                    "--resamples", "100", *DATA],
    "generalization": ["--ns", "8,12,16", "--heads", "1", "--seeds", "2", "--n-test", "16",
                       "--resamples", "100", *DATA],
    "heads": ["--ns", "8,12,16", "--heads", "1,2", "--seeds", "2", "--n-test", "16", *DATA],
    "quasi-convexity": ["--heads", "1", "--seeds", "1", "--steps", "8", "--every", "4", "--n", "8", *DATA],
    "variants": ["--models", "softmax", "--heads", "1", "--steps", "4", "--every", "2", "--n", "8", *DATA],
}


@pytest.mark.parametrize("cmd", sorted(CASES))
def test_diverging_step_size_is_reported_not_hidden(cmd, tmp_path, capsys):
    out = tmp_path / cmd
    # the exponential loss at η = 1000 overflows to inf within two steps (e^{-z}, z → −∞)
    code = main([cmd, *CASES[cmd], "--loss", "exponential", "--lr", "1000", "--out", str(out)])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    assert code == 1, captured.out + captured.err
    assert "DIVERGED" in captured.out
    s = json.loads((out / "summary.json").read_text())
    assert s["passed"] is False and s["diverged"]
    d = s["diverged"][0]
    assert "seed" in d and ("heads" in d or "n" in d)  # generalization runs one H over n
