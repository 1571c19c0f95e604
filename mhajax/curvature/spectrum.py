"""Extreme eigenvalues of ``∇²L̂`` with certificates (docs/theory.md §3, §8).

For a model whose heads share no parameters, ``∇²L̂ = blockdiag(B_h) + Jᵀ diag(w) J``
(``B [H, p, p]``, ``J [n, P]``, ``w = ℓ''/n [n]``) and every λ_min/λ_max reported is a
**certified enclosure** by inertia counts (:mod:`mhajax.curvature.inertia`; proof in
docs/theory.md §3.4): ``lambda_min_lo <= λ_min(∇²L̂) <= lambda_min_hi`` and
``lambda_max_lo <= λ_max(∇²L̂) <= lambda_max_hi``, of relative width <= ``enclosure_rtol``
(1e-10) unless the rounding floor is wider (``eig_width_ok`` says which). The methods:

* ``"inertia"`` (what ``"auto"`` is for these models, at every P): the secular route — H
  small ``eigh`` of the blocks, then a bracketed root search whose every bracket end is
  a count (4–8 counts per end, each O(n²P)); no Lanczos, no restart lottery;
* ``"lanczos"``: block Lanczos, then its Ritz value θ is certified by two counts at
  θ ∓ r' (r' >= the residual): a count at θ − r' that is not 0 means Lanczos converged to
  an eigenvalue that is not the smallest — detected (``eig_missed``) and repaired by the
  search below θ − r';
* ``"dense"``: ``eigvalsh`` of the chunked ``jax.hessian`` (exact, O(P³)), its value
  certified by the same two counts;
* ``"block"``: only the certificates below.

Every record also carries ``lambda_min_block = min_h λ_min(B_h)`` (a certified *lower*
bound on λ_min when ``w >= 0``) and ``lambda_max_upper = λ_max(B) + λ_max(Kᵀ K)`` (a
certified *upper* bound on λ_max, Weyl), ``residual_min``/``residual_max`` (true residuals
``||A v − λ v||`` of the dense or Ritz vectors; None for ``inertia``, which has no
vector), ``eig_counts`` (counts spent, both ends), ``eig_ties`` (counts left undecided
by rounding), ``eig_width_ok``, ``eig_missed``, ``eig_certified`` and ``eig_asym`` (the
asymmetry of B relative to the size of ∇²L̂). ``lambda_min``/``lambda_max`` are points *inside* the enclosures:
the solver's own value (dense eigenvalue, Ritz value) when the enclosure contains it, else
(``inertia``, or a repaired Lanczos miss) the enclosure's midpoint.

The **coupled** two-layer model has no head blocks: it keeps the matrix-free Lanczos route
and says so — ``eig_certified`` False, one-sided numbers only (``lambda_min_hi`` = the Ritz
value, an upper estimate; ``lambda_max_lo`` = the Ritz λ_max; the other ends None) and the
true residuals.

Every route returns one record type, :class:`Extremes` (a ``NamedTuple``, so a pytree: a
``jit``/``vmap``/``lax.map`` output). The pure function :func:`extremes` is
``jit``/``vmap``-friendly (method static); :func:`hessian_extremes` validates, jits and
returns the same record with Python numbers, and refuses (with an
:class:`~mhajax.errors.InputError`) a θ whose head blocks are not symmetric or not finite
— no certificate is ever given for a matrix that is not the Hessian meant.
"""
from __future__ import annotations

import math
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp

from jax.flatten_util import ravel_pytree

from mhajax.curvature import inertia
from mhajax.curvature.krylov import extreme_eigs
from mhajax.curvature.operators import (StructuredHessian, chunked_hessian, hessian_parts,
                                        linearized_hvp)
