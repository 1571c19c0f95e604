"""Head-masked padding: one compiled program for every number of heads.

A model with ``H`` active heads is embedded in ``H_max >= H`` padded heads with
a 0/1 mask ``m_h`` (``m_h = 1`` for ``h < H``)::

    Φ_m(θ; X) = (1/√H) Σ_{h < H_max} m_h f(θ_h; X)
              = (1/√H_max) Σ_h c_h f(θ_h; X),     c_h = m_h √(H_max / H).

:func:`masked` wraps any :class:`~mhajax.models.base.HeadModel` ``f``: its parameters are
:class:`MaskedParams` ``(params, scale)`` — the wrapped model's pytree (leaves
``[H_max, ...]``) and the per-head scale ``c [H_max]``. The scale enters the model
through ``lax.stop_gradient``: its gradient is exactly zero, so plain GD
(:func:`mhajax.train.train`) never moves it, and a masked head (``c_h = 0``) gets the
gradient ``0 · ∇f = 0``: it stays at its initial value (zero, from :func:`pad`). The
active heads then follow the same GD trajectory as the unpadded ``H``-head model, up
to floating-point rounding of the scale (tested to ~1e-12). Since ``c`` is data, runs
with different H share one shape, so a batch of (H, seed) runs is one ``vmap`` and one
compile. :data:`MASKED` is the paper's softmax head wrapped this way.

Only the trajectory is shared: bounds such as κ(θ) must be taken over the
active heads (:func:`unpad`); the wrapped model carries no κ or β₂.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from mhajax.errors import InputError
from mhajax.models.base import HeadModel, MHAParams
from mhajax.models.softmax import SOFTMAX


class MaskedParams(NamedTuple):
    """``params``: the wrapped model's parameters, leaves ``[H_max, ...]`` (or
    ``[S, H_max, ...]`` batched); ``scale [H_max]`` (or ``[S, H_max]``): ``c_h``, never trained."""

    params: Any
    scale: jax.Array


def head_scale(active: int, total: int, dtype=None) -> jax.Array:
    """``c [total]``: ``√(total/active)`` on the first ``active`` heads, 0 after."""
    if not 1 <= active <= total:
        raise InputError(f"active heads must lie in 1..{total}, got {active!r}")
    dtype = dtype or jnp.result_type(float)
    c = jnp.sqrt(jnp.asarray(total / active, dtype))
    return jnp.where(jnp.arange(total) < active, c, jnp.zeros((), dtype)).astype(dtype)


@lru_cache(maxsize=None)
def masked(model: HeadModel) -> HeadModel:
    """The head model ``(θ_h, c_h), X ↦ c_h f(θ_h; X)`` with ``c_h`` held constant
    (``stop_gradient``), ``f = model.head_fn``; parameters are :class:`MaskedParams`.
    Cached: the same ``model`` gives the same (hashable) object, so ``jit`` compiles once."""

    def head_fn(theta_h: MaskedParams, X: jax.Array) -> jax.Array:
        f = model.head_fn(theta_h.params, X)
        return jax.lax.stop_gradient(theta_h.scale) * f

    def init(key, heads, tokens, dim, **kw):
        return pad(model.init(key, heads, tokens, dim, **kw), heads)

    return HeadModel(f"{model.name}-masked", head_fn, init)


def _leaves(params):
    leaves = jax.tree_util.tree_leaves(params)
    if not leaves:
        raise InputError("cannot pad parameters without leaves")
    return leaves


def pad(params, total: int, *, batched: bool | None = None) -> MaskedParams:
    """Embed H active heads into ``total`` heads; the padding heads are zero and masked.

    ``params``: any head-model pytree with leaves ``[H, ...]``, or ``[S, H, ...]`` when
    ``batched``. ``batched=None`` infers it for :class:`~mhajax.models.base.MHAParams`
    (``U`` of rank 4 is batched); other pytrees must say."""
    if batched is None:
        if not isinstance(params, MHAParams):
            raise InputError("pad: pass batched=True/False for parameters other than MHAParams")
        batched = params.U.ndim == 4
    ax = 1 if batched else 0
    leaves = _leaves(params)
    H = leaves[0].shape[ax]
    if total < H:
        raise InputError(f"cannot pad {H} heads into {total}")

    def widen(a):
        widths = [(0, 0)] * a.ndim
        widths[ax] = (0, total - H)
        return jnp.pad(a, widths)

    c = head_scale(H, total, leaves[0].dtype)
    if batched:
        c = jnp.broadcast_to(c, (leaves[0].shape[0], total))
    return MaskedParams(jax.tree_util.tree_map(widen, params), c)


def unpad(params: MaskedParams, active: int):
    """The first ``active`` heads as the wrapped model's parameters (head axis first, or
    second for batched leaves ``[S, H_max, ...]``, recognized by a 2-d ``scale``)."""
    if params.scale.ndim == 2:
        return jax.tree_util.tree_map(lambda a: a[:, :active], params.params)
    return jax.tree_util.tree_map(lambda a: a[:active], params.params)


#: the softmax head with a frozen per-head scale; use with :func:`pad`.
MASKED = masked(SOFTMAX)
