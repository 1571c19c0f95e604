"""mhajax.experiments.weak_convexity: the judge and its feeders on hand-made typed records (no GD).

Truths: the rule of the docstrings, applied by hand to each record set — which checkpoints
count as judged, violated, diverged or underflowed; the judged fraction (at least half, at
least one); the width law's order (not judged, violated, unresolved, undefined, holds) with the
tolerance 0.1 on the slope's CI, the grid of >= 3 H spanning >= 100, and the step it names.
The whole check runs in tests/experiments/test_weak_convexity.py (slow tier)."""
from types import SimpleNamespace

import pytest

from mhajax.experiments import weak_convexity as wc
from mhajax.experiments.base import not_judged
from mhajax.experiments.weak_convexity import Checkpoint, Point, WidthLaw, WidthStep
from mhajax.verdict import Verdict
from helpers import verdict_reason as _vr

U0 = "with L̂ underflowed to 0 (ratios undefined)"
NI = "with no implied inequality defined"
EPS = 2 ** -40

OK, FAIL = Checkpoint(True, loss_defined=True), Checkpoint(False, loss_defined=True)
DIV = Checkpoint(None, diverged=True, loss_defined=True)
UNDER, NONE = Checkpoint(None, loss_defined=False), Checkpoint(None, loss_defined=True)




# -- which checkpoints were not judged, and why (base.not_judged of the judge's triples) ---------------

def _why(points):
    return list(not_judged((p.all_hold is not None, p.diverged, p.loss_defined) for p in points).values())


def test_why_not_judged_counts_every_reason():
    assert _why([OK, FAIL, DIV, UNDER, UNDER, NONE]) == [1, 2, 1]
    assert _why([]) == [0, 0, 0]
    assert _why([Checkpoint(None)]) == [0, 1, 0]       # no L̂ recorded: underflowed


def test_why_not_judged_counts_past_one():
    assert _why([DIV, DIV, NONE, NONE, NONE, UNDER]) == [2, 1, 3]


def test_a_judged_checkpoint_is_never_a_reason_whatever_its_flags():
    # judged first: a held/failed record with diverged or underflow flags set counts nowhere,
    # and the records after it are still counted
    odd = [Checkpoint(True, diverged=True, loss_defined=False), Checkpoint(False, diverged=True), UNDER]
    assert _why(odd) == [0, 1, 0]
    # diverged wins over an underflowed L̂
    assert _why([Checkpoint(None, diverged=True, loss_defined=False)]) == [1, 0, 0]


def test_reasons_name_each_count_in_order():
    pts = [DIV] * 3 + [UNDER] * 5 + [NONE] * 7
    assert not_judged((p.all_hold is not None, p.diverged, p.loss_defined) for p in pts) == {
        "diverged": 3, U0: 5, NI: 7}
    assert list(not_judged([])) == ["diverged", U0, NI]


# -- the judge ------------------------------------------------------------------------------------

def test_weak_convexity_verdict_order_and_reasons():
    three = [OK, OK, NONE]
    assert _vr(wc.judge(three + [DIV, DIV, FAIL], True)) == (
        Verdict.FAILED, "2 trajectory point(s) became non-finite")
    assert _vr(wc.judge([FAIL, OK, NONE], False)) == (
        Verdict.FAILED, "an implied inequality failed at 1 of 2 judged checkpoints")
    assert _vr(wc.judge(three, False)) == (Verdict.INFORMATIONAL, "the (model, loss) pair implies no inequality")
    assert _vr(wc.judge(three, True)) == (
        Verdict.PASSED, f"every implied inequality held: 2 of 3 checkpoints judged (at least 50% needed); "
                        f"not judged: 1 {NI}")
    assert _vr(wc.judge([OK, UNDER, NONE], True)) == (
        Verdict.INCONCLUSIVE, "too little could be judged: 1 of 3 checkpoints judged (at least 50% needed); "
                              f"not judged: 1 {U0}, 1 {NI}")
    # a diverged checkpoint is FAILED before the judged fraction is looked at
    assert _vr(wc.judge([OK, UNDER, DIV], True)) == (Verdict.FAILED, "1 trajectory point(s) became non-finite")
    assert _vr(wc.judge([OK, UNDER], True))[0] == Verdict.PASSED           # exactly half: enough


def test_the_violation_count_and_the_judged_count_differ():
    # 2 of 5 judged checkpoints failed; 3 more not judged are not in either count
    pts = [FAIL, OK, FAIL, OK, OK, NONE, UNDER, NONE]
    assert _vr(wc.judge(pts, True)) == (Verdict.FAILED, "an implied inequality failed at 2 of 5 judged checkpoints")


