"""Assertions of the inequalities of docs/theory.md §3 and §6–§7, for the paper's model and any
:class:`~mhajax.model.HeadModel`.

Each assertion computes in float64 (it turns float64 on for its own body and
upcasts the inputs), returns a :class:`Report` when every check holds, and
otherwise raises :class:`BoundViolation` (an ``AssertionError``) whose message
gives, for each check, the measured value, the bound and the rounding slack:

* :func:`assert_weak_convexity`      ``λ_min(∇²L̂) >= λ_min(B) >= −(κ/√H) L̂`` (certified route)
* :func:`assert_self_bounded_gradient` ``||∇L̂|| <= β₂ L̂``
* :func:`assert_self_bounded_smoothness` ``λ_max(∇²L̂) <= λ_max(G) + max_h λ_max(B_h) <= (β₂² + κ/√H) L̂``
* :func:`assert_derivatives`          the model's and loss's derivatives are consistent (autodiff
  against finite differences, closed forms against ``jax.hessian``/``jax.grad``); every other
  assertion runs it first, so an inconsistent derivative is named, not blamed on a bound
* :func:`assert_head_block_diagonal`   off-diagonal head blocks of ``∇²Φ(θ; X_i)`` (and of
  ``∇²L̂ − G``) vanish, and the diagonal blocks of ``∇²L̂ − G`` are the model's ``B_h``
* :func:`assert_chain`                 every link of the κ chain (docs/theory.md §7):
  ``κ_emp <= κ_blk <= κ_mid <= κ_Φ <= κ(θ)`` (κ_emp from the certified enclosure of λ_min
  by inertia counts, the link judged on its certified upper end), the three self-bounded
  inequalities, and the
  per-sample output / gradient / per-head Hessian bounds

**Slack.** An inequality ``a <= b`` holds when ``a <= b + CHECK_RTOL · max(|a|, |b|, scale) + floor``
with :data:`mhajax.chain.CHECK_RTOL` and, for the ratios over ``L̂``, the curvature scale
``scale = √H · max|λ| / L̂`` of :func:`mhajax.chain.finalize` (so the verdicts agree with
``finalize``'s); the per-sample bounds use ``scale = 0``; the block-diagonal checks
compare with ``0`` (or with ``B v``) under ``CHECK_RTOL ·`` the largest entry of the
Hessian-vector products involved. No loose tolerance anywhere.

**Closed forms.** κ and β₂ default to ``model.kappa`` / ``model.beta2``. The standalone
assertions raise :class:`~mhajax.errors.InputError` when the model has no closed form and
none is passed; :func:`assert_chain` skips the closed-form links, says so in its report and
warns with :class:`SkippedLinkWarning`.

**Underflow.** When ``L̂`` is below ``tiny/eps ≈ 1e-292`` (:data:`LOSS_FLOOR`; margins beyond
~672 — the threshold of :func:`mhajax.chain.finalize`, whose decision is read back), every
ratio over ``L̂`` is *undefined*: it neither passes nor fails.
``on_undefined`` chooses what happens then (checks that do not divide by ``L̂`` are still
made first, and a failure among them is raised as usual):

* ``"skip"`` (default): inside a hypothesis ``@given`` test the example is rejected
  (``hypothesis.reject()``, with an ``event`` in ``--hypothesis-show-statistics``); inside
  any other pytest test the test is skipped (``pytest.skip``) with the reason; elsewhere
  :class:`UndefinedCheck` is raised;
* ``"raise"``: raise :class:`UndefinedCheck` (not an ``AssertionError``: an *error*, not
  a failure);
* ``"ignore"``: return the :class:`Report`, whose ``holds`` is ``None``.

A non-finite ``L̂`` or curvature (NaN from the model) is a failure, never "undefined".
"""
from __future__ import annotations

import functools
import math
import os
import warnings
from dataclasses import dataclass, field
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from mhajax.analysis.chain import CHECK_RTOL, chain_raw, finalize
from mhajax.analysis.kappa import CHAIN, DEFINITION, SYMBOL
from mhajax.curvature.operators import head_blocks, per_sample_head_hessian_norms
from mhajax.curvature.premises import checked_before, fd_tolerance, identity_tolerance, remember
from mhajax.curvature.premises import premise_jit as premise_errors_jit
from mhajax.curvature.spectrum import check_solver_options
from mhajax.data.common import token_radius
from mhajax.errors import InputError
from mhajax.losses import LOGISTIC, Loss
from mhajax.models.base import (CoupledModel, HeadModel, check_problem, is_coupled, output, ravel_heads,
                                require_heads, unravel_heads)
from mhajax.models.softmax import SOFTMAX
from mhajax.models.softmax.bounds import beta3 as _beta3
from mhajax.models.softmax.bounds import output_bound as _output_bound
from mhajax.testing._x64 import float64
from mhajax.validate import checked_key, positive_float

ON_UNDEFINED = ("skip", "raise", "ignore")
_FI = np.finfo(np.float64)
#: smallest L̂ whose ratios are defined: ``tiny/eps`` (~1e-292, margins up to ~672), the
#: threshold of :func:`mhajax.chain.finalize` (XLA flushes subnormals to zero, so terms of
#: size ~L̂ carry an absolute error ~tiny). The ratio checks read finalize's own verdict.
LOSS_FLOOR = float(_FI.tiny / _FI.eps)


def loss_defined(L: float) -> bool:
    """Whether ratios over ``L̂ = L`` are defined (finite and ``>= LOSS_FLOOR``)."""
    return math.isfinite(L) and L >= LOSS_FLOOR


class BoundViolation(AssertionError):
    """An inequality failed; ``.report`` holds every measured value."""

    def __init__(self, message: str, report: "Report"):
        super().__init__(message)
        self.report = report


class UndefinedCheck(Exception):
    """A check is undefined (``L̂`` underflowed); ``.report`` holds the rest."""

    def __init__(self, message: str, report: "Report"):
        super().__init__(message)
        self.report = report