from mhajax.curvature.premises import block_discrepancy, checked, identity_tolerance, model_scale
from mhajax.data.common import token_radius
from mhajax.errors import InputError
from mhajax.linalg import eigh, eigvalsh, norm
from mhajax.losses import LOGISTIC, Loss, loss_derivatives, risk
from mhajax.models.base import HeadModel, get_model, is_builtin, is_coupled, num_heads, params_per_head
from mhajax.models.softmax import SOFTMAX
from mhajax.runtime.jaxsetup import OLD_EMITTERS, cpu_jit
from mhajax.validate import checked_key, positive_float, positive_int

#: a method of the spectrum (module docstring); ``auto`` resolves to a concrete one (:func:`resolve_method`)
Method = Literal["auto", "dense", "block", "lanczos", "inertia"]
#: the ends certified: both λ_min and λ_max, or λ_min alone
Ends = Literal["both", "min"]
METHODS = ("auto", "dense", "block", "lanczos", "inertia")
ENCLOSURE_RTOL = 1e-10  # target relative width of every certified enclosure


class Extremes(NamedTuple):
    """λ_min and λ_max of ``∇²L̂`` at one θ with their certificates (module docstring).

    From :func:`extremes` every computed field is a scalar array (``[B]`` for B points
    under ``vmap``/``lax.map``); from :func:`hessian_extremes` a Python float, int or bool,
    ``None`` where the value is NaN (not computed on that route), and ``method``/``P`` are
    filled. A field left ``None`` is an empty pytree node.

    Attributes:
      lambda_min: λ_min(∇²L̂), a point in ``[lambda_min_lo, lambda_min_hi]`` (the solver's value, else the midpoint).
      lambda_max: λ_max(∇²L̂), a point in ``[lambda_max_lo, lambda_max_hi]``.
      lambda_min_lo: certified lower end of λ_min (NaN when one-sided: coupled model).
      lambda_min_hi: certified upper end of λ_min (coupled model: the Ritz λ_min, an upper estimate).
      lambda_max_lo: certified lower end of λ_max (coupled model: the Ritz λ_max).
      lambda_max_hi: certified upper end of λ_max (``block``: the Weyl bound ``lambda_max_upper``).
      lambda_min_block: ``min_h λ_min(B_h)``, a certified lower bound on λ_min when ``w >= 0``.
      lambda_max_upper: ``λ_max(B) + λ_max(Kᵀ K)``, a certified upper bound on λ_max (Weyl).
      residual_min: ``||A v − λ v||`` of the dense or Ritz vector at λ_min (NaN: no vector).
      residual_max: the same at λ_max.
      num_matvecs: products with ∇²L̂ spent by Lanczos (0 on the other routes).
      eig_converged: the solver met its tolerance (``inertia``: = ``eig_certified``).
      eig_tol: Lanczos's absolute residual tolerance (0 for ``dense``, NaN without a solver).
      eig_counts: inertia counts spent, both ends.
      eig_ties: counts left undecided by rounding.
      eig_width_ok: each enclosure reached relative width ``enclosure_rtol`` (else rounding's floor).
      eig_missed: a count showed the solver's value was not the extreme one (then repaired).
      eig_certified: the enclosures are certified (finite, symmetric head blocks).
      eig_asym: ``max_h ‖B_h − B_hᵀ‖_F`` relative to the size of ∇²L̂ (NaN when not measured).
      eig_asym_head: the head h attaining ``eig_asym``.
      eig_finite: the factors ``B``, ``J``, ``w`` are finite.
      eig_premise: a user's ``weighted_hessian`` against autodiff at this θ, the relative discrepancy
        (:func:`mhajax.curvature.premises.block_discrepancy`; above its tolerance every λ field is
        NaN and nothing is certified); NaN for a built-in model or without a closed form.
      method: the concrete method used (host record of :func:`hessian_extremes` only).
      P: the number of parameters (host record of :func:`hessian_extremes` only).
      model: the name of the model the Hessian is of (host record only).
      dtype: the dtype it was computed in (host record only; float32 only when asked for).

    """

    lambda_min: Any = None
    lambda_max: Any = None
    lambda_min_lo: Any = None
    lambda_min_hi: Any = None
    lambda_max_lo: Any = None
    lambda_max_hi: Any = None
    lambda_min_block: Any = None
    lambda_max_upper: Any = None
    residual_min: Any = None
    residual_max: Any = None
    num_matvecs: Any = None
    eig_converged: Any = None
    eig_tol: Any = None
    eig_counts: Any = None
    eig_ties: Any = None
    eig_width_ok: Any = None
    eig_missed: Any = None
    eig_certified: Any = None
    eig_asym: Any = None
    eig_asym_head: Any = None
    eig_finite: Any = None
    eig_premise: Any = None
    method: Method | None = None
    P: int | None = None
    model: str | None = None
    dtype: str | None = None


