"""Model kinds: per-head models and coupled models, and the per-head flat layout.

A :class:`HeadModel` is ``Φ(θ; X) = H^{-1/2} Σ_h f(θ_h; X)`` for a pure per-head
function ``f(θ_h; X [T, d]) -> scalar``. Parameters are pytrees whose every leaf
carries the head axis first; heads share no parameters, which is what makes the
Hessian of Φ block-diagonal over heads (docs/theory.md §3).

A :class:`CoupledModel` gives ``Φ(θ; X)`` whole: its heads share inputs (e.g. a
second layer reading every first-layer head), so no block structure exists and
only matrix-free curvature applies.

:func:`output` evaluates either kind; :func:`is_coupled` tells them apart.
The flat layout ``θ <-> Z [H, p]`` (:func:`ravel_heads`) keeps head h's ``p``
parameters contiguous, so ``∇²Φ`` is ``blockdiag(p × p)`` in it.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from mhajax.errors import InputError

class MHAParams(NamedTuple):
    """Parameters of H softmax heads: ``U [H, T, d]`` (readout), ``W [H, d, d]`` (key-query)."""

    U: jax.Array
    W: jax.Array


class HeadModel(NamedTuple):
    """A per-head model ``Φ(θ; X) = H^{-1/2} Σ_h head_fn(θ_h, X)``.

    ``head_fn(θ_h, X [T, d]) -> scalar`` is pure; ``init(key, heads, tokens, dim, **kw)``
    returns stacked per-head parameters (leaves ``[H, ...]``). Optional closed forms, each
    valid for every input whose tokens have norm <= R:

    * ``kappa(params, R, T) -> κ(θ)`` bounds ``max_h ||∇²_{θ_h} f||_op``;
    * ``beta2(params, R, T) -> β₂(θ)`` bounds ``||∇_θ Φ||``;
    * ``weighted_hessian(θ_h, X [n, T, d], c [n]) -> Σ_i c_i ∇²_{θ_h} f(θ_h; X_i)`` [p, p]
      in the flat order of :func:`ravel_heads` (without it, ``jax.hessian`` is used);
    * ``reduced_hessian(θ_h, x [T, d])`` -> a symmetric matrix with the nonzero spectrum
      of ``∇²_{θ_h} f(θ_h; x)`` (exact per-sample norms when smaller than p × p);
    * ``beta3(params, R, T) -> [H]`` the per-head bounds whose maximum is κ;
    * ``note``: one line on where the closed form comes from.
    """

    name: str
    head_fn: Callable[[Any, jax.Array], jax.Array]
    init: Callable[..., Any]
    kappa: Optional[Callable[[Any, jax.Array, int], jax.Array]] = None
    beta2: Optional[Callable[[Any, jax.Array, int], jax.Array]] = None
    weighted_hessian: Optional[Callable[[Any, jax.Array, jax.Array], jax.Array]] = None
    reduced_hessian: Optional[Callable[[Any, jax.Array], jax.Array]] = None
    beta3: Optional[Callable[[Any, jax.Array, int], jax.Array]] = None
    note: str = ""


class CoupledModel(NamedTuple):
    """A multi-head model whose heads are coupled: ``phi(θ, X [T, d]) -> scalar`` is the
    whole model. ``init(key, heads, tokens, dim, **kw)`` returns parameters whose leaves
    carry the head axis first (so H is readable), but ``∇²Φ`` is not block-diagonal over
    heads: no head blocks, no per-head Hessians, no closed-form κ (``note`` says so)."""

    name: str
    phi: Callable[[Any, jax.Array], jax.Array]
    init: Callable[..., Any]
    note: str = ""


def is_coupled(model) -> bool:
    """Whether ``model`` is a :class:`CoupledModel` (no head-block structure)."""
    return isinstance(model, CoupledModel)


# ---------------------------------------------------------------------------
# The registry of built-in models: one way in (:func:`register`).
# ---------------------------------------------------------------------------

_REGISTRY: dict = {}


def model_key(name) -> str:
    """Normalized model name: lower case, ``_`` as ``-`` (``two_layer`` -> ``two-layer``)."""
    return str(name).strip().lower().replace("_", "-")


def register(model):
    """Add a built-in model to the registry under ``model.name``; returns it unchanged."""
    _REGISTRY[model_key(model.name)] = model
    return model


def model_names(*, coupled: bool | None = None) -> tuple:
    """Registered model names in registration order; ``coupled=False`` per-head only,
    ``True`` coupled only, ``None`` all."""
    return tuple(k for k, m in _REGISTRY.items() if coupled is None or is_coupled(m) == coupled)


def get_model(model):
    """The registered model called ``model`` (a :class:`HeadModel` or :class:`CoupledModel`);
    a model object is returned as it is. Raises :class:`InputError` for an unknown name."""
    if isinstance(model, (HeadModel, CoupledModel)):
        return model
    key = model_key(model)
    if key not in _REGISTRY:
        raise InputError(f"unknown model {model!r}; choose from {', '.join(_REGISTRY)}")
    return _REGISTRY[key]


def num_heads(params) -> int:
    """H, the common leading axis of every leaf."""
    return jax.tree_util.tree_leaves(params)[0].shape[0]


def head_outputs(params, X: jax.Array, model="softmax") -> jax.Array:
    """Per-head outputs ``f(θ_h; X)``: ``[H]`` for X [T, d], ``[n, H]`` for X [n, T, d]."""
    model = get_model(model)
    per_head = jax.vmap(model.head_fn, in_axes=(0, None))
    if X.ndim == 2:
        return per_head(params, X)
    return jax.vmap(per_head, in_axes=(None, 0))(params, X)


def mha(params, X: jax.Array, model="softmax") -> jax.Array:
    """``Φ(θ; X) = H^{-1/2} Σ_h f(θ_h; X)``: a scalar for X [T, d], a vector [n] for X [n, T, d].
    ``model``: a :class:`HeadModel` or a registered name (default the paper's softmax head)."""
    H = num_heads(params)
    return jnp.sum(head_outputs(params, X, model), axis=-1) / jnp.sqrt(H)


def output(params, X: jax.Array, model="softmax") -> jax.Array:
    """``Φ(θ; X)`` of either model kind: a scalar for ``X [T, d]``, ``[n]`` for ``X [n, T, d]``."""
    model = get_model(model)
    if is_coupled(model):
        return model.phi(params, X) if X.ndim == 2 else jax.vmap(model.phi, in_axes=(None, 0))(params, X)
    return mha(params, X, model)


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


@lru_cache(maxsize=None)
def head_size(model, tokens: int, dim: int) -> int:
    """The parameters per head p of ``model`` (or its name) at T tokens of dimension d: the
    entries of ``model.init(key, 1, T, d)``, from shapes only (``jax.eval_shape``: nothing is drawn)."""
    model = get_model(model)
    shapes = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), 1, tokens, dim))
    return sum(math.prod(leaf.shape[1:]) for leaf in jax.tree_util.tree_leaves(shapes))
