"""The heads check's judge and its feeders on hand-made typed records (no GD, no jit): the
regime threshold c·log(n)/n, which H reach it, H_min and upward closure, the tightness
H_theory/H_min, growth with n, the contradictions of the sufficient condition, and the
verdict's rules, each alone and each pair in order.

Truths: the rules of the module docstring (**Verdict**) evaluated by hand on small grids."""
import math

import numpy as np
import pytest

from mhajax.analysis.step_premise import premise_violated, step_premise
from mhajax.experiments.heads import (Entry, Growth, HeadsN, HeadsRecord, Regime, contradictions, growth, judge,
                                      reaches, regime, threshold, tightness)
from mhajax.errors import InputError
from mhajax.runtime.records import decode
from mhajax.verdict import Judgement, Verdict
from helpers import verdict_reason as _vr

GOOD, BAD = step_premise(1.0, [0.3]), step_premise(1e8, [0.3])
BAD_REASON = premise_violated([BAD]).reason
OK = step_premise(1.0, [0.5])
BAD3 = step_premise(1.0, [3.0])            # holds False, max_lr 1/3
PV, FA, PA = Verdict.PREMISE_VIOLATED.value, Verdict.FAILED.value, Verdict.PASSED.value
IN, NR = Verdict.INFORMATIONAL.value, Verdict.NOT_REACHED.value




def _hn(n, hmin, ht=None, grid=(1, 2, 4), reached=None):
    """One n: every grid H >= hmin reaches the regime (none when hmin is None) unless ``reached``."""
    reached = [H for H in grid if hmin is not None and H >= hmin] if reached is None else reached
    return HeadsN(n, hmin, tuple(reached), ht, tightness(ht, hmin))


def _grid(hmins, hts=None, grid=(1, 2, 4)):
    """n = 64, 128, ... with the given H_min(n) (and H_theory(n))."""
    hts = hts or [None] * len(hmins)
    return tuple(_hn(64 * 2 ** i, h, t, grid) for i, (h, t) in enumerate(zip(hmins, hts)))


def _v(by_n, diverged, covered, why, premises=(), heads=()):
    """judge on a record built as run builds it (``diverged``: the diverged runs, counted)."""
    return judge(HeadsRecord(tuple(by_n), tuple(heads), len(diverged), covered, why,
                             premise_violated(list(premises))))


# -- the feeders --------------------------------------------------------------------------------------

def test_heads_threshold_is_c_log_n_over_n():
    for n, c in ((2, 1.0), (64, 1.0), (100, 2.5), (4096, 0.3)):
        assert threshold(n, c) == pytest.approx(c * np.log(n) / n, rel=1e-15, abs=0)
    assert threshold(math.e ** 2, 3.0) == pytest.approx(6.0 / math.e ** 2, rel=1e-15, abs=0)


def test_reaches_at_the_threshold_and_never_when_undefined():
    assert reaches(0.5, 0.5) is True and reaches(0.25, 0.5) is True
    assert reaches(0.5 + 2 ** -40, 0.5) is False
    assert reaches(math.nan, 0.5) is False and reaches(math.inf, math.inf) is False
    assert reaches(-math.inf, 0.5) is False
    assert reaches(np.float64(0.5), 0.5) is True and type(reaches(np.float64(0.1), 0.5)) is bool


def test_regime_smallest_h_and_upward_closure():
    assert regime((1, 2, 4, 8), [False, True, True, True]) == Regime([2, 4, 8], 2, True)
    assert regime((1, 2, 4, 8), [False, True, False, True]) == Regime([2, 8], 2, False)
    assert regime((1, 2, 4, 8), [True, False, False, False]) == Regime([1], 1, False)
    assert regime((1, 2, 4, 8), [True] * 4) == Regime([1, 2, 4, 8], 1, True)
    assert regime((1, 2, 4, 8), [False, False, False, True]) == Regime([8], 8, True)
    assert regime((1, 2, 4), [False] * 3) == Regime([], None, True)      # vacuous: nothing reaches
    assert regime((), []) == Regime([], None, True)


def test_tightness_hand():
    assert tightness(1.2e9, 4) == pytest.approx(3.0e8, rel=1e-15, abs=0)
    assert tightness(6.0, 4) == 1.5 and tightness(2.0, 8) == 0.25
    assert tightness(None, 4) is None and tightness(1e9, None) is None and tightness(None, None) is None


def test_heads_growth_needs_every_n_nondecreasing_and_larger_at_the_end():
    cases = {(1, 2, 4): True, (1, 1, 2): True, (1, 2, 2): True, (2, 4): True,
             (2, 2, 2): False, (2, 2): False, (4, 2): False, (1, 4, 2): False, (2, 1, 4): False,
             (1, None, 4): False, (None, 4): False, (1, None): False, (4,): False}
    for h, observed in cases.items():
        g = growth(h)
        assert g.observed is observed, h
        assert g.hmin == list(h)
    assert growth([]) == Growth(False, [])
    assert growth(iter([1, 2])) == Growth(True, [1, 2])


