"""mhajax.chain: κ_emp <= κ_blk <= κ_mid <= κ_Φ <= κ(θ) (docs/theory.md §7) via chain_raw + finalize.

Every κ is recomputed independently: ∇²L̂/L̂ and the blocks B_h/L̂ are assembled in
numpy from jax.grad/jax.hessian of the reference model (tests/helpers.py), with
the loss weights in numpy, so the truth stays accurate down to L̂ ~ e^{-700}."""
import json
import math

import jax
import numpy as np
import pytest
from hypothesis import given, settings

from helpers import (D, H, T, all_finite_or_none, flat, make_refs, opnorm_sym, per_regime,
                     scaled_hessian, sigmoid_np, underflow_problems, weight_rtol)
from mhajax.models.two_layer import TWO_LAYER
from mhajax.analysis.chain import CHECK_RTOL, ChainPoint, chain_raw, finalize
from mhajax.curvature.spectrum import Extremes

REFS = make_refs(H, T, D)
KEY = jax.random.PRNGKey(0)
FI = np.finfo(np.float64)
CHAIN = ("kappa_emp", "kappa_block", "kappa_mid", "kappa_phi", "kappa_bound")

raw_auto = jax.jit(lambda th, X, y, k: chain_raw(th, X, y, k, method="auto"))
raw_lanczos = jax.jit(lambda th, X, y, k: chain_raw(th, X, y, k, method="lanczos", num_steps=16,
                                                    max_cycles=200))
raw_core = jax.jit(lambda th, X, y, k: chain_raw(th, X, y, k, method="auto", links="core"))


def _independent(th, X, y):
    """The chain's quantities from the reference model (ratios over L̂ computed scale-free)."""
    z = flat(th)
    phi = np.asarray(REFS["phi"](z, X))
    m = np.asarray(y) * phi
    J = np.asarray(REFS["jac"](z, X))
    F = np.asarray(REFS["head_hess"](z, X))
    A, g, L, Bh = scaled_hessian(J, F, m, y, H)
    norms = opnorm_sym(F)                               # [n, H] exact ||∇²f(θ_h; X_i)||
    ev = np.linalg.eigvalsh(A)
    a1 = sigmoid_np(-m) / L                             # |ℓ'_i| / L̂
    R = float(np.linalg.norm(np.asarray(X), axis=-1).max())
    l21 = np.linalg.norm(np.asarray(th.U), axis=-1).sum(-1)
    sH = math.sqrt(H)
    return dict(
        loss=L,
        kappa_emp=-sH * ev[0],
        kappa_block=-sH * min(np.linalg.eigvalsh(Bh[h])[0] for h in range(H)),
        kappa_mid=float(np.mean(a1 * norms.max(1))),
        kappa_phi=float(norms.max()),
        kappa_bound=float(np.max(R**3 * math.sqrt(T) + 2 * R**5 * l21)),
        grad_ratio=float(np.linalg.norm(g)),
        beta2=math.sqrt(T * R**2 + R**6 * np.sum(l21**2) / H),
        scale=sH * max(abs(ev[0]), abs(ev[-1])),
    )


def _defined(L):
    return L >= FI.tiny / FI.eps


@per_regime()
def test_chain_holds_and_matches_independent_values(case):
    th, X, y, regime = case
    rec = finalize(raw_auto(th, X, y, KEY), H)
    ref = _independent(th, X, y)
    assert all_finite_or_none(rec)
    json.dumps(rec, allow_nan=False)
    # (XLA flushes subnormal terms to zero: an absolute error below the smallest normal)
    assert rec.loss == pytest.approx(ref["loss"], rel=1e-12 + weight_rtol(th, X), abs=2 * FI.tiny)
    # non-ratio quantities are always defined
    rnd = 1e-10 + weight_rtol(th, X)
    assert rec.kappa_phi == pytest.approx(ref["kappa_phi"], rel=1e-10, abs=1e-12 * ref["kappa_bound"])
    assert rec.kappa_bound == pytest.approx(ref["kappa_bound"], rel=1e-13, abs=0)
    assert rec.beta2 == pytest.approx(ref["beta2"], rel=1e-13, abs=0)
    assert rec.kappa_phi <= rec.kappa_bound * (1 + 1e-12)
    if not _defined(rec.loss):
        # L̂ below tiny/eps (margins >~ 672): no relative precision left -> undefined
        assert regime == "near_underflow"
        for k in ("kappa_emp", "kappa_block", "kappa_mid", "grad_ratio", "smooth_ratio"):
            assert getattr(rec, k) is None
        assert rec.chain_holds is None and rec.all_hold is None
        assert set(rec.links) == {"kappa_phi<=kappa_bound"}   # the only link without L̂
        return
    # independent values (ratios over L̂), to rounding relative to the curvature scale
    for k in ("kappa_emp", "kappa_block", "kappa_mid"):
        assert getattr(rec, k) == pytest.approx(ref[k], abs=rnd * max(ref["scale"], abs(ref[k]), ref["kappa_mid"]))
    assert rec.grad_ratio == pytest.approx(ref["grad_ratio"], rel=rnd, abs=1e-300)
    # the chain itself, checked here with our own slack ...
    vals = [ref[k] for k in CHAIN]
    slack = 1e-10 * max(ref["scale"], max(abs(v) for v in vals))
    for a, b in zip(vals, vals[1:]):
        assert a <= b + slack
    assert ref["grad_ratio"] <= ref["beta2"] * (1 + 1e-10)
    # ... and the library's verdicts agree
    assert rec.chain_holds is True and rec.all_hold is True
    assert list(rec.links) == [f"{a}<={b}" for a, b in zip(CHAIN, CHAIN[1:])]
    assert all(rec.links.values()) and all(rec.checks.values())


