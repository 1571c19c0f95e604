"""The quasi-convexity check's judge and its feeders on hand-made typed records (no GD, no jit):
:func:`finalize`'s inequalities at their edges, :func:`judged_pair`, :func:`summarize`'s counts and
maxima, and :func:`judge`'s rules, each alone and each pair in order.

Truths: the rules of docs/theory.md §10 evaluated by hand on round numbers (powers of two, so
every comparison is exact), and the reason texts as the rules state them."""
import math

from mhajax.experiments import quasi_convexity
from mhajax.experiments.base import judged_enough, premise_violated, step_premise
from mhajax.experiments.quasi_convexity import (PairCheck, PairOutcome, QCRecord, QCSummary, Segment, finalize,
                                                judge, judged_pair, summarize)
from mhajax.verdict import Judgement, Verdict
from helpers import verdict_reason as _vr

GOOD, BAD = step_premise(1.0, [0.3]), step_premise(1e8, [0.3])
BAD_REASON = premise_violated([BAD]).reason
PV, FA, PA = Verdict.PREMISE_VIOLATED.value, Verdict.FAILED.value, Verdict.PASSED.value
IC, IN = Verdict.INCONCLUSIVE.value, Verdict.INFORMATIONAL.value




def _v(pairs, diverged, covered, why, premises=(), judged=None):
    """judge on a record built as run builds it (``diverged``: the diverged runs, counted)."""
    return judge(QCRecord(tuple(pairs), len(diverged), covered, why, premise_violated(list(premises)), judged))


# -- the premise as a judgement ---------------------------------------------------------------------


# -- finalize: the inequalities at their edges --------------------------------------------------------

def _raw(lhs, loss_k, loss_star=1.0, term_s=1.0, cert_factor=2.0, wc_ratio=0.5, kappa_dir=0.25,
         max_loss=0.5, dist2=2.0):
    """segment_check's numbers with H = 4 (√H = 2): term_s = κ̄/(2√H)·max_loss·dist2."""
    return Segment(lhs=lhs, loss_k=loss_k, loss_star=loss_star, dist2=dist2, max_loss=max_loss,
                   kappa_bar=term_s * 4.0 / (max_loss * dist2) if max_loss * dist2 else 4.0, beta2_bar=0.125,
                   cert_factor=cert_factor, kappa_dir=kappa_dir, wc_ratio=wc_ratio, heads=4.0)


def test_quasi_convexity_finalize_holds_at_equality_with_the_tolerance():
    # drop = 8, term_s = 1, tol = 0.5·(1 + 9 + 1 + 1) = 6: lhs >= 8 − 1 − 6 = 1
    f = finalize(_raw(1.0, 9.0), rel_tol=0.5)
    assert f.holds is True and f.rhs == 7.0 and bool(f.certified_violation) is False
    assert f.inconclusive is False and f.convex is False
    assert f.rhs_cert == 6.0 and f.max_loss_cert == 1.0 and f.cert_factor == 2.0
    assert f.kappa_need == 2 * 2 * (8.0 - 1.0) / (0.5 * 2.0) == 28.0
    assert f.kappa_dir == 0.25 and f.wc_ratio == 0.5 and f.wc_holds is True
    assert "heads" not in f._fields and f.lhs == 1.0 and f.kappa_bar == 4.0 and f.beta2_bar == 0.125
    assert (f.loss_k, f.loss_star, f.dist2, f.max_loss) == (9.0, 1.0, 2.0, 0.5)
    below = finalize(_raw(1.0 - 2 ** -40, 9.0), rel_tol=0.5)
    assert below.holds is False and bool(below.certified_violation) is False and below.inconclusive is True
    # without the tolerance: 1 < 7 fails
    assert finalize(_raw(1.0, 9.0), rel_tol=0.0).holds is False
    assert finalize(_raw(7.0, 9.0), rel_tol=0.0).holds is True
    assert finalize(_raw(7.0 - 2 ** -40, 9.0), rel_tol=0.0).holds is False


