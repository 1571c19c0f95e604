"""The paper's softmax head (docs/theory.md §1).

For one head with parameters ``θ_h = (U_h [T, d], W_h [d, d])`` and input ``X [T, d]``::

    f(θ_h; X) = <U_h, softmax(X W_h Xᵀ) X>_F = Σ_t v_tᵀ a_t,
    a_t = softmax(s_t),  s_t[j] = x_tᵀ W_h x_j,  v_t[j] = x_jᵀ u_t,

and the model is ``Φ(θ; X) = H^{-1/2} Σ_h f(θ_h; X)`` (:func:`mhajax.models.base.mha`).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from mhajax.models.base import MHAParams
from mhajax.validate import checked_key, positive_float, positive_int

def softmax_head(theta_h: MHAParams, X: jax.Array) -> jax.Array:
    """``f(θ_h; X) = <U_h, softmax(X W_h Xᵀ) X>`` for one head; ``X [T, d]`` -> scalar."""
    S = X @ theta_h.W @ X.T  # [T, T], S[t, j] = x_tᵀ W x_j
    A = jax.nn.softmax(S, axis=-1)
    return jnp.sum(theta_h.U * (A @ X))


def check_init_args(heads, tokens, dim, u_scale, w_scale) -> tuple:
    """Validate the knobs of :func:`softmax_init` (:class:`~mhajax.errors.InputError`); returns
    ``(H, T, d, u_scale, w_scale)``."""
    return (positive_int("heads", heads), positive_int("tokens", tokens), positive_int("dim", dim),
            positive_float("u_scale", u_scale, allow_zero=True), positive_float("w_scale", w_scale, allow_zero=True))


def init_params(key, heads: int, tokens: int, dim: int, *, u_scale: float = 1.0,
                w_scale: float = 0.0, dtype=None) -> MHAParams:
    """:func:`softmax_init` (same arguments), the package's name for it; the public entry
    :func:`mhajax.api.init_params` first checks ``U [H, T, d]`` and ``W [H, d, d]`` against memory."""
    key = checked_key("init_params", key)
    return softmax_init(key, heads, tokens, dim, u_scale=u_scale, w_scale=w_scale, dtype=dtype)


def softmax_init(key, heads: int, tokens: int, dim: int, *, u_scale: float = 1.0,
                 w_scale: float = 0.0, dtype=None) -> MHAParams:
    """Random parameters: ``U ~ N(0, u_scale²)`` entrywise, ``W ~ N(0, (w_scale²/d))``.

    The default ``w_scale = 0`` starts every head at uniform attention (W = 0),
    so the initial model is mean pooling followed by random readouts.
    Returns ``MHAParams(U [H, T, d], W [H, d, d])``. The model's ``init`` (:data:`SOFTMAX`),
    traceable; :func:`mhajax.api.init_params` is the public entry, sizes checked against memory.
    """
    heads, tokens, dim, u_scale, w_scale = check_init_args(heads, tokens, dim, u_scale, w_scale)
    dtype = dtype or jnp.result_type(float)
    ku, kw = jax.random.split(key)
    U = u_scale * jax.random.normal(ku, (heads, tokens, dim), dtype)
    W = (w_scale / jnp.sqrt(dim)) * jax.random.normal(kw, (heads, dim, dim), dtype)
    return MHAParams(U, W)