@settings(max_examples=10)
@given(underflow_problems())
def test_underflowed_loss_gives_undefined_ratios_never_nan(case):
    """Every margin >= 800: L̂ == 0 in float64. Ratios and verdicts are None; nothing in
    the record is NaN or inf; the non-ratio κ's are still reported."""
    th, X, y = case
    raw = raw_auto(th, X, y, KEY)
    rec = finalize(raw, H)
    assert rec.loss == 0.0
    for k in ("kappa_emp", "kappa_block", "kappa_mid", "grad_ratio", "smooth_ratio"):
        assert getattr(rec, k) is None
    assert rec.chain_holds is None and rec.all_hold is None
    assert rec.links == {"kappa_phi<=kappa_bound": True}
    assert all(v is None for v in rec.checks.values())
    assert all_finite_or_none(rec)
    json.dumps(rec, allow_nan=False)
    assert rec.kappa_phi is not None and rec.kappa_bound is not None


@per_regime(regimes=("generic", "large_w", "small_loss"), examples=4)
def test_lanczos_kappa_emp(case):
    """A Ritz λ_min over-estimates λ_min, so the Lanczos κ_emp is <= the exact one — and,
    converged, equal to it to 1e-8 relative; the chain holds."""
    th, X, y, _ = case
    rec = finalize(raw_lanczos(th, X, y, KEY), H)
    ref = _independent(th, X, y)
    rnd = 1e-10 + weight_rtol(th, X)
    assert rec.eig_converged
    assert rec.kappa_emp <= ref["kappa_emp"] + rnd * ref["scale"]
    assert abs(rec.kappa_emp - ref["kappa_emp"]) <= 1e-8 * abs(ref["kappa_emp"]) + rnd * ref["scale"]
    assert rec.chain_holds is True


@per_regime(regimes=("generic", "large_u"), examples=3)
def test_core_links_skip_the_per_sample_norms(case):
    th, X, y, _ = case
    rec = finalize(raw_core(th, X, y, KEY), H)
    assert rec.kappa_mid is None and rec.kappa_phi is None
    assert list(rec.links) == ["kappa_emp<=kappa_block", "kappa_block<=kappa_bound"]
    assert rec.chain_holds is True


# ---------------------------------------------------------------------------
# finalize on hand-made raw values: the formulas and the verdicts (which must be able to fail)
# ---------------------------------------------------------------------------

def _raw(**kw):
    base = dict(loss=0.5, lambda_min=-0.1, lambda_max=2.0, residual_min=0.0, residual_max=0.0,
                eig_converged=True, num_matvecs=0, eig_tol=0.0, lambda_min_block=-0.2,
                lambda_max_upper=3.0, grad_norm=0.1, kappa_bound=50.0, beta2=10.0,
                mid_sum=0.45, kappa_phi=1.0)
    base.update(kw)
    arr = {k: np.asarray(v, np.float64 if isinstance(v, float) else None) for k, v in base.items()}
    own = {k: arr.pop(k) for k in ChainPoint._fields if k in arr}
    return ChainPoint(extremes=Extremes(**arr), **own)


def test_finalize_formulas():
    rec = finalize(_raw(), 4)
    sH = 2.0
    assert rec.kappa_emp == pytest.approx(sH * 0.1 / 0.5)
    assert rec.kappa_block == pytest.approx(sH * 0.2 / 0.5)
    # κ_mid = (1/n) Σ |ℓ'_i| max_h ||∇²f_ih|| / L̂ — no √H (docs/theory.md §7: √H · ||∇²Φ_i|| with
    # ||∇²Φ_i|| = max_h ||∇²f_ih|| / √H)
    assert rec.kappa_mid == pytest.approx(0.45 / 0.5)
    assert rec.kappa_phi == 1.0 and rec.kappa_bound == 50.0
    assert rec.grad_ratio == pytest.approx(0.1 / 0.5)
    assert rec.smooth_ratio == pytest.approx(3.0 / 0.5)
    assert rec.chain_holds is True and rec.all_hold is True


@pytest.mark.parametrize("kw, failed", [
    (dict(lambda_min=-0.3), "kappa_emp<=kappa_block"),      # λ_min below the certified bound
    (dict(mid_sum=0.01), "kappa_block<=kappa_mid"),
    (dict(mid_sum=0.9), "kappa_mid<=kappa_phi"),
    (dict(kappa_phi=60.0, mid_sum=0.5), "kappa_phi<=kappa_bound"),
])
def test_finalize_reports_a_broken_link(kw, failed):
    rec = finalize(_raw(**kw), 4)
    assert rec.links[failed] is False
    assert rec.chain_holds is False and rec.all_hold is False


@pytest.mark.parametrize("kw, check, chain_holds", [
    (dict(grad_norm=6.0), "self_bounded_gradient", True),          # 12 > β₂ = 10
    (dict(lambda_max_upper=70.0), "self_bounded_smoothness", True),  # 140 > 100 + 50/2
    (dict(lambda_min_block=-20.0, lambda_min=-20.0, mid_sum=30.0, kappa_phi=70.0,
          kappa_bound=60.0), "weak_convexity", False),
])
def test_finalize_reports_a_failed_check(kw, check, chain_holds):
    """A failed check fails all_hold; chain_holds counts the links alone."""
    rec = finalize(_raw(**kw), 4)
    assert rec.checks[check] is False and rec.all_hold is False
    assert rec.chain_holds is chain_holds


