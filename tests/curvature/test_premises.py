"""A user's closed forms are checked against autodiff before anything rests on them
(mhajax.curvature.premises, docs/theory.md §3.7).

Users' heads wrong in realistic ways (a ``weighted_hessian`` at half, in a transposed layout or
with two heads' blocks swapped; a ``reduced_hessian`` off by a factor; a κ or β₂ that is not a
bound; a gradient doubled through ``custom_jvp``; a loss whose ``d2`` is wrong) never yield a
certified number: every certified entry refuses them with one line naming the field. The same
heads written correctly pass, and their certified λ_min equals the dense ``eigvalsh`` of
``jax.hessian`` (the independent truth).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mhajax import (LOGISTIC, HeadModel, InputError, Loss, chain, hessian_extremes, lambda_min, lambda_min_enclosure,
                    spectral_counts, spectral_histogram)
from mhajax.curvature import premises
from mhajax.curvature.premises import (block_discrepancy, check_premises, fd_tolerance, identity_tolerance,
                                       premise_jit)
from mhajax.curvature.spectrum import extremes
from mhajax.models import SOFTMAX, get_model
from mhajax.models.base import MHAParams, ravel_heads
from mhajax.models.softmax import (beta2, beta3, kappa_bound, reduced_head_hessian, softmax_head, softmax_init,
                                   weighted_head_hessian)
from mhajax.testing import BoundViolation, assert_chain, assert_derivatives

N, T, D, H = 6, 3, 4, 3


def problem(seed=0, w=0.7):
    kx, ky, ku, kw = jax.random.split(jax.random.PRNGKey(seed), 4)
    X = jax.random.normal(kx, (N, T, D)) / 2
    y = jnp.where(jax.random.normal(ky, (N,)) > 0, 1.0, -1.0).at[0].set(1.0).at[1].set(-1.0)
    th = MHAParams(jax.random.normal(ku, (H, T, D)), w * jax.random.normal(kw, (H, D, D)) / D)
    return th, X, y


def dense_lambda_min(th, X, y, model):
    """λ_min of ∇²L̂ from ``jax.hessian`` of the risk on a flat vector and numpy's eigvalsh."""
    Z, unravel_head = ravel_heads(th)

    def risk(z):
        p = jax.vmap(unravel_head)(z.reshape(Z.shape))
        out = jax.vmap(lambda x: jnp.sum(jax.vmap(model.head_fn, in_axes=(0, None))(p, x)))(X) / jnp.sqrt(H)
        return jnp.mean(jax.nn.softplus(-y * out))
    return float(np.linalg.eigvalsh(np.asarray(jax.hessian(risk)(Z.reshape(-1))))[0])


def _transposed_w(B):
    """The block in a layout whose W part is read transposed (a row-/column-major mix-up)."""
    idx = np.arange(T * D + D * D)
    idx[T * D:] = T * D + np.arange(D * D).reshape(D, D).T.reshape(-1)
    return B[idx][:, idx]


@jax.custom_jvp
def _doubled(x):
    return x


@_doubled.defjvp
def _doubled_jvp(primals, tangents):
    return primals[0], 2.0 * tangents[0]


def _swapping(th):
    """A ``weighted_hessian`` that hands head 0 head 1's block and head 1 head 0's."""
    stack = ravel_heads(th)[0]

    def wh(theta_h, X, c):
        zh = jnp.concatenate([jnp.ravel(theta_h.U), jnp.ravel(theta_h.W)])
        h = jnp.argmin(jnp.sum((stack - zh) ** 2, axis=1))
        other = jnp.where(h == 0, 1, jnp.where(h == 1, 0, h))
        zo = stack[other]
        return weighted_head_hessian(MHAParams(zo[:T * D].reshape(T, D), zo[T * D:].reshape(D, D)), X, c)
    return wh


def _softmax_true_norm(th, X):
    """The largest ‖∇²f(θ_h; X_i)‖_op over the data (jax.hessian + numpy)."""
    Z, unravel_head = ravel_heads(th)
    return max(float(np.abs(np.linalg.eigvalsh(np.asarray(jax.hessian(
        lambda z: softmax_head(unravel_head(z), X[i]))(Z[h])))).max()) for i in range(N) for h in range(H))


