"""mhajax.experiments.convergence: the verdict rule of the Õ(1/K) check on hand-made inputs
(the order of the rules, each reason). The whole check runs in tests/experiments/test_rate_sweeps.py
and the CLI tests; here only the decision."""
from mhajax.experiments import convergence
from mhajax.experiments.base import premise_violated, step_premise

GOOD, BAD = step_premise(1.0, [0.3]), step_premise(1e8, [0.3])
DIV = [dict(heads=1, seed=0, step=3), dict(heads=2, seed=0, step=5)]


def v(*a, **k):
    return convergence._verdict(*a, **k)


def test_premise_first_where_the_rate_is_claimed():
    assert v([True], DIV, True, "", [GOOD, BAD]) == premise_violated(BAD)
    assert v([False], [], True, "", BAD) == premise_violated(BAD)
    # not claimed: the premise does not matter, the rest of the rules apply
    assert v([True], DIV, False, "why", [BAD])["verdict_reason"] == "2 run(s) became non-finite"
    assert v([True], [], True, "")["verdict"] == "passed"                 # no premise measured


def test_rule_order_and_reasons():
    assert v([False, None], DIV, True, "", [GOOD]) == dict(
        verdict="failed", verdict_reason="2 run(s) became non-finite", passed=False)
    assert v([True, False, None], [], True, "", (), [True, True, True]) == dict(
        verdict="failed", passed=False,
        verdict_reason="the loss decays more slowly than Õ(1/K) allows (slope CI entirely above the tolerance band)")
    assert v([True, False, None], [], True, "", (), [True, None, True])["verdict"] == "inconclusive"
    assert v([False], [], False, "no κ") == dict(
        verdict="informational", verdict_reason="the Õ(1/K) rate is not claimed here: no κ", passed=None)
    assert v([True, None], [], True, "") == dict(
        verdict="inconclusive", verdict_reason="a slope is undefined (a non-positive mean loss)", passed=None)
    assert v([True, True], [], True, "", [GOOD]) == dict(
        verdict="passed", verdict_reason="every H decays at least as fast as Õ(1/K)", passed=True)
    assert v([], [], True, "")["verdict"] == "passed"
    assert v([None], [], False, "w")["verdict"] == "informational"