class SkippedLinkWarning(UserWarning):
    """A closed-form link was skipped because the model has no closed form for it."""


@dataclass(frozen=True)
class Check:
    """One inequality ``measured <= bound`` judged with ``slack``; ``holds`` is
    ``None`` when undefined (``note`` says why)."""

    name: str
    statement: str
    measured: Optional[float]
    bound: Optional[float]
    slack: Optional[float]
    holds: Optional[bool]
    note: str = ""

    @property
    def excess(self) -> Optional[float]:
        """``measured − bound − slack`` (> 0 exactly when the check fails)."""
        if self.measured is None or self.bound is None or self.slack is None:
            return None
        return self.measured - self.bound - self.slack

    def describe(self) -> str:
        """One line: the check, its statement, measured value, bound and slack."""
        tag = {True: "holds", False: "FAILED", None: "undefined"}[self.holds]
        lines = [f"  [{tag}] {self.name}: {self.statement}"]
        if self.holds is None:
            lines.append(f"      undefined: {self.note}")
            return "\n".join(lines)
        lines.append(f"      measured = {self.measured!r}")
        lines.append(f"      bound    = {self.bound!r}")
        lines.append(f"      slack    = {self.slack!r}")
        if self.holds is False and self.excess is not None:
            lines.append(f"      excess   = {self.excess!r}  (measured − bound − slack)")
        if self.note:
            lines.append(f"      {self.note}")
        return "\n".join(lines)


@dataclass
class Report:
    """What an assertion measured: its checks, the links it skipped (and why) and context."""

    assertion: str
    model: str
    checks: list = field(default_factory=list)
    skipped: list = field(default_factory=list)   # (what, reason)
    context: dict = field(default_factory=dict)

    @property
    def failures(self) -> list:
        """The checks that failed."""
        return [c for c in self.checks if c.holds is False]

    @property
    def undefined(self) -> list:
        """The checks that could not be judged (L̂ underflowed or a value is missing)."""
        return [c for c in self.checks if c.holds is None]

    @property
    def holds(self) -> Optional[bool]:
        """False if a check failed, None if none failed but one is undefined, else True."""
        if self.failures:
            return False
        return None if self.undefined else True

    def __getitem__(self, name: str) -> Check:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    def __str__(self) -> str:
        verdict = {True: "holds", False: "FAILED", None: "UNDEFINED"}[self.holds]
        ctx = ", ".join(f"{k}={_fmt(v)}" for k, v in self.context.items()
                        if not k.startswith("finalize"))
        lines = [f"mhajax {self.assertion} {verdict} (model {self.model!r}; {ctx})"]
        order = {False: 0, None: 1, True: 2}  # failures first, then undefined, then holds
        lines += [c.describe() for c in sorted(self.checks, key=lambda c: order[c.holds])]
        for what, why in self.skipped:
            lines.append(f"  [skipped] {what}: {why}")
        lines.append(f"  slack = CHECK_RTOL · max(|measured|, |bound|, scale) + floor, CHECK_RTOL = {CHECK_RTOL!r} "
                     "(mhajax.chain), scale as stated per check")
        return "\n".join(lines)


def _fmt(v) -> str:
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _leq(name, statement, a, b, scale, note="", undefined_note="", defined=True, floor=0.0) -> Check:
    if a is None or b is None:
        if not defined:
            return Check(name, statement, a, b, None, None, undefined_note or note)
        return Check(name, statement, a, b, None, False,
                     f"not finite (measured={a!r}, bound={b!r}): the model produced NaN/inf")
    slack = CHECK_RTOL * max(abs(a), abs(b), scale) + floor
    return Check(name, statement, a, b, slack, bool(a <= b + slack), note)


def _check_policy(on_undefined: str) -> None:
    if on_undefined not in ON_UNDEFINED:
        raise InputError(f"on_undefined must be one of {', '.join(ON_UNDEFINED)}, got {on_undefined!r}")


def _conclude(report: Report, on_undefined: str) -> Report:
    if report.failures:
        raise BoundViolation(str(report), report)
    if report.undefined and on_undefined != "ignore":
        msg = str(report)
        if on_undefined == "raise":
            raise UndefinedCheck(msg, report)
        _skip(msg, report)
    return report


def _skip(msg: str, report: Report) -> None:
    try:
        import hypothesis
        in_given = bool(getattr(hypothesis, "currently_in_test_context", lambda: False)())
    except ImportError:  # pragma: no cover - hypothesis is a test extra
        in_given = False
    if in_given:
        hypothesis.event(f"mhajax {report.assertion}: undefined (L̂ underflowed), example rejected")
        hypothesis.note(msg)
        hypothesis.reject()
    if "PYTEST_CURRENT_TEST" in os.environ:
        import pytest
        pytest.skip(msg)
    raise UndefinedCheck(msg, report)


# ---------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------

def _to64(a):
    a = jnp.asarray(a)
    return a.astype(jnp.float64) if jnp.issubdtype(a.dtype, jnp.floating) else a


def _prepare(params, X, y, R, model=SOFTMAX, assertion="assertion", phi=None):
    """Validate (InputError, :func:`mhajax.models.base.check_problem`; with the user's own ``phi``,
    θ, X and y against ``phi`` instead of ``model``) and upcast to float64; must run under
    :func:`float64`."""
    check_problem(assertion, params, X, y, model=model if phi is None else _as_model(phi))
    params = jax.tree_util.tree_map(_to64, params)
    X = _to64(X)
    y = None if y is None else _to64(y)
    if X.ndim != 3:
        raise InputError(f"X must have shape [n, T, d], got {tuple(X.shape)}")
    R_data = float(token_radius(X))
    if R is None:
        R = R_data
    else:
        R = float(R)
        if not math.isfinite(R) or R < R_data * (1 - 1e-12):
            raise InputError(f"R={R!r} is below the largest token norm of X ({R_data!r}): the "
                             "closed-form bounds hold only for tokens of norm <= R")
    return params, X, y, R


