"""Closed-form bounds for softmax heads (docs/theory.md §6).

With ``R`` the largest token norm of the data and ``||U_h||_{2,1} = Σ_t ||u_t||``:

* output bound     ``|Φ(θ;X)| <= (R/√H) Σ_h ||U_h||_{2,1}``
* gradient bound   ``||∇_θ Φ||² <= β₂² = T R² + (R⁶/H) Σ_h ||U_h||²_{2,1}``
* Hessian bound    ``||∇²_{θ_h} f||_op <= β₃(θ_h) = R³ √T + 2 R⁵ ||U_h||_{2,1}``
* ``κ(θ) = max_h β₃(θ_h)``; weak convexity ``λ_min(∇²L̂) >= -(κ/√H) L̂``;
  smoothness ``λ_max(∇²L̂) <= (β₂² + κ/√H) L̂``.

κ depends on θ only through the readouts U_h, never through W_h or H.
All functions accept ``MHAParams`` with ``U [H, T, d]``. Concrete arguments are checked
(:func:`check_bound_args`); traced ones are not.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from mhajax.errors import InputError
from mhajax.validate import check_params, positive_float, positive_int


def check_bound_args(what: str, params, R, T=None) -> None:
    """An :class:`InputError` naming ``what`` and the value unless ``params`` has finite readouts
    ``U [H, T, d]``, ``R`` is a finite number >= 0 (a token norm) and ``T`` is ``None`` (U's
    token count) or an integer >= 1; traced values pass unchecked."""
    U = getattr(params, "U", None)
    if np.ndim(U) != 3:
        raise InputError(f"{what}: params must have readouts U [H, T, d], got {type(params).__name__} "
                         f"with U of shape {np.shape(U) if U is not None else None}")
    try:
        check_params(params)
        if T is not None and not isinstance(T, jax.core.Tracer):
            positive_int("T", T)
        if not isinstance(R, jax.core.Tracer):
            positive_float("R (the largest token norm)", R, allow_zero=True)
    except InputError as e:
        raise InputError(f"{what}: {e}") from None


def l21_norms(U) -> jnp.ndarray:
    """``||U_h||_{2,1} = Σ_t ||u_{h,t}||₂`` for ``U [H, T, d]`` -> [H]."""
    return jnp.sum(jnp.linalg.norm(U, axis=-1), axis=-1)


def output_bound(params, R) -> jnp.ndarray:
    """``(R/√H) Σ_h ||U_h||_{2,1}``, a bound on ``|Φ(θ; X)|``."""
    check_bound_args("output_bound", params, R)
    H = params.U.shape[0]
    return R * jnp.sum(l21_norms(params.U)) / jnp.sqrt(H)


def beta2(params, R, T: int | None = None) -> jnp.ndarray:
    """``β₂(θ) = sqrt(T R² + (R⁶/H) Σ_h ||U_h||²_{2,1})``, bounds ``||∇_θ Φ(θ; X)||``."""
    check_bound_args("beta2", params, R, T)
    H, T0, _ = params.U.shape
    T = T0 if T is None else T
    return jnp.sqrt(T * R**2 + R**6 * jnp.sum(l21_norms(params.U) ** 2) / H)


def beta3(params, R, T: int | None = None) -> jnp.ndarray:
    """``β₃(θ_h) = R³ √T + 2 R⁵ ||U_h||_{2,1}`` per head, [H]; bounds ``||∇²_{θ_h} f||_op``."""
    check_bound_args("beta3", params, R, T)
    T = params.U.shape[1] if T is None else T
    return R**3 * jnp.sqrt(T) + 2 * R**5 * l21_norms(params.U)


def kappa_bound(params, R, T: int | None = None) -> jnp.ndarray:
    """``κ(θ) = max_h β₃(θ_h)``."""
    check_bound_args("kappa_bound", params, R, T)
    return jnp.max(beta3(params, R, T))


def smoothness_coefficient(params, R, T: int | None = None) -> jnp.ndarray:
    """``β₂² + κ/√H``: ``λ_max(∇²L̂) <= (β₂² + κ/√H) L̂``."""
    H = params.U.shape[0]
    return beta2(params, R, T) ** 2 + kappa_bound(params, R, T) / jnp.sqrt(H)
