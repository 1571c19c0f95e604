"""mhajax.experiments.variants: the judge and its feeders on hand-made typed records (no GD).

Truths: the rules of the docstrings applied by hand — a diverged (model, H, seed) run counted
once however many of its checkpoints diverged; the judged fraction (at least half, at least one)
over the checkpoints of models that imply something; L̂ defined from tiny/eps of float64 up;
the 1/√H rule (slope < 1/4 survives) on slopes fitted by hand (exact powers of H)."""
import math

import jax
import numpy as np
import pytest

from mhajax.experiments import variants
from mhajax.experiments.variants import Checkpoint, Survival
from mhajax.verdict import Verdict
from helpers import verdict_reason as _vr

UNDERFLOW, NO_INEQ = "with L̂ underflowed to 0 (ratios undefined)", "with no implied inequality defined"
FI = np.finfo(np.float64)
TINY = FI.tiny / FI.eps                    # the smallest L̂ ratios over it are defined for
EPS = 2 ** -40
PA, FA, IC, IN = Verdict.PASSED, Verdict.FAILED, Verdict.INCONCLUSIVE, Verdict.INFORMATIONAL




def _cp(passed=None, diverged=False, loss=0.5, model="softmax", heads=1, seed=0):
    return Checkpoint(model, heads, seed, passed, diverged, loss)


# -- L̂ defined, and why checkpoints were not judged --------------------------------------------------

def test_loss_defined_from_tiny_over_eps_up():
    assert variants._loss_defined(TINY) and variants._loss_defined(0.5) and variants._loss_defined(1e300)
    for L in (None, math.nan, math.inf, -math.inf, 0.0, -1.0, float(np.nextafter(TINY, 0))):
        assert not variants._loss_defined(L), L


def test_loss_defined_follows_the_float_dtype():
    """Under --dtype float32 (x64 disabled) the threshold is float32's tiny/eps ≈ 9.9e-32."""
    fi32 = np.finfo(np.float32)
    tiny32 = float(fi32.tiny / fi32.eps)
    assert variants._loss_defined(1e-35)                                  # float64: defined
    jax.config.update("jax_enable_x64", False)
    try:
        assert not variants._loss_defined(1e-35) and not variants._loss_defined(tiny32 * (1 - 1e-6))
        assert variants._loss_defined(tiny32) and variants._loss_defined(0.5)
    finally:
        jax.config.update("jax_enable_x64", True)
    assert variants._loss_defined(1e-35)


def test_why_not_judged_counts_each_reason_once():
    # the judge's reasons: L̂ undefined (None, NaN, below tiny/eps) apart from nothing defined;
    # a judged checkpoint counts nowhere whatever its L̂; a diverged run is FAILED before
    pts = [_cp(True, loss=0.0), _cp(False, diverged=True),
           _cp(None, True, 0.0), _cp(None, True, None),
           _cp(None, False, 0.0), _cp(loss=None),
           _cp(loss=math.nan), _cp(loss=float(np.nextafter(TINY, 0))),
           _cp(loss=TINY), _cp(loss=0.5)]
    assert _vr(variants.judge(pts, SOFT)) == (FA, "1 (model, H, seed) run(s) diverged")
    assert _vr(variants.judge([p for p in pts if not p.diverged], SOFT)) == (
        IC, f"too little could be judged: 1 of 7 checkpoints judged (at least 50% needed); not judged: "
            f"4 {UNDERFLOW}, 2 {NO_INEQ}")
    assert _vr(variants.judge(pts[:1] + [_cp(loss=0.5)] * 2, SOFT))[1].endswith(f"not judged: 2 {NO_INEQ}")


def test_diverged_runs_are_distinct_and_sorted():
    pts = [_cp(diverged=True, model="linear", heads=4), _cp(diverged=True, heads=1, seed=1),
           _cp(diverged=True, model="linear", heads=4), _cp(True, heads=1, seed=0)]
    assert variants._diverged_runs(pts) == [("linear", 4, 0), ("softmax", 1, 1)]
    assert variants._diverged_runs([_cp(True)]) == []


# -- the judge ---------------------------------------------------------------------------------------

