"""The verdict rules on tiny inputs: a stated fraction of checkpoints (pairs)
must be judged, else INCONCLUSIVE with the count and the reasons; the GD step-size premise
(docs/theory.md §15, η·λ̄_max(θ₀) <= 1 with the certified upper bound) is measured and a violation is
PREMISE_VIOLATED for the rate checks; only a judged, held claim is PASSED.

Truths: hand-made records for the verdict functions; for the measured premise, NumPy's
eigvalsh of the dense Hessian (``jax.hessian``) at θ₀."""
import math

import jax
import numpy as np
import pytest

from mhajax.curvature.operators import dense_hessian
from mhajax.experiments import generalization, heads, ntk_margin, one_step, quasi_convexity
from mhajax.experiments.base import (MIN_JUDGED_FRACTION, batched_data, batched_init, gd_step_premise,
                                     judged_enough, premise_line, premise_violated, step_premise)
from mhajax.experiments.configs import DataConfig
from mhajax.verdict import Verdict


def test_judged_enough_states_the_count_and_the_reasons():
    ok, text = judged_enough(1, 11, {"with L̂ underflowed to 0": 10, "diverged": 0})
    assert not ok and text.startswith("1 of 11 checkpoints judged") and "10 with L̂ underflowed to 0" in text
    assert "diverged" not in text                     # reasons with a zero count are left out
    assert judged_enough(6, 11, {})[0] and not judged_enough(5, 11, {})[0]
    assert not judged_enough(0, 0, {})[0]
    assert MIN_JUDGED_FRACTION == 0.5


def test_step_premise_rule_and_closed_form_beside_it():
    p = step_premise(1.0, [0.3, 0.25], rho0=[1000.0, 800.0])
    assert p["holds"] is True and p["max_lr"] == pytest.approx(1 / 0.3)
    assert p["closed_form_max_lr"] == pytest.approx(1e-3) and p["ratio"] == pytest.approx(1000 / 0.3)
    assert premise_violated(p) is None
    bad = step_premise(1e8, [0.3, 0.25])
    assert bad["holds"] is False
    v = premise_violated([p, bad])
    assert v["verdict"] == Verdict.PREMISE_VIOLATED.value and v["passed"] is None
    assert "0.3" in v["verdict_reason"] and "η = 1e+08" in v["verdict_reason"]
    assert "VIOLATED" in premise_line(bad) and "holds" in premise_line(p)
    assert step_premise(1.0, [None])["holds"] is None          # not measured: never a violation
    assert premise_violated(step_premise(1.0, [None])) is None


def test_measured_premise_bounds_the_true_lambda_max():
    """λ̄_max(θ₀) >= λ_max(∇²L̂(θ₀)) (certified), and the closed form ρ₀ >= λ̄_max's truth too."""
    d = DataConfig(n=8, tokens=4, dim=6, num_clusters=2).validate()
    seeds = [0, 1]
    X, y = batched_data(d, seeds)
    th0 = batched_init(d, seeds, 2)
    p = gd_step_premise(1.0, th0, X, y)
    for s in range(2):
        th = jax.tree_util.tree_map(lambda a: a[s], th0)
        lam = np.linalg.eigvalsh(np.asarray(jax.jit(dense_hessian)(th, X[s], y[s])))[-1]
        assert lam <= p["lambda_max_upper"][s] * (1 + 1e-9) + 1e-12
        assert p["lambda_max_upper"][s] <= p["rho0"][s]
    assert p["holds"] is True
    assert gd_step_premise(1e8, th0, X, y)["holds"] is False


# -- the rate checks: the premise -----------------------------------------------------------------

GOOD, BAD = step_premise(1.0, [0.3]), step_premise(1e8, [0.3])


def _qc(holds=True, viol=False, wc=True):
    return dict(holds=holds, certified_violation=viol, wc_holds=wc, judged=True)


