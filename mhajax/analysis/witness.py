"""An explicit NTK-separability witness for the tokenized mixture (docs/theory.md §11, §9).

The NTK features at θ are ``g_i = ∇_θ Φ(θ; X_i)``. Take the unit direction
``w`` that moves only the readouts, every row of every head along the class
direction ``e = (μ_+ − μ_−)/‖μ_+ − μ_−‖``::

    w = (ΔU, ΔW),   ΔU_{h,t} = e / √(H T),   ΔW = 0,   ‖w‖ = 1.

Φ is linear in U, so ``⟨g_i, w⟩ = (1/(H√T)) Σ_h Σ_t e·(φ(X_i W_h X_iᵀ) X_i)_t``; at
``W = 0`` (uniform attention) this is ``√T · e·x̄_i`` with ``x̄_i`` the mean token,
and ``e·x̄_i = ±(m/T) e·μ_+ + (noise)`` since ``e ⟂ ν_k`` (m relevant tokens of T;
``e·μ_+ = s/√2``, or s when antipodal). Its *witness margin*

    γ_w = min_i y_i ⟨g_i, w⟩

is a lower bound on the NTK margin ``γ = max_{‖v‖=1} min_i y_i⟨g_i, v⟩``: when
``γ_w > 0`` the data are NTK-separable at θ, certified by an explicit ``w``
(no optimization). Scale-free comparisons use ``γ̄_w = γ_w / max_i ‖g_i‖``.

The witness point of docs/theory.md §11, ``θ* = θ_0 + (log n / γ) w*`` built from ``w``:
``θ* = θ_0 + (log n / γ_w) w``. Because Φ is linear in U and ``w`` moves U
only, ``y_i Φ(θ*; X_i) = y_i Φ(θ_0; X_i) + (log n/γ_w) y_i⟨g_i, w⟩ >= y_i Φ(θ_0; X_i) + log n``
exactly, so ``L̂(θ*) <= (1/n) Σ_i ℓ(y_i Φ(θ_0; X_i) + log n)``.
All functions are pure and ``vmap``-able over seeds.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from mhajax.models.base import MHAParams, output
from mhajax.models.softmax import SOFTMAX


def class_direction(dim: int, antipodal: bool = False, dtype=None) -> jax.Array:
    """``e = (μ_+ − μ_−)/‖μ_+ − μ_−‖ [d]`` for the means of :mod:`mhajax.data`
    (``μ_+ = s e_1``, ``μ_− = s e_2`` or ``−μ_+``); independent of s."""
    dtype = dtype or jnp.result_type(float)
    e = jnp.zeros(dim, dtype).at[0].set(1.0)
    if not antipodal:
        e = e.at[1].set(-1.0) / jnp.sqrt(jnp.asarray(2.0, dtype))
    return e


def readout_direction(params: MHAParams, e: jax.Array) -> MHAParams:
    """The unit direction ``w``: ``ΔU_{h,t} = e/√(HT)``, ``ΔW = 0`` (shaped like ``params``)."""
    H, T, _ = params.U.shape
    dU = jnp.broadcast_to(e, params.U.shape) / jnp.sqrt(jnp.asarray(H * T, params.U.dtype))
    return MHAParams(dU.astype(params.U.dtype), jnp.zeros_like(params.W))


def directional_margins(params, X, y, direction) -> jax.Array:
    """``y_i ⟨∇_θ Φ(θ; X_i), w⟩`` for every sample, ``[n]`` (one ``jvp``)."""
    return y * jax.jvp(lambda th: output(th, X, SOFTMAX), (params,), (direction,))[1]


def feature_norms(params, X) -> jax.Array:
    """``‖g_i‖ = ‖∇_θ Φ(θ; X_i)‖`` for every sample, ``[n]``."""
    def norm(x):
        g = jax.grad(lambda th: output(th, x, SOFTMAX))(params)
        return jnp.sqrt(sum(jnp.sum(l ** 2) for l in jax.tree_util.tree_leaves(g)))
    return jax.lax.map(norm, X, batch_size=256)


class WitnessMargin(NamedTuple):
    """The witness margin at θ_0 (:func:`witness`): scalar arrays, ``[S]`` under ``vmap`` over seeds.

    Attributes:
      gamma: γ_w = min_i y_i ⟨g_i, w⟩, a lower bound on the NTK margin (> 0: NTK-separable).
      gamma_bar: γ̄_w = γ_w / max_i ‖g_i‖, scale-free.
      max_feature_norm: max_i ‖g_i‖.
      radius: log(n)/γ_w = ‖θ* − θ_0‖.
      init_output: max_i |Φ(θ_0; X_i)| (docs/theory.md §11 wants O(log n)).

    """

    gamma: jax.Array
    gamma_bar: jax.Array
    max_feature_norm: jax.Array
    radius: jax.Array
    init_output: jax.Array


def witness(params0, X, y, e) -> WitnessMargin:
    """Witness margin at ``params0`` (``X [n, T, d]``, ``y [n]``, ``e [d]``): γ_w, γ̄_w,
    max_i‖g_i‖, ``log(n)/γ_w`` and max_i |Φ(θ_0; X_i)| (:class:`WitnessMargin`)."""
    w = readout_direction(params0, e)
    m = directional_margins(params0, X, y, w)
    gam = jnp.min(m)
    gmax = jnp.max(feature_norms(params0, X))
    n = X.shape[0]
    return WitnessMargin(gamma=gam, gamma_bar=gam / gmax, max_feature_norm=gmax,
                         radius=jnp.log(jnp.asarray(n, X.dtype)) / gam,
                         init_output=jnp.max(jnp.abs(output(params0, X, SOFTMAX))))


def witness_point(params0, X, y, e) -> MHAParams:
    """``θ* = θ_0 + (log n / γ_w) w`` (meaningful only when γ_w > 0)."""
    w = readout_direction(params0, e)
    gam = jnp.min(directional_margins(params0, X, y, w))
    r = jnp.log(jnp.asarray(X.shape[0], X.dtype)) / gam
    return jax.tree_util.tree_map(lambda a, b: a + r * b, params0, w)