def _as_model(phi):
    """The user's ``phi(params, x [T, d])`` as a coupled model, for validation only."""
    return CoupledModel(name=getattr(phi, "__name__", "phi"), init=None, phi=phi)


def _closed_form(value, model_fn, what, model: HeadModel):
    """``(value or None, source)`` for κ or β₂."""
    if value is not None:   # a real number or a 0-d real array (κ(θ) from mhajax.kappa_bound)
        return positive_float(what, value, allow_zero=True), "argument"
    if model_fn is not None:
        return None, f"closed form of model {model.name!r}"
    return None, None


def _missing_msg(what: str, attr: str, arg: str, model: HeadModel) -> str:
    return (f"model {model.name!r} has no closed-form {what} (HeadModel.{attr} is None); "
            f"pass {arg}=<your bound> to check it")


def _is_softmax(model: HeadModel) -> bool:
    return model.head_fn is SOFTMAX.head_fn


# ---------------------------------------------------------------------------
# Jitted kernels, cached per (model, loss, options): one compile per shape
# ---------------------------------------------------------------------------

@functools.lru_cache(maxsize=64)
def _core_fn(model: HeadModel, loss: Loss):
    def f(params, X, y, key, R):
        return chain_raw(params, X, y, key, method="block", links="core", R=R, model=model,
                         loss=loss)
    return jax.jit(f)


@functools.lru_cache(maxsize=64)
def _chain_fn(model: HeadModel, loss: Loss, method: str, links: str, eig_items: tuple):
    eig_kw = dict(eig_items)
    softmax = _is_softmax(model)

    def f(params, X, y, key, R):
        raw = chain_raw(params, X, y, key, method=method, links=links, R=R, model=model,
                        loss=loss, **eig_kw)
        phi = lambda th, x: output(th, x, model)  # noqa: E731
        grads = jax.vmap(jax.grad(phi), in_axes=(None, 0))(params, X)
        sq = sum(jnp.sum(g.reshape(g.shape[0], -1) ** 2, axis=1)
                 for g in jax.tree_util.tree_leaves(grads))
        extra = dict(phi_absmax=jnp.max(jnp.abs(output(params, X, model))),
                     grad_phi_max=jnp.sqrt(jnp.max(sq)))
        if links == "all":
            extra["head_norms"] = jnp.max(per_sample_head_hessian_norms(params, X, model), axis=0)
        if softmax:
            extra["output_bound"] = _output_bound(params, R)
            extra["beta3"] = _beta3(params, R, X.shape[1])
        return raw, extra
    return jax.jit(f)


def _finalized(raw, H, kappa, beta2):
    raw = jax.tree_util.tree_map(np.asarray, raw)
    if kappa is not None:
        raw = raw._replace(kappa_bound=np.asarray(kappa, np.float64))
    if beta2 is not None:
        raw = raw._replace(beta2=np.asarray(beta2, np.float64))
    L = float(raw.loss)
    e = raw.extremes
    eig = [e.lambda_min, e.lambda_max, e.lambda_min_block, e.lambda_max_upper]
    if not any(np.isfinite(e) for e in eig):
        return None, L, loss_defined(L)
    rec = finalize(raw, H)
    # finalize decides when ratios over L̂ are defined; read its decision back
    defined = rec.loss_defined
    return rec, L, defined


def _nonfinite_failure(assertion, model, what, context) -> Report:
    rep = Report(assertion, model.name, context=context)
    rep.checks.append(Check("finite", f"{what} is finite", None, None, None, False,
                            "the model produced non-finite values"))
    return rep


def _finite_or_fail(report_name, model, L, rec, context, keys=("lambda_min_block",)):
    """Raise BoundViolation if L̂ or the curvature is non-finite (a model bug, not underflow)."""
    if not math.isfinite(L):
        rep = _nonfinite_failure(report_name, model, f"L̂ = {L!r}", context)
        raise BoundViolation(str(rep) + f"\n      L̂ = {L!r}", rep)
    if rec is None or any(getattr(rec, k) is None for k in keys):
        rep = _nonfinite_failure(report_name, model, "the curvature (λ of B / ∇²L̂)", context)
        raise BoundViolation(str(rep), rep)


_UNDERFLOW = "L̂ = {L!r} < tiny/eps = {tiny:.3g} (underflowed): ratios over L̂ are undefined"


# ---------------------------------------------------------------------------
# Standalone self-bounded inequalities (certified routes)
# ---------------------------------------------------------------------------

def _run(assertion, model, fn, *args):
    """Call a jitted kernel; an eigensolver that fails on NaN/inf (NumPy's LAPACK behind
    :mod:`mhajax.linalg` on CPU raises instead of returning NaN) is a failure of the model."""
    try:
        return fn(*args)
    except Exception as e:  # JaxRuntimeError wrapping numpy.linalg.LinAlgError
        text = str(e)
        if "LinAlgError" not in text and "did not converge" not in text:
            raise
        rep = _nonfinite_failure(assertion, model, "the curvature (eigenvalues of B / ∇²L̂)", {})
        rep.checks[0] = Check("finite", "the curvature is finite", None, None, None, False,
                              "the eigensolver failed on a non-finite Hessian: the model "
                              "produced NaN/inf second derivatives")
        raise BoundViolation(str(rep), rep) from e


def _core(params, X, y, model, loss, R, assertion):
    params, X, y, R = _prepare(params, X, y, R, model, assertion)
    _derivatives_or_fail(assertion, params, X, y, model, loss)
    H = jax.tree_util.tree_leaves(params)[0].shape[0]
    raw = _run(assertion, model, _core_fn(model, loss), params, X, y, checked_key(assertion, None), R)
    return params, X, y, R, H, raw