def test_quasi_convexity_order_of_the_rules():
    # a certified violation is a pointwise fact: FAILED whatever the step size
    assert quasi_convexity._verdict([_qc(viol=True)], [], True, "", [BAD])["verdict"] == Verdict.FAILED.value
    # a diverged run under a step size beyond the premise: premise violated, not failed
    v = quasi_convexity._verdict([_qc()], [dict(heads=1, seed=0, step=1)], True, "", [BAD])
    assert v["verdict"] == Verdict.PREMISE_VIOLATED.value
    few = judged_enough(2, 10, {"with L̂(θ_k) underflowed to 0 (vacuous)": 8}, "(θ_k, θ*) pairs")
    v = quasi_convexity._verdict([_qc(), _qc()], [], True, "", [GOOD], few)
    assert v["verdict"] == Verdict.INCONCLUSIVE.value and "2 of 10" in v["verdict_reason"]
    enough = judged_enough(2, 2, {}, "(θ_k, θ*) pairs")
    assert quasi_convexity._verdict([_qc(), _qc()], [], True, "", [GOOD], enough)["verdict"] == "passed"


def test_verdict_exit_codes():
    codes = {v: v.exit_code for v in Verdict}
    assert codes[Verdict.PASSED] == 0 and codes[Verdict.INCONCLUSIVE] == 3
    assert codes[Verdict.PREMISE_VIOLATED] == 4 and codes[Verdict.INFORMATIONAL] == 5
    assert math.isfinite(GOOD["max_lr"])


# -- the verdict code of the other experiments, on hand-made records ------------------------------
# Each `_verdict` applies its rules in a fixed order; the tests below pin every rule alone, each
# pair of rules (the one earlier in the order wins), the exact boundaries, and the reason's text
# (counts included). Records are dicts shaped like the ones each module's `run` builds.

def _vr(v):
    """(verdict, reason) of verdict fields, with `passed` checked against the verdict."""
    assert v["passed"] is {Verdict.PASSED.value: True, Verdict.FAILED.value: False}.get(v["verdict"])
    return v["verdict"], v["verdict_reason"]


BAD_REASON = premise_violated([BAD])["verdict_reason"]
PV, FA, PA = Verdict.PREMISE_VIOLATED.value, Verdict.FAILED.value, Verdict.PASSED.value
IC, IN, NR = Verdict.INCONCLUSIVE.value, Verdict.INFORMATIONAL.value, Verdict.NOT_REACHED.value


# -- generalization: premise, diverged, slope above the band, not claimed, undefined, passed ------

def _gv(test=True, gap=True, train=True):
    return {k: dict(classification="x", holds=h) for k, h in (("test", test), ("gap", gap), ("train", train))}


def test_generalization_each_rule_alone():
    g = generalization._verdict
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
    g = generalization._verdict
    dv = [{"n": 32}]
    # premise > diverged > slope failed > (not claimed) > undefined > passed
    assert _vr(g(_gv(test=False), dv, True, "", [BAD])) == (PV, BAD_REASON)
    assert _vr(g(_gv(test=False), [], True, "", [BAD])) == (PV, BAD_REASON)
    assert _vr(g(_gv(test=None), [], True, "", [BAD])) == (PV, BAD_REASON)
    assert _vr(g(_gv(test=False), dv, True, "")) == (FA, "1 run(s) became non-finite")
    assert _vr(g(_gv(test=None), dv, True, "")) == (FA, "1 run(s) became non-finite")
    assert _vr(g(_gv(test=None, gap=False), [], True, "")) == (
        FA, "the gap slope decays more slowly than Õ(1/n) allows")
    # where the rate is not claimed the premise and the slopes are not judged, a divergence is
    assert _vr(g(_gv(test=False, gap=None), [], False, "w", [BAD])) == (IN, "the Õ(1/n) rate is not claimed here: w")
    assert _vr(g(_gv(), dv + dv, False, "w", [BAD])) == (FA, "2 run(s) became non-finite")


# -- heads: threshold, growth, contradictions, _at, the verdict ------------------------------------

