"""The one-step check's judge and its feeders on hand-made typed records (no solver, no jit):
the separability counts (a), the initialization condition (c) at its boundary, each part's
outcome and reason, and the verdict over the starts: informational off the mixture,
violated > unresolved/undefined > holds.

Truths: the rules of the module docstring (parts (a), (b1), (b2), (c)) evaluated by hand."""
import math

import numpy as np
import pytest

from mhajax.analysis.finite_sample import HOLDS, UNDEFINED, UNRESOLVED, VIOLATED
from mhajax.analysis.margin import GAP_TOL
from mhajax.experiments import one_step
from mhajax.experiments.one_step import (INIT_CONST, InitCondition, MarginOutcome, OneStepRecord, Part, Parts,
                                         Separability, SlopeRule, _slope_rule, init_condition, judge, parts,
                                         separability)
from mhajax.verdict import Verdict
from helpers import verdict_reason as _vr

PA, FA, IC, IN = (Verdict.PASSED.value, Verdict.FAILED.value, Verdict.INCONCLUSIVE.value,
                  Verdict.INFORMATIONAL.value)




def cv(by_start, judged, dataset):
    """judge over the starts of ``by_start`` (start -> Parts), in that order."""
    return judge(OneStepRecord(tuple(by_start.items()), judged, dataset))


# --- (a): the separability counts --------------------------------------------------------------------

def test_separability_counts_each_status_and_the_converged_gaps():
    ms = [MarginOutcome("separable", GAP_TOL), MarginOutcome("separable", GAP_TOL * (1 + 2 ** -40)),
          MarginOutcome("separable", None), MarginOutcome("not_separable", 0.5), MarginOutcome("undecided", None),
          MarginOutcome("undecided", 0.25), MarginOutcome("separable", 0.0)]
    # converged: separable with a measured gap <= GAP_TOL (the first and the last)
    assert separability(ms) == Separability(separable=4, not_separable=1, undecided=2, total=7, max_rel_gap=0.5,
                                            converged=2)
    assert separability([]) == Separability(0, 0, 0, 0, None, 0)
    assert separability([MarginOutcome("separable", None)]).max_rel_gap is None
    assert separability([MarginOutcome("not_separable", 0.0)]).max_rel_gap == 0.0
    assert separability([MarginOutcome("undecided", GAP_TOL / 2)]).converged == 0


# --- (c): the initialization condition at its boundary --------------------------------------------------

def test_init_condition_boundary():
    """max|Φ₀| = C·log n holds (<=); a hair above it fails, and only that (seed, n) counts."""
    ns = [64, 128, 256]
    logn = np.log(ns)
    phi = np.vstack([INIT_CONST * logn, 0.5 * logn])
    c = init_condition(phi, ns)
    assert INIT_CONST == 1.0
    assert c.failing == 0 and c.total == 6 and c.max_ratio == pytest.approx(1.0, rel=1e-15, abs=0)
    assert c.room == pytest.approx(1.0, rel=1e-15, abs=0) and c.const == 1.0
    phi[1, 2] = INIT_CONST * logn[2] * (1 + 1e-12)
    c = init_condition(phi, ns)
    assert c.failing == 1 and c.max_ratio > 1
    c = init_condition(0.25 * np.vstack([logn, logn]), ns, const=2.0)
    assert c.failing == 0 and c.room == pytest.approx(8.0) and c.per_n_max == pytest.approx([0.25] * 3)
    assert c.const == 2.0 and c.total == 6
    phi[0, 0] = np.nan  # an undefined output never counts as holding
    assert init_condition(phi, ns).failing == 2


def test_init_condition_per_n_maxima_and_room():
    ns = [math.e, math.e ** 2]                     # log n = 1, 2
    c = init_condition([[0.5, 3.0], [0.25, 1.0]], ns, const=2.0)
    # ratios [[0.5, 1.5], [0.25, 0.5]]: per-n max [0.5, 1.5], max 1.5, room 2/1.5; 3 > 2·2 fails
    assert c.per_n_max == pytest.approx([0.5, 1.5], rel=1e-15, abs=0) and c.max_ratio == pytest.approx(1.5, rel=1e-15, abs=0)
    assert c.room == pytest.approx(2.0 / 1.5, rel=1e-15, abs=0) and c.failing == 0
    assert init_condition([[0.5, 4.0 + 1e-9]], ns, const=2.0).failing == 1
    # the NaN of an undefined output is skipped in the maxima
    assert init_condition([[np.nan, 1.0], [0.5, np.nan]], ns).per_n_max == pytest.approx([0.5, 0.5], rel=1e-15, abs=0)
    # a zero output everywhere: max ratio 0, infinite room
    z = init_condition(np.zeros((2, 2)), ns)
    assert z.room == math.inf and z.max_ratio == 0.0 and z.failing == 0 and type(z.failing) is int
    assert type(z.per_n_max) is list and type(z.max_ratio) is float


