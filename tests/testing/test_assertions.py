"""mhajax.testing assertions (docs/theory.md §3, §6–§7): each holds on the paper's model across the
strategies of mhajax.testing.strategies, and each fails on a deliberately broken model
(heads sharing parameters, a wrong closed-form B, κ or β₂ set too small) with a message
that gives the measured value, the bound and the slack.

Shapes come from one small set (JAX compiles once per shape and assertion).
"""
import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis.errors import FailedHealthCheck, Unsatisfiable

from mhajax.models.softmax import SOFTMAX
from mhajax.models.base import HeadModel, MHAParams
from mhajax.models.softmax.head import init_params
from mhajax.analysis.chain import CHECK_RTOL, finalize
from mhajax.errors import InputError
from mhajax.losses import LOGISTIC
from mhajax.models.softmax.head import softmax_head
from mhajax.models.softmax.hessian import weighted_head_hessian
from mhajax.testing import (LOSS_FLOOR, BoundViolation, SkippedLinkWarning, UndefinedCheck,
                            assert_chain, assert_head_block_diagonal, assert_self_bounded_gradient,
                            assert_self_bounded_smoothness, assert_weak_convexity, loss_defined)
from mhajax.testing import strategies as mst
from mhajax.testing import x64_enabled
from mhajax.testing._x64 import global_x64
from mhajax.testing.assertions import _core_fn

SHAPES = ((1, 3, 4), (2, 3, 4))
PROBLEMS = mst.problems(shapes=SHAPES)             # every default regime, near-underflow included
MULTIHEAD = mst.problems(shapes=((2, 3, 4),), regimes=("typical", "uniform_attention"))
UNDERFLOW = mst.problems(shapes=((2, 3, 4),), regimes=("underflow",))
FAST = settings(max_examples=15, deadline=None)
FEW = settings(max_examples=6, deadline=None)


def _fixed_problem(H=2, T=3, d=4, n=6, seed=0):
    X, y = mst.mixture_arrays(seed, n, T, d, num_clusters=2)
    th = init_params(jax.random.PRNGKey(seed + 1), H, T, d, w_scale=1.0)
    return th, jnp.asarray(X), jnp.asarray(y)


def _assert_message_reports(err, check):
    """The failure message names the check and gives measured value, bound and slack."""
    msg = str(err.value)
    assert check.holds is False and check.name in msg
    for label, v in (("measured", check.measured), ("bound", check.bound), ("slack", check.slack)):
        assert f"{label}" in msg and repr(v) in msg, (label, v, msg)
    assert check.slack >= CHECK_RTOL * max(abs(check.measured), abs(check.bound))
    assert check.measured > check.bound + check.slack


# ---------------------------------------------------------------------------
# The paper's model: every assertion holds across the strategies
# ---------------------------------------------------------------------------

@FAST
@given(PROBLEMS)
def test_weak_convexity_holds(p):
    rep = assert_weak_convexity(p.params, p.X, p.y, on_undefined="raise")
    c = rep["weak_convexity"]
    assert rep.holds is True and c.measured <= c.bound + c.slack


@FAST
@given(PROBLEMS)
def test_self_bounded_gradient_holds(p):
    assert assert_self_bounded_gradient(p.params, p.X, p.y, on_undefined="raise").holds is True


@FAST
@given(PROBLEMS)
def test_self_bounded_smoothness_holds(p):
    assert assert_self_bounded_smoothness(p.params, p.X, p.y, on_undefined="raise").holds is True


@FAST
@given(PROBLEMS)
def test_head_block_diagonal_holds(p):
    rep = assert_head_block_diagonal(p.params, p.X, p.y)
    names = {c.name for c in rep.checks}
    assert {"phi_block_diagonal", "loss_block_diagonal", "blocks_equal_B"} <= names
    # heads of mha share nothing: the off-diagonal products are exact zeros
    assert rep["phi_block_diagonal"].measured == 0.0


@pytest.mark.slow
@FAST
@given(PROBLEMS)
def test_chain_holds_and_agrees_with_finalize(p):
    rep = assert_chain(p.params, p.X, p.y, on_undefined="raise")
    names = {c.name for c in rep.checks}
    H = p.params.U.shape[0]
    assert {"kappa_emp<=kappa_block", "kappa_block<=kappa_mid", "kappa_mid<=kappa_phi",
            "kappa_phi<=kappa_bound", "weak_convexity", "self_bounded_gradient",
            "self_bounded_smoothness", "gradient_bound", "output_bound"} <= names
    assert {f"hessian_bound[h={h}]" for h in range(H)} <= names
    assert rep.holds is True and not rep.skipped
    verdicts = rep.context["finalize_verdicts"]  # same slack rule as mhajax.chain.finalize
    for c in rep.checks:
        if c.name in verdicts:
            assert verdicts[c.name] == c.holds, c