SOFT = {"softmax": True}


def _run(judged=0, under=0, failed=0, none=0, model="softmax"):
    """``judged`` held, ``failed`` failed, ``under`` with L̂ underflowed, ``none`` with nothing defined."""
    return ([_cp(True, model=model)] * judged + [_cp(False, model=model)] * failed
            + [_cp(loss=0.0, model=model)] * under + [_cp(model=model)] * none)


def test_variants_each_rule_alone():
    v = variants.judge
    assert _vr(v(_run(5, 5), SOFT)) == (
        PA, f"every implied inequality held: 5 of 10 checkpoints judged (at least 50% needed); not judged: 5 {UNDERFLOW}")
    assert _vr(v(_run(4, 6), SOFT)) == (
        IC, f"too little could be judged: 4 of 10 checkpoints judged (at least 50% needed); not judged: 6 {UNDERFLOW}")
    assert _vr(v(_run(3, 3, none=4), SOFT)) == (
        IC, f"too little could be judged: 3 of 10 checkpoints judged (at least 50% needed); not judged: "
            f"3 {UNDERFLOW}, 4 {NO_INEQ}")
    assert _vr(v(_run(1), SOFT)) == (PA, "every implied inequality held: 1 of 1 checkpoints judged (at least 50% needed)")
    assert _vr(v([], SOFT)) == (IC, "too little could be judged: 0 of 0 checkpoints judged (at least 50% needed)")
    assert _vr(v(_run(0, 4), {"softmax": False})) == (IN, "no chosen (model, loss) pair implies an inequality")
    assert _vr(v(_run(6, 1, failed=3), SOFT)) == (FA, "an implied inequality failed at 3 checkpoint(s)")
    three = [_cp(diverged=True, heads=1), _cp(diverged=True, heads=1), _cp(diverged=True, model="linear", heads=4)]
    assert _vr(v(_run(9) + three, SOFT)) == (FA, "2 (model, H, seed) run(s) diverged")


def test_variants_every_pair_of_rules_in_order():
    v = variants.judge
    dv = [_cp(diverged=True, heads=1), _cp(diverged=True, model="linear", heads=4)]
    fl = _run(failed=3)
    nothing = {"softmax": False, "linear": False}
    # diverged > failed > implies nothing > too few judged > passed
    assert _vr(v(fl + dv + _run(under=10), nothing)) == (FA, "2 (model, H, seed) run(s) diverged")
    assert _vr(v(fl + _run(under=10), nothing)) == (FA, "an implied inequality failed at 3 checkpoint(s)")
    assert _vr(v(_run(under=10), nothing))[0] == IN
    assert _vr(v(_run(1, 3), SOFT))[0] == IC


def test_the_fraction_counts_only_models_that_imply_something():
    # softmax: 3 held of 4; two-layer (implies nothing): 6 unjudged checkpoints left out of the count
    pts = _run(3, 1) + _run(under=6, model="two-layer")
    implies = {"softmax": True, "two-layer": False}
    assert _vr(variants.judge(pts, implies)) == (
        PA, f"every implied inequality held: 3 of 4 checkpoints judged (at least 50% needed); not judged: 1 {UNDERFLOW}")
    # counted over every model, 3 of 10 would not be enough
    assert _vr(variants.judge(pts, {"softmax": True, "two-layer": True}))[0] == IC
    assert _vr(variants.judge(_run(under=6, model="two-layer"), implies)) == (
        IC, "too little could be judged: 0 of 0 checkpoints judged (at least 50% needed)")


# -- the 1/√H rule -----------------------------------------------------------------------------------