def resolve_method(method: Method, coupled: bool = False) -> Method:
    """The concrete method ``auto`` stands for: ``inertia`` (the certified secular route,
    linear in H) for a model with head blocks at every size, ``lanczos`` for a coupled
    model (no head blocks: matrix-free, one-sided)."""
    if method not in METHODS:
        raise InputError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if method == "auto":
        return "lanczos" if coupled else "inertia"
    return method


def _dense_result(A):
    evals, evecs = eigh(A)
    vmin, vmax = evecs[:, 0], evecs[:, -1]
    rmin = norm(A @ vmin - evals[0] * vmin)
    rmax = norm(A @ vmax - evals[-1] * vmax)
    return Extremes(lambda_min=evals[0], lambda_max=evals[-1], residual_min=rmin, residual_max=rmax,
                    num_matvecs=jnp.asarray(0), eig_converged=jnp.asarray(True),
                    eig_tol=jnp.asarray(0.0, A.dtype))


def certificates(S: StructuredHessian):
    """``(λ_min(B), λ_max(G) + λ_max(B))``: certified lower bound on λ_min and
    upper bound on λ_max of ``G + B``."""
    evB = eigvalsh(S.B)
    n, P = S.J.shape
    sq = jnp.sqrt(S.w)
    if n <= P:  # D^{1/2} J Jᵀ D^{1/2} [n, n]: the nonzero spectrum of G, the smaller side
        K = sq[:, None] * (S.J @ S.J.T) * sq[None, :]
    else:       # G = Jᵀ D J [P, P] itself
        K = S.J.T @ (S.w[:, None] * S.J)
    lmax_G = eigvalsh(0.5 * (K + K.T))[-1]
    return jnp.min(evB[:, 0]), jnp.maximum(lmax_G, 0.0) + jnp.max(evB[:, -1])


def _point(theta, enc):
    """The reported value: θ when the certified enclosure holds it, else its midpoint."""
    mid = 0.5 * (enc.lo + enc.hi)
    return jnp.where((enc.lo <= theta) & (theta <= enc.hi), theta, mid)