def test_growth_rule():
    assert growth([1, 2, 2, 4]).observed
    assert not growth([4, 4, 4, 4]).observed        # constant: not growth
    assert not growth([1, 1, 1, 1]).observed
    assert not growth([2, 4, 2, 4]).observed        # not monotone
    assert not growth([1, None, 2, 4]).observed     # an n not reached
    assert growth([4, 4, 4, 4]).hmin == [4, 4, 4, 4]


def test_heads_entry_from_json_reads_int_keys():
    """An n's entry as summary.json holds it (string H keys) decodes to int keys, read by H."""
    h = dict(train=[0.1], test=[0.2], gap=[0.1], test_error=[0.0], mean_train=0.1, mean_test=0.2,
             normalized=0.9, reached=True)
    e = dict(steps=8, threshold=0.26, log6=9.0, by_heads={"2": h, "4": dict(h, mean_test=None, reached=False)},
             reached=[2], smallest_heads=2, upward_closed=False, theory=None, H_theory=None, tightness=None)
    v = decode(Entry, e)
    assert list(v.by_heads) == [2, 4] and v.by_heads[4].mean_test is None and v.by_heads[2].reached is True
    with pytest.raises(KeyError):
        v.by_heads[8]
    with pytest.raises(InputError, match="by_heads.two"):
        decode(Entry, dict(e, by_heads={"two": h}))


def test_heads_contradictions_are_h_at_or_above_h_theory_that_miss():
    by_n = (_hn(64, 4, ht=2), _hn(128, None, ht=None), _hn(256, None, ht=4.0), _hn(512, 4, ht=2.5),
            _hn(1024, 2, ht=1))
    # n=64: H=2 (== H_theory) misses, H=4 reaches; n=128 has no H_theory; n=256: H=4 (== 4.0)
    # misses; n=512: H=2 < 2.5 is not covered by the condition, H=4 reaches; n=1024: H=1 misses
    assert contradictions(by_n, (1, 2, 4)) == [(64, 2), (256, 4), (1024, 1)]
    assert contradictions(by_n, ()) == []
    assert contradictions((_hn(64, 1, ht=1),), (1, 2, 4)) == []
    # the order: n first, then H in grid order
    assert contradictions((_hn(64, None, ht=1), _hn(32, None, ht=2)), (4, 2, 1)) == [(64, 4), (64, 2), (64, 1),
                                                                                     (32, 4), (32, 2)]


def test_contradiction_needs_a_grid_H_at_or_above_H_theory():
    by_n = (_hn(64, 8, ht=4.0, grid=(1, 2, 4, 8), reached=[8]), _hn(128, 4, ht=1e9, grid=(1, 2, 4, 8)))
    assert contradictions(by_n, (1, 2, 4, 8)) == [(64, 4)]       # H = 4 >= 4.0 misses at n = 64
    assert contradictions((_hn(64, 8, ht=None, reached=[8]),), (1, 2, 4, 8)) == []
    assert contradictions((_hn(64, 8, ht=4.0 + 2 ** -40, reached=[8]),), (1, 2, 4, 8)) == []



# -- the judge: each rule alone, then every pair in order --------------------------------------------

def test_heads_each_rule_alone():
    grid = (1, 2, 4)
    up = _grid([1, 2, 4])
    assert _vr(_v(up, [], True, "", [GOOD], grid)) == (
        PA, "H_min(n) grows with n ({64: 1, 128: 2, 256: 4}) and stays within the sufficient condition")
    # H_theory at every n: the range of H_theory/H_min is stated (min…max)
    th = _grid([1, 2, 4], [2, 8, 4])
    assert _vr(_v(th, [], True, "", [GOOD], grid)) == (
        PA, "H_min(n) grows with n ({64: 1, 128: 2, 256: 4}) and stays within the sufficient condition"
            "; H_theory(n)/H_min(n) = 1…4")
    # H_theory missing at one n: no range
    part = _grid([1, 2, 4], [2, None, 4])
    assert _vr(_v(part, [], True, "", [GOOD], grid))[1].endswith("stays within the sufficient condition")
    flat = _grid([2, 2])
    assert _vr(_v(flat, [], True, "", [GOOD], grid)) == (
        NR, "growth with n not observed: H_min(n) = {64: 2, 128: 2}; the sufficient condition is neither "
            "contradicted nor confirmed here")
    flat_th = _grid([2, 2], [3, 5])
    assert _vr(_v(flat_th, [], True, "", [GOOD], grid))[1].endswith("confirmed here; H_theory(n)/H_min(n) = 1.5…2.5")
    miss = _grid([1, None, None])
    assert _vr(_v(miss, [], True, "", [GOOD], grid)) == (NR, "n = [128, 256] reach the regime at no H on the grid")
    bad = _grid([4, 4], [2, 1])
    assert _vr(_v(bad, [], True, "", [GOOD], grid)) == (
        FA, "H >= H_theory(n) misses the regime at (n, H) = [(64, 2), (128, 1), (128, 2)]: the sufficient "
            "width condition is contradicted")
    assert _vr(_v(up, [], False, "not here", [GOOD], grid)) == (IN, "the Õ(1/n) regime is not claimed here: not here")
    assert _vr(_v(up, [{"n": 64}, {"n": 128}, {"n": 64}], True, "", [GOOD], grid)) == (FA, "3 run(s) became non-finite")
    assert _vr(_v(up, [], True, "", [None, BAD], grid)) == (PV, BAD_REASON)
    assert _vr(_v(up, [], True, ""))[0] == PA                    # no premise, no grid
    # the range's ends are the min and the max, whatever the order of n
    mixed = _grid([1, 2, 4], [8, 2, 12])
    assert _vr(_v(mixed, [], True, "", [GOOD], grid))[1].endswith("; H_theory(n)/H_min(n) = 1…8")


