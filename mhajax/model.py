"""Single-layer multi-head attention with NTK scaling (SPEC §1).

For one head with parameters ``θ_h = (U_h [T, d], W_h [d, d])`` and input
``X [T, d]``::

    f(θ_h; X) = <U_h, softmax(X W_h Xᵀ) X>_F = Σ_t v_tᵀ a_t,
    a_t = softmax(s_t),  s_t[j] = x_tᵀ W_h x_j,  v_t[j] = x_jᵀ u_t,

and the model is ``Φ(θ; X) = H^{-1/2} Σ_h f(θ_h; X)``.

Parameters are pytrees whose every leaf carries the head axis first, so the
same code serves any per-head function (see :class:`HeadModel`): the paper's
softmax head is :data:`SOFTMAX`. Heads share no parameters, which is what makes
the Hessian of Φ block-diagonal over heads (SPEC §3).
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from .validate import positive_float, positive_int


class MHAParams(NamedTuple):
    """Parameters of H softmax heads: ``U [H, T, d]`` (readout), ``W [H, d, d]`` (key-query)."""

    U: jax.Array
    W: jax.Array


class HeadModel(NamedTuple):
    """A per-head model ``Φ(θ; X) = H^{-1/2} Σ_h head_fn(θ_h, X)``.

    ``head_fn(θ_h, X[T, d]) -> scalar`` is pure; ``init(key, heads, tokens, dim, **kw)``
    returns stacked per-head parameters; ``kappa`` (optional) maps
    ``(params, R, T) -> κ(θ)``, a closed-form bound on ``max_h ||∇²_{θ_h} f||_op``
    valid for every input whose tokens have norm <= R; ``beta2`` (optional)
    maps ``(params, R, T) -> β₂(θ)`` bounding ``||∇_θ Φ||``;
    ``weighted_hessian`` (optional) maps ``(θ_h, X [n,T,d], c [n])`` to
    ``Σ_i c_i ∇²_{θ_h} f(θ_h; X_i)`` [p, p] in the flat order of
    :func:`ravel_heads` — without it, ``jax.hessian`` is used;
    ``reduced_hessian`` (optional) maps ``(θ_h, x [T, d])`` to a symmetric
    matrix with the same nonzero eigenvalues as ``∇²_{θ_h} f(θ_h; x)``, used
    for exact per-sample Hessian norms when it is smaller than p×p.
    """

    name: str
    head_fn: Callable[[Any, jax.Array], jax.Array]
    init: Callable[..., Any]
    kappa: Optional[Callable[[Any, jax.Array, int], jax.Array]] = None
    beta2: Optional[Callable[[Any, jax.Array, int], jax.Array]] = None
    weighted_hessian: Optional[Callable[[Any, jax.Array, jax.Array], jax.Array]] = None
    reduced_hessian: Optional[Callable[[Any, jax.Array], jax.Array]] = None


def softmax_head(theta_h: MHAParams, X: jax.Array) -> jax.Array:
    """``f(θ_h; X) = <U_h, softmax(X W_h Xᵀ) X>`` for one head; ``X [T, d]`` -> scalar."""
    S = X @ theta_h.W @ X.T  # [T, T], S[t, j] = x_tᵀ W x_j
    A = jax.nn.softmax(S, axis=-1)
    return jnp.sum(theta_h.U * (A @ X))


def init_params(key, heads: int, tokens: int, dim: int, *, u_scale: float = 1.0,
                w_scale: float = 0.0, dtype=None) -> MHAParams:
    """Random parameters: ``U ~ N(0, u_scale²)`` entrywise, ``W ~ N(0, (w_scale²/d))``.

    The default ``w_scale = 0`` starts every head at uniform attention (W = 0),
    so the initial model is mean pooling followed by random readouts.
    Returns ``MHAParams(U [H, T, d], W [H, d, d])``.
    """
    heads = positive_int("heads", heads)
    tokens = positive_int("tokens", tokens)
    dim = positive_int("dim", dim)
    u_scale = positive_float("u_scale", u_scale, allow_zero=True)
    w_scale = positive_float("w_scale", w_scale, allow_zero=True)
    dtype = dtype or jnp.result_type(float)
    ku, kw = jax.random.split(key)
    U = u_scale * jax.random.normal(ku, (heads, tokens, dim), dtype)
    W = (w_scale / jnp.sqrt(dim)) * jax.random.normal(kw, (heads, dim, dim), dtype)
    return MHAParams(U, W)


def _softmax_kappa(params, R, T):
    from .bounds import kappa_bound
    return kappa_bound(params, R, T)


def _softmax_beta2(params, R, T):
    from .bounds import beta2
    return beta2(params, R, T)


def _softmax_weighted_hessian(theta_h, X, c):
    from .softmax_hessian import weighted_head_hessian
    return weighted_head_hessian(theta_h, X, c)


def _softmax_reduced_hessian(theta_h, x):
    from .softmax_hessian import reduced_head_hessian
    return reduced_head_hessian(theta_h, x)


SOFTMAX = HeadModel("softmax", softmax_head, init_params, _softmax_kappa, _softmax_beta2,
                    _softmax_weighted_hessian, _softmax_reduced_hessian)


def num_heads(params) -> int:
    """H, the common leading axis of every leaf."""
    return jax.tree_util.tree_leaves(params)[0].shape[0]


def head_outputs(params, X: jax.Array, model: HeadModel = SOFTMAX) -> jax.Array:
    """Per-head outputs ``f(θ_h; X)``: ``[H]`` for X [T, d], ``[n, H]`` for X [n, T, d]."""
    per_head = jax.vmap(model.head_fn, in_axes=(0, None))
    if X.ndim == 2:
        return per_head(params, X)
    return jax.vmap(per_head, in_axes=(None, 0))(params, X)


def mha(params, X: jax.Array, model: HeadModel = SOFTMAX) -> jax.Array:
    """``Φ(θ; X) = H^{-1/2} Σ_h f(θ_h; X)``: a scalar for X [T, d], a vector [n] for X [n, T, d]."""
    H = num_heads(params)
    return jnp.sum(head_outputs(params, X, model), axis=-1) / jnp.sqrt(H)


# ---------------------------------------------------------------------------
# Per-head flat layout: θ <-> Z [H, p], with head h's parameters contiguous.
# This ordering makes the Hessian of Φ block-diagonal with H blocks of p x p.
# ---------------------------------------------------------------------------

def head_slice(params, h: int = 0):
    """Parameters of head ``h`` (leaves without the head axis)."""
    return jax.tree_util.tree_map(lambda a: a[h], params)


def ravel_heads(params):
    """Flatten per head: returns ``(Z [H, p], unravel_head)`` where
    ``unravel_head(z [p])`` rebuilds one head's parameters."""
    _, unravel_head = ravel_pytree(head_slice(params))
    Z = jax.vmap(lambda th: ravel_pytree(th)[0])(params)
    return Z, unravel_head


def unravel_heads(Z: jax.Array, unravel_head) -> Any:
    """Inverse of :func:`ravel_heads`: ``Z [H, p]`` -> stacked parameters."""
    return jax.vmap(unravel_head)(Z)


def params_per_head(params) -> int:
    """p, the number of parameters of one head (T·d + d² for softmax heads)."""
    return sum(int(l[0].size) for l in jax.tree_util.tree_leaves(params))
