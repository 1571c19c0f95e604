"""mhajax.analysis.applicability: which links and checks a (model, loss) pair implies.
Truth: the table of the module docstring and docs/theory.md §7, written out case by case — the
self-bound constants at exactly 1 (implied) and one ulp above (not), a missing constant, a
non-convex loss, a coupled model, a model without closed-form κ or β₂ — and synthetic
requirement tables for ``link_implied`` and ``judge``."""
import math

import pytest

import mhajax.analysis.applicability as app
from mhajax.analysis.applicability import judge, link_implied, requirements
from mhajax.losses import LOGISTIC, Loss, SelfBound
from mhajax.models.softmax import SOFTMAX
from mhajax.models.two_layer import TWO_LAYER

ABOVE_ONE = math.nextafter(1.0, 2.0)
LOSS = Loss("myloss", LOGISTIC.value, LOGISTIC.d1, LOGISTIC.d2)
NAMES = ["kappa_emp<=kappa_block", "kappa_block<=kappa_mid", "kappa_mid<=kappa_phi",
         "kappa_phi<=kappa_bound", "weak_convexity", "self_bounded_gradient", "self_bounded_smoothness"]

C1 = "|ℓ'| <= ℓ holds for myloss"
C1C2 = "|ℓ'| <= ℓ and ℓ'' <= ℓ hold for myloss"
NO_C1 = "needs |ℓ'| <= ℓ, which myloss lacks (N)"
NO_C1C2 = "needs |ℓ'| <= ℓ and ℓ'' <= ℓ (N)"
G = "G ⪰ 0 (ℓ'' >= 0) and block-diagonal data term"
TRI = "triangle inequality on B_h"
CF = "closed-form κ of the model"


def _req(monkeypatch, sb, model=SOFTMAX):
    monkeypatch.setattr(app, "self_bound", lambda loss: sb if loss is LOSS else None)
    r = requirements(model, LOSS)
    assert list(r) == NAMES
    return r


def test_all_implied_with_constants_exactly_one(monkeypatch):
    r = _req(monkeypatch, SelfBound(1.0, 1.0, True, "N"))
    assert r == {NAMES[0]: (True, G), NAMES[1]: (True, TRI), NAMES[2]: (True, C1), NAMES[3]: (True, CF),
                 NAMES[4]: (True, C1), NAMES[5]: (True, C1), NAMES[6]: (True, C1C2)}


@pytest.mark.parametrize("c1", [ABOVE_ONE, None])
def test_c1_above_one_or_missing(monkeypatch, c1):
    r = _req(monkeypatch, SelfBound(c1, 1.0, True, "N"))
    assert r == {NAMES[0]: (True, G), NAMES[1]: (True, TRI), NAMES[2]: (False, NO_C1), NAMES[3]: (True, CF),
                 NAMES[4]: (False, NO_C1), NAMES[5]: (False, NO_C1), NAMES[6]: (False, NO_C1C2)}


@pytest.mark.parametrize("c2", [ABOVE_ONE, None])
def test_c2_above_one_or_missing_only_smoothness(monkeypatch, c2):
    r = _req(monkeypatch, SelfBound(1.0, c2, True, "N"))
    assert r == {NAMES[0]: (True, G), NAMES[1]: (True, TRI), NAMES[2]: (True, C1), NAMES[3]: (True, CF),
                 NAMES[4]: (True, C1), NAMES[5]: (True, C1), NAMES[6]: (False, NO_C1C2)}


def test_constants_below_one_are_implied(monkeypatch):
    r = _req(monkeypatch, SelfBound(0.5, 0.0, True, "N"))
    assert all(ok for ok, _ in r.values())


def test_non_convex_loss_only_first_link(monkeypatch):
    r = _req(monkeypatch, SelfBound(1.0, 1.0, False, "N"))
    assert r[NAMES[0]] == (False, "needs ℓ'' >= 0, unknown for myloss")
    assert all(r[n][0] for n in NAMES[1:])


@pytest.mark.parametrize("convex", [True, False])
def test_coupled_model_implies_nothing(monkeypatch, convex):
    r = _req(monkeypatch, SelfBound(1.0, 1.0, convex, "N"), TWO_LAYER)
    coupled = "heads are coupled: no block bound"
    assert r == {NAMES[0]: (False, coupled), NAMES[1]: (False, coupled),
                 NAMES[2]: (False, "heads are coupled: no per-head Hessians"),
                 NAMES[3]: (False, "the model has no closed-form κ"),
                 NAMES[4]: (False, "no closed-form κ"), NAMES[5]: (False, "no closed-form β₂"),
                 NAMES[6]: (False, "needs closed-form κ and β₂")}


def test_model_without_kappa(monkeypatch):
    r = _req(monkeypatch, SelfBound(1.0, 1.0, True, "N"), SOFTMAX._replace(kappa=None))
    assert r == {NAMES[0]: (True, G), NAMES[1]: (True, TRI), NAMES[2]: (True, C1),
                 NAMES[3]: (False, "the model has no closed-form κ"), NAMES[4]: (False, "no closed-form κ"),
                 NAMES[5]: (True, C1), NAMES[6]: (False, "needs closed-form κ and β₂")}


def test_model_without_beta2(monkeypatch):
    r = _req(monkeypatch, SelfBound(1.0, 1.0, True, "N"), SOFTMAX._replace(beta2=None))
    assert r == {NAMES[0]: (True, G), NAMES[1]: (True, TRI), NAMES[2]: (True, C1), NAMES[3]: (True, CF),
                 NAMES[4]: (True, C1), NAMES[5]: (False, "no closed-form β₂"),
                 NAMES[6]: (False, "needs closed-form κ and β₂")}