def test_one_of_eleven_is_inconclusive_with_the_reason():
    pts = [OK] + [UNDER] * 10
    verdict, reason = _vr(wc.judge(pts, True))
    assert verdict == Verdict.INCONCLUSIVE
    assert reason == ("too little could be judged: 1 of 11 checkpoints judged (at least 50% needed); "
                      f"not judged: 10 {U0}")


def test_enough_judged_passes_and_nothing_implied_is_informational():
    pts = [OK] * 6 + [UNDER] * 5
    assert _vr(wc.judge(pts, True)) == (
        Verdict.PASSED, f"every implied inequality held: 6 of 11 checkpoints judged (at least 50% needed); "
                        f"not judged: 5 {U0}")
    assert _vr(wc.judge(pts, False))[0] == Verdict.INFORMATIONAL
    assert _vr(wc.judge([FAIL] + pts[1:], True))[0] == Verdict.FAILED
    # 5 of 11 is below half; nothing at all is never enough
    assert _vr(wc.judge([OK] * 5 + [UNDER] * 6, True))[0] == Verdict.INCONCLUSIVE
    assert _vr(wc.judge([], True)) == (
        Verdict.INCONCLUSIVE, "too little could be judged: 0 of 0 checkpoints judged (at least 50% needed)")


def test_the_width_law_is_read_only_where_judged_and_after_the_pointwise_rules():
    pts, text = [OK, OK], "2 of 2 checkpoints judged (at least 50% needed)"
    for outcome in ("violated", "unresolved", "undefined", "holds"):
        # a grid the law is not judged on leaves the pointwise verdict alone
        assert _vr(wc.judge(pts, True, WidthLaw(False, outcome, "r"))) == (
            Verdict.PASSED, f"every implied inequality held: {text}")
    assert _vr(wc.judge(pts, True)) == (Verdict.PASSED, f"every implied inequality held: {text}")
    assert _vr(wc.judge(pts, True, WidthLaw(True, "violated", "R"))) == (
        Verdict.FAILED, f"every implied inequality held ({text}), but R")
    for outcome in ("unresolved", "undefined", "not judged"):
        assert _vr(wc.judge(pts, True, WidthLaw(True, outcome, "R"))) == (
            Verdict.INCONCLUSIVE, f"every implied inequality held ({text}); R")
    assert _vr(wc.judge(pts, True, WidthLaw(True, "holds", "R"))) == (
        Verdict.PASSED, f"every implied inequality held: {text}; R")
    # the pointwise rules come first
    viol = WidthLaw(True, "violated", "R")
    assert _vr(wc.judge([FAIL, OK], True, viol))[1] == "an implied inequality failed at 1 of 2 judged checkpoints"
    assert _vr(wc.judge(pts, False, viol))[0] == Verdict.INFORMATIONAL
    assert _vr(wc.judge([OK, UNDER, UNDER], True, WidthLaw(True, "holds", "R")))[0] == Verdict.INCONCLUSIVE


# -- the width law's rule (docs/theory.md §15.7) ----------------------------------------------------

GRID = (1, 4, 16, 64, 256, 1024, 4096)


def test_classify_a_ci_against_the_tolerance_at_its_edges():
    c = wc._classify
    assert c((0.0, 0.1), 0.05, 0.1) == "holds"                       # upper end at the tolerance
    assert c((0.0, 0.1 + EPS), 0.05, 0.1) == "unresolved"
    assert c((0.1, 0.3), 0.2, 0.1) == "unresolved"                   # lower end at the tolerance
    assert c((0.1 + EPS, 0.3), 0.2, 0.1) == "violated"
    assert c(None, 0.1, 0.1) == "holds" and c(None, 0.1 + EPS, 0.1) == "violated"   # one seed: the point
    assert c(None, -3.0, 0.1) == "holds" and c((2.0, 3.0), 2.5, 1.0) == "violated"


def test_width_status_of_a_step():
    assert wc.width_status(WidthStep(0, None)) == "undefined"
    assert wc.width_status(WidthStep(0, None, (0.0, 0.05))) == "undefined"      # no slope, whatever the CI
    assert wc.width_status(WidthStep(0, 0.1)) == "holds"                          # at WIDTH_TOL = 0.1
    assert wc.width_status(WidthStep(0, 0.1 + EPS)) == "violated"
    assert wc.width_status(WidthStep(0, 0.0, (-0.1, 0.1))) == "holds"
    assert wc.width_status(WidthStep(0, 0.0, (-0.1, 0.1 + EPS))) == "unresolved"
    assert wc.width_status(WidthStep(0, 0.2, (0.1, 0.3))) == "unresolved"
    assert wc.width_status(WidthStep(0, 0.2, (0.1 + EPS, 0.3))) == "violated"
    assert wc.WIDTH_TOL == 0.1 and wc.WIDTH_POINTS == 3 and wc.WIDTH_SPAN == 100