def test_heads_threshold_is_c_log_n_over_n():
    for n, c in ((2, 1.0), (64, 1.0), (100, 2.5), (4096, 0.3)):
        assert heads.threshold(n, c) == pytest.approx(c * np.log(n) / n, rel=1e-15, abs=0)
    assert heads.threshold(math.e ** 2, 3.0) == pytest.approx(6.0 / math.e ** 2, rel=1e-15, abs=0)


def _by_n(hmins):
    return {64 * 2 ** i: dict(smallest_heads=h) for i, h in enumerate(hmins)}


def test_heads_growth_needs_every_n_nondecreasing_and_larger_at_the_end():
    cases = {(1, 2, 4): True, (1, 1, 2): True, (1, 2, 2): True, (2, 4): True,
             (2, 2, 2): False, (2, 2): False, (4, 2): False, (1, 4, 2): False, (2, 1, 4): False,
             (1, None, 4): False, (None, 4): False, (1, None): False, (4,): False}
    for h, observed in cases.items():
        g = heads.growth(_by_n(h))
        assert g["observed"] is observed, h
        assert g["hmin"] == list(h)
    assert heads.growth({}) == dict(observed=False, hmin=[])


def _hn(hmin, ht=None, grid=(1, 2, 4), str_keys=False):
    """One n of heads' by_n: every H >= hmin reaches the regime (none when hmin is None)."""
    bh = {(str(H) if str_keys else H): dict(reached=hmin is not None and H >= hmin) for H in grid}
    return dict(smallest_heads=hmin, H_theory=ht, by_heads=bh,
                tightness=None if ht is None or hmin is None else ht / hmin)


def test_heads_at_reads_int_or_string_keys():
    assert heads._at({2: "a", 4: "b"}, 4) == "b"
    assert heads._at({"2": "a", "4": "b"}, 4) == "b"
    assert heads._at({2: "int", "2": "str"}, 2) == "int"
    with pytest.raises(KeyError):
        heads._at({2: "a"}, 4)


def test_heads_contradictions_are_h_at_or_above_h_theory_that_miss():
    by_n = {64: _hn(4, ht=2), 128: _hn(None, ht=None), 256: _hn(None, ht=4.0, str_keys=True),
            512: _hn(4, ht=2.5), 1024: _hn(2, ht=1)}
    # n=64: H=2 (== H_theory) misses, H=4 reaches; n=128 has no H_theory; n=256: H=4 (== 4.0)
    # misses; n=512: H=2 < 2.5 is not covered by the condition, H=4 reaches; n=1024: H=1 misses
    assert heads.contradictions(by_n, (1, 2, 4)) == [(64, 2), (256, 4), (1024, 1)]
    assert heads.contradictions(by_n, ()) == []
    assert heads.contradictions({64: _hn(1, ht=1)}, (1, 2, 4)) == []