def _closed_forms(model, kappa, beta2, need) -> tuple:
    """``(kappa, beta2, sources)`` for the closed forms named in ``need``; an
    :class:`InputError` naming every one that neither the caller nor the model gives."""
    out, srcs, missing = {}, {}, []
    for name, symbol, value in (("kappa", "κ", kappa), ("beta2", "β₂", beta2)):
        if name not in need:
            out[name] = None
            continue
        out[name], srcs[name] = _closed_form(value, getattr(model, name), name, model)
        if srcs[name] is None:
            missing.append(_missing_msg(symbol, name, name, model))
    if missing:
        raise InputError("; ".join(missing))
    return out["kappa"], out["beta2"], srcs


def _assert_inequality(assertion, check, statement, params, X, y, model, loss, R, on_undefined, *,
                       kappa=None, beta2=None, need=(), finite_keys=("lambda_min_block",),
                       measured, bound, context):
    """The one body of the three self-bounded assertions: closed forms, the certified core
    quantities at θ (float64), a finiteness guard, then one ``measured <= bound`` check
    with the chain's rounding slack. ``measured(rec)``, ``bound(rec, H)`` and
    ``context(rec)`` read the finalized record."""
    _check_policy(on_undefined)
    require_heads(assertion, model)
    kappa, beta2, srcs = _closed_forms(model, kappa, beta2, need)
    with float64():
        params, X, y, R, H, raw = _core(params, X, y, model, loss, R, assertion)
        rec, L, defined = _finalized(raw, H, kappa, beta2)
        ctx = dict(H=H, n=int(X.shape[0]), R=R, loss=L)
        _finite_or_fail(assertion, model, L, rec, ctx, keys=finite_keys)
    ctx.update(context(rec), **{f"{k}_source": v for k, v in srcs.items()})
    rep = Report(assertion, model.name, context=ctx)
    rep.checks.append(_leq(
        check, statement, measured(rec), bound(rec, H), rec.check_scale, floor=rec.check_floor,
        note=f"scale = √H·max|λ|/L̂ = {rec.check_scale!r}",
        undefined_note=_UNDERFLOW.format(L=L, tiny=LOSS_FLOOR), defined=defined))
    return _conclude(rep, on_undefined)


def assert_weak_convexity(params, X, y, kappa=None, model: HeadModel = SOFTMAX,
                          loss: Loss = LOGISTIC, *, R=None, on_undefined: str = "skip") -> Report:
    """Self-bounded weak convexity, certified: ``κ_blk := −√H λ_min(B) / L̂ <= κ``,
    i.e. ``λ_min(∇²L̂) >= λ_min(B) >= −(κ/√H) L̂``, with ``B`` the block-diagonal data term
    (H eigenproblems of size p). ``kappa`` defaults to ``model.kappa(params, R, T)``;
    ``R`` to the largest token norm of ``X``. See the module docstring for slack and
    ``on_undefined``."""
    return _assert_inequality(
        "assert_weak_convexity", "weak_convexity",
        "κ_blk = −√H·λ_min(B)/L̂  <=  κ(θ)   [certified: λ_min(∇²L̂) >= λ_min(B)]",
        params, X, y, model, loss, R, on_undefined, kappa=kappa, need=("kappa",),
        measured=lambda r: r.kappa_block, bound=lambda r, H: r.kappa_bound,
        context=lambda r: dict(lambda_min_B=r.lambda_min_block))


def assert_self_bounded_gradient(params, X, y, beta2=None, model: HeadModel = SOFTMAX,
                                 loss: Loss = LOGISTIC, *, R=None,
                                 on_undefined: str = "skip") -> Report:
    """Self-bounded gradient: ``||∇L̂(θ)|| / L̂ <= β₂(θ)``. ``beta2`` defaults to
    ``model.beta2(params, R, T)``."""
    return _assert_inequality(
        "assert_self_bounded_gradient", "self_bounded_gradient", "||∇L̂|| / L̂  <=  β₂(θ)",
        params, X, y, model, loss, R, on_undefined, beta2=beta2, need=("beta2",),
        measured=lambda r: r.grad_ratio, bound=lambda r, H: r.beta2,
        context=lambda r: dict(grad_norm=r.grad_norm))


def assert_self_bounded_smoothness(params, X, y, kappa=None, beta2=None,
                                   model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC, *, R=None,
                                   on_undefined: str = "skip") -> Report:
    """Self-bounded smoothness, certified: ``(λ_max(G) + max_h λ_max(B_h)) / L̂ <= β₂² + κ/√H``
    (the left side bounds ``λ_max(∇²L̂)/L̂`` from above, by Weyl)."""
    return _assert_inequality(
        "assert_self_bounded_smoothness", "self_bounded_smoothness",
        "(λ_max(G) + max_h λ_max(B_h)) / L̂  <=  β₂² + κ/√H   [certified: >= λ_max(∇²L̂)/L̂]",
        params, X, y, model, loss, R, on_undefined, kappa=kappa, beta2=beta2,
        need=("kappa", "beta2"), finite_keys=("lambda_max_upper",),
        measured=lambda r: r.smooth_ratio,
        bound=lambda r, H: r.beta2 ** 2 + r.kappa_bound / math.sqrt(H),
        context=lambda r: dict(lambda_max_upper=r.lambda_max_upper, kappa=r.kappa_bound,
                               beta2=r.beta2))


# ---------------------------------------------------------------------------
# The model's derivatives, consistent (docs/theory.md §3.7)
# ---------------------------------------------------------------------------

#: (field of PremiseErrors, statement, tolerance kind): the consistency checks, in the order reported
_DERIVATIVES = (
    ("grad_fd", "⟨∇Φ, v⟩ by autodiff = Richardson central difference of Φ along v", "fd"),
    ("hvp_fd", "∇²Φ v by autodiff = central difference of ∇Φ along v", "fd"),
    ("weighted_hessian", "model.weighted_hessian: W_h(c) v = ∇²(Σ_i c_i f(θ_h; X_i)) v by jax.jvp of jax.grad",
     "identity"),
    ("reduced_hessian", "model.reduced_hessian: ‖R‖_op, ‖R‖_F = those of jax.hessian(f) [p, p]", "identity"),
    ("loss_d1", "loss.d1 = jax.grad(loss.value)", "identity"),
    ("loss_d2", "loss.d2 = jax.grad(loss.d1)", "identity"),
)


