"""The generalization check's judge and its feeders on hand-made typed records (no GD, no jit):
which n are resolved (gap > 2·se), when the gap slope is fitted (at least 3 resolved n), each
slope against −1, and the verdict's rules, each alone and each pair in order.

Truths: the rules of the module docstring evaluated by hand; the slope classes of
:mod:`mhajax.analysis.rates` (band [−1.3, −0.7]) on CIs placed by hand around it."""
import math

import numpy as np

from mhajax.analysis.gap import RESOLVED_SE
from mhajax.analysis.rates import RATE_TOLERANCE
from mhajax.analysis.step_premise import premise_violated, step_premise
from mhajax.experiments import generalization
from mhajax.experiments.generalization import (GeneralizationRecord, SlopeVerdict, gap_fitted, judge,
                                               resolved_points, slope_verdict)
from mhajax.verdict import Judgement, Verdict
from helpers import verdict_reason as _vr

GOOD, BAD = step_premise(1.0, [0.3]), step_premise(1e8, [0.3])
BAD_REASON = premise_violated([BAD]).reason
PV, FA, PA = Verdict.PREMISE_VIOLATED.value, Verdict.FAILED.value, Verdict.PASSED.value
IC, IN = Verdict.INCONCLUSIVE.value, Verdict.INFORMATIONAL.value




def _gv(test=True, gap=True, train=True):
    """The Õ(1/n) outcome of each slope (the train slope is reported, never judged)."""
    return dict(test=test, gap=gap, train=train)


def g(v, diverged, covered, why, premises=()):
    """judge on a record built as run builds it (``diverged``: the diverged runs, counted)."""
    return judge(GeneralizationRecord(test=v["test"], gap=v["gap"], diverged=len(diverged), covered=covered,
                                      why=why, premise=premise_violated(list(premises))))


# -- the feeders ----------------------------------------------------------------------------------------

def test_resolved_is_strictly_above_two_standard_errors():
    assert RESOLVED_SE == 2.0
    mean = np.array([2.0, 2.0 + 2 ** -40, 1.0, -1.0, np.nan, 1.0, 0.0])
    se = np.array([1.0, 1.0, 1.0, 0.25, 1.0, np.nan, 0.0])
    # 2 = 2·1 is not resolved (strict); 0 > 0 is not either; NaN on either side is not
    assert resolved_points(mean, se).tolist() == [False, True, False, False, False, False, False]
    assert resolved_points([1.0, 3.0], [0.25, 1.0]).tolist() == [True, True]
    assert resolved_points([], []).tolist() == []
    # None (a NaN read back from JSON) is NaN: not resolved, on either side
    assert resolved_points([None, 3.0, 3.0], [1.0, None, 1.0]).tolist() == [False, False, True]


def test_gap_fitted_on_at_least_three_resolved_n():
    assert generalization.MIN_RESOLVED == 3
    assert gap_fitted(np.array([True, True, True])) is True
    assert gap_fitted(np.array([True, False, True, False, True])) is True
    assert gap_fitted(np.array([True, True, False, False])) is False
    assert gap_fitted(np.array([True] * 8)) is True and gap_fitted(np.array([], dtype=bool)) is False
    assert gap_fitted([True, True, True, True]) is True


def test_slope_verdict_against_the_band():
    lo, hi = -1 - RATE_TOLERANCE, -1 + RATE_TOLERANCE
    assert RATE_TOLERANCE == 0.3
    # the CI overlaps the band: matches, holds
    assert slope_verdict([-1.1, -0.9], -1.0) == SlopeVerdict("matches", True)
    assert slope_verdict([hi, 0.5], 0.0) == SlopeVerdict("matches", True)          # touches the upper edge
    assert slope_verdict([-3.0, lo], -2.0) == SlopeVerdict("matches", True)        # touches the lower edge
    # entirely above: shallower, the upper bound is contradicted
    assert slope_verdict([hi + 0.01, 0.2], 0.0) == SlopeVerdict("shallower", False)
    # entirely below: steeper, holds (a loose upper bound)
    assert slope_verdict([-2.0, lo - 0.01], -1.5) == SlopeVerdict("steeper", True)
    # no CI: the point slope is classified; neither: undefined
    assert slope_verdict(None, -0.5) == SlopeVerdict("shallower", False)
    assert slope_verdict(None, None) == SlopeVerdict("undefined", None)