# ---------------------------------------------------------------------------
# κ, β₂ set too small: each assertion fails, and says by how much
# ---------------------------------------------------------------------------

@FAST
@given(PROBLEMS)
def test_weak_convexity_fails_when_kappa_too_small(p):
    c = assert_weak_convexity(p.params, p.X, p.y)["weak_convexity"]
    assume(c.measured > 4 * c.slack)          # B has a negative eigenvalue above rounding
    with pytest.raises(BoundViolation, match="weak_convexity") as err:
        assert_weak_convexity(p.params, p.X, p.y, kappa=c.measured / 2)
    bad = err.value.report["weak_convexity"]
    assert bad.measured == c.measured and bad.bound == c.measured / 2
    assert bad.excess > 0
    _assert_message_reports(err, bad)
    assert "kappa_source=argument" in str(err.value)


@pytest.mark.slow
@FEW
@given(PROBLEMS)
def test_chain_fails_when_kappa_too_small(p):
    ok = assert_chain(p.params, p.X, p.y)
    k_phi = ok["kappa_mid<=kappa_phi"].bound
    assume(k_phi / 2 > 4 * CHECK_RTOL * max(k_phi, ok.context["check_scale"]))
    with pytest.raises(BoundViolation) as err:
        assert_chain(p.params, p.X, p.y, kappa=k_phi / 2)
    _assert_message_reports(err, err.value.report["kappa_phi<=kappa_bound"])


@FAST
@given(PROBLEMS)
def test_gradient_and_smoothness_fail_when_constants_too_small(p):
    g = assert_self_bounded_gradient(p.params, p.X, p.y)["self_bounded_gradient"]
    assume(g.measured > 4 * g.slack)
    with pytest.raises(BoundViolation) as err:
        assert_self_bounded_gradient(p.params, p.X, p.y, beta2=g.measured / 2)
    _assert_message_reports(err, err.value.report["self_bounded_gradient"])

    s = assert_self_bounded_smoothness(p.params, p.X, p.y)["self_bounded_smoothness"]
    assume(s.measured > 4 * s.slack)
    with pytest.raises(BoundViolation) as err:
        assert_self_bounded_smoothness(p.params, p.X, p.y, kappa=0.0,
                                       beta2=math.sqrt(s.measured / 2))
    _assert_message_reports(err, err.value.report["self_bounded_smoothness"])


# ---------------------------------------------------------------------------
# Heads that share parameters, and a wrong closed-form B
# ---------------------------------------------------------------------------

def tied_mean_phi(params, x):
    """Multi-query attention: one key-query matrix stored broadcast to H copies (tied by the mean)."""
    W = jnp.mean(params.W, axis=0)
    H = params.U.shape[0]
    return sum(softmax_head(MHAParams(params.U[h], W), x) for h in range(H)) / jnp.sqrt(H)


def reads_head0_phi(params, x):
    """Every head reads head 0's W: a head function that reads another head's parameter."""
    H = params.U.shape[0]
    return sum(softmax_head(MHAParams(params.U[h], params.W[0]), x) for h in range(H)) / jnp.sqrt(H)


@pytest.mark.parametrize("phi", [tied_mean_phi, reads_head0_phi])
@FEW
@given(MULTIHEAD)
def test_head_block_diagonal_fails_when_heads_share_parameters(phi, p):
    # identical tokens in every sequence make every second derivative vanish: nothing to see
    assume(float(np.ptp(np.asarray(p.X), axis=1).max()) > 0.1)
    with pytest.raises(BoundViolation, match="phi_block_diagonal") as err:
        assert_head_block_diagonal(p.params, p.X, p.y, phi=phi)
    rep = err.value.report
    bad = rep["phi_block_diagonal"]
    _assert_message_reports(err, bad)
    assert "shared parameters" in str(err.value)
    assert rep["loss_block_diagonal"].holds is False


def transposed_closed_form(theta_h, X, c):
    """A closed-form head Hessian with the W convention transposed (a plausible bug)."""
    return weighted_head_hessian(theta_h._replace(W=theta_h.W.T), X, c)


BAD_B = SOFTMAX._replace(name="softmax-wrong-closed-form", weighted_hessian=transposed_closed_form)