def test_heads_each_rule_alone():
    v = heads._verdict
    grid = (1, 2, 4)
    up = {64: _hn(1), 128: _hn(2), 256: _hn(4)}
    assert _vr(v(up, [], True, "", [GOOD], grid)) == (
        PA, "H_min(n) grows with n ({64: 1, 128: 2, 256: 4}) and stays within the sufficient condition")
    # H_theory at every n: the range of H_theory/H_min is stated (min…max)
    th = {64: _hn(1, ht=2), 128: _hn(2, ht=8), 256: _hn(4, ht=4)}
    assert _vr(v(th, [], True, "", [GOOD], grid)) == (
        PA, "H_min(n) grows with n ({64: 1, 128: 2, 256: 4}) and stays within the sufficient condition"
            "; H_theory(n)/H_min(n) = 1…4")
    # H_theory missing at one n: no range
    part = {64: _hn(1, ht=2), 128: _hn(2), 256: _hn(4, ht=4)}
    assert _vr(v(part, [], True, "", [GOOD], grid))[1].endswith("stays within the sufficient condition")
    flat = {64: _hn(2), 128: _hn(2)}
    assert _vr(v(flat, [], True, "", [GOOD], grid)) == (
        NR, "growth with n not observed: H_min(n) = {64: 2, 128: 2}; the sufficient condition is neither "
            "contradicted nor confirmed here")
    flat_th = {64: _hn(2, ht=3), 128: _hn(2, ht=5)}
    assert _vr(v(flat_th, [], True, "", [GOOD], grid))[1].endswith("confirmed here; H_theory(n)/H_min(n) = 1.5…2.5")
    miss = {64: _hn(1), 128: _hn(None), 256: _hn(None)}
    assert _vr(v(miss, [], True, "", [GOOD], grid)) == (NR, "n = [128, 256] reach the regime at no H on the grid")
    bad = {64: _hn(4, ht=2), 128: _hn(4, ht=1)}
    assert _vr(v(bad, [], True, "", [GOOD], grid)) == (
        FA, "H >= H_theory(n) misses the regime at (n, H) = [(64, 2), (128, 1), (128, 2)]: the sufficient "
            "width condition is contradicted")
    assert _vr(v(up, [], False, "not here", [GOOD], grid)) == (IN, "the Õ(1/n) regime is not claimed here: not here")
    assert _vr(v(up, [{"n": 64}, {"n": 128}, {"n": 64}], True, "", [GOOD], grid)) == (FA, "3 run(s) became non-finite")
    assert _vr(v(up, [], True, "", [None, BAD], grid)) == (PV, BAD_REASON)
    assert _vr(v(up, [], True, "")) [0] == PA                    # defaults: no premise, no grid


def test_heads_every_pair_of_rules_in_order():
    v = heads._verdict
    grid, dv = (1, 2, 4), [{"n": 64}]
    bad = {64: _hn(4, ht=2), 128: _hn(None)}              # a contradiction and an n reached at no H
    flat = {64: _hn(2), 128: _hn(2)}
    # premise > diverged > not claimed > contradiction > no H reaches > no growth > passed
    assert _vr(v(bad, dv, True, "", [BAD], grid)) == (PV, BAD_REASON)
    assert _vr(v(flat, [], True, "", [BAD], grid)) == (PV, BAD_REASON)
    assert _vr(v(bad, dv, True, "", [GOOD], grid)) == (FA, "1 run(s) became non-finite")
    assert _vr(v(bad, dv, False, "w", [BAD], grid)) == (FA, "1 run(s) became non-finite")
    assert _vr(v(bad, [], False, "w", [BAD], grid)) == (IN, "the Õ(1/n) regime is not claimed here: w")
    assert _vr(v(bad, [], True, "", [GOOD], grid)) == (
        FA, "H >= H_theory(n) misses the regime at (n, H) = [(64, 2)]: the sufficient width condition is "
            "contradicted")
    nogrow = {64: _hn(4), 128: _hn(None), 256: _hn(1)}
    assert _vr(v(nogrow, [], True, "", [GOOD], grid)) == (NR, "n = [128] reach the regime at no H on the grid")
    assert _vr(v(flat, [], True, "", [GOOD], grid))[0] == NR


# -- ntk_margin: every (H, seed) must pass --------------------------------------------------------

def test_ntk_margin_counts_the_failing_runs():
    rec = lambda ok: dict(heads=1, seed=0, passed=ok)
    assert _vr(ntk_margin._verdict([rec(True)] * 3)) == (
        PA, "all 3 (H, seed) certified separable, gap and init condition hold")
    assert _vr(ntk_margin._verdict([rec(True), rec(False), rec(True), rec(False), rec(True)])) == (
        FA, "2 of 5 (H, seed) fail a criterion")
    assert _vr(ntk_margin._verdict([rec(False)])) == (FA, "1 of 1 (H, seed) fail a criterion")
    assert _vr(ntk_margin._verdict([])) == (Verdict.INCONCLUSIVE, "no (H, seed) was run: nothing judged")


# -- one_step: informational off the mixture, violated > unresolved/undefined > holds -------------