# -- the judge: premise, diverged, slope above the band, not claimed, undefined, passed ----------------

def test_generalization_each_rule_alone():
    assert _vr(g(_gv(), [], True, "", [GOOD])) == (PA, "test loss and gap decay at least as fast as Õ(1/n)")
    assert _vr(g(_gv(), [], True, "")) == (PA, "test loss and gap decay at least as fast as Õ(1/n)")
    assert _vr(g(_gv(), [], True, "", [None, GOOD, None])) == (PA, "test loss and gap decay at least as fast as Õ(1/n)")
    assert _vr(g(_gv(), [], True, "", [GOOD, BAD])) == (PV, BAD_REASON)
    assert _vr(g(_gv(), [{"n": 32}, {"n": 64}], True, "", [GOOD])) == (FA, "2 run(s) became non-finite")
    assert _vr(g(_gv(test=False), [], True, "")) == (FA, "the test slope decays more slowly than Õ(1/n) allows")
    assert _vr(g(_gv(gap=False), [], True, "")) == (FA, "the gap slope decays more slowly than Õ(1/n) allows")
    assert _vr(g(_gv(test=False, gap=False), [], True, "")) == (
        FA, "the test and gap slope decays more slowly than Õ(1/n) allows")
    assert _vr(g(_gv(), [], False, "why not")) == (IN, "the Õ(1/n) rate is not claimed here: why not")
    assert _vr(g(_gv(test=None), [], True, "")) == (IC, "the test slope is undefined")
    assert _vr(g(_gv(gap=None), [], True, "")) == (IC, "the gap slope is undefined")
    assert _vr(g(_gv(test=None, gap=None), [], True, "")) == (IC, "the test and gap slope is undefined")
    # the train slope is reported, never judged
    assert _vr(g(_gv(train=False), [], True, ""))[0] == PA
    assert _vr(g(_gv(train=None), [], True, ""))[0] == PA


def test_generalization_every_pair_of_rules_in_order():
    dv = [{"n": 32}]
    # premise > diverged > slope failed > (not claimed) > undefined > passed
    assert _vr(g(_gv(test=False), dv, True, "", [BAD])) == (PV, BAD_REASON)
    assert _vr(g(_gv(test=False), [], True, "", [BAD])) == (PV, BAD_REASON)
    assert _vr(g(_gv(test=None), [], True, "", [BAD])) == (PV, BAD_REASON)
    assert _vr(g(_gv(test=False), dv, True, "")) == (FA, "1 run(s) became non-finite")
    assert _vr(g(_gv(test=None), dv, True, "")) == (FA, "1 run(s) became non-finite")
    assert _vr(g(_gv(test=None, gap=False), [], True, "")) == (
        FA, "the gap slope decays more slowly than Õ(1/n) allows")
    assert _vr(g(_gv(test=False, gap=None), [], True, "")) == (
        FA, "the test slope decays more slowly than Õ(1/n) allows")
    # where the rate is not claimed the premise and the slopes are not judged, a divergence is
    assert _vr(g(_gv(test=False, gap=None), [], False, "w", [BAD])) == (IN, "the Õ(1/n) rate is not claimed here: w")
    assert _vr(g(_gv(), dv + dv, False, "w", [BAD])) == (FA, "2 run(s) became non-finite")


def test_verdict_premise_first():
    v = _gv()
    bad = step_premise(10.0, [0.5])                     # holds False, max_lr 2
    j = g(v, [dict(n=8, seed=0, step=2)], True, "", [step_premise(10.0, [0.05]), bad])
    assert j.verdict is Verdict.PREMISE_VIOLATED and "λ̄_max" in j.reason
    assert g(v, [], True, "", [bad]).verdict is Verdict.PREMISE_VIOLATED
    assert g(v, [], False, "why", [bad]).verdict is Verdict.INFORMATIONAL
    assert g(v, [], True, "", [GOOD]).verdict is Verdict.PASSED


def test_judge_returns_the_premise_judgement_itself():
    own = Judgement(Verdict.PREMISE_VIOLATED, "step too large")
    r = GeneralizationRecord(test=False, gap=None, diverged=0, covered=True, why="", premise=own)
    assert judge(r) is own
    assert judge(r._replace(premise=None)) == Judgement(Verdict.FAILED,
                                                        "the test slope decays more slowly than Õ(1/n) allows")
    assert math.isfinite(GOOD.max_lr)