def test_head_block_diagonal_names_a_wrong_closed_form_as_the_cause():
    """A wrong weighted_hessian is an inconsistent derivative, named first (not a block structure
    failure): the report's first line says so, and the check gives measured, bound and slack."""
    th, X, y = _fixed_problem()
    with pytest.raises(BoundViolation) as err:
        assert_head_block_diagonal(th, X, y, model=BAD_B)
    assert "cause=inconsistent derivative: weighted_hessian" in str(err.value).splitlines()[0]
    c = err.value.report["weighted_hessian"]
    assert c.holds is False and c.measured > c.slack and repr(c.measured) in str(err.value)


def test_blocks_equal_b_still_catches_what_the_premise_check_does_not_sample():
    """The block-diagonal assertion's own comparison (every head, every probe) stays: with the
    derivative check passed, blocks_equal_B holds for the true closed form."""
    th, X, y = _fixed_problem()
    rep = assert_head_block_diagonal(th, X, y, model=SOFTMAX._replace(name="softmax-copy"))
    assert rep["blocks_equal_B"].holds and rep["phi_block_diagonal"].holds


# ---------------------------------------------------------------------------
# A user model without closed forms
# ---------------------------------------------------------------------------

def tanh_head(theta, X):
    return jnp.sum(theta.U * (jnp.tanh(X @ theta.W @ X.T) @ X)) / X.shape[0]


TANH = HeadModel("tanh-attention", tanh_head, init_params)


@pytest.mark.slow
def test_model_without_closed_forms():
    th, X, y = _fixed_problem()
    with pytest.warns(SkippedLinkWarning, match="no closed-form κ or β₂"):
        rep = assert_chain(th, X, y, model=TANH)
    assert rep.holds is True
    assert [c.name for c in rep.checks] == ["kappa_emp<=kappa_block", "kappa_block<=kappa_mid",
                                            "kappa_mid<=kappa_phi"]
    text = str(rep)
    assert "[skipped] κ(θ): model 'tanh-attention' has no closed-form κ" in text
    assert "[skipped] self_bounded_gradient" in text and "softmax head only" in text
    for f in (assert_weak_convexity, assert_self_bounded_gradient, assert_self_bounded_smoothness):
        with pytest.raises(InputError, match="has no closed-form"):
            f(th, X, y, model=TANH)
    # a bound supplied by the user is checked: here too small
    k_phi = rep["kappa_mid<=kappa_phi"].bound
    with pytest.raises(BoundViolation, match="kappa_phi<=kappa_bound"), warnings.catch_warnings():
        warnings.simplefilter("ignore", SkippedLinkWarning)
        assert_chain(th, X, y, model=TANH, kappa=k_phi / 2)
    assert assert_head_block_diagonal(th, X, y, model=TANH).holds is True


def _nan_head(theta, X):
    return jnp.sum(theta.U * (jax.nn.softmax(X @ theta.W @ X.T, axis=-1) @ X)) * jnp.nan


def test_non_finite_model_fails_never_undefined():
    th, X, y = _fixed_problem()
    bad = HeadModel("nan-head", _nan_head, init_params, SOFTMAX.kappa)
    with pytest.raises(BoundViolation, match="finite"):
        assert_weak_convexity(th, X, y, model=bad, on_undefined="ignore")


# ---------------------------------------------------------------------------
# Underflowed L̂: undefined, never a silent pass or fail
# ---------------------------------------------------------------------------

@FEW
@given(UNDERFLOW)
def test_underflow_is_reported_undefined(p):
    with pytest.raises(UndefinedCheck, match="undefined") as err:
        assert_weak_convexity(p.params, p.X, p.y, on_undefined="raise")
    assert err.value.report.holds is None
    rep = assert_chain(p.params, p.X, p.y, on_undefined="ignore")
    assert rep.holds is None and not rep.failures
    defined = {c.name for c in rep.checks if c.holds is not None}
    # the checks that do not divide by L̂ are still made
    assert {"kappa_phi<=kappa_bound", "gradient_bound", "output_bound"} <= defined
    assert {"weak_convexity", "self_bounded_gradient", "kappa_block<=kappa_mid"} <= \
        {c.name for c in rep.undefined}
    rep = assert_head_block_diagonal(p.params, p.X, p.y)  # the Φ route needs no L̂
    assert rep.holds is True and "underflowed" in str(rep)


def test_underflow_skips_a_plain_pytest_test():
    th, X, _ = _fixed_problem()
    th, y = mst.push_margins(th, X, SOFTMAX, target=800.0)
    with pytest.raises(pytest.skip.Exception, match="undefined"):
        assert_self_bounded_gradient(th, X, y)  # on_undefined="skip", outside @given


def test_underflow_inside_given_rejects_the_example():
    @settings(max_examples=3, deadline=None, database=None)
    @given(UNDERFLOW)
    def inner(p):
        assert_chain(p.params, p.X, p.y)  # on_undefined="skip": hypothesis.reject()

    with pytest.raises((Unsatisfiable, FailedHealthCheck)):
        inner()


