"""A two-layer multi-head attention model whose head blocks do *not* decouple.

With ``A_h(Z) = softmax(Z W Zᵀ)`` row-wise and X [T, d]::

    Y(X)    = X + (1/H) Σ_g softmax(X W1_g Xᵀ) X                 (layer 1, residual, mean over heads)
    Φ(θ; X) = (1/√H) Σ_h <U_h, softmax(Y W2_h Yᵀ) Y>            (layer 2, the paper's head on Y)

Parameters ``TwoLayerParams(U [H, T, d], W1 [H, d, d], W2 [H, d, d])`` are stored per
head (head axis first, like a HeadModel's), but every second-layer head reads ``Y``,
which depends on *every* head's ``W1_g``: ``∂²Φ/∂θ_g∂θ_h ≠ 0`` for ``g ≠ h``. So Φ is not
``H^{-1/2} Σ_h f(θ_h; X)``, :class:`~mhajax.model.HeadModel` cannot express it, and

* the block bound of docs/theory.md §3 (``λ_min(∇²L̂) >= min_h λ_min(B_h)``) **does not apply** —
  the data term is no longer block-diagonal;
* neither do κ_mid, κ_Φ (per-head Hessian norms) or a closed-form κ(θ) (none is derived).

Its κ chain therefore has a single member, ``κ_emp = −√H λ_min(∇²L̂)/L̂``, measured
matrix-free (:func:`mhajax.curvature.spectrum.extremes` on ``jax.linearize`` of the
gradient). It is the registered :class:`~mhajax.models.base.CoupledModel` :data:`TWO_LAYER`,
trained by the same GD as every other model (:mod:`mhajax.train`). The ``1/H`` on layer 1 keeps ``||y_t|| <= 2R`` for every H.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from mhajax.linalg import norm
from mhajax.models.base import CoupledModel, register
from mhajax.validate import positive_float, positive_int


class TwoLayerParams(NamedTuple):
    """``U [H, T, d]`` readouts, ``W1 [H, d, d]`` layer-1 and ``W2 [H, d, d]`` layer-2 key-query."""

    U: jax.Array
    W1: jax.Array
    W2: jax.Array


def first_layer(W1: jax.Array, X: jax.Array) -> jax.Array:
    """``Y = X + (1/H) Σ_g softmax(X W1_g Xᵀ) X`` for ``W1 [H, d, d]``, ``X [T, d]`` -> ``[T, d]``."""
    S = jnp.einsum("ta,gab,jb->gtj", X, W1, X)
    return X + jnp.mean(jax.nn.softmax(S, axis=-1), axis=0) @ X


def _phi_one(params: TwoLayerParams, X: jax.Array) -> jax.Array:
    Y = first_layer(params.W1, X)
    S = jnp.einsum("ta,hab,jb->htj", Y, params.W2, Y)
    out = jnp.einsum("htd,htj,jd->h", params.U, jax.nn.softmax(S, axis=-1), Y)
    return jnp.sum(out) / jnp.sqrt(params.U.shape[0])


def two_layer_phi(params: TwoLayerParams, X: jax.Array) -> jax.Array:
    """``Φ(θ; X)``: a scalar for ``X [T, d]``, a vector ``[n]`` for ``X [n, T, d]``."""
    if X.ndim == 2:
        return _phi_one(params, X)
    return jax.vmap(_phi_one, in_axes=(None, 0))(params, X)


def init_two_layer(key, heads: int, tokens: int, dim: int, *, u_scale: float = 1.0,
                   w_scale: float = 0.0, dtype=None) -> TwoLayerParams:
    """``U ~ N(0, u²)``, ``W1, W2 ~ N(0, w²/d)`` (independent)."""
    positive_int("heads", heads)
    positive_int("tokens", tokens)
    positive_int("dim", dim)
    positive_float("u_scale", u_scale, allow_zero=True)
    positive_float("w_scale", w_scale, allow_zero=True)
    dtype = dtype or jnp.result_type(float)
    ku, k1, k2 = jax.random.split(key, 3)
    s = w_scale / jnp.sqrt(dim)
    return TwoLayerParams(u_scale * jax.random.normal(ku, (heads, tokens, dim), dtype),
                          s * jax.random.normal(k1, (heads, dim, dim), dtype),
                          s * jax.random.normal(k2, (heads, dim, dim), dtype))


@partial(jax.jit, static_argnames=("probes",))
def cross_head_coupling(params, X, key, probes: int = 2) -> jax.Array:
    """How far ``∇²Φ`` is from block-diagonal over heads: the largest
    ``||(∇²Φ(θ; X_i) v)_{h≠g}|| / ||∇²Φ(θ; X_i) v||`` over samples and random probes ``v``
    supported on one head g. 0 for any HeadModel; > 0 here (for H >= 2)."""
    H = params.U.shape[0]
    z0, unravel = ravel_pytree(params)
    # the flat layout of ravel_pytree is leaf-major: U, W1, W2, each [H, ...]
    head_of = jnp.concatenate([jnp.repeat(jnp.arange(H), a[0].size)
                               for a in jax.tree_util.tree_leaves(params)])
    g = jax.grad(lambda z, x: _phi_one(unravel(z), x))
    out = []
    for k in range(probes * H):
        gh = k % H
        v = jax.random.normal(jax.random.fold_in(key, k), z0.shape, z0.dtype) * (head_of == gh)
        hv = jax.vmap(lambda x: jax.jvp(lambda z: g(z, x), (z0,), (v,))[1])(X)   # [n, P]
        off = jnp.where(head_of[None] == gh, 0.0, hv)
        out.append(jnp.max(norm(off, axis=1) / jnp.maximum(norm(hv, axis=1), jnp.finfo(hv.dtype).tiny)))
    return jnp.max(jnp.stack(out))


#: what is (not) measured for the coupled model.
COUPLED_NOTE = ("coupled heads: block bound, κ_mid, κ_Φ and closed-form κ do not apply; "
                "κ_emp by Lanczos on the linearized gradient")

#: the registered coupled model: ``Φ(θ; X)`` of :func:`two_layer_phi`.
TWO_LAYER = register(CoupledModel("two-layer", _phi_one, init_two_layer, note=COUPLED_NOTE))

__all__ = ["TwoLayerParams", "TWO_LAYER", "COUPLED_NOTE", "first_layer", "two_layer_phi",
           "init_two_layer", "cross_head_coupling"]
