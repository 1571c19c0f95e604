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
from mhajax.experiments import census, convergence, variants, weak_convexity
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


# -- weak-convexity: the judged fraction --------------------------------------------------------

def _wc_records(judged, underflowed):
    recs = [dict(heads=4, seed=0, step=k, all_hold=True, loss_defined=True) for k in range(judged)]
    recs += [dict(heads=4, seed=0, step=judged + k, all_hold=None, loss_defined=False) for k in range(underflowed)]
    return recs


def test_weak_convexity_one_of_eleven_is_inconclusive_with_the_reason():
    recs = _wc_records(1, 10)
    judged = [r for r in recs if r["all_hold"] is not None]
    v = weak_convexity._verdict(recs, judged, [], [], True)
    assert v["verdict"] == Verdict.INCONCLUSIVE.value
    assert "1 of 11 checkpoints judged" in v["verdict_reason"] and "10 with L̂ underflowed" in v["verdict_reason"]


def test_weak_convexity_enough_judged_passes_and_nothing_implied_is_informational():
    recs = _wc_records(6, 5)
    judged = [r for r in recs if r["all_hold"] is not None]
    assert weak_convexity._verdict(recs, judged, [], [], True)["verdict"] == Verdict.PASSED.value
    assert weak_convexity._verdict(recs, judged, [], [], False)["verdict"] == Verdict.INFORMATIONAL.value
    assert weak_convexity._verdict(recs, judged, [recs[0]], [], True)["verdict"] == Verdict.FAILED.value


def test_variants_fraction_counts_only_models_that_imply_something():
    why = {"with L̂ underflowed to 0 (ratios undefined)": 7}
    assert variants._verdict([], [], 3, 10, True, why)["verdict"] == Verdict.INCONCLUSIVE.value
    assert variants._verdict([], [], 0, 0, False, {})["verdict"] == Verdict.INFORMATIONAL.value
    assert variants._verdict([], [], 6, 10, True, {})["verdict"] == Verdict.PASSED.value


# -- the rate checks: the premise -----------------------------------------------------------------

GOOD, BAD = step_premise(1.0, [0.3]), step_premise(1e8, [0.3])


def test_convergence_premise_violated_before_anything_else():
    v = convergence._verdict([True], [dict(heads=1, seed=0, step=3)], True, "", [GOOD, BAD])
    assert v["verdict"] == Verdict.PREMISE_VIOLATED.value and "λ̄_max" in v["verdict_reason"]
    assert convergence._verdict([True], [], True, "", [GOOD])["verdict"] == Verdict.PASSED.value
    # where the rate is not claimed, the premise does not matter: informational
    assert convergence._verdict([True], [], False, "why", [BAD])["verdict"] == Verdict.INFORMATIONAL.value


def test_convergence_fails_a_slow_rate_only_where_separability_is_certified():
    """A slope above the band is FAILED only for H whose NTK separability at θ₀ the witness
    certified; where it is not (digits, npz, another head: no witness; or γ_w <= 0), the theorem's
    premise is unverified and the verdict is INCONCLUSIVE, with the reason."""
    v = convergence._verdict([True, False], [], True, "", [GOOD, GOOD], [True, True])
    assert v["verdict"] == Verdict.FAILED.value
    for seps in ([True, None], [True, False], [None, None], []):
        v = convergence._verdict([True, False], [], True, "", [GOOD, GOOD], seps)
        assert v["verdict"] == Verdict.INCONCLUSIVE.value and "not certified" in v["verdict_reason"], seps
    # a fast rate passes whatever the witness says; a diverged run fails whatever it says
    assert convergence._verdict([True], [], True, "", [GOOD], [None])["verdict"] == Verdict.PASSED.value
    assert convergence._verdict([False], [dict(heads=1, seed=0, step=3)], True, "", [GOOD],
                                [None])["verdict"] == Verdict.FAILED.value


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


# -- variants: why checkpoints were not judged, and the verdict ------------------------------------

UNDERFLOW, NO_INEQ = "with L̂ underflowed to 0 (ratios undefined)", "with no implied inequality defined"


def test_variants_why_not_judged_counts_each_reason_once():
    fi = np.finfo(np.float64)
    tiny = fi.tiny / fi.eps
    recs = [dict(passed=True, loss=0.0), dict(passed=False, diverged=True),            # judged: not counted
            dict(passed=None, diverged=True, loss=0.0), dict(passed=None, diverged=True),
            dict(passed=None, diverged=False, loss=0.0), dict(passed=None, loss=None),
            dict(passed=None, loss=math.nan), dict(passed=None, loss=np.nextafter(tiny, 0)),
            dict(passed=None, diverged=False, loss=tiny), dict(passed=None, loss=0.5)]
    assert variants._why_not_judged(recs) == {"diverged": 2, UNDERFLOW: 4, NO_INEQ: 2}
    assert variants._why_not_judged([]) == {"diverged": 0, UNDERFLOW: 0, NO_INEQ: 0}
    assert list(variants._why_not_judged([])) == ["diverged", UNDERFLOW, NO_INEQ]