def _derivative_checks(params, X, y, model, loss, key=None) -> list:
    """The :class:`Check` of each derivative the model and loss have, from
    :func:`mhajax.curvature.premises.premise_errors` (measured: the relative discrepancy; bound: 0;
    slack: its tolerance)."""
    yy = jnp.ones((X.shape[0],), X.dtype) if y is None else y
    e = premise_errors_jit(params, X, yy, checked_key("assert_derivatives", key), model, loss)
    tol = dict(fd=fd_tolerance(X.dtype), identity=identity_tolerance(X.dtype))
    checks = []
    for attr, statement, kind in _DERIVATIVES:
        v = float(getattr(e, attr))
        if v != v and attr in ("weighted_hessian", "reduced_hessian"):
            continue                                  # the model has no such closed form
        if y is None and attr.startswith("loss"):
            continue
        where = ""
        if attr == "weighted_hessian":
            where = f"worst head {int(e.weighted_hessian_head)}"
        elif attr == "reduced_hessian":
            where = f"worst: sample {int(e.pair_sample)}, head {int(e.pair_head)}"
        if v != v:
            checks.append(Check(attr, statement, None, 0.0, tol[kind], False,
                                "not finite: the model produced NaN/inf derivatives"))
        else:
            checks.append(Check(attr, statement, v, 0.0, tol[kind], bool(v <= tol[kind]),
                                (where + "; " if where else "") + "measured = relative discrepancy "
                                "(docs/theory.md §3.7), slack = its tolerance"))
    return checks


def _derivatives_or_fail(assertion, params, X, y, model, loss):
    """Raise :class:`BoundViolation` naming the first inconsistent derivative, if any (a built-in
    (model, loss) pair once per process, as :func:`mhajax.curvature.premises.check_premises`)."""
    if checked_before(model, loss, X.dtype):
        return
    checks = _derivative_checks(params, X, y, model, loss)
    bad = [c for c in checks if not c.holds]
    if bad:
        rep = Report(assertion, model.name, context=dict(cause=f"inconsistent derivative: {bad[0].name}"))
        rep.checks.extend(checks)
        raise BoundViolation(str(rep), rep)
    remember(model, loss, X.dtype)


def assert_derivatives(params, X, y=None, *, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC,
                       key=None) -> Report:
    """The model's (and, with labels ``y``, the loss's) derivatives are consistent
    (docs/theory.md §3.7): autodiff's gradient and Hessian-vector products of Φ against
    Richardson-extrapolated finite differences (a ``custom_jvp`` rule or a ``stop_gradient``
    that makes autodiff differentiate another function), ``model.weighted_hessian`` and
    ``model.reduced_hessian`` against ``jax.hessian``, ``loss.d1``/``loss.d2`` against
    ``jax.grad``. Raises :class:`BoundViolation` naming the first inconsistent one; returns the
    :class:`Report` otherwise. Bounds (κ, β₂, β₃) are :func:`assert_chain`'s."""
    with float64():
        params, X, y, _ = _prepare(params, X, y, None, model, "assert_derivatives")
        checks = _derivative_checks(params, X, y, model, loss, key)
    rep = Report("assert_derivatives", model.name, context=dict(H=jax.tree_util.tree_leaves(params)[0].shape[0],
                                                                 n=int(X.shape[0])))
    rep.checks.extend(checks)
    if rep.failures:
        rep.context["cause"] = f"inconsistent derivative: {rep.failures[0].name}"
        raise BoundViolation(str(rep), rep)
    return rep


# ---------------------------------------------------------------------------
# The whole κ chain (docs/theory.md §7)
# ---------------------------------------------------------------------------