def heads_extremes(S: StructuredHessian, method: Method, *, ritz=None,
                   enclosure_rtol: float = ENCLOSURE_RTOL, ends: Ends = "both") -> Extremes:
    """Certified λ_min/λ_max of ``∇²L̂ = blockdiag(B) + Jᵀ diag(w) J`` from its factors
    ``S = (J [n, P], w [n], B [H, p, p])`` (module docstring). ``method``: ``"inertia"``
    (the secular search), or ``"lanczos"``/``"dense"`` with ``ritz`` =
    ``(θ_min, r_min, θ_max, r_max)`` the solver's values and residual norms, which two
    counts per end certify (and repair on a miss). ``ends="min"`` certifies λ_min only
    (λ_max fields NaN). Returns the certificate's fields of :class:`Extremes` (scalar
    arrays); the solver's (``residual_*``, ``num_matvecs``, ``eig_converged``, ``eig_tol``)
    are left ``None`` for :func:`extremes` to fill. Pure."""
    if ends not in ("both", "min"):
        raise InputError(f"ends must be 'both' or 'min', got {ends!r}")
    st = inertia.decompose(S.B, S.J, S.w, eigh=eigh)
    kw = dict(rtol=enclosure_rtol, eigh=eigh)
    dtype = S.J.dtype
    false = jnp.asarray(False)
    nan = jnp.asarray(jnp.nan, dtype)
    zero = jnp.asarray(0)
    # λ_max not asked for: an empty enclosure that leaves the flags to λ_min's
    none = inertia.Enclosure(lo=nan, hi=nan, width_ok=jnp.asarray(True), count_lo=nan, count_hi=nan,
                             iterations=zero, ties=zero, valid=st.valid, confirmed=jnp.asarray(True))
    if method == "inertia":
        emin = inertia.enclose(st, "min", **kw)
        emax = inertia.enclose(st, "max", **kw) if ends == "both" else none
        lmin, lmax = 0.5 * (emin.lo + emin.hi), 0.5 * (emax.lo + emax.hi)
        missed = false
    else:
        tmin, rmin, tmax, rmax = ritz
        emin, cmin = inertia.enclose_from_ritz(st, tmin, rmin, "min", **kw)
        if ends == "both":
            emax, cmax = inertia.enclose_from_ritz(st, tmax, rmax, "max", **kw)
            lmax, missed = _point(tmax, emax), cmin.missed | cmax.missed
        else:
            emax, lmax, missed = none, nan, cmin.missed
        lmin = _point(tmin, emin)
    certified = jnp.isfinite(emin.lo + emin.hi) & (jnp.isfinite(emax.lo + emax.hi) if ends == "both" else True)
    return Extremes(lambda_min=lmin, lambda_max=lmax,
                    lambda_min_lo=emin.lo, lambda_min_hi=emin.hi, lambda_max_lo=emax.lo, lambda_max_hi=emax.hi,
                    lambda_min_block=jnp.min(st.lam), lambda_max_upper=jnp.max(st.lam) + st.gpos,
                    eig_counts=emin.iterations + emax.iterations, eig_ties=emin.ties + emax.ties,
                    eig_width_ok=emin.width_ok & emax.width_ok, eig_missed=missed,
                    eig_certified=st.valid & certified,
                    eig_asym=st.asym.astype(dtype), eig_asym_head=st.asym_head, eig_finite=st.finite)


def _one_sided(*, lmin_lo, lmin_hi, lmax_lo, lmax_hi, dtype) -> dict:
    """The certificate fields of :class:`Extremes` for a route without a two-sided
    certificate (coupled model, block), as keyword arguments."""
    nan = jnp.asarray(jnp.nan, dtype)
    return dict(lambda_min_lo=lmin_lo, lambda_min_hi=lmin_hi, lambda_max_lo=lmax_lo, lambda_max_hi=lmax_hi,
                eig_counts=jnp.asarray(0), eig_ties=jnp.asarray(0), eig_width_ok=jnp.asarray(False),
                eig_missed=jnp.asarray(False), eig_certified=jnp.asarray(False), eig_asym=nan,
                eig_asym_head=jnp.asarray(0), eig_finite=jnp.asarray(True))