def test_fit_slope_of_log_v_against_log_h():
    assert variants._fit_slope([1, 2, 4], [1.0, 2 ** 0.5, 2.0]) == pytest.approx(0.5, abs=1e-14)
    # x = (0, ln2, 2 ln2), z = (0, 2 ln2, 2 ln2): slope = cov/var = 2 ln²2 / 2 ln²2 = 1
    assert variants._fit_slope([1, 2, 4], [1.0, 4.0, 4.0]) == pytest.approx(1.0, abs=1e-14)
    # None and values <= 0 are left out; two points are enough
    assert variants._fit_slope([1, 2, 4, 8], [3.0, None, 0.0, 3 * 8 ** 0.25]) == pytest.approx(0.25, abs=1e-14)
    assert variants._fit_slope([1, 16], [2.0, 1.0]) == pytest.approx(-0.25, abs=1e-14)
    assert variants._fit_slope([1, 2, 4], [-1.0, None, 5.0]) is None                 # one point
    assert variants._fit_slope([4, 4], [1.0, 2.0]) is None                           # one H
    assert variants._fit_slope([4, 4, 8], [1.0, 2.0, 4.0]) == pytest.approx(1.5, abs=1e-14)
    assert variants._fit_slope([], []) is None
    assert isinstance(variants._fit_slope([1, 2], [1.0, 2.0]), float)


def test_survival_at_the_quarter():
    s = variants.survival
    assert variants.SURVIVES_BELOW == 0.25
    assert s(0.25, (1, 4), (1.0, 2.0)) == Survival(
        False, "does NOT survive (slope >= 0.25): κ_emp ∝ H^+0.25, i.e. λ_min/L̂ ∝ H^-0.25 (paper: H^-0.50)")
    assert s(0.25 - EPS, (1, 4), (1.0, 2.0)) == Survival(
        True, "survives (slope < 0.25): κ_emp ∝ H^+0.25, i.e. λ_min/L̂ ∝ H^-0.25 (paper: H^-0.50)")
    assert s(0.1, (1, 4), (1.0, 2.0)) == Survival(
        True, "survives (slope < 0.25): κ_emp ∝ H^+0.10, i.e. λ_min/L̂ ∝ H^-0.40 (paper: H^-0.50)")
    assert s(0.6, (1, 4), (1.0, 2.0)) == Survival(
        False, "does NOT survive (slope >= 0.25): κ_emp ∝ H^+0.60, i.e. λ_min/L̂ ∝ H^+0.10 (paper: H^-0.50)")
    assert s(-0.3, (1, 4), (1.0, 2.0)).statement == (
        "survives (slope < 0.25): κ_emp ∝ H^-0.30, i.e. λ_min/L̂ ∝ H^-0.80 (paper: H^-0.50)")


def test_survival_names_the_h_left_out():
    s = variants.survival
    assert s(None, (1, 4), (None, None)) == Survival(
        None, "undefined: fewer than two H with κ_emp > 0 (κ_emp not computed or undefined (--method block, "
              "L̂ underflowed or diverged) at H = [1, 4])")
    assert s(None, (1, 4, 16), (0.0, -1.0, 3.0)) == Survival(
        None, "undefined: fewer than two H with κ_emp > 0 (κ_emp <= 0 (no negative curvature) at H = [1, 4])")
    assert s(None, (1, 4, 16), (0.0, None, 3.0)).statement == (
        "undefined: fewer than two H with κ_emp > 0 (κ_emp <= 0 (no negative curvature) at H = [1]; κ_emp not "
        "computed or undefined (--method block, L̂ underflowed or diverged) at H = [4])")
    assert s(None, (), ()) == Survival(None, "undefined: fewer than two H with κ_emp > 0")
    assert s(None, (1,), (1e-300,)).statement == "undefined: fewer than two H with κ_emp > 0"
    # a slope fitted over the positive κ_emp names the H left out of it (κ_emp <= 0 only)
    assert s(0.1, (1, 4, 16, 64), (0.0, 1.0, None, 2.0)).statement == (
        "survives (slope < 0.25): κ_emp ∝ H^+0.10, i.e. λ_min/L̂ ∝ H^-0.40 (paper: H^-0.50) "
        "(fit over H with κ_emp > 0; κ_emp <= 0 at H = [1])")
    assert s(0.5, (1, 4, 16), (-2.0, 1.0, 2.0)) == Survival(
        False, "does NOT survive (slope >= 0.25): κ_emp ∝ H^+0.50, i.e. λ_min/L̂ ∝ H^+0.00 (paper: H^-0.50) "
               "(fit over H with κ_emp > 0; κ_emp <= 0 at H = [1])")
