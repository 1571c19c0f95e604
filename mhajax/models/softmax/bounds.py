"""Closed-form bounds for softmax heads (docs/theory.md §6).

With ``R`` the largest token norm of the data and ``||U_h||_{2,1} = Σ_t ||u_t||``:

* output bound     ``|Φ(θ;X)| <= (R/√H) Σ_h ||U_h||_{2,1}``
* gradient bound   ``||∇_θ Φ||² <= β₂² = T R² + (R⁶/H) Σ_h ||U_h||²_{2,1}``
* Hessian bound    ``||∇²_{θ_h} f||_op <= β₃(θ_h) = R³ √T + 2 R⁵ ||U_h||_{2,1}``
* ``κ(θ) = max_h β₃(θ_h)``; weak convexity ``λ_min(∇²L̂) >= -(κ/√H) L̂``;
  smoothness ``λ_max(∇²L̂) <= (β₂² + κ/√H) L̂``.

κ depends on θ only through the readouts U_h, never through W_h or H.
All functions accept ``MHAParams`` with ``U [H, T, d]``.
"""
from __future__ import annotations

import jax.numpy as jnp


def l21_norms(U) -> jnp.ndarray:
    """``||U_h||_{2,1} = Σ_t ||u_{h,t}||₂`` for ``U [H, T, d]`` -> [H]."""
    return jnp.sum(jnp.linalg.norm(U, axis=-1), axis=-1)


def output_bound(params, R) -> jnp.ndarray:
    """``(R/√H) Σ_h ||U_h||_{2,1}``, a bound on ``|Φ(θ; X)|``."""
    H = params.U.shape[0]
    return R * jnp.sum(l21_norms(params.U)) / jnp.sqrt(H)


def beta2(params, R, T: int | None = None) -> jnp.ndarray:
    """``β₂(θ) = sqrt(T R² + (R⁶/H) Σ_h ||U_h||²_{2,1})``, bounds ``||∇_θ Φ(θ; X)||``."""
    H, T0, _ = params.U.shape
    T = T0 if T is None else T
    return jnp.sqrt(T * R**2 + R**6 * jnp.sum(l21_norms(params.U) ** 2) / H)


def beta3(params, R, T: int | None = None) -> jnp.ndarray:
    """``β₃(θ_h) = R³ √T + 2 R⁵ ||U_h||_{2,1}`` per head, [H]; bounds ``||∇²_{θ_h} f||_op``."""
    T = params.U.shape[1] if T is None else T
    return R**3 * jnp.sqrt(T) + 2 * R**5 * l21_norms(params.U)


def kappa_bound(params, R, T: int | None = None) -> jnp.ndarray:
    """``κ(θ) = max_h β₃(θ_h)``."""
    return jnp.max(beta3(params, R, T))


def smoothness_coefficient(params, R, T: int | None = None) -> jnp.ndarray:
    """``β₂² + κ/√H``: ``λ_max(∇²L̂) <= (β₂² + κ/√H) L̂``."""
    H = params.U.shape[0]
    return beta2(params, R, T) ** 2 + kappa_bound(params, R, T) / jnp.sqrt(H)