def _largest_gradient(th, X):
    """The largest ‖∇_θ Φ(θ; X_i)‖ over the data (jax.grad of the softmax model, numpy norms)."""
    def phi(p, x):
        return jnp.sum(jax.vmap(softmax_head, in_axes=(0, None))(p, x)) / jnp.sqrt(H)
    return max(float(np.sqrt(sum(np.sum(np.asarray(g) ** 2) for g in jax.grad(phi)(th, X[i])))) for i in range(N))


def wrong_models(th, X):
    """``{case: (model, loss, field named in the refusal)}``."""
    big, grad = _softmax_true_norm(th, X), _largest_gradient(th, X)
    return {
        "weighted_hessian at half": (HeadModel("half", softmax_head, softmax_init, weighted_hessian=lambda t, X, c:
                                               0.5 * weighted_head_hessian(t, X, c)), LOGISTIC, "weighted_hessian"),
        "weighted_hessian transposed": (HeadModel("transposed", softmax_head, softmax_init,
                                                  weighted_hessian=lambda t, X, c:
                                                  _transposed_w(weighted_head_hessian(t, X, c))),
                                        LOGISTIC, "weighted_hessian"),
        "weighted_hessian heads swapped": (HeadModel("swapped", softmax_head, softmax_init,
                                                     weighted_hessian=_swapping(th)), LOGISTIC, "weighted_hessian"),
        "reduced_hessian doubled": (HeadModel("reduced2", softmax_head, softmax_init, reduced_hessian=lambda t, x:
                                              2.0 * reduced_head_hessian(t, x)), LOGISTIC, "reduced_hessian"),
        "kappa too small": (HeadModel("smallkappa", softmax_head, softmax_init,
                                      kappa=lambda p, R, T_: 0.5 * big), LOGISTIC, "kappa"),
        "beta2 too small": (HeadModel("smallbeta2", softmax_head, softmax_init,
                                      beta2=lambda p, R, T_: 0.5 * grad), LOGISTIC, "beta2"),
        "gradient doubled through custom_jvp": (HeadModel("doubled", lambda t, X: _doubled(softmax_head(t, X)),
                                                          softmax_init), LOGISTIC, "head_fn"),
        "loss.d2 doubled": (SOFTMAX, Loss("bad-d2", LOGISTIC.value, LOGISTIC.d1, lambda z: 2.0 * LOGISTIC.d2(z)),
                            "loss.d2"),
    }


#: the softmax head with every closed form, as a user would copy it (not the built-in object)
MINE = HeadModel("mine", softmax_head, softmax_init, kappa=kappa_bound, beta2=beta2,
                 weighted_hessian=weighted_head_hessian, reduced_hessian=reduced_head_hessian, beta3=beta3)
#: a user's head with no closed form: softmax with temperature 1/2
TEMP = HeadModel("temp", lambda t, X: softmax_head(t._replace(W=2.0 * t.W), X), softmax_init)


@pytest.fixture(scope="module")
def wrong():
    th, X, y = problem()
    return th, X, y, wrong_models(th, X)


CASES = ["weighted_hessian at half", "weighted_hessian transposed", "weighted_hessian heads swapped",
         "reduced_hessian doubled", "kappa too small", "beta2 too small", "gradient doubled through custom_jvp",
         "loss.d2 doubled"]


@pytest.mark.parametrize("case", CASES)
def test_a_wrong_closed_form_is_refused_with_one_line_naming_the_field(case, wrong):
    th, X, y, models = wrong
    model, loss, field = models[case]
    with pytest.raises(InputError) as e:
        check_premises(th, X, y, model=model, loss=loss)
    msg = str(e.value)
    assert "\n" not in msg and field in msg and "nothing is certified" in msg, msg
    assert (f"loss {loss.name!r}" if field.startswith("loss") else f"model {model.name!r}") in msg


@pytest.mark.parametrize("case", CASES)
def test_no_certified_number_rests_on_a_wrong_closed_form(case, wrong):
    th, X, y, models = wrong
    model, loss, field = models[case]
    for call in (lambda: lambda_min_enclosure(th, X, y, model=model, loss=loss),
                 lambda: hessian_extremes(th, X, y, model=model, loss=loss),
                 lambda: lambda_min(th, X, y, method="dense", model=model, loss=loss),
                 lambda: spectral_counts(th, X, y, [0.0], model=model, loss=loss),
                 lambda: chain(th, X, y, model=model, loss=loss)):
        with pytest.raises(InputError, match=field.split(" ")[0].replace(".", r"\.")):
            call()


