"""The quasi-convexity check's judge and its feeders on hand-made typed records (no GD, no jit):
:func:`summarize`'s counts and maxima, and :func:`judge`'s rules, each alone and each pair in order
(the per-pair verdicts of :func:`mhajax.analysis.quasi_convexity.finalize`:
tests/analysis/test_quasi_convexity.py).

Truths: the rules of docs/theory.md §10 evaluated by hand on round numbers (powers of two, so
every comparison is exact), and the reason texts as the rules state them."""

from mhajax.analysis.step_premise import premise_violated, step_premise
from mhajax.experiments.base import judged_enough
from mhajax.analysis.quasi_convexity import PairCheck
from mhajax.experiments.quasi_convexity import PairOutcome, QCRecord, QCSummary, judge, summarize
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
