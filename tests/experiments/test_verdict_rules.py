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

from mhajax.analysis.step_premise import gd_step_premise, premise_line, premise_violated, step_premise
from mhajax.curvature.operators import dense_hessian
from mhajax.experiments.base import MIN_JUDGED_FRACTION, batched_data, batched_init, judged_enough
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
    assert p.holds is True and p.max_lr == pytest.approx(1 / 0.3)
    assert p.closed_form_max_lr == pytest.approx(1e-3) and p.ratio == pytest.approx(1000 / 0.3)
    assert premise_violated(p) is None
    bad = step_premise(1e8, [0.3, 0.25])
    assert bad.holds is False
    v = premise_violated([p, bad])
    assert v.verdict is Verdict.PREMISE_VIOLATED and v.passed is None
    assert "0.3" in v.reason and "η = 1e+08" in v.reason
    assert "VIOLATED" in premise_line(bad) and "holds" in premise_line(p)
    assert step_premise(1.0, [None]).holds is None          # not measured: never a violation
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
        assert lam <= p.lambda_max_upper[s] * (1 + 1e-9) + 1e-12
        assert p.lambda_max_upper[s] <= p.rho0[s]
    assert p.holds is True
    assert gd_step_premise(1e8, th0, X, y).holds is False


# -- the rate checks: the premise -----------------------------------------------------------------

GOOD, BAD = step_premise(1.0, [0.3]), step_premise(1e8, [0.3])




def test_verdict_exit_codes():
    codes = {v: v.exit_code for v in Verdict}
    assert codes[Verdict.PASSED] == 0 and codes[Verdict.INCONCLUSIVE] == 3
    assert codes[Verdict.PREMISE_VIOLATED] == 4 and codes[Verdict.INFORMATIONAL] == 5
    assert math.isfinite(GOOD.max_lr)


# -- the verdict code of the other experiments, on hand-made records ------------------------------
# Each `_verdict` applies its rules in a fixed order; the tests below pin every rule alone, each
# pair of rules (the one earlier in the order wins), the exact boundaries, and the reason's text
# (counts included). Records are dicts shaped like the ones each module's `run` builds.

def _vr(v):
    """(verdict, reason) of verdict fields, with `passed` checked against the verdict."""
    assert v["passed"] is {Verdict.PASSED.value: True, Verdict.FAILED.value: False}.get(v["verdict"])
    return v["verdict"], v["verdict_reason"]


BAD_REASON = premise_violated([BAD]).reason
PV, FA, PA = Verdict.PREMISE_VIOLATED.value, Verdict.FAILED.value, Verdict.PASSED.value
IC, IN, NR = Verdict.INCONCLUSIVE.value, Verdict.INFORMATIONAL.value, Verdict.NOT_REACHED.value