@pytest.mark.parametrize("case", ["weighted_hessian at half", "gradient doubled through custom_jvp",
                                  "reduced_hessian doubled", "loss.d2 doubled"])
def test_the_assertions_name_the_inconsistent_derivative(case, wrong):
    th, X, y, models = wrong
    model, loss, field = models[case]
    attr = {"head_fn": "grad_fd"}.get(field, field.replace(".", "_"))
    for assertion in (assert_derivatives, assert_chain):
        with pytest.raises(BoundViolation) as e:
            assertion(th, X, y, model=model, loss=loss)
        assert f"inconsistent derivative: {attr}" in str(e.value).splitlines()[0]


def test_correct_user_heads_pass_and_give_the_dense_truth():
    th, X, y = problem(1)
    for model in (MINE, TEMP):
        found = check_premises(th, X, y, model=model)           # raises on any failure
        assert {"grad_fd", "hvp_fd", "loss_d1", "loss_d2"} <= set(found)
        lo, hi = lambda_min_enclosure(th, X, y, model=model)
        truth = dense_lambda_min(th, X, y, model)
        assert lo <= truth + 1e-12 * abs(truth) and truth - 1e-12 * abs(truth) <= hi, (model.name, lo, truth, hi)
        rep = assert_derivatives(th, X, y, model=model)
        assert rep.holds and {c.name for c in rep.checks} >= {"grad_fd", "hvp_fd", "loss_d1", "loss_d2"}
    assert {c.name for c in assert_derivatives(th, X, y, model=MINE).checks} >= {"weighted_hessian",
                                                                                 "reduced_hessian"}


def _built_ins_pass(names):
    kx, ky = jax.random.split(jax.random.PRNGKey(3))
    y = jnp.where(jax.random.normal(ky, (N,)) > 0, 1.0, -1.0)
    for name in names:
        model = get_model(name)
        for w_scale, x_scale in ((0.0, 1.0), (30.0, 5.0)):
            X = x_scale * jax.random.normal(kx, (N, T, D)) / 2
            th = model.init(jax.random.PRNGKey(4), H, T, D, w_scale=w_scale)
            e = premise_jit(th, X, y, jax.random.PRNGKey(5), model, LOGISTIC)
            assert float(e.grad_fd) <= fd_tolerance(X.dtype) and float(e.hvp_fd) <= fd_tolerance(X.dtype), name
            for field in ("weighted_hessian", "reduced_hessian", "beta3", "kappa", "beta2", "loss_d1", "loss_d2"):
                v = float(getattr(e, field))
                assert v != v or v <= identity_tolerance(X.dtype), (name, w_scale, field, v)


def test_built_in_heads_pass_on_the_kink_and_saturated():
    """W = 0 (a ReLU head sits on its kink) and saturated softmax (large W, large tokens): every
    discrepancy stays within its tolerance (every built-in model: the slow tier)."""
    _built_ins_pass(["softmax", "relu"])


@pytest.mark.slow
def test_every_built_in_model_passes_in_adversarial_regimes():
    from mhajax.models import ALL_MODELS
    _built_ins_pass(ALL_MODELS)


@pytest.mark.slow
def test_built_in_heads_pass_on_the_testing_strategies_draws():
    """The adversarial draws of mhajax.testing.strategies (saturated, large W, uniform attention,
    near-underflow margins): no built-in head is refused."""
    from hypothesis import HealthCheck, given, settings
    from mhajax.models import MODELS
    from mhajax.testing.strategies import problems
    for name in MODELS:
        model = get_model(name)

        @settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(problems(model))
        def check(p):
            e = premise_jit(p.params, p.X, p.y, jax.random.PRNGKey(0), model, LOGISTIC)
            assert float(e.grad_fd) <= fd_tolerance(p.X.dtype) and float(e.hvp_fd) <= fd_tolerance(p.X.dtype)
            for field in ("weighted_hessian", "reduced_hessian", "beta3", "kappa", "beta2", "loss_d1", "loss_d2"):
                v = float(getattr(e, field))
                assert v != v or v <= identity_tolerance(p.X.dtype), (name, field, v, p)
        check()