def extremes(params, X, y, key, *, method: Method = "auto", model: HeadModel = SOFTMAX,
             loss: Loss = LOGISTIC, num_steps: int = 64, max_cycles: int = 20,
             rtol: float | None = None, operator: str = "structured",
             enclosure_rtol: float = ENCLOSURE_RTOL, ends: Ends = "both") -> Extremes:
    """Pure, traceable core of :func:`hessian_extremes` (``method`` is static): the record
    :class:`Extremes` of scalar arrays (``method``/``P`` None), for ``params`` (H heads),
    ``X [n, T, d]``, ``y [n]``.

    ``operator`` picks the Lanczos matvec: ``"structured"`` (G + B factors,
    O(nP + H p²) per product) or ``"hvp"`` (linearized jvp-of-grad); ``rtol`` is Lanczos's
    residual tolerance, ``enclosure_rtol`` the relative width the enclosures aim for;
    ``ends="min"`` certifies λ_min alone (head models: the λ_max fields are NaN). A
    coupled model (no head blocks) takes the matrix-free route of :func:`coupled_extremes`
    (``method`` auto or lanczos only; one-sided, not certified).
    """
    if is_coupled(model):
        if method not in ("auto", "lanczos"):
            raise InputError(f"method {method!r} needs head blocks; the coupled model {model.name!r} "
                             "has none (use auto or lanczos)")
        return coupled_extremes(params, X, y, key, model=model, loss=loss, num_steps=num_steps,
                                max_cycles=max_cycles, rtol=rtol)
    S = hessian_parts(params, X, y, model, loss)
    out = _head_extremes(S, params, X, y, key, method=method, model=model, loss=loss, num_steps=num_steps,
                         max_cycles=max_cycles, rtol=rtol, operator=operator, enclosure_rtol=enclosure_rtol,
                         ends=ends)
    if is_builtin(model) or model.weighted_hessian is None:
        return out._replace(eig_premise=jnp.asarray(jnp.nan, S.J.dtype))
    # a user's closed form: checked at this θ against autodiff before anything rests on it
    _, d1, _ = loss_derivatives(params, X, y, model, loss)
    c = jax.lax.stop_gradient(y * d1) / (X.shape[0] * jnp.sqrt(S.B.shape[0]))
    size = model_scale(model, params, token_radius(X), X.shape[1], S.J.dtype)
    err, _ = block_discrepancy(params, X, c, jax.random.fold_in(key, 7), model, size)
    ok = err <= identity_tolerance(S.J.dtype)
    nan = jnp.asarray(jnp.nan, S.J.dtype)
    dense = resolve_method(method) == "dense"   # its λ rests on jax.hessian alone
    drop = {k: jnp.where(ok, getattr(out, k), nan) for k in (_PREMISED[-2:] if dense else _PREMISED)}
    certified = out.eig_certified if dense else out.eig_certified & ok
    return out._replace(**drop, eig_premise=err, eig_certified=certified)


#: the fields of :class:`Extremes` that rest on the head blocks B (NaN when B failed its check;
#: for ``dense`` only the last two)
_PREMISED = ("lambda_min", "lambda_max", "lambda_min_lo", "lambda_min_hi", "lambda_max_lo", "lambda_max_hi",
             "lambda_min_block", "lambda_max_upper")