def test_finalize_tolerance_weighs_the_absolute_values():
    # lhs = −1, loss_k = 3, loss_star = −1, term_s = 3: drop = 4, rhs = 1; tol = 0.25·(1 + 3 + 1 + 3) = 2,
    # so lhs = 1 − 2 holds at equality (a signed sum, 6 or 2, would give tol 1.5 or 0.5: fails)
    assert finalize(_raw(-1.0, 3.0, loss_star=-1.0, term_s=3.0), rel_tol=0.25).holds is True
    assert finalize(_raw(-1.0 - 2 ** -40, 3.0, loss_star=-1.0, term_s=3.0), rel_tol=0.25).holds is False
    # lhs = −3, loss_k = −1, loss_star = −3, term_s = 1: drop = 2, rhs = 1; tol = 0.5·(3 + 1 + 3 + 1) = 4
    assert finalize(_raw(-3.0, -1.0, loss_star=-3.0), rel_tol=0.5).holds is True
    assert finalize(_raw(-3.0 - 2 ** -40, -1.0, loss_star=-3.0), rel_tol=0.5).holds is False


def test_quasi_convexity_finalize_certified_violation_is_strict_beyond_the_tolerance():
    # drop = 6, term_c = 1·2, tol = 0.5·(1 + 7 + 1 + 1) = 5: violated iff lhs < 6 − 2 − 5 = −1
    at = finalize(_raw(-1.0, 7.0), rel_tol=0.5)
    assert bool(at.certified_violation) is False and at.holds is False and at.inconclusive is True
    assert at.rhs_cert == 4.0 and at.rhs == 5.0
    beyond = finalize(_raw(-1.0 - 2 ** -40, 7.0), rel_tol=0.5)
    assert bool(beyond.certified_violation) is True and beyond.holds is False and beyond.inconclusive is False
    # κ̄, β̄₂ sampled, not exact: never certified, inconclusive
    sampled = finalize(_raw(-1.0 - 2 ** -40, 7.0), rel_tol=0.5, certifiable=False)
    assert bool(sampled.certified_violation) is False and sampled.inconclusive is True
    # an infinite certification factor: no certified right-hand side, no violation
    inf = finalize(_raw(-100.0, 7.0, cert_factor=math.inf), rel_tol=0.0)
    assert bool(inf.certified_violation) is False and inf.rhs_cert is None
    assert inf.max_loss_cert is None and inf.cert_factor is None and inf.inconclusive is True


def test_finalize_certified_rhs_uses_the_certification_factor():
    # drop = 8, term_s = 1, cert_factor = 4: rhs_cert = 8 − 4 = 4, max_loss_cert = 0.5·4 = 2
    f = finalize(_raw(3.0, 9.0, cert_factor=4.0), rel_tol=0.0)
    assert f.rhs_cert == 4.0 and f.max_loss_cert == 2.0 and f.cert_factor == 4.0
    assert bool(f.certified_violation) is True and f.holds is False      # 3 < 4 (and < 7)
    assert bool(finalize(_raw(4.0, 9.0, cert_factor=4.0), rel_tol=0.0).certified_violation) is False


def test_quasi_convexity_finalize_convex_and_the_undefined_need():
    # drop = 3, lhs = 2: drop − lhs = 1 <= tol = 0.125·(2 + 4 + 1 + 1) = 1
    f = finalize(_raw(2.0, 4.0), rel_tol=0.125)
    assert f.convex is True and f.holds is True
    assert finalize(_raw(2.0 - 2 ** -40, 4.0), rel_tol=0.125).convex is False
    # κ_need = 2√H·(drop − lhs)/(max_loss·dist2) = 4·1/0.25, with dist2 < 1
    assert finalize(_raw(2.0, 4.0, dist2=0.5), rel_tol=0.125).kappa_need == 16.0
    assert finalize(_raw(2.0, 4.0, max_loss=0.0, term_s=0.0), rel_tol=0.125).kappa_need is None
    assert finalize(_raw(2.0, 4.0, dist2=0.0, term_s=0.0), rel_tol=0.125).kappa_need is None
    neg = finalize(_raw(2.0, 4.0, max_loss=-1.0, dist2=2.0), rel_tol=0.125)
    assert neg.kappa_need is None
    assert finalize(_raw(2.0, 4.0, max_loss=0.5, dist2=-2.0), rel_tol=0.125).kappa_need is None
    g = finalize(_raw(2.0, 4.0, kappa_dir=-math.inf, wc_ratio=-math.inf), rel_tol=0.125)
    assert g.kappa_dir is None and g.wc_ratio is None and g.wc_holds is True
    # a convex segment: κ_need <= 0 (lhs above the drop), negative by (drop − lhs)·4/(0.5·2)
    assert finalize(_raw(5.0, 4.0), rel_tol=0.0).kappa_need == -8.0


