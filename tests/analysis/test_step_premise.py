"""The GD step-size premise (mhajax.analysis.step_premise): the rule η·λ̄_max <= 1 (up to 1e-12),
the closed form beside it, the premise read off κ-chain records at θ₀, its report line and
PREMISE_VIOLATED. Truths: the rules as documented, on hand-made numbers, with the expected lines
written out."""
import math
from typing import NamedTuple

from mhajax.analysis.step_premise import STEP_RULE, premise_from_records, premise_line, premise_violated, step_premise
from mhajax.losses import LOGISTIC, SQUARED_HINGE
from mhajax.models.softmax import SOFTMAX
from mhajax.models.two_layer import TWO_LAYER
from mhajax.verdict import Judgement, Verdict


def test_premise_line_when_the_measured_bound_allows_any_step():
    """λ̄_max(θ₀) = 0 (a model whose Hessian vanishes at θ₀): every η is allowed, the ratio to
    the closed form is undefined, and the report line says so instead of failing to format it
    (the relu model's terminal report died here)."""
    p = step_premise(1.0, [0.0], rho0=[678.24])
    assert p.holds is True and p.max_lr is None and p.ratio is None
    line = premise_line(p)
    assert "largest η allowed any" in line and "the measured bound allows any η" in line
    q = step_premise(1.0, [0.5], rho0=[100.0])
    assert "(200x less; informational)" in premise_line(q)


def test_step_premise_every_field():
    p = step_premise(2, [0.25, 0.4, 0.2], rho0=[10.0, 40.0, 20.0], note="n")
    assert p._asdict() == dict(rule=STEP_RULE, lr=2.0, lambda_max_upper=[0.25, 0.4, 0.2], max_lr=2.5, holds=True,
                     rho0=[10.0, 40.0, 20.0], closed_form_max_lr=1 / 40.0, ratio=100.0, note="n")
    assert type(p.lr) is float
    assert STEP_RULE == "η·λ̄_max(∇²L̂(θ₀)) <= 1, λ̄_max = λ_max(G) + λ_max(B) (certified upper bound)"


def test_step_premise_boundary_of_the_rule():
    assert step_premise(2.0, [0.5]).holds is True                    # η·λ̄ = 1 exactly
    assert step_premise(1.0, [1.0 + 5e-13]).holds is True             # within 1e-12
    assert step_premise(1.0, [1.0 + 3e-12]).holds is False
    assert step_premise(1.0, [3.0, 0.5]).holds is False              # the largest run binds
    assert step_premise(1.0, [0.5, 3.0]).holds is False


def test_step_premise_not_measured_and_non_finite():
    for lam in ([None], [0.3, None], [], [math.nan], [0.3, math.inf]):
        p = step_premise(1.0, lam)
        assert p.holds is None and p.max_lr is None and p.ratio is None
    assert step_premise(1.0, [math.nan, 0.3]).lambda_max_upper == [None, 0.3]


def test_step_premise_non_positive_bound_allows_any_step():
    for lam in ([0.0], [-0.5, -0.1]):
        p = step_premise(1e6, lam, rho0=[5.0])
        assert p.holds is True and p.max_lr is None and p.ratio is None
        assert p.closed_form_max_lr == 0.2


def test_step_premise_closed_form_missing_or_not_positive():
    for rho in (None, [], [None], [2.0, None], [math.inf], [0.0], [-1.0]):
        p = step_premise(1.0, [0.5], rho0=rho)
        assert p.closed_form_max_lr is None and p.ratio is None and p.max_lr == 2.0
    assert step_premise(1.0, [0.5], rho0=None).rho0 is None
    assert step_premise(1.0, [0.5], rho0=[]).rho0 is None
    assert step_premise(1.0, [0.5], rho0=[math.nan, 4.0]).rho0 == [None, 4.0]


def test_premise_line_every_form():
    assert premise_line(None) == "GD step-size premise: not measured"
    assert premise_line({}) == "GD step-size premise: not measured"
    assert premise_line(step_premise(1.0, [None], note="no blocks")) == f"GD step-size premise ({STEP_RULE}): no blocks"
    assert premise_line(step_premise(1.0, [None])) == f"GD step-size premise ({STEP_RULE}): not measured"
    head = "GD step-size premise: η = 0.5, λ̄_max(θ₀) = 1.5 (certified, max over runs), η·λ̄_max = 0.75 <= 1: holds"
    p = step_premise(0.5, [1.5, 0.3], rho0=[10.0, 20.0])
    assert premise_line(p) == (head + " (largest η allowed 0.6667); closed form (β₂² + κ/√H)·L̂(θ₀) = 20 would "
                               "allow only η <= 0.05 (13.3x less; informational)")
    assert premise_line(step_premise(0.5, [1.5, 0.3], note="n")) == head + " (largest η allowed 0.6667); n"
    assert premise_line(step_premise(0.5, [1.5, 0.3])) == head + " (largest η allowed 0.6667)"
    assert premise_line(step_premise(1, [2.0, 0.1])) == (
        "GD step-size premise: η = 1, λ̄_max(θ₀) = 2 (certified, max over runs), η·λ̄_max = 2 > 1: VIOLATED "
        "(largest η allowed 0.5)")