def _head_extremes(S: StructuredHessian, params, X, y, key, *, method, model, loss, num_steps, max_cycles,
                   rtol, operator, enclosure_rtol, ends) -> Extremes:
    """:func:`extremes` of a head model from its factors ``S``."""
    H, p, _ = S.B.shape
    P = H * p
    method = resolve_method(method)
    dtype = S.J.dtype
    nan = jnp.asarray(jnp.nan, dtype)
    if method == "block":
        lo, hi = certificates(S)
        # one-sided: λ_min >= λ_min(B) (w >= 0), λ_max <= the Weyl bound
        return Extremes(lambda_min_block=lo, lambda_max_upper=hi, lambda_min=nan, lambda_max=nan,
                        residual_min=nan, residual_max=nan, num_matvecs=jnp.asarray(0),
                        eig_converged=jnp.asarray(False), eig_tol=nan,
                        **_one_sided(lmin_lo=lo, lmin_hi=nan, lmax_lo=nan, lmax_hi=hi, dtype=dtype))
    if method == "inertia":
        out = heads_extremes(S, "inertia", enclosure_rtol=enclosure_rtol, ends=ends)
        # converged = certified: the search ends at the width target or at the width rounding
        # allows (eig_width_ok tells which); it has no residual tolerance
        return out._replace(residual_min=nan, residual_max=nan, num_matvecs=jnp.asarray(0),
                            eig_converged=out.eig_certified, eig_tol=nan)
    if method == "dense":
        # jax.hessian of the risk, certified by its own eigendecomposition (one P × P block, no
        # per-sample term): nothing a model supplies enters the value or its enclosure
        A = chunked_hessian(params, X, y, model, loss)
        d = _dense_result(A)
        own = StructuredHessian(J=jnp.zeros((1, P), dtype), w=jnp.zeros((1,), dtype), B=A[None])
        out = heads_extremes(own, method, enclosure_rtol=enclosure_rtol, ends=ends,
                             ritz=(d.lambda_min, d.residual_min, d.lambda_max, d.residual_max))
        lo, hi = certificates(S)
        return out._replace(lambda_min_block=lo, lambda_max_upper=hi, residual_min=d.residual_min,
                            residual_max=d.residual_max, num_matvecs=d.num_matvecs,
                            eig_converged=d.eig_converged, eig_tol=d.eig_tol)
    else:
        mv = S.matvec if operator == "structured" else linearized_hvp(params, X, y, model, loss)
        r = extreme_eigs(mv, P, key, num_steps=num_steps, max_cycles=max_cycles, rtol=rtol, dtype=dtype)
        d = Extremes(lambda_min=r.lambda_min, lambda_max=r.lambda_max, residual_min=r.residual_min,
                     residual_max=r.residual_max, num_matvecs=r.num_matvecs, eig_converged=r.converged,
                     eig_tol=r.tol)
    out = heads_extremes(S, method, enclosure_rtol=enclosure_rtol, ends=ends,
                         ritz=(d.lambda_min, d.residual_min, d.lambda_max, d.residual_max))
    # the solver's fields; λ_min/λ_max stay the certified points
    return out._replace(residual_min=d.residual_min, residual_max=d.residual_max, num_matvecs=d.num_matvecs,
                        eig_converged=d.eig_converged, eig_tol=d.eig_tol)


def coupled_extremes(params, X, y, key, *, model, loss: Loss = LOGISTIC, num_steps: int = 64,
                     max_cycles: int = 20, rtol: float | None = None) -> Extremes:
    """λ_min and λ_max of ``∇²L̂`` for a coupled model (no head blocks): Lanczos on the
    linearized gradient over ``ravel_pytree(params) [P]``, with true residuals. No
    structure, so no certificate: ``lambda_min_block``/``lambda_max_upper`` are NaN, the
    enclosure fields one-sided (``lambda_min_hi`` = the Ritz λ_min, an upper estimate by
    Courant–Fischer; ``lambda_max_lo`` = the Ritz λ_max) and ``eig_certified`` False. Pure."""
    z0, unravel = ravel_pytree(params)

    def flat(z):
        return risk(unravel(z), X, y, model, loss)

    _, lin = jax.linearize(jax.grad(flat), z0)
    r = extreme_eigs(lin, z0.shape[0], key, num_steps=num_steps, max_cycles=max_cycles, rtol=rtol,
                     dtype=z0.dtype)
    nan = jnp.asarray(jnp.nan, z0.dtype)
    return Extremes(lambda_min=r.lambda_min, lambda_max=r.lambda_max, residual_min=r.residual_min,
                    residual_max=r.residual_max, num_matvecs=r.num_matvecs, eig_converged=r.converged,
                    eig_tol=r.tol, lambda_min_block=nan, lambda_max_upper=nan,
                    **_one_sided(lmin_lo=nan, lmin_hi=r.lambda_min, lmax_lo=r.lambda_max, lmax_hi=nan,
                                 dtype=z0.dtype))


@cpu_jit(options=OLD_EMITTERS, static_argnames=("method", "kw"))   # half the compile, same run time
def _extremes_jit(params, X, y, key, method, kw):
    return extremes(params, X, y, key, method=method, **dict(kw))


#: the solver options of :func:`extremes` a caller may pass (``**kw`` of the checked entries)
SOLVER_OPTIONS = ("num_steps", "max_cycles", "rtol", "operator", "enclosure_rtol", "ends")