def test_quasi_convexity_wc_ratio_at_one_plus_rel_tol():
    fin = lambda w, tol: finalize(_raw(7.0, 9.0, wc_ratio=w), rel_tol=tol).wc_holds   # noqa: E731
    assert fin(1.5, 0.5) is True and fin(1.5 + 2 ** -40, 0.5) is False
    assert fin(1.25, 0.25) is True and fin(1.0, 0.0) is True and fin(1.0 + 2 ** -40, 0.0) is False
    # the default tolerance is REL_TOL = 1e-10
    assert quasi_convexity.REL_TOL == 1e-10
    dflt = lambda w: finalize(_raw(7.0, 9.0, wc_ratio=w)).wc_holds   # noqa: E731
    assert dflt(1 + 5e-11) is True and dflt(1 + 5e-10) is False


def test_finalize_default_tolerance_absorbs_rounding_only():
    # drop = 8, term_s = 1, rhs = 7; tol = 1e-10·(7 + 9 + 1 + 1) = 1.8e-9
    assert finalize(_raw(7.0 - 1e-9, 9.0)).holds is True
    assert finalize(_raw(7.0 - 1e-8, 9.0)).holds is False
    assert bool(finalize(_raw(6.0 - 1e-8, 9.0)).certified_violation) is True     # rhs_cert = 6


def test_finalize_takes_numbers_of_any_float_type():
    import numpy as np
    f = finalize(Segment(*(np.float32(v) for v in _raw(1.0, 9.0))), rel_tol=0.5)
    assert type(f.lhs) is float and type(f.kappa_bar) is float and f.holds is True


# -- judged_pair: L̂(θ_k) at the floor ------------------------------------------------------------------

def test_judged_pair_needs_a_finite_loss_at_least_the_floor():
    floor = 2.0 ** -900
    assert judged_pair(floor, floor) is True and judged_pair(1.0, floor) is True
    assert judged_pair(floor * (1 - 2 ** -52), floor) is False and judged_pair(0.0, floor) is False
    assert judged_pair(math.inf, floor) is False and judged_pair(math.nan, floor) is False


# -- summarize: counts and maxima ------------------------------------------------------------------------

def _pc(holds=True, viol=False, inconcl=False, convex=False, need=None, kdir=None, kbar=4.0, wc=None, wch=True,
        cert=None, loss_star=1.0, dist2=4.0):
    return PairCheck(loss_k=2.0, loss_star=loss_star, lhs=1.0, dist2=dist2, kappa_bar=kbar, beta2_bar=0.5,
                     max_loss=2.0, cert_factor=cert, kappa_dir=kdir, wc_ratio=wc, rhs=0.0, rhs_cert=None,
                     max_loss_cert=None, holds=holds, certified_violation=viol, inconclusive=inconcl,
                     kappa_need=need, convex=convex, wc_holds=wch)


