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

from .curvature import (StructuredHessian, dense_hessian, linearized_hvp, resolve_method,
                        structured_parts)
from .krylov import extreme_eigs
from .linalg import eigh, eigvalsh, norm
from .losses import LOGISTIC, Loss
from .model import SOFTMAX, HeadModel


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
    Returns a dict of scalar arrays.
    """
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


@partial(jax.jit, static_argnames=("method", "kw"))
def _extremes_jit(params, X, y, key, method, kw):
    return extremes(params, X, y, key, method=method, **dict(kw))


def hessian_extremes(params, X, y, method: str = "auto", key=None, **kw) -> dict:
    """Validated, jitted :func:`extremes` at one θ; returns Python numbers
    (``None`` where a quantity was not computed, e.g. the Ritz values of
    ``method="block"``) plus ``method`` (the concrete method used) and ``P``.
    Compiled once per shape and keyword set."""
    from .validate import check_data, check_params
    from .model import params_per_head
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
