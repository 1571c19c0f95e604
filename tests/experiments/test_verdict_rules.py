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
from mhajax.experiments import convergence, quasi_convexity, variants, weak_convexity
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