def test_summarize_counts_each_verdict_and_takes_the_maxima():
    recs = [_pc(convex=True, need=-1.0, kdir=0.5, kbar=8.0, wc=0.25, cert=1.5, loss_star=0.5, dist2=9.0),
            _pc(holds=False, viol=True, need=2.0, kdir=None, kbar=6.0, wc=None, cert=None, loss_star=0.25, dist2=1.0),
            _pc(holds=False, inconcl=True, need=4.0, kdir=0.75, kbar=16.0, wc=0.5, wch=False, cert=1.25,
                loss_star=0.75, dist2=4.0),
            _pc(need=None, kdir=0.125, kbar=32.0, wc=0.125, cert=1.0, loss_star=0.125, dist2=2.25)]
    s = summarize(recs, 4, "final")
    assert s == QCSummary(heads=4, reference="final", pairs=4, holds=2, certified_violations=1, inconclusive=1,
                          convex=1, max_kappa_need=4.0, max_kappa_dir=0.75, max_kappa_bar=32.0, max_wc_ratio=0.5,
                          wc_holds=False, looseness=6.0 / 4.0, max_cert_factor=1.5, max_loss_star=0.75,
                          max_dist=3.0)
    assert type(s.max_dist) is float
    assert summarize(recs[:1] + recs[3:], 1, "ntk").wc_holds is True


def test_summarize_undefined_maxima_are_none():
    s = summarize([_pc(need=None), _pc(need=-2.0)], 2, "witness")
    assert s.max_kappa_need == -2.0 and s.looseness is None          # no positive κ_need
    # the looseness min κ̄ / max κ_need counts positive needs only (κ_need = 0: convex, no need)
    assert summarize([_pc(need=0.0)], 1, "final").looseness is None
    assert summarize([_pc(need=0.0), _pc(need=0.5, kbar=2.0)], 1, "final").looseness == 2.0 / 0.5
    assert s.max_kappa_dir is None and s.max_wc_ratio is None and s.max_cert_factor is None
    assert s.pairs == 2 and s.holds == 2 and s.convex == 0 and s.certified_violations == 0
    e = summarize([], 1, "final")
    assert e == QCSummary(1, "final", 0, 0, 0, 0, 0, None, None, None, None, True, None, None, None, None)
    # zero maxima are maxima (0.0 is not "undefined")
    z = summarize([_pc(kdir=0.0, wc=0.0, cert=0.0, loss_star=0.0, dist2=0.0)], 1, "final")
    assert (z.max_kappa_dir, z.max_wc_ratio, z.max_cert_factor, z.max_loss_star, z.max_dist) == (0.0,) * 5


# -- judge: each rule alone, then every pair in order ---------------------------------------------------

def _qr(holds=True, viol=False, wc=True):
    return PairOutcome(holds=holds, certified_violation=viol, wc_holds=wc)


def test_quasi_convexity_order_of_the_rules():
    # a certified violation is a pointwise fact: FAILED whatever the step size
    assert _v([_qr(viol=True)], [], True, "", [BAD]).verdict == Verdict.FAILED
    # a diverged run under a step size beyond the premise: premise violated, not failed
    assert _v([_qr()], [dict(heads=1, seed=0, step=1)], True, "", [BAD]).verdict == Verdict.PREMISE_VIOLATED
    few = judged_enough(2, 10, {"with L̂(θ_k) underflowed to 0 (vacuous)": 8}, "(θ_k, θ*) pairs")
    j = _v([_qr(), _qr()], [], True, "", [GOOD], few)
    assert j.verdict == Verdict.INCONCLUSIVE and "2 of 10" in j.reason
    enough = judged_enough(2, 2, {}, "(θ_k, θ*) pairs")
    assert _v([_qr(), _qr()], [], True, "", [GOOD], enough).fields()["verdict"] == "passed"


