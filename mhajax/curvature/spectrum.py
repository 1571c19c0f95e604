"""Extreme eigenvalues of ``∇²L̂`` with certificates (SPEC §3, §7).

:func:`hessian_extremes` returns, at one θ:

* ``lambda_min`` / ``lambda_max``: exact (dense ``eigvalsh``) or Ritz values
  (block Lanczos); a Ritz ``lambda_min`` is an *upper* estimate of λ_min;
* ``residual_min`` / ``residual_max``: the true residuals ``||A v − λ v||``;
* ``lambda_min_block = min_h λ_min(B_h)``: a certified *lower* bound on λ_min;
* ``lambda_max_upper = λ_max(G) + max_h λ_max(B_h)``: a certified *upper*
  bound on λ_max (Weyl), with ``λ_max(G)`` from the n×n matrix ``D^{1/2} J Jᵀ D^{1/2}``.

So ``lambda_min_block <= λ_min <= lambda_min`` and
``lambda_max <= λ_max <= lambda_max_upper`` hold whatever the solver did.
The pure function :func:`extremes` is ``jit``/``vmap``-friendly (method static);
:func:`hessian_extremes` validates, jits and returns Python numbers.
"""
from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp

from jax.flatten_util import ravel_pytree

from mhajax.curvature.krylov import extreme_eigs
from mhajax.curvature.operators import (StructuredHessian, dense_hessian, linearized_hvp,
                                        structured_parts)
from mhajax.errors import InputError
from mhajax.linalg import eigh, eigvalsh, norm
from mhajax.losses import LOGISTIC, Loss, empirical_risk
from mhajax.models.base import HeadModel, is_coupled, params_per_head
from mhajax.models.softmax import SOFTMAX
from mhajax.runtime import memory as mem
from mhajax.validate import check_data, check_params

METHODS = ("auto", "dense", "block", "lanczos")
AUTO_DENSE_MAX = 512  # "auto" solves densely up to this many parameters


def resolve_method(method: str, P: int) -> str:
    """The concrete method ``auto`` stands for at size P: ``dense`` when
    ``P <= AUTO_DENSE_MAX`` (exact in O(P³)), else ``lanczos``."""
    if method not in METHODS:
        raise InputError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if method == "auto":
        return "dense" if P <= AUTO_DENSE_MAX else "lanczos"
    return method


def _dense_result(A):
    evals, evecs = eigh(A)
    vmin, vmax = evecs[:, 0], evecs[:, -1]
    rmin = norm(A @ vmin - evals[0] * vmin)
    rmax = norm(A @ vmax - evals[-1] * vmax)
    return dict(lambda_min=evals[0], lambda_max=evals[-1], residual_min=rmin, residual_max=rmax,
                num_matvecs=jnp.asarray(0), eig_converged=jnp.asarray(True),
                eig_tol=jnp.asarray(0.0, A.dtype))


def certificates(S: StructuredHessian):
    """``(λ_min(B), λ_max(G) + λ_max(B))``: certified lower bound on λ_min and
    upper bound on λ_max of ``G + B``."""
    evB = eigvalsh(S.B)
    sq = jnp.sqrt(S.w)
    K = sq[:, None] * (S.J @ S.J.T) * sq[None, :]  # [n, n], same nonzero spectrum as G; no copy of J
    lmax_G = eigvalsh(0.5 * (K + K.T))[-1]
    return jnp.min(evB[:, 0]), jnp.maximum(lmax_G, 0.0) + jnp.max(evB[:, -1])


def extremes(params, X, y, key, *, method: str = "auto", model: HeadModel = SOFTMAX,
             loss: Loss = LOGISTIC, num_steps: int = 64, max_cycles: int = 20,
             rtol: float | None = None, operator: str = "structured"):
    """Pure, traceable core of :func:`hessian_extremes` (``method`` is static).

    ``operator`` picks the Lanczos matvec: ``"structured"`` (G + B factors,
    O(nP + H p²) per product) or ``"hvp"`` (linearized jvp-of-grad).
    Returns a dict of scalar arrays. A coupled model (no head blocks) takes the
    matrix-free route of :func:`coupled_extremes` (``method`` auto or lanczos only).
    """
    if is_coupled(model):
        if method not in ("auto", "lanczos"):
            raise InputError(f"method {method!r} needs head blocks; the coupled model {model.name!r} "
                             "has none (use auto or lanczos)")
        return coupled_extremes(params, X, y, key, model=model, loss=loss, num_steps=num_steps,
                                max_cycles=max_cycles, rtol=rtol)
    S = structured_parts(params, X, y, model, loss)
    H, p, _ = S.B.shape
    P = H * p
    requested, method = method, resolve_method(method, P)
    lo, hi = certificates(S)
    out = dict(lambda_min_block=lo, lambda_max_upper=hi)
    if method == "block":
        nan = jnp.asarray(jnp.nan, lo.dtype)
        out.update(lambda_min=nan, lambda_max=nan, residual_min=nan, residual_max=nan,
                   num_matvecs=jnp.asarray(0), eig_converged=jnp.asarray(False), eig_tol=nan)
    elif method == "dense":
        # auto -> dense uses the exact structured assembly; an explicit "dense"
        # request goes through jax.hessian, independently of the structure.
        A = S.dense() if requested == "auto" else dense_hessian(params, X, y, model, loss)
        out.update(_dense_result(A))
    elif method == "lanczos":
        mv = S.matvec if operator == "structured" else linearized_hvp(params, X, y, model, loss)
        r = extreme_eigs(mv, P, key, num_steps=num_steps, max_cycles=max_cycles, rtol=rtol,
                         dtype=S.J.dtype)
        out.update(lambda_min=r.lambda_min, lambda_max=r.lambda_max, residual_min=r.residual_min,
                   residual_max=r.residual_max, num_matvecs=r.num_matvecs,
                   eig_converged=r.converged, eig_tol=r.tol)
    return out