def test_variants_each_rule_and_every_pair_in_order():
    v = variants._verdict
    why = {"diverged": 0, UNDERFLOW: 6, NO_INEQ: 0}
    dv, fl = [("softmax", 1, 0), ("linear", 4, 0)], [dict(model="softmax")] * 3
    assert _vr(v([], [], 5, 10, True, why)) == (
        PA, f"every implied inequality held: 5 of 10 checkpoints judged (at least 50% needed); not judged: 6 {UNDERFLOW}")
    assert _vr(v([], [], 4, 10, True, why)) == (
        IC, f"too little could be judged: 4 of 10 checkpoints judged (at least 50% needed); not judged: 6 {UNDERFLOW}")
    assert _vr(v([], [], 1, 1, True)) == (PA, "every implied inequality held: 1 of 1 checkpoints judged (at least 50% needed)")
    assert _vr(v([], [], 0, 0, True)) == (IC, "too little could be judged: 0 of 0 checkpoints judged (at least 50% needed)")
    assert _vr(v([], [], 0, 4, False, why)) == (IN, "no chosen (model, loss) pair implies an inequality")
    assert _vr(v(fl, [], 9, 10, True, why)) == (FA, "an implied inequality failed at 3 checkpoint(s)")
    assert _vr(v([], dv, 9, 10, True, why)) == (FA, "2 (model, H, seed) run(s) diverged")
    # diverged > failed > implies nothing > too few judged > passed
    assert _vr(v(fl, dv, 0, 10, False, why)) == (FA, "2 (model, H, seed) run(s) diverged")
    assert _vr(v(fl, [], 0, 10, False, why)) == (FA, "an implied inequality failed at 3 checkpoint(s)")
    assert _vr(v([], [], 0, 10, False, why))[0] == IN


# -- census: diverged, not derived, nothing judged, certified over the bound, straddling, passed ---

def _cr(neg_lo, neg_hi, bound=64, heads_=1, seed=0, step=0, valid=True, n_neg=0):
    return dict(heads=heads_, seed=seed, step=step, diverged=False, valid=valid, n_neg_weights=n_neg,
                neg_lo=neg_lo, neg_hi=neg_hi, bound=bound)


def test_census_each_rule_alone():
    v = census._verdict
    ok = [_cr(10, 16), _cr(32, 32, bound=256, heads_=4), _cr(64, 64, step=10)]   # N₋ = H·d² holds
    assert _vr(v(ok, "softmax")) == (PA, "N₋ <= H·d² at all 3 checkpoints (largest certified N₋/(H·d²) = 1)")
    assert _vr(v([_cr(1, 24), _cr(0, 3, bound=8)], "softmax")) == (
        PA, "N₋ <= H·d² at all 2 checkpoints (largest certified N₋/(H·d²) = 0.375)")
    dv = dict(heads=1, seed=0, step=5, diverged=True, diverged_at_step=3)
    assert _vr(v(ok + [dv, dv], "softmax")) == (FA, "2 trajectory point(s) became non-finite")
    assert _vr(v(ok, "linear")) == (
        IN, "N₋ <= H·d² is derived for softmax heads (linear in U), not --model linear: counts reported only")
    assert _vr(v([_cr(1, 2, valid=False), _cr(1, 2, n_neg=1)], "softmax")) == (
        IC, "no checkpoint had a valid structure with ℓ'' >= 0")
    assert _vr(v([], "softmax"))[0] == IC
    over = [_cr(10, 16), _cr(300, 310, bound=256, heads_=4, seed=1, step=10), _cr(65, 70, seed=2, step=20)]
    assert _vr(v(over, "softmax")) == (FA, "N₋ >= 300 > H·d² = 256 at H=4 seed=1 step=10 (2 checkpoint(s))")
    assert _vr(v([_cr(10, 16), _cr(64, 65)], "softmax")) == (
        IC, "1 bracket(s) straddle H·d², 0 checkpoint(s) not judged")
    assert _vr(v([_cr(10, 16), _cr(1, 2, valid=False), _cr(1, 2, n_neg=2)], "softmax")) == (
        IC, "0 bracket(s) straddle H·d², 2 checkpoint(s) not judged")


def test_census_every_pair_of_rules_in_order():
    v = census._verdict
    dv = dict(heads=1, seed=0, step=5, diverged=True)
    over, straddle, unjudged = _cr(70, 80), _cr(60, 70), _cr(100, 100, valid=False)
    # diverged > not derived > nothing judged > certified over > straddling or not judged > passed
    assert _vr(v([over, dv], "linear")) == (FA, "1 trajectory point(s) became non-finite")
    assert _vr(v([over, unjudged], "linear"))[0] == IN
    assert _vr(v([unjudged], "linear"))[0] == IN
    assert _vr(v([unjudged, over, straddle], "softmax")) == (
        FA, "N₋ >= 70 > H·d² = 64 at H=1 seed=0 step=0 (1 checkpoint(s))")
    assert _vr(v([straddle, unjudged], "softmax")) == (IC, "1 bracket(s) straddle H·d², 1 checkpoint(s) not judged")
    # a count over the bound where the structure is not valid is not judged: not a failure
    assert _vr(v([_cr(10, 16), unjudged], "softmax")) == (IC, "0 bracket(s) straddle H·d², 1 checkpoint(s) not judged")