def test_quasi_convexity_each_rule_alone():
    ok3 = [_qr()] * 3
    assert _vr(_v(ok3, [], True, "", [GOOD])) == (PA, "(QC) and κ_dir <= κ hold on all 3 pairs")
    few = judged_enough(3, 4, {"with L̂(θ_k) underflowed to 0 (vacuous)": 1}, "(θ_k, θ*) pairs")
    assert _vr(_v(ok3, [], True, "", [GOOD], few)) == (
        PA, "(QC) and κ_dir <= κ hold on all 3 pairs (3 of 4 (θ_k, θ*) pairs judged (at least 50% needed); "
            "not judged: 1 with L̂(θ_k) underflowed to 0 (vacuous))")
    recs = [_qr(viol=True), _qr(holds=False, viol=True, wc=False), _qr(), _qr(wc=False), _qr(wc=False)]
    assert _vr(_v(recs, [], True, "")) == (FA, "2 certified (QC) violation(s), κ_dir > κ at 3 pair(s)")
    assert _vr(_v([_qr(), _qr(wc=False)], [], True, "")) == (FA, "0 certified (QC) violation(s), κ_dir > κ at 1 pair(s)")
    assert _vr(_v([_qr(viol=True)], [], True, "")) == (FA, "1 certified (QC) violation(s), κ_dir > κ at 0 pair(s)")
    assert _vr(_v(ok3, [], True, "", [BAD])) == (PV, BAD_REASON)
    assert _vr(_v(ok3, [{"heads": 1}] * 2, True, "", [GOOD])) == (FA, "2 run(s) became non-finite")
    assert _vr(_v(ok3, [], False, "no κ")) == (IN, "(QC) is not implied here: no κ")
    assert _vr(_v([], [], True, "", [GOOD])) == (IC, "no (θ_k, θ*) pair could be checked")
    lo = judged_enough(1, 4, {"from diverged runs": 3}, "(θ_k, θ*) pairs")
    assert _vr(_v(ok3, [], True, "", [GOOD], lo)) == (
        IC, "too little could be judged: 1 of 4 (θ_k, θ*) pairs judged (at least 50% needed); not judged: "
            "3 from diverged runs")
    assert _vr(_v([_qr(), _qr(holds=False), _qr(holds=False)], [], True, "")) == (
        IC, "(QC) fails at 2 pair(s) with the sampled max_seg L̂ only: refine --grid")
    assert _vr(_v([_qr(holds=False)], [], True, "")) == (
        IC, "(QC) fails at 1 pair(s) with the sampled max_seg L̂ only: refine --grid")


def test_quasi_convexity_every_pair_of_rules_in_order():
    lo = judged_enough(1, 4, {}, "(θ_k, θ*) pairs")
    dv = [{"heads": 1}]
    fails = [_qr(viol=True), _qr(holds=False)]
    # violation > premise > diverged > not implied > no pair > too few judged > fails sampled > passed
    assert _vr(_v(fails, dv, True, "", [BAD], lo))[0] == FA
    assert _vr(_v(fails, dv, True, "", [BAD], lo))[1].startswith("1 certified")
    assert _vr(_v([_qr(holds=False)], dv, True, "", [BAD], lo)) == (PV, BAD_REASON)
    assert _vr(_v([_qr(holds=False)], dv, True, "", [GOOD], lo)) == (FA, "1 run(s) became non-finite")
    assert _vr(_v([], dv, False, "w", [BAD], lo)) == (FA, "1 run(s) became non-finite")
    # not implied: violations and the premise are not judged
    assert _vr(_v(fails, [], False, "w", [BAD], lo)) == (IN, "(QC) is not implied here: w")
    assert _vr(_v([_qr(wc=False)], [], False, "w")) == (IN, "(QC) is not implied here: w")
    assert _vr(_v([], [], True, "", [GOOD], lo)) == (IC, "no (θ_k, θ*) pair could be checked")
    assert _vr(_v([_qr(holds=False)], [], True, "", [GOOD], lo))[1].startswith("too little could be judged: 1 of 4")
    enough = judged_enough(2, 2, {}, "(θ_k, θ*) pairs")
    assert _vr(_v([_qr(holds=False), _qr()], [], True, "", [GOOD], enough)) == (
        IC, "(QC) fails at 1 pair(s) with the sampled max_seg L̂ only: refine --grid")
    assert _vr(_v([_qr()], [], True, "", [GOOD], enough)) == (
        PA, "(QC) and κ_dir <= κ hold on all 1 pairs (2 of 2 (θ_k, θ*) pairs judged (at least 50% needed))")


def test_judge_reads_only_the_typed_record():
    # the premise field is the judgement returned as is (whatever its reason)
    own = Judgement(Verdict.PREMISE_VIOLATED, "step too large")
    r = QCRecord(pairs=(_qr(),), diverged=3, covered=True, why="", premise=own, judged=None)
    assert judge(r) is own
    assert judge(r._replace(covered=False, diverged=0)) == Judgement(Verdict.INFORMATIONAL, "(QC) is not implied here: ")