def test_premise_violated_names_the_worst():
    good, unknown = step_premise(1.0, [0.5]), step_premise(1.0, [None])
    bad2 = step_premise(2.0, [1.0])            # η·λ̄ = 2
    bad3 = step_premise(1.0, [0.5, 3.0])       # η·λ̄ = 3
    want = Judgement(Verdict.PREMISE_VIOLATED, (
        "GD step size η = 1 exceeds what the self-bounded smoothness allows at θ₀: η·λ̄_max = 3 > 1 "
        "(λ̄_max(∇²L̂(θ₀)) <= 3, certified; η <= 0.3333 needed); numbers reported, the rate claim not judged"))
    assert premise_violated([good, bad3, bad2, None]) == want
    assert premise_violated([bad2, unknown, bad3]) == want
    assert premise_violated(bad3) == want
    assert premise_violated([good, unknown, None]) is None and premise_violated(good) is None
    assert premise_violated([]) is None
    assert want.fields() == dict(verdict="premise violated", verdict_reason=want.reason, passed=None)


class Rec(NamedTuple):
    """The fields of a κ-chain record that premise_from_records reads (seed last: the order is
    by seed, not by the record)."""

    lambda_max_upper: float | None
    beta2: float | None
    kappa_bound: float | None
    loss: float | None
    heads: int
    step: int
    seed: int


def _rec(seed, step=0, lam=0.5, beta2=2.0, kb=8.0, loss=0.5, heads=4):
    return Rec(seed=seed, step=step, lambda_max_upper=lam, beta2=beta2, kappa_bound=kb, loss=loss, heads=heads)


def test_premise_from_records_reads_step_zero_by_seed():
    recs = [_rec(1, lam=0.8, loss=0.25), _rec(0, step=3, lam=9.0), _rec(0, lam=0.4)]
    p = premise_from_records(1.0, recs)
    assert p.lambda_max_upper == [0.4, 0.8]                              # seed 0, then seed 1
    # ρ₀ = (β₂² + κ/√H)·L̂ = (4 + 8/2)·L̂
    assert p.rho0 == [8.0 * 0.5, 8.0 * 0.25] and p.note == "" and p.holds is True
    assert premise_from_records(1.0, [_rec(0, lam=2.0)]).holds is False
    p = premise_from_records(1.0, [_rec(0), _rec(1, beta2=None)])
    assert p.rho0 is None and p.holds is True
    for key in ("kappa_bound", "loss"):
        r = _rec(1)._replace(**{key: None})
        assert premise_from_records(1.0, [_rec(0), r]).rho0 is None


def test_premise_from_records_not_measured():
    p = premise_from_records(1.0, [_rec(0, step=1)])
    assert p.lambda_max_upper == [None] and p.holds is None and p.note == "not measured: no record at θ₀"
    p = premise_from_records(1.0, [_rec(0), _rec(1)], model=TWO_LAYER)
    assert p.lambda_max_upper == [None, None] and p.holds is None
    assert p.note == "not measured: no certified λ_max bound (coupled heads)"
    p = premise_from_records(1.0, [_rec(0)], loss=SQUARED_HINGE)
    assert p.rho0 is None and p.lambda_max_upper == [0.5]
    assert p.note.startswith("closed form not applicable: needs |ℓ'| <= ℓ and ℓ'' <= ℓ")
    assert premise_from_records(1.0, [_rec(0)], SOFTMAX, LOGISTIC).note == ""


def test_premise_from_records_orders_by_seed_and_squares_beta2():
    p = premise_from_records(1.0, [_rec(2, lam=0.8), _rec(0, lam=0.4)])
    assert p.lambda_max_upper == [0.4, 0.8]
    assert premise_from_records(1.0, [_rec(1, lam=0.3), _rec(0, lam=0.9)]).lambda_max_upper == [0.9, 0.3]
    p = premise_from_records(1.0, [_rec(0, beta2=3.0, kb=8.0, heads=4, loss=0.5)])
    assert p.rho0 == [(9.0 + 8.0 / 2.0) * 0.5]


def test_step_premise_exact_tolerance_end_and_a_closed_form_below_one():
    assert step_premise(1.0, [1.0 + 1e-12]).holds is True             # η·λ̄ = 1 + 1e-12 exactly
    p = step_premise(1.0, [0.25], rho0=[0.5])
    assert p.closed_form_max_lr == 2.0 and p.ratio == 2.0


def test_premise_line_any_step_exact():
    p = step_premise(1.0, [0.0], rho0=[678.24])
    assert premise_line(p) == (
        "GD step-size premise: η = 1, λ̄_max(θ₀) = 0 (certified, max over runs), η·λ̄_max = 0 <= 1: holds "
        "(largest η allowed any); closed form (β₂² + κ/√H)·L̂(θ₀) = 678.2 would allow only η <= 0.00147 "
        "(the measured bound allows any η; informational)")