def test_finalize_rounding_slack_is_tiny():
    """A link broken by 1e-6 relative is reported broken (slack is CHECK_RTOL = 1e-9 of the
    curvature scale), a tie within rounding is not."""
    assert CHECK_RTOL <= 1e-9
    rec = finalize(_raw(lambda_min=-0.2 * (1 + 1e-6)), 1)
    assert rec.links["kappa_emp<=kappa_block"] is False
    rec = finalize(_raw(lambda_min=-0.2 * (1 + 1e-13)), 1)
    assert rec.links["kappa_emp<=kappa_block"] is True


@pytest.mark.parametrize("loss", [0.0, 1e-300, 1e-293, float("nan"), float("inf")])
def test_finalize_undefined_below_tiny_over_eps(loss):
    """Also a NaN/inf L̂ (a diverged point) gives nulls, never NaN in the record."""
    rec = finalize(_raw(loss=loss), 4)
    assert rec.kappa_emp is None and rec.chain_holds is None and rec.all_hold is None
    assert all_finite_or_none(rec)
    json.dumps(rec, allow_nan=False)


def test_finalize_nan_solver_output_is_null_not_nan():
    rec = finalize(_raw(lambda_min=float("nan"), lambda_max=float("inf")), 2)
    assert rec.lambda_min is None and rec.lambda_max is None and rec.kappa_emp is None
    assert all_finite_or_none(rec)
    json.dumps(rec, allow_nan=False)


# ---------------------------------------------------------------------------
# loss- and model-aware verdicts (mhajax.applicability via finalize(model=, loss=))
# ---------------------------------------------------------------------------

from mhajax.losses import EXPONENTIAL, LOGISTIC, SQUARED_HINGE  # noqa: E402
from mhajax.models.softmax import SOFTMAX

NOT_IMPLIED_SQ = {"kappa_mid<=kappa_phi", "weak_convexity", "self_bounded_gradient",
                  "self_bounded_smoothness"}


def test_squared_hinge_broken_self_bounded_link_is_informational():
    """κ_mid <= κ_Φ needs |ℓ'| <= ℓ: broken, it fails a logistic record but is only
    reported (not implied) for the squared hinge, which lacks that bound."""
    raw = _raw(mid_sum=0.9)                       # κ_mid = 1.8 > κ_Φ = 1
    log = finalize(raw, 4, model=SOFTMAX, loss=LOGISTIC)
    assert log.links["kappa_mid<=kappa_phi"] is False
    assert log.all_hold is False and log.failed == ["kappa_mid<=kappa_phi"]
    assert log.not_implied == {} and log.reasons == {}
    sq = finalize(raw, 4, model=SOFTMAX, loss=SQUARED_HINGE)
    assert sq.links["kappa_mid<=kappa_phi"] is False          # the verdict is kept ...
    assert set(sq.not_implied) == NOT_IMPLIED_SQ               # ... but marked not implied
    assert sq.not_implied["kappa_mid<=kappa_phi"] is False
    assert "squared_hinge" in sq.reasons["kappa_mid<=kappa_phi"]
    assert sq.failed == [] and sq.chain_holds is True and sq.all_hold is True
    # the numbers themselves do not depend on the loss argument
    for k in CHAIN + ("grad_ratio", "smooth_ratio", "check_scale"):
        assert getattr(sq, k) == getattr(log, k)


def test_squared_hinge_still_fails_an_implied_link():
    """The links the squared hinge does imply (G ⪰ 0, triangle inequality, closed-form κ)
    still fail the record when broken: the verdict can fail."""
    for kw, link in ((dict(lambda_min=-0.3), "kappa_emp<=kappa_block"),
                     (dict(mid_sum=0.01), "kappa_block<=kappa_mid"),
                     (dict(kappa_phi=60.0, mid_sum=0.5), "kappa_phi<=kappa_bound")):
        rec = finalize(_raw(**kw), 4, loss=SQUARED_HINGE)
        assert rec.failed == [link] and rec.all_hold is False and rec.chain_holds is False


@pytest.mark.parametrize("loss", [LOGISTIC, EXPONENTIAL])
def test_self_bounded_losses_judge_everything(loss):
    rec = finalize(_raw(), 4, loss=loss)
    assert rec.not_implied == {} and rec.all_hold is True
    assert len(rec.links) == 4 and len(rec.checks) == 3


def test_coupled_model_judges_nothing():
    """A coupled model (the two-layer model): only κ_emp is measured,
    no link exists and nothing is implied — all_hold is None, never a vacuous True."""
    nan = float("nan")
    rec = finalize(_raw(lambda_min_block=nan, lambda_max_upper=nan, kappa_bound=nan, beta2=nan,
                        mid_sum=nan, kappa_phi=nan), 4, model=TWO_LAYER, loss=LOGISTIC)
    assert rec.kappa_emp == pytest.approx(2.0 * 0.1 / 0.5)
    assert rec.links == {} and rec.failed == []
    assert rec.chain_holds is None and rec.all_hold is None
    assert set(rec.not_implied) == {"weak_convexity", "self_bounded_gradient",
                                       "self_bounded_smoothness"}
    json.dumps(rec, allow_nan=False)