def _steps(*specs):
    """WidthSteps at GD steps 0, 100, 200, ...: (slope, ci) per step."""
    return [WidthStep(100 * k, sl, ci) for k, (sl, ci) in enumerate(specs)]


HOLD = (0.0, (-0.05, 0.05))


def test_width_outcome_not_judged_without_kappa_or_on_a_short_grid():
    steps = _steps(HOLD, HOLD)
    assert wc.width_outcome(steps, GRID, False) == WidthLaw(
        False, "not judged", "the width law needs the closed-form κ(θ), which this model has not")
    assert wc.width_outcome(steps, (1, 4), False).reason.startswith("the width law needs")
    assert wc.width_outcome(steps, (1, 100), True) == WidthLaw(
        False, "not judged", "the width law is judged on at least 3 H spanning H_max/H_min >= 100 "
                             "(here 2 H, span 100)")
    assert wc.width_outcome(steps, (1, 10, 99), True) == WidthLaw(
        False, "not judged", "the width law is judged on at least 3 H spanning H_max/H_min >= 100 "
                             "(here 3 H, span 99)")
    assert wc.width_outcome(steps, (2, 10, 199), True).reason.endswith("(here 3 H, span 99.5)")
    # 3 H spanning exactly 100: judged
    assert wc.width_outcome(steps, (1, 10, 100), True) == WidthLaw(
        True, "holds", "width law holds at 2 of 2 checkpoint steps (slope of κ_emp/κ(θ) in H at most "
                       "0.000 [-0.050, 0.050] <= 0.1)")
    assert wc.width_outcome(steps, (3, 30, 300, 301), True).judged is True


def test_width_outcome_names_the_first_violated_step_before_any_unresolved_one():
    steps = _steps(HOLD, (0.12, (0.05, 0.2)), (0.3, (0.2, 0.4)), (0.5, (0.45, 0.55)))
    assert wc.width_outcome(steps, GRID, True) == WidthLaw(
        True, "violated", "κ_emp grows faster than κ(θ): slope of κ_emp/κ(θ) in H 0.300 [0.200, 0.400] > 0.1 "
                          "at step 200: the lemma's 1/√H is not the width law on this grid")
    one_seed = _steps((0.25, None))
    assert wc.width_outcome(one_seed, GRID, True).reason == (
        "κ_emp grows faster than κ(θ): slope of κ_emp/κ(θ) in H 0.250 (one seed) > 0.1 at step 0: the lemma's "
        "1/√H is not the width law on this grid")


def test_width_outcome_names_the_first_unresolved_step():
    steps = _steps(HOLD, (None, None), (0.1, (0.05, 0.15)), (0.2, (0.0, 0.4)))
    assert wc.width_outcome(steps, GRID, True) == WidthLaw(
        True, "unresolved", "width law unresolved: slope of κ_emp/κ(θ) in H 0.100 [0.050, 0.150] contains 0.1 "
                            "at step 200")


def test_width_outcome_needs_half_the_steps_defined():
    assert wc.width_outcome(_steps(HOLD, (None, None), (None, None)), GRID, True) == WidthLaw(
        True, "undefined", "width law: the slope of κ_emp/κ(θ) is defined at 1 of 3 checkpoint steps "
                           "(at least half needed)")
    assert wc.width_outcome([], GRID, True) == WidthLaw(
        True, "undefined", "width law: the slope of κ_emp/κ(θ) is defined at 0 of 0 checkpoint steps "
                           "(at least half needed)")
    half = wc.width_outcome(_steps((None, None), HOLD), GRID, True)                 # 1 of 2: enough
    assert half == WidthLaw(True, "holds", "width law holds at 1 of 2 checkpoint steps (slope of κ_emp/κ(θ) "
                                           "in H at most 0.000 [-0.050, 0.050] <= 0.1)")


def test_width_outcome_holds_naming_the_largest_upper_end():
    # upper ends 0.09, 0.05, 0.06 (one seed: the slope), undefined last: the first is the worst,
    # though its slope and its lower end are the smallest
    steps = _steps((0.0, (-0.5, 0.09)), (0.03, (0.0, 0.05)), (0.06, None), (None, None))
    assert wc.width_outcome(steps, GRID, True) == WidthLaw(
        True, "holds", "width law holds at 3 of 4 checkpoint steps (slope of κ_emp/κ(θ) in H at most "
                       "0.000 [-0.500, 0.090] <= 0.1)")
    steps = _steps((None, None), (0.0, (-0.5, 0.05)), (0.07, None))
    assert wc.width_outcome(steps, GRID, True).reason == (
        "width law holds at 2 of 3 checkpoint steps (slope of κ_emp/κ(θ) in H at most 0.070 (one seed) <= 0.1)")


