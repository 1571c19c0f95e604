"""The NTK-margin check's judge and its feeders on hand-made typed records (no solver, no jit):
the initialization condition at its boundary, the three criteria of one (H, seed), and the
verdict counting the (H, seed) that fail one.

Truths: the criteria of the module docstring evaluated by hand."""
import math

from mhajax.experiments.ntk_margin import MarginChecks, init_holds, judge, margin_checks, passes
from mhajax.verdict import Verdict
from helpers import verdict_reason as _vr

PA, FA = Verdict.PASSED.value, Verdict.FAILED.value




def test_init_holds_at_c_log_n():
    log_n = math.log(64)
    assert init_holds(log_n, 1.0, log_n) is True                      # equality holds
    assert init_holds(log_n * (1 + 2 ** -40), 1.0, log_n) is False
    assert init_holds(3.0, 0.5, 6.0) is True and init_holds(3.0 + 2 ** -40, 0.5, 6.0) is False
    assert init_holds(0.0, 1.0, 2.0) is True and init_holds(math.nan, 1.0, 2.0) is False


def test_margin_checks_each_criterion():
    assert margin_checks(True, 1e-9, 1e-6, True) == MarginChecks(True, True, True)
    assert margin_checks(True, 1e-6, 1e-6, True) == MarginChecks(True, True, True)        # gap at the tolerance
    assert margin_checks(True, 1e-6 * (1 + 2 ** -40), 1e-6, True) == MarginChecks(True, False, True)
    assert margin_checks(True, None, 1e-6, True) == MarginChecks(True, False, True)      # no gap measured
    assert margin_checks(False, 0.0, 1e-6, True) == MarginChecks(False, False, True)     # not separable: no gap
    assert margin_checks(True, 0.0, 1e-6, False) == MarginChecks(True, True, False)
    c = margin_checks(True, 0.5, 1.0, 1)
    assert type(c.gap) is bool and type(c.init) is bool and c.init is True
    assert margin_checks(True, 0.5, 1.0, 0).init is False


def test_passed_needs_every_criterion():
    assert passes(MarginChecks(True, True, True)) is True
    for i in range(3):
        bits = [True] * 3
        bits[i] = False
        assert passes(MarginChecks(*bits)) is False, bits
    assert passes(MarginChecks(False, False, False)) is False


def test_ntk_margin_counts_the_failing_runs():
    rec = lambda ok: MarginChecks(True, True, ok)   # noqa: E731
    assert _vr(judge([rec(True)] * 3)) == (PA, "all 3 (H, seed) certified separable, gap and init condition hold")
    assert _vr(judge([rec(True), rec(False), rec(True), rec(False), rec(True)])) == (
        FA, "2 of 5 (H, seed) fail a criterion")
    assert _vr(judge([rec(False)])) == (FA, "1 of 1 (H, seed) fail a criterion")
    assert _vr(judge([])) == (Verdict.INCONCLUSIVE, "no (H, seed) was run: nothing judged")
    assert _vr(judge([MarginChecks(False, False, True), MarginChecks(True, False, True), rec(True)])) == (
        FA, "2 of 3 (H, seed) fail a criterion")
    assert _vr(judge((rec(True),))) == (PA, "all 1 (H, seed) certified separable, gap and init condition hold")