NO_KAPPA = SOFTMAX._replace(name="softmax-without-closed-form", kappa=None, beta2=None)


@pytest.mark.slow
def test_model_without_closed_form_kappa_has_no_last_link():
    """A HeadModel with ``kappa=None``: the chain stops at κ_Φ (no κ(θ) link), the checks
    that need κ or β₂ are undefined and not implied, and the chain that remains matches
    the softmax model's (same head function) on the same θ."""
    cfg_X = np.random.default_rng(3).standard_normal((N_SMALL, 3, 4)) * 0.7
    X = jax.numpy.asarray(cfg_X)
    y = jax.numpy.asarray(np.where(cfg_X[:, 0, 0] > 0, 1.0, -1.0))
    th = SOFTMAX.init(jax.random.PRNGKey(1), 2, 3, 4, u_scale=1.0, w_scale=1.0)
    fn = jax.jit(lambda th, X, y, k: chain_raw(th, X, y, k, method="dense", model=NO_KAPPA))
    rec = finalize(fn(th, X, y, KEY), 2, model=NO_KAPPA, loss=LOGISTIC)
    ref = finalize(jax.jit(lambda th, X, y, k: chain_raw(th, X, y, k, method="dense"))(th, X, y, KEY), 2)
    assert rec.kappa_bound is None and rec.beta2 is None
    assert list(rec.links) == ["kappa_emp<=kappa_block", "kappa_block<=kappa_mid",
                                  "kappa_mid<=kappa_phi"]
    assert all(v is None for v in rec.checks.values())
    assert set(rec.not_implied) == {"weak_convexity", "self_bounded_gradient",
                                       "self_bounded_smoothness"}
    assert "closed-form" in rec.reasons["weak_convexity"]
    assert rec.all_hold is True and rec.chain_holds is True
    for k in ("kappa_emp", "kappa_block", "kappa_mid", "kappa_phi"):
        assert getattr(rec, k) == getattr(ref, k)
    assert list(ref.links)[-1] == "kappa_phi<=kappa_bound"     # the softmax chain has it


N_SMALL = 5


# ---------------------------------------------------------------------------
# κ_emp as a certified interval (docs/theory.md §3.4, §7)
# ---------------------------------------------------------------------------

@per_regime(regimes=("generic", "large_w", "small_loss"), examples=3)
def test_kappa_emp_interval_contains_the_independent_value(case):
    """[kappa_emp_lo, kappa_emp_hi] = [−√H·λ_hi/L̂, −√H·λ_lo/L̂] from the certified enclosure
    holds the independently computed κ_emp, holds the point kappa_emp, and is narrow
    (1e-10 relative, or rounding relative to the curvature scale)."""
    th, X, y, _ = case
    rec = finalize(raw_core(th, X, y, KEY), H)
    ref = _independent(th, X, y)
    rnd = 1e-10 + weight_rtol(th, X)
    lo, hi = rec.kappa_emp_lo, rec.kappa_emp_hi
    assert rec.eig_certified is True and rec.eig_counts >= 2
    assert lo <= rec.kappa_emp <= hi
    assert lo - rnd * ref["scale"] <= ref["kappa_emp"] <= hi + rnd * ref["scale"]
    assert hi - lo <= 1e-9 * max(abs(lo), abs(hi)) + 1e-12 * ref["scale"]
    assert rec.lambda_min_lo <= rec.lambda_min <= rec.lambda_min_hi
    assert rec.links["kappa_emp<=kappa_block"] is True


def test_finalize_judges_the_first_link_on_the_certified_end():
    """The point κ_emp below κ_blk is not enough: the link fails when the enclosure's lower
    end λ_lo (the upper end of κ_emp) passes below λ_min(B) by more than the slack."""
    ok = finalize(_raw(lambda_min=-0.15, lambda_min_lo=-0.15 - 1e-12, lambda_min_hi=-0.15 + 1e-12), 4)
    assert ok.links["kappa_emp<=kappa_block"] is True
    assert ok.kappa_emp_lo == pytest.approx(2.0 * (0.15 - 1e-12) / 0.5)
    assert ok.kappa_emp_hi == pytest.approx(2.0 * (0.15 + 1e-12) / 0.5)
    bad = finalize(_raw(lambda_min=-0.19, lambda_min_lo=-0.21, lambda_min_hi=-0.18), 4)
    assert bad.kappa_emp < bad.kappa_block < bad.kappa_emp_hi
    assert bad.links["kappa_emp<=kappa_block"] is False and bad.chain_holds is False
    # a raw record without enclosure (an older caller) falls back to the point value
    old = finalize(_raw(), 4)
    assert old.kappa_emp_lo is None and old.kappa_emp_hi is None
    assert old.links["kappa_emp<=kappa_block"] is True and old.eig_certified is None


# ---------------------------------------------------------------------------
# chain_raw's own arguments: defaults, R, the loss, the model and the solver options
# ---------------------------------------------------------------------------

