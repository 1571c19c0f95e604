"""Head-masked padding: one compiled program for every number of heads.

A model with ``H`` active heads is embedded in ``H_max >= H`` padded heads with
a 0/1 mask ``m_h`` (``m_h = 1`` for ``h < H``)::

    Φ_m(θ; X) = (1/√H) Σ_{h < H_max} m_h f(θ_h; X)
              = (1/√H_max) Σ_h c_h f(θ_h; X),     c_h = m_h √(H_max / H).

The per-head scale ``c_h`` is stored in the parameters (:class:`MaskedParams`,
``scale [H_max]``) but enters the model through ``lax.stop_gradient``: its
gradient is exactly zero, so plain GD (:func:`mhajax.train.train`) never moves
it, and a masked head (``c_h = 0``) gets the gradient ``0 · ∇f = 0``: it stays
at its initial value. The active heads then follow the same GD trajectory as
the unpadded ``H``-head model, up to floating-point rounding of the scale
(tested to ~1e-12). Since ``c`` is data, runs with different H share one
shape, so a batch of (H, seed) runs is one ``vmap`` and one compile.

Only the trajectory is shared: bounds such as κ(θ) must be taken over the
active heads (:func:`unpad`).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .errors import InputError
from .model import HeadModel, MHAParams, init_params, softmax_head


class MaskedParams(NamedTuple):
    """``U [H_max, T, d]``, ``W [H_max, d, d]``, ``scale [H_max]`` (``c_h``, never trained)."""

    U: jax.Array
    W: jax.Array
    scale: jax.Array


def head_scale(active: int, total: int, dtype=None) -> jax.Array:
    """``c [total]``: ``√(total/active)`` on the first ``active`` heads, 0 after."""
    if not 1 <= active <= total:
        raise InputError(f"active heads must lie in 1..{total}, got {active!r}")
    dtype = dtype or jnp.result_type(float)
    c = jnp.sqrt(jnp.asarray(total / active, dtype))
    return jnp.where(jnp.arange(total) < active, c, jnp.zeros((), dtype)).astype(dtype)


def masked_head(theta_h: MaskedParams, X: jax.Array) -> jax.Array:
    """``c_h f(θ_h; X)`` with ``c_h`` held constant (``stop_gradient``)."""
    f = softmax_head(MHAParams(theta_h.U, theta_h.W), X)
    return jax.lax.stop_gradient(theta_h.scale) * f


def pad(params: MHAParams, total: int) -> MaskedParams:
    """Embed H active heads (leaves ``[H, ...]`` or batched ``[S, H, ...]``)
    into ``total`` heads; the padding heads are zero and masked."""
    batched = params.U.ndim == 4
    ax = 1 if batched else 0
    H = params.U.shape[ax]
    if total < H:
        raise InputError(f"cannot pad {H} heads into {total}")
    widths = [(0, 0)] * params.U.ndim
    widths[ax] = (0, total - H)
    U = jnp.pad(params.U, widths)
    wW = [(0, 0)] * params.W.ndim
    wW[ax] = (0, total - H)
    W = jnp.pad(params.W, wW)
    c = head_scale(H, total, params.U.dtype)
    if batched:
        c = jnp.broadcast_to(c, (params.U.shape[0], total))
    return MaskedParams(U, W, c)


def unpad(params: MaskedParams, active: int) -> MHAParams:
    """The first ``active`` heads as plain :class:`MHAParams` (head axis first, or
    second for batched leaves ``[S, H_max, ...]``)."""
    if params.U.ndim == 4:
        return MHAParams(params.U[:, :active], params.W[:, :active])
    return MHAParams(params.U[:active], params.W[:active])


def _init(key, heads, tokens, dim, **kw):
    return pad(init_params(key, heads, tokens, dim, **kw), heads)


#: the softmax head with a frozen per-head scale; use with :func:`pad`.
MASKED = HeadModel("softmax-masked", masked_head, _init)