def test_slope_text():
    assert wc._slope_text(WidthStep(0, None, (1.0, 2.0))) == "undefined"
    assert wc._slope_text(WidthStep(0, 0.12345, None)) == "0.123 (one seed)"
    assert wc._slope_text(WidthStep(0, -0.0004, (-1.23456, 2.5))) == "-0.000 [-1.235, 2.500]"
    assert wc._ci_text(None) == "undefined" and wc._ci_text(SimpleNamespace(slope=None, ci=None)) == "undefined"
    assert wc._ci_text(SimpleNamespace(slope=0.5, ci=(0.25, 0.75))) == "0.500 [0.250, 0.750]"


# -- the width law on records: slopes by bootstrap over seeds (numpy only) ----------------------------

def _width_recs(ratio, heads=GRID, seeds=(0, 1), steps=(0, 100), **extra):
    """Records whose κ_emp/κ(θ) is ``ratio(H, seed, step)``, κ(θ) = 100·H^0.03."""
    out = []
    for H in heads:
        for s in seeds:
            for k in steps:
                kb = 100 * H ** 0.03
                r = ratio(H, s, k)
                out.append(Point(**{**dict.fromkeys(Point._fields), **dict(
                    heads=H, seed=s, step=k, diverged=False, kappa_bound=kb, kappa_emp=None if r is None else r * kb,
                    lambda_max=0.3, loss=0.5, loss_defined=True, beta2=1.2, **extra)}))
    return out


def _law(recs, heads=GRID, seeds=(0, 1), steps=(0, 100)):
    return wc.width_law(recs, heads, list(seeds), list(steps))


def test_width_law_holds_when_the_ratio_is_flat_and_reports_every_slope():
    law = _law(_width_recs(lambda H, s, k: 1e-3 * (1 + 0.01 * s)))
    assert law.judged and law.outcome == "holds", law.reason
    e = law.steps[0]
    assert e.status == "holds" and abs(e.slope_ratio.slope) < 1e-12
    assert e.slope_kappa_bound.slope == pytest.approx(0.03, abs=1e-12)
    assert e.slope_kappa_emp.slope == pytest.approx(0.03, abs=1e-12)     # κ_emp = ρ·κ(θ)
    assert e.slope_lambda_max_over_loss.slope == pytest.approx(0.0, abs=1e-12)
    assert e.step_slopes_ratio == pytest.approx([0.0] * 6, abs=1e-12)
    assert e.mean.smoothness_coefficient[0] == pytest.approx(1.44 + 100, rel=1e-12, abs=0)


@pytest.mark.parametrize("b,outcome,verdict", [(0.3, "violated", Verdict.FAILED), (0.05, "holds", Verdict.PASSED)])
def test_a_ratio_growing_like_a_power_of_h_is_judged_against_the_tolerance(b, outcome, verdict):
    law = _law(_width_recs(lambda H, s, k: 1e-3 * H ** b * (1 + 0.02 * s)))
    assert law.outcome == outcome
    assert law.steps[0].slope_ratio.slope == pytest.approx(b, abs=1e-3)
    assert wc.judge([OK, OK], True, law).verdict == verdict


def test_seeds_that_disagree_across_the_tolerance_leave_it_unresolved():
    law = _law(_width_recs(lambda H, s, k: 1e-3 * H ** (0.0 if s == 0 else 0.25)))
    assert law.outcome == "unresolved" and law.steps[0].status == "unresolved"
    ci = law.steps[0].slope_ratio.ci
    assert ci[0] < wc.WIDTH_TOL < ci[1]
    out = wc.judge([OK], True, law)
    assert out.verdict == Verdict.INCONCLUSIVE and "unresolved" in out.reason


def test_a_short_grid_or_a_missing_ratio_is_not_judged():
    flat = lambda H, s, k: 1e-3                                          # noqa: E731
    short = _law(_width_recs(flat, heads=(1, 4, 16)), heads=(1, 4, 16))
    assert not short.judged and short.outcome == "not judged" and "span 16" in short.reason
    assert wc.judge([OK], True, short).verdict == Verdict.PASSED
    gone = _law(_width_recs(lambda H, s, k: None if (k == 100 or H == 4) else 1e-3))
    assert gone.steps[100].status == "undefined" and gone.outcome == "undefined"
    assert wc.judge([OK], True, gone).verdict == Verdict.INCONCLUSIVE
    convex = _law(_width_recs(lambda H, s, k: -1e-3 if k == 0 else 1e-3))     # λmin >= 0 at step 0
    assert convex.steps[0].status == "undefined" and convex.outcome == "holds"   # 1 of 2 steps: half