def _small_problem(seed=3, n=6, heads=2):
    """n = 6, T = 3, d = 4, H = 2: the shapes of the property tests (their programs are reused)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3, 4)) * 0.7
    y = np.where(X[:, 0, 0] > 0, 1.0, -1.0)
    th = SOFTMAX.init(jax.random.PRNGKey(seed), heads, 3, 4, u_scale=1.0, w_scale=1.0)
    return th, jax.numpy.asarray(X), jax.numpy.asarray(y)


@pytest.mark.slow
def test_chain_raw_defaults_to_auto_and_uses_a_given_radius():
    """No ``method``: "auto" (the certified inertia route for head models), the same record
    as method="inertia". A given ``R`` replaces the token radius in κ(θ) and β₂, checked
    against the closed forms of docs/theory.md §6 in numpy with that R."""
    th, X, y = _small_problem()
    raw = jax.jit(lambda th, X, y, k: chain_raw(th, X, y, k, R=10.0))(th, X, y, KEY)
    ref = jax.jit(lambda th, X, y, k: chain_raw(th, X, y, k, method="inertia", R=10.0))(th, X, y, KEY)
    assert jax.tree_util.tree_structure(raw) == jax.tree_util.tree_structure(ref)
    for (k, a), b in zip(jax.tree_util.tree_leaves_with_path(raw), jax.tree_util.tree_leaves(ref)):
        assert np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True), jax.tree_util.keystr(k)
    U = np.asarray(th.U)
    Hh, Tt = U.shape[0], U.shape[1]
    l21 = np.linalg.norm(U, axis=-1).sum(-1)
    R = 10.0
    assert float(raw.kappa_bound) == pytest.approx(np.max(R**3 * math.sqrt(Tt) + 2 * R**5 * l21), rel=1e-13, abs=0)
    assert float(raw.beta2) == pytest.approx(math.sqrt(Tt * R**2 + R**6 * np.sum(l21**2) / Hh), rel=1e-13, abs=0)
    assert float(np.max(np.linalg.norm(np.asarray(X), axis=-1))) < 5.0    # so R = 10 is not the default


@pytest.mark.slow
def test_chain_raw_uses_the_given_loss():
    """loss=EXPONENTIAL: L̂, ||∇L̂||, λ_min/λ_max and κ_mid's sum are those of the exponential
    risk, from jax.hessian of the reference model (tests/helpers.py) with ℓ(m) = exp(−m)."""
    from mhajax.losses import EXPONENTIAL
    th, X, y = _small_problem()
    refs = make_refs(2, 3, 4)
    z = flat(th)

    def risk(z):
        return jax.numpy.mean(jax.numpy.exp(-y * refs["phi"](z, X)))

    ev = np.linalg.eigvalsh(np.asarray(jax.hessian(risk)(z)))
    raw = jax.jit(lambda th, X, y, k: chain_raw(th, X, y, k, method="dense", loss=EXPONENTIAL))(th, X, y, KEY)
    assert float(raw.loss) == pytest.approx(float(risk(z)), rel=1e-12, abs=0)
    assert float(raw.grad_norm) == pytest.approx(np.linalg.norm(np.asarray(jax.grad(risk)(z))), rel=1e-10, abs=0)
    scale = max(abs(ev[0]), abs(ev[-1]))
    assert abs(float(raw.extremes.lambda_min) - ev[0]) <= 1e-10 * scale
    assert abs(float(raw.extremes.lambda_max) - ev[-1]) <= 1e-10 * scale
    # κ_mid's numerator (1/n) Σ |ℓ'_i| max_h ||∇²f_ih|| with |ℓ'(m)| = exp(−m)
    m = np.asarray(y) * np.asarray(refs["phi"](z, X))
    norms = opnorm_sym(np.asarray(refs["head_hess"](z, X)))
    assert float(raw.mid_sum) == pytest.approx(np.mean(np.exp(-m) * norms.max(1)), rel=1e-10, abs=0)


@pytest.mark.slow
def test_chain_raw_passes_solver_options_and_method_through():
    """method="lanczos" with num_steps=4, max_cycles=1 on P = 56: one 4-step cycle cannot
    converge, so eig_converged is False and the product count is 4 + 2 (plus the two
    certification counts' zero products); the converged Lanczos run reports its residual."""
    th, X, y = _small_problem(heads=2)
    short = jax.jit(lambda th, X, y, k: chain_raw(th, X, y, k, method="lanczos", num_steps=4,
                                                  max_cycles=1))(th, X, y, KEY)
    assert not bool(short.extremes.eig_converged)
    rec = finalize(raw_lanczos(th, X, y, KEY), 2)
    assert rec.eig_converged and rec.lambda_min_residual is not None and rec.num_matvecs > 0


@pytest.mark.slow
def test_coupled_model_chain_raw_measures_kappa_emp_alone():
    """The two-layer model through chain_raw: only L̂, ||∇L̂|| and the matrix-free λ_min/λ_max
    are measured (the rest NaN); λ_min/λ_max agree with numpy's eigvalsh of jax.hessian
    of the flattened risk."""
    from jax.flatten_util import ravel_pytree
    from mhajax.losses import empirical_risk
    th = TWO_LAYER.init(jax.random.PRNGKey(2), 2, 3, 4)
    rng = np.random.default_rng(0)
    X = jax.numpy.asarray(rng.standard_normal((N_SMALL, 3, 4)))
    y = jax.numpy.asarray(np.array([1.0, -1.0, 1.0, -1.0, 1.0]))
    raw = jax.jit(lambda th, X, y, k: chain_raw(th, X, y, k, model=TWO_LAYER, num_steps=16,
                                                max_cycles=200))(th, X, y, KEY)
    z0, unravel = ravel_pytree(th)
    ev = np.linalg.eigvalsh(np.asarray(jax.hessian(lambda z: empirical_risk(unravel(z), X, y, TWO_LAYER))(z0)))
    assert bool(raw.extremes.eig_converged)
    scale = max(abs(ev[0]), abs(ev[-1]))
    assert abs(float(raw.extremes.lambda_min) - ev[0]) <= 1e-8 * scale
    assert abs(float(raw.extremes.lambda_max) - ev[-1]) <= 1e-8 * scale
    for k in ("kappa_bound", "beta2", "mid_sum", "kappa_phi"):
        assert np.isnan(float(getattr(raw, k))), k
    rec = finalize(raw, 2, model=TWO_LAYER)
    assert rec.kappa_emp == pytest.approx(-math.sqrt(2) * float(raw.extremes.lambda_min) / float(raw.loss))


def test_closed_forms_receive_the_token_count():
    """HeadModel's contract (mhajax/models/base.py, docs/extending.md): ``kappa(params, R, T)``
    and ``beta2(params, R, T)`` get the token count T of X (here 3) and the radius R. A model
    whose closed forms return T and R themselves shows what they were given."""
    th, X, y = _small_problem()
    probe = SOFTMAX._replace(name="softmax-probe", kappa=lambda p, R, T: 1000.0 * T + R,
                             beta2=lambda p, R, T: 10.0 * T + R)
    raw = jax.jit(lambda th, X, y, k: chain_raw(th, X, y, k, method="block", links="core", R=0.5,
                                                model=probe))(th, X, y, KEY)
    assert float(raw.kappa_bound) == 3000.5 and float(raw.beta2) == 30.5


def test_float32_record_stays_float32():
    """A float32 θ and X: every raw quantity is float32, the NaN placeholders of the links
    that were skipped (links="core": κ_mid, κ_Φ) included."""
    th, X, y = _small_problem()
    f32 = lambda a: jax.numpy.asarray(a, jax.numpy.float32)  # noqa: E731
    raw = jax.jit(lambda th, X, y, k: chain_raw(th, X, y, k, method="block", links="core"))(
        jax.tree_util.tree_map(f32, th), f32(X), f32(y), KEY)
    for k in ("loss", "grad_norm", "kappa_bound", "beta2", "mid_sum", "kappa_phi"):
        assert getattr(raw, k).dtype == jax.numpy.float32, k
    assert np.isnan(float(raw.mid_sum)) and np.isnan(float(raw.kappa_phi))


@pytest.mark.parametrize("excess, holds", [(5.9e-9, True), (6.1e-9, False)])
def test_rounding_slack_is_1e_9_of_the_curvature_scale(excess, holds):
    """The slack of a link is 1e-9 · max(|a|, |b|, scale), as literal numbers: H = 1,
    L̂ = 0.5, the largest |λ| is λ_max_upper = 3, so scale = 6 and the slack is 6e-9.
    κ_blk = 0.4; κ_emp = 0.4 + excess holds for an excess of 5.9e-9, not 6.1e-9."""
    rec = finalize(_raw(lambda_min=-0.5 * (0.4 + excess)), 1)
    assert rec.check_scale == pytest.approx(6.0, rel=1e-15, abs=0)
    assert rec.kappa_block == pytest.approx(0.4, rel=1e-15, abs=0)
    assert rec.links["kappa_emp<=kappa_block"] is holds


@pytest.mark.parametrize("steps, holds", [(4, True), (5, False)])
def test_a_vanishing_hessian_is_judged_to_the_smallest_normal_float(steps, holds):
    """Every λ exactly 0 (a Hessian that vanishes: scale = 0, so the relative slack is 0): the
    certified λ_min end may sit a few smallest-normal floats below 0 (a confirming count that
    ties at 0 steps outward by ``tiny``), and the link κ_emp <= κ_blk still holds up to the
    floor 4·√H·tiny/L̂; one step more is a violation. H = 4, L̂ = 0.5: floor = 16·tiny."""
    tiny = float(np.finfo(np.float64).tiny)
    rec = finalize(_raw(lambda_min=0.0, lambda_max=0.0, lambda_min_block=0.0, lambda_max_upper=0.0,
                        lambda_min_lo=-steps * tiny, lambda_min_hi=0.0), 4)
    assert rec.check_scale == 0.0 and rec.check_floor == 16 * tiny
    assert rec.kappa_emp_hi == pytest.approx(2.0 * steps * tiny / 0.5, rel=1e-15, abs=0)
    assert rec.links["kappa_emp<=kappa_block"] is holds


def test_finalize_record_carries_every_raw_field():
    """Every raw value reaches the record under its own name and type (literal values, all
    distinct), the enclosures and the solver's flags and counts included."""
    raw = _raw(lambda_min_lo=-0.11, lambda_min_hi=-0.09, lambda_max_lo=1.9, lambda_max_hi=2.1,
               residual_min=1e-9, residual_max=2e-9, num_matvecs=17, eig_converged=False,
               eig_certified=True, eig_width_ok=False, eig_missed=True, eig_counts=12, eig_ties=3)
    rec = finalize(raw, 4)
    expect = dict(heads=4, loss=0.5, lambda_min=-0.1, lambda_max=2.0, lambda_min_lo=-0.11,
                  lambda_min_hi=-0.09, lambda_max_lo=1.9, lambda_max_hi=2.1, lambda_min_residual=1e-9,
                  lambda_max_residual=2e-9, eig_converged=False, num_matvecs=17, eig_certified=True,
                  eig_width_ok=False, eig_missed=True, eig_counts=12, eig_ties=3, lambda_min_block=-0.2,
                  lambda_max_upper=3.0, kappa_phi=1.0, kappa_bound=50.0, grad_norm=0.1, beta2=10.0,
                  loss_defined=True)
    for k, v in expect.items():
        assert getattr(rec, k) == v and type(getattr(rec, k)) is type(v), (k, getattr(rec, k))
    assert rec.check_scale == pytest.approx(2.0 * 3.0 / 0.5, rel=1e-15, abs=0)   # √H max|λ| / L̂
    # the certified interval of κ_emp: ends reversed (κ_emp decreases in λ_min)
    assert rec.kappa_emp_lo == pytest.approx(2.0 * 0.09 / 0.5, rel=1e-15, abs=0)
    assert rec.kappa_emp_hi == pytest.approx(2.0 * 0.11 / 0.5, rel=1e-15, abs=0)
    for k in ("eig_certified", "eig_width_ok", "eig_missed", "eig_counts", "eig_ties", "lambda_max_lo",
              "lambda_max_hi"):
        assert getattr(finalize(_raw(), 4), k) is None, k        # absent from raw: None


def test_finalize_defined_from_tiny_over_eps_of_the_loss_dtype():
    """L̂ >= tiny/eps of the loss's own dtype: the float64 threshold itself is defined, and a
    float32 L̂ of 1e-33 (above float64's threshold, below float32's ~9.9e-32) is not."""
    f64 = np.finfo(np.float64)
    assert finalize(_raw(loss=f64.tiny / f64.eps), 4).loss_defined is True
    assert finalize(_raw(loss=np.nextafter(f64.tiny / f64.eps, 0.0)), 4).loss_defined is False
    raw = _raw()
    raw = raw._replace(loss=np.asarray(1e-33, np.float32))
    rec = finalize(raw, 4)
    assert rec.loss_defined is False and rec.kappa_emp is None
    raw = raw._replace(loss=np.asarray(1e-30, np.float32))
    assert finalize(raw, 4).loss_defined is True


def test_finalize_never_reports_an_overflowed_ratio():
    """√H·λ_min can overflow (λ_min = −1e308, H = 4): the ratio is then undefined (None),
    never inf, and the record stays JSON without NaN/inf."""
    rec = finalize(_raw(lambda_min=-1e308, lambda_min_block=-1e308), 4)
    assert rec.lambda_min == -1e308
    assert rec.kappa_emp is None and rec.kappa_block is None
    assert all_finite_or_none(rec)
    json.dumps(rec, allow_nan=False)


def test_a_link_exactly_at_the_slack_holds():
    """The verdict is a <= b + slack (not <): H = 1, L̂ = 0.5, scale = 6, κ_blk = 0.2/0.5 and
    κ_emp = κ_blk + 1e-9·6 exactly (λ_min = −κ_emp/2: halving and doubling are exact)."""
    b = 0.2 / 0.5
    a = b + 1e-9 * 6.0
    rec = finalize(_raw(lambda_min=-a / 2), 1)
    assert rec.kappa_emp == a and rec.kappa_block == b
    assert rec.links["kappa_emp<=kappa_block"] is True


def test_finalize_without_any_eigenvalue_or_closed_form():
    """No finite λ at all: the curvature scale is 0 (not an error); an undefined L̂ has scale
    0 too. Without β₂ the smoothness check has no coefficient: None, not an error."""
    nan = float("nan")
    rec = finalize(_raw(lambda_min=nan, lambda_max=nan, lambda_min_block=nan, lambda_max_upper=nan), 4)
    assert rec.check_scale == 0.0
    assert finalize(_raw(loss=0.0), 4).check_scale == 0.0
    rec = finalize(_raw(beta2=nan), 4)
    assert rec.beta2 is None and rec.kappa_bound == 50.0
    assert rec.checks["self_bounded_smoothness"] is None and rec.checks["self_bounded_gradient"] is None


def test_kappa_phi_is_the_given_models_per_sample_norm():
    """κ_Φ = max_i max_h ||∇²_{θ_h} f(θ_h; X_i)|| of the model passed: for the linear head
    that norm is θ-free, ||X_i||_op³ / T (mhajax/models/variants.py), here from numpy's SVD."""
    from mhajax.models.variants import LINEAR
    _, X, y = _small_problem()
    th = LINEAR.init(jax.random.PRNGKey(4), 2, 3, 4)
    raw = jax.jit(lambda th, X, y, k: chain_raw(th, X, y, k, method="block", model=LINEAR))(th, X, y, KEY)
    op = np.linalg.svd(np.asarray(X), compute_uv=False)[:, 0]
    assert float(raw.kappa_phi) == pytest.approx(np.max(op**3 / 3), rel=1e-10, abs=0)


@pytest.mark.parametrize("loss", [0.0, 1e-300])
def test_an_underflowed_point_still_reports_a_broken_link_that_needs_no_loss(loss):
    """κ_Φ <= κ(θ) compares two closed forms and needs no L̂: broken at an underflowed L̂
    (κ_Φ = 70 > κ(θ) = 60), it is reported in ``failed`` and the point fails; holding there,
    it does not make the point judged (chain_holds/all_hold stay None)."""
    rec = finalize(_raw(loss=loss, kappa_phi=70.0, kappa_bound=60.0), 4)
    assert rec.loss_defined is False and rec.kappa_emp is None
    assert rec.links == {"kappa_phi<=kappa_bound": False}
    assert rec.failed == ["kappa_phi<=kappa_bound"]
    assert rec.chain_holds is False and rec.all_hold is False
    rec = finalize(_raw(loss=loss, kappa_phi=50.0, kappa_bound=60.0), 4)
    assert rec.links == {"kappa_phi<=kappa_bound": True} and rec.failed == []
    assert rec.chain_holds is None and rec.all_hold is None
    # no absolute floor without a defined L̂: a link broken by 0.5 stays broken
    rec = finalize(_raw(loss=loss, kappa_phi=60.5, kappa_bound=60.0), 4)
    assert rec.check_floor == 0.0
    assert rec.links == {"kappa_phi<=kappa_bound": False} and rec.failed == ["kappa_phi<=kappa_bound"]


# -- chain: the checked entry point -------------------------------------------------------------------

def _fixed(seed=3):
    """A small fixed problem in the generic regime: ``(θ [H heads], X [n, T, d], y ∈ {±1}ⁿ)``."""
    from mhajax.api import init_params, tokenized_mixture
    X, y = tokenized_mixture(jax.random.PRNGKey(seed), 12, T, D, num_clusters=2)
    return init_params(jax.random.PRNGKey(seed + 1), H, T, D, w_scale=1.0), X, y


@pytest.mark.slow
def test_chain_is_finalize_of_chain_raw_at_its_defaults_and_forwards_each_option():
    from mhajax.analysis.chain import chain
    th, X, y = _fixed()
    _same(chain(th, X, y), finalize(raw_auto(th, X, y, KEY), H))
    k2 = jax.random.PRNGKey(7)
    core = chain(th, X, y, model="softmax", loss="logistic", method="dense", links="core", key=k2)
    _same(core, finalize(chain_raw(th, X, y, k2, method="dense", links="core"), H))
    assert core.kappa_mid is None and core.kappa_phi is None and core.all_hold is True
    sq = chain(th, X, y, loss=SQUARED_HINGE)
    _same(sq, finalize(chain_raw(th, X, y, KEY, loss=SQUARED_HINGE), H, loss=SQUARED_HINGE))
    assert sq.not_implied and sq.loss != pytest.approx(chain(th, X, y).loss, rel=1e-3, abs=0)


def _same(a, b):
    """Two records equal field by field: verdicts, flags and counts exactly, numbers to rounding
    (two compilations of the same program may round differently)."""
    for f, u, v in zip(a._fields, a, b):
        if isinstance(u, float) and not isinstance(u, bool):
            assert v == pytest.approx(u, rel=1e-9, abs=1e-12 * max(1.0, a.check_scale)), f
        else:
            assert u == v, f


def test_chain_judges_by_the_model_it_is_given():
    """The coupled two-layer model has no closed-form κ or β₂, so it implies none of the three
    inequalities: each is listed as not implied, with the reason, and nothing is judged (judged
    as the softmax head, they would be implied)."""
    from mhajax.analysis.chain import chain
    _, X, y = _fixed()
    th = TWO_LAYER.init(jax.random.PRNGKey(4), H, T, D)
    rec = chain(th, X, y, model=TWO_LAYER)
    assert rec.links == {} and set(rec.not_implied) == set(rec.checks) == {
        "weak_convexity", "self_bounded_gradient", "self_bounded_smoothness"}
    assert set(rec.reasons) == set(rec.checks) and all("closed-form" in r for r in rec.reasons.values())
    assert rec.all_hold is None and rec.failed == []
    assert rec.kappa_emp is not None and rec.kappa_emp_hi is None     # a Ritz value: one-sided


@pytest.mark.parametrize("kw, match", [
    (dict(links="most"), "links must be one of core, all, got 'most'"),
    (dict(method="exact"), "method"),
    (dict(model="no-such-model"), "no-such-model"),
])
def test_chain_refuses_a_bad_option_by_name(kw, match):
    from mhajax.analysis.chain import chain
    from mhajax.errors import InputError
    th, X, y = _fixed()
    with pytest.raises(InputError, match=match):
        chain(th, X, y, **kw)


def test_chain_refuses_labels_outside_plus_minus_one_and_a_wrong_closed_form():
    """The door: {0, 1} labels, and a model whose closed-form κ lies below the measured κ_Φ (so it
    is no bound), are refused before anything is computed; a κ that is smaller but still a bound
    is accepted."""
    from mhajax.analysis.chain import chain
    from mhajax.errors import InputError
    th, X, y = _fixed()
    with pytest.raises(InputError, match="labels must be -1 or \\+1"):
        chain(th, X, (y + 1) / 2)
    rec = chain(th, X, y)
    scaled = lambda f: SOFTMAX._replace(name=f"kappa-x{f:.3g}", kappa=lambda p, R, T: f * SOFTMAX.kappa(p, R, T))
    low = 0.5 * rec.kappa_phi / rec.kappa_bound
    with pytest.raises(InputError, match="kappa .* fails at the θ given to chain"):
        chain(th, X, y, model=scaled(low))
    assert chain(th, X, y, model=scaled(4 * low)).kappa_bound == pytest.approx(2 * rec.kappa_phi, rel=1e-12, abs=0)