def test_heads_every_pair_of_rules_in_order():
    grid, dv = (1, 2, 4), [{"n": 64}]
    bad = (_hn(64, 4, ht=2), _hn(128, None))               # a contradiction and an n reached at no H
    flat = _grid([2, 2])
    # premise > diverged > not claimed > contradiction > no H reaches > no growth > passed
    assert _vr(_v(bad, dv, True, "", [BAD], grid)) == (PV, BAD_REASON)
    assert _vr(_v(flat, [], True, "", [BAD], grid)) == (PV, BAD_REASON)
    assert _vr(_v(bad, dv, True, "", [GOOD], grid)) == (FA, "1 run(s) became non-finite")
    assert _vr(_v(bad, dv, False, "w", [BAD], grid)) == (FA, "1 run(s) became non-finite")
    assert _vr(_v(bad, [], False, "w", [BAD], grid)) == (IN, "the Õ(1/n) regime is not claimed here: w")
    assert _vr(_v(bad, [], True, "", [GOOD], grid)) == (
        FA, "H >= H_theory(n) misses the regime at (n, H) = [(64, 2)]: the sufficient width condition is "
            "contradicted")
    nogrow = _grid([4, None, 1])
    assert _vr(_v(nogrow, [], True, "", [GOOD], grid)) == (NR, "n = [128] reach the regime at no H on the grid")
    assert _vr(_v(flat, [], True, "", [GOOD], grid))[0] == NR


def _e(n, hmin, ht=None, reached=None):
    return _hn(n, hmin, ht, grid=(1, 2, 4, 8), reached=reached)


@pytest.mark.parametrize("by_n,premises,diverged,covered,want,needle", [
    ((_e(64, 4, 1e9), _e(128, 4, 2e9)), [OK, OK], [], True, Verdict.NOT_REACHED, "growth with n not observed"),
    ((_e(64, 1, 1e9), _e(128, 1, 2e9)), [OK, OK], [], True, Verdict.NOT_REACHED, "growth with n not observed"),
    ((_e(64, 1, 1e9), _e(128, 4, 2e9)), [OK, OK], [], True, Verdict.PASSED, "grows with n"),
    ((_e(64, None, 1e9), _e(128, 4, 2e9)), [OK, OK], [], True, Verdict.NOT_REACHED, "no H on the grid"),
    ((_e(64, 8, 2.0, reached=[8]), _e(128, 4, 2e9)), [OK, OK], [], True, Verdict.FAILED, "contradicted"),
    ((_e(64, 4, 1e9), _e(128, 4, 2e9)), [OK, BAD3], [dict(n=64, heads=1, seed=0, step=3)], True,
     Verdict.PREMISE_VIOLATED, "λ̄_max"),
    ((_e(64, 4, 1e9), _e(128, 4, 2e9)), [OK, OK], [dict(n=64, heads=1, seed=0, step=3)], True,
     Verdict.FAILED, "non-finite"),
    ((_e(64, 4, 1e9), _e(128, 4, 2e9)), [OK, BAD3], [], False, Verdict.INFORMATIONAL, "not claimed"),
])
def test_verdict_order(by_n, premises, diverged, covered, want, needle):
    j = _v(by_n, diverged, covered, "why", premises, (1, 2, 4, 8))
    assert j.verdict is want and needle in j.reason
    if want is Verdict.NOT_REACHED and "growth" in needle:
        assert "H_theory(n)/H_min(n) = " in j.reason   # the tightness is in the verdict


def test_judge_returns_the_premise_judgement_itself():
    own = Judgement(Verdict.PREMISE_VIOLATED, "step too large")
    r = HeadsRecord(_grid([1, 2]), (1, 2, 4), 2, True, "", own)
    assert judge(r) is own
    assert judge(r._replace(covered=False)) == Judgement(Verdict.FAILED, "2 run(s) became non-finite")
    assert judge(r._replace(covered=False, diverged=0)) == Judgement(Verdict.INFORMATIONAL,
                                                                      "the Õ(1/n) regime is not claimed here: ")
