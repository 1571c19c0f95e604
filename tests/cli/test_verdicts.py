"""The verdict rules end to end: two runs that would print PASSED while resting on almost
nothing, and a rate check run with a step size beyond its premise."""
import pytest
import json

from mhajax.cli.verify import main

pytestmark = pytest.mark.slow   # whole runs of a check: the slow tier

DATA = ["--n", "8", "--tokens", "4", "--dim", "6", "--clusters", "2"]


def _run(capsys, tmp_path, argv):
    out = tmp_path / "o"
    capsys.readouterr()
    rc = main([*argv, "--out", str(out), "--quiet"])
    text = capsys.readouterr().out
    return rc, text, json.loads((out / "summary.json").read_text())


def test_an_lr_1e8_weak_convexity_run_is_inconclusive(capsys, tmp_path):
    """L̂ underflows to 0 after the first step: 1 of 11 checkpoints judged."""
    rc, text, s = _run(capsys, tmp_path, ["weak-convexity", "--heads", "4", "--seeds", "1", "--steps", "200",
                                          "--every", "20", "--lr", "1e8"])
    assert rc == 3 and "PASSED" not in text and "INCONCLUSIVE" in text
    assert s["verdict"] == "inconclusive" and s["passed"] is None
    assert "1 of 11 checkpoints judged" in s["verdict_reason"] and "underflowed" in s["verdict_reason"]
    prem = s["by_heads"]["4"]["premise"]
    assert prem["holds"] is False and prem["lambda_max_upper"][0] > 0      # measured, informational here


def test_two_layer_variants_is_informational(capsys, tmp_path):
    rc, text, s = _run(capsys, tmp_path, ["variants", "--models", "two-layer", "--heads", "1", "--steps", "2",
                                          "--every", "1", "--lanczos-steps", "4", "--max-cycles", "1", *DATA])
    assert rc == 5 and "PASSED" not in text and "INFORMATIONAL" in text
    assert s["verdict"] == "informational" and s["judged"] == 0


def test_convergence_beyond_the_step_premise_is_premise_violated(capsys, tmp_path):
    rc, text, s = _run(capsys, tmp_path, ["convergence", "--heads", "1", "--seeds", "2", "--steps", "16",
                                          "--fit-points", "5", "--resamples", "200", "--lr", "1e8", *DATA])
    assert rc == 4 and "PREMISE VIOLATED" in text and "λ̄_max" in text
    assert s["verdict"] == "premise violated" and s["passed"] is None
    h = s["by_heads"]["1"]
    assert h["premise"]["holds"] is False and h["loss_slope"] is not None   # the numbers are still reported