def test_loss_floor_is_finalize_threshold():
    th, X, y = _fixed_problem()
    raw = jax.tree_util.tree_map(np.asarray, _core_fn(SOFTMAX, LOGISTIC)(th, X, y, jax.random.PRNGKey(0), 2.0))
    for factor, expect in ((1.01, True), (0.99, False)):
        raw = raw._replace(loss=np.asarray(LOSS_FLOOR * factor))
        assert (finalize(raw, 2).chain_holds is not None) is expect
        assert loss_defined(LOSS_FLOOR * factor) is expect


# ---------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------

def test_inputs_are_validated_and_upcast():
    th, X, y = _fixed_problem()
    th32 = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float32), th)
    rep = assert_weak_convexity(th32, np.asarray(X, np.float32), np.asarray(y, np.float32))
    assert rep.holds is True
    with global_x64(False):  # the assertions switch float64 on for themselves, then restore
        assert assert_chain(th32, np.asarray(X, np.float32), np.asarray(y, np.float32)).holds
        assert not x64_enabled()
    with pytest.raises(InputError, match="below the largest token norm"):
        assert_weak_convexity(th, X, y, R=0.5)
    with pytest.raises(InputError, match="on_undefined"):
        assert_chain(th, X, y, on_undefined="pass")
    with pytest.raises(InputError, match="labels"):
        assert_chain(th, X, 2 * y)


@pytest.mark.slow
def test_chain_judges_kappa_emp_on_the_certified_end():
    """assert_chain reads λ_min as a certified enclosure (inertia counts, docs/theory.md §3.4): the
    first link's measured value is κ_emp's certified upper end, the report gives both
    intervals, and they are narrow."""
    th, X, y = _fixed_problem()
    rep = assert_chain(th, X, y, links="core")
    c = rep["kappa_emp<=kappa_block"]
    lo, hi = rep.context["kappa_emp_interval"]
    lmin_lo, lmin_hi = rep.context["lambda_min_enclosure"]
    assert c.holds is True and c.measured == hi and "certified" in c.statement
    assert lo <= hi and hi - lo <= 1e-9 * abs(hi)
    assert lmin_lo <= lmin_hi and lmin_hi - lmin_lo <= 1e-9 * abs(lmin_lo)


def test_assert_chain_refuses_a_bad_solver_option_by_name():
    """``**eig_kw`` are checked as the spectrum's entries check them, naming the assertion."""
    th = init_params(jax.random.PRNGKey(0), 2, 3, 4)
    X = jax.random.normal(jax.random.PRNGKey(1), (6, 3, 4)) / 2
    y = jnp.array([1.0, -1.0] * 3)
    with pytest.raises(InputError, match=r"^assert_chain: num_steps must be an integer >= 1, got 0$"):
        assert_chain(th, X, y, method="lanczos", num_steps=0)
    with pytest.raises(InputError, match=r"^assert_chain: unknown option 'steps' "):
        assert_chain(th, X, y, steps=3)


@pytest.mark.parametrize("bad", ["1", True, 1j, np.ones(2), float("nan"), float("inf"), -1.0, object()])
@pytest.mark.parametrize("what", ["kappa", "beta2"])
def test_a_bound_argument_that_is_no_finite_real_number_is_refused(what, bad):
    """A string was parsed ("1" checked as κ = 1), a bool used as 1, a complex or an array failed
    inside ``float``; now only a finite real number >= 0, or a 0-d real array, is a bound."""
    th = init_params(jax.random.PRNGKey(1), 2, 3, 4)
    X, y = jax.random.normal(jax.random.PRNGKey(0), (6, 3, 4)), jnp.array([1.0, -1.0] * 3)
    fn = assert_weak_convexity if what == "kappa" else assert_self_bounded_gradient
    with pytest.raises(InputError, match=rf"^{what} must be a (finite )?number(, | >= 0, )got "):
        fn(th, X, y, **{what: bad})


def test_a_bound_given_as_a_0d_array_is_the_bound_given_as_a_float():
    th = init_params(jax.random.PRNGKey(1), 2, 3, 4)
    X, y = jax.random.normal(jax.random.PRNGKey(0), (6, 3, 4)), jnp.array([1.0, -1.0] * 3)
    k = jnp.asarray(7.5)
    a = assert_weak_convexity(th, X, y, kappa=k)["weak_convexity"]
    b = assert_weak_convexity(th, X, y, kappa=7.5)["weak_convexity"]
    assert (a.measured, a.bound, a.holds) == (b.measured, b.bound, b.holds) and b.bound == 7.5