def assert_chain(params, X, y, *, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC, kappa=None,
                 beta2=None, method: str = "auto", links: str = "all", R=None, key=None,
                 on_undefined: str = "skip", **eig_kw) -> Report:
    """Every link of the κ chain (docs/theory.md §7) at one θ:

    * the chain ``κ_emp <= κ_blk <= κ_mid <= κ_Φ <= κ(θ)`` (consecutive computed terms,
      as :func:`mhajax.chain.finalize` links them);
    * weak convexity ``κ_blk <= κ``, self-bounded gradient ``||∇L̂||/L̂ <= β₂`` and
      smoothness ``λ_max^cert/L̂ <= β₂² + κ/√H``;
    * per sample (no ``L̂`` involved): ``max_i ||∇_θΦ(θ; X_i)|| <= β₂`` and, for softmax
      heads, ``max_i |Φ(θ; X_i)| <= (R/√H)Σ_h||U_h||_{2,1}`` and, per head,
      ``max_i ||∇²f(θ_h; X_i)|| <= β₃(θ_h)``.

    ``method`` (``auto``/``dense``/``lanczos``/``block``) and ``links`` (``all``/``core``)
    are those of :func:`mhajax.chain.chain_raw`; ``**eig_kw`` go to its eigensolver.
    Links whose closed form the model lacks are skipped (listed in the report, and a
    :class:`SkippedLinkWarning`); pass ``kappa=`` / ``beta2=`` to check them.
    """
    _check_policy(on_undefined)
    if links not in ("all", "core"):
        raise InputError(f"links must be 'all' or 'core', got {links!r}")
    require_heads("assert_chain", model)
    check_solver_options("assert_chain", eig_kw)
    kappa, ksrc = _closed_form(kappa, model.kappa, "kappa", model)
    beta2, bsrc = _closed_form(beta2, model.beta2, "beta2", model)
    with float64():
        params, X, y, R = _prepare(params, X, y, R, model, "assert_chain")
        _derivatives_or_fail("assert_chain", params, X, y, model, loss)
        H = jax.tree_util.tree_leaves(params)[0].shape[0]
        fn = _chain_fn(model, loss, method, links, tuple(sorted(eig_kw.items())))
        raw, extra = _run("assert_chain", model, fn, params, X, y, checked_key("assert_chain", key), R)
        extra = {k: np.asarray(v) for k, v in extra.items()}
        rec, L, defined = _finalized(raw, H, kappa, beta2)
        ctx = dict(H=H, n=int(X.shape[0]), R=R, loss=L, method=method, links=links,
                   lambda_min_enclosure=(rec.lambda_min_lo, rec.lambda_min_hi) if rec else (None, None),
                   kappa_emp_interval=(rec.kappa_emp_lo, rec.kappa_emp_hi) if rec else (None, None))
        keys = ("lambda_min_block", "lambda_max_upper") + (() if method == "block" else ("lambda_min",))
        _finite_or_fail("assert_chain", model, L, rec, ctx, keys=keys)
    rep = Report("assert_chain", model.name, context=ctx)
    rep.context.update(kappa_source=ksrc or "missing", beta2_source=bsrc or "missing",
                       check_scale=rec.check_scale)
    under = _UNDERFLOW.format(L=L, tiny=LOSS_FLOOR)
    scale, floor = rec.check_scale, rec.check_floor
    snote = f"scale = √H·max|λ|/L̂ = {scale!r}"

    # which terms of the chain exist, and why the others do not
    absent = {}
    if method == "block":
        absent["kappa_emp"] = "not computed (method='block')"
    if links == "core":
        absent["kappa_mid"] = absent["kappa_phi"] = "not computed (links='core')"
    if ksrc is None:
        absent["kappa_bound"] = _missing_msg("κ", "kappa", "kappa", model)
    undefined = set()
    if not defined:
        undefined = {k for k in ("kappa_emp", "kappa_block", "kappa_mid") if k not in absent}
    present = [k for k in CHAIN if k not in absent and k not in undefined]
    for a, b in zip(present, present[1:]):
        if a == "kappa_emp" and rec.kappa_emp_hi is not None:
            # λ_min is a certified enclosure [lo, hi]: judge the link on κ_emp's certified upper end
            rep.checks.append(_leq(
                f"{a}<={b}", f"{SYMBOL[a]} = {DEFINITION[a]} ∈ [{rec.kappa_emp_lo!r}, {rec.kappa_emp_hi!r}]"
                f" (certified; judged on the upper end)  <=  {SYMBOL[b]} = {DEFINITION[b]}",
                rec.kappa_emp_hi, getattr(rec, b), scale, floor=floor,
                note=snote + f"; λ_min ∈ [{rec.lambda_min_lo!r}, {rec.lambda_min_hi!r}] by inertia counts"))
            continue
        rep.checks.append(_leq(f"{a}<={b}", f"{SYMBOL[a]} = {DEFINITION[a]}  <=  {SYMBOL[b]} = {DEFINITION[b]}",
                               getattr(rec, a), getattr(rec, b), scale, note=snote, floor=floor))
    # links that are undefined because L̂ underflowed
    terms = [k for k in CHAIN if k not in absent]
    for a, b in zip(terms, terms[1:]):
        if a in undefined or b in undefined:
            rep.checks.append(Check(f"{a}<={b}", f"{SYMBOL[a]} <= {SYMBOL[b]}", None, None, None,
                                    None, under))
    for k, why in absent.items():
        rep.skipped.append((SYMBOL[k], why))

    # the self-bounded inequalities (ratios over L̂)
    sH = math.sqrt(H)
    have_k, have_b = rec.kappa_bound is not None, rec.beta2 is not None
    if have_k:
        rep.checks.append(_leq("weak_convexity", "κ_blk = −√H·λ_min(B)/L̂  <=  κ(θ)",
                               rec.kappa_block, rec.kappa_bound, scale, note=snote, floor=floor,
                               undefined_note=under, defined=defined))
    else:
        rep.skipped.append(("weak_convexity", _missing_msg("κ", "kappa", "kappa", model)))
    if have_b:
        rep.checks.append(_leq("self_bounded_gradient", "||∇L̂||/L̂  <=  β₂(θ)", rec.grad_ratio,
                               rec.beta2, scale, note=snote, undefined_note=under,
                               defined=defined, floor=floor))
        rep.checks.append(_leq("gradient_bound", "max_i ||∇_θΦ(θ; X_i)||  <=  β₂(θ)",
                               float(extra["grad_phi_max"]), rec.beta2, 0.0))
    else:
        why = _missing_msg("β₂", "beta2", "beta2", model)
        rep.skipped += [("self_bounded_gradient", why), ("gradient_bound", why)]
    if have_k and have_b:
        rep.checks.append(_leq("self_bounded_smoothness",
                               "(λ_max(G) + max_h λ_max(B_h))/L̂  <=  β₂² + κ/√H",
                               rec.smooth_ratio, rec.beta2 ** 2 + rec.kappa_bound / sH,
                               scale, note=snote, undefined_note=under, defined=defined, floor=floor))
    else:
        rep.skipped.append(("self_bounded_smoothness", "needs both κ and β₂: " + "; ".join(
            _missing_msg(w, a, a, model) for w, a, s in (("κ", "kappa", ksrc), ("β₂", "beta2", bsrc))
            if s is None)))

    # per-sample closed forms of the softmax head (mhajax.bounds)
    if "output_bound" in extra:
        rep.checks.append(_leq("output_bound", "max_i |Φ(θ; X_i)|  <=  (R/√H)·Σ_h ||U_h||_{2,1}",
                               float(extra["phi_absmax"]), float(extra["output_bound"]), 0.0))
        if "head_norms" in extra:
            for h, (a, b) in enumerate(zip(extra["head_norms"], extra["beta3"])):
                rep.checks.append(_leq(f"hessian_bound[h={h}]",
                                       f"max_i ||∇²f(θ_{h}; X_i)||_op  <=  β₃(θ_{h}) = R³√T + 2R⁵||U_{h}||_{{2,1}}",
                                       float(a), float(b), 0.0))
    else:
        rep.skipped.append(("output_bound, hessian_bound per head",
                            "closed forms of mhajax.bounds hold for the softmax head only"))

    closed = [w for w, s in (("κ", ksrc), ("β₂", bsrc)) if s is None]
    if closed:
        warnings.warn(f"mhajax assert_chain: model {model.name!r} has no closed-form "
                      f"{' or '.join(closed)}; the links that need it were skipped (pass "
                      f"{' / '.join('kappa=' if w == 'κ' else 'beta2=' for w in closed)} to check them)",
                      SkippedLinkWarning, stacklevel=2)
    rep.context["finalize_verdicts"] = {**rec.links, **rec.checks}
    return _conclude(rep, on_undefined)