def _parts(**rules):
    base = {k: dict(rule="holds", text=f"{k} ok") for k in ("a", "b1", "b2", "c")}
    for k, r in rules.items():
        base[k] = dict(rule=r, text=f"{k} text")
    return dict(parts=base)


def test_one_step_combine_verdict():
    cv = one_step.combine_verdict
    ok = {"zero": _parts(), "random-u": _parts()}
    assert _vr(cv(ok, True, "mixture")) == (PA, "(a), (b1), (b2), (c) hold from every start (zero, random-u)")
    assert _vr(cv({"zero": _parts(a="violated")}, False, "sparse")) == (
        IN, "the claim is about the tokenized mixture, not --data sparse")
    mixed = {"zero": _parts(b1="undefined", c="violated"), "random-u": _parts(a="unresolved", b2="violated")}
    assert _vr(cv(mixed, True, "mixture")) == (FA, "zero (c): c text; random-u (b2): b2 text")
    unsure = {"zero": _parts(b1="undefined"), "zero-signs": _parts(), "random-u": _parts(a="unresolved", c="undefined")}
    assert _vr(cv(unsure, True, "mixture")) == (
        IC, "zero (b1): b1 text [undefined]; random-u (a): a text [unresolved]; random-u (c): c text [undefined]")


# -- quasi_convexity: finalize's inequalities at their edges, then the verdict ---------------------

def _raw(lhs, loss_k, loss_star=1.0, term_s=1.0, cert_factor=2.0, wc_ratio=0.5, kappa_dir=0.25,
         max_loss=0.5, dist2=2.0):
    """segment_check's numbers with H = 4 (√H = 2): term_s = κ̄/(2√H)·max_loss·dist2."""
    return dict(lhs=lhs, loss_k=loss_k, loss_star=loss_star, dist2=dist2, max_loss=max_loss,
                kappa_bar=term_s * 4.0 / (max_loss * dist2) if max_loss * dist2 else 4.0, beta2_bar=0.125, cert_factor=cert_factor,
                kappa_dir=kappa_dir, wc_ratio=wc_ratio, heads=4.0)


def test_quasi_convexity_finalize_holds_at_equality_with_the_tolerance():
    # drop = 8, term_s = 1, tol = 0.5·(1 + 9 + 1 + 1) = 6: lhs >= 8 − 1 − 6 = 1
    f = quasi_convexity.finalize(_raw(1.0, 9.0), rel_tol=0.5)
    assert f["holds"] is True and f["rhs"] == 7.0 and bool(f["certified_violation"]) is False
    assert f["inconclusive"] is False and f["convex"] is False
    assert f["rhs_cert"] == 6.0 and f["max_loss_cert"] == 1.0 and f["cert_factor"] == 2.0
    assert f["kappa_need"] == 2 * 2 * (8.0 - 1.0) / (0.5 * 2.0) == 28.0
    assert f["kappa_dir"] == 0.25 and f["wc_ratio"] == 0.5 and f["wc_holds"] is True
    assert "heads" not in f and f["lhs"] == 1.0 and f["kappa_bar"] == 4.0 and f["beta2_bar"] == 0.125
    below = quasi_convexity.finalize(_raw(1.0 - 2 ** -40, 9.0), rel_tol=0.5)
    assert below["holds"] is False and bool(below["certified_violation"]) is False and below["inconclusive"] is True
    # without the tolerance: 1 < 7 fails
    assert quasi_convexity.finalize(_raw(1.0, 9.0), rel_tol=0.0)["holds"] is False
    assert quasi_convexity.finalize(_raw(7.0, 9.0), rel_tol=0.0)["holds"] is True