def test_init_condition_is_float64_whatever_its_inputs():
    # log n in float64 even for float32 sizes: max|Φ₀| = log n exactly gives the ratio 1 exactly
    c = init_condition(np.log([[64.0, 128.0]]), np.array([64, 128], dtype=np.float32))
    assert c.max_ratio == 1.0 and c.per_n_max == [1.0, 1.0] and c.failing == 0
    # an undefined output read back from JSON (None) is NaN: it fails and is skipped in the maxima
    c = init_condition([[None, math.log(128.0)], [0.5 * math.log(64.0), None]], [64, 128])
    assert c.failing == 2 and c.total == 4 and c.per_n_max == pytest.approx([0.5, 1.0], rel=1e-15, abs=0)


# --- the parts: each outcome and its reason -----------------------------------------------------------

SLOPES = {HOLDS: SlopeRule(HOLDS, "-0.01 [-0.02, 0]"), VIOLATED: SlopeRule(VIOLATED, "-0.3 [-0.35, -0.25]"),
          UNRESOLVED: SlopeRule(UNRESOLVED, "-0.1 [-0.15, -0.05]"), UNDEFINED: SlopeRule(UNDEFINED, "undef")}


def analysis(sep=None, b1=HOLDS, b2=HOLDS, failing=0):
    """A start's parts in which every part holds unless overridden."""
    s = Separability(**{**dict(separable=8, not_separable=0, undecided=0, total=8, max_rel_gap=None,
                               converged=8), **(sep or {})})
    ini = InitCondition(const=1.0, per_n_max=[], max_ratio=1.2 if failing else 0.6,
                        room=1 / 1.2 if failing else 1 / 0.6, failing=failing, total=8)
    return parts(s, SLOPES[b1], SLOPES[b2], ini)


def test_parts_texts():
    p = analysis()
    assert p == Parts(a=Part(HOLDS, "certified separable on 8/8 (n, seed)"),
                      b1=Part(HOLDS, "noiseless slope -0.01 [-0.02, 0]"),
                      b2=Part(HOLDS, "excess slope -0.01 [-0.02, 0]"),
                      c=Part(HOLDS, "max|Φ(θ₀)|/log n = 0.6 <= C = 1: room ×1.67 (failing on 0 of 8 (n, seed))"))
    assert analysis(failing=3).c == Part(
        VIOLATED, "max|Φ(θ₀)|/log n = 1.2 > C = 1: room ×0.833 (failing on 3 of 8 (n, seed))")
    assert analysis(sep=dict(separable=5, not_separable=2, undecided=1)).a == Part(
        VIOLATED, "not separable on 2 of 8 (n, seed)")                # not separable outranks undecided
    assert analysis(sep=dict(separable=7, undecided=1)).a == Part("unresolved", "margin undecided on 1 of 8 (n, seed)")
    s = Separability(8, 0, 0, 8, None, 8)
    ini = InitCondition(2.0, [], 0.5, 4.0, 0, 8)
    none = parts(s, None, None, ini)
    assert none.b1 == Part(UNDEFINED, "no noiseless sweep") and none.b2 == Part(UNDEFINED, "no prediction (P)")
    assert none.c.text == "max|Φ(θ₀)|/log n = 0.5 <= C = 2: room ×4 (failing on 0 of 8 (n, seed))"
    assert parts(s, SLOPES[VIOLATED], None, ini).b1 == Part(VIOLATED, "noiseless slope -0.3 [-0.35, -0.25]")
    assert parts(s, None, SLOPES[UNRESOLVED], ini).b2 == Part(UNRESOLVED, "excess slope -0.1 [-0.15, -0.05]")


def fit(slope, ci, rule):
    """A slope fit as :func:`one_step.analyse` stores it (only ``slope``, ``ci`` and ``rule`` are read)."""
    return one_step.Fit(slope, None, None, ci, 0.95, [], 0, 0, 0, 2, 0.0, None, rule, -0.1)