def test_a_built_in_pair_is_checked_once_per_process_and_a_users_every_time():
    th, X, y = problem(2)
    premises._CHECKED.discard((SOFTMAX, LOGISTIC, str(X.dtype)))     # as in a fresh process
    assert not premises.checked_before(SOFTMAX, LOGISTIC, X.dtype)
    assert check_premises(th, X, y) != {}
    assert check_premises(th, X, y) == {} and premises.checked_before(SOFTMAX, LOGISTIC, X.dtype)
    assert check_premises(th, X, y, model=MINE) != {}
    assert check_premises(th, X, y, model=MINE) != {}         # a user's: every call
    assert not premises.checked_before(MINE, LOGISTIC, X.dtype)


def test_the_certified_route_checks_a_users_blocks_at_every_theta():
    """A closed form right at W = 0 only: certified there, never away from it (extremes' own
    per-θ check, which the commands' checkpoints rest on)."""
    def wh(t, X, c):
        return weighted_head_hessian(t, X, c) * (1.0 + jnp.sum(t.W ** 2))
    model = HeadModel("right-at-zero", softmax_head, softmax_init, weighted_hessian=wh)
    th, X, y = problem(3, w=0.0)
    ext = jax.jit(lambda th, X, y: extremes(th, X, y, jax.random.PRNGKey(0), model=model))
    at0 = ext(th, X, y)
    assert bool(at0.eig_certified) and float(at0.eig_premise) <= identity_tolerance(X.dtype)
    th1, _, _ = problem(3, w=0.7)
    off = ext(th1, X, y)
    assert not bool(off.eig_certified) and float(off.eig_premise) > 0.01
    assert np.isnan(float(off.lambda_min)) and np.isnan(float(off.lambda_min_lo))
    assert np.isnan(float(off.lambda_min_block))
    builtin = jax.jit(lambda th, X, y: extremes(th, X, y, jax.random.PRNGKey(0)))(th1, X, y)
    assert np.isnan(float(builtin.eig_premise)) and bool(builtin.eig_certified)


def test_the_dense_route_rests_on_jax_hessian_alone():
    th, X, y = problem(4)
    half = HeadModel("half", softmax_head, softmax_init,
                     weighted_hessian=lambda t, X, c: 0.5 * weighted_head_hessian(t, X, c))
    truth = dense_lambda_min(th, X, y, half)
    d = jax.jit(lambda th, X, y: extremes(th, X, y, jax.random.PRNGKey(0), method="dense", model=half))(th, X, y)
    assert bool(d.eig_certified)
    assert float(d.lambda_min_lo) <= truth <= float(d.lambda_min_hi) or abs(float(d.lambda_min) - truth) <= 1e-12
    assert np.isnan(float(d.lambda_min_block))                # B is the closed form's: dropped
    i = jax.jit(lambda th, X, y: extremes(th, X, y, jax.random.PRNGKey(0), method="inertia", model=half))(th, X, y)
    assert not bool(i.eig_certified) and np.isnan(float(i.lambda_min))


def test_block_discrepancy_is_zero_for_the_true_blocks_and_one_half_for_half():
    th, X, y = problem(5)
    c = jax.random.normal(jax.random.PRNGKey(1), (N,))
    e_true, _ = block_discrepancy(th, X, c, jax.random.PRNGKey(2), MINE)
    half = MINE._replace(weighted_hessian=lambda t, X, c: 0.5 * weighted_head_hessian(t, X, c))
    e_half, _ = block_discrepancy(th, X, c, jax.random.PRNGKey(2), half)
    assert float(e_true) <= identity_tolerance(X.dtype)
    assert float(e_half) == pytest.approx(0.5, rel=1e-6, abs=0)


def test_tolerances_follow_the_dtype():
    assert identity_tolerance(jnp.float64) == 1e-10
    assert identity_tolerance(jnp.float32) == 256 * float(jnp.finfo(jnp.float32).eps)
    assert fd_tolerance(jnp.float64) == pytest.approx(float(np.sqrt(np.finfo(np.float64).eps)), rel=1e-15, abs=0)


def test_histogram_refuses_a_wrong_block_too(wrong):
    th, X, y, models = wrong
    model, loss, _ = models["weighted_hessian at half"]
    with pytest.raises(InputError, match="weighted_hessian"):
        spectral_histogram(th, X, y, [-1.0, 0.0, 1.0], model=model, loss=loss)