def check_solver_options(what: str, kw: dict) -> None:
    """An :class:`InputError` naming ``what`` and the first bad solver option of ``kw`` (other keys
    than ``model`` and ``loss``): an unknown name; ``num_steps`` or ``max_cycles`` not an integer >= 1;
    ``rtol`` not ``None`` or a finite number > 0; ``enclosure_rtol`` not a finite number >= 0 (a
    NaN would end the search at once, its wide bracket's midpoint reported as λ_min); ``operator``
    not ``structured`` or ``hvp``; ``ends`` not ``both`` or ``min``."""
    try:
        for k, v in kw.items():
            if k in ("model", "loss"):
                continue
            if k not in SOLVER_OPTIONS:
                raise InputError(f"unknown option {k!r} (the solver's options: {', '.join(SOLVER_OPTIONS)})")
            if k in ("num_steps", "max_cycles"):
                positive_int(k, v)
            elif k == "rtol" and v is not None:
                positive_float(k, v)
            elif k == "enclosure_rtol":
                positive_float(k, v, allow_zero=True)
            elif k == "operator" and v not in ("structured", "hvp"):
                raise InputError(f"operator must be 'structured' or 'hvp', got {v!r}")
            elif k == "ends" and v not in ("both", "min"):
                raise InputError(f"ends must be 'both' or 'min', got {v!r}")
    except InputError as e:
        raise InputError(f"{what}: {e}") from None


def hessian_extremes(params, X, y, method: Method = "auto", key=None, **kw) -> Extremes:
    """Validated, jitted :func:`extremes` at one θ; returns its :class:`Extremes` with
    Python numbers (``None`` where a quantity was not computed, e.g. the Ritz values of
    ``method="block"``) and ``method`` (the concrete method used) and ``P`` filled.
    The certified enclosure of λ_min(∇²L̂) is ``[lambda_min_lo, lambda_min_hi]`` (and of
    λ_max ``[lambda_max_lo, lambda_max_hi]``); see the module docstring for every field.
    Compiled once per shape and keyword set. Raises :class:`InputError` on bad input
    (non-finite θ or data, a bad solver option (:func:`check_solver_options`), a model whose
    head blocks are not symmetric or not finite: no certificate). The public entry
    :func:`mhajax.api.hessian_extremes` first checks the arrays of
    :func:`mhajax.runtime.memory.analysis` against memory."""
    return _checked_extremes(params, X, y, method, key, dict(kw), "hessian_extremes")


def _checked_extremes(params, X, y, method, key, kw: dict, what: str) -> Extremes:
    """The one checked path of :func:`hessian_extremes`, :func:`lambda_min` and
    :func:`lambda_min_enclosure` (named ``what`` in a refusal): input validation
    (:func:`mhajax.models.base.check_problem`), the model's and loss's closed forms checked against
    autodiff at this θ (:func:`mhajax.curvature.premises.check_premises`), the jitted
    :func:`extremes`, Python numbers, and the refusal of an uncertifiable θ."""
    model = get_model(kw.get("model", SOFTMAX))
    coupled = is_coupled(model)
    concrete = resolve_method(method, coupled)       # an unknown method is refused before any work
    check_solver_options(what, kw)
    model, loss = checked(what, params, X, y, model=model, loss=kw.get("loss", LOGISTIC))
    kw = dict(kw, model=model, loss=loss)
    P = num_heads(params) * params_per_head(params)
    key = checked_key(what, key)
    raw = _extremes_jit(params, X, y, key, method, tuple(sorted(kw.items())))
    res = {}
    for k, v in raw._asdict().items():
        if v is None:   # method, P, model, dtype: not traced
            continue
        v = v.item()
        res[k] = None if isinstance(v, float) and not math.isfinite(v) else v
    res = Extremes(**res, method=concrete, P=P, model=model.name, dtype=str(X.dtype))
    if res.eig_premise is not None and not res.eig_premise <= identity_tolerance(X.dtype):
        raise InputError(f"model {model.name!r}: weighted_hessian (W_h(c) v vs jax.jvp of jax.grad) fails at the "
                         f"θ given: relative discrepancy {res.eig_premise:.3g} > {identity_tolerance(X.dtype):.3g}; "
                         "nothing is certified on it")
    if not coupled and concrete != "block":
        _refuse_uncertifiable(res, raw)
    return res