def test_model_without_kappa_and_c1_above_one(monkeypatch):
    r = _req(monkeypatch, SelfBound(ABOVE_ONE, 1.0, True, "N"), SOFTMAX._replace(kappa=None))
    assert r[NAMES[4]] == (False, "no closed-form κ") and r[NAMES[5]] == (False, NO_C1)


def test_registered_loss_reads_the_real_constants():
    r = requirements(SOFTMAX, LOGISTIC)
    assert r[NAMES[2]] == (True, "|ℓ'| <= ℓ holds for logistic")


# -- link_implied: a synthetic table, every elementary link (True, "rK") --------------------------

def _table(false=()):
    return {n: (n not in false, f"r{i}") for i, n in enumerate(NAMES)}


def test_link_implied_checks_are_read_directly():
    for n in NAMES[4:]:
        assert link_implied(n, _table()) == _table()[n]
        assert link_implied(n, _table(false=[n])) == (False, _table()[n][1])


def test_link_implied_elementary_link():
    for n in NAMES[:4]:
        assert link_implied(n, _table()) == (True, _table()[n][1])
        assert link_implied(n, _table(false=[n])) == (False, f"{n}: {_table()[n][1]}")


def test_link_implied_spanning_links():
    assert link_implied("kappa_block<=kappa_bound", _table()) == (True, "r1; r2; r3")
    assert link_implied("kappa_emp<=kappa_bound", _table()) == (True, "r0; r1; r2; r3")
    assert link_implied("kappa_emp<=kappa_mid", _table(false=[NAMES[2]])) == (True, "r0; r1")
    assert link_implied("kappa_block<=kappa_bound", _table(false=[NAMES[2]])) == \
        (False, "kappa_mid<=kappa_phi: r2")
    assert link_implied("kappa_block<=kappa_bound", _table(false=[NAMES[1], NAMES[3]])) == \
        (False, "kappa_block<=kappa_mid: r1; kappa_phi<=kappa_bound: r3")
    assert link_implied("kappa_emp<=kappa_mid", _table(false=[NAMES[0]])) == \
        (False, "kappa_emp<=kappa_block: r0")


# -- judge: which verdicts count ---------------------------------------------------------------

def _judge(monkeypatch, verdicts, false=()):
    monkeypatch.setattr(app, "requirements", lambda model, loss: _table(false))
    return judge(verdicts, SOFTMAX, LOSS)


def test_judge_failed_implied_fails(monkeypatch):
    rec = {"kappa_emp<=kappa_block": True, "kappa_block<=kappa_bound": False, "weak_convexity": False,
           "self_bounded_gradient": None}
    j = _judge(monkeypatch, rec)
    assert j._asdict() == dict(implied={"kappa_emp<=kappa_block": True, "kappa_block<=kappa_bound": False,
                              "weak_convexity": False, "self_bounded_gradient": None},
                     not_implied={}, failed=["kappa_block<=kappa_bound", "weak_convexity"], passed=False,
                     reasons={"kappa_emp<=kappa_block": "r0", "kappa_block<=kappa_bound": "r1; r2; r3",
                              "weak_convexity": "r4", "self_bounded_gradient": "r5"})


def test_judge_not_implied_failure_does_not_count(monkeypatch):
    rec = {"kappa_emp<=kappa_block": True, "kappa_mid<=kappa_phi": False, "weak_convexity": False}
    j = _judge(monkeypatch, rec, false=[NAMES[2], NAMES[4]])
    assert j.implied == {"kappa_emp<=kappa_block": True}
    assert j.not_implied == {"kappa_mid<=kappa_phi": False, "weak_convexity": False}
    assert j.failed == [] and j.passed is True
    assert j.reasons["kappa_mid<=kappa_phi"] == "kappa_mid<=kappa_phi: r2"


def test_judge_passed_none_when_nothing_defined(monkeypatch):
    j = _judge(monkeypatch, {"kappa_emp<=kappa_block": None, "weak_convexity": None})
    assert j.passed is None and j.failed == []
    j = _judge(monkeypatch, {"kappa_emp<=kappa_block": True}, false=[NAMES[0]])
    assert j.passed is None and j.implied == {}
    j = _judge(monkeypatch, {})
    assert j._asdict() == dict(implied={}, not_implied={}, reasons={}, failed=[], passed=None)


def test_judge_true_and_none_pass(monkeypatch):
    j = _judge(monkeypatch, {"weak_convexity": True, "self_bounded_gradient": None})
    assert j.passed is True and j.failed == []


def test_judge_reads_the_pairs_own_table():
    """Not patched: the squared hinge does not imply κ_mid <= κ_Φ (|ℓ'| <= ℓ fails), the logistic
    loss does; the coupled model implies no link."""
    from mhajax.losses import SQUARED_HINGE
    rec = {"kappa_mid<=kappa_phi": False}
    sq = judge(rec, SOFTMAX, SQUARED_HINGE)
    assert sq.not_implied == {"kappa_mid<=kappa_phi": False} and sq.passed is None
    lg = judge(rec, SOFTMAX, LOGISTIC)
    assert lg.implied == {"kappa_mid<=kappa_phi": False} and lg.passed is False
    assert judge(rec, TWO_LAYER, LOGISTIC).implied == {}