def test_slope_rule_reads_the_fit():
    assert _slope_rule(None) is None
    assert _slope_rule(fit(-0.3, (-0.35, -0.25), VIOLATED)) == SlopeRule(VIOLATED, "-0.3 [-0.35, -0.25]")
    assert _slope_rule(fit(None, None, UNDEFINED)) == SlopeRule(UNDEFINED, "undef")
    assert _slope_rule(one_step.NoFit(None, None, UNDEFINED, -0.1, "why")) == SlopeRule(UNDEFINED, "undef")


# --- the verdict: each part failing alone ---------------------------------------------------------

@pytest.mark.parametrize("which,kw,verdict,needle", [
    ("a", dict(sep=dict(separable=7, not_separable=1)), Verdict.FAILED, "not separable on 1 of 8"),
    ("a", dict(sep=dict(separable=7, undecided=1)), Verdict.INCONCLUSIVE, "undecided on 1 of 8"),
    ("b1", dict(b1=VIOLATED), Verdict.FAILED, "noiseless slope -0.3"),
    ("b1", dict(b1=UNRESOLVED), Verdict.INCONCLUSIVE, "noiseless slope -0.1"),
    ("b1", dict(b1=UNDEFINED), Verdict.INCONCLUSIVE, "noiseless slope undef"),
    ("b2", dict(b2=VIOLATED), Verdict.FAILED, "excess slope -0.3"),
    ("b2", dict(b2=UNRESOLVED), Verdict.INCONCLUSIVE, "excess slope -0.1"),
    ("c", dict(failing=1), Verdict.FAILED, "failing on 1 of 8"),
])
def test_each_part_failing_alone(which, kw, verdict, needle):
    bad = analysis(**kw)
    assert [k for k, p in bad._asdict().items() if p.rule != HOLDS] == [which]
    for order in (("zero", "random-u"), ("random-u", "zero")):  # either start failing alone
        by = {s: (bad if s == order[0] else analysis()) for s in order}
        j = cv(by, True, "mixture")
        assert j.verdict is verdict, (which, kw)
        assert j.passed is {Verdict.FAILED: False, Verdict.INCONCLUSIVE: None}[verdict]
        assert f"{order[0]} ({which})" in j.reason and needle in j.reason
        assert order[1] + " (" not in j.reason


def test_all_parts_hold_passes_and_violation_outranks_unresolved():
    j = cv({"zero": analysis(), "random-u": analysis()}, True, "mixture")
    assert j.verdict is Verdict.PASSED and j.passed is True
    j = cv({"zero": analysis(b1=UNRESOLVED), "random-u": analysis(failing=2)}, True, "mixture")
    assert j.verdict is Verdict.FAILED and "random-u (c)" in j.reason
    j = cv({"zero": analysis(b2=VIOLATED)}, False, "sparse")
    assert j.verdict is Verdict.INFORMATIONAL and j.passed is None and "sparse" in j.reason


def _parts(**rules):
    base = {k: Part("holds", f"{k} ok") for k in ("a", "b1", "b2", "c")}
    for k, r in rules.items():
        base[k] = Part(r, f"{k} text")
    return Parts(**base)


def test_one_step_combine_verdict():
    ok = {"zero": _parts(), "random-u": _parts()}
    assert _vr(cv(ok, True, "mixture")) == (PA, "(a), (b1), (b2), (c) hold from every start (zero, random-u)")
    assert _vr(cv({"zero-signs": _parts()}, True, "mixture")) == (
        PA, "(a), (b1), (b2), (c) hold from every start (zero-signs)")
    assert _vr(cv({"zero": _parts(a="violated")}, False, "sparse")) == (
        IN, "the claim is about the tokenized mixture, not --data sparse")
    mixed = {"zero": _parts(b1="undefined", c="violated"), "random-u": _parts(a="unresolved", b2="violated")}
    assert _vr(cv(mixed, True, "mixture")) == (FA, "zero (c): c text; random-u (b2): b2 text")
    unsure = {"zero": _parts(b1="undefined"), "zero-signs": _parts(), "random-u": _parts(a="unresolved", c="undefined")}
    assert _vr(cv(unsure, True, "mixture")) == (
        IC, "zero (b1): b1 text [undefined]; random-u (a): a text [unresolved]; random-u (c): c text [undefined]")
    assert one_step.INIT_CONST == 1.0