# ---------------------------------------------------------------------------
# Heads share no parameters (docs/theory.md §3)
# ---------------------------------------------------------------------------

@functools.lru_cache(maxsize=64)
def _blockdiag_fn(phi: Callable, model: Optional[HeadModel], loss: Loss, probes: int,
                  with_loss: bool, compare_B: bool):
    def f(params, X, y, key):
        Z, unravel_head = ravel_heads(params)
        H, p = Z.shape
        n = X.shape[0]
        z0 = Z.reshape(-1)

        def th(z):
            return unravel_heads(z.reshape(H, p), unravel_head)

        K = probes * H
        onehot = jax.nn.one_hot(jnp.arange(K) % H, H, dtype=z0.dtype)        # [K, H]
        V = (onehot[:, :, None] * jax.random.normal(key, (K, 1, p), z0.dtype)).reshape(K, H * p)
        off_mask = (1.0 - onehot)[:, :, None]
        gphi = jax.grad(lambda z, x: phi(th(z), x))

        def hv(x, v):
            return jax.jvp(lambda z: gphi(z, x), (z0,), (v,))[1]

        HV = jax.vmap(lambda x: jax.vmap(lambda v: hv(x, v))(V))(X).reshape(n, K, H, p)
        off = jnp.max(jnp.abs(HV) * off_mask, axis=-1)                       # [n, K, H]
        # first-order floor: where the true curvature vanishes (e.g. identical tokens), ∇²Φ v
        # is rounding noise of terms of size ~||∇Φ_i||_∞·||v||_∞
        grads = jax.vmap(gphi, in_axes=(None, 0))(z0, X)                     # [n, P]
        floor = jnp.max(jnp.abs(grads)) * jnp.max(jnp.abs(V))
        out = dict(phi_off=jnp.max(off), phi_arg=jnp.argmax(off),
                   phi_scale=jnp.maximum(jnp.max(jnp.abs(HV)), floor), phi_hv=jnp.max(jnp.abs(HV)),
                   phi_floor=floor)
        if with_loss:
            def Phi_all(z):
                return jax.vmap(phi, in_axes=(None, 0))(th(z), X)

            def L(z):
                return jnp.mean(loss.value(y * Phi_all(z)))

            gL = jax.grad(L)
            Av = jax.vmap(lambda v: jax.jvp(gL, (z0,), (v,))[1])(V)            # ∇²L̂ v  [K, P]
            Phi0, jvp_fn = jax.linearize(Phi_all, z0)
            Jv = jax.vmap(jvp_fn)(V)                                           # [K, n]
            _, vjp_fn = jax.vjp(Phi_all, z0)
            w = loss.d2(y * Phi0) / n
            Gv = jax.vmap(lambda u: vjp_fn(u)[0])(Jv * w[None, :])           # G v   [K, P]
            D = (Av - Gv).reshape(K, H, p)
            dscale = jnp.maximum(jnp.max(jnp.abs(Av)), jnp.max(jnp.abs(Gv)))
            loff = jnp.max(jnp.abs(D) * off_mask, axis=-1)                     # [K, H]
            out.update(loss=L(z0), loss_off=jnp.max(loff), loss_arg=jnp.argmax(loff),
                       loss_scale=dscale)
            if compare_B:
                B = head_blocks(params, X, y, model, loss)                     # [H, p, p]
                Bv = jnp.einsum("hij,khj->khi", B, V.reshape(K, H, p))
                berr = jnp.max(jnp.abs(D - Bv) * onehot[:, :, None], axis=-1)  # [K, H]
                out.update(b_err=jnp.max(berr), b_arg=jnp.argmax(berr),
                           b_scale=jnp.maximum(dscale, jnp.max(jnp.abs(Bv))))
        return out
    return jax.jit(f)


def _mha_phi(model: HeadModel):
    return _MHA_PHI.setdefault(model, lambda th, x: output(th, x, model))


_MHA_PHI: dict = {}