def test_quasi_convexity_finalize_certified_violation_is_strict_beyond_the_tolerance():
    # drop = 6, term_c = 1·2, tol = 0.5·(1 + 7 + 1 + 1) = 5: violated iff lhs < 6 − 2 − 5 = −1
    at = quasi_convexity.finalize(_raw(-1.0, 7.0), rel_tol=0.5)
    assert bool(at["certified_violation"]) is False and at["holds"] is False and at["inconclusive"] is True
    assert at["rhs_cert"] == 4.0 and at["rhs"] == 5.0
    beyond = quasi_convexity.finalize(_raw(-1.0 - 2 ** -40, 7.0), rel_tol=0.5)
    assert bool(beyond["certified_violation"]) is True and beyond["holds"] is False and beyond["inconclusive"] is False
    # κ̄, β̄₂ sampled, not exact: never certified, inconclusive
    sampled = quasi_convexity.finalize(_raw(-1.0 - 2 ** -40, 7.0), rel_tol=0.5, certifiable=False)
    assert bool(sampled["certified_violation"]) is False and sampled["inconclusive"] is True
    # an infinite certification factor: no certified right-hand side, no violation
    inf = quasi_convexity.finalize(_raw(-100.0, 7.0, cert_factor=math.inf), rel_tol=0.0)
    assert bool(inf["certified_violation"]) is False and inf["rhs_cert"] is None
    assert inf["max_loss_cert"] is None and inf["cert_factor"] is None and inf["inconclusive"] is True


def test_quasi_convexity_finalize_convex_and_the_undefined_need():
    # drop = 3, lhs = 2: drop − lhs = 1 <= tol = 0.125·(2 + 4 + 1 + 1) = 1
    f = quasi_convexity.finalize(_raw(2.0, 4.0), rel_tol=0.125)
    assert f["convex"] is True and f["holds"] is True
    assert quasi_convexity.finalize(_raw(2.0 - 2 ** -40, 4.0), rel_tol=0.125)["convex"] is False
    # κ_need = 2√H·(drop − lhs)/(max_loss·dist2) = 4·1/0.25, with dist2 < 1
    assert quasi_convexity.finalize(_raw(2.0, 4.0, dist2=0.5), rel_tol=0.125)["kappa_need"] == 16.0
    assert quasi_convexity.finalize(_raw(2.0, 4.0, max_loss=0.0, term_s=0.0), rel_tol=0.125)["kappa_need"] is None
    assert quasi_convexity.finalize(_raw(2.0, 4.0, dist2=0.0, term_s=0.0), rel_tol=0.125)["kappa_need"] is None
    neg = quasi_convexity.finalize(_raw(2.0, 4.0, max_loss=-1.0, dist2=2.0), rel_tol=0.125)
    assert neg["kappa_need"] is None
    assert quasi_convexity.finalize(_raw(2.0, 4.0, max_loss=0.5, dist2=-2.0), rel_tol=0.125)["kappa_need"] is None
    g = quasi_convexity.finalize(_raw(2.0, 4.0, kappa_dir=-math.inf, wc_ratio=-math.inf), rel_tol=0.125)
    assert g["kappa_dir"] is None and g["wc_ratio"] is None and g["wc_holds"] is True


def test_quasi_convexity_wc_ratio_at_one_plus_rel_tol():
    fin = lambda w, tol: quasi_convexity.finalize(_raw(7.0, 9.0, wc_ratio=w), rel_tol=tol)["wc_holds"]
    assert fin(1.5, 0.5) is True and fin(1.5 + 2 ** -40, 0.5) is False
    assert fin(1.25, 0.25) is True and fin(1.0, 0.0) is True and fin(1.0 + 2 ** -40, 0.0) is False
    # the default tolerance is REL_TOL = 1e-10
    assert quasi_convexity.REL_TOL == 1e-10
    dflt = lambda w: quasi_convexity.finalize(_raw(7.0, 9.0, wc_ratio=w))["wc_holds"]
    assert dflt(1 + 5e-11) is True and dflt(1 + 5e-10) is False


def _qr(holds=True, viol=False, wc=True):
    return dict(holds=holds, certified_violation=viol, wc_holds=wc, judged=True)