def coupled_extremes(params, X, y, key, *, model, loss: Loss = LOGISTIC, num_steps: int = 64,
                     max_cycles: int = 20, rtol: float | None = None):
    """λ_min and λ_max of ``∇²L̂`` for a coupled model (no head blocks): Lanczos on the
    linearized gradient over ``ravel_pytree(params) [P]``, with true residuals. The block
    certificates do not exist: ``lambda_min_block``/``lambda_max_upper`` are NaN. Pure."""
    z0, unravel = ravel_pytree(params)

    def risk(z):
        return empirical_risk(unravel(z), X, y, model, loss)

    _, lin = jax.linearize(jax.grad(risk), z0)
    r = extreme_eigs(lin, z0.shape[0], key, num_steps=num_steps, max_cycles=max_cycles, rtol=rtol,
                     dtype=z0.dtype)
    nan = jnp.asarray(jnp.nan, z0.dtype)
    return dict(lambda_min=r.lambda_min, lambda_max=r.lambda_max, residual_min=r.residual_min,
                residual_max=r.residual_max, num_matvecs=r.num_matvecs, eig_converged=r.converged,
                eig_tol=r.tol, lambda_min_block=nan, lambda_max_upper=nan)


@partial(jax.jit, static_argnames=("method", "kw"))
def _extremes_jit(params, X, y, key, method, kw):
    return extremes(params, X, y, key, method=method, **dict(kw))


def hessian_extremes(params, X, y, method: str = "auto", key=None, **kw) -> dict:
    """Validated, jitted :func:`extremes` at one θ; returns Python numbers
    (``None`` where a quantity was not computed, e.g. the Ritz values of
    ``method="block"``) plus ``method`` (the concrete method used) and ``P``.
    Compiled once per shape and keyword set. ``force=True`` skips the memory guard
    (:mod:`mhajax.runtime.memory`), which refuses sizes whose estimated peak memory exceeds
    what the device has (an :class:`InputError` naming the argument)."""
    mem.guard_call(mem.api_hessian_extremes, params, X, model=kw.get("model"), force=kw.pop("force", False),
                   method=method, lanczos_steps=kw.get("num_steps", 64), what="hessian_extremes")
    H = check_params(params, X)
    check_data(X, y)
    P = H * params_per_head(params)
    concrete = resolve_method(method, P)
    key = jax.random.PRNGKey(0) if key is None else key
    raw = _extremes_jit(params, X, y, key, method, tuple(sorted(kw.items())))
    res = {}
    for k, v in raw.items():
        v = v.item()
        res[k] = None if isinstance(v, float) and not math.isfinite(v) else v
    res.update(method=concrete, P=P)
    return res


def lambda_min(params, X, y, method: str = "auto", model: HeadModel = SOFTMAX,
               loss: Loss = LOGISTIC, **kw) -> float:
    """``λ_min(∇²L̂(θ))`` by ``method``:

    * ``"dense"``: ``eigvalsh`` of the chunked ``jax.hessian`` (exact, O(P³));
    * ``"lanczos"``: block Lanczos on the structured operator; the Ritz value
      (an upper estimate) — see :func:`hessian_extremes` for its residual;
    * ``"block"``: the certified lower bound ``λ_min(B)``;
    * ``"auto"``: dense for small P, else lanczos.

    Validates its inputs and returns a Python float. ``force=True`` skips the memory guard.
    """
    mem.guard_call(mem.api_hessian_extremes, params, X, model=model, force=kw.pop("force", False),
                   method=method, lanczos_steps=kw.get("num_steps", 64), what="lambda_min")
    check_params(params, X)
    check_data(X, y)
    res = hessian_extremes(params, X, y, method=method, model=model, loss=loss, **kw)
    key = "lambda_min_block" if resolve_method(method, res["P"]) == "block" else "lambda_min"
    return float(res[key])