def assert_head_block_diagonal(params, X, y=None, *, model: HeadModel = SOFTMAX,
                               loss: Loss = LOGISTIC, phi: Optional[Callable] = None,
                               probes: int = 2, key=None) -> Report:
    """Heads share no parameters: the Hessian is block-diagonal over heads (docs/theory.md §3).

    ``phi(params, x [T, d]) -> scalar`` is the model as *you* compute it (default:
    ``mha(params, x, model)``); the parameters are laid out per head as
    :func:`mhajax.model.ravel_heads` does (every leaf's leading axis is the head).
    Checked with exact Hessian-vector products against ``probes`` random directions
    supported on one head g at a time (a nonzero off-diagonal block is caught with
    probability one):

    * ``phi_block_diagonal``: ``(∇²Φ(θ; X_i) v)_h = 0`` for every sample i and head h ≠ g;
    * with labels ``y``: ``loss_block_diagonal``: ``((∇²L̂ − G) v)_h = 0`` for h ≠ g,
      with ``G = (1/n)Σ_i ℓ''_i ∇Φ_i ∇Φ_iᵀ``;
    * with ``y`` and no ``phi``: ``blocks_equal_B``: ``((∇²L̂ − G) v)_g = B_g v_g``, with
      ``B_g`` from :func:`mhajax.curvature.head_blocks` — i.e. the model's
      ``weighted_hessian`` (or ``jax.hessian``) gives the data term the certified
      bound of :func:`assert_weak_convexity` relies on.

    Sharing that enters through a closure (a head function reading an array that is not
    in ``params``) is not a parameter of the analysis and cannot be seen here.
    """
    probes = int(probes)
    if probes < 1:
        raise InputError(f"probes must be >= 1, got {probes!r}")
    given = phi is not None
    user_phi = given or is_coupled(model)   # a coupled model is checked as Φ alone: it has no head blocks B_h
    phi = phi if given else model.phi if user_phi else _mha_phi(model)
    with float64():
        params, X, y, R = _prepare(params, X, y, None, model, "assert_head_block_diagonal",
                                   phi if given else None)
        if not user_phi:   # an inconsistent derivative is named first, not blamed on the blocks
            _derivatives_or_fail("assert_head_block_diagonal", params, X, y, model, loss)
        H = jax.tree_util.tree_leaves(params)[0].shape[0]
        with_loss = y is not None
        yy = y if with_loss else jnp.ones((X.shape[0],), X.dtype)
        fn = _blockdiag_fn(phi, None if user_phi else model, loss, probes, with_loss,
                           with_loss and not user_phi)
        out = {k: np.asarray(v) for k, v in fn(params, X, yy, checked_key("assert_head_block_diagonal", key)).items()}
    n = int(X.shape[0])
    K = probes * H
    name = getattr(phi, "__name__", "phi") if given else model.name
    ctx = dict(H=H, n=n, probes=probes, phi=(f"user phi {name!r}" if given else f"Φ of the coupled model {name!r}"
                                            if user_phi else f"mha with model {model.name!r}"))
    rep = Report("assert_head_block_diagonal", name, context=ctx)

    def finite(*vals):
        return all(math.isfinite(float(v)) for v in vals)

    if not finite(out["phi_off"], out["phi_scale"]):
        rep.checks.append(Check("finite", "∇²Φ v is finite", None, None, None, False,
                                "the model produced non-finite Hessian-vector products"))
        raise BoundViolation(str(rep), rep)
    i, k, h = np.unravel_index(int(out["phi_arg"]), (n, K, H))
    scale = float(out["phi_scale"])
    rep.checks.append(_leq(
        "phi_block_diagonal",
        "max |(∇²Φ(θ; X_i) v)_h| over samples i, probes v on head g, heads h ≠ g  <=  0",
        float(out["phi_off"]), 0.0, scale,
        note=(f"worst: sample i={i}, probe on head g={k % H}, response in head h={h}; "
              f"scale = max(max|∇²Φ_i v| = {float(out['phi_hv'])!r}, "
              f"max||∇Φ_i||_∞·max|v| = {float(out['phi_floor'])!r})"
              + ("; nonzero => head h's output depends on head g's parameters (shared parameters)"
                 if float(out["phi_off"]) > CHECK_RTOL * scale else ""))))
    if with_loss:
        L = float(out["loss"])
        rep.context["loss"] = L
        if not loss_defined(L):
            why = (f"L̂ = {L!r} < {LOSS_FLOOR!r} = tiny/eps (underflowed): ∇²L̂ − G has no "
                   "relative precision left, nothing to compare"
                   if math.isfinite(L) else f"L̂ = {L!r} is not finite")
            if not math.isfinite(L):
                rep.checks.append(Check("finite", "L̂ is finite", None, None, None, False, why))
            rep.skipped.append(("loss_block_diagonal, blocks_equal_B", why))
        else:
            if not finite(out["loss_off"], out["loss_scale"]):
                rep.checks.append(Check("finite", "∇²L̂ v, G v are finite", None, None, None, False,
                                        "non-finite Hessian-vector products"))
            else:
                k, h = np.unravel_index(int(out["loss_arg"]), (K, H))
                s = float(out["loss_scale"])
                rep.checks.append(_leq(
                    "loss_block_diagonal",
                    "max |((∇²L̂ − G) v)_h| over probes v on head g, heads h ≠ g  <=  0",
                    float(out["loss_off"]), 0.0, s,
                    note=f"worst: probe on head g={k % H}, response in head h={h}; "
                         f"scale = max(|∇²L̂ v|, |G v|) = {s!r}"))
            if "b_err" in out:
                if not finite(out["b_err"], out["b_scale"]):
                    rep.checks.append(Check("finite", "B v is finite", None, None, None, False,
                                            "the model's head blocks B_h are not finite"))
                else:
                    k, h = np.unravel_index(int(out["b_arg"]), (K, H))
                    s = float(out["b_scale"])
                    rep.checks.append(_leq(
                        "blocks_equal_B",
                        "max |((∇²L̂ − G) v)_g − B_g v_g| over probes v on head g  <=  0",
                        float(out["b_err"]), 0.0, s,
                        note=f"worst: head g={h}; B_g from mhajax.curvature.head_blocks "
                             f"({'model.weighted_hessian' if model.weighted_hessian else 'jax.hessian'}); "
                             f"scale = max(|∇²L̂ v|, |G v|, |B v|) = {s!r}"))
    elif not user_phi:
        rep.skipped.append(("loss_block_diagonal, blocks_equal_B", "no labels y given"))
    if user_phi and with_loss:
        rep.skipped.append(("blocks_equal_B", f"{'a user phi' if given else 'a coupled model'} has no mhajax "
                                              "head blocks B_h to compare"))
    if rep.failures:
        raise BoundViolation(str(rep), rep)
    return rep


__all__ = ["Check", "Report", "BoundViolation", "UndefinedCheck", "SkippedLinkWarning", "assert_derivatives",
           "ON_UNDEFINED", "LOSS_FLOOR", "loss_defined", "assert_weak_convexity", "assert_self_bounded_gradient",
           "assert_self_bounded_smoothness", "assert_head_block_diagonal", "assert_chain"]
