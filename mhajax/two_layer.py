"""A two-layer multi-head attention model whose head blocks do *not* decouple.

With ``A_h(Z) = softmax(Z W Zᵀ)`` row-wise and X [T, d]::

    Y(X)    = X + (1/H) Σ_g softmax(X W1_g Xᵀ) X                 (layer 1, residual, mean over heads)
    Φ(θ; X) = (1/√H) Σ_h <U_h, softmax(Y W2_h Yᵀ) Y>            (layer 2, the paper's head on Y)

Parameters ``TwoLayerParams(U [H, T, d], W1 [H, d, d], W2 [H, d, d])`` are stored per
head (head axis first, like a HeadModel's), but every second-layer head reads ``Y``,
which depends on *every* head's ``W1_g``: ``∂²Φ/∂θ_g∂θ_h ≠ 0`` for ``g ≠ h``. So Φ is not
``H^{-1/2} Σ_h f(θ_h; X)``, :class:`~mhajax.model.HeadModel` cannot express it, and

* the block bound of SPEC §3 (``λ_min(∇²L̂) >= min_h λ_min(B_h)``) **does not apply** —
  the data term is no longer block-diagonal;
* neither do κ_mid, κ_Φ (per-head Hessian norms) or a closed-form κ(θ) (none is derived).

Its κ chain therefore has a single member, ``κ_emp = −√H λ_min(∇²L̂)/L̂``, measured
matrix-free: block Lanczos (:func:`mhajax.krylov.extreme_eigs`) on
``jax.linearize`` of the gradient. The ``1/H`` on layer 1 keeps ``||y_t|| <= 2R`` for every H.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree

from .krylov import extreme_eigs
from .linalg import norm
from .losses import LOGISTIC, Loss
from .train import Trajectory, checkpoint_steps
from .validate import positive_float, positive_int


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


def two_layer_risk(params, X, y, loss: Loss = LOGISTIC) -> jax.Array:
    """``L̂(θ) = (1/n) Σ_i ℓ(y_i Φ(θ; X_i))``."""
    return jnp.mean(loss.value(y * two_layer_phi(params, X)))


def gd_two_layer(params0, X, y, lr, *, steps: int, every: int, loss: Loss = LOGISTIC) -> Trajectory:
    """Full-batch GD ``θ ← θ − η∇L̂`` (``optax.sgd``), kept at :func:`mhajax.train.checkpoint_steps`;
    the same :class:`~mhajax.train.Trajectory` as :func:`mhajax.train.gd_trajectory`. Pure."""
    opt = optax.sgd(lr)
    vg = jax.value_and_grad(lambda th: two_layer_risk(th, X, y, loss))

    def finite(th, L):
        return jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in jax.tree_util.tree_leaves(th)])) & jnp.isfinite(L)

    def step(carry, _):
        th, st = carry
        L, g = vg(th)
        upd, st = opt.update(g, st, th)
        return (optax.apply_updates(th, upd), st), (L, finite(th, L))

    ck = checkpoint_steps(steps, every)
    carry = (params0, opt.init(params0))
    kept, losses, oks = [params0], [], []
    prev = 0
    for c in ck[1:]:
        carry, (L, ok) = jax.lax.scan(step, carry, None, length=c - prev)
        kept.append(carry[0])
        losses.append(L)
        oks.append(ok)
        prev = c
    L_last = two_layer_risk(carry[0], X, y, loss)
    losses.append(L_last[None])
    oks.append(finite(carry[0], L_last)[None])
    params = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *kept)
    return Trajectory(jnp.asarray(ck), params, jnp.concatenate(losses), jnp.concatenate(oks))


@partial(jax.jit, static_argnames=("steps", "every", "loss"))
def train_two_layer(params0, X, y, lr, *, steps: int, every: int, loss: Loss = LOGISTIC) -> Trajectory:
    """:func:`gd_two_layer` ``vmap``-ed over a leading batch axis (as :func:`mhajax.train.train`)."""
    lr = jnp.broadcast_to(jnp.asarray(lr, X.dtype), (X.shape[0],))
    return jax.vmap(partial(gd_two_layer, steps=steps, every=every, loss=loss))(params0, X, y, lr)


def two_layer_chain_raw(params, X, y, key, *, loss: Loss = LOGISTIC, num_steps: int = 64,
                        max_cycles: int = 20, rtol: float | None = None) -> dict:
    """The raw record :func:`mhajax.chain.finalize` reads, for the two-layer model: λ_min and
    λ_max of ``∇²L̂`` by Lanczos on the linearized gradient (matrix-free, ``P = H(Td + 2d²)``)
    with their true residuals, ``L̂`` and ``||∇L̂||``; the block bound, κ_mid, κ_Φ, κ(θ) and
    β₂ are NaN (they do not apply), so ``finalize`` reports κ_emp alone. Pure, traceable."""
    z0, unravel = ravel_pytree(params)

    def risk(z):
        return two_layer_risk(unravel(z), X, y, loss)

    L, g = jax.value_and_grad(risk)(z0)
    _, lin = jax.linearize(jax.grad(risk), z0)
    r = extreme_eigs(lin, z0.shape[0], key, num_steps=num_steps, max_cycles=max_cycles, rtol=rtol,
                     dtype=z0.dtype)
    nan = jnp.asarray(jnp.nan, z0.dtype)
    return dict(lambda_min=r.lambda_min, lambda_max=r.lambda_max, residual_min=r.residual_min,
                residual_max=r.residual_max, num_matvecs=r.num_matvecs, eig_converged=r.converged,
                eig_tol=r.tol, lambda_min_block=nan, lambda_max_upper=nan, loss=L,
                grad_norm=norm(g), kappa_bound=nan, beta2=nan, mid_sum=nan, kappa_phi=nan)


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


__all__ = ["TwoLayerParams", "first_layer", "two_layer_phi", "init_two_layer", "two_layer_risk",
           "gd_two_layer", "train_two_layer", "two_layer_chain_raw", "cross_head_coupling"]