def test_quasi_convexity_each_rule_alone():
    v = quasi_convexity._verdict
    ok3 = [_qr()] * 3
    assert _vr(v(ok3, [], True, "", [GOOD])) == (PA, "(QC) and κ_dir <= κ hold on all 3 pairs")
    few = judged_enough(3, 4, {"with L̂(θ_k) underflowed to 0 (vacuous)": 1}, "(θ_k, θ*) pairs")
    assert _vr(v(ok3, [], True, "", [GOOD], few)) == (
        PA, "(QC) and κ_dir <= κ hold on all 3 pairs (3 of 4 (θ_k, θ*) pairs judged (at least 50% needed); "
            "not judged: 1 with L̂(θ_k) underflowed to 0 (vacuous))")
    recs = [_qr(viol=True), _qr(holds=False, viol=True, wc=False), _qr(), _qr(wc=False), _qr(wc=False)]
    assert _vr(v(recs, [], True, "")) == (FA, "2 certified (QC) violation(s), κ_dir > κ at 3 pair(s)")
    assert _vr(v([_qr(), _qr(wc=False)], [], True, "")) == (FA, "0 certified (QC) violation(s), κ_dir > κ at 1 pair(s)")
    assert _vr(v([_qr(viol=True)], [], True, "")) == (FA, "1 certified (QC) violation(s), κ_dir > κ at 0 pair(s)")
    assert _vr(v(ok3, [], True, "", [BAD])) == (PV, BAD_REASON)
    assert _vr(v(ok3, [{"heads": 1}] * 2, True, "", [GOOD])) == (FA, "2 run(s) became non-finite")
    assert _vr(v(ok3, [], False, "no κ")) == (IN, "(QC) is not implied here: no κ")
    assert _vr(v([], [], True, "", [GOOD])) == (IC, "no (θ_k, θ*) pair could be checked")
    lo = judged_enough(1, 4, {"from diverged runs": 3}, "(θ_k, θ*) pairs")
    assert _vr(v(ok3, [], True, "", [GOOD], lo)) == (
        IC, "too little could be judged: 1 of 4 (θ_k, θ*) pairs judged (at least 50% needed); not judged: "
            "3 from diverged runs")
    assert _vr(v([_qr(), _qr(holds=False), _qr(holds=False)], [], True, "")) == (
        IC, "(QC) fails at 2 pair(s) with the sampled max_seg L̂ only: refine --grid")


def test_quasi_convexity_every_pair_of_rules_in_order():
    v = quasi_convexity._verdict
    lo = judged_enough(1, 4, {}, "(θ_k, θ*) pairs")
    dv = [{"heads": 1}]
    fails = [_qr(viol=True), _qr(holds=False)]
    # violation > premise > diverged > not implied > no pair > too few judged > fails sampled > passed
    assert _vr(v(fails, dv, True, "", [BAD], lo))[0] == FA
    assert _vr(v(fails, dv, True, "", [BAD], lo))[1].startswith("1 certified")
    assert _vr(v([_qr(holds=False)], dv, True, "", [BAD], lo)) == (PV, BAD_REASON)
    assert _vr(v([_qr(holds=False)], dv, True, "", [GOOD], lo)) == (FA, "1 run(s) became non-finite")
    assert _vr(v([], dv, False, "w", [BAD], lo)) == (FA, "1 run(s) became non-finite")
    # not implied: violations and the premise are not judged
    assert _vr(v(fails, [], False, "w", [BAD], lo)) == (IN, "(QC) is not implied here: w")
    assert _vr(v([], [], True, "", [GOOD], lo)) == (IC, "no (θ_k, θ*) pair could be checked")
    assert _vr(v([_qr(holds=False)], [], True, "", [GOOD], lo))[1].startswith("too little could be judged: 1 of 4")
    enough = judged_enough(2, 2, {}, "(θ_k, θ*) pairs")
    assert _vr(v([_qr(holds=False), _qr()], [], True, "", [GOOD], enough)) == (
        IC, "(QC) fails at 1 pair(s) with the sampled max_seg L̂ only: refine --grid")
