"""mhajax.experiments.convergence: the judge of the Õ(1/K) check on hand-made typed records (the
order of the rules, each reason). The whole check runs in tests/experiments/test_rate_sweeps.py
and the CLI tests; here only the decision.

Truths: the rule of the docstring applied by hand — the step premise first where the rate is
claimed; a diverged run; a slope CI above the band FAILED only where every such H has NTK
separability certified; not claimed; an undefined slope; else PASSED."""
from mhajax.analysis.step_premise import premise_violated, step_premise
from mhajax.experiments import convergence
from mhajax.experiments.convergence import HeadRate as R
from mhajax.verdict import Judgement, Verdict

GOOD, BAD = step_premise(1.0, [0.3]), step_premise(1e8, [0.3])
PV = Judgement(Verdict.PREMISE_VIOLATED, "η·λ̄_max = 3e+07 > 1")
SLOW = "the loss decays more slowly than Õ(1/K) allows (slope CI entirely above the tolerance band)"


def v(*a, **k):
    """The judge's summary fields."""
    return convergence.judge(*a, **k).fields()



def test_premise_first_where_the_rate_is_claimed():
    assert convergence.judge([R(True)], 2, True, "", PV) is PV
    assert convergence.judge([R(False, True)], 0, True, "", PV) is PV
    pv = premise_violated([GOOD, BAD])
    assert v([R(True)], 2, True, "", pv) == premise_violated(BAD).fields()
    # not claimed: the premise does not matter, the rest of the rules apply
    assert v([R(True)], 2, False, "why", PV)["verdict_reason"] == "2 run(s) became non-finite"
    assert v([R(True)], 0, False, "why", PV)["verdict"] == "informational"
    assert v([R(True)], 0, True, "")["verdict"] == "passed"                 # no premise measured
    assert v([R(True)], 0, True, "", None)["verdict"] == "passed"


def test_rule_order_and_reasons():
    assert v([R(False), R(None)], 2, True, "") == dict(
        verdict="failed", verdict_reason="2 run(s) became non-finite", passed=False)
    assert v([R(True, True), R(False, True), R(None, True)], 0, True, "") == dict(
        verdict="failed", passed=False, verdict_reason=SLOW)
    assert v([R(True, True), R(False, None), R(None, True)], 0, True, "")["verdict"] == "inconclusive"
    assert v([R(False)], 0, False, "no κ") == dict(
        verdict="informational", verdict_reason="the Õ(1/K) rate is not claimed here: no κ", passed=None)
    assert v([R(True), R(None)], 0, True, "") == dict(
        verdict="inconclusive", verdict_reason="a slope is undefined (a non-positive mean loss)", passed=None)
    assert v([R(True), R(True)], 0, True, "") == dict(
        verdict="passed", verdict_reason="every H decays at least as fast as Õ(1/K)", passed=True)
    assert v([], 0, True, "")["verdict"] == "passed"
    assert v([R(None)], 0, False, "w")["verdict"] == "informational"
    assert v([R(True)], 1, True, "") == dict(verdict="failed", verdict_reason="1 run(s) became non-finite",
                                               passed=False)


def test_a_slow_rate_fails_only_where_separability_is_certified():
    """A slope above the band is FAILED only for H whose NTK separability at θ₀ the witness
    certified; where it is not (digits, npz, another head: no witness; or γ_w <= 0), the theorem's
    premise is unverified and the verdict is INCONCLUSIVE, with the reason."""
    assert v([R(True, True), R(False, True)], 0, True, "")["verdict"] == "failed"
    unverified = ("the loss decays more slowly than Õ(1/K) allows, but NTK separability at θ₀, the theorem's "
                  "premise, is not certified there (the explicit witness applies to the tokenized mixture with "
                  "softmax heads only)")
    for seps in ((True, None), (True, False), (None, None), (False, False)):
        assert v([R(True, seps[0]), R(False, seps[1])], 0, True, "") == dict(
            verdict="inconclusive", verdict_reason=unverified, passed=None), seps
    # only the slow H need the witness; every slow H needs it
    assert v([R(True, False), R(False, True), R(None, None)], 0, True, "")["verdict_reason"] == SLOW
    assert v([R(False, True), R(False, None)], 0, True, "")["verdict_reason"] == unverified
    assert v([R(False, None), R(False, True)], 0, True, "")["verdict_reason"] == unverified
    # a fast rate passes whatever the witness says; a diverged run fails whatever it says
    assert v([R(True, None)], 0, True, "")["verdict"] == "passed"
    assert v([R(True, False)], 0, True, "")["verdict"] == "passed"
    assert v([R(False, None)], 1, True, "")["verdict"] == "failed"
    # a slow rate where the rate is not claimed: informational; an undefined slope is not slow
    assert v([R(False, True)], 0, False, "w")["verdict"] == "informational"
    assert v([R(None, True)], 0, True, "")["verdict"] == "inconclusive"
    assert v([R(None, True), R(False, True)], 0, True, "")["verdict_reason"] == SLOW