def _refuse_uncertifiable(res: Extremes, raw: Extremes):
    """Raise :class:`InputError` when the head blocks made a certificate impossible (they
    are not finite, or not symmetric: e.g. a user ``weighted_hessian`` returning a
    non-symmetric block) — rather than report numbers for a matrix that is not ∇²L̂."""
    if res.eig_certified:
        return
    asym = float(raw.eig_asym)
    tol = inertia.asym_tolerance(raw.eig_asym.dtype)
    if not res.eig_finite:
        raise InputError("the Hessian's factors (head blocks B, per-sample gradients J, weights ℓ''/n) are not "
                         "finite at this θ: the model produced NaN/inf second derivatives; no certificate")
    if not asym <= tol:
        raise InputError(f"the head blocks B_h are not symmetric: head {res.eig_asym_head} has "
                         f"‖B_h − B_hᵀ‖_F/(max‖B_h'‖_F + ‖K‖_F²) = {asym:.3g} > {tol:.3g}; a model's weighted_hessian "
                         "must return symmetric [p, p] blocks (no certificate is given for another matrix)")


def lambda_min(params, X, y, method: Method = "auto", model: HeadModel = SOFTMAX,
               loss: Loss = LOGISTIC, **kw) -> float:
    """``λ_min(∇²L̂(θ))`` by ``method``, as a Python float:

    * ``"auto"`` / ``"inertia"`` (head models): the midpoint of the certified enclosure
      ``[lo, hi]`` found by inertia counts (relative width <= 1e-10, so the value is within
      5e-11·|λ_min| of the truth);
    * ``"dense"``: ``eigvalsh`` of the chunked ``jax.hessian`` (exact, O(P³)), certified;
    * ``"lanczos"``: the Ritz value of block Lanczos when the certificate confirms it
      (else, a detected miss, the repaired enclosure's midpoint);
    * ``"block"``: the certified lower bound ``λ_min(B)``;
    * a coupled model (``auto``/``lanczos``): the Ritz value, an upper estimate (no
      certificate exists without head blocks).

    :func:`lambda_min_enclosure` gives the certified ``(lo, hi)``, :func:`hessian_extremes`
    every field. Validates its inputs (:class:`InputError` on bad input); the public entry
    :func:`mhajax.api.lambda_min` first checks the sizes against memory.
    """
    res = _lambda_min_record(params, X, y, method, model, loss, kw, "lambda_min")
    return float(res.lambda_min_block if res.method == "block" else res.lambda_min)


def lambda_min_enclosure(params, X, y, method: Method = "auto", model: HeadModel = SOFTMAX,
                         loss: Loss = LOGISTIC, **kw) -> tuple[float | None, float | None]:
    """``(lo, hi)`` with ``lo <= λ_min(∇²L̂(θ)) <= hi`` certified, by ``method`` (as
    :func:`lambda_min`): ``(λ_min(B), None)`` for ``block``, ``(None, Ritz value)`` for a
    coupled model. Validates its inputs (:class:`InputError` on bad input); the public entry
    :func:`mhajax.api.lambda_min_enclosure` first checks the sizes against memory."""
    res = _lambda_min_record(params, X, y, method, model, loss, kw, "lambda_min_enclosure")
    return res.lambda_min_lo, res.lambda_min_hi


def _lambda_min_record(params, X, y, method, model, loss, kw: dict, what: str) -> Extremes:
    """:func:`_checked_extremes` of the λ_min end only (λ_max is not asked for: not certified,
    half the counts)."""
    kw = dict(kw, model=model, loss=loss)
    key = kw.pop("key", None)
    kw.setdefault("ends", "min")
    return _checked_extremes(params, X, y, method, key, kw, what)
